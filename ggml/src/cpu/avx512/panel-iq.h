// Panel decoders (panel.h) of the plain lattice i-quants (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
// iq1_s, iq1_m) on AVX512: one 256-value block of a row per call, 64 values per vector.
//
// Why not quants-iq.h's block decode: that one builds the 256 levels 8 bytes at a time through
// memory (a table load, a sign-mask lookup and a store per 8 values), which made the repack more
// than half of a 32-column product. Here each 64 values are one gather of their 8 grid entries
// (16 for the 4-value iq3 grids) with the indices computed in vectors, and their 64 sign bits
// are one mask register: the levels are then a single masked subtract. The levels are the same
// (test-quants-simd holds the products to the scalar kernel); the signed level q goes out as the
// unsigned byte 128 + q (|q| <= 62), an offset the panel folds away (kLevelOffset), so products
// are exact in int32 per sub-block. A value is scale * q with scale = d * factor * (2 s + 1).
#pragma once

#include "avx512/panel.h"
#include "quants/quants-iq.h"

#include <immintrin.h>

#include <cstring>

namespace {
namespace kiln_panel {

// The plain lattice decoders; specialized per block type below.
template <typename Block> struct lattice_panel;

// The constants every lattice decoder shares.
template <int S>
struct lattice_panel_base {
    static constexpr int kSub = S, kChunk = QK_K, kLevelOffset = 128;
    // biases: the level offset (panel.h folds it away; written to keep the decoder contract)
    static void offset_biases(const float * scale, float * bias) {
        for (int j = 0; j < QK_K / S; ++j) bias[j] = -128.0f * scale[j];
    }
};

inline uint64_t load_u64(const uint8_t * p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline uint32_t load_u32_at(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// 128 + m where `signs` has the value's bit clear, 128 - m where set (bit j: byte j).
inline __m512i offset_levels(__m512i m, uint64_t signs) {
    const __m512i o = _mm512_set1_epi8((char) 0x80);
    return _mm512_mask_sub_epi8(_mm512_or_si512(m, o), _cvtu64_mask64(signs), o, m);
}

// The sign bytes of 8 groups from their 7-bit codes (byte j of `codes`): the eighth bit makes
// each byte's count of set bits even (expand_signs7, eight at once). Folding a byte's bits onto
// bit 0 reads only bits of that byte.
inline uint64_t signs7x8(uint64_t codes) {
    uint64_t x = codes ^ (codes >> 4);
    x ^= x >> 2;
    x ^= x >> 1;
    return codes | (x & 0x0101010101010101ull) << 7;
}

// The four 7-bit sign codes in bits 0..27 of an iq2_xxs / iq3_xxs word, one per byte.
inline uint64_t codes7x4(uint32_t a) { return _pdep_u32(a, 0x7F7F7F7Fu); }

// The 8 grid entries (8 values each) idx of a 64-bit grid.
inline __m512i gather_grid8(const uint64_t * grid, __m256i idx) { return _mm512_i32gather_epi64(idx, (const long long *) grid, 8); }
// The 16 grid entries (4 values each) idx of a 32-bit grid.
inline __m512i gather_grid4(const uint32_t * grid, __m512i idx) { return _mm512_i32gather_epi32(idx, (const int *) grid, 4); }

// The odd scales 2 s + 1 of 16-value sub-blocks whose 4-bit s are the nibbles of sc[0..7] (low
// nibble first), times df.
inline void nibble_scales16(const uint8_t * sc, float df, float * scale) {
    for (int j = 0; j < 16; ++j) scale[j] = df * (float) (2 * ((sc[j / 2] >> 4 * (j % 2)) & 0xF) + 1);
}

// iq2_xxs: per 32 values 8 bytes: 4 grid indices, then a word of four 7-bit sign codes and a
// 4-bit scale (bits 28..31).
template <>
struct lattice_panel<ggml_iq::block_iq2_xxs> : lattice_panel_base<32> {
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const auto & b = ((const ggml_iq::block_iq2_xxs *) row)[i];
        const float df = fp16_to_f32(b.d) * ggml_iq::IQ2_DOT_FACTOR;
        const auto * q = (const uint8_t *) b.qs;
        const __m128i pick = _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, -1, -1, -1, -1, -1, -1, -1, -1);
        for (int k = 0; k < 4; ++k) {
            const uint8_t * p = q + 16 * k;
            const __m256i idx = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *) p), pick));
            const uint32_t a0 = load_u32_at(p + 4), a1 = load_u32_at(p + 12);
            v[k] = offset_levels(gather_grid8(ggml_iq::iq2xxs_grid, idx), signs7x8(codes7x4(a0) | codes7x4(a1) << 32));
            scale[2 * k] = df * (float) (2 * (a0 >> 28) + 1);
            scale[2 * k + 1] = df * (float) (2 * (a1 >> 28) + 1);
        }
        offset_biases(scale, bias);
    }
};

