// Products of the row-interleaved layouts (_r4 / _r8) on the panel gemms, read from their woven
// blocks directly: no unweaving back to the plain rows. This file is the driver and the helpers
// the group decoders share; the decoders are in panel-r8-legacy.h (32-value blocks), panel-r8-k.h
// (k-quants) and panel-r8-iqk.h (the non-linear ik types), registered by panel-r8-types.h.
//
// Why it is cheap: these layouts already hold, per run of 32 (r8) or 16 (r4) bytes, 4
// consecutive values of each row of a group, which is one panel vector [row 0..7][4 levels]
// (two r4 runs side by side). Decoding is therefore a handful of loads (q8_0_r8), nibble splits
// (q4_0_r8, q4_k_r4), bit merges (the fifth and sixth bits of q5_0_r4 .. q6_k_r4) or a table
// lookup (the non-linear grids) per vector, with no transpose; an AVX512 panel (16 lanes) takes
// two such 8-lane decodes. The fp16 row scales of a group arrive as one 8-wide conversion.
//
// Batches pack all their row groups once per call (like the plain types) and run the shared
// column tiles. Few columns (token generation) decode 256-value slices of one row group into L1
// and multiply them with every column right away, so the weights are read from memory once.
//
// Included by each ISA folder after its panel.h (it uses that panel's kRows, kCols, records and
// micro kernel); the code here is AVX2 + F16C, valid in both folders.
#pragma once

#include "quants/quants-interleaved.h"

#include <algorithm>
#include <cstring>

namespace {
namespace kiln_panel {

// Group decoder concept G (on top of the panel decoder's kSub / kMaxLevel / kBias):
//   Block, kR, kBlockValues  the woven block of one group of kR (4, 8 or 16) rows and how many
//                            values of each row it holds;
//   kSubs                    sub-blocks (kSub values each) per block;
//   kRowScales (optional)    the group starts with kR row scales of type RowScale (f32 for
//                            iq5_ks_r4 and q8_KV_r8, fp16 for iq1_s_r4 / iq1_m_r4);
//   decode(blocks, [row_scales,] [half,] j, out, vs, scale, bias): sub-block j of 8 rows
//   (blocks[0 .. 8 / kR - 1], one per group; rows past the end read a zero group; a 16-row
//   group gives rows 8 half .. 8 half + 7) -> kSub / 4 vectors of 32 bytes ([row 0..7][4
//   levels], natural value order) at out + k * vs, 8 scales and 8 biases (a value is scale *
//   level + bias). Lanes of rows past the end are never stored to dst, so whatever a zero group
//   decodes to there is harmless.
//   kScales16 (optional, AVX2, see scales16<D> in avx2/panel.h): decode(blocks, j, out, vs,
//   tail) gives the levels of 32-value sub-block j as above and the record's integer-scale
//   tail (store_scales16_tail) in place of float scales and biases; all 8 lanes at once.

// Decoders are inlined into pack_groups: a call per sub-block costs as much as a small decode.
#define KILN_GROUP_DECODE static inline __attribute__((always_inline)) void

template <typename G> constexpr bool has_row_scales() {
    if constexpr (requires { G::kRowScales; }) return G::kRowScales;
    else return false;
}
// Rows one decode call fills: 8 (the AVX2 decoders here), or kLanes where a folder has wider ones.
template <typename G> constexpr int lanes_of() {
    if constexpr (requires { G::kLanes; }) return G::kLanes;
    else return 8;
}
// Bytes of row scales in front of a woven group.
template <typename G> constexpr size_t head_bytes() {
    if constexpr (has_row_scales<G>()) return G::kR * sizeof(typename G::RowScale);
    else return 0;
}
// What a decoder reads its row scales as (unused where there are none).
template <typename G> struct row_scale_of { using type = float; };
template <typename G> requires(has_row_scales<G>()) struct row_scale_of<G> { using type = typename G::RowScale; };

// What rows past the end of a call read: a zeroed group (large enough for every layout here).
alignas(64) constexpr uint8_t kZeroGroup[2048] = {};

inline __m256 fp16x8(const ggml_fp16_t * h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) h)); }

