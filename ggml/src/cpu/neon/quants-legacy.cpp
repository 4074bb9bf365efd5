// NEON gemm kernels of the 32-value block formats against q8_0 / q8_1 activations: q4_0, q4_1,
// q5_0, q5_1, q6_0, q8_0, iq4_nl, mxfp4; and iq4_xs against q8_K. Each at two levels: plain
// Advanced SIMD (widening multiplies) and SDOT (GGML_CPU_ISA_NEON_DOTPROD), and with SMMLA
// (GGML_CPU_ISA_NEON_I8MM) for pairs of rows times pairs of columns.
//
// Tiles of up to 2 weight rows x 4 activation columns. A block is decoded once per tile step to
// 32 signed bytes (two vectors: elements 0-15 and 16-31, the nibble halves of the layouts),
// multiplied with every column of the tile in int32, and scaled once in float.
#include "neon/register.h"
#include "neon/simd.h"
#include "cpu-traits.h"
#include "quants/quants-legacy.h"

namespace {

struct i8x32 {
    int8x16_t lo, hi;   // elements 0-15, 16-31
};

inline float h2f(ggml_fp16_t h) { return ggml_compute_fp16_to_fp32(h); }

// 16 bytes of nibbles -> elements 0-15 (low nibbles) and 16-31 (high nibbles)
inline i8x32 nibbles(const uint8_t * qs) {
    const uint8x16_t v = vld1q_u8(qs);
    return { vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vreinterpretq_s8_u8(vshrq_n_u8(v, 4)) };
}

inline i8x32 sub_const(i8x32 v, int8_t k) { return { vsubq_s8(v.lo, vdupq_n_s8(k)), vsubq_s8(v.hi, vdupq_n_s8(k)) }; }

// bit j of the 32-bit little-endian mask qh -> 0x10 in byte j
inline i8x32 fifth_bits(const uint8_t * qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, 4);
    const uint8x16_t src = vreinterpretq_u8_u32(vdupq_n_u32(bits));
    const uint8x16_t idx_lo = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1 };
    const uint8x16_t idx_hi = { 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3 };
    const uint8x16_t bit = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
    const uint8x16_t lo = vandq_u8(vtstq_u8(vqtbl1q_u8(src, idx_lo), bit), vdupq_n_u8(0x10));
    const uint8x16_t hi = vandq_u8(vtstq_u8(vqtbl1q_u8(src, idx_hi), bit), vdupq_n_u8(0x10));
    return { vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi) };
}

inline i8x32 or_bits(i8x32 a, i8x32 b) { return { vorrq_s8(a.lo, b.lo), vorrq_s8(a.hi, b.hi) }; }

inline i8x32 table_lookup(const int8_t * kv, i8x32 idx) {
    const int8x16_t t = vld1q_s8(kv);
    return { vqtbl1q_s8(t, vreinterpretq_u8_s8(idx.lo)), vqtbl1q_s8(t, vreinterpretq_u8_s8(idx.hi)) };
}

