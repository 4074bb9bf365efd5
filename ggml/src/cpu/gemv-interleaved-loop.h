// Token generation (fewer activation columns than a panel takes) of the interleaved k-quants
// q2_k_r4 .. q6_k_r4 and of iq2_k_r4 .. iq5_k_r4, iq4_ks_r4, iq5_ks_r4 against q8_K activations,
// and of iq4_xs_r8 against q8_K, of iq4_nl_r4 / q5_0_r4 / q6_0_r4 / q4_0_r8 / q8_0_r8 / mxfp4_r8
// against q8_0, written once over an ISA description;
// included only by avx2/quants-interleaved.cpp and avx512/quants-interleaved.cpp, each of which
// compiles its own copy (internal linkage) with its flags.
//
// Why not the panel (panel-r8.h) here: it decodes every sub-block of 16 rows into a record in
// memory and reads it back for the product, and walks 4 woven groups side by side (4 streams),
// which left these layouts 1.3-2x slower than their plain twins at batch 1. But a woven block is
// already shaped for vector lanes: each 16 bytes of a sub-block's 64-byte nibble run (r4_nibble)
// hold 4 values of each of the 4 rows, so one load and a mask (or shift) give vectors whose 32-bit
// lanes are (row, 4 values of one quarter of the sub-block). The activations are spread once per
// call to match (every lane gets the 4 bytes of its quarter); then per sub-block and column the
// product is the plain kernels' integer path for 4 rows at once: vpmaddubsw per part, int16 adds,
// one vpdpwssd (AVX2: vpmaddwd + add) with the rows' sub-block scales, and floats once per
// super-block. The groups are read in memory order, one sequential stream.
//
// Lanes: a vector of V bytes (I::kBytes, 64 or 32) is V / 16 lane groups of 4 int32 lanes, lane k
// of a group being row k. A 64-byte run is kParts = 128 / V parts: part j holds the low (j even)
// or high (j odd) nibbles of the V bytes at (j / 2) V; its lane group G covers the run's 16 bytes
// at 16 g, g = (j / 2) (V / 16) + G, which hold quarter kLowQuarter[g] (+ 2 for the high nibbles).
// q2_k_r4 / q3_k_r4 keep 2-bit levels as crumbs instead (r4_crumb_byte): a sub-block's 32 bytes
// are two 16-byte halves h (quarters 4 h .. 4 h + 3 of the 4 rows, quarter 4 h + s at bits 2 s).
// Both halves go into every vector (bcast32), lane group G taking half G % 2, and part j shifts
// lane group G by 2 s with s = j (V / 32) + G / 2, so again each int32 lane holds 4 values of one
// quarter of its row; q3_k_r4's third bits (bit `quarter` of the row's 4 qh bytes) are added the
// same way. In both layouts odd lane groups hold the second 16 values of the sub-block, which is
// what lets the 16-value scales of q2/q3/q6 share one scale shuffle (kHalfScales).
//
// An ISA struct I provides the vector types vi / vf and: load, store, bcast16 (16 bytes into every
// 128-bit lane), bcast32 (bytes 0..15 into the even 128-bit lanes, 16..31 into the odd ones),
// zero, set8, and_, or_, add16, srli16_4, slli16_4, srlv32, shuffle (vpshufb), maddubs,
// dot16(acc, a, b) (acc + the int16 pair products), spread(32 bytes, lane indices) (vpermd),
// widen_u8 / widen_i8 (32 bytes -> V / 2 ... int16 vectors), and the float cvt, mul, fmadd,
// fnmadd, rows4 (4 floats into every 128-bit lane), sum_lanes (the 128-bit lanes added),
// srli16_4 / slli16_4 / slli16_2 (int16 shifts by 4 or 2), nibble_or(a, b) ((a & 0x0F) | b), and
// for 32-byte vectors slli16<N> / srli16<N>, for 64-byte ones rolv32 (per-lane rotate left),
// abs8 and sign8(x, s) (x negated where s < 0, as vpsignb; x where s is 0 is never used),
// select_bit0(a, b, v) (the bytes of b where bit 0 of v's byte is set, else a's), add8, sub8, set16;
// for the 8-row layouts rows8 / bcast256 (8 floats / int32 into every 256-bit half) and sum_rows8
// (halves added).
#pragma once

#include "cpu-traits.h"
#include "quants/quants-interleaved.h"

#include <immintrin.h>

#include <cstring>

