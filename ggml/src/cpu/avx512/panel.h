// Batched quantized products on AVX512-VNNI ("panel" gemm), shared by the legacy, k-quant and
// iq4_xs kernels when a gemm call covers enough activation columns to amortise a repack.
//
// Why: vpdpbusd multiplies 64 unsigned by 64 signed bytes into 16 int32 lanes, 4 products per
// lane. If the 16 lanes are 16 weight rows and the signed operand is 4 activation bytes
// broadcast from memory ({1to16}), one instruction does 64 useful multiply-adds with no
// horizontal reduction, the weight vector is reused by every column of the tile, and the block
// scales of 16 rows arrive as one float vector.
//
// So each call first repacks its weight rows, 16 at a time, into that layout (a thread-local
// buffer that stays in L2 while every column passes over it):
//   per sub-block sb (16 or 32 values with one scale): kSub/4 vectors [row 0..15][4 levels],
//   then 16 float scales, then 16 float biases, where a weight value is  scale * u + bias
//   (u = the unsigned level; bias folds offsets such as q4_0's -8 and k-quant minimums).
// Activations are repacked per tile of up to 8 columns: per sub-block the 8 x kSub signed bytes,
// 8 float scales d_x and 8 float sums d_x * sum(q_x). Then
//   dot(row, col) = sum_sb  scale * d_x * (sum u q_x)  +  bias * (d_x sum q_x).
//
// Formats whose bias is only a level offset (bias = -kLevelOffset * scale) fold it away instead:
// their records hold the signed levels w = u - kLevelOffset, the activations are packed offset
// to unsigned (q_x + 128), so vpdpbusd multiplies (q_x + 128) by w, and in place of the biases
// the record holds per row the int32 -128 * sum(w) of the sub-block, which starts the
// accumulation: the sum comes out as sum(w q_x) exactly, and the bias term (one fma per column
// and sub-block, 7-12% of the micro-kernel's time) is gone. Done for the signed-byte formats
// (offset 128: q8_0, iq4_nl, mxfp4, iq4_xs, the iq*_k), q4_0, q5_0, q6_0, q3_K and q6_K and,
// alike, for their interleaved twins' records (panel-r8.h), so that a repacked model computes
// exactly what the plain one does.
#pragma once

// GCC 12 reports its own AVX512 extract/insert intrinsics (undefined upper lanes) as
// "maybe uninitialized"; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "avx2/panel-common.h"
#include "cpu-traits.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

// Internal linkage (anonymous namespace) for all of it: each AVX512 file gets its own copies, and
// the linker never merges them with another file's (see cpu-isa.h).
namespace {
namespace kiln_panel {

constexpr int kRows = 16;   // weight rows per vector (lanes)
constexpr int kCols = 8;    // activation columns per register tile
// Below this many columns a call uses the type's direct kernel: the repack would not pay off.
constexpr int kMinCols = 6;
// Activations packed as plain bytes (broadcast by the product), all of K in one pass.
constexpr bool kSpread = false;
constexpr int64_t kKBlock = 0;
// No K slabs (panel-drive.inc): AVX512 machines here have at least 1 MB of L2.
constexpr size_t kSlabBytes = 0;
// vpdpbusd multiplies unsigned weight bytes: signed levels are offset by 128 into the bias.
constexpr bool kSignedLevels = false;

// Whether the activations of D's products are packed offset to unsigned (see the top).
template <typename D> constexpr bool unsigned_x() { return level_offset<D>() != 0; }
// Activation bytes stay bytes (vpdpbusd takes them as they are).
template <typename D> constexpr bool wide_x() { return false; }

template <int kSub> constexpr size_t w_record = (kSub / 4 + 2) * 64;
template <typename D> constexpr size_t w_record_of = w_record<D::kSub>;

// Records of nsb sub-blocks written with unsigned levels (u = w + off) and float biases, turned
// into the folded form (see the top): signed levels and the offset corrections.
template <int S>
void fold_level_offsets(uint8_t * out, int64_t nsb, int off) {
    constexpr int KV = S / 4;
    const __m512i ones = _mm512_set1_epi8(1), o = _mm512_set1_epi8((char) off);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        uint8_t * rec = out + sb * w_record<S>;
        __m512i wsum = _mm512_setzero_si512();
        for (int k = 0; k < KV; ++k) {
            const __m512i w = _mm512_sub_epi8(_mm512_load_si512((const void *) (rec + 64 * k)), o);
            _mm512_store_si512((void *) (rec + 64 * k), w);
            wsum = _mm512_dpbusd_epi32(wsum, ones, w);
        }
        _mm512_store_si512((void *) (rec + KV * 64 + 64), _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(wsum, 7)));
    }
}

