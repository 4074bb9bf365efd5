// Where the values of a plain lattice i-quant block (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
// iq1_s, iq1_m) come from, 64 at a time, for the decoders of both ISAs (avx2/panel-iq.h,
// avx512/panel-iq.h, the batch-1 loops of avx*/quants-iq.cpp): the grid indices of the 64 values
// computed in vectors, their sign bits, and the sub-block scales. Each caller then looks the grid
// entries up and applies the signs in its own registers.
//
// The types differ only in where their bit fields lie, so each is one row of a table
// (lattice_row below: the grid, and a bit_field per field) read by one generic step
// (lattice_index): adding a type is adding a row. The constants a step uses (which bytes each
// vector lane takes, the shifts, the masks of pext) are computed from the row at compile time,
// and static_asserts check that every load stays inside the block.
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

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace {
namespace kiln_panel {

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

// A field repeated over the entries of a block (grid entries, groups of 8 values, sub-blocks):
// entry j's `width` bits start at bit 8 byte + first + (j / per) gap + (j % per) step of the
// block (bit 0 of byte 0 first, little-endian words): runs of `per` fields `step` bits apart,
// the runs `gap` bits apart. width 0: the type has no such field.
struct bit_field {
    int byte = 0, first = 0, width = 0, step = 0, per = QK_K, gap = 0;
    constexpr int bit(int j) const { return 8 * byte + first + (j / per) * gap + (j % per) * step; }
};

// A type's row: its grid and where each field lies.
//   index_lo, index_hi  per grid entry: the index's low bits and (width 0 if none) its high bits;
//   signs               per 8 values: a plain sign byte (width 8) or a 7-bit code whose eighth
//                       bit makes the count of set bits even (width 7); width 0 for iq1;
//   delta               iq1, per 8 values: 1 where delta is -1;
//   scale               per sub-block of `sub` values: s of the scale 2 s + 1;
//   d                   the block's super-scale; factor, the type's dot factor.
template <typename Block, typename Grid>
struct lattice_type {
    const Grid * grid = nullptr;
    int sub = 0, max_magnitude = 0;
    bit_field index_lo{}, index_hi{}, signs{}, delta{}, scale{};
    float factor = 0.0f;
    float (*d)(const Block &) = nullptr;
};

template <typename Block> float fp16_d(const Block & b) { return fp16_to_f32(b.d); }
inline float iq1_m_d(const ggml_iq::block_iq1_m & b) { return ggml_iq::iq1_m_super_scale(b); }

template <typename Block> constexpr int lattice_row = 0;   // (no row: not a lattice type)

#define KILN_AT(B, member) ((int) offsetof(ggml_iq::B, member))

// iq2_xxs: per 32 values 8 bytes: 4 grid indices, then a word of four 7-bit sign codes and a
// 4-bit scale (bits 28..31).
template <>
constexpr lattice_type<ggml_iq::block_iq2_xxs, uint64_t> lattice_row<ggml_iq::block_iq2_xxs> = {
    .grid = ggml_iq::iq2xxs_grid, .sub = 32, .max_magnitude = 43,
    .index_lo = {.byte = KILN_AT(block_iq2_xxs, qs), .width = 8, .step = 8, .per = 4, .gap = 64},
    .signs = {.byte = KILN_AT(block_iq2_xxs, qs) + 4, .width = 7, .step = 7, .per = 4, .gap = 64},
    .scale = {.byte = KILN_AT(block_iq2_xxs, qs) + 4, .first = 28, .width = 4, .step = 64},
    .factor = ggml_iq::IQ2_DOT_FACTOR, .d = fp16_d<ggml_iq::block_iq2_xxs>};

// iq2_xs: per 8 values a 16-bit word: 9-bit grid index, 7-bit sign code; 4-bit scales per 16.
template <>
constexpr lattice_type<ggml_iq::block_iq2_xs, uint64_t> lattice_row<ggml_iq::block_iq2_xs> = {
    .grid = ggml_iq::iq2xs_grid, .sub = 16, .max_magnitude = 43,
    .index_lo = {.byte = KILN_AT(block_iq2_xs, qs), .width = 9, .step = 16},
    .signs = {.byte = KILN_AT(block_iq2_xs, qs), .first = 9, .width = 7, .step = 16},
    .scale = {.byte = KILN_AT(block_iq2_xs, scales), .width = 4, .step = 4},
    .factor = ggml_iq::IQ2_DOT_FACTOR, .d = fp16_d<ggml_iq::block_iq2_xs>};

// iq2_s: per 8 values an index byte with 2 high bits in qh, and a plain sign byte; 4-bit scales
// per 16.
template <>
constexpr lattice_type<ggml_iq::block_iq2_s, uint64_t> lattice_row<ggml_iq::block_iq2_s> = {
    .grid = ggml_iq::iq2s_grid, .sub = 16, .max_magnitude = 43,
    .index_lo = {.byte = KILN_AT(block_iq2_s, qs), .width = 8, .step = 8},
    .index_hi = {.byte = KILN_AT(block_iq2_s, qh), .width = 2, .step = 2},
    .signs = {.byte = KILN_AT(block_iq2_s, qs) + QK_K / 8, .width = 8, .step = 8},
    .scale = {.byte = KILN_AT(block_iq2_s, scales), .width = 4, .step = 4},
    .factor = ggml_iq::IQ2_DOT_FACTOR, .d = fp16_d<ggml_iq::block_iq2_s>};

// iq3_xxs: 64 index bytes of 4-value grid entries, then per 32 values a word of four 7-bit sign
// codes and a 4-bit scale.
template <>
constexpr lattice_type<ggml_iq::block_iq3_xxs, uint32_t> lattice_row<ggml_iq::block_iq3_xxs> = {
    .grid = ggml_iq::iq3xxs_grid, .sub = 32, .max_magnitude = 62,
    .index_lo = {.byte = KILN_AT(block_iq3_xxs, qs), .width = 8, .step = 8},
    .signs = {.byte = KILN_AT(block_iq3_xxs, qs) + QK_K / 4, .width = 7, .step = 7, .per = 4, .gap = 32},
    .scale = {.byte = KILN_AT(block_iq3_xxs, qs) + QK_K / 4, .first = 28, .width = 4, .step = 32},
    .factor = ggml_iq::IQ3XXS_DOT_FACTOR, .d = fp16_d<ggml_iq::block_iq3_xxs>};

// iq3_s: per 4 values an index byte with its ninth bit in qh; plain sign bytes per 8 values;
// 4-bit scales per 32.
template <>
constexpr lattice_type<ggml_iq::block_iq3_s, uint32_t> lattice_row<ggml_iq::block_iq3_s> = {
    .grid = ggml_iq::iq3s_grid, .sub = 32, .max_magnitude = 15,
    .index_lo = {.byte = KILN_AT(block_iq3_s, qs), .width = 8, .step = 8},
    .index_hi = {.byte = KILN_AT(block_iq3_s, qh), .width = 1, .step = 1},
    .signs = {.byte = KILN_AT(block_iq3_s, signs), .width = 8, .step = 8},
    .scale = {.byte = KILN_AT(block_iq3_s, scales), .width = 4, .step = 4},
    .factor = ggml_iq::IQ3S_DOT_FACTOR, .d = fp16_d<ggml_iq::block_iq3_s>};

// iq1_s: the low index bytes in qs; per 32 values a 16-bit word: 3 high index bits per 8 values,
// a 3-bit scale (bits 12..14) and the delta sign (bit 15).
template <>
constexpr lattice_type<ggml_iq::block_iq1_s, uint64_t> lattice_row<ggml_iq::block_iq1_s> = {
    .grid = ggml_iq::iq1s_grid, .sub = 32, .max_magnitude = 9,
    .index_lo = {.byte = KILN_AT(block_iq1_s, qs), .width = 8, .step = 8},
    .index_hi = {.byte = KILN_AT(block_iq1_s, qh), .width = 3, .step = 3, .per = 4, .gap = 16},
    .delta = {.byte = KILN_AT(block_iq1_s, qh), .first = 15, .width = 1, .step = 0, .per = 4, .gap = 16},
    .scale = {.byte = KILN_AT(block_iq1_s, qh), .first = 12, .width = 3, .step = 16},
    .factor = ggml_iq::IQ1_DOT_FACTOR, .d = fp16_d<ggml_iq::block_iq1_s>};

// iq1_m: per 8 values an index byte with 3 high bits and the delta sign (bit 3) in a nibble of
// qh; 3-bit scales per 16 values, four to a 16-bit word whose top nibble holds a quarter of the
// fp16 super-scale.
template <>
constexpr lattice_type<ggml_iq::block_iq1_m, uint64_t> lattice_row<ggml_iq::block_iq1_m> = {
    .grid = ggml_iq::iq1s_grid, .sub = 16, .max_magnitude = 9,
    .index_lo = {.byte = KILN_AT(block_iq1_m, qs), .width = 8, .step = 8},
    .index_hi = {.byte = KILN_AT(block_iq1_m, qh), .width = 3, .step = 4},
    .delta = {.byte = KILN_AT(block_iq1_m, qh), .first = 3, .width = 1, .step = 4},
    .scale = {.byte = KILN_AT(block_iq1_m, scales), .width = 3, .step = 3, .per = 4, .gap = 16},
    .factor = ggml_iq::IQ1_DOT_FACTOR, .d = iq1_m_d};

#undef KILN_AT

// Which field of a type's row a template reads. The templates below take (Block, field) rather
// than the bit_field itself: a class-type template argument becomes a "template parameter
// object", which clang emits as a weak symbol even inside an anonymous namespace, and the ISA
// files must define none (isa-symbols).
enum class lattice_field { index_lo, index_hi, signs, delta, scale };

template <typename Block, lattice_field W>
constexpr bit_field field_of() {
    constexpr auto & T = lattice_row<Block>;
    if constexpr (W == lattice_field::index_lo) return T.index_lo;
    else if constexpr (W == lattice_field::index_hi) return T.index_hi;
    else if constexpr (W == lattice_field::signs) return T.signs;
    else if constexpr (W == lattice_field::delta) return T.delta;
    else return T.scale;
}

// The fields F of the kEntries entries of chunk k (values 64 k .. 64 k + 63) lie at the same
// bits relative to the chunk's anchor byte F.byte + k * kStride for every k; kSpan bytes from
// the anchor hold them all.
template <typename Block, lattice_field Which, int kEntries>
struct chunk_window {
    static constexpr bit_field F = field_of<Block, Which>();
    static constexpr int kStride = (F.bit(kEntries) - F.bit(0)) / 8;
    static constexpr int rel(int j) { return F.bit(j) - 8 * F.byte; }
    static constexpr int span() {
        int m = 0;
        for (int j = 0; j < kEntries; ++j) m = (rel(j) + F.width + 7) / 8 > m ? (rel(j) + F.width + 7) / 8 : m;
        return m;
    }
    static constexpr int kSpan = span();
    static constexpr bool same_every_chunk() {
        if ((F.bit(kEntries) - F.bit(0)) % 8 != 0) return false;
        for (int k = 0; k < QK_K / 64; ++k) {
            for (int j = 0; j < kEntries; ++j) {
                if (F.bit(kEntries * k + j) - 8 * (F.byte + k * kStride) != rel(j)) return false;
            }
        }
        return true;
    }
    static_assert(F.width > 0 && same_every_chunk(), "a chunk's fields must repeat at a whole-byte stride");
    // a load of n bytes at the anchor + off stays inside the block in every chunk
    static constexpr bool fits(int off, int n) { return F.byte + (QK_K / 64 - 1) * kStride + off + n <= (int) sizeof(Block); }
    static const uint8_t * anchor(const Block & b, int k) { return (const uint8_t *) &b + F.byte + k * kStride; }
};

// The fields F of a chunk's kEntries (8 or 16) entries as 32-bit lanes, entries 8 h .. 8 h + 7
// (h = 0 or 1): the window loaded once into both 128-bit halves, each lane's bytes picked by one
// shuffle, then shifted and masked where the row needs it.
template <typename Block, lattice_field Which, int kEntries>
struct lane_fields {
    static constexpr bit_field F = field_of<Block, Which>();
    using W = chunk_window<Block, Which, kEntries>;
    static constexpr int kLoad = W::kSpan <= 4 ? 4 : W::kSpan <= 8 ? 8 : 16;
    static_assert(W::kSpan <= 16 && (kEntries == 8 || kEntries == 16), "a chunk's fields must fit one 16-byte window");
    static constexpr int shift(int j) { return W::rel(j) % 8; }
    static constexpr int bytes(int j) { return (shift(j) + F.width + 7) / 8; }
    struct tables {
        int8_t pick[2][32];
        int32_t shift[2][8];
        bool any_shift, any_mask;
    };
    static constexpr tables make() {
        tables t{};
        for (int j = 0; j < kEntries; ++j) {
            const int h = j / 8, l = j % 8;
            for (int i = 0; i < 4; ++i) t.pick[h][4 * l + i] = (int8_t) (i < bytes(j) ? W::rel(j) / 8 + i : -1);
            t.shift[h][l] = shift(j);
            t.any_shift |= shift(j) != 0;
            t.any_mask |= 8 * bytes(j) - shift(j) > F.width;
        }
        return t;
    }
    static constexpr tables kT = make();
    static_assert(F.width + 7 <= 32, "a field must fit a 32-bit lane after its shift");

    static __m256i window(const Block & b, int k) {
        const uint8_t * p = W::anchor(b, k);
        if constexpr (!W::fits(0, kLoad)) {
            alignas(16) uint8_t buf[16] = {};
            std::memcpy(buf, p, W::kSpan);
            return _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *) buf));
        } else if constexpr (kLoad == 4) {
            return _mm256_set1_epi32((int) load_u32_at(p));
        } else if constexpr (kLoad == 8) {
            return _mm256_set1_epi64x((long long) load_u64(p));
        } else {
            return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) p));
        }
    }
    static __m256i get(__m256i w, int h) {
        __m256i x = _mm256_shuffle_epi8(w, _mm256_loadu_si256((const __m256i *) kT.pick[h]));
        if constexpr (kT.any_shift) x = _mm256_srlv_epi32(x, _mm256_loadu_si256((const __m256i *) kT.shift[h]));
        if constexpr (kT.any_mask) x = _mm256_and_si256(x, _mm256_set1_epi32((1 << F.width) - 1));
        return x;
    }
};

