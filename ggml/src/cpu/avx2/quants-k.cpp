// AVX2 gemm kernels of q2_K .. q6_K against q8_K activations (the fallback below AVX512).
//
// A weight block is decoded once per tile of up to 4 activation columns into the common form
// (unsigned levels, 16 group scales, 16 minimum terms; quants-k.h), the group scales expanded
// to the 16-bit lanes vpmaddubsw produces. Per column: vpmaddubsw (u8 x s8 -> s16 pairs; no
// saturation since u <= 63 and |a| <= 127), vpmaddwd with the scales, int32 adds; the minimum
// term from the activation's bsums. Floats once per block and column.
#include "avx2/register.h"
#include "cpu-traits.h"
#include "quants/quants-k.h"

#include <immintrin.h>

namespace {

struct expanded {
    k_block_decoded blk;
    alignas(32) int16_t s[8][16];   // scale of each 16-bit maddubs lane of 32-byte chunk k
};

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

using decode_fn = void (*)(const void *, k_block_decoded &);

template <decode_fn Decode, size_t BlockBytes, int C>
inline void row_times_columns(int64_t nb, const char * wrow, const char * x, size_t x_stride, float * dst,
                              size_t dst_stride) {
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    expanded e;
    for (int64_t b = 0; b < nb; ++b) {
        Decode(wrow + b * BlockBytes, e.blk);
        for (int k = 0; k < 8; ++k) {
            const __m128i lo = _mm_set1_epi16(e.blk.s[2 * k]), hi = _mm_set1_epi16(e.blk.s[2 * k + 1]);
            _mm256_store_si256((__m256i *) e.s[k], _mm256_set_m128i(hi, lo));
        }
        const __m256i mi = _mm256_loadu_si256((const __m256i *) e.blk.mi);
        for (int c = 0; c < C; ++c) {
            const block_q8_K * a = (const block_q8_K *) (x + c * x_stride) + b;
            __m256i sum = _mm256_setzero_si256();
            for (int k = 0; k < 8; ++k) {
                const __m256i u = _mm256_load_si256((const __m256i *) (e.blk.u + 32 * k));
                const __m256i prod = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *) (a->qs + 32 * k)));
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(prod, _mm256_load_si256((const __m256i *) e.s[k])));
            }
            const __m256i mins = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) a->bsums), mi);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(e.blk.d * a->d), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(e.blk.dm * a->d), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) dst[c * dst_stride] = hsum(acc[c]);
}

template <decode_fn Decode, size_t BlockBytes>
void gemm_k(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
            size_t dst_stride, int nr, int nc) {
    const int64_t nb = n / QK_K;
    constexpr int tile = 4;
    // Column tiles outside, rows inside: a tile's activations stay in L1 while the rows (a
    // gemm call's share of the weights) stream past them.
    int c = 0;
    for (; c + tile <= nc; c += tile) {
        const char * xc = (const char *) x + c * x_stride;
        for (int r = 0; r < nr; ++r) {
            row_times_columns<Decode, BlockBytes, tile>(nb, (const char *) w + r * w_stride, xc, x_stride,
                                                    dst + c * dst_stride + r, dst_stride);
        }
    }
    if (c == nc) return;
    const char * xc = (const char *) x + c * x_stride;
    for (int r = 0; r < nr; ++r) {
        const char * wrow = (const char *) w + r * w_stride;
        float * dc = dst + c * dst_stride + r;
        switch (nc - c) {
            case 1: row_times_columns<Decode, BlockBytes, 1>(nb, wrow, xc, x_stride, dc, dst_stride); break;
            case 2: row_times_columns<Decode, BlockBytes, 2>(nb, wrow, xc, x_stride, dc, dst_stride); break;
            default: row_times_columns<Decode, BlockBytes, 3>(nb, wrow, xc, x_stride, dc, dst_stride); break;
        }
    }
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_k_avx2() {
    ggml_cpu_register_gemm(GGML_TYPE_Q2_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_k<k_decode_q2_K, sizeof(block_q2_K)>);
    ggml_cpu_register_gemm(GGML_TYPE_Q3_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_k<k_decode_q3_K, sizeof(block_q3_K)>);
    ggml_cpu_register_gemm(GGML_TYPE_Q4_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_k<k_decode_q4_K, sizeof(block_q4_K)>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_k<k_decode_q5_K, sizeof(block_q5_K)>);
    ggml_cpu_register_gemm(GGML_TYPE_Q6_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_k<k_decode_q6_K, sizeof(block_q6_K)>);
}
