// The trellis (KT) quantizers' seed search (cpu-traits.h, ggml_kt_errors_t), 8 seeds per step:
// the weighted squared distance of a target run to every run of the codebook, which is stored as
// int8 run-position major so that one load takes position m of 8 consecutive seeds and the
// whole book stays in cache.
#include "avx2/register.h"
#include "cpu-traits.h"

#include <immintrin.h>

namespace {

float hmin(__m256 v) {
    __m128 m4 = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m4 = _mm_min_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_min_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

float kt_errors_avx2(const int8_t * cb, int count, int n, const float * t, const float * w, float * err, float * group_min) {
    __m256 mn = _mm256_set1_ps(__builtin_inff());
    for (int s0 = 0; s0 < count; s0 += 32) {
        __m256 gm = _mm256_set1_ps(__builtin_inff());
        for (int s = s0; s < s0 + 32; s += 8) {
            __m256 acc = _mm256_setzero_ps();
            for (int m = 0; m < n; ++m) {
                const __m128i c8 = _mm_loadl_epi64((const __m128i *) (cb + (size_t) m * count + s));
                const __m256 c = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c8));
                const __m256 d = _mm256_sub_ps(_mm256_set1_ps(t[m]), c);
                acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(w[m]), d), d, acc);
            }
            _mm256_storeu_ps(err + s, acc);
            gm = _mm256_min_ps(gm, acc);
        }
        group_min[s0 / 32] = hmin(gm);
        mn = _mm256_min_ps(mn, gm);
    }
    return hmin(mn);
}

// The grid search's ranges: 16 runs per step (two accumulators) from any start, whole steps.
// N = 4 or 8 (the types' run lengths): the positions unrolled with their target and weight in
// registers; 0: any n.
template <int N>
bool kt_range_errors_n(const int8_t * cb, size_t stride, int n, int count, const float * t, const float * w, float thr, float * err) {
    const int np = N ? N : n;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 th = _mm256_set1_ps(thr);
    __m256 near = _mm256_setzero_ps();
    for (int s = 0; s < count; s += 16) {
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int m = 0; m < np; ++m) {
            const __m128i c8 = _mm_loadu_si128((const __m128i *) (cb + m * stride + s));
            const __m256 tm = _mm256_set1_ps(t[m]), wm = _mm256_set1_ps(w[m]);
            const __m256 c0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c8));
            const __m256 c1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(c8, c8)));
            const __m256 d0 = _mm256_sub_ps(tm, c0), d1 = _mm256_sub_ps(tm, c1);
            acc0 = _mm256_fmadd_ps(_mm256_mul_ps(wm, d0), d0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_mul_ps(wm, d1), d1, acc1);
        }
        _mm256_storeu_ps(err + s, acc0);
        _mm256_storeu_ps(err + s + 8, acc1);
        // lanes past count hold other cells' runs: not part of the range
        const __m256i left = _mm256_set1_epi32(count - s);
        const __m256 in0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(left, lane));
        const __m256 in1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(left, _mm256_add_epi32(lane, _mm256_set1_epi32(8))));
        near = _mm256_or_ps(near, _mm256_and_ps(in0, _mm256_cmp_ps(acc0, th, _CMP_LE_OQ)));
        near = _mm256_or_ps(near, _mm256_and_ps(in1, _mm256_cmp_ps(acc1, th, _CMP_LE_OQ)));
    }
    return _mm256_movemask_ps(near) != 0;
}

bool kt_range_errors_avx2(const int8_t * cb, size_t stride, int n, int count, const float * t, const float * w, float thr,
                          float * err) {
    if (n == 8) return kt_range_errors_n<8>(cb, stride, n, count, t, w, thr, err);
    if (n == 4) return kt_range_errors_n<4>(cb, stride, n, count, t, w, thr, err);
    return kt_range_errors_n<0>(cb, stride, n, count, t, w, thr, err);
}

} // namespace

void ggml_cpu_register_kt_search_avx2() {
    ggml_cpu_register_kt_errors(GGML_CPU_ISA_AVX2, kt_errors_avx2);
    ggml_cpu_register_kt_range_errors(GGML_CPU_ISA_AVX2, kt_range_errors_avx2);
}
