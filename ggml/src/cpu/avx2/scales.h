// AVX2 helpers shared by the kernel files of this folder (internal linkage, see register.h).
#pragma once

#include <immintrin.h>

namespace {

// The 16 int16 group scales of s16 (groups 0..15) laid out for vpmaddwd after vpmaddubsw over 32
// values: part k holds group 2k in lanes 0-7 and group 2k+1 in lanes 8-15. Both 128-bit halves
// of the source hold groups 0-7 (k < 4) or 8-15 (k >= 4): `first` and `second` below, and one
// byte shuffle broadcasts group 2k into the low half and group 2k+1 into the high half.
struct scale_halves {
    __m256i first, second;
};

static inline scale_halves split_scale_halves(__m256i s16) {
    return { _mm256_permute2x128_si256(s16, s16, 0x00), _mm256_permute2x128_si256(s16, s16, 0x11) };
}

static inline __m256i scale_pair_of(const scale_halves & h, int k) {
    const int j = k & 3;
    const __m256i pick = _mm256_set_m128i(_mm_set1_epi16((short) (((4 * j + 3) << 8) | (4 * j + 2))),
                                          _mm_set1_epi16((short) (((4 * j + 1) << 8) | (4 * j))));
    return _mm256_shuffle_epi8(k < 4 ? h.first : h.second, pick);
}

static inline void spread_scale_pairs(__m256i s16, __m256i * out) {
    const scale_halves h = split_scale_halves(s16);
    for (int k = 0; k < 8; ++k) out[k] = scale_pair_of(h, k);
}

} // namespace
