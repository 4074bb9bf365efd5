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

// The grid search's ranges: 32 runs per step from any start (unaligned loads), the last step 16
// when no more are left (a range averages about 35 runs). N = 4 or 8 (the types' run lengths):
// the positions unrolled with their target and weight in registers; 0: any n.
template <int N>
bool kt_range_errors_n(const int8_t * cb, size_t stride, int n, int count, const float * t, const float * w, float thr, float * err) {
    const int np = N ? N : n;
    __m512 tm[8], wm[8];
    if constexpr (N != 0) {
        for (int m = 0; m < N; ++m) {
            tm[m] = _mm512_set1_ps(t[m]);
            wm[m] = _mm512_set1_ps(w[m]);
        }
    }
    const __m512 th = _mm512_set1_ps(thr);
    __mmask16 near = 0;
    int s = 0;
    for (; s + 16 < count; s += 32) {
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int m = 0; m < np; ++m) {
            const __m256i c8 = _mm256_loadu_si256((const __m256i *) (cb + m * stride + s));
            const __m512 tv = N ? tm[m] : _mm512_set1_ps(t[m]), wv = N ? wm[m] : _mm512_set1_ps(w[m]);
            const __m512 c0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(c8)));
            const __m512 c1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(c8, 1)));
            const __m512 d0 = _mm512_sub_ps(tv, c0), d1 = _mm512_sub_ps(tv, c1);
            acc0 = _mm512_fmadd_ps(_mm512_mul_ps(wv, d0), d0, acc0);
            acc1 = _mm512_fmadd_ps(_mm512_mul_ps(wv, d1), d1, acc1);
        }
        _mm512_storeu_ps(err + s, acc0);
        _mm512_storeu_ps(err + s + 16, acc1);
        // lanes past count hold other cells' runs: not part of the range
        const int left = count - s;
        const __mmask16 k1 = left >= 32 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (left - 16)) - 1);
        near |= _mm512_cmp_ps_mask(acc0, th, _CMP_LE_OQ) | _mm512_mask_cmp_ps_mask(k1, acc1, th, _CMP_LE_OQ);
    }
    if (s < count) {
        __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int m = 0; m < np; ++m) {
            const __m512 tv = N ? tm[m] : _mm512_set1_ps(t[m]), wv = N ? wm[m] : _mm512_set1_ps(w[m]);
            const __m512 c = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) (cb + m * stride + s))));
            const __m512 d = _mm512_sub_ps(tv, c);
            acc = _mm512_fmadd_ps(_mm512_mul_ps(wv, d), d, acc);
        }
        _mm512_storeu_ps(err + s, acc);
        near |= _mm512_mask_cmp_ps_mask((__mmask16) ((1u << (count - s)) - 1), acc, th, _CMP_LE_OQ);
    }
    return near != 0;
}

bool kt_range_errors_avx512(const int8_t * cb, size_t stride, int n, int count, const float * t, const float * w, float thr,
                            float * err) {
    if (n == 8) return kt_range_errors_n<8>(cb, stride, n, count, t, w, thr, err);
    if (n == 4) return kt_range_errors_n<4>(cb, stride, n, count, t, w, thr, err);
    return kt_range_errors_n<0>(cb, stride, n, count, t, w, thr, err);
}

} // namespace

void ggml_cpu_register_kt_search_avx512() {
    ggml_cpu_register_kt_errors(GGML_CPU_ISA_AVX512, kt_errors_avx512);
    ggml_cpu_register_kt_range_errors(GGML_CPU_ISA_AVX512, kt_range_errors_avx512);
}