namespace {
namespace r4k_gemv {

// the quarter whose low nibbles the run's 16-byte group g holds (r4_nibble_byte's offsets)
constexpr int kLowQuarter[4] = { 0, 4, 1, 5 };

// The quarter that int32 lane l of part j holds, in vectors of V bytes: nibble runs, crumbs.
constexpr int nibble_quarter(int V, int j, int l) { return kLowQuarter[(j / 2) * (V / 16) + l / 4] + 2 * (j % 2); }
constexpr int crumb_quarter(int V, int j, int l) { return 4 * (l / 4 % 2) + j * (V / 32) + l / 8; }

// Per part and int32 lane, a number derived from the quarter the lane holds (f: quarter -> int).
template <int V, int (*Q)(int, int, int), int (*F)(int), int R = 4>
struct lane_table {
    static constexpr int kParts = 32 * R / V, kLanes = V / 4;
    alignas(64) int32_t v[kParts][kLanes] = {};
    constexpr lane_table() {
        for (int j = 0; j < kParts; ++j) {
            for (int l = 0; l < kLanes; ++l) v[j][l] = F(Q(V, j, l));
        }
    }
};
constexpr int quarter_of(int q) { return q; }
constexpr int q5_bit_of(int q) { return q5_k_r4_hbit(4 * q); }
constexpr int q6_shift_of(int q) { return q6_k_r4_hshift(4 * q); }
constexpr int crumb_shift_of(int q) { return 2 * (q % 4); }
constexpr int q6_rotation_of(int q) { return (4 - q6_k_r4_hshift(4 * q)) & 31; }

template <int V> constexpr lane_table<V, nibble_quarter, quarter_of> kSpread{};
template <int V> constexpr lane_table<V, nibble_quarter, q5_bit_of> kQ5Bits{};
template <int V> constexpr lane_table<V, nibble_quarter, q6_shift_of> kQ6Shifts{};
template <int V> constexpr lane_table<V, nibble_quarter, q6_rotation_of> kQ6Rotations{};
// crumbs: the activations' spread is also the third bits' shift (bit `quarter` of a qh byte)
template <int V> constexpr lane_table<V, crumb_quarter, quarter_of> kCrumbSpread{};
template <int V> constexpr lane_table<V, crumb_quarter, crumb_shift_of> kCrumbShifts{};
// 8-row layouts (q4_0_r8, q8_0_r8): 32-byte runs of 4 bytes per row (int32 lane = row), a run
// holding one quarter of the 8 rows; 64-byte vectors take two runs (lanes 8..15 the second).
// q8_0_r8's runs are quarters 0..7 in order; q4_0_r8's run m holds quarter m (low nibbles) and
// 4 + m (high), its parts alternating low and high.
constexpr int r8_byte_quarter(int V, int j, int l) { return j * (V / 32) + l / 8; }
constexpr int r8_nibble_quarter(int V, int j, int l) { return 4 * (j % 2) + (j / 2) * (V / 32) + l / 8; }
template <int V> constexpr lane_table<V, r8_byte_quarter, quarter_of, 8> kR8ByteSpread{};
template <int V> constexpr lane_table<V, r8_nibble_quarter, quarter_of, 8> kR8NibbleSpread{};
// iq4_xs_r8's runs hold quarters 2 m (low nibbles) and 2 m + 1 (high) of 32-byte run m
constexpr int r8_xs_quarter(int V, int j, int l) { return 2 * ((j / 2) * (V / 32) + l / 8) + j % 2; }
template <int V> constexpr lane_table<V, r8_xs_quarter, quarter_of, 8> kR8XsSpread{};

// The layouts' lane shapes (D::kLanes), each with its activation spread
enum lane_shape { kNibbleLanes, kCrumbLanes, kR8ByteLanes, kR8NibbleLanes, kR8XsLanes };
template <int V, lane_shape S>
constexpr const auto & spread_table() {
    if constexpr (S == kNibbleLanes) return kSpread<V>.v;
    else if constexpr (S == kCrumbLanes) return kCrumbSpread<V>.v;
    else if constexpr (S == kR8ByteLanes) return kR8ByteSpread<V>.v;
    else if constexpr (S == kR8NibbleLanes) return kR8NibbleSpread<V>.v;
    else return kR8XsSpread<V>.v;
}

// vpshufb controls, the same in every 128-bit lane unless said otherwise:
//   int16 k of 4 (row k's sub-block scale) into both halves of int32 lane k;
alignas(64) constexpr uint8_t kRowScales[64] = {
    0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7,
    0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7,
};
//   q6_k_r4: the first 16 values' scales (int16 0..3) in even lane groups, the second 16's
//   (int16 4..7) in odd ones (the groups at 16 g with g odd hold quarters 4..7);
alignas(64) constexpr uint8_t kHalfScales[64] = {
    0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15,
    0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15,
};
//   bytes of 4 rows x 2 neighbours (is = 4 h + k within 8) reordered to 2 k + h, so that after
//   widening an int32 lane holds row k's two (min or scale, pair) terms (the min products below).
alignas(32) constexpr uint8_t kPairRows[32] = {
    0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15, 0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15,
};

// The min (q4/q5) or offset (q6) term of a super-block is sum over pairs P of m[P, row] * bsum[P],
// with P a 32-value sub-block (q4/q5: its 6-bit min) or a 16-value one (q6: its scale; the offset
// 32 goes into the float factor). In int16 position E = 8 G + 2 k + h: row k, pair P = 2 G + h;
// one vpmaddwd then leaves row k's terms in int32 lanes of row k, like the main sums.

// Activations of one column and super-block, spread for the parts: x[ib][j] (V bytes each), then
// the pair sums b[E] (int16, kPairs * 4), then d.
// (The 32-value layouts take q8_0 activations: one sub-block, no pair sums, d from fp16.)
template <int V, int kPairs, int kSubs, int kRows = 4>
struct act_layout {
    static constexpr size_t kX = kSubs * 32 * kRows, kB = kPairs * 8, kD = kX + kB, kSize = (kD + 4 + 63) / 64 * 64;
};

template <typename I, typename D>
void spread_columns(const uint8_t * x, size_t x_stride, int nc, int64_t nb, uint8_t * out) {
    constexpr int kPairs = D::kPairs;
    using L = act_layout<I::kBytes, kPairs, D::kSubs, D::kRows>;
    constexpr int V = I::kBytes, NP = 32 * D::kRows / V;
    const auto & spread = spread_table<V, D::kLanes>();
    for (int c = 0; c < nc; ++c) {
        if constexpr (D::kSubs == 1) {
            const auto * a = (const block_q8_0 *) (x + c * x_stride);
            for (int64_t b = 0; b < nb; ++b) {
                uint8_t * o = out + (c * nb + b) * L::kSize;
                const __m256i x32 = _mm256_loadu_si256((const __m256i *) a[b].qs);
                for (int j = 0; j < NP; ++j) I::store(o + j * V, I::spread(x32, I::load(spread[j])));
                const float d = GGML_FP16_TO_FP32(a[b].d);
                std::memcpy(o + L::kD, &d, 4);
            }
            continue;
        }
        const auto * a = (const block_q8_K *) (x + c * x_stride);
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t * o = out + (c * nb + b) * L::kSize;
            for (int ib = 0; ib < 8; ++ib) {
                const __m256i x32 = _mm256_loadu_si256((const __m256i *) (a[b].qs + 32 * ib));
                for (int j = 0; j < NP; ++j) I::store(o + (ib * NP + j) * V, I::spread(x32, I::load(spread[j])));
            }
            auto * bs = (int16_t *) (o + L::kX);
            for (int e = 0; e < kPairs * 4; ++e) {
                const int p = 2 * (e / 8) + e % 2;
                bs[e] = kPairs == 8 ? (int16_t) (a[b].bsums[2 * p] + a[b].bsums[2 * p + 1]) : a[b].bsums[p];
            }
            std::memcpy(o + L::kD, &a[b].d, 4);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decoders: begin(block, state) once per super-block (scales, min terms, row factors), then per
// sub-block ib levels(block, ib, lv) (kParts vectors of unsigned levels) and scale(state, ib)
// (the rows' int16 scales in their lanes). kMaxLevel bounds the levels (how many vpmaddubsw
// results fit in an int16 sum), kPairs counts the min/offset pairs, kLanes is the lane shape of
// the levels (the activations' spread follows), kRows the rows of a group (4 or 8).

// The 4-bit levels of a nibble run (64 bytes of 4 rows, or 128 of 8), parts alternating low and
// high nibbles
template <typename I, int kRunBytes = 64>
inline void nibble_levels(const uint8_t * run, typename I::vi * lv) {
    const typename I::vi m4 = I::set8(0x0F);
    for (int j = 0; j < 2 * kRunBytes / I::kBytes; j += 2) {
        const typename I::vi v = I::load(run + (j / 2) * I::kBytes);
        lv[j] = I::and_(v, m4);
        lv[j + 1] = I::and_(I::srli16_4(v), m4);
    }
}

template <typename I, typename Block>
struct k45_r4 {
    using vi = typename I::vi;
    using vf = typename I::vf;
    static constexpr int kPairs = 8, NM = 64 / I::kBytes;
    static constexpr bool kSigned = false;
    static constexpr lane_shape kLanes = kNibbleLanes;
    static constexpr size_t kHeader = 0;
    static constexpr int kSubs = 8, kRows = 4;
    struct state {
        alignas(64) int16_t s[40] = {};   // slot 4 ib + k; read 8 at a time
        vi m[NM];
        vf d, dm;
    };
    static void begin(const Block & b, state & st) {
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        const __m256i lo = _mm256_loadu_si256((const __m256i *) b.scales_l);
        const __m128i h = _mm_loadu_si128((const __m128i *) b.scales_h);
        // slot is: its top bits in nibble is / 16 of scales_h[is % 16]
        const __m256i hx = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(h, 4), h), m4);
        const __m256i sc = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_slli_epi16(_mm256_and_si256(hx, _mm256_set1_epi8(3)), 4));
        const __m256i mn = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4),
                                           _mm256_slli_epi16(_mm256_and_si256(hx, _mm256_set1_epi8(0xC)), 2));
        _mm256_store_si256((__m256i *) st.s, _mm256_cvtepu8_epi16(_mm256_castsi256_si128(sc)));
        _mm256_store_si256((__m256i *) (st.s + 16), _mm256_cvtepu8_epi16(_mm256_extracti128_si256(sc, 1)));
        I::widen_u8(_mm256_shuffle_epi8(mn, _mm256_load_si256((const __m256i *) kPairRows)), st.m);
        st.d = I::rows4(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) b.d)));
        st.dm = I::rows4(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) (b.d + 4))));
    }
    static vi scale(const state & st, int ib) { return I::shuffle(I::bcast16(st.s + 4 * ib), I::load(kRowScales)); }
    static void nibbles(const uint8_t * run, vi * lv) { nibble_levels<I>(run, lv); }
};

