// The trellis (KT) quantizers' seed search (cpu-traits.h, ggml_kt_errors_t), 32 seeds per step
// in two accumulators (FMA latency): the weighted squared distance of a target run to every run
// of the codebook, stored as int8 run-position major (the whole book stays in cache).
#include "avx512/register.h"
#include "cpu-traits.h"

#include <immintrin.h>

namespace {

float kt_errors_avx512(const int8_t * cb, int count, int n, const float * t, const float * w, float * err, float * group_min) {
    __m512 mn = _mm512_set1_ps(__builtin_inff());
    for (int s = 0; s < count; s += 32) {
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        for (int m = 0; m < n; ++m) {
            const int8_t * row = cb + (size_t) m * count + s;
            const __m512 tm = _mm512_set1_ps(t[m]), wm = _mm512_set1_ps(w[m]);
            const __m512 c0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) row)));
            const __m512 c1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) (row + 16))));
            const __m512 d0 = _mm512_sub_ps(tm, c0), d1 = _mm512_sub_ps(tm, c1);
            acc0 = _mm512_fmadd_ps(_mm512_mul_ps(wm, d0), d0, acc0);
            acc1 = _mm512_fmadd_ps(_mm512_mul_ps(wm, d1), d1, acc1);
        }
        _mm512_storeu_ps(err + s, acc0);
        _mm512_storeu_ps(err + s + 16, acc1);
        const __m512 m = _mm512_min_ps(acc0, acc1);
        group_min[s / 32] = _mm512_reduce_min_ps(m);
        mn = _mm512_min_ps(mn, m);
    }
    return _mm512_reduce_min_ps(mn);
}

// The grid search's ranges: 32 runs per step from any start (unaligned loads), whole steps.
float kt_range_errors_avx512(const int8_t * cb, size_t stride, int n, int count, const float * t, const float * w, float * err) {
    __m512 mn = _mm512_set1_ps(__builtin_inff());
    for (int s = 0; s < count; s += 32) {
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        for (int m = 0; m < n; ++m) {
            const __m256i c8 = _mm256_loadu_si256((const __m256i *) (cb + m * stride + s));
            const __m512 tm = _mm512_set1_ps(t[m]), wm = _mm512_set1_ps(w[m]);
            const __m512 c0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(c8)));
            const __m512 c1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(c8, 1)));
            const __m512 d0 = _mm512_sub_ps(tm, c0), d1 = _mm512_sub_ps(tm, c1);
            acc0 = _mm512_fmadd_ps(_mm512_mul_ps(wm, d0), d0, acc0);
            acc1 = _mm512_fmadd_ps(_mm512_mul_ps(wm, d1), d1, acc1);
        }
        _mm512_storeu_ps(err + s, acc0);
        _mm512_storeu_ps(err + s + 16, acc1);
        // lanes past count hold other cells' runs: not part of the minimum
        const int left = count - s;
        const __mmask16 k0 = left >= 16 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << left) - 1);
        const __mmask16 k1 = left >= 32 ? (__mmask16) 0xFFFF : left <= 16 ? (__mmask16) 0 : (__mmask16) ((1u << (left - 16)) - 1);
        mn = _mm512_mask_min_ps(mn, k0, mn, acc0);
        mn = _mm512_mask_min_ps(mn, k1, mn, acc1);
    }
    return _mm512_reduce_min_ps(mn);
}

} // namespace

void ggml_cpu_register_kt_search_avx512() {
    ggml_cpu_register_kt_errors(GGML_CPU_ISA_AVX512, kt_errors_avx512);
    ggml_cpu_register_kt_range_errors(GGML_CPU_ISA_AVX512, kt_range_errors_avx512);
}