// The 4 fp16 row scales of two 4-row groups as 8 floats (group a in lanes 0..3).
inline __m256 fp16x4x2(const ggml_fp16_t * a, const ggml_fp16_t * b) {
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *) a), _mm_loadl_epi64((const __m128i *) b)));
}

// 16 bytes of each of two 4-row groups side by side (a: bytes 0..15, b: 16..31).
inline __m256i pair16(const uint8_t * a, const uint8_t * b) {
    return _mm256_loadu2_m128i((const __m128i *) b, (const __m128i *) a);
}

// 4 bytes of each of two groups widened to 8 int32 lanes.
inline __m256i pair4_epu8(const uint8_t * a, const uint8_t * b) {
    int32_t x, y;
    std::memcpy(&x, a, 4);
    std::memcpy(&y, b, 4);
    return _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(x), _mm_cvtsi32_si128(y)));
}

// kWidth bits starting at bit `from` of every byte of h, moved to bit `to` (other bits cleared).
// The 16-bit shift moves a neighbour byte's bits in only where the mask clears them.
template <int kWidth>
inline __m256i move_bits(__m256i h, int from, int to) {
    const __m256i t = from >= to ? _mm256_srl_epi16(h, _mm_cvtsi32_si128(from - to)) : _mm256_sll_epi16(h, _mm_cvtsi32_si128(to - from));
    return _mm256_and_si256(t, _mm256_set1_epi8((char) (((1 << kWidth) - 1) << to)));
}

// The 4-bit levels of half `half` (quarters 4 half .. 4 half + 3, values 16 half ..) of a 32-value
// sub-block of two 4-row groups, whose 64-byte nibble runs (r4_nibble) start at a and b: quarter
// 4h + i in q[i]. Quarters 4h and 4h + 2 are the low and high nibbles of the run at 16 h, 4h + 1
// and 4h + 3 those of the run at 32 + 16 h.
inline void r4_nibble_half(const uint8_t * a, const uint8_t * b, int half, __m256i * q) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i x = pair16(a + 16 * half, b + 16 * half), y = pair16(a + 32 + 16 * half, b + 32 + 16 * half);
    q[0] = _mm256_and_si256(x, m4);
    q[1] = _mm256_and_si256(y, m4);
    q[2] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
    q[3] = _mm256_and_si256(_mm256_srli_epi16(y, 4), m4);
}

inline void r4_nibbles(const uint8_t * a, const uint8_t * b, __m256i * q) {
    r4_nibble_half(a, b, 0, q);
    r4_nibble_half(a, b, 1, q + 4);
}

// The 2-bit levels of half `half` of a 32-value sub-block of two 4-row groups whose 32-byte
// crumb runs (r4_crumb_byte) start at a and b: quarter 4 half + i (bits 2i of the run) in q[i].
inline void r4_crumb_half(const uint8_t * a, const uint8_t * b, int half, __m256i * q) {
    const __m256i x = pair16(a + 16 * half, b + 16 * half), m3 = _mm256_set1_epi8(3);
    q[0] = _mm256_and_si256(x, m3);
    q[1] = _mm256_and_si256(_mm256_srli_epi16(x, 2), m3);
    q[2] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m3);
    q[3] = _mm256_and_si256(_mm256_srli_epi16(x, 6), m3);
}

// split_scale6 slots is0 .. is0 + 3 (is0 a multiple of 4) of two groups, as 8 int32 (0..63).
inline __m256i split_scales6_x4(const uint8_t * sla, const uint8_t * sha, const uint8_t * slb, const uint8_t * shb, int is0) {
    const __m256i lo = _mm256_srl_epi32(pair4_epu8(sla + is0 % 32, slb + is0 % 32), _mm_cvtsi32_si128(4 * (is0 / 32)));
    const __m256i hi = _mm256_srl_epi32(pair4_epu8(sha + is0 % 16, shb + is0 % 16), _mm_cvtsi32_si128(2 * (is0 / 16)));
    return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xF)), _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
}