template <typename I>
struct q4_k_r4_dec : k45_r4<I, q4_k_r4_block> {
    using Block = q4_k_r4_block;
    static constexpr int kMaxLevel = 15;
    static void levels(const Block & b, int ib, typename I::vi * lv) { k45_r4<I, Block>::nibbles(b.qs + 64 * ib, lv); }
};

template <typename I>
struct q5_k_r4_dec : k45_r4<I, q5_k_r4_block> {
    using Block = q5_k_r4_block;
    static constexpr int kMaxLevel = 31;
    static void levels(const Block & b, int ib, typename I::vi * lv) {
        k45_r4<I, Block>::nibbles(b.qs + 64 * ib, lv);
        const typename I::vi h = I::bcast16(b.qh + 16 * ib), one = I::set8(1);
        for (int j = 0; j < 128 / I::kBytes; ++j) {
            lv[j] = I::or_(lv[j], I::slli16_4(I::and_(I::srlv32(h, I::load(kQ5Bits<I::kBytes>.v[j])), one)));
        }
    }
};

// The layouts with a scale per 16 values (q2_k_r4, q3_k_r4, q6_k_r4): int16 scales in slot
// 8 ib + 4 half + k, the min/offset multipliers already in pair order (kPairRows, widened).
template <typename I>
struct half_scales_state {
    alignas(64) int16_t s[64] = {};
    typename I::vi m[128 / I::kBytes];
    typename I::vf d, dm;
    typename I::vi scale(int ib) const { return I::shuffle(I::bcast16(s + 8 * ib), I::load(kHalfScales)); }
    // 32 slots from bytes (signed or not), into s[32 i ..] and the pair multipliers
    void put(int i, __m256i v, bool is_signed) {
        const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
        _mm256_store_si256((__m256i *) (s + 32 * i), is_signed ? _mm256_cvtepi8_epi16(lo) : _mm256_cvtepu8_epi16(lo));
        _mm256_store_si256((__m256i *) (s + 32 * i + 16), is_signed ? _mm256_cvtepi8_epi16(hi) : _mm256_cvtepu8_epi16(hi));
    }
    void put_pairs(int i, __m256i v, bool is_signed) {
        const __m256i p = _mm256_shuffle_epi8(v, _mm256_load_si256((const __m256i *) kPairRows));
        if (is_signed) I::widen_i8(p, m + i * (64 / I::kBytes));
        else I::widen_u8(p, m + i * (64 / I::kBytes));
    }
};

// What the per-16 decoders share: their state, scale shuffle, pair count and level bound.
template <typename I, typename B, int kMax, bool kCrumb, bool kSign = false>
struct per16_dec {
    using Block = B;
    using state = half_scales_state<I>;
    static constexpr int kPairs = 16, kMaxLevel = kMax, NM = 128 / I::kBytes;
    static constexpr bool kSigned = kSign;
    static constexpr lane_shape kLanes = kCrumb ? kCrumbLanes : kNibbleLanes;
    static constexpr size_t kHeader = 0;   // bytes before a group's blocks
    static constexpr int kSubs = 8, kRows = 4;   // 32-value sub-blocks per block, rows per group
    static typename I::vi scale(const state & st, int ib) { return st.scale(ib); }
};

// 2-bit crumb levels of sub-block ib (q2_k_r4, q3_k_r4), unsigned, in the crumb lanes
template <typename I>
inline void crumb_levels(const uint8_t * qs, int ib, typename I::vi * lv) {
    const typename I::vi c = I::bcast32(qs + 32 * ib), three = I::set8(3);
    for (int j = 0; j < 128 / I::kBytes; ++j) lv[j] = I::and_(I::srlv32(c, I::load(kCrumbShifts<I::kBytes>.v[j])), three);
}

