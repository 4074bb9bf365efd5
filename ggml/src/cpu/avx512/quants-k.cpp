// AVX512 (BW + VNNI) gemm kernels of q2_K .. q6_K against q8_K activations.
//
// Calls with many activation columns (prompt processing) go to the shared panel gemm (panel.h);
// the kernel below serves token generation and small batches.
//
// Each weight block is decoded once per column tile into registers: four 64-byte vectors of
// unsigned levels u in natural order, four vectors of 16-bit sub-block scales laid out to match
// vpmaddubsw's 16-bit pair sums, and the 16 per-group minimum terms. Then for each of up to 8
// activation columns: vpmaddubsw (u8 x s8 -> s16 pairs, no saturation: u <= 63, |a| <= 127) and
// vpdpwssd (VNNI: s16 x scale -> s32 accumulate) give d*sum(s*u*a) in one int32 vector; the
// minimum / offset term comes from the activation's 16-value sums (bsums). Floats only once
// per block and column.
#include "avx512/register.h"
#include "avx2/scales.h"
#include "cpu-traits.h"
#include "quants/quants-k.h"
#include "panel.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

namespace {

// A block as the small-batch kernel reads it. w[k]: 64 unsigned levels u; which 64 values a
// vector holds is the type's order (kHalves below), and the activations are laid out to match.
// The products go 4 values to an int32 lane (vpdpbusd); a lane's sum is at most 4 * 63 * 127 =
// 32004 in magnitude, so two vectors pack into one of int16 sums (vpackssdw, never saturating)
// whose every 4-word run holds one 16-value group. s01 / s23: the int16 group scale of each word
// of pack(w0 . a0, w1 . a1) / pack(w2 . a2, w3 . a3), so that two vpdpwssd finish the block.
struct decoded {
    __m512i w[4];
    __m512i s01, s23;
    __m512  fm;     // per-16-group minimum (or offset * scale) term times dm, as floats
    __m512i soff;   // types whose bias is only a level offset: offset * scale per group, int16 words 0-15
    float   d;
};

// The pack layout in words: 128-bit lane j of pack(p, q) is p's lane j (words 0-3) then q's
// (words 4-7), and lane j of a product p of w covers bytes 16j .. 16j+15 of w.
// Natural order (w[k] = values 64k .. 64k+63, so byte 16j.. of w[k] is group 4k + j): word
// 8j + i of s01 is group j (i < 4) or 4 + j, of s23 group 8 + j or 12 + j.
inline void pack_scales_natural(__m256i s16, decoded & out) {
    const __m512i s = _mm512_zextsi256_si512(s16);
    const __m512i idx = _mm512_set_epi16(7, 7, 7, 7, 3, 3, 3, 3, 6, 6, 6, 6, 2, 2, 2, 2,
                                         5, 5, 5, 5, 1, 1, 1, 1, 4, 4, 4, 4, 0, 0, 0, 0);
    out.s01 = _mm512_permutexvar_epi16(idx, s);
    out.s23 = _mm512_permutexvar_epi16(_mm512_add_epi16(idx, _mm512_set1_epi16(8)), s);
}

// Two copies of 32 bytes, the upper one shifted right by `shift` bits within 16-bit lanes.
inline __m512i pair(__m256i v, int shift) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, shift), 1);
}

inline __m256i load256(const void * p) { return _mm256_loadu_si256((const __m256i *) p); }

// Natural-order levels and the scale / minimum terms of the 16-group types.
inline void decode_q2_K(const void * vb, decoded & out) {
    const auto * x = (const block_q2_K *) vb;
    const __m512i three = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
        const __m512i z = pair(load256(x->qs + 32 * h), 2);
        out.w[2 * h]     = _mm512_and_si512(z, three);
        out.w[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(z, 4), three);
    }
    const __m128i sc = _mm_loadu_si128((const __m128i *) x->scales);
    pack_scales_natural(_mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0xF))), out);
    const __m512i mi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0xF)));
    out.fm = _mm512_mul_ps(_mm512_cvtepi32_ps(mi), _mm512_set1_ps(_cvtsh_ss(x->dmin)));
    out.d  = _cvtsh_ss(x->d);
}

