// Group decoders (panel-r8.h) of the interleaved non-linear ik types and iq4_xs_r8: iq2_k_r4,
// iq3_k_r4, iq4_k_r4, iq4_ks_r4, iq5_k_r4, iq5_ks_r4 (two 4-row groups per 8 lanes) and iq4_xs_r8. Levels are grid
// values (signed bytes, looked up with vpshufb); activations are q8_K, as for the plain twins.
#pragma once

#include "avx2/panel-r8.h"

namespace {
namespace kiln_panel {

// A sub-block's integer scales (8 int32 lanes, one per row) and the rows' float scales: a value
// is d sc level. Each decoder here gives them from decode_int, which stores the levels as decode
// does; decode stores d sc as the sub-block's float scales, while AVX2 batches fold sc into the
// levels as the plain twins' kFolded decoders do (folded_groups, avx2/panel-r8-fold.h).
struct int_coefs {
    __m256i sc;
    __m256 d;
};
#define KILN_INT_DECODE static inline __attribute__((always_inline)) int_coefs
template <bool kSigned>
inline void store_int_coefs(const int_coefs & c, float * scale, float * bias) {
    store_signed_coefs<kSigned>(_mm256_mul_ps(c.d, _mm256_cvtepi32_ps(c.sc)), scale, bias);
}

// iq4_xs_r8: per 32-value sub-block j, run l (0..3) holds values 8l..8l+3 of the 8 rows in its
// low nibbles and 8l+4.. in its high nibbles, as indices into the iq4_nl table; row k's 6-bit
// scale is split_scale6 slot 8j + k (stored + 32).
template <bool kSigned>
struct grp_iq4_xs_r8 : grid_traits<iq4_xs_r8_block, 8, 32, QK_K, kSigned> {
    KILN_GROUP_DECODE decode(const iq4_xs_r8_block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        store_int_coefs<kSigned>(decode_int(blk, j, out, vs), scale, bias);
    }
    KILN_INT_DECODE decode_int(const iq4_xs_r8_block * const * blk, int j, uint8_t * out, size_t vs) {
        const iq4_xs_r8_block * b = blk[0];
        // split_scale6 slots 8j .. 8j+7 at once: low nibbles from scales_l, top 2 bits from scales_h
        __m128i lo, hi;
        std::memcpy(&lo, b->scales_l + (8 * j) % 32, 8);   // only the low 8 bytes are used
        std::memcpy(&hi, b->scales_h + (8 * j) % 16, 8);
        lo = _mm_and_si128(_mm_srl_epi16(lo, _mm_cvtsi32_si128(4 * (j / 4))), _mm_set1_epi8(0x0F));
        hi = _mm_and_si128(_mm_srl_epi16(hi, _mm_cvtsi32_si128(2 * (j / 2))), _mm_set1_epi8(0x03));
        const __m128i l6 = _mm_or_si128(lo, _mm_slli_epi16(hi, 4));
        const __m256i ls = _mm256_sub_epi32(_mm256_cvtepu8_epi32(l6), _mm256_set1_epi32(32));
        const __m256i table = grid16(kIq4Grid);
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        const uint8_t * qs = b->qs + 128 * j;
        for (int l = 0; l < 4; ++l) {
            const __m256i v = _mm256_loadu_si256((const __m256i *) (qs + 32 * l));
            const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
            const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            store_levels<kSigned>(out + (2 * l) * vs, lo);
            store_levels<kSigned>(out + (2 * l + 1) * vs, hi);
        }
        return { ls, fp16x8(b->d) };
    }
};

// Per row of two 4-row groups, `step` in each byte of its lane where bit `bit` of its byte of
// a[0..3] / b[0..3] is set (the shifted-grid bits of the ik types: extra[k (+ 4)] bit ib).
inline __m256i grid_shift(const uint8_t * a, const uint8_t * b, int bit, int step) {
    const __m256i e = _mm256_and_si256(_mm256_srl_epi32(pair4_epu8(a, b), _mm_cvtsi32_si128(bit)), _mm256_set1_epi32(1));
    return _mm256_and_si256(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(1)), _mm256_set1_epi8((char) step));
}

// A 32-entry grid as two vpshufb tables (entries 0..15 and 16..31); bit 7 of `upper` picks the second.
inline __m256i lookup32(const int8_t * grid, __m256i idx4, __m256i upper) {
    const __m256i lo = grid16(grid), hi = grid16(grid + 16);
    return _mm256_blendv_epi8(_mm256_shuffle_epi8(lo, idx4), _mm256_shuffle_epi8(hi, idx4), upper);
}

// The shifted iq5 grid (entries 32..63) is the plain one plus a constant (+2): a shifted row
// adds it after the lookup.
constexpr int kIq5GridShift = kIq5Grid[32] - kIq5Grid[0];

// iq4_k_r4 / iq5_k_r4 coefficients of 16-value sub-block j = 2 ib + half: row k's 6-bit scale
// (stored + 32) in split_scale6 slot 8 ib + 4 half + k, its fp16 row scale; returns the grid
// shift (`step` where bit ib of extra[4 half + k] is set).
template <typename Block>
inline __m256i k_r4_grid_coefs(const Block * a, const Block * b, int j, int step, int_coefs & c) {
    const int ib = j / 2, half = j % 2;
    c.sc = _mm256_sub_epi32(split_scales6_x4(a->scales_l, a->scales_h, b->scales_l, b->scales_h, 8 * ib + 4 * half),
                            _mm256_set1_epi32(32));
    c.d = fp16x4x2(a->d, b->d);
    return grid_shift(a->extra + 4 * half, b->extra + 4 * half, ib, step);
}

// iq4_ks_r4 / iq5_ks_r4 coefficients of 32-value sub-block j: row k's scale byte at scales[4 j + k]
// (bits 1..7: scale + 127, bit 0: shifted grid), its f32 row scale rs[group][k]; returns the
// grid shift.
template <typename Block>
inline __m256i ks_r4_grid_coefs(const Block * a, const Block * b, const float * const * rs, int j, int step, int_coefs & c) {
    const __m256i s = pair4_epu8(a->scales + 4 * j, b->scales + 4 * j);
    c.sc = _mm256_sub_epi32(_mm256_and_si256(s, _mm256_set1_epi32(254)), _mm256_set1_epi32(127));
    c.d = _mm256_set_m128(_mm_loadu_ps(rs[1]), _mm_loadu_ps(rs[0]));
    return grid_shift(a->scales + 4 * j, b->scales + 4 * j, 0, step);
}

// iq5_k_r4: 16-value sub-blocks j = 2 ib + half. Row k's 6-bit scale (stored + 32) in split_scale6
// slot 8 ib + 4 half + k; its shifted-grid bit is bit ib of extra[4 half + k]; the low 4 bits of
// the grid index in the r4 nibble runs at qs + 64 ib, the fifth of quarter Q at bit
// iq5_k_r4_hbit of the 16-byte run at qh + 16 ib. A value is d (sc - 32) grid[index].
template <bool kSigned>
struct grp_iq5_k_r4 : grid_traits<iq5_k_r4_block, 4, 16, QK_K, kSigned> {
    KILN_GROUP_DECODE decode(const iq5_k_r4_block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        store_int_coefs<kSigned>(decode_int(blk, j, out, vs), scale, bias);
    }
    KILN_INT_DECODE decode_int(const iq5_k_r4_block * const * blk, int j, uint8_t * out, size_t vs) {
        const int ib = j / 2, half = j % 2;
        const iq5_k_r4_block * a = blk[0], * b = blk[1];
        int_coefs c;
        const __m256i shift = k_r4_grid_coefs(a, b, j, kIq5GridShift, c);
        __m256i q[4];
        r4_nibble_half(a->qs + 64 * ib, b->qs + 64 * ib, half, q);
        // the fifth bits of the second half sit 2 bits above the first half's (iq5_k_r4_hbit)
        const __m256i h = _mm256_srl_epi16(pair16(a->qh + 16 * ib, b->qh + 16 * ib), _mm_cvtsi32_si128(2 * half));
        for (int i = 0; i < 4; ++i) {
            const __m256i v = lookup32(kIq5Grid, q[i], move_bits<1>(h, iq5_k_r4_hbit(4 * i), 7));
            store_levels<kSigned>(out + i * vs, _mm256_add_epi8(v, shift));
        }
        return c;
    }
};

// iq5_ks_r4: 4 f32 row scales lead the group; per 32-value sub-block ib, row k's scale byte at
// scales[4 ib + k] (bits 1..7: scale + 127, bit 0: shifted grid); levels as iq5_k_r4's.
// A value is row_scale ((s & 254) - 127) grid[index].
template <bool kSigned>
struct grp_iq5_ks_r4 : grid_traits<iq5_ks_r4_block, 4, 32, QK_K, kSigned> {
    static constexpr bool kRowScales = true;
    using RowScale = float;
    KILN_GROUP_DECODE decode(const iq5_ks_r4_block * const * blk, const float * const * rs, int j, uint8_t * out, size_t vs, float * scale,
                       float * bias) {
        store_int_coefs<kSigned>(decode_int(blk, rs, j, out, vs), scale, bias);
    }
    KILN_INT_DECODE decode_int(const iq5_ks_r4_block * const * blk, const float * const * rs, int j, uint8_t * out, size_t vs) {
        const iq5_ks_r4_block * a = blk[0], * b = blk[1];
        int_coefs c;
        const __m256i shift = ks_r4_grid_coefs(a, b, rs, j, kIq5GridShift, c);
        __m256i q[8];
        r4_nibbles(a->qs + 64 * j, b->qs + 64 * j, q);
        const __m256i h = pair16(a->qh + 16 * j, b->qh + 16 * j);
        for (int k = 0; k < 8; ++k) {
            const __m256i v = lookup32(kIq5Grid, q[k], move_bits<1>(h, iq5_k_r4_hbit(4 * k), 7));
            store_levels<kSigned>(out + k * vs, _mm256_add_epi8(v, shift));
        }
        return c;
    }
};

// The shifted iq4 grid (entries 16..31) is the plain one plus a constant (+4).
constexpr int kIq4GridShift = kIq4Grid[16] - kIq4Grid[0];

// iq4_k_r4: iq5_k_r4's layout without the fifth bits: 16-value sub-blocks j = 2 ib + half, row
// k's 6-bit scale (stored + 32) in split_scale6 slot 8 ib + 4 half + k, its shifted-grid bit in
// bit ib of extra[4 half + k], grid indices in the r4 nibble runs at qs + 64 ib.
template <bool kSigned>
struct grp_iq4_k_r4 : grid_traits<iq4_k_r4_block, 4, 16, QK_K, kSigned> {
    KILN_GROUP_DECODE decode(const iq4_k_r4_block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        store_int_coefs<kSigned>(decode_int(blk, j, out, vs), scale, bias);
    }
    KILN_INT_DECODE decode_int(const iq4_k_r4_block * const * blk, int j, uint8_t * out, size_t vs) {
        const int ib = j / 2, half = j % 2;
        const iq4_k_r4_block * a = blk[0], * b = blk[1];
        int_coefs c;
        const __m256i shift = k_r4_grid_coefs(a, b, j, kIq4GridShift, c), table = grid16(kIq4Grid);
        __m256i q[4];
        r4_nibble_half(a->qs + 64 * ib, b->qs + 64 * ib, half, q);
        for (int i = 0; i < 4; ++i) store_levels<kSigned>(out + i * vs, _mm256_add_epi8(_mm256_shuffle_epi8(table, q[i]), shift));
        return c;
    }
};

// iq4_ks_r4: iq5_ks_r4's row scales and scale bytes over iq4_k_r4's nibble runs.
template <bool kSigned>
struct grp_iq4_ks_r4 : grid_traits<iq4_ks_r4_block, 4, 32, QK_K, kSigned> {
    static constexpr bool kRowScales = true;
    using RowScale = float;
    KILN_GROUP_DECODE decode(const iq4_ks_r4_block * const * blk, const float * const * rs, int j, uint8_t * out, size_t vs, float * scale,
                             float * bias) {
        store_int_coefs<kSigned>(decode_int(blk, rs, j, out, vs), scale, bias);
    }
    KILN_INT_DECODE decode_int(const iq4_ks_r4_block * const * blk, const float * const * rs, int j, uint8_t * out, size_t vs) {
        const iq4_ks_r4_block * a = blk[0], * b = blk[1];
        int_coefs c;
        const __m256i shift = ks_r4_grid_coefs(a, b, rs, j, kIq4GridShift, c), table = grid16(kIq4Grid);
        __m256i q[8];
        r4_nibbles(a->qs + 64 * j, b->qs + 64 * j, q);
        for (int k = 0; k < 8; ++k) store_levels<kSigned>(out + k * vs, _mm256_add_epi8(_mm256_shuffle_epi8(table, q[k]), shift));
        return c;
    }
};

// iq2_k_r4 / iq3_k_r4: 16-value sub-blocks j = 2 ib + half; row k's 4-bit scale nibble in slot
// is = 8 ib + 4 half + k of scales (iq2: value - 8) or scales_l (iq3: 2 value + 1, negative where
// bit ib of scales_h[4 half + k] is set); the shifted-grid bit is bit ib of extra[4 half + k]
// (grid entries 4.. for iq2, 8.. for iq3); 2-bit crumbs at qs + 32 ib, iq3's third bit of
// quarter Q at bit Q of the 16-byte run at qh + 16 ib. A value is d sc grid[index].
inline __m256i nibble_slots_x4(const uint8_t * a, const uint8_t * b, int is0) {
    return _mm256_and_si256(_mm256_srl_epi32(pair4_epu8(a + is0 % 32, b + is0 % 32), _mm_cvtsi32_si128(4 * (is0 / 32))),
                            _mm256_set1_epi32(0xF));
}

template <bool kSigned>
struct grp_iq2_k_r4 : grid_traits<iq2_k_r4_block, 4, 16, QK_K, kSigned> {
    KILN_GROUP_DECODE decode(const iq2_k_r4_block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        store_int_coefs<kSigned>(decode_int(blk, j, out, vs), scale, bias);
    }
    KILN_INT_DECODE decode_int(const iq2_k_r4_block * const * blk, int j, uint8_t * out, size_t vs) {
        const int ib = j / 2, half = j % 2;
        const iq2_k_r4_block * a = blk[0], * b = blk[1];
        const __m256i sc = _mm256_sub_epi32(nibble_slots_x4(a->scales, b->scales, 8 * ib + 4 * half), _mm256_set1_epi32(8));
        const __m256i grid = grid16(kIq2Grid);
        const __m256i shift = grid_shift(a->extra + 4 * half, b->extra + 4 * half, ib, 4);
        __m256i q[4];
        r4_crumb_half(a->qs + 32 * ib, b->qs + 32 * ib, half, q);
        for (int i = 0; i < 4; ++i) store_levels<kSigned>(out + i * vs, _mm256_shuffle_epi8(grid, _mm256_or_si256(q[i], shift)));
        return { sc, fp16x4x2(a->d, b->d) };
    }
};

template <bool kSigned>
struct grp_iq3_k_r4 : grid_traits<iq3_k_r4_block, 4, 16, QK_K, kSigned> {
    KILN_GROUP_DECODE decode(const iq3_k_r4_block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        store_int_coefs<kSigned>(decode_int(blk, j, out, vs), scale, bias);
    }
    KILN_INT_DECODE decode_int(const iq3_k_r4_block * const * blk, int j, uint8_t * out, size_t vs) {
        const int ib = j / 2, half = j % 2;
        const iq3_k_r4_block * a = blk[0], * b = blk[1];
        const __m256i m = _mm256_add_epi32(_mm256_slli_epi32(nibble_slots_x4(a->scales_l, b->scales_l, 8 * ib + 4 * half), 1),
                                           _mm256_set1_epi32(1));
        const __m256i neg = grid_shift(a->scales_h + 4 * half, b->scales_h + 4 * half, ib, -1);   // all ones where negative
        const __m256i sc = _mm256_sub_epi32(_mm256_xor_si256(m, neg), neg);                      // -m where negative
        const __m256i grid = grid16(kIq3Grid);
        const __m256i shift = grid_shift(a->extra + 4 * half, b->extra + 4 * half, ib, 8);
        __m256i q[4];
        r4_crumb_half(a->qs + 32 * ib, b->qs + 32 * ib, half, q);
        const __m256i h = _mm256_srl_epi16(pair16(a->qh + 16 * ib, b->qh + 16 * ib), _mm_cvtsi32_si128(4 * half));
        for (int i = 0; i < 4; ++i) {
            const __m256i idx = _mm256_or_si256(_mm256_or_si256(q[i], move_bits<1>(h, i, 2)), shift);
            store_levels<kSigned>(out + i * vs, _mm256_shuffle_epi8(grid, idx));
        }
        return { sc, fp16x4x2(a->d, b->d) };
    }
};

#undef KILN_INT_DECODE

} // namespace kiln_panel
} // namespace