// the third level bits (bit `quarter` of the row's 4 bytes qh[16 ib + 4 k ..]) added as 4
template <typename I>
inline void third_bits(const uint8_t * qh, int ib, typename I::vi * lv) {
    const typename I::vi h = I::bcast16(qh + 16 * ib), one = I::set8(1);
    for (int j = 0; j < 128 / I::kBytes; ++j) {
        lv[j] = I::or_(lv[j], I::slli16_2(I::and_(I::srlv32(h, I::load(kCrumbSpread<I::kBytes>.v[j])), one)));
    }
}

// q2_k_r4: per 16 values a 4-bit scale (low nibble) and min (high) at scales[8 ib + 4 half + k],
// d[k] and the min factor d[k + 4]: levels 0..3 times the scale, less min x bsum.
template <typename I>
struct q2_k_r4_dec : per16_dec<I, q2_k_r4_block, 3, true> {
    using state = half_scales_state<I>;
    static void begin(const q2_k_r4_block & b, state & st) {
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (int i = 0; i < 2; ++i) {
            const __m256i v = _mm256_loadu_si256((const __m256i *) (b.scales + 32 * i));
            st.put(i, _mm256_and_si256(v, m4), false);
            st.put_pairs(i, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), false);
        }
        st.d = I::rows4(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) b.d)));
        st.dm = I::rows4(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) (b.d + 4))));
    }
    static void levels(const q2_k_r4_block & b, int ib, typename I::vi * lv) { crumb_levels<I>(b.qs, ib, lv); }
};

// The 64 split_scale6 slots (low nibbles in sl[32], top two bits in sh[16]) less 32, as int8:
// slots 0..31 in out[0], 32..63 in out[1]. Slot is: nibble is / 32 of sl[is % 32], the top bits
// at 2 (is / 16) of sh[is % 16].
inline void split_scales6_minus32(const uint8_t * sl, const uint8_t * sh, __m256i * out) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    const __m256i lo = _mm256_loadu_si256((const __m256i *) sl);
    const __m128i h = _mm_loadu_si128((const __m128i *) sh);
    const __m256i h01 = _mm256_set_m128i(_mm_srli_epi16(h, 2), h), h23 = _mm256_set_m128i(_mm_srli_epi16(h, 6), _mm_srli_epi16(h, 4));
    const __m256i s0 = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_slli_epi16(_mm256_and_si256(h01, m3), 4));
    const __m256i s1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), _mm256_slli_epi16(_mm256_and_si256(h23, m3), 4));
    out[0] = _mm256_sub_epi8(s0, k32);
    out[1] = _mm256_sub_epi8(s1, k32);
}

// q3_k_r4: per 16 values a 6-bit scale (stored + 32) in split_scale6 slot 8 ib + 4 half + k,
// levels 0..7 (crumb | third bit << 2) for values level - 4: the offset 4 is the min term, with
// the signed scales as its multipliers and 4 d as its factor.
template <typename I>
struct q3_k_r4_dec : per16_dec<I, q3_k_r4_block, 7, true> {
    using state = half_scales_state<I>;
    static void begin(const q3_k_r4_block & b, state & st) {
        __m256i sc[2];
        split_scales6_minus32(b.scales_l, b.scales_h, sc);
        for (int i = 0; i < 2; ++i) {
            st.put(i, sc[i], true);
            st.put_pairs(i, sc[i], true);
        }
        st.d = I::rows4(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) b.d)));
        st.dm = I::mul(st.d, I::set1_ps(4.0f));
    }
    static void levels(const q3_k_r4_block & b, int ib, typename I::vi * lv) {
        crumb_levels<I>(b.qs, ib, lv);
        third_bits<I>(b.qh, ib, lv);
    }
};

// iq4_k_r4: the iq4_k grid looked up by nibble (signed levels: rows_times_columns multiplies
// |level| by the activations carrying the level's sign), a 6-bit scale (less 32) per 16 values
// in split_scale6 slot 8 ib + 4 half + k, and per slot an extra bit (bit ib of extra[k + 4 half])
// choosing the shifted grid, which is the grid plus kIq4Shift: that part is the min term, the
// extra-masked scales as multipliers and -kIq4Shift d as the factor.
// The shift of a grid of 2 n values whose second half is the first plus a constant (checked).
constexpr int grid_shift(const int8_t * g, int n) {
    for (int i = 0; i < n; ++i) {
        if (g[n + i] - g[i] != g[n] - g[0]) return 1000;
    }
    return g[n] - g[0];
}
constexpr int8_t kIq4Grid[32] = KILN_IQ4K_VALUES;
constexpr int kIq4Shift = grid_shift(kIq4Grid, 16);
static_assert(kIq4Shift != 1000, "the shifted iq4_k grid is the grid plus a constant");
// per slot byte b of the 32 slots 32 i + b: the extra bit of its sub-block ib = 4 i + b / 8
alignas(32) constexpr uint8_t kExtraBits[2][32] = {
    { 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8, 8, 8, 8, 8, 8, 8 },
    { 16, 16, 16, 16, 16, 16, 16, 16, 32, 32, 32, 32, 32, 32, 32, 32, 64, 64, 64, 64, 64, 64, 64, 64,
      128, 128, 128, 128, 128, 128, 128, 128 },
};


// The per-16 start of a block of the ik grid types with extra bits (iq2_k_r4, iq3_k_r4,
// iq4_k_r4): int8 scales of the 64 slots (sc), bit ib of extra[4 half + k] for the shifted grid
// (the grid plus Shift), fp16 row scales d.
inline __m256i slot_bits(const uint8_t * bytes8, int i) {   // 0xFF where the slot's bit is set
    int64_t v;
    std::memcpy(&v, bytes8, 8);
    const __m256i bit = _mm256_load_si256((const __m256i *) kExtraBits[i]);
    return _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_set1_epi64x(v), bit), bit);   // byte b: bytes8[b % 8]
}
template <typename I>
inline void grid_begin(const __m256i * sc, const uint8_t * extra, const ggml_fp16_t * d, int shift, half_scales_state<I> & st) {
    for (int i = 0; i < 2; ++i) {
        st.put(i, sc[i], true);
        st.put_pairs(i, _mm256_and_si256(sc[i], slot_bits(extra, i)), true);
    }
    st.d = I::rows4(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) d)));
    st.dm = I::mul(st.d, I::set1_ps((float) -shift));
}
// levels (indices) into grid values in place, for a run of kRunBytes (as nibble_levels)
template <typename I, int kRunBytes = 64>
inline void grid_lookup(const int8_t * grid16, typename I::vi * lv) {
    const typename I::vi grid = I::bcast16(grid16);
    for (int j = 0; j < 2 * kRunBytes / I::kBytes; ++j) lv[j] = I::shuffle(grid, lv[j]);
}

