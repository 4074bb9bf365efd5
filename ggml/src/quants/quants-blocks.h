// Block layouts that both the CPU code and the CUDA kernels read, and the arithmetic that turns a
// block into values, written once as KILN_HD functions (__host__ __device__ under nvcc, plain
// inline functions elsewhere). Families with large tables or long decoders have their own
// headers next to this one, included below: quants-blocks-iq.h (the lattice i-quants, with
// their grids), quants-blocks-kt.h (the trellis types) and quants-blocks-interleaved.h (the
// row-interleaved layouts of ik_llama.cpp, _r4 / _r8 / _r16).
//
// Where the CPU decodes a type through its own loops (the legacy, k and ik types: they are the
// reference and are tuned for the CPU, or share an integer form with the gemm kernels),
// tests/test-quants-blocks.cpp checks on the host that every decoder here reproduces them bit for
// bit; where the CPU's to_float is the decoder here run over a row (the lattice and ternary
// types), the test checks it against the reference's golden dequantized data. Either way the GPU
// cannot disagree with the CPU on a layout without a CPU-side test failing.
//
// This header includes only ggml.h (for ggml_fp16_t and the type ids) and ggml-hd.h (KILN_HD): nvcc
// compiles it as it is.
// Its functions are static (internal linkage), like every helper the per-ISA folders include:
// an inline function with external linkage could be emitted by an AVX512 file and chosen by the
// linker for every caller (README, "Per-ISA kernel code").
#pragma once

#include "ggml-hd.h"
#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#define QK4_0  32
#define QK4_1  32
#define QK5_0  32
#define QK5_1  32
#define QK6_0  32
#define QK8_0  32
#define QK8_1  32
#define QK4_NL 32
#define QK_MXFP4 32
#define QK_K   256

// ---------------------------------------------------------------------------------------------
// Scalars

// fp16 -> f32 exactly (the device's conversion instruction, or the library's IEEE conversion).
KILN_HD float kiln_fp16_to_f32(ggml_fp16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return ggml_fp16_to_fp32(h);
#endif
}

// f32 -> fp16, round to nearest even.
KILN_HD ggml_fp16_t kiln_f32_to_fp16(float f) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(f));
#else
    return ggml_fp32_to_fp16(f);
#endif
}

KILN_HD float kiln_bf16_to_f32(ggml_bf16_t h) {
    const uint32_t bits = (uint32_t) h << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

// f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
KILN_HD ggml_bf16_t kiln_f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (ggml_bf16_t) ((bits >> 16) | 64);
    return (ggml_bf16_t) ((bits + (0x7fffu + ((bits >> 16) & 1))) >> 16);
}

// 2^(e - 128) as a float (e = 0 and 1 give subnormals): the mxfp4 block scale, halved because
// its value table holds twice the e2m1 values.
KILN_HD float e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? (0x00200000u << e) : ((uint32_t) (e - 1) << 23);
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

// ---------------------------------------------------------------------------------------------
// Value tables (facts of the formats, as llama.cpp defines them). The host copies are the ones
// quants/quants-nl.cpp exports; the device needs its own in constant memory.

#define KILN_IQ4NL_VALUES { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 }
#define KILN_MXFP4_VALUES { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 }

extern const int8_t kvalues_iq4nl[16];
extern const int8_t kvalues_mxfp4[16];

// ik_llama.cpp's grids: each type's levels followed by its shifted levels (quants-iqk.cpp)
#define KILN_IQ2NL_VALUES { -31, -13, 1, 17, -26, -8, 6, 22 }
#define KILN_IQ3NL_VALUES { -63, -40, -23, -10, 1, 13, 28, 47, -59, -36, -19, -6, 5, 17, 32, 51 }
#define KILN_IQ4K_VALUES                                                                                   \
    { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,                        \
      -123, -100, -79, -61, -45, -31, -18, -6, 5, 17, 29, 42, 57, 73, 93, 117 }
#define KILN_IQ5NL_VALUES                                                                                  \
    { -126, -114, -103, -92, -83, -74, -65, -57, -50, -43, -36, -30, -24, -18, -12, -6,                \
      -1, 5, 11, 17, 23, 29, 36, 43, 51, 59, 68, 77, 87, 97, 109, 121,                                  \
      -124, -112, -101, -90, -81, -72, -63, -55, -48, -41, -34, -28, -22, -16, -10, -4,                 \
      1, 7, 13, 19, 25, 31, 38, 45, 53, 61, 70, 79, 89, 99, 111, 123 }

// iq2_kl: pairs of iq3nl levels, low byte first
#define KILN_IQ2KL_VALUES                                                                                  \
    { 0xe9c1, 0x0dc1, 0xc1d8, 0xf6d8, 0x0dd8, 0x2fd8, 0xd8e9, 0xe9e9, 0x01e9, 0x0de9, 0x1ce9, 0xc1f6, 0x01f6, \
      0x0df6, 0x2ff6, 0xe901, 0xf601, 0x0101, 0x0d01, 0x1c01, 0xd80d, 0xe90d, 0xf60d, 0x010d, 0x0d0d, 0xc11c, \
      0xe91c, 0x011c, 0x1c1c, 0x2f1c, 0xe92f, 0x0d2f }

extern const int8_t ik_iq2nl_values[8];
extern const int8_t ik_iq3nl_values[16];
extern const int8_t ik_iq4k_values[32];
extern const int8_t ik_iq5nl_values[64];
extern const uint16_t ik_iq2kl_values[32];

#if defined(__CUDACC__)
static __constant__ int8_t kiln_iq4nl_dev[16] = KILN_IQ4NL_VALUES;
static __constant__ int8_t kiln_mxfp4_dev[16] = KILN_MXFP4_VALUES;
static __constant__ int8_t kiln_iq2nl_dev[8] = KILN_IQ2NL_VALUES;
static __constant__ int8_t kiln_iq3nl_dev[16] = KILN_IQ3NL_VALUES;
static __constant__ int8_t kiln_iq4k_dev[32] = KILN_IQ4K_VALUES;
static __constant__ int8_t kiln_iq5nl_dev[64] = KILN_IQ5NL_VALUES;
static __constant__ uint16_t kiln_iq2kl_dev[32] = KILN_IQ2KL_VALUES;
#endif

#if defined(__CUDA_ARCH__)
#define KILN_VALUE(host, dev, q) dev[q]
#else
#define KILN_VALUE(host, dev, q) host[q]
#endif
KILN_HD int iq4nl_value(int q) { return KILN_VALUE(kvalues_iq4nl, kiln_iq4nl_dev, q); }
KILN_HD int mxfp4_value(int q) { return KILN_VALUE(kvalues_mxfp4, kiln_mxfp4_dev, q); }
KILN_HD int iq2nl_value(int q) { return KILN_VALUE(ik_iq2nl_values, kiln_iq2nl_dev, q); }
KILN_HD int iq3nl_value(int q) { return KILN_VALUE(ik_iq3nl_values, kiln_iq3nl_dev, q); }
KILN_HD int iq4k_value(int q) { return KILN_VALUE(ik_iq4k_values, kiln_iq4k_dev, q); }
KILN_HD int iq5nl_value(int q) { return KILN_VALUE(ik_iq5nl_values, kiln_iq5nl_dev, q); }
KILN_HD int iq2kl_pair(int q) { return KILN_VALUE(ik_iq2kl_values, kiln_iq2kl_dev, q); }

