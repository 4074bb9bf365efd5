// Seeds of the trellis types' runs assembled in 8 int32 lanes (AVX2 instructions), and the small
// helpers of the gemv kernels (scale nibbles, iq3_kt's sign bytes in packed order, the powers of
// K), shared by the avx2/ and avx512/ trellis decoders; each includer compiles its own copy with
// its flags (internal linkage). The offsets (4096, and iq4_kt's + 32768) are included.
#pragma once

#include "quants/quants-ik.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

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

// iq4_kt runs 16v .. 16v+15 (32-blocks 2v, 2v+1) as two vectors of 8 seeds (out[0]: runs 16v ..
// 16v+7). The seed's low 16 bits (ql | qh nibble << 8 | 3 bits of the shb word << 12 | its bit 0
// << 15) are assembled 16 runs per vector in int16 lanes, 128-bit lane L holding 32-block 2v + L,
// then widened and offset: about half the instructions per run of iq4_kt_seeds8.
inline void iq4_kt_seeds16(const block_iq4_kt & b, int v, __m256i * out) {
    const __m256i ql = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *) (b.ql + 16 * v)));
    const __m256i qh = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *) (b.qh + 16 * (v % 2))));
    int64_t w2;
    std::memcpy(&w2, b.shb + 8 * v, 8);
    const __m256i w = _mm256_set1_epi64x(w2);   // bytes 4L .. 4L+3: the word of 32-block 2v + L
    // word i of lane L: bytes k, k+1 of its block's word, k = 1 + 3i / 8 (zero past byte 3), in
    // which the 3 seed bits of run i (bits 8 + 3i of the word) start at bit 3i + 8 - 8k; a
    // multiply by 2^(12 - that) moves them to bits 12-14
    const __m256i win = _mm256_setr_epi8(1, 2, 1, 2, 1, 2, 2, 3, 2, 3, 2, 3, 3, -1, 3, -1, 5, 6, 5, 6, 5, 6, 6, 7, 6, 7, 6, 7, 7, -1, 7, -1);
    const __m256i up = _mm256_setr_epi16(4096, 512, 64, 2048, 256, 32, 1024, 128, 4096, 512, 64, 2048, 256, 32, 1024, 128);
    const __m256i top = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(w, win), up), _mm256_set1_epi16(0x7000));
    // bit 0 of the word (byte 0 into the high byte of every word of its lane) to bit 15
    const __m256i b0 = _mm256_setr_epi8(-1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 4, -1, 4, -1, 4, -1, 4, -1, 4, -1, 4, -1, 4, -1, 4);
    const __m256i top15 = _mm256_or_si256(top, _mm256_slli_epi16(_mm256_shuffle_epi8(w, b0), 7));
    const __m256i nib = _mm256_and_si256(_mm256_slli_epi16(qh, 8 - 4 * (v / 2)), _mm256_set1_epi16(0x0F00));
    const __m256i s16 = _mm256_or_si256(_mm256_or_si256(ql, nib), top15);
    out[0] = _mm256_add_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(s16)), _mm256_set1_epi32(kKtSeedOffset));
    out[1] = _mm256_add_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(s16, 1)), _mm256_set1_epi32(kKtSeedOffset));
}

// iq2_kt / iq3_kt: n4 (4 or 8) little-endian 16-bit seeds from ql + 2 * first, in lanes 0 ..
inline __m256i kt_word_seeds(const uint8_t * ql, int first, int n4) {
    const __m128i w = n4 == 8 ? _mm_loadu_si128((const __m128i *) (ql + 2 * first)) : _mm_loadl_epi64((const __m128i *) (ql + 2 * first));
    return _mm256_add_epi32(_mm256_cvtepu16_epi32(w), _mm256_set1_epi32(kKtSeedOffset));
}

// iq2_kt / iq3_kt: the 8 scale nibbles of a block's 4 scale bytes, 32-block j's in byte j.
inline uint64_t kt_scale_nibbles(const uint8_t * scales) {
    uint32_t v;
    std::memcpy(&v, scales, 4);
    return (uint64_t) (v & 0x0F0F0F0Fu) | (uint64_t) ((v >> 4) & 0x0F0F0F0Fu) << 32;
}

// Byte 4d + i of each 128-bit lane <- byte 4i + d.
inline __m128i kt_transpose4x4_pattern() { return _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15); }

// iq3_kt's sign bytes in the packed order of the gemv kernels (gemv-kt.h): byte 4d + i is
// qh[8i + 4p + d], the byte whose bit c is the sign of value 8i + 4p + d (run i, step 4p + d) of
// 32-block c.
inline __m128i iq3_kt_packed_signs(const block_iq3_kt & b, int p) {
    const __m128 q0 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *) b.qh));
    const __m128 q1 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *) (b.qh + 16)));
    // dword i: qh[8i + 4p .. 8i + 4p + 3]
    const __m128 g = p == 0 ? _mm_shuffle_ps(q0, q1, _MM_SHUFFLE(2, 0, 2, 0)) : _mm_shuffle_ps(q0, q1, _MM_SHUFFLE(3, 1, 3, 1));
    return _mm_shuffle_epi8(_mm_castps_si128(g), kt_transpose4x4_pattern());
}

// T::kSigned where the type has it (iq3_kt), else false.
template <typename T, typename = void>
struct kt_signed : std::false_type {};
template <typename T>
struct kt_signed<T, std::void_t<decltype(T::kSigned)>> : std::bool_constant<T::kSigned> {};

// pw[m] = K^(m+1), the multiplier of a run's value m, broadcast by set1.
template <int N, typename V, typename Set1>
void kt_powers(V * pw, Set1 set1) {
    uint32_t v = 0xCBAC1FEDu;
    for (int m = 0; m < N; ++m) {
        pw[m] = set1((int) v);
        v *= 0xCBAC1FEDu;
    }
}

} // namespace