// the (unshifted) grid values of a nibble run
template <typename I>
inline void iq4_levels(const uint8_t * run, typename I::vi * lv) {
    nibble_levels<I>(run, lv);
    grid_lookup<I>(kIq4Grid, lv);
}

// iq4_k_r4 / iq5_k_r4: 6-bit scales (split_scale6 slots, less 32), extra bits for the shifted grid
template <typename I, typename B, int Shift>
struct k6_grid_dec : per16_dec<I, B, 127, false, true> {
    using state = half_scales_state<I>;
    static void begin(const B & b, state & st) {
        __m256i sc[2];
        split_scales6_minus32(b.scales_l, b.scales_h, sc);
        grid_begin<I>(sc, b.extra, b.d, Shift, st);
    }
};

template <typename I>
struct iq4_k_r4_dec : k6_grid_dec<I, iq4_k_r4_block, kIq4Shift> {
    static void levels(const iq4_k_r4_block & b, int ib, typename I::vi * lv) { iq4_levels<I>(b.qs + 64 * ib, lv); }
};

// iq5_k_r4 / iq5_ks_r4: iq4's nibbles and a fifth bit (bit kIq5HighBit[quarter] of the row's 4
// bytes qh[16 ib + 4 k ..]) choosing the grid's upper 16 entries
constexpr int8_t kIq5Grid[64] = KILN_IQ5NL_VALUES;
constexpr int kIq5Shift = grid_shift(kIq5Grid, 32);
static_assert(kIq5Shift != 1000, "the shifted iq5 grid is the grid plus a constant");
constexpr int iq5_high_bit_of(int q) { return q % 2 * 4 + q / 2; }   // iq5_k_r4_hbit: 0 4 1 5 2 6 3 7
template <int V> constexpr lane_table<V, nibble_quarter, iq5_high_bit_of> kIq5HighBits{};

template <typename I>
inline void iq5_levels(const uint8_t * qs, const uint8_t * qh, int ib, typename I::vi * lv) {
    nibble_levels<I>(qs + 64 * ib, lv);
    const typename I::vi lo = I::bcast16(kIq5Grid), hi = I::bcast16(kIq5Grid + 16), h = I::bcast16(qh + 16 * ib);
    for (int j = 0; j < 128 / I::kBytes; ++j) {
        lv[j] = I::select_bit0(I::shuffle(lo, lv[j]), I::shuffle(hi, lv[j]), I::srlv32(h, I::load(kIq5HighBits<I::kBytes>.v[j])));
    }
}

template <typename I>
struct iq5_k_r4_dec : k6_grid_dec<I, iq5_k_r4_block, kIq5Shift> {
    static void levels(const iq5_k_r4_block & b, int ib, typename I::vi * lv) { iq5_levels<I>(b.qs, b.qh, ib, lv); }
};

// iq2_k_r4 / iq3_k_r4: crumbs (iq3_k: + third bit, as q3_k_r4) indexing the iq2nl / iq3nl grids,
// extra bits as iq4_k_r4's. iq2_k: scale nibble / 16 of scales[slot % 32] less 8; iq3_k: odd
// magnitude 2 nibble + 1 from scales_l, negative where bit slot / 8 of scales_h[slot % 8] is set.
// The grid tables are padded to 16 entries for vpshufb.
alignas(16) constexpr int8_t kIq2Grid[16] = { -31, -13, 1, 17 };
alignas(16) constexpr int8_t kIq3Grid[16] = { -63, -40, -23, -10, 1, 13, 28, 47 };
constexpr int8_t kIq2Values[8] = KILN_IQ2NL_VALUES, kIq3Values[16] = KILN_IQ3NL_VALUES;
constexpr int kIq2Shift = kIq2Values[4] - kIq2Values[0], kIq3Shift = kIq3Values[8] - kIq3Values[0];
constexpr bool grids_match() {
    for (int i = 0; i < 4; ++i) {
        if (kIq2Grid[i] != kIq2Values[i] || kIq2Values[4 + i] - kIq2Values[i] != kIq2Shift) return false;
    }
    for (int i = 0; i < 8; ++i) {
        if (kIq3Grid[i] != kIq3Values[i] || kIq3Values[8 + i] - kIq3Values[i] != kIq3Shift) return false;
    }
    return true;
}
static_assert(grids_match(), "the iq2nl / iq3nl grids as the format defines them, the shifted ones a constant apart");

template <typename I>
struct iq2_k_r4_dec : per16_dec<I, iq2_k_r4_block, 31, true, true> {
    using state = half_scales_state<I>;
    static void begin(const iq2_k_r4_block & b, state & st) {
        const __m256i v = _mm256_loadu_si256((const __m256i *) b.scales), m4 = _mm256_set1_epi8(0x0F), k8 = _mm256_set1_epi8(8);
        const __m256i sc[2] = { _mm256_sub_epi8(_mm256_and_si256(v, m4), k8),
                                _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), k8) };
        grid_begin<I>(sc, b.extra, b.d, kIq2Shift, st);
    }
    static void levels(const iq2_k_r4_block & b, int ib, typename I::vi * lv) {
        crumb_levels<I>(b.qs, ib, lv);
        grid_lookup<I>(kIq2Grid, lv);
    }
};

template <typename I>
struct iq3_k_r4_dec : per16_dec<I, iq3_k_r4_block, 63, true, true> {
    using state = half_scales_state<I>;
    static void begin(const iq3_k_r4_block & b, state & st) {
        const __m256i v = _mm256_loadu_si256((const __m256i *) b.scales_l), m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
        __m256i sc[2];
        for (int i = 0; i < 2; ++i) {
            const __m256i nib = _mm256_and_si256(i ? _mm256_srli_epi16(v, 4) : v, m4);
            const __m256i mag = _mm256_add_epi8(_mm256_add_epi8(nib, nib), one), neg = slot_bits(b.scales_h, i);
            sc[i] = _mm256_sub_epi8(_mm256_xor_si256(mag, neg), neg);
        }
        grid_begin<I>(sc, b.extra, b.d, kIq3Shift, st);
    }
    static void levels(const iq3_k_r4_block & b, int ib, typename I::vi * lv) {
        crumb_levels<I>(b.qs, ib, lv);
        third_bits<I>(b.qh, ib, lv);
        grid_lookup<I>(kIq3Grid, lv);
    }
};

