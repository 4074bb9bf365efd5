// Small AVX2 helpers shared by the kernel files of this folder (static inline: each file keeps
// its own copy, compiled with the folder's flags; see register.h).
#pragma once

#include <immintrin.h>

// The four horizontal sums of a[0..3] at once through a tree of pairwise adds.
static inline void reduce4_ps(const __m256 (&a)[4], float * out) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
