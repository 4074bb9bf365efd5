// Small AVX512 helpers shared by the kernel files of this folder (static inline: each file keeps
// its own copy, compiled with the folder's flags; see register.h).
#pragma once

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