inline void decode_q3_K(const void * vb, decoded & out) {
    const auto * x = (const block_q3_K *) vb;
    const __m512i three = _mm512_set1_epi8(3);
    const __m512i four = _mm512_set1_epi8(4);
    const __m512i hm = pair(load256(x->hmask), 1);
    for (int h = 0; h < 2; ++h) {
        const __m512i z = pair(load256(x->qs + 32 * h), 2);
        for (int m = 0; m < 2; ++m) {
            const __m512i low = _mm512_and_si512(_mm512_srli_epi16(z, 4 * m), three);
            const __mmask64 high = _mm512_test_epi8_mask(hm, _mm512_set1_epi8((char) (1 << (4 * h + 2 * m))));
            out.w[2 * h + m] = _mm512_mask_add_epi8(low, high, low, four);
        }
    }
    const __m128i sc = q3_K_scales_epi8(x->scales);
    const __m256i s16 = _mm256_cvtepi8_epi16(sc);
    pack_scales_natural(s16, out);
    out.soff = _mm512_zextsi256_si512(_mm256_slli_epi16(s16, 2));
    out.d  = _cvtsh_ss(x->d);
    // the offset 4 folded into the minimum term: mi = 4 * scale, dm = d
    out.fm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), _mm512_set1_ps(4.0f * out.d));
}

inline void decode_q6_K(const void * vb, decoded & out) {
    const auto * x = (const block_q6_K *) vb;
    // qh pairs the 2-bit fields at bits 0-1 and 2-3 (values 0-63 of a half) and 4-5 and 6-7
    // (values 64-127): the latter already sit where the level's bits 4-5 go, the former move up 4.
    // (a & 0x0F) | b is one vpternlogd (0xEA: A & B | C).
    const __m512i f = _mm512_set1_epi8(0x0F);
    const __m512i top = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(x->ql + 64 * h);
        const __m512i qh = pair(load256(x->qh + 32 * h), 2);
        const __m512i hi0 = _mm512_and_si512(_mm512_slli_epi16(qh, 4), top);
        const __m512i hi1 = _mm512_and_si512(qh, top);
        out.w[2 * h]     = _mm512_ternarylogic_epi32(ql, f, hi0, 0xEA);
        out.w[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), f, hi1, 0xEA);
    }
    const __m128i sc = _mm_loadu_si128((const __m128i *) x->scales);
    const __m256i s16 = _mm256_cvtepi8_epi16(sc);
    pack_scales_natural(s16, out);
    out.soff = _mm512_zextsi256_si512(_mm256_slli_epi16(s16, 5));   // |32 * scale| <= 4096
    out.d  = _cvtsh_ss(x->d);
    // the offset 32 folded into the minimum term: mi = 32 * scale, dm = d (32 d is exact)
    out.fm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), _mm512_set1_ps(32.0f * out.d));
}

// q4_K / q5_K levels in natural order (the panel's layout): qs byte l of 32-byte run k holds
// value 64k + l (low nibble) and 64k + 32 + l (high).
inline void levels_k4_natural(const uint8_t * qs, __m512i * w) {
    const __m512i f = _mm512_set1_epi8(0xF);
    for (int k = 0; k < 4; ++k) w[k] = _mm512_and_si512(pair(load256(qs + 32 * k), 4), f);
}

inline void levels_q5_K_natural(const block_q5_K * x, __m512i * w) {
    levels_k4_natural(x->qs, w);
    const __m512i qh = pair(load256(x->qh), 1);
    for (int k = 0; k < 4; ++k) {
        const __mmask64 high = _mm512_test_epi8_mask(qh, _mm512_set1_epi8((char) (1 << (2 * k))));
        w[k] = _mm512_mask_add_epi8(w[k], high, w[k], _mm512_set1_epi8(16));
    }
}

