// The ik_llama.cpp quantization families: the non-linear "K" types (iq2_k .. iq6_k), their
// row-scaled variants (iq2_ks, iq3_ks, iq4_ks, iq4_kss, iq5_ks, iq2_kl), the trellis types
// (iq1_kt .. iq4_kt) and the row-interleaved layouts (_r4/_r8). Block layouts and level tables
// are facts of ik_llama.cpp's GGUF files (docs/FORMATS.md); the code is Kiln's.
//
// Every non-trellis type decodes a 256-value super-block into one common form (ik_decoded):
// signed 8-bit levels, one integer scale per 16 values and a float factor, so that
//     value[i] = (d * sc[i / 16]) * q[i]
// reproduces the reference's dequantization bit for bit, and a dot product with q8_K
// activations is d * a.d * sum_g sc[g] * sum_{i in g} q[i] * a[i] in exact integer arithmetic.
#pragma once

#include "quants-common.h"

#include <cstdint>

// ---------------------------------------------------------------------------------------------
// Level tables (values of the non-linear grids; "+n" halves are the shifted grids)

extern const int8_t ik_iq2nl_values[8];     // 4 + 4 shifted
extern const int8_t ik_iq3nl_values[16];    // 8 + 8 shifted
extern const int8_t ik_iq4k_values[32];     // 16 (= iq4_nl grid) + 16 shifted
extern const int8_t ik_iq5nl_values[64];    // 32 + 32 shifted
extern const int8_t ik_iq6nl_values[128];   // 64 + 64 shifted (the int8 form used by dot products)
extern const uint16_t ik_iq2kl_values[32];  // pairs of iq3nl levels (low byte first)

// ---------------------------------------------------------------------------------------------
// Blocks (per 256 values). Types marked "row:" carry a per-row scale before their blocks.

// block_iq2_k .. block_iq6_k and the row-scaled block_iq4_ks, block_iq5_ks, block_iq2_ks and
// block_iq3_ks are declared in quants-blocks.h (included through quants-common.h), whose
// decoders the CUDA kernels share.

// row: f32 d. 32 16-bit words; each word's low bit is one bit of the 32-block's scale byte and
// its other 15 bits, "x ^ (x >> 1)" decoded, give 4 nibbles.
struct block_iq4_kss {
    uint32_t qs[32];
};
static_assert(sizeof(block_iq4_kss) == 128, "iq4_kss block size");

// row: f16 d
struct block_iq2_kl {
    uint16_t scales_h;
    uint8_t  scales_l[4];
    uint8_t  qs[64];
    uint8_t  qh[16];
};
static_assert(sizeof(block_iq2_kl) == 86, "iq2_kl block size");

// Trellis types (quants-kt.cpp). Row: f32 d. A 15/16-bit seed s gives a run of values
// v_m = (sum of the four bytes of (s * K^(m+1)) & 0x3f3f3f3f) - 126, m = 0.. (K = 0xCBAC1FED),
// i.e. integers in [-126, 126]; value = (d * scale) * v.
struct block_iq1_kt {
    uint8_t sh[8];    // per 32 values: low nibble iq4_k-grid scale index, high nibble seed bit 12 of its 4 runs
    uint8_t ql[32];   // seed bits 0..7 of each run of 8 values
    uint8_t qh[16];   // seed bits 8..11: low nibble runs 0..15, high nibble runs 16..31
};
static_assert(sizeof(block_iq1_kt) == 56, "iq1_kt block size");

struct block_iq2_kt {
    uint8_t scales[4];   // per 32 values: iq4_k-grid scale index (low nibbles blocks 0-3, high 4-7)
    uint8_t ql[64];      // 32 little-endian 16-bit seeds, one per 8 values
};
static_assert(sizeof(block_iq2_kt) == 68, "iq2_kt block size");

struct block_iq3_kt {
    uint8_t scales[4];   // per 32 values: unsigned 4-bit scale (low nibbles blocks 0-3, high 4-7)
    uint8_t ql[64];      // 32 16-bit seeds (magnitudes |v|)
    uint8_t qh[32];      // bit b of qh[p]: value p of 32-block b is negative
};
static_assert(sizeof(block_iq3_kt) == 100, "iq3_kt block size");

struct block_iq4_kt {
    uint8_t shb[32];   // 8 u32: bit 0 seed offset, bits 1-7 scale + 64, bits 8+3g.. seed bits 12-14 of run g
    uint8_t ql[64];    // seed bits 0..7 of each run of 4 values
    uint8_t qh[32];    // seed bits 8..11: low nibble runs 0..31, high nibble runs 32..63
};
static_assert(sizeof(block_iq4_kt) == 128, "iq4_kt block size");


