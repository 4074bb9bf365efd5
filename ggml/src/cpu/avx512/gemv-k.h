// The AVX512 (VNNI) small-batch kernel of the 16-group k-quants against q8_K activations (token
// generation: 1-5 columns), shared by quants-k.cpp and by quants-k-gfni.cpp, whose q6_K decoder
// needs GFNI (internal linkage in each, see register.h).
//
// Each weight block is decoded once per column tile into registers: four 64-byte vectors of
// unsigned levels u, two vectors of 16-bit group scales laid out to match the packed products,
// and the minimum (or offset) term. Then per activation column four vpdpbusd give 4-value sums
// that two vpackssdw pack to int16 and two vpdpwssd scale by group into one int32 vector; the
// minimum / offset term comes from the activation's 16-value sums (bsums). Floats only once per
// block and column.
#pragma once

#include "quants/quants-k.h"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
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
    __m512  fm;     // per-16-group minimum term times dmin, as floats (types with minimums)
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

// q6_K's group scales (int8) for the small-batch kernel: the packed scales and the offset term
// (32 times each scale).
inline void scales_q6_K(const block_q6_K * x, decoded & out) {
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->scales));
    pack_scales_natural(s16, out);
    out.soff = _mm512_zextsi256_si512(_mm256_slli_epi16(s16, 5));   // |32 * scale| <= 4096
    out.d = _cvtsh_ss(x->d);
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

// The small-batch product of nc (1-5) columns.
template <typename Tg>
void gemv_k_columns(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                    size_t dst_stride, int nr, int nc) {
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

} // namespace