struct w_q4_0 {
    using block = block_q4_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static i8x32 decode(const block & b) { return sub_const(nibbles(b.qs), 8); }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_q4_1 {
    using block = block_q4_1;
    using xblock = block_q8_1;
    static constexpr bool kMin = true;
    static i8x32 decode(const block & b) { return nibbles(b.qs); }
    static float scale(const block & b) { return h2f(b.d); }
    static float min(const block & b) { return h2f(b.m); }
};

struct w_q5_0 {
    using block = block_q5_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static i8x32 decode(const block & b) { return sub_const(or_bits(nibbles(b.qs), fifth_bits(b.qh)), 16); }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_q5_1 {
    using block = block_q5_1;
    using xblock = block_q8_1;
    static constexpr bool kMin = true;
    static i8x32 decode(const block & b) { return or_bits(nibbles(b.qs), fifth_bits(b.qh)); }
    static float scale(const block & b) { return h2f(b.d); }
    static float min(const block & b) { return h2f(b.m); }
};

struct w_q6_0 {
    using block = block_q6_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    // elements 0-7: bits 0-1 of qh[0..7], 8-15: bits 4-5, 16-23: bits 2-3, 24-31: bits 6-7
    static i8x32 decode(const block & b) {
        const uint8x8_t h = vld1_u8(b.qh);
        const uint8x16_t three = vdupq_n_u8(3);
        const uint8x16_t lo = vandq_u8(vcombine_u8(h, vshr_n_u8(h, 4)), three);
        const uint8x16_t hi = vandq_u8(vcombine_u8(vshr_n_u8(h, 2), vshr_n_u8(h, 6)), three);
        const i8x32 high = { vreinterpretq_s8_u8(vshlq_n_u8(lo, 4)), vreinterpretq_s8_u8(vshlq_n_u8(hi, 4)) };
        return sub_const(or_bits(nibbles(b.qs), high), 32);
    }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_q8_0 {
    using block = block_q8_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static i8x32 decode(const block & b) { return { vld1q_s8(b.qs), vld1q_s8(b.qs + 16) }; }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_iq4_nl {
    using block = block_iq4_nl;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static i8x32 decode(const block & b) { return table_lookup(kvalues_iq4nl, nibbles(b.qs)); }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_mxfp4 {
    using block = block_mxfp4;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static i8x32 decode(const block & b) { return table_lookup(kvalues_mxfp4, nibbles(b.qs)); }
    static float scale(const block & b) { return e8m0_to_fp32_half(b.e); }
};

// q8_K activations (and iq4_xs weights) seen as 32-value sub-blocks: sub-block ib of a row
// lives in super-block ib / 8.
struct w_iq4_xs {
    using block = block_iq4_xs;
    using xblock = block_q8_K;
    static constexpr bool kMin = false;
    static constexpr bool kSubBlocks = true;
    static i8x32 decode_at(const uint8_t * row, int64_t ib) {
        const block & b = ((const block *) row)[ib / 8];
        return table_lookup(kvalues_iq4nl, nibbles(b.qs + 16 * (ib % 8)));
    }
    static float scale_at(const uint8_t * row, int64_t ib) {
        const block & b = ((const block *) row)[ib / 8];
        return h2f(b.d) * iq4_xs_scale(b, (int) (ib % 8));
    }
};

template <typename W>
inline void load_x(const uint8_t * row, int64_t ib, i8x32 & v, float & d) {
    if constexpr (requires { W::kSubBlocks; }) {
        const block_q8_K & b = ((const block_q8_K *) row)[ib / 8];
        v = { vld1q_s8(b.qs + 32 * (ib % 8)), vld1q_s8(b.qs + 32 * (ib % 8) + 16) };
        d = b.d;
    } else {
        const auto & b = ((const typename W::xblock *) row)[ib];
        v = { vld1q_s8(b.qs), vld1q_s8(b.qs + 16) };
        d = h2f(b.d);
    }
}

template <typename W>
inline void load_w(const uint8_t * row, int64_t ib, i8x32 & v, float & d) {
    if constexpr (requires { W::kSubBlocks; }) {
        v = W::decode_at(row, ib);
        d = W::scale_at(row, ib);
    } else {
        const auto & b = ((const typename W::block *) row)[ib];
        v = W::decode(b);
        d = W::scale(b);
    }
}

namespace plain {
using Dot = neon_dot_plain;
#include "neon/gemm-legacy-loop.inc"
} // namespace plain

KILN_NEON_DOTPROD_BEGIN
namespace sdot {
using Dot = neon_dot_sdot;
#include "neon/gemm-legacy-loop.inc"
} // namespace sdot
KILN_NEON_DOTPROD_END

// ---- i8mm: SMMLA multiplies a 2x8 int8 matrix by the transpose of another 2x8 one into a 2x2
// int32 tile (row-major). Two weight rows and two activation columns, each interleaved in 8-byte
// pieces, give the four dot products of a block in four SMMLAs, where SDOT needs eight.
KILN_NEON_I8MM_BEGIN
namespace mm {

struct pairs {
    int8x16_t k[4];   // piece k: bytes 8k..8k+7 of the first row, then of the second
};

inline pairs interleave(const i8x32 & a, const i8x32 & b) {
    const int64x2_t alo = vreinterpretq_s64_s8(a.lo), blo = vreinterpretq_s64_s8(b.lo);
    const int64x2_t ahi = vreinterpretq_s64_s8(a.hi), bhi = vreinterpretq_s64_s8(b.hi);
    return { { vreinterpretq_s8_s64(vzip1q_s64(alo, blo)), vreinterpretq_s8_s64(vzip2q_s64(alo, blo)),
               vreinterpretq_s8_s64(vzip1q_s64(ahi, bhi)), vreinterpretq_s8_s64(vzip2q_s64(ahi, bhi)) } };
}

// 2 rows x 2*CP columns; lanes of acc[p]: (r0, c0), (r0, c1), (r1, c0), (r1, c1) of column pair p
template <typename W, int CP>
void tile(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * x, size_t x_stride, float * dst,
          size_t dst_stride) {
    using WB = typename W::block;
    float32x4_t acc[CP];
    float mins[2][2 * CP] = {};
    for (int p = 0; p < CP; ++p) acc[p] = vdupq_n_f32(0.0f);
    for (int64_t ib = 0; ib < nb; ++ib) {
        i8x32 w0, w1;
        float wd[2];
        load_w<W>(w, ib, w0, wd[0]);
        load_w<W>(w + w_stride, ib, w1, wd[1]);
        const pairs wp = interleave(w0, w1);
        for (int p = 0; p < CP; ++p) {
            i8x32 x0, x1;
            float xd0, xd1;
            load_x<W>(x + (2 * p) * x_stride, ib, x0, xd0);
            load_x<W>(x + (2 * p + 1) * x_stride, ib, x1, xd1);
            const pairs xp = interleave(x0, x1);
            int32x4_t s = vmmlaq_s32(vdupq_n_s32(0), wp.k[0], xp.k[0]);
            s = vmmlaq_s32(s, wp.k[1], xp.k[1]);
            s = vmmlaq_s32(s, wp.k[2], xp.k[2]);
            s = vmmlaq_s32(s, wp.k[3], xp.k[3]);
            const float32x4_t scale = { wd[0] * xd0, wd[0] * xd1, wd[1] * xd0, wd[1] * xd1 };
            acc[p] = vfmaq_f32(acc[p], vcvtq_f32_s32(s), scale);
        }
        if constexpr (W::kMin) {
            for (int r = 0; r < 2; ++r) {
                const float m = W::min(((const WB *) (w + r * w_stride))[ib]);
                for (int c = 0; c < 2 * CP; ++c) mins[r][c] += m * h2f(((const block_q8_1 *) (x + c * x_stride))[ib].s);
            }
        }
    }
    for (int p = 0; p < CP; ++p) {
        float v[4];
        vst1q_f32(v, acc[p]);
        dst[(2 * p) * dst_stride]         = v[0] + mins[0][2 * p];
        dst[(2 * p + 1) * dst_stride]     = v[1] + mins[0][2 * p + 1];
        dst[(2 * p) * dst_stride + 1]     = v[2] + mins[1][2 * p];
        dst[(2 * p + 1) * dst_stride + 1] = v[3] + mins[1][2 * p + 1];
    }
}

// Row pairs x column quads (or a pair) with SMMLA; an odd last column or row goes through SDOT.
template <typename W>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
          int nr, int nc) {
    const int64_t nb = n / 32;
    const auto * wb = (const uint8_t *) w;
    const auto * xb = (const uint8_t *) x;
    int r0 = 0;
    for (; r0 + 2 <= nr; r0 += 2) {
        const uint8_t * wr = wb + r0 * w_stride;
        int c0 = 0;
        for (; c0 + 4 <= nc; c0 += 4) tile<W, 2>(nb, wr, w_stride, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride + r0, dst_stride);
        if (c0 + 2 <= nc) {
            tile<W, 1>(nb, wr, w_stride, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride + r0, dst_stride);
            c0 += 2;
        }
        if (c0 < nc) sdot::tile<W, 2, 1>(nb, wr, w_stride, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride + r0, dst_stride);
    }
    if (r0 < nr) sdot::row_pair<W, 1>(nb, wb + r0 * w_stride, w_stride, xb, x_stride, dst + r0, dst_stride, nc);
}

} // namespace mm
KILN_NEON_I8MM_END

#include "neon/gemm-levels.inc"

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_legacy_neon() {
    add_levels<w_q4_0>(GGML_TYPE_Q4_0, GGML_TYPE_Q8_0);
    add_levels<w_q4_1>(GGML_TYPE_Q4_1, GGML_TYPE_Q8_1);
    add_levels<w_q5_0>(GGML_TYPE_Q5_0, GGML_TYPE_Q8_0);
    add_levels<w_q5_1>(GGML_TYPE_Q5_1, GGML_TYPE_Q8_1);
    add_levels<w_q6_0>(GGML_TYPE_Q6_0, GGML_TYPE_Q8_0);
    add_levels<w_q8_0>(GGML_TYPE_Q8_0, GGML_TYPE_Q8_0);
    add_levels<w_iq4_nl>(GGML_TYPE_IQ4_NL, GGML_TYPE_Q8_0);
    add_levels<w_mxfp4>(GGML_TYPE_MXFP4, GGML_TYPE_Q8_0);
    add_levels<w_iq4_xs>(GGML_TYPE_IQ4_XS, GGML_TYPE_Q8_K);
}