// Row-interleaved blocks of 4 rows (quants-interleaved.cpp). Within a 32-value sub-block ib,
// the 64 bytes qs[64 ib ..] hold 4 bytes per row at offsets 0/16/32/48 + 4 k: low nibbles of the
// 0/32 groups are positions 0-3/4-7, high nibbles 8-11/12-15; the 16/48 groups likewise 16-31.
struct iq4_k_r4_block {
    ggml_fp16_t d[4];
    uint8_t     extra[8];      // bit ib of extra[k] / extra[k + 4]: shifted grid, first / second 16
    uint8_t     scales_h[16];
    uint8_t     scales_l[32];  // 6-bit scales of slot 8 ib + k (+ 4 for the second 16)
    uint8_t     qs[512];
};
static_assert(sizeof(iq4_k_r4_block) == 576, "iq4_k_r4 block size");

// row: 4 x f32 d (one per row of the group)
struct iq4_ks_r4_block {
    uint8_t scales[32];        // scales[4 ib + k], coded as in iq4_ks
    uint8_t qs[512];
};
static_assert(sizeof(iq4_ks_r4_block) == 544, "iq4_ks_r4 block size");

// ---------------------------------------------------------------------------------------------
// The common decoded form

struct ik_decoded {
    alignas(64) int8_t q[QK_K];
    int16_t sc[QK_K / 16];
    float   d;
};

// Decoders of one super-block (row_d: the row's scale for the row-scaled types, unused otherwise).
void ik_decode_iq2_k(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq3_k(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq4_k(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq5_k(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq6_k(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq4_ks(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq4_kss(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq5_ks(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq2_ks(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq3_ks(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq2_kl(const void * b, float row_d, ik_decoded & out);

typedef void (*ik_decode_t)(const void * b, float row_d, ik_decoded & out);

// Trellis types: Decoders into the common form (row_d: the row's f32 scale). The gemm uses the *_gemm forms,
// whose d carries the reference's inference-time factor (iq2_kt 1.05, iq3_kt 1.01).
void ik_decode_iq1_kt(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq2_kt(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq3_kt(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq4_kt(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq2_kt_gemm(const void * b, float row_d, ik_decoded & out);
void ik_decode_iq3_kt_gemm(const void * b, float row_d, ik_decoded & out);
constexpr float kIq2KtGemmFactor = 1.05f;
constexpr float kIq3KtGemmFactor = 1.01f;

// Layout of a type's row for the shared drivers: per-row scale kind and block size.
enum ik_row_scale { IK_ROW_NONE = 0, IK_ROW_F16 = 2, IK_ROW_F32 = 4 };

struct ik_row_format {
    ik_row_scale row_scale;
    size_t       block_bytes;
    ik_decode_t  decode;
};

// The row format of a non-trellis ik type (GGML_TYPE_IQ2_K .. IQ2_KL); nullptr for others.
const ik_row_format * ik_get_row_format(ggml_type type);

static inline float ik_row_scale_value(const ik_row_format & f, const void * row) {
    if (f.row_scale == IK_ROW_F32) {
        float d;
        std::memcpy(&d, row, 4);
        return d;
    }
    if (f.row_scale == IK_ROW_F16) {
        uint16_t h;
        std::memcpy(&h, row, 2);
        return GGML_FP16_TO_FP32(h);
    }
    return 0.0f;
}

// The same, for kernels that know the row format at compile time (Row: an ik_row_scale; Half:
// the fp16 conversion, F16C in the x86 kernels).
template <int Row, float (*Half)(uint16_t) = ggml_compute_fp16_to_fp32>
static inline float ik_row_scale_of(const void * row) {
    if constexpr (Row == IK_ROW_F32) {
        float d;
        std::memcpy(&d, row, 4);
        return d;
    } else if constexpr (Row == IK_ROW_F16) {
        uint16_t h;
        std::memcpy(&h, row, 2);
        return Half(h);
    } else {
        return 0.0f;
    }
}

// Exact integer dot of a decoded block with 256 q8_K levels: sum_g sc[g] * sum_{i in g} q[i] * a[i].
static inline int32_t ik_block_dot_scalar(const ik_decoded & db, const int8_t * a) {
    int32_t total = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
        int32_t s = 0;
        for (int i = 16 * g; i < 16 * g + 16; ++i) s += db.q[i] * a[i];
        total += s * db.sc[g];
    }
    return total;
}

// ---------------------------------------------------------------------------------------------
// Quantizers (quants-ik-quantize.cpp). Return bytes written, 0 on non-finite input.

size_t ik_quantize_iq2_k(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq3_k(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq4_k(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq5_k(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq6_k(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq4_ks(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq5_ks(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq2_ks(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq3_ks(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq2_kl(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq4_kss(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
// trellis types (quants-kt-quantize.cpp)
size_t ik_quantize_iq1_kt(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq2_kt(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq3_kt(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t ik_quantize_iq4_kt(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
// The trellis quantizers' seed search: the grid search (false, the default) or every run of the
// codebook (true). Both give the same seeds; the exhaustive one is for tests and timing.
void ik_kt_set_exhaustive(bool on);