// 16x16 transpose of 32-bit elements: out[j] = element j of v[0..15] (lane r = v[r]'s dword j).
// In-lane unpacks transpose each 4x4 block of dwords, then two rounds of 128-bit lane shuffles
// move the blocks into place: 64 shuffles and no partial stores.
inline void transpose16(const __m512i * v, __m512i * out) {
    __m512i u[4][4];   // u[g][m] lane L = dword 4L + m of rows 4g .. 4g + 3
    for (int g = 0; g < 4; ++g) {
        const __m512i * r = v + 4 * g;
        const __m512i t0 = _mm512_unpacklo_epi32(r[0], r[1]), t1 = _mm512_unpackhi_epi32(r[0], r[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(r[2], r[3]), t3 = _mm512_unpackhi_epi32(r[2], r[3]);
        u[g][0] = _mm512_unpacklo_epi64(t0, t2);
        u[g][1] = _mm512_unpackhi_epi64(t0, t2);
        u[g][2] = _mm512_unpacklo_epi64(t1, t3);
        u[g][3] = _mm512_unpackhi_epi64(t1, t3);
    }
    for (int m = 0; m < 4; ++m) {
        const __m512i a0 = _mm512_shuffle_i32x4(u[0][m], u[1][m], 0x44), a1 = _mm512_shuffle_i32x4(u[0][m], u[1][m], 0xEE);
        const __m512i a2 = _mm512_shuffle_i32x4(u[2][m], u[3][m], 0x44), a3 = _mm512_shuffle_i32x4(u[2][m], u[3][m], 0xEE);
        out[m] = _mm512_shuffle_i32x4(a0, a2, 0x88);
        out[4 + m] = _mm512_shuffle_i32x4(a0, a2, 0xDD);
        out[8 + m] = _mm512_shuffle_i32x4(a1, a3, 0x88);
        out[12 + m] = _mm512_shuffle_i32x4(a1, a3, 0xDD);
    }
}

// The coefficients of a chunk's sub-blocks into their records: cf is 16 rows of NS scales then NS
// biases (biases only stored with kBias), f the first record's scale vector, ns the sub-blocks
// that lie in the row. A record wants one coefficient of the 16 rows per vector, so each vector
// of 16 coefficients of the 16 rows is transposed in registers: scalar stores of each row's
// (16 or 32 per sub-block) were a sixth of a q6_K pack. Bytes are the same either way.
template <int NS, bool kBias>
inline void store_coefficients(const float * cf, int64_t ns, uint8_t * f, size_t rec) {
    constexpr int NC = 2 * NS;   // coefficients per row
    if constexpr (NC % 16 == 0) {
        // vectors of coefficients needed: the scales and, with kBias, the biases
        constexpr int NQ = kBias ? NC / 16 : (NS + 15) / 16;
        for (int q = 0; q < NQ; ++q) {
            __m512i v[kRows], t[16];
            for (int r = 0; r < kRows; ++r) v[r] = _mm512_load_si512((const void *) (cf + r * NC + 16 * q));
            transpose16(v, t);
#pragma GCC unroll 16
            for (int j = 0; j < 16; ++j) {
                // t[j]: coefficient 16 q + j of the 16 rows, a scale below NS, else a bias
                const int c = 16 * q + j, sb = c < NS ? c : c - NS;
                if ((!kBias && c >= NS) || sb >= ns) continue;
                _mm512_store_si512((void *) (f + sb * rec + (c < NS ? 0 : 64)), t[j]);
            }
        }
    } else {
        for (int64_t j = 0; j < ns; ++j) {
            float * o = (float *) (f + j * rec);
            for (int r = 0; r < kRows; ++r) {
                o[r] = cf[r * NC + j];
                if constexpr (kBias) o[kRows + r] = cf[r * NC + NS + j];
            }
        }
    }
}

// Decoder concept D:
//   kSub   values per scaled sub-block (16 or 32); kChunk values per decode call (multiple of 64)
//   decode(row, i, n, v, scale, bias): chunk i of a row of n values -> kChunk / 64 vectors of
//   unsigned levels (natural order) and kChunk / kSub scales and biases. A chunk may run past n
//   only for 32-value blocks with an odd count; those sub-blocks are dropped.
//   kLevelOffset (optional): bias == -kLevelOffset * scale; the records then hold signed levels
//   and the sub-blocks' offset corrections (see the top).
// rows_avail: rows readable from w (this group's and the next ones'), for prefetching.
// Chunk by chunk, the 16 rows are decoded into registers (spilled to the stack: L1) and every 64
// values are transposed whole; each store is a full aligned record vector.
template <typename D>
void pack_weights(const uint8_t * w, size_t w_stride, int rows, int rows_avail, int64_t n, uint8_t * out) {
    constexpr int S = D::kSub, V = D::kChunk / 64, NS = D::kChunk / S, KV = S / 4;
    constexpr int off = level_offset<D>();
    constexpr size_t rec = w_record<S>;
    const int64_t nsb = n / S;
    const int64_t nchunks = (n + D::kChunk - 1) / D::kChunk;
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t i = 0; i < nchunks; ++i) {
        prefetch_row_slice(w, w_stride, kRows, std::min(2 * kRows, rows_avail), i, nchunks);
        alignas(64) __m512i v[V][kRows];
        // per row its NS scales, then its NS biases: whole vectors of them transpose at once
        alignas(64) float cf[kRows][2 * NS];
        for (int r = 0; r < kRows; ++r) {
            __m512i rv[V];
            if (r < rows) {
                D::decode(w + r * w_stride, i, n, rv, cf[r], cf[r] + NS);
            } else {
                // lanes of rows past `rows` are never stored to dst; they only must not read memory
                for (int k = 0; k < V; ++k) rv[k] = _mm512_setzero_si512();
                for (int j = 0; j < 2 * NS; ++j) cf[r][j] = 0.0f;
            }
            for (int k = 0; k < V; ++k) v[k][r] = off ? _mm512_sub_epi8(rv[k], _mm512_set1_epi8((char) off)) : rv[k];
        }
        // sub-blocks of this chunk that lie inside the row (all but a dropped odd last block)
        const int64_t sb0 = i * NS, ns = std::min<int64_t>(NS, nsb - sb0);
        for (int k = 0; k < V; ++k) {
            __m512i t[16];
            transpose16(v[k], t);
            // t[j] holds values 64 (i V + k) + 4j .. +3 of the 16 rows
            uint8_t * base = out + (sb0 + 64 * k / S) * rec;
            __m512i wsum = _mm512_setzero_si512();   // per row: sum of the sub-block's signed levels
#pragma GCC unroll 16
            for (int j = 0; j < 16; ++j) {
                if (64 * k / S + 4 * j / S >= ns) continue;
                uint8_t * sub = base + (4 * j / S) * rec;
                _mm512_store_si512((void *) (sub + (j % KV) * 64), t[j]);
                if constexpr (off != 0) {
                    wsum = _mm512_dpbusd_epi32(wsum, ones, t[j]);
                    if (j % KV == KV - 1) {
                        _mm512_store_si512((void *) (sub + KV * 64 + 64), _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(wsum, 7)));
                        wsum = _mm512_setzero_si512();
                    }
                }
            }
        }
        store_coefficients<NS, off == 0>(&cf[0][0], ns, out + sb0 * rec + KV * 64, rec);
    }
}

