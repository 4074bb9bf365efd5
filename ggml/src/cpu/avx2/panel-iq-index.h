// Where the values of a plain lattice i-quant block (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
// iq1_s, iq1_m) come from, 64 at a time, for the panel decoders of both ISAs (avx2/panel-iq.h,
// avx512/panel-iq.h): the grid indices of the 64 values computed in vectors, their sign bits,
// and the sub-block scales. Each panel then gathers the grid entries and applies the signs in
// its own registers.
//
// Why not quants-iq.h's block decode: that one builds the 256 levels 8 bytes at a time through
// memory (a table load, a sign-mask lookup and a store per 8 values), which made the repack more
// than half of a 32-column product. The levels are the same (test-quants-simd holds the panel
// products to the scalar kernel). AVX2 + BMI2 code, valid in both folders; each includes it into
// its own anonymous namespace (internal linkage, see cpu-isa.h).
//
// Concept lattice_index<Block>:
//   Grid, grid, kSub          the grid (uint64_t: 8 values an entry, uint32_t: 4) and the values
//                             per scaled sub-block;
//   kDelta                    iq1: entries g in {-1, 0, 1}, values 8 g + delta, delta = +-1
//                             per 8 values; else values are the entries' magnitudes with signs;
//   kMaxMagnitude             the largest |value| (the grids' largest byte; 9 for iq1);
//   chunk(b, k, idx, signs)   values 64 k .. 64 k + 63: their grid indices (8 in idx[0], or 16
//                             in idx[0], idx[1]) and, bit j for value 64 k + j, the signs, or
//                             with kDelta bit j for group j the groups whose delta is -1;
//   d(b), kFactor             the block's super-scale and the type's dot factor;
//   odd_scales(b, s)          the QK_K / kSub sub-block scales' odd integers 2 s + 1 (the block
//                             loop's int16 scales; lattice_scales makes the panels' floats).
#pragma once

#include <immintrin.h>

#include "avx2/panel-common.h"
#include "quants/quants-iq.h"

#include <cstdint>
#include <cstring>

namespace {
namespace kiln_panel {

template <typename Block> struct lattice_index;

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

// The odd scales 2 s + 1 of the sub-blocks whose 4-bit s are the nibbles of sc[0 .. n / 2) (low
// nibble first).
inline void nibble_scales(const uint8_t * sc, int n, int * s) {
    for (int j = 0; j < n; ++j) s[j] = 2 * ((sc[j / 2] >> 4 * (j % 2)) & 0xF) + 1;
}

// iq2_xxs: per 32 values 8 bytes: 4 grid indices, then a word of four 7-bit sign codes and a
// 4-bit scale (bits 28..31).
template <>
struct lattice_index<ggml_iq::block_iq2_xxs> {
    using Grid = uint64_t;
    static constexpr const Grid * grid = ggml_iq::iq2xxs_grid;
    static constexpr int kSub = 32;
    static constexpr int kMaxMagnitude = 43;
    static constexpr bool kDelta = false;
    static void chunk(const ggml_iq::block_iq2_xxs & b, int k, __m256i * idx, uint64_t & signs) {
        const uint8_t * p = (const uint8_t *) b.qs + 16 * k;
        const __m128i pick = _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, -1, -1, -1, -1, -1, -1, -1, -1);
        idx[0] = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *) p), pick));
        signs = signs7x8(codes7x4(load_u32_at(p + 4)) | codes7x4(load_u32_at(p + 12)) << 32);
    }
    static constexpr float kFactor = ggml_iq::IQ2_DOT_FACTOR;
    static float d(const ggml_iq::block_iq2_xxs & b) { return fp16_to_f32(b.d); }
    static void odd_scales(const ggml_iq::block_iq2_xxs & b, int * s) {
        for (int j = 0; j < 8; ++j) s[j] = (int) (2 * (load_u32_at((const uint8_t *) b.qs + 8 * j + 4) >> 28) + 1);
    }
};

// iq2_xs: per 8 values a 16-bit word: 9-bit grid index, 7-bit sign code; 4-bit scales per 16.
template <>
struct lattice_index<ggml_iq::block_iq2_xs> {
    using Grid = uint64_t;
    static constexpr const Grid * grid = ggml_iq::iq2xs_grid;
    static constexpr int kSub = 16;
    static constexpr int kMaxMagnitude = 43;
    static constexpr bool kDelta = false;
    static void chunk(const ggml_iq::block_iq2_xs & b, int k, __m256i * idx, uint64_t & signs) {
        const __m128i w = _mm_loadu_si128((const __m128i *) (b.qs + 8 * k));
        idx[0] = _mm256_and_si256(_mm256_cvtepu16_epi32(w), _mm256_set1_epi32(511));
        signs = signs7x8((uint64_t) _mm_cvtsi128_si64(_mm_packus_epi16(_mm_srli_epi16(w, 9), _mm_setzero_si128())));
    }
    static constexpr float kFactor = ggml_iq::IQ2_DOT_FACTOR;
    static float d(const ggml_iq::block_iq2_xs & b) { return fp16_to_f32(b.d); }
    static void odd_scales(const ggml_iq::block_iq2_xs & b, int * s) { nibble_scales(b.scales, 16, s); }
};