// The constants of a group decoder: blocks of kR rows holding kBlockValues values of each, in
// kSub-value sub-blocks; levels up to kMaxLevel (0: signed bytes), with or without a bias.
template <typename B, int R, int Sub, int BlockValues, int MaxLevel, bool Bias>
struct group_traits {
    using Block = B;
    static constexpr int kR = R, kSub = Sub, kSubs = BlockValues / Sub, kBlockValues = BlockValues, kMaxLevel = MaxLevel;
    static constexpr bool kBias = Bias;
};
// Grid values (signed levels): offset by 128 into the bias where the panel multiplies unsigned
// bytes (AVX512, see store_levels), an offset the AVX512 panel then folds away as it does the
// plain formats' (pack_groups). Where it takes signed bytes (AVX2, kSigned) they stay signed,
// unless the grid's largest magnitude M is small (kMagnitude > 0: the lattice grids): then they
// are offset by M into 0 .. 2 M with the bias -M scale, as the plain twins' panel-iq.h levels,
// so that vpmaddubsw multiplies them as they are and sums as many steps in int16 as 2 M allows
// (iq3_s: 4), where signed levels cost a vpsignb or a second vpmaddwd per product.
// kOffset: what a decoder adds to every level it stores (store_offset_levels).
template <typename B, int R, int Sub, int BlockValues, bool kSigned, int kMagnitude = 0>
struct grid_traits : group_traits<B, R, Sub, BlockValues, kSigned ? 2 * kMagnitude : 255, (!kSigned || kMagnitude > 0)> {
    static_assert(kMagnitude >= 0 && 2 * kMagnitude < 128, "offset levels must stay below 128");
    static constexpr int kLevelOffset = kSigned ? 0 : 128;
    static constexpr int kOffset = kSigned ? kMagnitude : 128;
};

// Sub-block scales s and biases s * offset (levels stored with an offset added: value = s (u + offset)).
inline void store_offset_coefs(__m256 s, float offset, float * scale, float * bias) {
    _mm256_storeu_ps(scale, s);
    _mm256_storeu_ps(bias, _mm256_mul_ps(s, _mm256_set1_ps(offset)));
}

// The non-linear grids as constant data, so that their vpshufb tables are built once per call
// (an extern table could change under the decoders' stores, as far as the compiler knows).
alignas(16) constexpr int8_t kIq2Grid[16] = KILN_IQ2NL_VALUES;
alignas(16) constexpr int8_t kIq3Grid[16] = KILN_IQ3NL_VALUES;
alignas(16) constexpr int8_t kIq4Grid[32] = KILN_IQ4K_VALUES;
alignas(16) constexpr int8_t kIq5Grid[64] = KILN_IQ5NL_VALUES;
inline __m256i grid16(const int8_t * g) { return _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *) g)); }

// Signed levels for the AVX512 panel's unsigned products: offset by 128, folded into the bias.
template <bool kSigned>
inline void store_levels(uint8_t * out, __m256i v) {
    _mm256_store_si256((__m256i *) out, kSigned ? v : _mm256_xor_si256(v, _mm256_set1_epi8((char) 0x80)));
}
// Levels v + kOffset (a grid_traits offset: 0, the magnitude M or 128), their scales and biases.
template <int kOffset>
inline void store_offset_levels(uint8_t * out, __m256i v) {
    _mm256_store_si256((__m256i *) out, kOffset == 0 ? v : _mm256_add_epi8(v, _mm256_set1_epi8((char) kOffset)));
}
template <int kOffset>
inline void store_grid_coefs(__m256 s, float * scale, float * bias) { store_offset_coefs(s, -(float) kOffset, scale, bias); }
template <bool kSigned>
inline void store_signed_coefs(__m256 s, float * scale, float * bias) {
    _mm256_storeu_ps(scale, s);
    _mm256_storeu_ps(bias, kSigned ? _mm256_setzero_ps() : _mm256_mul_ps(s, _mm256_set1_ps(-128.0f)));
}