// iq4_ks_r4 / iq5_ks_r4: 4 f32 row scales lead the group (group()); per block the scale byte of
// sub-block ib at scales[4 ib + k]: scale (s & 254) - 127 for both 16-value halves, bit 0 the
// shifted grid (as iq4_k_r4's extra bits).
// vpshufb within each 128-bit lane of 16 scale bytes (sub-blocks 4 i .. 4 i + 3): slot byte b
// (8 ib' + 4 half + k) takes byte 4 ib' + k.
alignas(32) constexpr uint8_t kScaleSlots[32] = {
    0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7, 8, 9, 10, 11, 8, 9, 10, 11, 12, 13, 14, 15, 12, 13, 14, 15,
};

template <typename I, typename B, int Shift>
struct ks_grid_dec : per16_dec<I, B, 127, false, true> {
    using state = half_scales_state<I>;
    static constexpr size_t kHeader = 16;
    static void group(const uint8_t * g, state & st) {
        st.d = I::rows4(_mm_loadu_ps((const float *) g));
        st.dm = I::mul(st.d, I::set1_ps((float) -Shift));
    }
    static void begin(const B & b, state & st) {
        const __m256i ctl = _mm256_load_si256((const __m256i *) kScaleSlots), one = _mm256_set1_epi8(1);
        for (int i = 0; i < 2; ++i) {
            const __m256i raw = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) (b.scales + 16 * i))), ctl);
            const __m256i sc = _mm256_sub_epi8(_mm256_andnot_si256(one, raw), _mm256_set1_epi8(127));
            st.put(i, sc, true);
            st.put_pairs(i, _mm256_and_si256(sc, _mm256_cmpeq_epi8(_mm256_and_si256(raw, one), one)), true);
        }
    }
};

template <typename I>
struct iq4_ks_r4_dec : ks_grid_dec<I, iq4_ks_r4_block, kIq4Shift> {
    static void levels(const iq4_ks_r4_block & b, int ib, typename I::vi * lv) { iq4_levels<I>(b.qs + 64 * ib, lv); }
};

template <typename I>
struct iq5_ks_r4_dec : ks_grid_dec<I, iq5_ks_r4_block, kIq5Shift> {
    static void levels(const iq5_ks_r4_block & b, int ib, typename I::vi * lv) { iq5_levels<I>(b.qs, b.qh, ib, lv); }
};

template <typename I>
struct q6_k_r4_dec : per16_dec<I, q6_k_r4_block, 63, false> {
    using vi = typename I::vi;
    using vf = typename I::vf;
    using Block = q6_k_r4_block;
    using state = half_scales_state<I>;
    static void begin(const Block & b, state & st) {
        for (int i = 0; i < 2; ++i) {
            const __m256i sc = _mm256_loadu_si256((const __m256i *) (b.scales + 32 * i));
            st.put(i, sc, true);
            st.put_pairs(i, sc, true);
        }
        st.d = I::rows4(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) b.d)));
        st.dm = I::mul(st.d, I::set1_ps(32.0f));   // levels are q + 32
    }
    // Part J's two high bits moved to bits 4-5 of each byte (still to be masked). In 32-byte
    // vectors every lane of a part holds the same quarter, so the move is an immediate shift; in
    // 64-byte ones the quarters differ by lane group, and a per-lane rotate does it in one.
    template <int J> static vi high_bits_at_4(vi h) {
        if constexpr (I::kBytes == 32) {
            constexpr int s = kQ6Shifts<32>.v[J][0];
            static_assert(kQ6Shifts<32>.v[J][7] == s, "a part of 32 bytes holds one quarter");
            if constexpr (s < 4) return I::template slli16<4 - s>(h);
            else if constexpr (s > 4) return I::template srli16<s - 4>(h);
            else return h;
        } else {
            return I::rolv32(h, I::load(kQ6Rotations<I::kBytes>.v[J]));
        }
    }
    template <int J> static void part_pair(const uint8_t * ql, vi h, vi * lv) {
        const vi v = I::load(ql + (J / 2) * I::kBytes), top = I::set8(0x30);
        lv[J] = I::nibble_or(v, I::and_(high_bits_at_4<J>(h), top));
        lv[J + 1] = I::nibble_or(I::srli16_4(v), I::and_(high_bits_at_4<J + 1>(h), top));
    }
    static void levels(const Block & b, int ib, vi * lv) {
        const vi h = I::bcast32(b.qh + 32 * ib);
        part_pair<0>(b.ql + 64 * ib, h, lv);
        if constexpr (I::kBytes == 32) part_pair<2>(b.ql + 64 * ib, h, lv);
    }
};

// The 32-value layouts (iq4_nl_r4, q5_0_r4, q6_0_r4) against q8_0: a block is one sub-block
// with a float scale per row, so the loop's per-block float step is per 32 values; the levels
// are signed (q5_0 / q6_0 less their offsets 16 / 32), which leaves no min term, and the int16
// scale is 1.
template <typename I, typename B, int kMax, int R = 4, lane_shape S = kNibbleLanes>
struct b32_dec {
    using Block = B;
    struct state {
        typename I::vf d, dm;
    };
    static constexpr int kPairs = 0, kMaxLevel = kMax, NM = 0, kSubs = 1, kRows = R;
    static constexpr bool kSigned = true;
    static constexpr lane_shape kLanes = S;
    static constexpr size_t kHeader = 0;
    static void begin(const B & b, state & st) {
        if constexpr (R == 4) st.d = I::rows4(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) b.d)));
        else st.d = I::rows8(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) b.d)));
    }
    static typename I::vi scale(const state &, int) { return I::set16(1); }
};

// q4_0_r8: nibbles less 8; q8_0_r8: the bytes themselves
template <typename I>
struct q4_0_r8_dec : b32_dec<I, q4_0_r8_block, 8, 8, kR8NibbleLanes> {
    static void levels(const q4_0_r8_block & b, int, typename I::vi * lv) {
        nibble_levels<I, 128>(b.qs, lv);
        for (int j = 0; j < 256 / I::kBytes; ++j) lv[j] = I::sub8(lv[j], I::set8(8));
    }
};