// iq2_s: per 8 values an index byte (qs[j]) with 2 high bits (bits 2 (j % 4) of qh[j / 4]) and a
// plain sign byte (qs[32 + j]); 4-bit scales per 16.
template <>
struct lattice_index<ggml_iq::block_iq2_s> {
    using Grid = uint64_t;
    static constexpr const Grid * grid = ggml_iq::iq2s_grid;
    static constexpr int kSub = 16;
    static constexpr int kMaxMagnitude = 43;
    static constexpr bool kDelta = false;
    static void chunk(const ggml_iq::block_iq2_s & b, int k, __m256i * idx, uint64_t & signs) {
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.qs + 8 * k)));
        const __m256i qh = _mm256_set1_epi32(b.qh[2 * k] | b.qh[2 * k + 1] << 8);
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(qh, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)), _mm256_set1_epi32(3));
        idx[0] = _mm256_or_si256(lo, _mm256_slli_epi32(hi, 8));
        signs = load_u64(b.qs + 32 + 8 * k);
    }
    static constexpr float kFactor = ggml_iq::IQ2_DOT_FACTOR;
    static float d(const ggml_iq::block_iq2_s & b) { return fp16_to_f32(b.d); }
    static void odd_scales(const ggml_iq::block_iq2_s & b, int * s) { nibble_scales(b.scales, 16, s); }
};

// iq3_xxs: 64 index bytes of 4-value grid entries, then per 32 values a word of four 7-bit sign
// codes and a 4-bit scale.
template <>
struct lattice_index<ggml_iq::block_iq3_xxs> {
    using Grid = uint32_t;
    static constexpr const Grid * grid = ggml_iq::iq3xxs_grid;
    static constexpr int kSub = 32;
    static constexpr int kMaxMagnitude = 62;
    static constexpr bool kDelta = false;
    static void chunk(const ggml_iq::block_iq3_xxs & b, int k, __m256i * idx, uint64_t & signs) {
        const __m128i q = _mm_loadu_si128((const __m128i *) (b.qs + 16 * k));
        idx[0] = _mm256_cvtepu8_epi32(q);
        idx[1] = _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(q, q));
        const uint8_t * sas = b.qs + QK_K / 4 + 8 * k;
        signs = signs7x8(codes7x4(load_u32_at(sas)) | codes7x4(load_u32_at(sas + 4)) << 32);
    }
    static constexpr float kFactor = ggml_iq::IQ3XXS_DOT_FACTOR;
    static float d(const ggml_iq::block_iq3_xxs & b) { return fp16_to_f32(b.d); }
    static void odd_scales(const ggml_iq::block_iq3_xxs & b, int * s) {
        for (int j = 0; j < 8; ++j) s[j] = (int) (2 * (load_u32_at(b.qs + QK_K / 4 + 4 * j) >> 28) + 1);
    }
};

// iq3_s: per 4 values an index byte qs[j] with its ninth bit j % 8 of qh[j / 8]; plain sign
// bytes per 8 values; 4-bit scales per 32.
template <>
struct lattice_index<ggml_iq::block_iq3_s> {
    using Grid = uint32_t;
    static constexpr const Grid * grid = ggml_iq::iq3s_grid;
    static constexpr int kSub = 32;
    static constexpr int kMaxMagnitude = 15;
    static constexpr bool kDelta = false;
    static void chunk(const ggml_iq::block_iq3_s & b, int k, __m256i * idx, uint64_t & signs) {
        const __m128i q = _mm_loadu_si128((const __m128i *) (b.qs + 16 * k));
        const __m256i shifts = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        for (int h = 0; h < 2; ++h) {
            const __m256i lo = _mm256_cvtepu8_epi32(h ? _mm_unpackhi_epi64(q, q) : q);
            const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.qh[2 * k + h]), shifts), _mm256_set1_epi32(1));
            idx[h] = _mm256_or_si256(lo, _mm256_slli_epi32(hi, 8));
        }
        signs = load_u64(b.signs + 8 * k);
    }
    static constexpr float kFactor = ggml_iq::IQ3S_DOT_FACTOR;
    static float d(const ggml_iq::block_iq3_s & b) { return fp16_to_f32(b.d); }
    static void odd_scales(const ggml_iq::block_iq3_s & b, int * s) { nibble_scales(b.scales, 8, s); }
};