// The panel records of blocks b0 .. b1 - 1 of kRows rows starting at row `row0` of w, L lanes
// (lanes_of<G>: one decode of L / G::kR woven groups, or half of a 16-row group) at a time:
// lanes past `rows` are zero. row0 is a multiple of 8 (and of G::kR where that is smaller), so a 16-row group may
// start before it. A woven group whose rows are not contiguous (w_stride != the row size) is
// gathered first.
// The blocks go in slices of about 256 values, every lane of a slice before the next, and the
// AVX512 level-offset fold (fold_level_offsets) runs on each slice's records while they are in L1:
// folded after the whole call, the records of a 16-row group at K = 4096 (80 KB) were read back
// from L2, which made the layouts' pack twice the cost of their twins' (q8_0_r8 against q8_0).
template <typename G>
void pack_groups(const uint8_t * w, size_t w_stride, int64_t row0, int rows, int64_t n, int64_t b0, int64_t b1, uint8_t * out) {
    using Block = typename G::Block;
    using RowScale = typename row_scale_of<G>::type;
    constexpr int S = G::kSub, KV = S / 4, VB = kRows * 4, R = G::kR, L = lanes_of<G>(), NG = R >= L ? 1 : L / R, NH = kRows / L;
    static_assert(kRows % L == 0, "decoder wider than the panel");
    // wide_x (AVX2's signed levels): each sub-block decoded to a record here, then reordered
    // into out (wide_order_record); the decoders fill all 8 lanes at once there
    constexpr bool kWide = wide_x<G>();
    static_assert(!kWide || L == kRows, "wide records are widened from whole byte records");
    static_assert(!scales16<G>() || (L == kRows && S == 32), "kScales16 tails are written whole, per 32 values");
    constexpr size_t rec = kWide ? 0 : w_record_of<G>, head = head_bytes<G>();
    alignas(32) uint8_t rec8[kWide ? w_record<S> : 1];
    static_assert(R >= 8 || head + sizeof(Block) <= sizeof(kZeroGroup), "zero group too small");   // r8, r16: whole lanes
    const int64_t nblocks = b1 - b0;
    const size_t row_size = (head + (size_t) (n / G::kBlockValues) * sizeof(Block)) / R;
    // the woven groups of each L lanes (past `rows`: the zero group, block 0 for every b)
    const uint8_t * grp[NH][NG] = {};
    bool past[NH][NG] = {};
    int half[NH] = {};
    int live = 0;   // lane sets with a row in them: 0 .. live - 1
    for (int h = 0; h < NH; ++h) {
        if (L * h >= rows) {
            for (int64_t sb = 0; sb < nblocks * G::kSubs; ++sb) {
                uint8_t * o = out + sb * rec;
                for (int k = 0; k < KV; ++k) std::memset(o + k * VB + 4 * L * h, 0, 4 * L);
                float * f = (float *) (o + KV * VB);
                std::fill(f + L * h, f + L * h + L, 0.0f);
                std::fill(f + kRows + L * h, f + kRows + L * h + L, 0.0f);
            }
            continue;
        }
        live = h + 1;
        half[h] = R > 8 ? (int) ((row0 + 8 * h) % R) / 8 : 0;
        for (int q = 0; q < NG; ++q) {
            const int r0 = L * h + R * q;
            past[h][q] = r0 >= rows;
            const int64_t first = row0 + r0 - 8 * half[h];   // the group's first row
            const uint8_t * g = past[h][q] ? kZeroGroup : w + first * w_stride;
            if (!past[h][q] && w_stride != row_size) {
                auto * buf = (uint8_t *) ggml_cpu_kernel_scratch(GGML_CPU_SCRATCH_GATHER, NH * NG * R * row_size) + (h * NG + q) * R * row_size;
                for (int k = 0; k < R; ++k) std::memcpy(buf + k * row_size, g + k * w_stride, row_size);
                g = buf;
            }
            grp[h][q] = g;
        }
        // token generation walks kRows / R groups side by side, a slice at a time, with the decode
        // and product in between: with 4 such streams (r4 groups on AVX512) the prefetchers alone
        // left the next slice's loads waiting on memory, so ask for it now. With 2 streams they
        // keep up, and the extra requests only slowed q8_0_r8 (1.0 -> 1.6 ms at 4096 x 4096).
        if (kRows / R >= 4 && b1 < n / G::kBlockValues) {
            for (int q = 0; q < NG; ++q) {
                if (past[h][q]) continue;
                const uint8_t * next = grp[h][q] + head + (b1) * sizeof(Block);
                for (size_t off = 0; off < nblocks * sizeof(Block); off += 64) _mm_prefetch((const char *) next + off, _MM_HINT_T0);
            }
        }
    }
    constexpr int64_t kSlice = (256 + G::kBlockValues - 1) / G::kBlockValues;   // blocks per slice
    for (int64_t s0 = 0; s0 < nblocks; s0 += kSlice) {
        const int64_t s1 = std::min(nblocks, s0 + kSlice);
        for (int h = 0; h < live; ++h) {
            const RowScale * rs[NG];
            for (int q = 0; q < NG; ++q) rs[q] = (const RowScale *) grp[h][q];
            for (int64_t b = s0; b < s1; ++b) {
                const Block * blk[NG];
                for (int q = 0; q < NG; ++q) blk[q] = (const Block *) (grp[h][q] + head) + (past[h][q] ? 0 : b0 + b);
                for (int j = 0; j < G::kSubs; ++j) {
                    uint8_t * o = kWide ? rec8 : out + (b * G::kSubs + j) * rec;
                    float * f = (float *) (o + KV * VB);
                    uint8_t * ol = o + 4 * L * h;
                    float * sl = f + L * h, * bl = f + kRows + L * h;
                    if constexpr (scales16<G>()) G::decode(blk, j, ol, VB, o + KV * VB);
                    else if constexpr (has_row_scales<G>()) G::decode(blk, rs, j, ol, VB, sl, bl);
                    else if constexpr (R > 8) G::decode(blk, half[h], j, ol, VB, sl, bl);
                    else G::decode(blk, j, ol, VB, sl, bl);
                    if constexpr (kWide) wide_order_record<S>(rec8, out + (b * G::kSubs + j) * w_record_of<G>);
                }
            }
        }
        if constexpr (level_offset<G>() != 0) fold_level_offsets<S>(out + s0 * G::kSubs * rec, (s1 - s0) * G::kSubs, level_offset<G>());
    }
}