// ---------------------------------------------------------------------------------------------
// 32-value formats

// q8_0: 32 int8 values with an fp16 scale.
struct block_q8_0 {
    ggml_fp16_t d;
    int8_t      qs[QK8_0];
};
static_assert(sizeof(block_q8_0) == 34, "q8_0 block size");

// q8_1: 32 int8 values, fp16 scale d and fp16 s = d * sum(qs) (lets offset formats add their min).
struct block_q8_1 {
    ggml_fp16_t d;
    ggml_fp16_t s;
    int8_t      qs[QK8_1];
};
static_assert(sizeof(block_q8_1) == 36, "q8_1 block size");

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

// mxfp4: e8m0 shared exponent; value = 2^(e - 128) * kvalues_mxfp4[q] (the table holds twice
// the e2m1 values, hence the extra halving).
struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
};
static_assert(sizeof(block_mxfp4) == 17, "mxfp4 block size");

// ---------------------------------------------------------------------------------------------
// 256-value super-blocks

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
KILN_HD int iq4_xs_scale(const block_iq4_xs & b, int ib) {
    return (((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((b.scales_h >> 2 * ib) & 3) << 4)) - 32;
}

// ik_llama.cpp's non-linear K types: value = (d * scale) * grid[level], the grid (or its shifted
// half) chosen per 16 values by a bit of `extra`.
struct block_iq2_k {
    ggml_fp16_t d;
    uint16_t    extra;        // bit per 16 values: use the shifted grid
    uint8_t     scales[8];    // 4-bit scales (minus 8), two per 32 values
    uint8_t     qs[64];
};
static_assert(sizeof(block_iq2_k) == 76, "iq2_k block size");

struct block_iq3_k {
    ggml_fp16_t d;
    uint16_t    extra;
    uint16_t    scales_h;     // sign bit per 16 values
    uint8_t     scales_l[8];  // 4-bit magnitudes m: scale = 2m + 1
    uint8_t     qs[64];
    uint8_t     qh[32];
};
static_assert(sizeof(block_iq3_k) == 110, "iq3_k block size");

struct block_iq4_k {
    ggml_fp16_t d;
    uint16_t    extra;
    uint8_t     scales_h[4];
    uint8_t     scales_l[8];
    uint8_t     qs[128];
};
static_assert(sizeof(block_iq4_k) == 144, "iq4_k block size");

struct block_iq5_k {
    ggml_fp16_t d;
    uint16_t    extra;
    uint8_t     scales_h[4];
    uint8_t     scales_l[8];
    uint8_t     qs[128];
    uint8_t     qh[32];
};
static_assert(sizeof(block_iq5_k) == 176, "iq5_k block size");

struct block_iq6_k {
    ggml_fp16_t d;
    uint16_t    extra;
    int8_t      scales[16];
    uint8_t     qs[128];
    uint8_t     qh[64];
};
static_assert(sizeof(block_iq6_k) == 212, "iq6_k block size");

// The row-scaled ik types: a row starts with its scale (type's comment), then these blocks.
// row: f32 d
struct block_iq4_ks {
    uint8_t scales[8];   // bit 0: shifted grid; bits 1..7: scale + 127 (even)
    uint8_t qs[128];
};
static_assert(sizeof(block_iq4_ks) == 136, "iq4_ks block size");

// row: f32 d
struct block_iq5_ks {
    uint8_t scales[8];
    uint8_t qs[128];
    uint8_t qh[32];
};
static_assert(sizeof(block_iq5_ks) == 168, "iq5_ks block size");

// row: f16 d
struct block_iq2_ks {
    uint16_t extra;      // bits 0..7 shifted grid per 32; bits 8..15 fifth scale bit
    uint8_t  scales[4];
    uint8_t  qs[64];
};
static_assert(sizeof(block_iq2_ks) == 70, "iq2_ks block size");

// row: f16 d
struct block_iq3_ks {
    uint16_t extra;      // bits 0..7 fifth scale bit; bits 8..15 shifted grid per 32
    uint8_t  scales[4];
    uint8_t  qs[64];
    uint8_t  qh[32];
};
static_assert(sizeof(block_iq3_ks) == 102, "iq3_ks block size");

// q2_K: 16 sub-blocks of 16; each scales[] byte holds a 4-bit scale (low) and a 4-bit min (high).
// value = d * scale * q - dmin * min, q in 0..3.
struct block_q2_K {
    uint8_t     scales[QK_K / 16];
    uint8_t     qs[QK_K / 4];
    ggml_fp16_t d;
    ggml_fp16_t dmin;
};
static_assert(sizeof(block_q2_K) == 84, "q2_K block size");

// q3_K: 16 sub-blocks of 16 with 6-bit signed scales (stored +32, packed in 12 bytes);
// value = d * (scale - 32) * (q - 4), q = 2 low bits from qs | high bit from hmask << 2.
struct block_q3_K {
    uint8_t     hmask[QK_K / 8];
    uint8_t     qs[QK_K / 4];
    uint8_t     scales[12];
    ggml_fp16_t d;
};
static_assert(sizeof(block_q3_K) == 110, "q3_K block size");

// q4_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes;
// value = d * scale * q - dmin * min, q in 0..15.
struct block_q4_K {
    ggml_fp16_t d;
    ggml_fp16_t dmin;
    uint8_t     scales[12];
    uint8_t     qs[QK_K / 2];
};
static_assert(sizeof(block_q4_K) == 144, "q4_K block size");

// q5_K: as q4_K plus a fifth bit per value in qh; q in 0..31.
struct block_q5_K {
    ggml_fp16_t d;
    ggml_fp16_t dmin;
    uint8_t     scales[12];
    uint8_t     qh[QK_K / 8];
    uint8_t     qs[QK_K / 2];
};
static_assert(sizeof(block_q5_K) == 176, "q5_K block size");

// q6_K: 16 sub-blocks of 16 with int8 scales; value = d * scale * (q - 32), q in 0..63
// (4 low bits in ql, 2 high bits in qh).
struct block_q6_K {
    uint8_t     ql[QK_K / 2];
    uint8_t     qh[QK_K / 4];
    int8_t      scales[QK_K / 16];
    ggml_fp16_t d;
};
static_assert(sizeof(block_q6_K) == 210, "q6_K block size");

// The 6-bit scale (sc) and min (m) of sub-block j of a q4_K / q5_K block: the first four are
// the low 6 bits of bytes 0..3 / 4..7, the last four combine a nibble of bytes 8..11 with the
// top two bits of bytes 0..3 / 4..7.
KILN_HD void k4_scale_min(int j, const uint8_t * q, uint8_t & sc, uint8_t & m) {
    if (j < 4) {
        sc = q[j] & 63;
        m  = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m  = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// The signed 6-bit scale (already minus 32) of 16-value sub-block j of a q3_K block.
KILN_HD int q3_K_scale(const uint8_t * packed, int j) {
    const int low  = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// ---------------------------------------------------------------------------------------------
// Decoding 32 values at a time. Every block size above is a multiple of 32, so "chunk c of a
// block" (values 32c .. 32c+31 in row order) is the unit kernels and tests share. The float
// expressions keep the reference decoders' order of operations, so the host results are
// bit-exact (a device may contract a multiply-add into an FMA: last-bit differences there).

KILN_HD void decode32_q8_0(const block_q8_0 & b, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    for (int j = 0; j < 32; ++j) y[j] = b.qs[j] * d;
}

// The 4-bit layouts: byte j holds value j in its low nibble and value j + 16 in its high one;
// value(q) maps a nibble to the float. (Written once for q4_0, q4_1, iq4_nl, mxfp4, iq4_xs.)
template <typename Value>
KILN_HD void kiln_decode_nibbles32(const uint8_t * qs, float * y, Value value) {
    for (int j = 0; j < 16; ++j) {
        y[j]      = value(qs[j] & 0xF);
        y[j + 16] = value(qs[j] >> 4);
    }
}

KILN_HD void decode32_q4_0(const block_q4_0 & b, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    kiln_decode_nibbles32(b.qs, y, [d](int q) { return (q - 8) * d; });
}

KILN_HD void decode32_q4_1(const block_q4_1 & b, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const float m = kiln_fp16_to_f32(b.m);
    kiln_decode_nibbles32(b.qs, y, [d, m](int q) { return q * d + m; });
}

KILN_HD uint32_t kiln_load_u32(const uint8_t * p) {
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

KILN_HD void decode32_q5_0(const block_q5_0 & b, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const uint32_t qh = kiln_load_u32(b.qh);
    for (int j = 0; j < 16; ++j) {
        const int q0 = (b.qs[j] & 0xF) | (((qh >> j) & 1) << 4);
        const int q1 = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
        y[j]      = (q0 - 16) * d;
        y[j + 16] = (q1 - 16) * d;
    }
}

KILN_HD void decode32_q5_1(const block_q5_1 & b, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const float m = kiln_fp16_to_f32(b.m);
    const uint32_t qh = kiln_load_u32(b.qh);
    for (int j = 0; j < 16; ++j) {
        const int q0 = (b.qs[j] & 0xF) | (((qh >> j) & 1) << 4);
        const int q1 = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
        y[j]      = q0 * d + m;
        y[j + 16] = q1 * d + m;
    }
}

KILN_HD void decode32_q6_0(const block_q6_0 & b, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    for (int j = 0; j < 16; ++j) {
        const int h = b.qh[j % 8] >> (4 * (j / 8));
        const int q0 = (b.qs[j] & 0xF) | ((h & 3) << 4);
        const int q1 = (b.qs[j] >> 4) | (((h >> 2) & 3) << 4);
        y[j]      = (q0 - 32) * d;
        y[j + 16] = (q1 - 32) * d;
    }
}

KILN_HD void decode32_iq4_nl(const block_iq4_nl & b, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    kiln_decode_nibbles32(b.qs, y, [d](int q) { return d * iq4nl_value(q); });
}

KILN_HD void decode32_mxfp4(const block_mxfp4 & b, int, float, float * y) {
    const float d = e8m0_to_fp32_half(b.e);
    kiln_decode_nibbles32(b.qs, y, [d](int q) { return mxfp4_value(q) * d; });
}

KILN_HD void decode32_iq4_xs(const block_iq4_xs & b, int c, float, float * y) {
    const float dl = kiln_fp16_to_f32(b.d) * iq4_xs_scale(b, c);
    kiln_decode_nibbles32(b.qs + 16 * c, y, [dl](int q) { return dl * iq4nl_value(q); });
}

// q2_K: chunk c is the 2-bit field `shift` = 2 * (c % 4) of the 32 bytes of half c / 4; its two
// 16-value groups have scale bytes 2c and 2c + 1.
KILN_HD void decode32_q2_K(const block_q2_K & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const float dmin = kiln_fp16_to_f32(b.dmin);
    const uint8_t * q = b.qs + 32 * (c / 4);
    const int shift = 2 * (c % 4);
    for (int part = 0; part < 2; ++part) {
        const int g = 2 * c + part;
        const float dl = d * (b.scales[g] & 0xF);
        const float ml = dmin * (b.scales[g] >> 4);
        for (int l = 0; l < 16; ++l) y[16 * part + l] = dl * ((q[16 * part + l] >> shift) & 3) - ml;
    }
}

// q3_K: as q2_K for the low bits; the high bit of chunk c is bit c of hmask.
KILN_HD void decode32_q3_K(const block_q3_K & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const uint8_t * q = b.qs + 32 * (c / 4);
    const int shift = 2 * (c % 4);
    for (int part = 0; part < 2; ++part) {
        const float dl = d * q3_K_scale(b.scales, 2 * c + part);
        for (int l = 0; l < 16; ++l) {
            const int low  = (q[16 * part + l] >> shift) & 3;
            const int high = (b.hmask[16 * part + l] >> c) & 1;
            y[16 * part + l] = dl * (low - (high ? 0 : 4));
        }
    }
}

// q4_K: chunk c is the low (c even) or high nibbles of bytes 32 * (c / 2) ..; sub-block c.
KILN_HD void decode32_q4_K(const block_q4_K & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const float dmin = kiln_fp16_to_f32(b.dmin);
    uint8_t sc, m;
    k4_scale_min(c, b.scales, sc, m);
    const float dl = d * sc, ml = dmin * m;
    const uint8_t * q = b.qs + 32 * (c / 2);
    const int shift = 4 * (c % 2);
    for (int l = 0; l < 32; ++l) y[l] = dl * ((q[l] >> shift) & 0xF) - ml;
}

// q5_K: q4_K's nibbles plus bit c of qh[l].
KILN_HD void decode32_q5_K(const block_q5_K & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const float dmin = kiln_fp16_to_f32(b.dmin);
    uint8_t sc, m;
    k4_scale_min(c, b.scales, sc, m);
    const float dl = d * sc, ml = dmin * m;
    const uint8_t * q = b.qs + 32 * (c / 2);
    const int shift = 4 * (c % 2);
    for (int l = 0; l < 32; ++l) y[l] = dl * (((q[l] >> shift) & 0xF) + (((b.qh[l] >> c) & 1) << 4)) - ml;
}

// q6_K: each 128-value half h = c / 4 holds four 32-value chunks k = c % 4: low nibbles of
// ql[64h + 32(k % 2) ..] (k < 2) or high nibbles (k >= 2), top bits 2k of qh[32h + l];
// 16-value groups use scales[8h + 2k + l / 16].
KILN_HD void decode32_q6_K(const block_q6_K & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const int h = c / 4, k = c % 4;
    const uint8_t * ql = b.ql + 64 * h + 32 * (k % 2);
    const uint8_t * qh = b.qh + 32 * h;
    const int8_t * sc = b.scales + 8 * h + 2 * k;
    for (int l = 0; l < 32; ++l) {
        const int q = ((ql[l] >> (4 * (k / 2))) & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4);
        y[l] = d * sc[l / 16] * (q - 32);
    }
}

// The ik types: chunk c is sub-blocks 2c and 2c + 1 (16 values each), value = (d * sc) * level.

KILN_HD void decode32_iq2_k(const block_iq2_k & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const uint8_t * qs = b.qs + 32 * (c / 4);
    const int shift = 2 * (c % 4);
    for (int part = 0; part < 2; ++part) {
        const int g = 2 * c + part;
        const float dl = d * (float) (((b.scales[c] >> (4 * part)) & 0xF) - 8);
        const int shifted = ((b.extra >> g) & 1) * 4;
        for (int j = 0; j < 16; ++j) y[16 * part + j] = dl * (float) iq2nl_value(shifted + ((qs[16 * part + j] >> shift) & 3));
    }
}

KILN_HD void decode32_iq3_k(const block_iq3_k & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const uint8_t * qs = b.qs + 32 * (c / 4);
    const int shift = 2 * (c % 4);
    for (int part = 0; part < 2; ++part) {
        const int g = 2 * c + part;
        const int m = 2 * ((b.scales_l[c] >> (4 * part)) & 0xF) + 1;
        const float dl = d * (float) ((b.scales_h >> g) & 1 ? -m : m);
        const int shifted = ((b.extra >> g) & 1) * 8;
        for (int j = 16 * part; j < 16 * part + 16; ++j) {
            y[j] = dl * (float) iq3nl_value(shifted + (((qs[j] >> shift) & 3) | (((b.qh[j] >> c) & 1) << 2)));
        }
    }
}

KILN_HD void decode32_iq4_k(const block_iq4_k & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const int sh = b.scales_h[c / 2] >> 4 * (c % 2);
    const float dl0 = d * (float) (((b.scales_l[c] & 0xF) | ((sh << 4) & 0x30)) - 32);
    const float dl1 = d * (float) (((b.scales_l[c] >> 4) | ((sh << 2) & 0x30)) - 32);
    const int s0 = ((b.extra >> (2 * c)) & 1) * 16, s1 = ((b.extra >> (2 * c + 1)) & 1) * 16;
    const uint8_t * qs = b.qs + 16 * c;
    for (int j = 0; j < 16; ++j) {
        y[j]      = dl0 * (float) iq4k_value(s0 + (qs[j] & 0xF));
        y[j + 16] = dl1 * (float) iq4k_value(s1 + (qs[j] >> 4));
    }
}

// iq5_k: 64-value halves h = c / 2 share 32 bytes of qs; chunk parity picks the nibble and the bit
// of qh (2h, or 2h + 1 for high nibbles).
KILN_HD void decode32_iq5_k(const block_iq5_k & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const int h = c / 2, hi = c % 2;
    const int sl = b.scales_l[2 * h + hi], sh = b.scales_h[h] >> (4 * hi);
    const float dl0 = d * (float) (((sl & 0xF) | ((sh << 4) & 0x30)) - 32);
    const float dl1 = d * (float) (((sl >> 4) | ((sh << 2) & 0x30)) - 32);
    const int s0 = ((b.extra >> (2 * c)) & 1) * 32, s1 = ((b.extra >> (2 * c + 1)) & 1) * 32;
    const uint8_t * qs = b.qs + 32 * h;
    const int shift = 2 * h + hi;
    for (int j = 0; j < 16; ++j) {
        const int l0 = ((qs[j] >> (4 * hi)) & 0xF) | (((b.qh[j] >> shift) & 1) << 4);
        const int l1 = ((qs[j + 16] >> (4 * hi)) & 0xF) | (((b.qh[j + 16] >> shift) & 1) << 4);
        y[j]      = dl0 * (float) iq5nl_value(s0 + l0);
        y[j + 16] = dl1 * (float) iq5nl_value(s1 + l1);
    }
}

// iq6_k: the reference evaluates a cubic in the 6-bit level (its int8 table is only a rounded
// form for dot products), with fused multiply-adds: fmaf keeps it bit-exact on both sides.
KILN_HD void decode32_iq6_k(const block_iq6_k & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const int h = c / 2, hi = c % 2;
    const uint8_t * qs = b.qs + 32 * h;
    const uint8_t * qh = b.qh + 32 * (h / 2);
    const int shift = 4 * (h % 2) + 2 * hi;
    const float A = -127.f, B = 6.2568f, C = 0.11218f, D = 0.0011972f;
    for (int part = 0; part < 2; ++part) {
        const int g = 2 * c + part;
        const float dl = d * b.scales[g];
        const float m = (b.extra >> g) & 1 ? 1.f : 0.f;
        for (int j = 16 * part; j < 16 * part + 16; ++j) {
            const float q = (float) (((qs[j] >> (4 * hi)) & 0xF) | (((qh[j] >> shift) & 3) << 4));
            y[j] = dl * (fmaf(q, fmaf(q, fmaf(q, D, -C), B), A) + m);
        }
    }
}

// The row-scaled ik types: each row starts with its scale row_d (f32 for iq4_ks / iq5_ks, f16
// for iq2_ks / iq3_ks), then its blocks; value = (row_d * sc) * level, one scale per 32 values.

// iq4_ks: scale byte c: bit 0 picks the shifted grid, the rest is the scale + 127.
KILN_HD void decode32_iq4_ks(const block_iq4_ks & b, int c, float row_d, float * y) {
    const float dl = row_d * (float) ((b.scales[c] & 254) - 127);
    const int shifted = (b.scales[c] & 1) * 16;
    const uint8_t * qs = b.qs + 16 * c;
    for (int j = 0; j < 16; ++j) {
        y[j]      = dl * (float) iq4k_value(shifted + (qs[j] & 0xF));
        y[j + 16] = dl * (float) iq4k_value(shifted + (qs[j] >> 4));
    }
}

// iq5_ks: as iq4_ks for the scale; nibbles of qs[32 (c / 2) ..] (low for even c) and bit c of qh.
KILN_HD void decode32_iq5_ks(const block_iq5_ks & b, int c, float row_d, float * y) {
    const float dl = row_d * (float) ((b.scales[c] & 254) - 127);
    const int shifted = (b.scales[c] & 1) * 32;
    const uint8_t * qs = b.qs + 32 * (c / 2);
    for (int j = 0; j < 32; ++j) {
        y[j] = dl * (float) iq5nl_value(shifted + (((qs[j] >> (4 * (c % 2))) & 0xF) | (((b.qh[j] >> c) & 1) << 4)));
    }
}

// iq2_ks: 4-bit scale nibble (c % 2) of scales[c / 2] with fifth bit 8 + c of extra, minus 16;
// bit c of extra picks the shifted grid; 2-bit fields at 2 * (c % 4) of qs[32 (c / 4) ..].
KILN_HD void decode32_iq2_ks(const block_iq2_ks & b, int c, float row_d, float * y) {
    const int ls = (((b.scales[c / 2] >> (4 * (c % 2))) & 0xF) | (((b.extra >> (8 + c)) & 1) << 4)) - 16;
    const float dl = row_d * (float) ls;
    const int shifted = ((b.extra >> c) & 1) * 4;
    const uint8_t * qs = b.qs + 32 * (c / 4);
    const int shift = 2 * (c % 4);
    for (int j = 0; j < 32; ++j) y[j] = dl * (float) iq2nl_value(shifted + ((qs[j] >> shift) & 3));
}

// iq3_ks: nibble c / 4 of scales[c % 4] with fifth bit c of extra, minus 16; bit 8 + c of extra
// picks the shifted grid; 2-bit fields at 2 * (c % 4) of qs[32 (c / 4) ..] and bit c of qh.
KILN_HD void decode32_iq3_ks(const block_iq3_ks & b, int c, float row_d, float * y) {
    const int ls = (((b.scales[c % 4] >> (4 * (c / 4))) & 0xF) | (((b.extra >> c) & 1) << 4)) - 16;
    const float dl = row_d * (float) ls;
    const int shifted = ((b.extra >> (8 + c)) & 1) * 8;
    const uint8_t * qs = b.qs + 32 * (c / 4);
    const int shift = 2 * (c % 4);
    for (int j = 0; j < 32; ++j) {
        y[j] = dl * (float) iq3nl_value(shifted + (((qs[j] >> shift) & 3) | (((b.qh[j] >> c) & 1) << 2)));
    }
}

// row: f32 d. 32 16-bit words per block; each word's low bit is one bit of its 32-value sub-block's
// scale byte (coded as in iq4_ks) and its other 15 bits, "x ^ (x >> 1)" decoded, give 4 nibbles.
struct block_iq4_kss {
    uint32_t qs[32];
};
static_assert(sizeof(block_iq4_kss) == 128, "iq4_kss block size");

// iq4_kss: chunk c is words 8c .. 8c + 7; word k gives the nibbles of values 2k, 2k + 1 (low
// nibbles) and 2k + 16, 2k + 17 (high nibbles).
KILN_HD void decode32_iq4_kss(const block_iq4_kss & b, int c, float row_d, float * y) {
    uint16_t w[8];
    memcpy(w, (const uint8_t *) b.qs + 16 * c, sizeof(w));
    int ls = 0;
    for (int k = 0; k < 8; ++k) ls |= (w[k] & 1) << k;
    const float dl = row_d * (float) ((ls & 254) - 127);
    const int shifted = (ls & 1) * 16;
    for (int k = 0; k < 8; ++k) {
        const int v = (w[k] & 0xFFFE) ^ ((w[k] & 0xFFFE) >> 1);
        for (int h = 0; h < 2; ++h) {
            const int byte = (v >> (8 * h)) & 0xFF;
            y[2 * k + h]      = dl * (float) iq4k_value(shifted + (byte & 0xF));
            y[2 * k + h + 16] = dl * (float) iq4k_value(shifted + (byte >> 4));
        }
    }
}

// row: f16 d
struct block_iq2_kl {
    uint16_t scales_h;     // 2 high scale bits per 32 values
    uint8_t  scales_l[4];  // 4 low scale bits per 32 values
    uint8_t  qs[64];       // 4-bit pair indices: low nibbles the first 32 of each 64, high the second
    uint8_t  qh[16];       // fifth index bit
};
static_assert(sizeof(block_iq2_kl) == 86, "iq2_kl block size");

// iq2_kl: each 5-bit index picks a pair of iq3nl levels (values 2j, 2j + 1 of the chunk).
KILN_HD void decode32_iq2_kl(const block_iq2_kl & b, int c, float row_d, float * y) {
    const int ib64 = c / 2, hi = c % 2;
    const int ls = (((b.scales_l[c % 4] >> 4 * (ib64 / 2)) & 0xF) | (((b.scales_h >> (2 * c)) & 3) << 4)) - 32;
    const float dl = row_d * (float) ls;
    const uint8_t * qs = b.qs + 16 * ib64;
    for (int j = 0; j < 16; ++j) {
        const int p = iq2kl_pair(((qs[j] >> (4 * hi)) & 0xF) | (((b.qh[j] >> c) & 1) << 4));
        y[2 * j]     = dl * (float) (int8_t) (p & 0xFF);
        y[2 * j + 1] = dl * (float) (int8_t) (p >> 8);
    }
}

// ---------------------------------------------------------------------------------------------
// Ternary types of llama.cpp (BitNet b1.58 / TriLM models): every weight is -1, 0 or +1 times one
// fp16 scale per 256.

// tq1_0: 240 weights five per byte in 48 bytes (a 32-byte then a 16-byte run: byte m of a run
// holds weights m, m + run, ... m + 4 run), the last 16 four per byte in qh. A byte holds its
// trits as a base-3 fraction scaled to 256 (rounded up), so trit n is the top of byte * 3^n * 3
// over 256 (no division to decode).
struct block_tq1_0 {
    uint8_t     qs[48];
    uint8_t     qh[4];
    ggml_fp16_t d;
};
static_assert(sizeof(block_tq1_0) == 54, "tq1_0 block size");

// tq2_0: 2 bits per weight (0..2 for -1..+1), byte m of each 32-byte run holding weights m + 32 l
// at bits 2 l.
struct block_tq2_0 {
    uint8_t     qs[64];
    ggml_fp16_t d;
};
static_assert(sizeof(block_tq2_0) == 66, "tq2_0 block size");

// Trit n (0..4) of a packed tq1_0 byte, as -1 / 0 / +1.
KILN_HD int kiln_trit(uint8_t byte, int n) {
    int pow3 = 1;   // computed, not looked up: a device would keep a table in local memory
    for (int i = 0; i < n; ++i) pow3 *= 3;
    const uint8_t q = (uint8_t) (byte * pow3);
    return ((q * 3) >> 8) - 1;
}

// tq1_0: value v of the block is trit v / 32 of qs[v % 32] (v < 160), trit (v - 160) / 16 of
// qs[32 + v % 16] (v < 240), else trit (v - 240) / 4 of qh[v % 4].
KILN_HD void decode32_tq1_0(const block_tq1_0 & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    for (int j = 0; j < 32; ++j) {
        const int v = 32 * c + j;
        const int t = v < 160 ? kiln_trit(b.qs[v % 32], v / 32)
                    : v < 240 ? kiln_trit(b.qs[32 + v % 16], (v - 160) / 16)
                              : kiln_trit(b.qh[v % 4], (v - 240) / 4);
        y[j] = (float) t * d;
    }
}

// tq2_0: chunk c is bits 2 (c % 4) of bytes 32 (c / 4) ...
KILN_HD void decode32_tq2_0(const block_tq2_0 & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const uint8_t * qs = b.qs + 32 * (c / 4);
    for (int m = 0; m < 32; ++m) y[m] = (float) (((qs[m] >> 2 * (c % 4)) & 3) - 1) * d;
}

// ---------------------------------------------------------------------------------------------
// BitNet b1.58 types of ik_llama.cpp (ids 134 / 135; its ggml-common.h, iqk/iqk_quantize.cpp):
// 64-value blocks of levels -1 / 0 / +1 after one row scale, the row's largest magnitude (iq1_bn
// fp16, iq2_bn f32). The reference's own dequantize_row writes the bare levels; its matrix
// products multiply by the row scale, which the values here include (what a product computes).

// iq1_bn: 1.625 bpw. Each 16-value group g (0..3) keeps values 16 g .. 16 g + 14 five to a byte in
// ql[3 g .. 3 g + 2] (value 5 b + j is trit j of ql[3 g + b], j = 0 the least significant), and
// value 16 g + 15 as trit g of `extra`. A byte holds its trits as a base-3 number scaled to 256
// (rounded up), so trit j is the top of byte * 3^(4 - j) * 3 over 256, as tq1_0's (kiln_trit).
struct block_iq1_bn {
    uint8_t ql[12];
    uint8_t extra;
};
static_assert(sizeof(block_iq1_bn) == 13, "iq1_bn block size");

// iq2_bn: 2 bpw, byte j (0..15) holding values j, j + 16, j + 32, j + 48 at bits 0, 2, 4, 6 as
// level + 1.
struct block_iq2_bn {
    uint8_t qs[16];
};
static_assert(sizeof(block_iq2_bn) == 16, "iq2_bn block size");

KILN_HD int kiln_iq1_bn_level(const block_iq1_bn & b, int v) {
    const int g = v / 16, p = v % 16;
    return p == 15 ? kiln_trit(b.extra, 4 - g) : kiln_trit(b.ql[3 * g + p / 5], 4 - p % 5);
}

KILN_HD void decode32_iq1_bn(const block_iq1_bn & b, int c, float row_d, float * y) {
    for (int j = 0; j < 32; ++j) y[j] = row_d * (float) kiln_iq1_bn_level(b, 32 * c + j);
}

KILN_HD void decode32_iq2_bn(const block_iq2_bn & b, int c, float row_d, float * y) {
    for (int j = 0; j < 32; ++j) {
        const int v = 32 * c + j;
        y[j] = row_d * (float) (((b.qs[v % 16] >> 2 * (v / 16)) & 3) - 1);
    }
}

// ---------------------------------------------------------------------------------------------
// q8_KV (ik_llama.cpp's K/V-cache type): each row starts with an f32 scale and the i32 sum of its
// quants, then one int8 per value.
struct block_q8_KV {
    int8_t qs[32];
};
static_assert(sizeof(block_q8_KV) == 32, "q8_KV block size");

KILN_HD void decode32_q8_KV(const block_q8_KV & b, int, float row_d, float * y) {
    for (int j = 0; j < 32; ++j) y[j] = row_d * b.qs[j];
}

// The scale a row of row_meta bytes (0; 2: f16; 4: f32; 8: f32, then q8_KV's i32 sum) begins with.
KILN_HD float kiln_row_scale(const char * row, int row_meta) {
    if (row_meta == 4 || row_meta == 8) {
        float d;
        memcpy(&d, row, 4);
        return d;
    }
    if (row_meta == 2) {
        ggml_fp16_t h;
        memcpy(&h, row, 2);
        return kiln_fp16_to_f32(h);
    }
    return 0.0f;
}

// ---------------------------------------------------------------------------------------------
// Encoding q8_0 / q8_1 blocks (activations on every backend, the KV-cache type the GPU writes,
// Q8_0 weights): one fp16 scale d per 32 values, q = round(x / d) with ties away from zero.
//
// Below amax about 7.8e-3 the quants are computed with the scale as stored, not with amax / 127.
// fp16 keeps 11 significant bits only down to 6.1e-5 (amax / 127); below that d is a multiple
// of 2^-24, and quants made with the unrounded d would all be off by the stored scale's rounding
// error, the same factor for the whole block (several percent for blocks of small activations,
// common in real models). A common factor adds up along a dot product where independent
// rounding errors average out. The stored scale is rounded up so that the largest value still
// maps into [-127, 127]; a block too small for any normal fp16 gets the smallest subnormal
// instead of zero.

struct kiln_q8_scale {
    ggml_fp16_t d;    // as stored
    float       df;   // its value
    float       id;   // 1 / df (0 for an all-zero block)
};

KILN_HD kiln_q8_scale kiln_q8_block_scale(float amax) {
    const float want = amax / 127.0f;
    kiln_q8_scale s;
    s.d = kiln_f32_to_fp16(want);
    s.df = kiln_fp16_to_f32(s.d);
    if (want >= 6.103515625e-5f) {
        // a normal fp16 keeps the scale to 2^-11 relative, far below the int8 step: the quants are
        // made with the exact amax / 127, as ggml's reference makes them (bit-identical blocks)
        s.id = 1.0f / want;
        return s;
    }
    if (s.df < want && s.d < 0x7c00) {   // the next fp16 up (positive: the next bit pattern)
        s.d = (ggml_fp16_t) (s.d + 1);
        s.df = kiln_fp16_to_f32(s.d);
    }
    s.id = s.d != 0 && s.d < 0x7c00 ? 1.0f / s.df : 0.0f;
    return s;
}

KILN_HD void encode32_q8_0(const float * x, block_q8_0 & b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(x[j]));
    const kiln_q8_scale s = kiln_q8_block_scale(amax);
    b.d = s.d;
    for (int j = 0; j < 32; ++j) b.qs[j] = (int8_t) roundf(x[j] * s.id);
}

// ---------------------------------------------------------------------------------------------
// Encoding the other KV-cache types (q4_0, q4_1, q5_0, q5_1, q6_0, iq4_nl: one block of 32 values;
// q8_KV: a whole row), as the GPU's cache writes do, bit for bit as the CPU's quantizers
// (quants-legacy.cpp, quants-nl.cpp, quants-q8.cpp: the ggml reference rounding) encode them:
// tests/test-quants-blocks.cpp compares the two on the host.
//
// Same float operations in the same order, with one device-specific care: nvcc fuses a * b + c
// into one FMA (one rounding) by default, where the CPU code (no -mfma) rounds the product first,
// which can move a value across a rounding boundary. kiln_mul_rn is a product that is never fused.
KILN_HD float kiln_mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

// 1/d, or 0 when d is 0 or so small that 1/d overflows (the stored fp16 scale is 0 then too).
KILN_HD float kiln_safe_inverse(float d) { return fabsf(d) >= 1.17549435e-38f ? 1.0f / d : 0.0f; }

// The value of largest magnitude with its sign (the first one on ties).
KILN_HD float kiln_signed_absmax32(const float * x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
        const float ax = fabsf(x[j]);
        if (amax < ax) {
            amax = ax;
            max = x[j];
        }
    }
    return max;
}

// min and max as std::min / std::max fold them (the comparisons in the same order).
KILN_HD void kiln_min_max32(const float * x, float & mn, float & mx) {
    mn = 3.40282347e+38f;
    mx = -3.40282347e+38f;
    for (int j = 0; j < 32; ++j) {
        mn = x[j] < mn ? x[j] : mn;
        mx = mx < x[j] ? x[j] : mx;
    }
}

KILN_HD int kiln_mini(int a, int b) { return a < b ? a : b; }

// 32 levels to q4 nibbles: byte j holds level j (low nibble) and level j + 16 (high).
KILN_HD void kiln_pack_nibbles32(const uint8_t * L, uint8_t * qs) {
    for (int j = 0; j < 16; ++j) qs[j] = (uint8_t) ((L[j] & 0xF) | ((L[j + 16] & 0xF) << 4));
}

// 5-bit levels: nibbles as above, the fifth bit of level j is bit j of qh (little-endian u32).
KILN_HD void kiln_pack_q5(const uint8_t * L, uint8_t * qs, uint8_t * qh_bytes) {
    kiln_pack_nibbles32(L, qs);
    uint32_t qh = 0;
    for (int j = 0; j < 32; ++j) qh |= (uint32_t) ((L[j] >> 4) & 1) << j;
    memcpy(qh_bytes, &qh, sizeof(qh));
}

// 6-bit levels: the top two bits of levels j and j + 16 (j < 16) share a nibble of qh[j % 8].
KILN_HD void kiln_pack_q6(const uint8_t * L, uint8_t * qs, uint8_t * qh) {
    kiln_pack_nibbles32(L, qs);
    for (int j = 0; j < 8; ++j) qh[j] = 0;
    for (int j = 0; j < 16; ++j) {
        qh[j % 8] |= (uint8_t) ((((L[j] >> 4) & 3) | (((L[j + 16] >> 4) & 3) << 2)) << (4 * (j / 8)));
    }
}

// q4_0 / q5_0 / q6_0: d = (signed absmax) / -2^(bits-1), level = x / d + 2^(bits-1), rounded by
// adding 0.5 and truncating, capped at the top level.
KILN_HD void kiln_encode_symmetric32(const float * x, int half, ggml_fp16_t & d16, uint8_t * L) {
    const float d = kiln_signed_absmax32(x) / (float) -half;
    const float id = kiln_safe_inverse(d);
    d16 = kiln_f32_to_fp16(d);
    for (int j = 0; j < 32; ++j) L[j] = (uint8_t) kiln_mini(2 * half - 1, (int) (kiln_mul_rn(x[j], id) + ((float) half + 0.5f)));
}

// q4_1 / q5_1: d = (max - min) / top level, m = min, level = (x - min) / d rounded as above.
KILN_HD void kiln_encode_offset32(const float * x, int top, ggml_fp16_t & d16, ggml_fp16_t & m16, uint8_t * L) {
    float mn, mx;
    kiln_min_max32(x, mn, mx);
    const float d = (mx - mn) / (float) top;
    const float id = kiln_safe_inverse(d);
    d16 = kiln_f32_to_fp16(d);
    m16 = kiln_f32_to_fp16(mn);
    for (int j = 0; j < 32; ++j) L[j] = (uint8_t) kiln_mini(top, (int) (kiln_mul_rn(x[j] - mn, id) + 0.5f));
}

KILN_HD void encode32_q4_0(const float * x, block_q4_0 & b) {
    uint8_t L[32];
    kiln_encode_symmetric32(x, 8, b.d, L);
    kiln_pack_nibbles32(L, b.qs);
}

KILN_HD void encode32_q5_0(const float * x, block_q5_0 & b) {
    uint8_t L[32];
    kiln_encode_symmetric32(x, 16, b.d, L);
    kiln_pack_q5(L, b.qs, b.qh);
}

KILN_HD void encode32_q6_0(const float * x, block_q6_0 & b) {
    uint8_t L[32];
    kiln_encode_symmetric32(x, 32, b.d, L);
    kiln_pack_q6(L, b.qs, b.qh);
}

KILN_HD void encode32_q4_1(const float * x, block_q4_1 & b) {
    uint8_t L[32];
    kiln_encode_offset32(x, 15, b.d, b.m, L);
    kiln_pack_nibbles32(L, b.qs);
}

KILN_HD void encode32_q5_1(const float * x, block_q5_1 & b) {
    uint8_t L[32];
    kiln_encode_offset32(x, 31, b.d, b.m, L);
    kiln_pack_q5(L, b.qs, b.qh);
}

// Index of the iq4_nl level nearest to x (levels ascending; ties go up), as best_index_int8.
KILN_HD int kiln_iq4nl_nearest(float x) {
    if (x <= (float) iq4nl_value(0)) return 0;
    if (x >= (float) iq4nl_value(15)) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < (float) iq4nl_value(mid)) hi = mid; else lo = mid;
    }
    return x - (float) iq4nl_value(hi - 1) < (float) iq4nl_value(hi) - x ? hi - 1 : hi;
}

// iq4_nl as the CPU writes a cache (no importance weights, no scale trials): levels from
// d0 = max / -127, then the stored scale is the weighted least-squares fit with weights x^2.
KILN_HD void encode32_iq4_nl(const float * x, block_iq4_nl & b) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
        const float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    uint8_t L[32];
    if (amax < 1e-15f) {
        for (int j = 0; j < 32; ++j) L[j] = 0;
        b.d = kiln_f32_to_fp16(0.0f);
    } else {
        const float id = 1.0f / (max / (float) iq4nl_value(0));
        float sumqx = 0.0f, sumq2 = 0.0f;
        for (int j = 0; j < 32; ++j) {
            const int l = kiln_iq4nl_nearest(kiln_mul_rn(id, x[j]));
            L[j] = (uint8_t) l;
            const float q = (float) iq4nl_value(l);
            const float wq = kiln_mul_rn(kiln_mul_rn(x[j], x[j]), q);
            sumqx = sumqx + kiln_mul_rn(wq, x[j]);
            sumq2 = sumq2 + kiln_mul_rn(wq, q);
        }
        b.d = kiln_f32_to_fp16(sumqx / sumq2);
    }
    kiln_pack_nibbles32(L, b.qs);
}