// q4_K / q5_K for the small-batch kernel, in the "halves" order: a 64-byte load of qs gives two
// level vectors with one shift and two masks (low nibbles: values 0-31 and 64-95 of the 128 the
// load covers; high nibbles: 32-63 and 96-127), so w[k] holds sub-blocks k' and k' + 2 in its
// 256-bit halves, k' = 4 (k / 2) + k % 2. The activations are stored in the same order
// (halves_order below).
inline void levels_k4_halves(const uint8_t * qs, __m512i * w) {
    const __m512i f = _mm512_set1_epi8(0xF);
    for (int h = 0; h < 2; ++h) {
        const __m512i q = _mm512_loadu_si512(qs + 64 * h);
        w[2 * h]     = _mm512_and_si512(q, f);
        w[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), f);
    }
}

// Sub-block scales sc[0..7] and minimums mn[0..7] of a q4_K / q5_K block (k4_scales_mins'
// arithmetic) in the halves order: both broadcast as one 16-byte lane (sc then mn) and spread
// by byte shuffles. Word 8j + i of s01 is sub-block 2 (j / 2) + (i >= 4) (packed products of
// w0 = sub-blocks 0 | 2 and w1 = 1 | 3), of s23 that plus 4; minimum-term lane 4j + i (group
// 4j + i) takes mn[(4j + i) / 2].
inline void scales_k4_halves(const uint8_t * packed, float d, float dmin, decoded & out) {
    uint64_t sc, mn;
    k4_scales_mins_u64(packed, sc, mn);
    const __m128i scmn = _mm_set_epi64x((long long) mn, (long long) sc);
    const __m512i b = _mm512_broadcast_i32x4(scmn);   // sc[0..7] then mn[0..7]
    const char z = (char) 0x80;   // vpshufb: a set top bit gives 0
    const __m512i pick01 = _mm512_set_epi8(z, 3, z, 3, z, 3, z, 3, z, 2, z, 2, z, 2, z, 2,
                                           z, 3, z, 3, z, 3, z, 3, z, 2, z, 2, z, 2, z, 2,
                                           z, 1, z, 1, z, 1, z, 1, z, 0, z, 0, z, 0, z, 0,
                                           z, 1, z, 1, z, 1, z, 1, z, 0, z, 0, z, 0, z, 0);
    const __m512i pick_mins = _mm512_set_epi8(z, z, z, 15, z, z, z, 15, z, z, z, 14, z, z, z, 14,
                                              z, z, z, 13, z, z, z, 13, z, z, z, 12, z, z, z, 12,
                                              z, z, z, 11, z, z, z, 11, z, z, z, 10, z, z, z, 10,
                                              z, z, z, 9, z, z, z, 9, z, z, z, 8, z, z, z, 8);
    out.s01 = _mm512_shuffle_epi8(b, pick01);
    // the same picks 4 sub-blocks on (a zero byte stays zero: 0x80 + 4 keeps the top bit)
    out.s23 = _mm512_shuffle_epi8(b, _mm512_add_epi8(pick01, _mm512_set1_epi8(4)));
    out.fm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_shuffle_epi8(b, pick_mins)), _mm512_set1_ps(dmin));
    out.d = d;
}

inline void decode_q4_K_halves(const void * vb, decoded & out) {
    const auto * x = (const block_q4_K *) vb;
    levels_k4_halves(x->qs, out.w);
    scales_k4_halves(x->scales, _cvtsh_ss(x->d), _cvtsh_ss(x->dmin), out);
}

// q5_K: the fifth bit of value 32b + l is bit b of qh[l]; w[k] (sub-blocks k' | k' + 2) reads
// bit k' in its lower half and bit k' + 2 in its upper half of qh broadcast to both halves.
inline void decode_q5_K_halves(const void * vb, decoded & out) {
    const auto * x = (const block_q5_K *) vb;
    levels_k4_halves(x->qs, out.w);
    const __m512i qh = _mm512_broadcast_i64x4(load256(x->qh));
    for (int k = 0; k < 4; ++k) {
        const int b = 4 * (k / 2) + k % 2;
        const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8((char) (1 << b)), _mm256_set1_epi8((char) (1 << (b + 2))), 1);
        out.w[k] = _mm512_mask_add_epi8(out.w[k], _mm512_test_epi8_mask(qh, bits), out.w[k], _mm512_set1_epi8(16));
    }
    scales_k4_halves(x->scales, _cvtsh_ss(x->d), _cvtsh_ss(x->dmin), out);
}