// f(std::integral_constant<int, C>) for the runtime column count c (1 <= c <= kCols).
template <int C, typename F>
inline void with_cols(int c, F && f) {
    if constexpr (C > 0) {
        if (c == C) f(std::integral_constant<int, C>());
        else with_cols<C - 1>(c, f);
    }
}

// The records of blocks b0 .. b1 - 1 of a row group: pack_groups, or the decoder's own pack
// where it has one (folded_groups, avx2/panel-r8-fold.h).
template <typename G>
inline void pack_group_records(const uint8_t * w, size_t w_stride, int64_t row0, int rows, int64_t n, int64_t b0, int64_t b1,
                               uint8_t * out) {
    if constexpr (requires { G::pack(w, w_stride, row0, rows, n, b0, b1, out); }) G::pack(w, w_stride, row0, rows, n, b0, b1, out);
    else pack_groups<G>(w, w_stride, row0, rows, n, b0, b1, out);
}

// nr a multiple of G::kR (whole groups), n a multiple of G::kBlockValues.
template <typename G, typename A>
void gemm_r8(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
             int nr, int nc) {
    constexpr int S = G::kSub;
    GGML_ASSERT(nr % G::kR == 0 && n % G::kBlockValues == 0 && "interleaved gemm: whole row groups and blocks");
    const int ngroups = (nr + kRows - 1) / kRows;
    const auto * wb = (const uint8_t *) w;
    if (nc >= kMinCols) {
        // K in slabs whose records stay in L2 while every column tile passes over them, as the
        // plain types' gemm (slab_values, panel-drive.inc; one slab where the panel sets no
        // bound). Unbounded, 256 q6_k_r4 rows at K = 4096 packed 1.5 MB of records (AVX2, 512
        // columns, one thread: 113-117 CPU ms against q6_K's 107). The later slabs add to dst,
        // which keeps the products' summation order.
        static_assert(256 % G::kBlockValues == 0, "slabs are whole 256-value steps");
        const int64_t slab = slab_values<G>(n, ngroups);
        const size_t group_bytes = slab / S * w_record_of<G>;
        uint8_t * wbuf = scratch(0, ngroups * group_bytes);
        for (int64_t k0 = 0; k0 < n; k0 += slab) {
            const int64_t k1 = std::min(n, k0 + slab);
            for (int g = 0; g < ngroups; ++g) {
                pack_group_records<G>(wb, w_stride, (int64_t) g * kRows, std::min(kRows, nr - g * kRows), n, k0 / G::kBlockValues,
                               k1 / G::kBlockValues, wbuf + g * group_bytes);
            }
            // one slab (all of K): the packed activation tiles are kept for the product's next
            // calls, as the plain types' gemm does (x_reuse, panel-drive.inc). Repacked per call
            // they cost the layouts 6-16% of a batch-512 product against the twin (AVX512, K = M =
            // 4096, one thread: 128-row chunks, each packing all 512 columns again).
            gemm_tiles<G, A>(k1 - k0, ngroups, wbuf, group_bytes, (const uint8_t *) x + k0 / A::kBlockValues * A::kBlock,
                             x_stride, dst, dst_stride, nr, nc, k0 > 0, slab == n);
        }
        return;
    }
    // few columns: every column tile packed once, then one row group at a time through all of them
    const int64_t nsb = n / S;
    const size_t tile_bytes = nsb * x_record<S, kCols, kSpread>;
    const int ntiles = (nc + kCols - 1) / kCols;
    uint8_t * xbuf = scratch(1, ntiles * tile_bytes);
    const auto * xb = (const uint8_t *) x;
    for (int t = 0; t < ntiles; ++t) {
        with_cols<kCols>(std::min(kCols, nc - t * kCols), [&](auto cc) {
            pack_columns<A, S, decltype(cc)::value, kSpread, unsigned_x<G>(), wide_x<G>()>(xb + t * kCols * x_stride, x_stride, nsb,
                                                                                         xbuf + t * tile_bytes);
        });
    }
    // a slice of about 256 values per row group: its decoded record (5 KB on AVX512) stays in L1
    constexpr int64_t kSliceBlocks = (256 + G::kBlockValues - 1) / G::kBlockValues;
    constexpr int64_t kSliceSubs = kSliceBlocks * G::kSubs;
    const int64_t nblocks = n / G::kBlockValues;
    uint8_t * wbuf = scratch(0, kSliceSubs * w_record_of<G>);
    for (int g = 0; g < ngroups; ++g) {
        const int rows = std::min(kRows, nr - g * kRows);
        for (int64_t b0 = 0; b0 < nblocks; b0 += kSliceBlocks) {
            const int64_t b1 = std::min(nblocks, b0 + kSliceBlocks);
            pack_group_records<G>(wb, w_stride, (int64_t) g * kRows, rows, n, b0, b1, wbuf);
            const int64_t sb0 = b0 * G::kSubs;
            for (int t = 0; t < ntiles; ++t) {
                with_cols<kCols>(std::min(kCols, nc - t * kCols), [&](auto cc) {
                    constexpr int C = decltype(cc)::value;
                    micro<G, C, A::kSuper>((b1 - b0) * G::kSubs, wbuf, xbuf + t * tile_bytes + sb0 * x_record<S, C, kSpread>,
                                           dst + t * kCols * dst_stride + g * kRows, dst_stride, rows, b0 > 0);
                });
            }
        }
    }
}

} // namespace kiln_panel
} // namespace
