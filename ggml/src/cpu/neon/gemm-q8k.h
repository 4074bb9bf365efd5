// The one block loop of the NEON kernels against q8_K activations (k-quants, ik types, trellis
// types), written once and instantiated per weight decoder. Included only by the neon/ kernel
// files; everything here has internal linkage (see register.h), so each includer compiles its own
// copy.
//
// A decoder Dec brings one 256-value super-block of a weight row into the common form: 256
// levels that fit int8, one integer scale per 16 values, a float factor d, and for the k-quants a
// minimum term (value = d * sc[g] * q - dm * mi[g]). It provides:
//   using block;                                            the decoded form it fills
//   static constexpr bool kMins;                            whether mi / dm exist
//   static q8k_row row(const char * row);                   where the blocks start, the row scale
//   static void decode(const q8k_row &, int64_t i, block &); super-block i of the row
//   static q8k_view view(const block &);
//
// Levels:
//  - neon / dotprod (gemm-q8k-loop.inc): per group of 16, a 16-byte dot product (widening
//    multiplies or SDOT) times the group's scale, int32; floats once per block and column;
//  - i8mm (here): two rows and two columns at once, SMMLA on 8-byte pieces of a group gives its
//    2x2 int32 tile, scaled per row by the group scales. Odd rows and columns go through SDOT.
// Every level computes the scalar kernels' integer sums exactly and the same float expression.
#pragma once

#include "neon/simd.h"
#include "cpu-traits.h"
#include "quants/quants-common.h"

