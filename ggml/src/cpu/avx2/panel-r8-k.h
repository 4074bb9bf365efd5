// Group decoders (panel-r8.h) of the interleaved k-quants: q2_k_r4, q3_k_r4, q4_k_r4, q5_k_r4,
// q6_k_r4, two 4-row groups per 8 lanes. Their activations are q8_K, as for the plain twins.
#pragma once

#include "avx2/panel-r8.h"

namespace {
namespace kiln_panel {

// q4_k_r4 / q5_k_r4 coefficients of 32-value sub-block ib: row k's 6-bit scale and min sit in
// slot 4 ib + k, low 4 bits in scales_l (scale: low nibble, min: high), top 2 bits of each in the
// nibble 4 (slot / 16) of scales_h[slot % 16] (scale: bits 0-1, min: bits 2-3); d[0..3] are the
// row scales, d[4..7] the min factors. A value is d sc u - dmin mn.
template <typename Block>
inline void k4_r4_coefs(const Block * a, const Block * b, int ib, float * scale, float * bias) {
    const __m256i lo = pair4_epu8(a->scales_l + 4 * ib, b->scales_l + 4 * ib);
    const __m256i hi = _mm256_srl_epi32(pair4_epu8(a->scales_h + (4 * ib) % 16, b->scales_h + (4 * ib) % 16),
                                        _mm_cvtsi32_si128(4 * (ib / 4)));
    const __m256i sc = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xF)),
                                       _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
    const __m256i mn = _mm256_or_si256(_mm256_srli_epi32(lo, 4), _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(0xC)), 2));
    _mm256_storeu_ps(scale, _mm256_mul_ps(fp16x4x2(a->d, b->d), _mm256_cvtepi32_ps(sc)));
    _mm256_storeu_ps(bias, _mm256_mul_ps(fp16x4x2(a->d + 4, b->d + 4), _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(), mn))));
}

// q4_k_r4: per 32-value sub-block ib, the 64-byte r4 nibble runs at qs + 64 ib.
struct grp_q4_k_r4 : group_traits<q4_k_r4_block, 4, 32, QK_K, 15, true> {
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        k4_r4_coefs(blk[0], blk[1], j, scale, bias);
        __m256i q[8];
        r4_nibbles(blk[0]->qs + 64 * j, blk[1]->qs + 64 * j, q);
        for (int k = 0; k < 8; ++k) _mm256_store_si256((__m256i *) (out + k * vs), q[k]);
    }
};

// q5_k_r4: q4_k_r4 plus the fifth bit of quarter Q in the 16-byte run at qh + 16 ib, bit q5_k_r4_hbit.
struct grp_q5_k_r4 : group_traits<q5_k_r4_block, 4, 32, QK_K, 31, true> {
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        k4_r4_coefs(blk[0], blk[1], j, scale, bias);
        __m256i q[8];
        r4_nibbles(blk[0]->qs + 64 * j, blk[1]->qs + 64 * j, q);
        const __m256i h = pair16(blk[0]->qh + 16 * j, blk[1]->qh + 16 * j);
        for (int k = 0; k < 8; ++k) {
            _mm256_store_si256((__m256i *) (out + k * vs), _mm256_or_si256(q[k], move_bits<1>(h, q5_k_r4_hbit(4 * k), 4)));
        }
    }
};

// q6_k_r4: 16-value sub-blocks j = 2 ib + half. Low 4 bits in the nibble runs at ql + 64 ib, the
// top 2 bits of quarter Q in the 16-byte run at qh + 32 ib + q6_k_r4_hoff at q6_k_r4_hshift; row
// k's int8 scale at scales[8 ib + k + 4 half]. A value is d sc (u - 32).
struct grp_q6_k_r4 : group_traits<q6_k_r4_block, 4, 16, QK_K, 63, true> {
    static constexpr int kLevelOffset = 32;   // the bias is only that (folded on AVX512, like q6_K's)
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        const int ib = j / 2, half = j % 2;
        int32_t s0, s1;
        std::memcpy(&s0, blk[0]->scales + 8 * ib + 4 * half, 4);
        std::memcpy(&s1, blk[1]->scales + 8 * ib + 4 * half, 4);
        const __m256i sc = _mm256_cvtepi8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(s0), _mm_cvtsi32_si128(s1)));
        store_offset_coefs(_mm256_mul_ps(fp16x4x2(blk[0]->d, blk[1]->d), _mm256_cvtepi32_ps(sc)), -32.0f, scale, bias);
        levels(blk, ib, half, out, vs);
    }
    // the 4 level vectors of half `half` of 32-value sub-block ib
    static inline __attribute__((always_inline)) void levels(const Block * const * blk, int ib, int half, uint8_t * out, size_t vs) {
        __m256i q[4];
        r4_nibble_half(blk[0]->ql + 64 * ib, blk[1]->ql + 64 * ib, half, q);
        const __m256i h = pair16(blk[0]->qh + 32 * ib + 16 * half, blk[1]->qh + 32 * ib + 16 * half);
        for (int i = 0; i < 4; ++i) {
            const __m256i top = move_bits<2>(h, q6_k_r4_hshift(4 * i), 4);   // the same shifts in both halves
            _mm256_store_si256((__m256i *) (out + i * vs), _mm256_or_si256(q[i], top));
        }
    }
};