// The sign bytes of 8 groups from their 7-bit codes (byte j of `codes`): the eighth bit makes
// each byte's count of set bits even (expand_signs7, eight at once). Folding a byte's bits onto
// bit 0 reads only bits of that byte.
inline uint64_t signs7x8(uint64_t codes) {
    uint64_t x = codes ^ (codes >> 4);
    x ^= x >> 2;
    x ^= x >> 1;
    return codes | (x & 0x0101010101010101ull) << 7;
}

// The sign fields F (width 7 or 8) of a chunk's 8 groups, field g in byte g: at most two 64-bit
// words from the anchor; per word its fields are gathered to the bottom (a shift where they are
// already contiguous, else pext) and laid into their bytes by pdep, which reads only as many low
// bits as it writes. Plain contiguous sign bytes are one load.
template <typename Block, lattice_field Which>
struct group_signs {
    static constexpr bit_field F = field_of<Block, Which>();
    using W = chunk_window<Block, Which, 8>;
    // w = 0, 1: the word's field bits (src) and the byte bits they go to (dst)
    static constexpr uint64_t word_mask(int w, bool dst) {
        uint64_t m = 0;
        for (int g = 0; g < 8; ++g) {
            const int r = W::rel(g) - 64 * w;
            if (r >= 0 && r < 64) m |= ((1ull << F.width) - 1) << (dst ? 8 * g : r);
        }
        return m;
    }
    static constexpr bool no_straddle() {
        for (int g = 0; g < 8; ++g) {
            if (W::rel(g) / 64 != (W::rel(g) + F.width - 1) / 64) return false;
        }
        return true;
    }
    static_assert((F.width == 7 || F.width == 8) && W::kSpan <= 16 && no_straddle(), "sign fields: 7 or 8 bits, two words");
    static constexpr int kLoad1 = W::kSpan <= 12 ? 4 : 8;   // the second word's bytes
    static_assert(W::fits(0, 8) && (word_mask(1, false) == 0 || W::fits(8, kLoad1)), "sign loads must stay inside the block");

