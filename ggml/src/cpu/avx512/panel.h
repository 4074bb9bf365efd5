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
#pragma once

// GCC 12 reports its own AVX512 extract/insert intrinsics (undefined upper lanes) as
// "maybe uninitialized"; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

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

template <int kSub> constexpr size_t w_record = (kSub / 4 + 2) * 64;
template <int kSub, int C> constexpr size_t x_record = C * kSub + 8 * C;

// 64-byte aligned per-thread scratch (slot 0: weights, slot 1: activations), grown on demand.
static inline uint8_t * scratch(int slot, size_t bytes) {
    return (uint8_t *) ggml_cpu_kernel_scratch(slot == 0 ? GGML_CPU_SCRATCH_PANEL_W : GGML_CPU_SCRATCH_PANEL_X, bytes);
}

// 128-bit lane L of v to memory.
template <int L> inline void store_lane(uint8_t * p, __m512i v) {
    _mm_storeu_si128((__m128i *) p, _mm512_extracti32x4_epi32(v, L));
}

// Decoder concept D:
//   kSub   values per scaled sub-block (16 or 32); kChunk values per decode call (multiple of 64)
//   decode(row, i, n, v, scale, bias): chunk i of a row of n values -> kChunk / 64 vectors of
//   unsigned levels (natural order) and kChunk / kSub scales and biases. A chunk may run past n
//   only for 32-value blocks with an odd count; those sub-blocks are dropped.
template <typename D>
void pack_weights(const uint8_t * w, size_t w_stride, int rows, int64_t n, uint8_t * out) {
    constexpr int S = D::kSub, V = D::kChunk / 64, NS = D::kChunk / S, KV = S / 4;
    constexpr size_t rec = w_record<S>;
    const int64_t nsb = n / S;
    const int64_t nchunks = (n + D::kChunk - 1) / D::kChunk;
    for (int g4 = 0; 4 * g4 < rows; ++g4) {
        // lanes of rows past `rows` are never stored to dst; they only must not read memory
        for (int64_t i = 0; i < nchunks; ++i) {
            __m512i v[4][V];
            float sc[4][NS], bi[4][NS];
            for (int q = 0; q < 4; ++q) {
                const int r = 4 * g4 + q;
                if (r < rows) {
                    D::decode(w + r * w_stride, i, n, v[q], sc[q], bi[q]);
                } else {
                    for (int k = 0; k < V; ++k) v[q][k] = _mm512_setzero_si512();
                    for (int j = 0; j < NS; ++j) sc[q][j] = bi[q][j] = 0.0f;
                }
            }
            for (int k = 0; k < V; ++k) {
                // 4x4 transpose of dwords inside each 128-bit lane: u[m] lane L = dword 4L+m of rows 0..3
                const __m512i t0 = _mm512_unpacklo_epi32(v[0][k], v[1][k]);
                const __m512i t1 = _mm512_unpackhi_epi32(v[0][k], v[1][k]);
                const __m512i t2 = _mm512_unpacklo_epi32(v[2][k], v[3][k]);
                const __m512i t3 = _mm512_unpackhi_epi32(v[2][k], v[3][k]);
                const __m512i u[4] = { _mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                                       _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3) };
                const int64_t first = i * D::kChunk + 64 * k;   // value index of dword 0
#pragma GCC unroll 4
                for (int m = 0; m < 4; ++m) {
                    auto dest = [&](int L) -> uint8_t * {
                        const int64_t idx = first + 4 * (4 * L + m);
                        const int64_t sb = idx / S;
                        return sb < nsb ? out + sb * rec + ((idx % S) / 4) * 64 + 16 * g4 : nullptr;
                    };
                    if (uint8_t * p = dest(0)) store_lane<0>(p, u[m]);
                    if (uint8_t * p = dest(1)) store_lane<1>(p, u[m]);
                    if (uint8_t * p = dest(2)) store_lane<2>(p, u[m]);
                    if (uint8_t * p = dest(3)) store_lane<3>(p, u[m]);
                }
            }
            for (int j = 0; j < NS; ++j) {
                const int64_t sb = i * NS + j;
                if (sb >= nsb) break;
                float * f = (float *) (out + sb * rec + KV * 64);
                for (int q = 0; q < 4; ++q) {
                    f[4 * g4 + q] = sc[q][j];
                    f[kRows + 4 * g4 + q] = bi[q][j];
                }
            }
        }
    }
}