// The dot products of one sub-block: 16 rows x C columns in int32. kUnsignedX: signed levels
// times activations offset by 128, started from the record's offset correction (see the top).
template <int S, int C, bool kUnsignedX>
inline void sub_dots(const uint8_t * W, const uint8_t * X, __m512i * s) {
    constexpr int KV = S / 4;
    const __m512i init = kUnsignedX ? _mm512_load_si512((const void *) (W + KV * 64 + 64)) : _mm512_setzero_si512();
    for (int c = 0; c < C; ++c) s[c] = init;
#pragma GCC unroll 8
    for (int k = 0; k < KV; ++k) {
        const __m512i wv = _mm512_load_si512((const void *) (W + 64 * k));
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
            const __m512i xv = _mm512_set1_epi32(load_i32(X + c * S + 4 * k));
            s[c] = kUnsignedX ? _mm512_dpbusd_epi32(s[c], xv, wv) : _mm512_dpbusd_epi32(s[c], wv, xv);
        }
    }
}

// 16 rows x C columns over nsb sub-blocks, added to dst (add) or stored; rows < 16 valid lanes.
// kSuper > 1: the activations have one scale per kSuper sub-blocks (q8_K) and their packed sums
// are plain sums; the x scale is then applied once per super-block instead of per sub-block.
template <typename D, int C, int kSuper>
void micro(int64_t nsb, const uint8_t * wg, const uint8_t * xp, float * dst, size_t dst_stride, int rows, bool add) {
    constexpr int S = D::kSub, KV = S / 4;
    constexpr bool ux = unsigned_x<D>();   // no bias term: it is folded into the sums
    constexpr size_t wrec = w_record<S>, xrec = x_record<S, C>;
    const __mmask16 m = rows >= 16 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << rows) - 1);
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = add ? _mm512_maskz_loadu_ps(m, dst + c * dst_stride) : _mm512_setzero_ps();
    if constexpr (kSuper == 1) {
        for (int64_t sb = 0; sb < nsb; ++sb) {
            const uint8_t * W = wg + sb * wrec;
            const uint8_t * X = xp + sb * xrec;
            __m512i s[C];
            sub_dots<S, C, ux>(W, X, s);
            const __m512 scale = _mm512_load_ps((const float *) (W + KV * 64));
            const float * xd = (const float *) (X + C * S);
#pragma GCC unroll 8
            for (int c = 0; c < C; ++c) {
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[c]), _mm512_mul_ps(scale, _mm512_set1_ps(xd[c])), acc[c]);
                if constexpr (!ux) acc[c] = _mm512_fmadd_ps(_mm512_load_ps((const float *) (W + KV * 64 + 64)), _mm512_set1_ps(xd[C + c]), acc[c]);
            }
        }
    } else {
        for (int64_t sb0 = 0; sb0 < nsb; sb0 += kSuper) {
            __m512 part[C];
            for (int c = 0; c < C; ++c) part[c] = _mm512_setzero_ps();
            for (int j = 0; j < kSuper; ++j) {
                const uint8_t * W = wg + (sb0 + j) * wrec;
                const uint8_t * X = xp + (sb0 + j) * xrec;
                __m512i s[C];
                sub_dots<S, C, ux>(W, X, s);
                const __m512 scale = _mm512_load_ps((const float *) (W + KV * 64));
                const float * xsum = (const float *) (X + C * S) + C;
#pragma GCC unroll 8
                for (int c = 0; c < C; ++c) {
                    part[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[c]), scale, part[c]);
                    if constexpr (!ux) part[c] = _mm512_fmadd_ps(_mm512_load_ps((const float *) (W + KV * 64 + 64)), _mm512_set1_ps(xsum[c]), part[c]);
                }
            }
            const float * xd = (const float *) (xp + sb0 * xrec + C * S);
            for (int c = 0; c < C; ++c) acc[c] = _mm512_fmadd_ps(part[c], _mm512_set1_ps(xd[c]), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(dst + c * dst_stride, m, acc[c]);
}

#include "avx2/panel-drive.inc"

} // namespace kiln_panel
} // namespace
