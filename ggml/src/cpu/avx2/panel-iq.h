// Panel decoders (panel.h) of the plain lattice i-quants (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
// iq1_s, iq1_m) on AVX2: one 256-value block of a row per call, 32 values per vector.
//
// Per 32 values (panel-iq-index.h says where they come from): one gather of their 4 grid entries
// (8 for the 4-value iq3 grids), their 32 sign bits spread to a byte mask, and a conditional
// negation. The levels stay signed (|q| <= 62; kMaxLevel 0: the panel multiplies |q| by the
// activations with q's sign), so products are exact in int32 per sub-block. A value is scale * q
// with scale = d * factor * (2 s + 1).
#pragma once

#include "avx2/panel-iq-index.h"
#include "avx2/panel.h"

#include <immintrin.h>

namespace {
namespace kiln_panel {

// 0xFF in byte j where bit j of `bits` is set.
inline __m256i byte_mask32(uint32_t bits) {
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int) bits),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i sel = _mm256_set1_epi64x((long long) 0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
}

// The grid entries of values 64 k + 32 h .. + 31 from the indices of lattice_index::chunk: bytes
// of magnitudes, or iq1's entries -1, 0, 1.
template <typename X>
inline __m256i gather_grid(const __m256i * idx, int h) {
    if constexpr (sizeof(typename X::Grid) == 8) {
        const __m128i ih = h ? _mm256_extracti128_si256(idx[0], 1) : _mm256_castsi256_si128(idx[0]);
        return _mm256_i32gather_epi64((const long long *) X::grid, ih, 8);
    } else {
        return _mm256_i32gather_epi32((const int *) X::grid, idx[h], 4);
    }
}

// iq1's 8 g of 32 values' entries g (-1, 0, 1): the 16-bit shift moves a byte's top bits into its
// neighbour's low 3, cleared.
inline __m256i times8(__m256i g) { return _mm256_and_si256(_mm256_slli_epi16(g, 3), _mm256_set1_epi8((char) 0xF8)); }

// 0xFF in the bytes of the 64-bit lanes (groups of 8 values) whose bit of `bits` is set.
inline __m256i group_mask4(uint64_t bits) {
    const __m256i sel = _mm256_setr_epi64x(1, 2, 4, 8);
    return _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x((long long) bits), sel), sel);
}

template <typename Block>
struct lattice_panel {
    using X = lattice_index<Block>;
    // levels q + M (M = kMaxMagnitude): unsigned, at most 2 M
    static constexpr int kSub = X::kSub, kChunk = QK_K, kMaxLevel = 2 * X::kMaxMagnitude;
    static constexpr bool kBias = true;
    static void decode(const uint8_t * row, int64_t i, __m256i * v, float * scale, float * bias) {
        const Block & b = ((const Block *) row)[i];
        const __m256i M = _mm256_set1_epi8((char) X::kMaxMagnitude);
        for (int k = 0; k < QK_K / 64; ++k) {
            __m256i idx[2];
            uint64_t bits;
            X::chunk(b, k, idx, bits);
            for (int h = 0; h < 2; ++h) {
                const __m256i g = gather_grid<X>(idx, h);
                if constexpr (X::kDelta) {
                    // 8 g + delta: delta -1 in the groups (64-bit lanes) whose bit is set, else +1
                    const __m256i neg = group_mask4(bits >> 4 * h);
                    v[2 * k + h] = _mm256_add_epi8(_mm256_add_epi8(times8(g), M), _mm256_or_si256(neg, _mm256_set1_epi8(1)));
                } else {
                    const __m256i m = byte_mask32((uint32_t) (bits >> 32 * h));
                    v[2 * k + h] = _mm256_add_epi8(_mm256_sub_epi8(_mm256_xor_si256(g, m), m), M);
                }
            }
        }
        lattice_scales<X>(b, scale);
        for (int j = 0; j < QK_K / kSub; ++j) bias[j] = -(float) X::kMaxMagnitude * scale[j];
    }
};

} // namespace kiln_panel
} // namespace