    template <int w>
    static uint64_t word(uint64_t x) {
        constexpr uint64_t src = word_mask(w, false), dst = word_mask(w, true);
        constexpr int low = __builtin_ctzll(src);
        if constexpr (src == dst) return x & src;
        else if constexpr (((src >> low) & ((src >> low) + 1)) == 0) return _pdep_u64(x >> low, dst);   // one run
        else return _pdep_u64(_pext_u64(x, src), dst);
    }
    static uint64_t get(const Block & b, int k) {
        const uint8_t * p = W::anchor(b, k);
        uint64_t f = word<0>(load_u64(p));
        if constexpr (word_mask(1, false) != 0) f |= word<1>(kLoad1 == 4 ? load_u32_at(p + 8) : load_u64(p + 8));
        if constexpr (F.width == 8) return f;
        return signs7x8(f);
    }
};

// Field j of F in block p (at most 4 bytes), every position known at compile time.
template <typename Block, lattice_field Which, int j>
inline uint32_t field_at(const uint8_t * p) {
    constexpr bit_field F = field_of<Block, Which>();
    constexpr int lo = F.bit(j) / 8, hi = (F.bit(j) + F.width - 1) / 8;
    static_assert(hi - lo < 4, "a field must fit 4 bytes");
    uint32_t v = 0;
    [&]<int... i>(std::integer_sequence<int, i...>) { ((v |= (uint32_t) p[lo + i] << 8 * i), ...); }(std::make_integer_sequence<int, hi - lo + 1>{});
    return (v >> F.bit(j) % 8) & ((1u << F.width) - 1);
}