// q6_k_r4 batches against q8_0 activations at AVX2: the records of q6_K's batch kernel
// (kScales16, avx2/panel.h: sub-blocks of 32, int16 scale pairs, the offset 32 from the
// activations' sums per 16), so that the products are q6_K's bit for bit. Sub-block ib: both
// halves of grp_q6_k_r4's, row k's scales at scales[8 ib + k] and [8 ib + 4 + k].
struct grp_q6_k_r4_scaled : group_traits<q6_k_r4_block, 4, 32, QK_K, 63, false> {
    static constexpr int kLevelOffset = 32;
    static constexpr bool kScales16 = true;
    KILN_GROUP_DECODE decode(const Block * const * blk, int ib, uint8_t * out, size_t vs, uint8_t * tail) {
        grp_q6_k_r4::levels(blk, ib, 0, out, vs);
        grp_q6_k_r4::levels(blk, ib, 1, out + 4 * vs, vs);
        // 8 scale bytes per group (4 rows of the first half, then of the second) -> per row lane
        // the int16 pair (first half's, second half's)
        const __m128i sc = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *) (blk[0]->scales + 8 * ib)),
                                              _mm_loadl_epi64((const __m128i *) (blk[1]->scales + 8 * ib)));
        const __m128i pairs = _mm_shuffle_epi8(sc, _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15));
        store_scales16_tail(tail, _mm256_cvtepi8_epi16(pairs), fp16x4x2(blk[0]->d, blk[1]->d), kLevelOffset);
    }
};

// q2_k_r4: 16-value sub-blocks j = 2 ib + half; the q2_K scale (low nibble) and min (high) byte
// of row k at scales[4 j + k]; 2-bit levels as crumbs at qs + 32 ib. A value is d sc u - dmin mn.
struct grp_q2_k_r4 : group_traits<q2_k_r4_block, 4, 16, QK_K, 3, true> {
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        const int ib = j / 2, half = j % 2;
        const __m256i sm = pair4_epu8(blk[0]->scales + 4 * j, blk[1]->scales + 4 * j);
        const __m256i sc = _mm256_and_si256(sm, _mm256_set1_epi32(0xF));
        const __m256i mn = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_srli_epi32(sm, 4));
        _mm256_storeu_ps(scale, _mm256_mul_ps(fp16x4x2(blk[0]->d, blk[1]->d), _mm256_cvtepi32_ps(sc)));
        _mm256_storeu_ps(bias, _mm256_mul_ps(fp16x4x2(blk[0]->d + 4, blk[1]->d + 4), _mm256_cvtepi32_ps(mn)));
        __m256i q[4];
        r4_crumb_half(blk[0]->qs + 32 * ib, blk[1]->qs + 32 * ib, half, q);
        for (int i = 0; i < 4; ++i) _mm256_store_si256((__m256i *) (out + i * vs), q[i]);
    }
};

// q3_k_r4: 16-value sub-blocks j = 2 ib + half; row k's 6-bit scale (stored + 32) in split_scale6
// slot 8 ib + 4 half + k; 2-bit crumbs at qs + 32 ib and the third bit of quarter Q at bit Q of
// the 16-byte run at qh + 16 ib. A value is d (sc - 32) (u - 4).
struct grp_q3_k_r4 : group_traits<q3_k_r4_block, 4, 16, QK_K, 7, true> {
    static constexpr int kLevelOffset = 4;   // the bias is only that (folded on AVX512, like q3_K's)
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        const int ib = j / 2, half = j % 2;
        const Block * a = blk[0], * b = blk[1];
        const __m256i sc = _mm256_sub_epi32(split_scales6_x4(a->scales_l, a->scales_h, b->scales_l, b->scales_h, 8 * ib + 4 * half),
                                            _mm256_set1_epi32(32));
        store_offset_coefs(_mm256_mul_ps(fp16x4x2(a->d, b->d), _mm256_cvtepi32_ps(sc)), -4.0f, scale, bias);
        __m256i q[4];
        r4_crumb_half(a->qs + 32 * ib, b->qs + 32 * ib, half, q);
        const __m256i h = _mm256_srl_epi16(pair16(a->qh + 16 * ib, b->qh + 16 * ib), _mm_cvtsi32_si128(4 * half));
        for (int i = 0; i < 4; ++i) {
            _mm256_store_si256((__m256i *) (out + i * vs), _mm256_or_si256(q[i], move_bits<1>(h, i, 2)));
        }
    }
};

} // namespace kiln_panel
} // namespace