namespace {

struct q8k_row {
    const char * blocks;
    size_t       block_bytes;
    float        d;   // the row's scale (formats that have one), else 0
};

struct q8k_view {
    const int8_t *  q;    // 256 levels
    const int16_t * sc;   // 16 group scales
    const int16_t * mi;   // 16 minimum terms (kMins only)
    float           d, dm;
};

// bsums . mi: the minimum term of a k-quant block against one column (|.| < 2^31: 16 * 32767 * 2^10)
inline int32_t q8k_min_term(const int16_t * bsums, const int16_t * mi) {
    const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
    const int16x8_t m0 = vld1q_s16(mi), m1 = vld1q_s16(mi + 8);
    int32x4_t s = vmull_s16(vget_low_s16(b0), vget_low_s16(m0));
    s = vmlal_high_s16(s, b0, m0);
    s = vmlal_s16(s, vget_low_s16(b1), vget_low_s16(m1));
    s = vmlal_high_s16(s, b1, m1);
    return vaddvq_s32(s);
}

namespace plain {
using Dot = neon_dot_plain;
#include "neon/gemm-q8k-loop.inc"
} // namespace plain

KILN_NEON_DOTPROD_BEGIN
namespace sdot {
using Dot = neon_dot_sdot;
#include "neon/gemm-q8k-loop.inc"
} // namespace sdot
KILN_NEON_DOTPROD_END

KILN_NEON_I8MM_BEGIN
namespace mm {

inline int8x16_t zip_lo(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int8x16_t zip_hi(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

// 2 rows x 2*CP columns. Lanes of a column pair's tile: (r0, c0), (r0, c1), (r1, c0), (r1, c1).
template <typename Dec, int CP>
void tile(int64_t nb, const char * w, size_t w_stride, const char * x, size_t x_stride, float * dst, size_t dst_stride) {
    float32x4_t acc[CP];
    for (int p = 0; p < CP; ++p) acc[p] = vdupq_n_f32(0.0f);
    typename Dec::block b0, b1;
    const q8k_row row0 = Dec::row(w), row1 = Dec::row(w + w_stride);
    for (int64_t ib = 0; ib < nb; ++ib) {
        Dec::decode(row0, ib, b0);
        Dec::decode(row1, ib, b1);
        const q8k_view v0 = Dec::view(b0), v1 = Dec::view(b1);
        // group g: bytes 0-7 of both rows, then bytes 8-15 (SMMLA's 2x8 operand layout)
        int8x16_t wp[32];
        int32x4_t sc[16];
        for (int g = 0; g < 16; ++g) {
            const int8x16_t a = vld1q_s8(v0.q + 16 * g), b = vld1q_s8(v1.q + 16 * g);
            wp[2 * g] = zip_lo(a, b);
            wp[2 * g + 1] = zip_hi(a, b);
            const int32x4_t s = { v0.sc[g], v0.sc[g], v1.sc[g], v1.sc[g] };
            sc[g] = s;
        }
        for (int p = 0; p < CP; ++p) {
            const block_q8_K * x0 = (const block_q8_K *) (x + (2 * p) * x_stride) + ib;
            const block_q8_K * x1 = (const block_q8_K *) (x + (2 * p + 1) * x_stride) + ib;
            int32x4_t sum = vdupq_n_s32(0);
            for (int g = 0; g < 16; ++g) {
                const int8x16_t a = vld1q_s8(x0->qs + 16 * g), b = vld1q_s8(x1->qs + 16 * g);
                const int32x4_t t = vmmlaq_s32(vmmlaq_s32(vdupq_n_s32(0), wp[2 * g], zip_lo(a, b)), wp[2 * g + 1], zip_hi(a, b));
                sum = vmlaq_s32(sum, t, sc[g]);
            }
            const float32x4_t dd = { v0.d * x0->d, v0.d * x1->d, v1.d * x0->d, v1.d * x1->d };
            acc[p] = vaddq_f32(acc[p], vmulq_f32(dd, vcvtq_f32_s32(sum)));
            if constexpr (Dec::kMins) {
                const float32x4_t m = { (float) q8k_min_term(x0->bsums, v0.mi), (float) q8k_min_term(x1->bsums, v0.mi),
                                        (float) q8k_min_term(x0->bsums, v1.mi), (float) q8k_min_term(x1->bsums, v1.mi) };
                const float32x4_t dm = { v0.dm * x0->d, v0.dm * x1->d, v1.dm * x0->d, v1.dm * x1->d };
                acc[p] = vsubq_f32(acc[p], vmulq_f32(dm, m));
            }
        }
    }
    for (int p = 0; p < CP; ++p) {
        float v[4];
        vst1q_f32(v, acc[p]);
        dst[(2 * p) * dst_stride] = v[0];
        dst[(2 * p + 1) * dst_stride] = v[1];
        dst[(2 * p) * dst_stride + 1] = v[2];
        dst[(2 * p + 1) * dst_stride + 1] = v[3];
    }
}

// Row pairs x column octets (then pairs) with SMMLA; an odd last column or row goes through SDOT.
template <typename Dec>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
          int nr, int nc) {
    const int64_t nb = n / QK_K;
    const char * wb = (const char *) w;
    const char * xb = (const char *) x;
    int r0 = 0;
    for (; r0 + 2 <= nr; r0 += 2) {
        const char * wr = wb + r0 * w_stride;
        int c0 = 0;
        for (; c0 + 8 <= nc; c0 += 8) tile<Dec, 4>(nb, wr, w_stride, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride + r0, dst_stride);
        const int pairs = (nc - c0) / 2;
        float * d = dst + c0 * dst_stride + r0;
        switch (pairs) {
            case 3: tile<Dec, 3>(nb, wr, w_stride, xb + c0 * x_stride, x_stride, d, dst_stride); break;
            case 2: tile<Dec, 2>(nb, wr, w_stride, xb + c0 * x_stride, x_stride, d, dst_stride); break;
            case 1: tile<Dec, 1>(nb, wr, w_stride, xb + c0 * x_stride, x_stride, d, dst_stride); break;
            default: break;
        }
        c0 += 2 * pairs;
        if (c0 < nc) {
            for (int r = 0; r < 2; ++r) {
                sdot::row_times_columns<Dec, 1>(nb, wr + r * w_stride, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride + r0 + r,
                                                dst_stride);
            }
        }
    }
    if (r0 < nr) sdot::gemm<Dec>(n, wb + r0 * w_stride, w_stride, x, x_stride, dst + r0, dst_stride, 1, nc);
}

} // namespace mm
KILN_NEON_I8MM_END

#include "neon/gemm-levels.inc"

// Registers Dec's kernels at every level this CPU runs.
template <typename Dec>
void add_q8k_kernels(ggml_type type) {
    add_levels<Dec>(type, GGML_TYPE_Q8_K);
}

} // namespace