// Activation concept A: sub(xrow, sb, &qs, &d, &sum): sub-block sb (S values) of a row:
// pointer to its S signed bytes, its scale and d * sum(qs) (kSuper == 1) or sum(qs) (kSuper > 1:
// kSuper consecutive sub-blocks share the scale d).
template <typename A, int S, int C>
void pack_columns(const uint8_t * x, size_t x_stride, int64_t nsb, uint8_t * out) {
    constexpr size_t rec = x_record<S, C>;
    for (int c = 0; c < C; ++c) {
        const uint8_t * xr = x + c * x_stride;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            uint8_t * o = out + sb * rec;
            const int8_t * qs;
            float d, sum;
            A::sub(xr, sb, qs, d, sum);
            std::memcpy(o + c * S, qs, S);
            ((float *) (o + C * S))[c] = d;
            ((float *) (o + C * S))[C + c] = sum;
        }
    }
}

inline int32_t load_i32(const uint8_t * p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// The dot products of one sub-block: 16 rows x C columns in int32.
template <int S, int C>
inline void sub_dots(const uint8_t * W, const uint8_t * X, __m512i * s) {
    constexpr int KV = S / 4;
    for (int c = 0; c < C; ++c) s[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < KV; ++k) {
        const __m512i wv = _mm512_load_si512((const void *) (W + 64 * k));
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) s[c] = _mm512_dpbusd_epi32(s[c], wv, _mm512_set1_epi32(load_i32(X + c * S + 4 * k)));
    }
}

// 16 rows x C columns over all sub-blocks; rows < 16 valid lanes are stored.
// kSuper > 1: the activations have one scale per kSuper sub-blocks (q8_K) and their packed sums
// are plain sums; the x scale is then applied once per super-block instead of per sub-block.
template <int S, int C, int kSuper>
void micro(int64_t nsb, const uint8_t * wg, const uint8_t * xp, float * dst, size_t dst_stride, int rows) {
    constexpr int KV = S / 4;
    constexpr size_t wrec = w_record<S>, xrec = x_record<S, C>;
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    if constexpr (kSuper == 1) {
        for (int64_t sb = 0; sb < nsb; ++sb) {
            const uint8_t * W = wg + sb * wrec;
            const uint8_t * X = xp + sb * xrec;
            __m512i s[C];
            sub_dots<S, C>(W, X, s);
            const __m512 scale = _mm512_load_ps((const float *) (W + KV * 64));
            const __m512 bias = _mm512_load_ps((const float *) (W + KV * 64 + 64));
            const float * xd = (const float *) (X + C * S);
#pragma GCC unroll 8
            for (int c = 0; c < C; ++c) {
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[c]), _mm512_mul_ps(scale, _mm512_set1_ps(xd[c])), acc[c]);
                acc[c] = _mm512_fmadd_ps(bias, _mm512_set1_ps(xd[C + c]), acc[c]);
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
                sub_dots<S, C>(W, X, s);
                const __m512 scale = _mm512_load_ps((const float *) (W + KV * 64));
                const __m512 bias = _mm512_load_ps((const float *) (W + KV * 64 + 64));
                const float * xsum = (const float *) (X + C * S) + C;
#pragma GCC unroll 8
                for (int c = 0; c < C; ++c) {
                    part[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[c]), scale, part[c]);
                    part[c] = _mm512_fmadd_ps(bias, _mm512_set1_ps(xsum[c]), part[c]);
                }
            }
            const float * xd = (const float *) (xp + sb0 * xrec + C * S);
            for (int c = 0; c < C; ++c) acc[c] = _mm512_fmadd_ps(part[c], _mm512_set1_ps(xd[c]), acc[c]);
        }
    }
    const __mmask16 m = rows >= 16 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << rows) - 1);
    for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(dst + c * dst_stride, m, acc[c]);
}

template <typename D, typename A, int C>
void column_tile(int64_t nsb, int ngroups, const uint8_t * wbuf, size_t group_bytes, const uint8_t * x, size_t x_stride,
                 float * dst, size_t dst_stride, int nr) {
    constexpr int S = D::kSub;
    uint8_t * xbuf = scratch(1, nsb * x_record<S, C>);
    pack_columns<A, S, C>(x, x_stride, nsb, xbuf);
    for (int g = 0; g < ngroups; ++g) {
        micro<S, C, A::kSuper>(nsb, wbuf + g * group_bytes, xbuf, dst + g * kRows, dst_stride, std::min(kRows, nr - g * kRows));
    }
}

