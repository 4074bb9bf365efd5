// Panel decoders (panel.h) of the plain lattice i-quants (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
// iq1_s, iq1_m) on AVX512: one 256-value block of a row per call, 64 values per vector.
//
// Per 64 values (avx2/panel-iq-index.h says where they come from): two gathers of their 8 grid
// entries (16 for the 4-value iq3 grids), their 64 sign bits as one mask register, one masked
// subtract. The signed level q goes out as the unsigned byte 128 + q (|q| <= 62), an offset the
// panel folds away (kLevelOffset), so products are exact in int32 per sub-block. A value is
// scale * q with scale = d * factor * (2 s + 1).
#pragma once

#include "avx2/panel-iq-index.h"
#include "avx512/panel.h"

#include <immintrin.h>

namespace {
namespace kiln_panel {

// 128 + m where `signs` has the value's bit clear, 128 - m where set (bit j: byte j).
inline __m512i offset_levels(__m512i m, uint64_t signs) {
    const __m512i o = _mm512_set1_epi8((char) 0x80);
    return _mm512_mask_sub_epi8(_mm512_or_si512(m, o), _cvtu64_mask64(signs), o, m);
}

// 128 + 8 g + delta for the iq1 grid entries g (bytes -1, 0, 1) of 8 groups; delta = -1 in the
// groups whose bit of neg is set, else +1.
inline __m512i iq1_offset_levels(__m512i g, __mmask8 neg) {
    // 8 g per byte: the 16-bit shift moves a byte's top bits into its neighbour's low 3, cleared
    const __m512i g8 = _mm512_and_si512(_mm512_slli_epi16(g, 3), _mm512_set1_epi8((char) 0xF8));
    const __m512i delta = _mm512_mask_blend_epi64(neg, _mm512_set1_epi8((char) 0x81), _mm512_set1_epi8((char) 0x7F));
    return _mm512_add_epi8(g8, delta);
}

// The grid entries of 64 values from their indices (lattice_index::chunk): bytes of magnitudes,
// or iq1's entries -1, 0, 1. Two 256-bit gathers: on Zen 4 they cost less than one 512-bit gather
// (batch 1, K = M = 4096: iq3_s 2.43 -> 2.30 CPU ms; the panels unchanged).
template <typename X>
inline __m512i gather_grid(const __m256i * idx) {
    if constexpr (sizeof(typename X::Grid) == 8) {
        const __m256i lo = _mm256_i32gather_epi64((const long long *) X::grid, _mm256_castsi256_si128(idx[0]), 8);
        const __m256i hi = _mm256_i32gather_epi64((const long long *) X::grid, _mm256_extracti128_si256(idx[0], 1), 8);
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    } else {
        const __m256i lo = _mm256_i32gather_epi32((const int *) X::grid, idx[0], 4);
        const __m256i hi = _mm256_i32gather_epi32((const int *) X::grid, idx[1], 4);
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
}

// The same 64 grid entries by plain loads (grid16), no gather.
template <typename X>
inline __m512i load_grid(const __m256i * idx) {
    alignas(32) uint32_t ix[16];
    store_indices<X>(idx, ix);
    const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(grid16<X>(ix, 0)), grid16<X>(ix, 1), 1);
    const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(grid16<X>(ix, 2)), grid16<X>(ix, 3), 1);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// A block prepared for the batch-1 loops (avx512/quants-iq*.cpp, gemm-iq-loop.h): |w| (u8), the
// sign mask of w and 16-bit scales laid out to match vpmaddubsw's pair sums.
struct lattice_prepared {
    __m512i   abs_w[QK_K / 64];
    __mmask64 neg[QK_K / 64];
    __m512i   scales[QK_K / 64];   // int16 lane i: scale of weights 64k + 2i, 64k + 2i + 1
};

// The exact int32 block sum with one activation column: per 64 weights negate a where w < 0
// (masked subtract), vpmaddubsw |w| x a (|w| <= 62, |a| <= 127: no saturation), vpdpwssd with
// the scales.
inline int32_t lattice_block_dot(const lattice_prepared & pb, const int8_t * q8) {
    __m512i acc = _mm512_setzero_si512();
    for (int k = 0; k < QK_K / 64; ++k) {
        const __m512i a = _mm512_loadu_si512((const void *) (q8 + 64 * k));
        const __m512i sa = _mm512_mask_sub_epi8(a, pb.neg[k], _mm512_setzero_si512(), a);
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(pb.abs_w[k], sa), pb.scales[k]);
    }
    // (own reduction: GCC 12 warns about the undefined upper halves in _mm512_reduce_add_epi32)
    const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

template <typename Block>
struct lattice_panel {
    using X = lattice_index<Block>;
    static constexpr int kSub = X::kSub, kChunk = QK_K, kLevelOffset = 128;
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const Block & b = ((const Block *) row)[i];
        for (int k = 0; k < QK_K / 64; ++k) {
            __m256i idx[2];
            uint64_t bits;
            X::chunk(b, k, idx, bits);
            const __m512i g = gather_grid<X>(idx);
            v[k] = X::kDelta ? iq1_offset_levels(g, (__mmask8) bits) : offset_levels(g, bits);
        }
        lattice_scales<X>(b, scale);
        // the level offset (panel.h folds it away; written to keep the decoder contract)
        for (int j = 0; j < QK_K / kSub; ++j) bias[j] = -128.0f * scale[j];
    }
};

} // namespace kiln_panel
} // namespace
