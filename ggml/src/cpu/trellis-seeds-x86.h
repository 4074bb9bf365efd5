// Seeds of the trellis types' runs assembled in 8 int32 lanes (AVX2 instructions), shared by the
// avx2/ and avx512/ trellis decoders; each includer compiles its own copy with its flags
// (internal linkage). The offsets (4096, and iq4_kt's + 32768) are included.
#pragma once

#include "quants/quants-ik.h"

#include <immintrin.h>

#include <cstring>

namespace {

constexpr uint32_t kKtSeedOffset = 4096;

// iq1_kt runs 8t .. 8t+7 (32-blocks 2t, 2t+1): seed of run r = ql[r] | nibble r / 16 of
// qh[r % 16] << 8 | bit 4 + r % 4 of sh[r / 4] << 12.
inline __m256i iq1_kt_seeds8(const block_iq1_kt & b, int t) {
    const __m256i ql = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.ql + 8 * t)));
    const __m256i qh = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.qh + 8 * (t % 2))));
    const __m256i sh = _mm256_set_m128i(_mm_set1_epi32(b.sh[2 * t + 1]), _mm_set1_epi32(b.sh[2 * t]));
    const __m256i sh_bits = _mm256_setr_epi32(4, 5, 6, 7, 4, 5, 6, 7);
    __m256i seeds = _mm256_or_si256(ql, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 4 * (t / 2)), _mm256_set1_epi32(0xF)), 8));
    seeds = _mm256_or_si256(seeds, _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(sh, sh_bits), _mm256_set1_epi32(1)), 12));
    return _mm256_add_epi32(seeds, _mm256_set1_epi32(kKtSeedOffset));
}

// iq4_kt runs 8ib .. 8ib+7 (32-block ib): seed of run r = ql[r] | nibble r / 32 of qh[r % 32] << 8
// | bits 8 + 3 (r % 8) .. of the block's u32 shb word << 12, plus 32768 where its bit 0 is set.
inline __m256i iq4_kt_seeds8(const block_iq4_kt & b, int ib) {
    uint32_t shb;
    std::memcpy(&shb, b.shb + 4 * ib, 4);
    const __m256i g_bits = _mm256_setr_epi32(8, 11, 14, 17, 20, 23, 26, 29);
    const __m256i ql = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.ql + 8 * ib)));
    const __m256i qh = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.qh + 8 * (ib % 4))));
    const __m256i top = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int) shb), g_bits), _mm256_set1_epi32(7));
    const __m256i seeds = _mm256_or_si256(ql, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 4 * (ib / 4)), _mm256_set1_epi32(0xF)), 8));
    return _mm256_add_epi32(_mm256_or_si256(seeds, _mm256_slli_epi32(top, 12)),
                            _mm256_set1_epi32((int) (shb & 1 ? kKtSeedOffset + 32768 : kKtSeedOffset)));
}

// iq2_kt / iq3_kt: n4 (4 or 8) little-endian 16-bit seeds from ql + 2 * first, in lanes 0 ..
inline __m256i kt_word_seeds(const uint8_t * ql, int first, int n4) {
    const __m128i w = n4 == 8 ? _mm_loadu_si128((const __m128i *) (ql + 2 * first)) : _mm_loadl_epi64((const __m128i *) (ql + 2 * first));
    return _mm256_add_epi32(_mm256_cvtepu16_epi32(w), _mm256_set1_epi32(kKtSeedOffset));
}

} // namespace