// mxfp4_r8: q4_0_r8's runs indexing the mxfp4 table (twice the e2m1 values), per row an e8m0
// exponent: the scale 2^(e - 128) built as float bits (e - 1) << 23, or the subnormal
// 0x00200000 << e for e < 2 (e8m0_to_fp32_half)
alignas(16) constexpr int8_t kMxfp4Grid[16] = KILN_MXFP4_VALUES;
template <typename I>
struct mxfp4_r8_dec : b32_dec<I, mxfp4_r8_block, 12, 8, kR8NibbleLanes> {
    using state = typename b32_dec<I, mxfp4_r8_block, 12, 8, kR8NibbleLanes>::state;
    static void begin(const mxfp4_r8_block & b, state & st) {
        const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) b.e)), one = _mm256_set1_epi32(1);
        const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
        const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
        st.d = I::rows8(_mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, _mm256_cmpgt_epi32(e, one))));
    }
    static void levels(const mxfp4_r8_block & b, int, typename I::vi * lv) {
        nibble_levels<I, 128>(b.qs, lv);
        grid_lookup<I, 128>(kMxfp4Grid, lv);
    }
};

// iq4_xs_r8: 8-row groups of iq4_xs super-blocks against q8_K: per sub-block ib 128 bytes of
// nibbles (kR8XsLanes) through the iq4_nl grid, row k's 6-bit scale (less 32) in split_scale6
// slot 8 ib + k, fp16 row scales; no min term.
template <typename I>
struct iq4_xs_r8_dec {
    using Block = iq4_xs_r8_block;
    using state = half_scales_state<I>;
    static constexpr int kPairs = 0, kMaxLevel = 127, NM = 0, kSubs = 8, kRows = 8;
    static constexpr bool kSigned = true;
    static constexpr lane_shape kLanes = kR8XsLanes;
    static constexpr size_t kHeader = 0;
    static void begin(const iq4_xs_r8_block & b, state & st) {
        __m256i sc[2];
        split_scales6_minus32(b.scales_l, b.scales_h, sc);
        st.put(0, sc[0], true);
        st.put(1, sc[1], true);
        st.d = I::rows8(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) b.d)));
    }
    // int32 lane l (row l % 8): the row's scale in both int16 halves
    static typename I::vi scale(const state & st, int ib) {
        const __m256i x = _mm256_cvtepi16_epi32(_mm_load_si128((const __m128i *) (st.s + 8 * ib)));
        return I::bcast256(_mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(x, 16)));
    }
    static void levels(const iq4_xs_r8_block & b, int ib, typename I::vi * lv) {
        nibble_levels<I, 128>(b.qs + 128 * ib, lv);
        grid_lookup<I, 128>(kIq4Grid, lv);
    }
};
template <typename I>
struct q8_0_r8_dec : b32_dec<I, q8_0_r8_block, 127, 8, kR8ByteLanes> {
    static void levels(const q8_0_r8_block & b, int, typename I::vi * lv) {
        for (int j = 0; j < 256 / I::kBytes; ++j) lv[j] = I::load(b.qs + j * I::kBytes);
    }
};

template <typename I>
struct iq4_nl_r4_dec : b32_dec<I, iq4_nl_r4_block, 127> {
    static void levels(const iq4_nl_r4_block & b, int, typename I::vi * lv) { iq4_levels<I>(b.qs, lv); }
};

constexpr int q5_0_bit_of(int q) { return q % 4 * 2 + q / 4; }   // q5_0_r4_hbit: 0 2 4 6 1 3 5 7
constexpr int q6_0_shift_of(int q) { return 2 * (q % 4); }        // q6_0_r4_hshift
template <int V> constexpr lane_table<V, nibble_quarter, q5_0_bit_of> kQ50Bits{};
template <int V> constexpr lane_table<V, nibble_quarter, q6_0_shift_of> kQ60Shifts{};

// nibbles | (the high bits of h at the lane's shift, masked) << 4, less the offset
template <typename I>
inline void offset_levels(const uint8_t * qs, typename I::vi h, const int32_t * shifts, char mask, char offset, typename I::vi * lv) {
    nibble_levels<I>(qs, lv);
    const typename I::vi m = I::set8(mask), off = I::set8(offset);
    for (int j = 0; j < 128 / I::kBytes; ++j) {
        lv[j] = I::sub8(I::or_(lv[j], I::slli16_4(I::and_(I::srlv32(h, I::load(shifts + j * I::kBytes / 4)), m))), off);
    }
}

// q5_0_r4: the fifth bits of row k in qh[4 k + p % 4]
template <typename I>
struct q5_0_r4_dec : b32_dec<I, q5_0_r4_block, 16> {
    static void levels(const q5_0_r4_block & b, int, typename I::vi * lv) {
        offset_levels<I>(b.qs, I::bcast16(b.qh), kQ50Bits<I::kBytes>.v[0], 1, 16, lv);
    }
};

// q6_0_r4: the top two bits in qh[q6_0_r4_hoff(p) + 4 k + p % 4] (the second 16 bytes for
// quarters 4..7, which the odd lane groups hold: bcast32)
template <typename I>
struct q6_0_r4_dec : b32_dec<I, q6_0_r4_block, 32> {
    static void levels(const q6_0_r4_block & b, int, typename I::vi * lv) {
        offset_levels<I>(b.qs, I::bcast32(b.qh), kQ60Shifts<I::kBytes>.v[0], 3, 32, lv);
    }
};

// ---------------------------------------------------------------------------------------------

// A decoder whose levels are magnitudes with separate sign bits (the lattice grids,
// gemv-interleaved-lattice.h) says kSignsApart and gives the parts' signs itself (D::signs: a
// byte negative where the value is, positive else), so the loop skips the vpabsb and takes
// them as they are; the others' signed levels give their own signs.
template <typename D>
constexpr bool signs_apart() {
    if constexpr (requires { D::kSignsApart; }) return D::kSignsApart;
    else return false;
}