// x + 1.5 * 2^23 rounds to an integer, ties to even, in the low mantissa bits (|x| < 2^22): the
// CPU's round_half_even.
KILN_HD int kiln_round_half_even(float v) {
    const float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

// One q8_KV row of n values (x(j) gives value j): f32 d = max|x| / 127, the i32 sum of the
// quants, then q = round(x / d) ties to even, as quantize_row_q8_KV_ref.
template <typename Get>
KILN_HD void kiln_encode_row_q8_KV(Get x, int64_t n, char * row) {
    float amax = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        const float ax = fabsf(x(j));
        amax = amax < ax ? ax : amax;
    }
    int8_t * q = (int8_t *) (row + 8);
    int32_t sum = 0;
    float d = 0.0f;
    if (amax == 0.0f) {
        for (int64_t j = 0; j < n; ++j) q[j] = 0;
    } else {
        d = amax / 127.0f;
        const float id = 1.0f / d;
        for (int64_t j = 0; j < n; ++j) {
            int v = kiln_round_half_even(kiln_mul_rn(x(j), id));
            v = v < -127 ? -127 : v > 127 ? 127 : v;
            q[j] = (int8_t) v;
            sum += v;
        }
    }
    memcpy(row, &d, 4);
    memcpy(row + 4, &sum, 4);
}