// The small-batch decoders: Decode, the block size, whether the levels come in the halves
// order (else natural), and whether the bias is only a level offset (q3_K, q6_K), which then
// joins the block's integer sum (decoded::soff times the activation's negated group sums, one
// more vpdpwssd) instead of a float minimum term: exact, and per block and column one
// instruction in place of an FMA, with no conversion of the scales to floats per block.
template <void (*Decode)(const void *, decoded &), size_t BlockBytes, bool Halves, bool IntOffset = false>
struct tg_decoder {
    static constexpr size_t kBytes = BlockBytes;
    static constexpr bool kHalves = Halves;
    static constexpr bool kIntOffset = IntOffset;
    static void decode(const void * b, decoded & out) { Decode(b, out); }
};

// Per activation block of a column tile, computed once and shared by all rows: the values in
// the decoder's order, the group sums as floats times the block scale (for the minimum term),
// and the scale itself.
struct column_block {
    __m512i q[4];
    __m512  bsums_scaled;
    __m512i nbsums;   // the group sums negated, int16 words 0-15 (|sum| <= 16 * 128)
    float   d;
};

template <bool Halves>
inline void prepare_columns(int64_t nb, int C, const char * x, size_t x_stride, column_block * out) {
    for (int64_t b = 0; b < nb; ++b) {
        for (int c = 0; c < C; ++c) {
            const block_q8_K * a = (const block_q8_K *) (x + c * x_stride) + b;
            column_block & o = out[b * C + c];
            for (int h = 0; h < 2; ++h) {
                const __m512i p = _mm512_loadu_si512(a->qs + 128 * h);
                const __m512i q = _mm512_loadu_si512(a->qs + 128 * h + 64);
                if constexpr (Halves) {
                    // [0..31 | 64..95] and [32..63 | 96..127] of the 128 values
                    o.q[2 * h]     = _mm512_shuffle_i64x2(p, q, _MM_SHUFFLE(1, 0, 1, 0));
                    o.q[2 * h + 1] = _mm512_shuffle_i64x2(p, q, _MM_SHUFFLE(3, 2, 3, 2));
                } else {
                    o.q[2 * h] = p;
                    o.q[2 * h + 1] = q;
                }
            }
            const __m256i bs16 = load256(a->bsums);
            const __m512 bs = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(bs16));
            o.bsums_scaled = _mm512_mul_ps(bs, _mm512_set1_ps(a->d));
            o.nbsums = _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), bs16));
            o.d = a->d;
        }
    }
}

// One weight row times C activation columns: per block and column four vpdpbusd, two
// vpackssdw, two vpdpwssd, one conversion and two FMAs (block scale, minimum term); with an
// integer offset term (kIntOffset) a third vpdpwssd and one FMA.
// The rounding is per lane on purpose (each lane's level sum and its group's minimum term meet
// in the same accumulator lane every block): keeping the minimum term in 8 of the 16 lanes
// (0d3771b) rounded 4-5x worse on one-signed activations, since the two terms then cancel only
// in the final horizontal sum (QuantSimd.SmallBatchKQuantsRoundLikeTheScalarOrder).
template <typename Dec, int C>
inline void block_times_columns(const char * wb, const column_block * cols, __m512 * acc) {
    decoded blk;
    Dec::decode(wb, blk);
    for (int c = 0; c < C; ++c) {
        const column_block & a = cols[c];
        __m512i p[4];
        for (int k = 0; k < 4; ++k) p[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), blk.w[k], a.q[k]);
        __m512i sum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_packs_epi32(p[0], p[1]), blk.s01);
        sum = _mm512_dpwssd_epi32(sum, _mm512_packs_epi32(p[2], p[3]), blk.s23);
        if constexpr (Dec::kIntOffset) {
            // |sum| per lane stays below 2^25: 8 pairs of (4 * 63 * 127) * 32 and the offsets'
            sum = _mm512_dpwssd_epi32(sum, a.nbsums, blk.soff);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(blk.d * a.d), acc[c]);
        } else {
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(blk.d * a.d), acc[c]);
            acc[c] = _mm512_fnmadd_ps(blk.fm, a.bsums_scaled, acc[c]);
        }
    }
}