// Groups of 4 rows times C columns (spread activations xs, one column every col_bytes).
template <typename I, typename D, int C>
void rows_times_columns(int64_t nb, const uint8_t * w, size_t w_stride, size_t row_size, const uint8_t * xs, size_t col_bytes,
                        float * dst, size_t dst_stride, int nr) {
    using vi = typename I::vi;
    using vf = typename I::vf;
    using L = act_layout<I::kBytes, D::kPairs, D::kSubs, D::kRows>;
    constexpr int V = I::kBytes, NP = 32 * D::kRows / V, R = D::kRows;
    // parts whose vpmaddubsw results add up in int16 without overflow (|q8_K| <= 127)
    constexpr int kFit = 32767 / (2 * 127 * D::kMaxLevel), G = kFit >= NP ? NP : kFit >= 2 ? 2 : 1;
    // one column: two accumulators, so the sub-blocks' products are not one chain of vpdpwssd
    constexpr int A = C == 1 ? 2 : 1;
    // The groups are one sequential stream, but a super-block's work is long enough that the
    // hardware prefetchers alone left q5/q6_k_r4 waiting on memory (q6_k_r4 0.69 -> 0.48 ms at
    // 4096 x 4096 with this, AVX512, least of 5; 1024 and 2048 bytes ahead helped less, 8192 no more).
    constexpr size_t kAhead = 4096;
    typename D::state st;
    for (int r0 = 0; r0 < nr; r0 += R) {
        const char * group = ggml_cpu_contiguous_group((const char *) w + r0 * w_stride, w_stride, row_size, R);
        if constexpr (D::kHeader > 0) D::group((const uint8_t *) group, st);
        const auto * blk = (const typename D::Block *) (group + D::kHeader);
        vf f[C];
        for (int c = 0; c < C; ++c) f[c] = I::zero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            for (size_t o = 0; o < sizeof(blk[b]); o += 64) _mm_prefetch((const char *) (blk + b) + kAhead + o, _MM_HINT_T1);
            D::begin(blk[b], st);
            vi acc[C][A];
            for (int c = 0; c < C; ++c) {
                for (int a = 0; a < A; ++a) acc[c][a] = I::zero();
            }
            // unrolled, so that acc[c][ib % A] is a register: indexed at run time it went through
            // the stack, a store and a reload on every sub-block's accumulation chain
#pragma GCC unroll 8
            for (int ib = 0; ib < D::kSubs; ++ib) {
                vi lv[NP], sign[D::kSigned ? NP : 1];
                D::levels(blk[b], ib, lv);
                if constexpr (signs_apart<D>()) D::signs(blk[b], ib, sign);
                else if constexpr (D::kSigned) {
                    for (int j = 0; j < NP; ++j) sign[j] = lv[j], lv[j] = I::abs8(lv[j]);
                }
                // the activations of part j, with the level's sign where the levels are signed
                auto act = [&](const uint8_t * X, int j) {
                    if constexpr (D::kSigned) return I::sign8(I::load(X + j * V), sign[j]);
                    else return I::load(X + j * V);
                };
                const vi s = D::scale(st, ib);
                for (int c = 0; c < C; ++c) {
                    const uint8_t * X = xs + c * col_bytes + b * L::kSize + ib * NP * V;
                    for (int j0 = 0; j0 < NP; j0 += G) {
                        vi p = I::maddubs(lv[j0], act(X, j0));
                        for (int j = j0 + 1; j < j0 + G; ++j) p = I::add16(p, I::maddubs(lv[j], act(X, j)));
                        acc[c][ib % A] = I::dot16(acc[c][ib % A], p, s);
                    }
                }
            }
            for (int c = 0; c < C; ++c) {
                const uint8_t * xb = xs + c * col_bytes + b * L::kSize;
                vi sum = acc[c][0];
                if constexpr (A > 1) sum = I::add32(sum, acc[c][1]);
                float d;
                std::memcpy(&d, xb + L::kD, 4);
                const vf dx = I::set1_ps(d);
                f[c] = I::fmadd(I::cvt(sum), I::mul(st.d, dx), f[c]);
                if constexpr (D::NM > 0) {
                    vi mins = I::zero();
                    for (int v = 0; v < D::NM; ++v) mins = I::dot16(mins, st.m[v], I::load(xb + L::kX + v * V));
                    f[c] = I::fnmadd(I::cvt(mins), I::mul(st.dm, dx), f[c]);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            if constexpr (R == 4) _mm_storeu_ps(dst + c * dst_stride + r0, I::sum_lanes(f[c]));
            else _mm256_storeu_ps(dst + c * dst_stride + r0, I::sum_rows8(f[c]));
        }
    }
}

// The q8_K kernel of a layout: fewer than kMinCols columns here, the panel (Panel) above.
template <typename I, typename D, int kMinCols, ggml_gemm_t Panel>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
          int nr, int nc) {
    static_assert(kMinCols <= 6, "column tiles up to 5");
    if (nc >= kMinCols) {
        Panel(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    GGML_ASSERT(nr % D::kRows == 0 && n % (32 * D::kSubs) == 0 && "interleaved gemm: whole row groups and blocks");
    using L = act_layout<I::kBytes, D::kPairs, D::kSubs, D::kRows>;
    const int64_t nb = n / (32 * D::kSubs);
    const size_t col_bytes = nb * L::kSize, row_size = (D::kHeader + nb * sizeof(typename D::Block)) / D::kRows;
    auto * xs = (uint8_t *) ggml_cpu_kernel_scratch(GGML_CPU_SCRATCH_PANEL_X, nc * col_bytes);
    spread_columns<I, D>((const uint8_t *) x, x_stride, nc, nb, xs);
    const auto * wb = (const uint8_t *) w;
    switch (nc) {
        case 1: rows_times_columns<I, D, 1>(nb, wb, w_stride, row_size, xs, col_bytes, dst, dst_stride, nr); break;
        case 2: rows_times_columns<I, D, 2>(nb, wb, w_stride, row_size, xs, col_bytes, dst, dst_stride, nr); break;
        case 3: rows_times_columns<I, D, 3>(nb, wb, w_stride, row_size, xs, col_bytes, dst, dst_stride, nr); break;
        case 4: rows_times_columns<I, D, 4>(nb, wb, w_stride, row_size, xs, col_bytes, dst, dst_stride, nr); break;
        default: rows_times_columns<I, D, 5>(nb, wb, w_stride, row_size, xs, col_bytes, dst, dst_stride, nr); break;
    }
}

} // namespace r4k_gemv
} // namespace