// iq2_xs: per 8 values a 16-bit word: 9-bit grid index, 7-bit sign code; 4-bit scales per 16.
template <>
struct lattice_panel<ggml_iq::block_iq2_xs> : lattice_panel_base<16> {
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const auto & b = ((const ggml_iq::block_iq2_xs *) row)[i];
        for (int k = 0; k < 4; ++k) {
            const __m128i w = _mm_loadu_si128((const __m128i *) (b.qs + 8 * k));
            const __m256i idx = _mm256_and_si256(_mm256_cvtepu16_epi32(w), _mm256_set1_epi32(511));
            const uint64_t codes = (uint64_t) _mm_cvtsi128_si64(_mm_packus_epi16(_mm_srli_epi16(w, 9), _mm_setzero_si128()));
            v[k] = offset_levels(gather_grid8(ggml_iq::iq2xs_grid, idx), signs7x8(codes));
        }
        nibble_scales16(b.scales, fp16_to_f32(b.d) * ggml_iq::IQ2_DOT_FACTOR, scale);
        offset_biases(scale, bias);
    }
};

// iq2_s: per 8 values an index byte (qs[k]) with 2 high bits (bits 2 (k % 4) of qh[k / 4]) and a
// plain sign byte (qs[32 + k]); 4-bit scales per 16.
template <>
struct lattice_panel<ggml_iq::block_iq2_s> : lattice_panel_base<16> {
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const auto & b = ((const ggml_iq::block_iq2_s *) row)[i];
        const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        for (int k = 0; k < 4; ++k) {
            const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.qs + 8 * k)));
            const __m256i qh = _mm256_set1_epi32(b.qh[2 * k] | b.qh[2 * k + 1] << 8);
            const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(qh, shifts), _mm256_set1_epi32(3)), 8);
            v[k] = offset_levels(gather_grid8(ggml_iq::iq2s_grid, _mm256_or_si256(lo, hi)), load_u64(b.qs + 32 + 8 * k));
        }
        nibble_scales16(b.scales, fp16_to_f32(b.d) * ggml_iq::IQ2_DOT_FACTOR, scale);
        offset_biases(scale, bias);
    }
};

// iq3_xxs: 64 index bytes of 4-value grid entries, then per 32 values a word of four 7-bit sign
// codes and a 4-bit scale.
template <>
struct lattice_panel<ggml_iq::block_iq3_xxs> : lattice_panel_base<32> {
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const auto & b = ((const ggml_iq::block_iq3_xxs *) row)[i];
        const float df = fp16_to_f32(b.d) * ggml_iq::IQ3XXS_DOT_FACTOR;
        const uint8_t * sas = b.qs + QK_K / 4;
        for (int k = 0; k < 4; ++k) {
            const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) (b.qs + 16 * k)));
            const uint32_t a0 = load_u32_at(sas + 8 * k), a1 = load_u32_at(sas + 8 * k + 4);
            v[k] = offset_levels(gather_grid4(ggml_iq::iq3xxs_grid, idx), signs7x8(codes7x4(a0) | codes7x4(a1) << 32));
            scale[2 * k] = df * (float) (2 * (a0 >> 28) + 1);
            scale[2 * k + 1] = df * (float) (2 * (a1 >> 28) + 1);
        }
        offset_biases(scale, bias);
    }
};

