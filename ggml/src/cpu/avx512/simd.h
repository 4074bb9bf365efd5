// Small AVX512 helpers shared by the kernel files of this folder (static inline: each file keeps
// its own copy, compiled with the folder's flags; see register.h).
#pragma once

#include <cmath>
#include <immintrin.h>

// The four horizontal sums of a[0..3] at once (halves added, then a tree of pairwise adds): a
// third of the work of four separate reductions.
static inline void reduce4_ps(const __m512 (&a)[4], float * out) {
    __m256 s[4];
    for (int j = 0; j < 4; ++j) {
        s[j] = _mm256_add_ps(_mm512_castps512_ps256(a[j]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[j]), 1)));
    }
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(s[0], s[1]), _mm256_hadd_ps(s[2], s[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}

// e^x as in the AVX2 version: n*ln2 + r split, degree-6 polynomial, exponent via scalef.
static inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f), hi = _mm512_set1_ps(88.37626f);
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512 y = _mm512_scalef_ps(p, n);
    y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ), y);   // below range (and -inf): 0
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), _mm512_set1_ps(INFINITY));
}