// The one step every lattice type runs, read from its row.
template <typename Block>
struct lattice_index {
    static constexpr auto T = lattice_row<Block>;
    using Grid = std::remove_const_t<std::remove_pointer_t<decltype(T.grid)>>;
    static constexpr const Grid * grid = T.grid;
    static constexpr int kSub = T.sub;
    static constexpr int kMaxMagnitude = T.max_magnitude;
    static constexpr bool kDelta = T.delta.width != 0;
    static constexpr float kFactor = T.factor;
    static constexpr int kEntries = 64 / (int) sizeof(Grid);   // grid entries per 64 values

    static void chunk(const Block & b, int k, __m256i * idx, uint64_t & bits) {
        using Lo = lane_fields<Block, lattice_field::index_lo, kEntries>;
        const __m256i wlo = Lo::window(b, k);
        for (int h = 0; h < kEntries / 8; ++h) {
            __m256i i = Lo::get(wlo, h);
            if constexpr (T.index_hi.width != 0) {
                using Hi = lane_fields<Block, lattice_field::index_hi, kEntries>;
                i = _mm256_or_si256(i, _mm256_slli_epi32(Hi::get(Hi::window(b, k), h), T.index_lo.width));
            }
            idx[h] = i;
        }
        if constexpr (kDelta) {
            // one bit per group: each lane's bit to its top, then one movemask
            using D = lane_fields<Block, lattice_field::delta, 8>;
            const __m256i x = _mm256_slli_epi32(D::get(D::window(b, k), 0), 31);
            bits = (uint64_t) _mm256_movemask_ps(_mm256_castsi256_ps(x));
        } else {
            bits = group_signs<Block, lattice_field::signs>::get(b, k);
        }
    }
    static float d(const Block & b) { return T.d(b); }
    static void odd_scales(const Block & b, int * s) {
        const uint8_t * p = (const uint8_t *) &b;
        [&]<int... j>(std::integer_sequence<int, j...>) { ((s[j] = 2 * (int) field_at<Block, lattice_field::scale, j>(p) + 1), ...); }(std::make_integer_sequence<int, QK_K / kSub>{});
    }
};

