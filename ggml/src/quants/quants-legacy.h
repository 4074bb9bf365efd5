// Block layouts of the 32-value "legacy" formats (q4_0, q4_1, q5_0, q5_1, q6_0) and the
// non-linear 4-bit formats (iq4_nl, iq4_xs, mxfp4), shared by the reference code in
// quants/ and the SIMD kernels in cpu/avx2 and cpu/avx512.
#pragma once

#include "quants-common.h"

#define QK4_1  32
#define QK5_0  32
#define QK5_1  32
#define QK6_0  32
#define QK4_NL 32
#define QK_MXFP4 32

// q4_0: value = (q - 8) * d; byte j holds element j (low nibble) and j + 16 (high nibble).
struct block_q4_0 {
    ggml_fp16_t d;
    uint8_t     qs[QK4_0 / 2];
};
static_assert(sizeof(block_q4_0) == 18, "q4_0 block size");

// q4_1: value = q * d + m.
struct block_q4_1 {
    ggml_fp16_t d;
    ggml_fp16_t m;
    uint8_t     qs[QK4_1 / 2];
};
static_assert(sizeof(block_q4_1) == 20, "q4_1 block size");

// q5_0: value = (q - 16) * d; the 5th bit of element j is bit j of qh (little endian u32).
struct block_q5_0 {
    ggml_fp16_t d;
    uint8_t     qh[4];
    uint8_t     qs[QK5_0 / 2];
};
static_assert(sizeof(block_q5_0) == 22, "q5_0 block size");

// q5_1: value = q * d + m, bits as q5_0.
struct block_q5_1 {
    ggml_fp16_t d;
    ggml_fp16_t m;
    uint8_t     qh[4];
    uint8_t     qs[QK5_1 / 2];
};
static_assert(sizeof(block_q5_1) == 24, "q5_1 block size");

// q6_0 (ik_llama.cpp type 133): value = (q - 32) * d. Low nibbles as q4_0; the top two bits of
// element j (j < 16) are bits 4*(j/8) .. +1 of qh[j % 8], those of element j + 16 the next two.
struct block_q6_0 {
    ggml_fp16_t d;
    uint8_t     qh[QK6_0 / 4];
    uint8_t     qs[QK6_0 / 2];
};
static_assert(sizeof(block_q6_0) == 26, "q6_0 block size");

// iq4_nl: value = d * kvalues_iq4nl[q], nibbles laid out as q4_0.
struct block_iq4_nl {
    ggml_fp16_t d;
    uint8_t     qs[QK4_NL / 2];
};
static_assert(sizeof(block_iq4_nl) == 18, "iq4_nl block size");

// iq4_xs: 8 sub-blocks of 32 with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h);
// value = d * (ls - 32) * kvalues_iq4nl[q].
struct block_iq4_xs {
    ggml_fp16_t d;
    uint16_t    scales_h;
    uint8_t     scales_l[QK_K / 64];
    uint8_t     qs[QK_K / 2];
};
static_assert(sizeof(block_iq4_xs) == 136, "iq4_xs block size");
// The signed scale (ls - 32) of 32-value sub-block ib (0..7) of an iq4_xs block.
static inline int iq4_xs_scale(const block_iq4_xs & b, int ib) {
    return (((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((b.scales_h >> 2 * ib) & 3) << 4)) - 32;
}

// mxfp4: e8m0 shared exponent; value = 2^(e - 128) * kvalues_mxfp4[q] (the table holds twice
// the e2m1 values, hence the extra halving).
struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
};
static_assert(sizeof(block_mxfp4) == 17, "mxfp4 block size");

extern const int8_t kvalues_iq4nl[16];
extern const int8_t kvalues_mxfp4[16];

// 2^(e - 128) as a float (e = 0 and 1 give subnormals).
static inline float e8m0_to_fp32_half(uint8_t e) {
    uint32_t bits = e < 2 ? (0x00200000u << e) : ((uint32_t) (e - 1) << 23);
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
}