// The 32-value block types a KV cache may have, with their encoders (q8_KV, whose scale is per
// row, is apart: kiln_encode_row_q8_KV). The GPU's cache writes and attention take these, and
// f32/f16/bf16.
#define KILN_KV_BLOCK_TYPES(X)                             \
    X(GGML_TYPE_Q4_0, block_q4_0, encode32_q4_0)           \
    X(GGML_TYPE_Q4_1, block_q4_1, encode32_q4_1)           \
    X(GGML_TYPE_Q5_0, block_q5_0, encode32_q5_0)           \
    X(GGML_TYPE_Q5_1, block_q5_1, encode32_q5_1)           \
    X(GGML_TYPE_Q6_0, block_q6_0, encode32_q6_0)           \
    X(GGML_TYPE_Q8_0, block_q8_0, encode32_q8_0)           \
    X(GGML_TYPE_IQ4_NL, block_iq4_nl, encode32_iq4_nl)

// Block b of a row of 32-value blocks of a KV cache type from 32 floats; false for another type.
KILN_HD bool kiln_encode_kv_block(int type, const float * x, char * row, int64_t b) {
    switch (type) {
#define KILN_KV_ENCODE_CASE(t, block, fn)         \
    case t: fn(x, ((block *) row)[b]); return true;
        KILN_KV_BLOCK_TYPES(KILN_KV_ENCODE_CASE)
#undef KILN_KV_ENCODE_CASE
        default: return false;
    }
}