// One weight row times C activation columns: per block and column four vpdpbusd, two
// vpackssdw, two vpdpwssd, one conversion and two FMAs (block scale, minimum term; see
// block_times_columns for the offset-only types). Even and
// odd blocks go to their own accumulators: the two FMAs a block adds are a chain of 8 cycles,
// longer than a block's work at one column.
// The rounding is per lane on purpose (each lane's level sum and its group's minimum term meet
// in the same accumulator lane every block): keeping the minimum term in 8 of the 16 lanes
// (0d3771b) rounded 4-5x worse on one-signed activations, since the two terms then cancel only
// in the final horizontal sum (QuantSimd.SmallBatchKQuantsRoundLikeTheScalarOrder).
template <typename Dec, int C>
inline void row_times_columns(int64_t nb, const char * wrow, const column_block * cols, float * dst,
                              size_t dst_stride) {
    __m512 acc[2][C];
    for (int c = 0; c < C; ++c) acc[0][c] = acc[1][c] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        block_times_columns<Dec, C>(wrow + b * Dec::kBytes, cols + b * C, acc[0]);
        block_times_columns<Dec, C>(wrow + (b + 1) * Dec::kBytes, cols + (b + 1) * C, acc[1]);
    }
    if (b < nb) block_times_columns<Dec, C>(wrow + b * Dec::kBytes, cols + b * C, acc[0]);
    for (int c = 0; c < C; ++c) dst[c * dst_stride] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][c], acc[1][c]));
}

template <typename Dec, int C>
void tile_rows(int64_t nb, const void * w, size_t w_stride, const char * xc, size_t x_stride, float * dst,
               size_t dst_stride, int nr) {
    thread_local std::vector<column_block> cols;
    if (cols.size() < (size_t) (nb * C)) cols.resize(nb * C);
    prepare_columns<Dec::kHalves>(nb, C, xc, x_stride, cols.data());
    for (int r = 0; r < nr; ++r) {
        row_times_columns<Dec, C>(nb, (const char *) w + r * w_stride, cols.data(), dst + r, dst_stride);
    }
}

// The levels in natural order of a type that decodes whole blocks in it (q2_K, q3_K, q6_K): the
// scale and minimum work of the decoder is dead code here and drops out after inlining.
template <void (*Decode)(const void *, decoded &)>
inline void levels_of(const void * b, __m512i * w) {
    decoded blk;
    Decode(b, blk);
    for (int k = 0; k < 4; ++k) w[k] = blk.w[k];
}

inline void levels_q4_K(const void * b, __m512i * w) { levels_k4_natural(((const block_q4_K *) b)->qs, w); }
inline void levels_q5_K(const void * b, __m512i * w) { levels_q5_K_natural((const block_q5_K *) b, w); }

using levels_fn = void (*)(const void *, __m512i *);

// Batches go through the shared panel gemm (panel.h), with the coefficients of panel-common.h.
// Off: the level offset of a format whose bias is only that (-Off * scale: q3_K, q6_K), which the
// panel folds away (as it does for their r4 twins); 0 for the formats with minimums.
template <levels_fn Levels, size_t BlockBytes, int S, void (*Coef)(const void *, float *, float *), int Off>
struct panel_decoder {
    static constexpr int kSub = S, kChunk = QK_K;
    static constexpr int kLevelOffset = Off;
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const uint8_t * b = row + i * BlockBytes;
        Levels(b, v);
        Coef(b, scale, bias);
    }
};