// The grid entries of 16 values (entries 2 q, 2 q + 1 of an 8-value grid, 4 q .. 4 q + 3 of a
// 4-value one) by plain loads from the grid, indices in ix (a chunk's idx vectors, stored). On
// Zen 4 a gather costs about 2.5 cycles an entry; these loads issue three a cycle and the
// entries meet in one 128-bit insert.
template <typename X>
inline __m128i grid16(const uint32_t * ix, int q) {
    if constexpr (sizeof(typename X::Grid) == 8) {
        const __m128i lo = _mm_loadl_epi64((const __m128i *) (X::grid + ix[2 * q]));
        return _mm_insert_epi64(lo, (long long) X::grid[ix[2 * q + 1]], 1);
    } else {
        const uint64_t a = X::grid[ix[4 * q]] | (uint64_t) X::grid[ix[4 * q + 1]] << 32;
        const uint64_t b = X::grid[ix[4 * q + 2]] | (uint64_t) X::grid[ix[4 * q + 3]] << 32;
        return _mm_insert_epi64(_mm_cvtsi64_si128((long long) a), (long long) b, 1);
    }
}

// A chunk's 8 or 16 grid indices from chunk(), stored for grid16.
template <typename X>
inline void store_indices(const __m256i * idx, uint32_t * ix) {
    _mm256_store_si256((__m256i *) ix, idx[0]);
    if constexpr (X::kEntries == 16) _mm256_store_si256((__m256i *) (ix + 8), idx[1]);
}

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
