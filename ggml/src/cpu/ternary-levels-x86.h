// Levels of llama.cpp's ternary types (tq1_0, tq2_0) decoded in vectors (AVX2 instructions): the
// eight 32-value groups of a block as 32 signed bytes -1 / 0 / +1 each, in value order; and those
// of ik_llama.cpp's BitNet types (iq1_bn, iq2_bn) as codes 0..2, for avx2/quants-bitnet.cpp.
// avx2/quants-ik.cpp runs them through its ik block driver (one fp16 scale per block, so every
// sub-block scale is 1), and the AVX512 level takes that kernel too: the AVX512 ik driver stores
// levels + 128 and converts per-lane partial sums that carry the offset to float, which for
// levels of magnitude 1 left 5e-6 of the product (7.7e-5 of a 256-value row against the exact
// 1e-7 of the AVX2 kernel). Internal linkage, so any includer compiles its own copy with its
// flags. The layouts and the scalar decoders are in quants/quants-blocks.h.
#pragma once

#include "quants/quants-blocks.h"

#include <immintrin.h>

#include <cstring>

namespace {

// tq2_0: group g is bits 2 (g % 4) of bytes 32 (g / 4) .. 32 (g / 4) + 31, stored as level + 1.
inline void ternary_levels(const block_tq2_0 & b, __m256i * q) {
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (int h = 0; h < 2; ++h) {
        const __m256i bytes = _mm256_loadu_si256((const __m256i *) (b.qs + 32 * h));
        for (int l = 0; l < 4; ++l) q[4 * h + l] = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(bytes, 2 * l), m3), one);
    }
}

// Trits of 16 packed bytes held as 16-bit lanes, each lane taking trit n by its multiplier 3^n:
// the top of (byte * 3^n mod 256) * 3 over 256 (quants-blocks.h), 0..2.
inline __m256i tq1_0_trits16(__m256i bytes16, __m256i pow3) {
    const __m256i low = _mm256_and_si256(_mm256_mullo_epi16(bytes16, pow3), _mm256_set1_epi16(0xFF));
    return _mm256_srli_epi16(_mm256_mullo_epi16(low, _mm256_set1_epi16(3)), 8);
}

// Two runs of 16 trits (0..2) in 16-bit lanes -> 32 levels (-1..1), first then second.
inline __m256i tq1_0_pack(__m256i first, __m256i second) {
    const __m256i packed = _mm256_packus_epi16(first, second);   // per 128-bit lane: first 8, second 8
    return _mm256_sub_epi8(_mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)), _mm256_set1_epi8(1));
}

// tq1_0: groups 0..4 are trits 0..4 of qs[0..31]; the 16-byte run qs[32..47] gives values
// 160 + 16 n + m (trit n of qs[32 + m]); qh gives the last 16, value 240 + 4 n + m = trit n of qh[m].
inline void ternary_levels(const block_tq1_0 & b, __m256i * q) {
    const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *) b.qs));
    const __m256i hi = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *) (b.qs + 16)));
    const __m256i run16 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *) (b.qs + 32)));
    int pow3 = 1;
    __m256i p[5];
    for (int n = 0; n < 5; ++n, pow3 *= 3) {
        p[n] = _mm256_set1_epi16((short) pow3);
        q[n] = tq1_0_pack(tq1_0_trits16(lo, p[n]), tq1_0_trits16(hi, p[n]));
    }
    q[5] = tq1_0_pack(tq1_0_trits16(run16, p[0]), tq1_0_trits16(run16, p[1]));
    q[6] = tq1_0_pack(tq1_0_trits16(run16, p[2]), tq1_0_trits16(run16, p[3]));
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    // lane 4 n + m: qh[m] with multiplier 3^n
    const __m256i qh16 = _mm256_cvtepu8_epi16(_mm_set1_epi32((int) qh));
    const __m256i pow_qh = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    q[7] = tq1_0_pack(tq1_0_trits16(run16, p[4]), tq1_0_trits16(qh16, pow_qh));
}

// ik_llama.cpp's BitNet types (quants-blocks.h): the 64 levels of a block as two vectors of 32
// codes 0..2 (level + 1; iq2_bn's unused code 3 stays 3), values 32 c .. 32 c + 31 in q[c].

// iq2_bn: byte j holds values j + 16 s at bits 2 s, so one 16-byte load broadcast to both halves
// and shifted per 64-bit lane (0 / 2 for values 0-31, 4 / 6 for 32-63) gives every code in place.
inline void bitnet_codes(const block_iq2_bn & b, __m256i * q) {
    const __m256i bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) b.qs));
    const __m256i m3 = _mm256_set1_epi8(3);
    q[0] = _mm256_and_si256(_mm256_srlv_epi64(bytes, _mm256_setr_epi64x(0, 0, 2, 2)), m3);
    q[1] = _mm256_and_si256(_mm256_srlv_epi64(bytes, _mm256_setr_epi64x(4, 4, 6, 6)), m3);
}

// iq1_bn: value v of the block is trit j of byte k (0..12) with its multiplier 3^(4 - j)
// (kiln_iq1_bn_level). Per 32 values the bytes are gathered by one vpshufb of the block (its 13
// bytes in a register, not read past: the last block of a row may end the buffer) and each lane takes its
// trit by tq1_0_trits16 with its own multiplier.
struct iq1_bn_lanes {
    // per 32-value chunk c: byte of each value, and its multiplier (16-bit lanes, two halves)
    alignas(32) int8_t byte[2][32];
    alignas(32) int16_t mult[2][32];
    constexpr iq1_bn_lanes() : byte(), mult() {
        for (int v = 0; v < 64; ++v) {
            const int g = v / 16, p = v % 16, j = p == 15 ? g : p % 5;
            int m = 1;
            for (int i = 0; i < 4 - j; ++i) m *= 3;
            byte[v / 32][v % 32] = (int8_t) (p == 15 ? 12 : 3 * g + p / 5);
            mult[v / 32][v % 32] = (int16_t) m;
        }
    }
};

inline void bitnet_codes(const block_iq1_bn & b, __m256i * q) {
    static constexpr iq1_bn_lanes lanes;
    // ql by a masked load of three dwords (never past the block), extra inserted: a 13-byte copy to
    // the stack and a 16-byte load stalled on store forwarding (iq1_bn batch 1 at 4.8 CPU ms
    // where iq2_bn took 0.7, K = M = 4096)
    const __m128i ql = _mm_maskload_epi32((const int *) b.ql, _mm_setr_epi32(-1, -1, -1, 0));
    const __m256i bytes = _mm256_broadcastsi128_si256(_mm_insert_epi8(ql, b.extra, 12));
    for (int c = 0; c < 2; ++c) {
        const __m256i g = _mm256_shuffle_epi8(bytes, _mm256_load_si256((const __m256i *) lanes.byte[c]));
        const __m256i lo = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(g));
        const __m256i hi = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(g, 1));
        const __m256i t0 = tq1_0_trits16(lo, _mm256_load_si256((const __m256i *) lanes.mult[c]));
        const __m256i t1 = tq1_0_trits16(hi, _mm256_load_si256((const __m256i *) (lanes.mult[c] + 16)));
        // tq1_0_pack subtracts 1 (levels); codes keep it
        q[c] = _mm256_add_epi8(tq1_0_pack(t0, t1), _mm256_set1_epi8(1));
    }
}

} // namespace