// Whether a KV cache of this type can be written and read on the GPU (quantized types only).
KILN_HD bool kiln_kv_quant_type(int type) {
    switch (type) {
#define KILN_KV_TYPE_CASE(t, block, fn) case t:
        KILN_KV_BLOCK_TYPES(KILN_KV_TYPE_CASE)
#undef KILN_KV_TYPE_CASE
        case GGML_TYPE_Q8_KV: return true;
        default: return false;
    }
}

// The families with their own headers (they use the helpers above).
#include "quants-blocks-iq.h"
#include "quants-blocks-kt.h"

// ---------------------------------------------------------------------------------------------
// The list: one entry per type the kernels decode. `decode` turns chunk c (0 .. qk/32 - 1) of a
// block into 32 floats; `meta` is the bytes of the scale a row starts with (kiln_row_scale).
// Kernels and tests are written once over this list and its twin for the row-interleaved
// layouts (_r4/_r8/_r16: KILN_INTERLEAVED_TYPES, quants-blocks-interleaved.h). What neither holds
// stays on the CPU: the activation types q8_1 / q8_K that never appear in model files.

#define KILN_BLOCK_TYPES(X)                                         \
    X(GGML_TYPE_Q4_0, block_q4_0, QK4_0, 0, decode32_q4_0)           \
    X(GGML_TYPE_Q4_1, block_q4_1, QK4_1, 0, decode32_q4_1)           \
    X(GGML_TYPE_Q5_0, block_q5_0, QK5_0, 0, decode32_q5_0)           \
    X(GGML_TYPE_Q5_1, block_q5_1, QK5_1, 0, decode32_q5_1)           \
    X(GGML_TYPE_Q6_0, block_q6_0, QK6_0, 0, decode32_q6_0)           \
    X(GGML_TYPE_Q8_0, block_q8_0, QK8_0, 0, decode32_q8_0)           \
    X(GGML_TYPE_IQ4_NL, block_iq4_nl, QK4_NL, 0, decode32_iq4_nl)    \
    X(GGML_TYPE_MXFP4, block_mxfp4, QK_MXFP4, 0, decode32_mxfp4)     \
    X(GGML_TYPE_IQ4_XS, block_iq4_xs, QK_K, 0, decode32_iq4_xs)      \
    X(GGML_TYPE_Q2_K, block_q2_K, QK_K, 0, decode32_q2_K)            \
    X(GGML_TYPE_Q3_K, block_q3_K, QK_K, 0, decode32_q3_K)            \
    X(GGML_TYPE_Q4_K, block_q4_K, QK_K, 0, decode32_q4_K)            \
    X(GGML_TYPE_Q5_K, block_q5_K, QK_K, 0, decode32_q5_K)            \
    X(GGML_TYPE_Q6_K, block_q6_K, QK_K, 0, decode32_q6_K)            \
    X(GGML_TYPE_IQ2_K, block_iq2_k, QK_K, 0, decode32_iq2_k)         \
    X(GGML_TYPE_IQ3_K, block_iq3_k, QK_K, 0, decode32_iq3_k)         \
    X(GGML_TYPE_IQ4_K, block_iq4_k, QK_K, 0, decode32_iq4_k)         \
    X(GGML_TYPE_IQ5_K, block_iq5_k, QK_K, 0, decode32_iq5_k)         \
    X(GGML_TYPE_IQ6_K, block_iq6_k, QK_K, 0, decode32_iq6_k)         \
    X(GGML_TYPE_IQ4_KS, block_iq4_ks, QK_K, 4, decode32_iq4_ks)      \
    X(GGML_TYPE_IQ5_KS, block_iq5_ks, QK_K, 4, decode32_iq5_ks)      \
    X(GGML_TYPE_IQ2_KS, block_iq2_ks, QK_K, 2, decode32_iq2_ks)      \
    X(GGML_TYPE_IQ3_KS, block_iq3_ks, QK_K, 2, decode32_iq3_ks)      \
    X(GGML_TYPE_IQ4_KSS, block_iq4_kss, QK_K, 4, decode32_iq4_kss)   \
    X(GGML_TYPE_IQ2_KL, block_iq2_kl, QK_K, 2, decode32_iq2_kl)      \
    X(GGML_TYPE_IQ2_XXS, block_iq2_xxs, QK_K, 0, decode32_iq2_xxs)   \
    X(GGML_TYPE_IQ2_XS, block_iq2_xs, QK_K, 0, decode32_iq2_xs)      \
    X(GGML_TYPE_IQ2_S, block_iq2_s, QK_K, 0, decode32_iq2_s)         \
    X(GGML_TYPE_IQ3_XXS, block_iq3_xxs, QK_K, 0, decode32_iq3_xxs)   \
    X(GGML_TYPE_IQ3_S, block_iq3_s, QK_K, 0, decode32_iq3_s)         \
    X(GGML_TYPE_IQ1_S, block_iq1_s, QK_K, 0, decode32_iq1_s)         \
    X(GGML_TYPE_IQ1_M, block_iq1_m, QK_K, 0, decode32_iq1_m)         \
    X(GGML_TYPE_IQ1_KT, block_iq1_kt, QK_K, 4, decode32_iq1_kt)      \
    X(GGML_TYPE_IQ2_KT, block_iq2_kt, QK_K, 4, decode32_iq2_kt)      \
    X(GGML_TYPE_IQ3_KT, block_iq3_kt, QK_K, 4, decode32_iq3_kt)      \
    X(GGML_TYPE_IQ4_KT, block_iq4_kt, QK_K, 4, decode32_iq4_kt)      \
    X(GGML_TYPE_TQ1_0, block_tq1_0, QK_K, 0, decode32_tq1_0)         \
    X(GGML_TYPE_TQ2_0, block_tq2_0, QK_K, 0, decode32_tq2_0)         \
    X(GGML_TYPE_IQ1_BN, block_iq1_bn, 64, 2, decode32_iq1_bn)         \
    X(GGML_TYPE_IQ2_BN, block_iq2_bn, 64, 4, decode32_iq2_bn)         \
    X(GGML_TYPE_Q8_KV, block_q8_KV, 32, 8, decode32_q8_KV)