template <typename D, typename A>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
          int nr, int nc) {
    constexpr int S = D::kSub;
    const int64_t nsb = n / S;
    const int ngroups = (nr + kRows - 1) / kRows;
    const size_t group_bytes = nsb * w_record<S>;
    uint8_t * wbuf = scratch(0, ngroups * group_bytes);
    for (int g = 0; g < ngroups; ++g) {
        pack_weights<D>((const uint8_t *) w + g * kRows * w_stride, w_stride, std::min(kRows, nr - g * kRows), n,
                        wbuf + g * group_bytes);
    }
    const auto * xb = (const uint8_t *) x;
    int c0 = 0;
    for (; c0 + kCols <= nc; c0 += kCols) {
        column_tile<D, A, kCols>(nsb, ngroups, wbuf, group_bytes, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride,
                                 dst_stride, nr);
    }
    const uint8_t * xc = xb + c0 * x_stride;
    float * dc = dst + c0 * dst_stride;
    switch (nc - c0) {
        case 0: break;
        case 1: column_tile<D, A, 1>(nsb, ngroups, wbuf, group_bytes, xc, x_stride, dc, dst_stride, nr); break;
        case 2: column_tile<D, A, 2>(nsb, ngroups, wbuf, group_bytes, xc, x_stride, dc, dst_stride, nr); break;
        case 3: column_tile<D, A, 3>(nsb, ngroups, wbuf, group_bytes, xc, x_stride, dc, dst_stride, nr); break;
        case 4: column_tile<D, A, 4>(nsb, ngroups, wbuf, group_bytes, xc, x_stride, dc, dst_stride, nr); break;
        case 5: column_tile<D, A, 5>(nsb, ngroups, wbuf, group_bytes, xc, x_stride, dc, dst_stride, nr); break;
        case 6: column_tile<D, A, 6>(nsb, ngroups, wbuf, group_bytes, xc, x_stride, dc, dst_stride, nr); break;
        default: column_tile<D, A, 7>(nsb, ngroups, wbuf, group_bytes, xc, x_stride, dc, dst_stride, nr); break;
    }
}

// ---------------------------------------------------------------------------------------------
// activation readers

inline float fp16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

inline int32_t sum_bytes32(const int8_t * q) {
    const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) q));
    const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (q + 16)));
    const __m256i s = _mm256_madd_epi16(_mm256_add_epi16(v, w), _mm256_set1_epi16(1));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
    return _mm_cvtsi128_si32(t);
}

// 32-value blocks [fp16 d][32 q] (q8_0) or [fp16 d][fp16 s][32 q] (q8_1, whose s = d * sum(q)
// rounded to fp16 is what the reference kernels use, so use it too).
template <bool kHasSum>
struct act_q8_32 {
    static constexpr int kSuper = 1;
    static constexpr size_t kBlock = kHasSum ? 36 : 34;
    static void sub(const uint8_t * row, int64_t sb, const int8_t *& qs, float & d, float & sum) {
        const uint8_t * b = row + sb * kBlock;
        uint16_t h;
        std::memcpy(&h, b, 2);
        d = fp16_to_f32(h);
        qs = (const int8_t *) (b + (kHasSum ? 4 : 2));
        if constexpr (kHasSum) {
            std::memcpy(&h, b + 2, 2);
            sum = fp16_to_f32(h);
        } else {
            sum = d * (float) sum_bytes32(qs);
        }
    }
};

// q8_K super-blocks [float d][256 q][16 int16 sums of 16], seen as sub-blocks of S = 16 or 32;
// one scale per super-block, so the sum is returned unscaled (see micro's kSuper).
template <int S>
struct act_q8_K {
    static constexpr int kSuper = 256 / S;
    static constexpr size_t kBlock = 4 + 256 + 32;
    static void sub(const uint8_t * row, int64_t sb, const int8_t *& qs, float & d, float & sum) {
        constexpr int per = 256 / S;
        const uint8_t * b = row + (sb / per) * kBlock;
        const int j = (int) (sb % per);
        std::memcpy(&d, b, 4);
        qs = (const int8_t *) (b + 4 + S * j);
        int16_t bs[2];
        std::memcpy(bs, b + 4 + 256 + 2 * (S / 16) * j, 2 * (S / 16));
        sum = (float) (S == 16 ? bs[0] : bs[0] + bs[1]);
    }
};

} // namespace kiln_panel
} // namespace
