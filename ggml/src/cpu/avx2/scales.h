// AVX2 helpers shared by the kernel files of this folder (internal linkage, see register.h).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

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

// The 16 signed 6-bit scales of a q3_K block (minus 32) as int8, without the store and reload
// of a scalar unpack (four 32-bit stores read back as one 128-bit load stall store forwarding).
// Scale j's low 4 bits are nibble j / 8 of byte j % 8 (bytes 0-7), its top 2 bits bit pair
// j / 4 of byte 8 + j % 4. In 32-bit words u0 u1 u2 of the 12 bytes, output word w (4 scales)
// is ((u[w & 1] >> 4 * (w / 2)) & 0x0f0f0f0f) | (((u2 >> 2w) & 0x03030303) << 4).
static inline __m128i q3_K_scales_epi8(const uint8_t * packed) {
    uint32_t u2;
    std::memcpy(&u2, packed + 8, 4);   // 12 bytes: a 16-byte load could pass the block's end
    const __m128i lo = _mm_loadl_epi64((const __m128i *) packed);
    const __m128i low4 = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(lo, 0x44), _mm_setr_epi32(0, 0, 4, 4)),
                                       _mm_set1_epi8(0x0f));
    const __m128i top2 = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int) u2), _mm_setr_epi32(0, 2, 4, 6)),
                                       _mm_set1_epi8(0x03));
    return _mm_sub_epi8(_mm_or_si128(low4, _mm_slli_epi32(top2, 4)), _mm_set1_epi8(32));
}

// Per-block values that every product reads (a sub-block's scale in every lane, a block's d)
// are best stored once and read back with broadcasts from memory: vpbroadcastd / vbroadcastss
// from memory are plain loads, where spreading them in registers takes a shuffle each on the
// vector ports the products need. The pointer returned hides that it points at `stored` (an
// empty asm that reads the array), so the compiler keeps the store and the loads instead of
// forwarding the stored vector in registers and shuffling again.
template <typename T, size_t N>
static inline const T * launder(const T (&stored)[N]) {
    const T * p = stored;
    __asm__("" : "+r"(p) : "m"(stored));
    return p;
}

// 8 int32 lanes of int16 values, each repeated in both halves of its word: the form one
// vpbroadcastd turns into that value in all 16 int16 lanes.
static inline __m256i words_of_int16(__m256i v32) {
    return _mm256_or_si256(_mm256_and_si256(v32, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v32, 16));
}

static inline void spread_scale_pairs(__m256i s16, __m256i * out) {
    const scale_halves h = split_scale_halves(s16);
    for (int k = 0; k < 8; ++k) out[k] = scale_pair_of(h, k);
}

} // namespace