// iq1_s: per 32 values a 16-bit word: 3 high index bits per 8 values (bits 3 l), a 3-bit scale
// (bits 12..14) and the sign of delta (bit 15); the low index bytes in qs.
template <>
struct lattice_index<ggml_iq::block_iq1_s> {
    using Grid = uint64_t;
    static constexpr const Grid * grid = ggml_iq::iq1s_grid;
    static constexpr int kSub = 32;
    static constexpr int kMaxMagnitude = 9;
    static constexpr bool kDelta = true;
    static void chunk(const ggml_iq::block_iq1_s & b, int k, __m256i * idx, uint64_t & neg) {
        const uint32_t h0 = b.qh[2 * k], h1 = b.qh[2 * k + 1];
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.qs + 8 * k)));
        const __m256i h = _mm256_setr_epi32(h0, h0, h0, h0, h1, h1, h1, h1);
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(h, _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9)), _mm256_set1_epi32(7));
        idx[0] = _mm256_or_si256(lo, _mm256_slli_epi32(hi, 8));
        neg = (h0 >> 15 ? 0x0F : 0) | (h1 >> 15 ? 0xF0 : 0);
    }
    static constexpr float kFactor = ggml_iq::IQ1_DOT_FACTOR;
    static float d(const ggml_iq::block_iq1_s & b) { return fp16_to_f32(b.d); }
    static void odd_scales(const ggml_iq::block_iq1_s & b, int * s) {
        for (int j = 0; j < 8; ++j) s[j] = 2 * ((b.qh[j] >> 12) & 7) + 1;
    }
};

// iq1_m: per 8 values j an index byte qs[j] with 3 high bits and the delta sign (bit 3) in
// nibble j % 2 of qh[j / 2]; 3-bit scales per 16 values in the scale words, whose top nibbles
// hold the fp16 super-scale.
template <>
struct lattice_index<ggml_iq::block_iq1_m> {
    using Grid = uint64_t;
    static constexpr const Grid * grid = ggml_iq::iq1s_grid;
    static constexpr int kSub = 16;
    static constexpr int kMaxMagnitude = 9;
    static constexpr bool kDelta = true;
    static void chunk(const ggml_iq::block_iq1_m & b, int k, __m256i * idx, uint64_t & neg) {
        const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, -1, -1, -1, -1, -1, -1, -1, -1);
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (b.qs + 8 * k)));
        const __m128i qh4 = _mm_cvtsi32_si128((int) load_u32_at(b.qh + 4 * k));
        const __m256i h = _mm256_srlv_epi32(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(qh4, dup)), _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
        idx[0] = _mm256_or_si256(lo, _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(7)), 8));
        // bit 3 of each lane to bit 31, then one bit per lane
        neg = (uint64_t) _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(h, 28)));
    }
    static constexpr float kFactor = ggml_iq::IQ1_DOT_FACTOR;
    static float d(const ggml_iq::block_iq1_m & b) { return ggml_iq::iq1_m_super_scale(b); }
    static void odd_scales(const ggml_iq::block_iq1_m & b, int * s) {
        uint16_t sc[4];
        std::memcpy(sc, b.scales, sizeof(sc));
        for (int g = 0; g < 16; ++g) s[g] = 2 * ((sc[g / 4] >> 3 * (g % 4)) & 7) + 1;
    }
};

// The QK_K / kSub sub-block scales d * factor * (2 s + 1) of a block, as the panels use them.
template <typename X, typename Block>
inline void lattice_scales(const Block & b, float * scale) {
    int s[QK_K / 16];
    X::odd_scales(b, s);
    const float df = X::d(b) * X::kFactor;
    for (int j = 0; j < QK_K / X::kSub; ++j) scale[j] = df * (float) s[j];
}

// The block loop's per-16-value int16 scales 2 s + 1 (sc[j] for values 16 j .. 16 j + 15).
template <typename X, typename Block>
inline void lattice_scales16(const Block & b, int16_t * sc) {
    int s[QK_K / 16];
    X::odd_scales(b, s);
    constexpr int rep = X::kSub / 16;
    for (int j = 0; j < QK_K / 16; ++j) sc[j] = (int16_t) s[j / rep];
}

} // namespace kiln_panel
} // namespace
