// AVX2 gemm kernels of the lattice i-quants (IQ1_S/M, IQ2_XXS/XS/S, IQ3_XXS/S) against q8_K.
// Each weight block is decoded once into signed int8 weights and int16 scales (quants-iq.h),
// then reused for every activation column: |w| x sign(a, w) with maddubs, scales with madd,
// int32 accumulation. The per-block integer sums equal the scalar kernels' exactly, and the
// float accumulation is the same fma chain, so results match the scalar path bit for bit.
#include "avx2/register.h"
#include "quants/quants-iq.h"
#include "cpu-traits.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

namespace {

using namespace ggml_iq;

struct prepared_block {
    __m256i abs_w[QK_K / 32];
    __m256i sign_w[QK_K / 32];
    __m256i scales[QK_K / 32];   // int16: lanes 0-7 scale of the first 16 weights, 8-15 the next
};

inline void prepare(const decoded_block & db, prepared_block & pb) {
    for (int k = 0; k < QK_K / 32; ++k) {
        // built from 64-bit lanes: decode wrote 8 bytes at a time, and a 32-byte load of those
        // fresh stores would miss store forwarding
        uint64_t q[4];
        std::memcpy(q, db.q + 32 * k, sizeof(q));
        const __m256i w = _mm256_set_epi64x((long long) q[3], (long long) q[2], (long long) q[1], (long long) q[0]);
        pb.sign_w[k] = w;
        pb.abs_w[k]  = _mm256_sign_epi8(w, w);
        pb.scales[k] = _mm256_set_m128i(_mm_set1_epi16(db.sc[2 * k + 1]), _mm_set1_epi16(db.sc[2 * k]));
    }
}

inline int32_t block_dot(const prepared_block & pb, const int8_t * q8) {
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < QK_K / 32; ++k) {
        const __m256i a = _mm256_loadu_si256((const __m256i *) (q8 + 32 * k));
        const __m256i p = _mm256_maddubs_epi16(pb.abs_w[k], _mm256_sign_epi8(a, pb.sign_w[k]));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pb.scales[k]));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

template <typename Block, void (*decode)(const Block &, decoded_block &)>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride,
          float * dst, size_t dst_stride, int nr, int nc, float factor) {
    const int64_t nb = n / QK_K;
    decoded_block db;
    prepared_block pb;
    for (int r = 0; r < nr; ++r) {
        const auto * b = (const Block *) ((const char *) w + r * w_stride);
        for (int c = 0; c < nc; ++c) dst[c * dst_stride + r] = 0.0f;
        for (int64_t i = 0; i < nb; ++i) {
            decode(b[i], db);
            prepare(db, pb);
            for (int c = 0; c < nc; ++c) {
                const auto & a = ((const block_q8_K *) ((const char *) x + c * x_stride))[i];
                float & acc = dst[c * dst_stride + r];
                acc = std::fma(db.d * a.d, (float) block_dot(pb, a.qs), acc);
            }
        }
        for (int c = 0; c < nc; ++c) dst[c * dst_stride + r] *= factor;
    }
}

#define IQ_GEMM(name, Block, decode, factor)                                                             \
    void name(int64_t n, const void * w, size_t ws, const void * x, size_t xs, float * d, size_t ds, int nr, \
              int nc) {                                                                                   \
        gemm<Block, decode>(n, w, ws, x, xs, d, ds, nr, nc, factor);                                      \
    }

IQ_GEMM(gemm_iq2_xxs, block_iq2_xxs, decode_iq2_xxs, IQ2_DOT_FACTOR)
IQ_GEMM(gemm_iq2_xs, block_iq2_xs, decode_iq2_xs, IQ2_DOT_FACTOR)
IQ_GEMM(gemm_iq2_s, block_iq2_s, decode_iq2_s, IQ2_DOT_FACTOR)
IQ_GEMM(gemm_iq3_xxs, block_iq3_xxs, decode_iq3_xxs, IQ3XXS_DOT_FACTOR)
IQ_GEMM(gemm_iq3_s, block_iq3_s, decode_iq3_s, IQ3S_DOT_FACTOR)
IQ_GEMM(gemm_iq1_s, block_iq1_s, decode_iq1_s, IQ1_DOT_FACTOR)
IQ_GEMM(gemm_iq1_m, block_iq1_m, decode_iq1_m, IQ1_DOT_FACTOR)

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_iq_avx2() {
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_XXS, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_iq2_xxs);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_XS, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_iq2_xs);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_S, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_iq2_s);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_XXS, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_iq3_xxs);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_S, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_iq3_s);
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_S, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_iq1_s);
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_M, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_iq1_m);
}
