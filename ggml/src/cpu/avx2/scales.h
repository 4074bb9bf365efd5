// AVX2 helpers shared by the kernel files of this folder (internal linkage, see register.h).
#pragma once

#include <immintrin.h>

namespace {

// The 16 int16 group scales of s16 (groups 0..15) laid out for vpmaddwd after vpmaddubsw over 32
// values: out[k] holds group 2k in lanes 0-7 and group 2k+1 in lanes 8-15. Both 128-bit halves
// of the source hold groups 0-7 (k < 4) or 8-15 (k >= 4), and one byte shuffle broadcasts group
// 2k into the low half and group 2k+1 into the high half.
static inline void spread_scale_pairs(__m256i s16, __m256i * out) {
    const __m256i first = _mm256_permute2x128_si256(s16, s16, 0x00);
    const __m256i second = _mm256_permute2x128_si256(s16, s16, 0x11);
    for (int k = 0; k < 4; ++k) {
        const __m256i pick = _mm256_set_m128i(_mm_set1_epi16((short) (((4 * k + 3) << 8) | (4 * k + 2))),
                                              _mm_set1_epi16((short) (((4 * k + 1) << 8) | (4 * k))));
        out[k] = _mm256_shuffle_epi8(first, pick);
        out[k + 4] = _mm256_shuffle_epi8(second, pick);
    }
}

} // namespace
