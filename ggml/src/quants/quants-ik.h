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

// block_iq2_k .. block_iq6_k, the row-scaled block_iq4_ks, block_iq5_ks, block_iq2_ks,
// block_iq3_ks, block_iq4_kss and block_iq2_kl (quants-blocks.h, included through
// quants-common.h) and the trellis blocks block_iq1_kt .. block_iq4_kt (quants-blocks-kt.h) are
// declared with the decoders the CUDA kernels share.

// The row-interleaved iq4_k_r4 / iq4_ks_r4 blocks are in quants-blocks-interleaved.h.

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
constexpr float kIq2KtGemmFactor = kiln_matmul_row_factor(GGML_TYPE_IQ2_KT);
constexpr float kIq3KtGemmFactor = kiln_matmul_row_factor(GGML_TYPE_IQ3_KT);

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