// iq3_s: per 4 values an index byte qs[j] with its ninth bit j % 8 of qh[j / 8]; plain sign
// bytes per 8 values; 4-bit scales per 32.
template <>
struct lattice_panel<ggml_iq::block_iq3_s> : lattice_panel_base<32> {
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const auto & b = ((const ggml_iq::block_iq3_s *) row)[i];
        const float df = fp16_to_f32(b.d) * ggml_iq::IQ3S_DOT_FACTOR;
        const __m512i shifts = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (int k = 0; k < 4; ++k) {
            const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) (b.qs + 16 * k)));
            const __m512i qh = _mm512_set1_epi32(b.qh[2 * k] | b.qh[2 * k + 1] << 8);
            const __m512i hi = _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(qh, shifts), _mm512_set1_epi32(1)), 8);
            v[k] = offset_levels(gather_grid4(ggml_iq::iq3s_grid, _mm512_or_si512(lo, hi)), load_u64(b.signs + 8 * k));
        }
        for (int j = 0; j < 8; ++j) scale[j] = df * (float) (2 * ((b.scales[j / 2] >> 4 * (j % 2)) & 0xF) + 1);
        offset_biases(scale, bias);
    }
};

// 128 + 8 g + delta for the iq1 grid entries g (bytes -1, 0, 1) of 8 groups; delta = -1 in the
// groups whose bit of neg is set, else +1.
inline __m512i iq1_offset_levels(__m512i g, __mmask8 neg) {
    // 8 g per byte: the 16-bit shift moves a byte's top bits into its neighbour's low 3, cleared
    const __m512i g8 = _mm512_and_si512(_mm512_slli_epi16(g, 3), _mm512_set1_epi8((char) 0xF8));
    const __m512i delta = _mm512_mask_blend_epi64(neg, _mm512_set1_epi8((char) 0x81), _mm512_set1_epi8((char) 0x7F));
    return _mm512_add_epi8(g8, delta);
}

// iq1_s: per 32 values a 16-bit word: 3 high index bits per 8 values (bits 3 l), a 3-bit scale
// (bits 12..14) and the sign of delta (bit 15); the low index bytes in qs.
template <>
struct lattice_panel<ggml_iq::block_iq1_s> : lattice_panel_base<32> {
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const auto & b = ((const ggml_iq::block_iq1_s *) row)[i];
        const float df = fp16_to_f32(b.d) * ggml_iq::IQ1_DOT_FACTOR;
        const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9);
        for (int k = 0; k < 4; ++k) {
            const uint32_t h0 = b.qh[2 * k], h1 = b.qh[2 * k + 1];
            const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.qs + 8 * k)));
            const __m256i h = _mm256_setr_epi32(h0, h0, h0, h0, h1, h1, h1, h1);
            const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(h, shifts), _mm256_set1_epi32(7)), 8);
            const __mmask8 neg = (__mmask8) ((h0 >> 15 ? 0x0F : 0) | (h1 >> 15 ? 0xF0 : 0));
            v[k] = iq1_offset_levels(gather_grid8(ggml_iq::iq1s_grid, _mm256_or_si256(lo, hi)), neg);
            scale[2 * k] = df * (float) (2 * ((h0 >> 12) & 7) + 1);
            scale[2 * k + 1] = df * (float) (2 * ((h1 >> 12) & 7) + 1);
        }
        offset_biases(scale, bias);
    }
};

// iq1_m: per 8 values k an index byte qs[k] with 3 high bits and the delta sign (bit 3) in
// nibble k % 2 of qh[k / 2]; 3-bit scales per 16 values in the scale words, whose top nibbles
// hold the fp16 super-scale.
template <>
struct lattice_panel<ggml_iq::block_iq1_m> : lattice_panel_base<16> {
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const auto & b = ((const ggml_iq::block_iq1_m *) row)[i];
        const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, -1, -1, -1, -1, -1, -1, -1, -1);
        const __m256i shifts = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
        for (int k = 0; k < 4; ++k) {
            const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.qs + 8 * k)));
            const __m128i qh4 = _mm_cvtsi32_si128((int) load_u32_at(b.qh + 4 * k));
            const __m256i h = _mm256_srlv_epi32(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(qh4, dup)), shifts);
            const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(7)), 8);
            const __mmask8 neg = _mm256_test_epi32_mask(h, _mm256_set1_epi32(8));
            v[k] = iq1_offset_levels(gather_grid8(ggml_iq::iq1s_grid, _mm256_or_si256(lo, hi)), neg);
        }
        uint16_t sc[4];
        std::memcpy(sc, b.scales, sizeof(sc));
        const float df = ggml_iq::iq1_m_super_scale(b) * ggml_iq::IQ1_DOT_FACTOR;
        for (int g = 0; g < 16; ++g) scale[g] = df * (float) (2 * ((sc[g / 4] >> 3 * (g % 4)) & 7) + 1);
        offset_biases(scale, bias);
    }
};

} // namespace kiln_panel
} // namespace