// In an unnamed namespace: the members must not get external linkage where per-ISA code includes
// this header (the isa-symbols test rejects weak symbols there).
namespace {
template <ggml_type T> struct kiln_block_traits;
#define KILN_BLOCK_TRAITS(type, block, qk, meta, fn)                                                     \
    template <> struct kiln_block_traits<type> {                                                         \
        using block_t = block;                                                                           \
        static constexpr int chunks = (qk) / 32;                                                         \
        static constexpr int row_meta = (meta);                                                          \
        /* what matrix products multiply the row scale by (quants-blocks-kt.h) */                        \
        static constexpr float matmul_factor = kiln_matmul_row_factor(type);                             \
        /* chunk ch (32 values) of a row: the row's scale (if any; times `factor`), then its blocks */   \
        static KILN_HD_MEMBER void decode_row(const char * row, int64_t ch, float * y, float factor = 1.0f) { \
            const block_t & b = *(const block_t *) (row + row_meta + (ch / chunks) * sizeof(block_t));   \
            fn(b, (int) (ch % chunks), kiln_row_scale(row, row_meta) * factor, y);                       \
        }                                                                                                \
    };
KILN_BLOCK_TYPES(KILN_BLOCK_TRAITS)
#undef KILN_BLOCK_TRAITS

// n values of one row (n a multiple of the block size; any number of rows for types without a
// row scale): the CPU's to_float for the types whose only decoder is the one here.
template <ggml_type T> void kiln_row_to_float(const void * x, float * y, int64_t n) {
    for (int64_t ch = 0; ch < n / 32; ++ch) kiln_block_traits<T>::decode_row((const char *) x, ch, y + 32 * ch);
}
} // namespace

// The row-interleaved layouts (their blocks, decoders and list) and kiln_decode_row_chunk, the
// switch over both lists that the kernels call.
#include "quants-blocks-interleaved.h"