// A type's kernels: Tg the small-batch decoder, Levels / S / Coef / Off the panel's.
template <typename Tg, levels_fn Levels, int S, void (*Coef)(const void *, float *, float *), int Off>
struct k_type {
    using tg = Tg;
    using panel = panel_decoder<Levels, Tg::kBytes, S, Coef, Off>;
    static constexpr int kSub = S;
};

// Column tiles outside, rows inside: a tile's activations stay in L1 while the rows (a gemm
// call's share of the weights) stream past them.
template <typename T>
void gemm_k(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
            size_t dst_stride, int nr, int nc) {
    using Tg = typename T::tg;
    if (nc >= kiln_panel::kMinCols) {
        kiln_panel::gemm<typename T::panel, kiln_panel::act_q8_K<T::kSub>>(n, w, w_stride, x, x_stride, dst,
                                                                         dst_stride, nr, nc);
        return;
    }
    static_assert(kiln_panel::kMinCols <= 6, "the small-batch kernel takes at most 5 columns");
    const int64_t nb = n / QK_K;
    switch (nc) {
        case 1: tile_rows<Tg, 1>(nb, w, w_stride, (const char *) x, x_stride, dst, dst_stride, nr); break;
        case 2: tile_rows<Tg, 2>(nb, w, w_stride, (const char *) x, x_stride, dst, dst_stride, nr); break;
        case 3: tile_rows<Tg, 3>(nb, w, w_stride, (const char *) x, x_stride, dst, dst_stride, nr); break;
        case 4: tile_rows<Tg, 4>(nb, w, w_stride, (const char *) x, x_stride, dst, dst_stride, nr); break;
        case 5: tile_rows<Tg, 5>(nb, w, w_stride, (const char *) x, x_stride, dst, dst_stride, nr); break;
        default: break;
    }
}

// Batch products with q8_0 activations (one scale per 32 values, cpu-traits.h's batch pair):
// always the panel, whatever the column count (an expert of a batch may get a few columns).
// 32-value sub-blocks take the per-sub-block scale path (as q4_1); 16-value ones read a q8_0
// block as two sub-blocks sharing its scale.
template <typename T>
void gemm_k_q8_0(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr, int nc) {
    using act = std::conditional_t<T::kSub == 32, kiln_panel::act_q8_32<false>, kiln_panel::act_q8_0_halves<true>>;
    kiln_panel::gemm<typename T::panel, act>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
}

// The kernels of a type: q8_K activations (token generation, small batches) and, kBatch, q8_0
// for batches (quants/quants-k.cpp's scalar reference says which types and why).
template <typename T, bool kBatch>
void register_k_type(ggml_type t) {
    ggml_cpu_register_gemm(t, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_K, gemm_k<T>);
    if constexpr (kBatch) ggml_cpu_register_batch_gemm(t, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, gemm_k_q8_0<T>);
}

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_k_avx512() {
    using namespace kiln_panel;
    using q2 = k_type<tg_decoder<decode_q2_K, sizeof(block_q2_K), false>, levels_of<decode_q2_K>, 16, coef_q2_K, 0>;
    using q3 = k_type<tg_decoder<decode_q3_K, sizeof(block_q3_K), false, true>, levels_of<decode_q3_K>, 16, coef_q3_K, 4>;
    using q4 = k_type<tg_decoder<decode_q4_K_halves, sizeof(block_q4_K), true>, levels_q4_K, 32, coef_k4<block_q4_K>, 0>;
    using q5 = k_type<tg_decoder<decode_q5_K_halves, sizeof(block_q5_K), true>, levels_q5_K, 32, coef_k4<block_q5_K>, 0>;
    using q6 = k_type<tg_decoder<decode_q6_K, sizeof(block_q6_K), false, true>, levels_of<decode_q6_K>, 16, coef_q6_K, 32>;
    register_k_type<q2, false>(GGML_TYPE_Q2_K);
    register_k_type<q3, false>(GGML_TYPE_Q3_K);
    register_k_type<q4, true>(GGML_TYPE_Q4_K);
    register_k_type<q5, true>(GGML_TYPE_Q5_K);
    register_k_type<q6, true>(GGML_TYPE_Q6_K);
}
