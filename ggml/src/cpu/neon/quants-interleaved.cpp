// NEON gemm kernels of the row-interleaved layouts at the dotprod level (the i8mm level picks them
// too; plain NEON keeps the scalar path, which unweaves the group and runs the twin type's NEON
// kernel, or decodes it): q4_0_r8 / q8_0_r8 / iq4_nl_r4 / q5_0_r4 / q6_0_r4 against q8_0,
// iq4_xs_r8 (8 rows), q2_k_r4 / q3_k_r4 / q4_k_r4 / q5_k_r4 / q6_k_r4 / iq4_k_r4 / iq5_k_r4 (4 rows)
// against q8_K.
//
// Layouts (quants-interleaved.h): the rows' fp16 scales first, then the levels woven so that one
// 16-byte load (after nibble extraction) is "4 consecutive values of rows 0-3" (or 4-7): a run.
// SDOT by lane with the 4 activation values of the run (lane j % 4 of the activation's 16-byte
// half) adds one int32 per row, so the rows of a group sit in one or two accumulators, need no
// horizontal sums, and the weights are read once per tile of columns.
//  - q4_0_r8 / q8_0_r8: per quarter l of 16 values, rows 0-3 then 4-7 (q4_0_r8: low nibbles
//    values 4 l .., high nibbles 16 + 4 l ..);
//  - iq4_xs_r8: per 32-value sub-block ib, 128 bytes; quarter l (32 bytes) holds values 8 l ..
//    in the low nibbles and 8 l + 4 .. in the high ones (iq4_nl grid by table lookup); 6-bit
//    sub-block scales in split arrays, slot 8 ib + row;
//  - q4_k_r4: per sub-block 64 bytes, runs 0/2, 4/6, 1/3, 5/7 (low/high nibbles) of the 16-byte
//    quarters (r4_nibble_byte); 6-bit scales and mins, slot 4 ib + row; the mins multiply q8_K's
//    per-16 sums; q5_k_r4 adds 16 bytes of fifth bits per sub-block, one bit per run; q6_k_r4
//    two high bits per value in 32 bytes per sub-block and an int8 scale per 16 values; iq4_k_r4
//    / iq5_k_r4 a 6-bit scale per 16 values and a grid (plain or shifted) per row and 16 values;
//  - q2_k_r4: 2-bit crumbs, 32 bytes per sub-block, a scale and a min nibble per 16 values;
//    q3_k_r4 the same crumbs, 16 bytes of third bits and a 6-bit scale per 16 values;
//  - iq4_nl_r4 / q5_0_r4 / q6_0_r4: the same nibble group per 32-value block (+ 16 / 32 bytes of
//    high bits).
#include "neon/register.h"
#include "neon/simd.h"
#include "cpu-traits.h"
#include "quants/quants-interleaved.h"
#include "quants/quants-legacy.h"

namespace {

KILN_NEON_DOTPROD_BEGIN
namespace sdot {

// The levels of quarter l of half h (values 16 h + 4 l ..): rows 0-3 and rows 4-7.
struct r8_q8_0 {
    using block = q8_0_r8_block;
    static void load(const block & b, int h, int l, int8x16_t & r03, int8x16_t & r47) {
        const int8_t * p = b.qs + 128 * h + 32 * l;
        r03 = vld1q_s8(p);
        r47 = vld1q_s8(p + 16);
    }
};

// q4_0_r8: the low nibbles of a quarter's bytes are values 4 l .., the high ones 16 + 4 l ..
struct r8_q4_0 {
    using block = q4_0_r8_block;
    static void load(const block & b, int h, int l, int8x16_t & r03, int8x16_t & r47) {
        const uint8x16_t a = vld1q_u8(b.qs + 32 * l), c = vld1q_u8(b.qs + 32 * l + 16);
        const uint8x16_t m = vdupq_n_u8(0xF);
        const uint8x16_t la = h ? vshrq_n_u8(a, 4) : vandq_u8(a, m), lc = h ? vshrq_n_u8(c, 4) : vandq_u8(c, m);
        r03 = vsubq_s8(vreinterpretq_s8_u8(la), vdupq_n_s8(8));
        r47 = vsubq_s8(vreinterpretq_s8_u8(lc), vdupq_n_s8(8));
    }
};

inline float32x4_t scales4(const ggml_fp16_t * d) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(d))); }

// 16 values: runs w0..w3 (values 4 j .. 4 j + 3 of 4 rows) against lanes 0..3 of x
inline int32x4_t sdot4(int32x4_t s, int8x16_t w0, int8x16_t w1, int8x16_t w2, int8x16_t w3, int8x16_t x) {
    s = vdotq_laneq_s32(s, w0, x, 0);
    s = vdotq_laneq_s32(s, w1, x, 1);
    s = vdotq_laneq_s32(s, w2, x, 2);
    return vdotq_laneq_s32(s, w3, x, 3);
}

// 32 values: run j of V row vectors w[j][v] against lane j % 4 of x0 (runs 0-3) or x1 (runs
// 4-7); s[v] gains one int32 per row.
template <int V>
inline void sdot_runs(const int8x16_t (&w)[8][V], int8x16_t x0, int8x16_t x1, int32x4_t (&s)[V]) {
    for (int v = 0; v < V; ++v) {
        s[v] = sdot4(s[v], w[0][v], w[1][v], w[2][v], w[3][v], x0);
        s[v] = sdot4(s[v], w[4][v], w[5][v], w[6][v], w[7][v], x1);
    }
}

// The 8 runs of a 64-byte 4-row nibble group (r4_nibble_byte): the 16-byte quarters hold runs
// 0/2, 4/6, 1/3, 5/7 in their low/high nibbles.
inline void r4_runs(const uint8_t * q, uint8x16_t (&u)[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0xF);
    const uint8x16_t a0 = vld1q_u8(q), a1 = vld1q_u8(q + 16), a2 = vld1q_u8(q + 32), a3 = vld1q_u8(q + 48);
    u[0] = vandq_u8(a0, m4), u[1] = vandq_u8(a2, m4), u[2] = vshrq_n_u8(a0, 4), u[3] = vshrq_n_u8(a2, 4);
    u[4] = vandq_u8(a1, m4), u[5] = vandq_u8(a3, m4), u[6] = vshrq_n_u8(a1, 4), u[7] = vshrq_n_u8(a3, 4);
}

// The 8 runs of a 32-byte 4-row crumb group (r4_crumb_byte / r4_crumb_shift): the first / second
// 16 bytes hold runs 0-3 / 4-7 at bits 0, 2, 4, 6.
inline void r4_crumb_runs(const uint8_t * q, uint8x16_t (&u)[8]) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int h = 0; h < 2; ++h) {
        const uint8x16_t a = vld1q_u8(q + 16 * h);
        u[4 * h + 0] = vandq_u8(a, m3);
        u[4 * h + 1] = vandq_u8(vshrq_n_u8(a, 2), m3);
        u[4 * h + 2] = vandq_u8(vshrq_n_u8(a, 4), m3);
        u[4 * h + 3] = vshrq_n_u8(a, 6);
    }
}

// u | the bits of qh under mask after a shift by `to` (left if positive, right if negative): the
// high bits of a level moved above its nibble
inline uint8x16_t or_high(uint8x16_t u, uint8x16_t qh, int8_t to, uint8x16_t mask) {
    return vorrq_u8(u, vandq_u8(vshlq_u8(qh, vdupq_n_s8(to)), mask));
}

// One group of 8 rows times C columns; dst[c * dst_stride + k], k < 8.
template <typename L, int C>
void group_tile(int64_t nb, const typename L::block * wb, const char * x, size_t x_stride, float * dst, size_t dst_stride) {
    float32x4_t acc[C][2];
    for (int c = 0; c < C; ++c) acc[c][0] = acc[c][1] = vdupq_n_f32(0.0f);
    for (int64_t ib = 0; ib < nb; ++ib) {
        int8x16_t w[8][2];   // run 4 h + l
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 4; ++l) L::load(wb[ib], h, l, w[4 * h + l][0], w[4 * h + l][1]);
        const float32x4_t d03 = scales4(wb[ib].d), d47 = scales4(wb[ib].d + 4);
        for (int c = 0; c < C; ++c) {
            const block_q8_0 & a = ((const block_q8_0 *) (x + c * x_stride))[ib];
            int32x4_t s[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
            sdot_runs<2>(w, vld1q_s8(a.qs), vld1q_s8(a.qs + 16), s);
            const float xd = ggml_compute_fp16_to_fp32(a.d);
            acc[c][0] = vfmaq_f32(acc[c][0], vcvtq_f32_s32(s[0]), vmulq_n_f32(d03, xd));
            acc[c][1] = vfmaq_f32(acc[c][1], vcvtq_f32_s32(s[1]), vmulq_n_f32(d47, xd));
        }
    }
    for (int c = 0; c < C; ++c) {
        vst1q_f32(dst + c * dst_stride, acc[c][0]);
        vst1q_f32(dst + c * dst_stride + 4, acc[c][1]);
    }
}

// The 8-row legacy layouts as a gemm kernel: 32-value blocks, q8_0 activations.
template <typename L>
struct legacy_r8 {
    using block = typename L::block;
    static constexpr int R = 8, QK = 32, header = 0;
    template <int C>
    static void tile(int64_t nb, const float *, const block * wb, const char * x, size_t xs, float * dst, size_t ds) {
        group_tile<L, C>(nb, wb, x, xs, dst, ds);
    }
};

// The 64 6-bit scales of split arrays (split_scale6), minus 32, slot is at sc[is].
template <typename Block>
void split_scales6(const Block & b, int8_t * sc) {
    const uint8x16_t m4 = vdupq_n_u8(0xF), m2 = vdupq_n_u8(3);
    const uint8x16_t l0 = vld1q_u8(b.scales_l), l1 = vld1q_u8(b.scales_l + 16), h = vld1q_u8(b.scales_h);
    const uint8x16_t lo[4] = { vandq_u8(l0, m4), vandq_u8(l1, m4), vshrq_n_u8(l0, 4), vshrq_n_u8(l1, 4) };
    const uint8x16_t hi[4] = { vandq_u8(h, m2), vandq_u8(vshrq_n_u8(h, 2), m2), vandq_u8(vshrq_n_u8(h, 4), m2),
                               vshrq_n_u8(h, 6) };
    for (int j = 0; j < 4; ++j) {   // slots 16 j .. 16 j + 15
        const uint8x16_t v = vorrq_u8(lo[j], vshlq_n_u8(hi[j], 4));
        vst1q_s8(sc + 16 * j, vsubq_s8(vreinterpretq_s8_u8(v), vdupq_n_s8(32)));
    }
}

// iq4_xs_r8: per 256-value block, the 64 sub-block scales (slot 8 ib + row, minus 32) are
// unpacked once in vectors; per sub-block the int32 row sums are scaled in integers (|sum| <=
// 32 * 127 * 127, times |scale| <= 32, times 8 sub-blocks: below 2^31) and converted once.
struct iq4_xs_r8_kernel {
    using block = iq4_xs_r8_block;
    static constexpr int R = 8, QK = QK_K, header = 0;
    template <int C>
    static void tile(int64_t nb, const float *, const block * wb, const char * x, size_t xs, float * dst, size_t ds) {
        const int8x16_t grid = vld1q_s8(ik_iq4k_values);   // the iq4_nl levels: the first 16 entries
        const uint8x16_t m4 = vdupq_n_u8(0xF);
        float32x4_t acc[C][2];
        for (int c = 0; c < C; ++c) acc[c][0] = acc[c][1] = vdupq_n_f32(0.0f);
        for (int64_t ibl = 0; ibl < nb; ++ibl) {
            const block & b = wb[ibl];
            int8_t sc[64];
            split_scales6(b, sc);
            int32x4_t isum[C][2];
            for (int c = 0; c < C; ++c) isum[c][0] = isum[c][1] = vdupq_n_s32(0);
            for (int ib = 0; ib < 8; ++ib) {
                int8x16_t w[8][2];   // run 2 l + h
                for (int l = 0; l < 4; ++l) {
                    const uint8x16_t a = vld1q_u8(b.qs + 128 * ib + 32 * l), e = vld1q_u8(b.qs + 128 * ib + 32 * l + 16);
                    w[2 * l][0] = vqtbl1q_s8(grid, vandq_u8(a, m4));
                    w[2 * l][1] = vqtbl1q_s8(grid, vandq_u8(e, m4));
                    w[2 * l + 1][0] = vqtbl1q_s8(grid, vshrq_n_u8(a, 4));
                    w[2 * l + 1][1] = vqtbl1q_s8(grid, vshrq_n_u8(e, 4));
                }
                const int16x8_t s16 = vmovl_s8(vld1_s8(sc + 8 * ib));
                const int32x4_t s03 = vmovl_s16(vget_low_s16(s16)), s47 = vmovl_high_s16(s16);
                for (int c = 0; c < C; ++c) {
                    const int8_t * q = ((const block_q8_K *) (x + c * xs))[ibl].qs + 32 * ib;
                    int32x4_t s[2] = { vdupq_n_s32(0), vdupq_n_s32(0) };
                    sdot_runs<2>(w, vld1q_s8(q), vld1q_s8(q + 16), s);
                    isum[c][0] = vmlaq_s32(isum[c][0], s[0], s03);
                    isum[c][1] = vmlaq_s32(isum[c][1], s[1], s47);
                }
            }
            const float32x4_t d03 = scales4(b.d), d47 = scales4(b.d + 4);
            for (int c = 0; c < C; ++c) {
                const float xd = ((const block_q8_K *) (x + c * xs))[ibl].d;
                acc[c][0] = vfmaq_f32(acc[c][0], vcvtq_f32_s32(isum[c][0]), vmulq_n_f32(d03, xd));
                acc[c][1] = vfmaq_f32(acc[c][1], vcvtq_f32_s32(isum[c][1]), vmulq_n_f32(d47, xd));
            }
        }
        for (int c = 0; c < C; ++c) {
            vst1q_f32(dst + c * ds, acc[c][0]);
            vst1q_f32(dst + c * ds + 4, acc[c][1]);
        }
    }
};

// q4_k_r4 / q5_k_r4: value = d * sc * q - m * mn per sub-block; the q part by SDOT (levels 0..15,
// q5_k_r4 0..31 with the fifth bit), the min part from q8_K's sums of 16 activations, both
// accumulated in int32 per block (|sum| <= 32 * 31 * 127 * 63 * 8 and 32 * 127 * 63 * 8: below 2^31).
// four bytes as four int32 lanes
inline int32x4_t widen4(const uint8_t * p) {
    uint32_t u;
    std::memcpy(&u, p, 4);
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(u))))));
}

template <typename Block, bool FifthBit>
struct k45_r4_kernel {
    using block = Block;
    static constexpr int R = 4, QK = QK_K, header = 0;
    // slot 4 ib + row: low nibbles in scales_l (scale low, min high), top two bits of each in
    // nibble is / 16 of scales_h[is % 16] (scale bits 0-1, min bits 2-3).
    static void scales(const block & b, uint8_t * sc, uint8_t * mn) {
        const uint8x16_t m4 = vdupq_n_u8(0xF);
        const uint8x16_t h = vld1q_u8(b.scales_h);
        const uint8x16_t hs[2] = { vandq_u8(h, m4), vshrq_n_u8(h, 4) };
        for (int j = 0; j < 2; ++j) {   // slots 16 j .. 16 j + 15
            const uint8x16_t l = vld1q_u8(b.scales_l + 16 * j);
            vst1q_u8(sc + 16 * j, vorrq_u8(vandq_u8(l, m4), vshlq_n_u8(vandq_u8(hs[j], vdupq_n_u8(3)), 4)));
            vst1q_u8(mn + 16 * j, vorrq_u8(vshrq_n_u8(l, 4), vshlq_n_u8(vandq_u8(hs[j], vdupq_n_u8(0xC)), 2)));
        }
    }
    template <int C>
    static void tile(int64_t nb, const float *, const block * wb, const char * x, size_t xs, float * dst, size_t ds) {
        float32x4_t acc[C];
        for (int c = 0; c < C; ++c) acc[c] = vdupq_n_f32(0.0f);
        for (int64_t ibl = 0; ibl < nb; ++ibl) {
            const block & b = wb[ibl];
            uint8_t sc[32], mn[32];
            scales(b, sc, mn);
            int32x4_t isum[C], imin[C];
            for (int c = 0; c < C; ++c) isum[c] = imin[c] = vdupq_n_s32(0);
            for (int ib = 0; ib < 8; ++ib) {
                uint8x16_t u[8];
                r4_runs(b.qs + 64 * ib, u);
                if constexpr (FifthBit) {   // run j's fifth bits: bit q5_k_r4_hbit(4 j) of the sub-block's 16 qh bytes
                    static const int8_t to_bit4[8] = { 4, 2, 3, 1, 0, -2, -1, -3 };   // 4 - hbit
                    const uint8x16_t qh = vld1q_u8(b.qh + 16 * ib), m16 = vdupq_n_u8(0x10);
                    for (int j = 0; j < 8; ++j) u[j] = or_high(u[j], qh, to_bit4[j], m16);
                }
                int8x16_t w[8][1];
                for (int j = 0; j < 8; ++j) w[j][0] = vreinterpretq_s8_u8(u[j]);
                const int32x4_t scv = widen4(sc + 4 * ib), mnv = widen4(mn + 4 * ib);
                for (int c = 0; c < C; ++c) {
                    const block_q8_K & a = ((const block_q8_K *) (x + c * xs))[ibl];
                    int32x4_t s[1] = { vdupq_n_s32(0) };
                    sdot_runs<1>(w, vld1q_s8(a.qs + 32 * ib), vld1q_s8(a.qs + 32 * ib + 16), s);
                    isum[c] = vmlaq_s32(isum[c], s[0], scv);
                    imin[c] = vmlaq_n_s32(imin[c], mnv, a.bsums[2 * ib] + a.bsums[2 * ib + 1]);
                }
            }
            const float32x4_t d = scales4(b.d), m = scales4(b.d + 4);
            for (int c = 0; c < C; ++c) {
                const float xd = ((const block_q8_K *) (x + c * xs))[ibl].d;
                acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(isum[c]), vmulq_n_f32(d, xd));
                acc[c] = vfmsq_f32(acc[c], vcvtq_f32_s32(imin[c]), vmulq_n_f32(m, xd));
            }
        }
        for (int c = 0; c < C; ++c) vst1q_f32(dst + c * ds, acc[c]);
    }
};

// 4-row 256-value layouts with a signed scale per 16 values (slot 8 ib + row, + 4 for the second
// half) against q8_K (q2_k_r4 .. q6_k_r4, iq2_k_r4 .. iq5_k_r4, iq4_ks_r4, iq5_ks_r4): each half
// keeps its own int32 sum (|sum| <= 16 * 128 * 127 * 128 * 16: below 2^31). The level decoder D
// gives the rows' scales (fp16 in the block, or the f32 header of the ks layouts), the block's
// scales and the 8 signed runs of a sub-block; with D::mins also a min per 16 values (times
// d[row + 4]), applied to q8_K's per-16 sums.
template <typename D>
struct r4_halves_kernel {
    using block = typename D::block;
    static constexpr int R = 4, QK = QK_K, header = D::header;
    template <int C>
    static void tile(int64_t nb, const float * rd, const block * wb, const char * x, size_t xs, float * dst, size_t ds) {
        float32x4_t acc[C];
        for (int c = 0; c < C; ++c) acc[c] = vdupq_n_f32(0.0f);
        for (int64_t ibl = 0; ibl < nb; ++ibl) {
            const block & b = wb[ibl];
            int8_t tmp[64], tmp_m[64];
            const int8_t * sc = D::scales(b, tmp);
            const int8_t * mn = D::mins ? D::min_scales(b, tmp_m) : nullptr;
            int32x4_t isum[C], imin[C];
            for (int c = 0; c < C; ++c) isum[c] = imin[c] = vdupq_n_s32(0);
            for (int ib = 0; ib < 8; ++ib) {
                int8x16_t w[8];
                D::levels(b, ib, w);
                const int16x8_t s16 = vmovl_s8(vld1_s8(sc + 8 * ib));
                const int32x4_t sc_lo = vmovl_s16(vget_low_s16(s16)), sc_hi = vmovl_high_s16(s16);
                for (int c = 0; c < C; ++c) {
                    const int8_t * q = ((const block_q8_K *) (x + c * xs))[ibl].qs + 32 * ib;
                    const int32x4_t lo = sdot4(vdupq_n_s32(0), w[0], w[1], w[2], w[3], vld1q_s8(q));
                    const int32x4_t hi = sdot4(vdupq_n_s32(0), w[4], w[5], w[6], w[7], vld1q_s8(q + 16));
                    isum[c] = vmlaq_s32(vmlaq_s32(isum[c], lo, sc_lo), hi, sc_hi);
                }
                if constexpr (D::mins) {
                    const int16x8_t m16 = vmovl_s8(vld1_s8(mn + 8 * ib));
                    const int32x4_t mn_lo = vmovl_s16(vget_low_s16(m16)), mn_hi = vmovl_high_s16(m16);
                    for (int c = 0; c < C; ++c) {
                        const int16_t * bs = ((const block_q8_K *) (x + c * xs))[ibl].bsums + 2 * ib;
                        imin[c] = vmlaq_n_s32(vmlaq_n_s32(imin[c], mn_lo, bs[0]), mn_hi, bs[1]);
                    }
                }
            }
            const float32x4_t d = D::row_scales(b, rd);
            for (int c = 0; c < C; ++c) {
                const float xd = ((const block_q8_K *) (x + c * xs))[ibl].d;
                acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(isum[c]), vmulq_n_f32(d, xd));
                if constexpr (D::mins) acc[c] = vfmsq_f32(acc[c], vcvtq_f32_s32(imin[c]), vmulq_n_f32(scales4(b.d + 4), xd));
            }
        }
        for (int c = 0; c < C; ++c) vst1q_f32(dst + c * ds, acc[c]);
    }
};

// Parts of the level decoders. Rows' scales: fp16 d[0..3] in the block, or the group's f32
// header (the ks layouts); no mins.
struct fp16_rows {
    static constexpr int header = 0;
    template <typename B> static float32x4_t row_scales(const B & b, const float *) { return scales4(b.d); }
};
struct f32_header_rows {
    static constexpr int header = 4 * sizeof(float);
    template <typename B> static float32x4_t row_scales(const B &, const float * rd) { return vld1q_f32(rd); }
};
struct no_mins {
    static constexpr bool mins = false;
    template <typename B> static const int8_t * min_scales(const B &, int8_t *) { return nullptr; }
};

// Sub-block scales in the 64 slots 8 ib + row (+ 4 for the second half), from 6-bit split arrays
// (minus 32).
struct split6_scales : no_mins, fp16_rows {
    template <typename B> static const int8_t * scales(const B & b, int8_t * tmp) {
        split_scales6(b, tmp);
        return tmp;
    }
};
// ... from 4-bit nibbles: slot is in byte is % 32, low nibble for slots 0..31; iq2_k_r4 stores
// them plus 8, iq3_k_r4 the magnitude (2 n + 1) with a sign bit of slot is at bit is / 8 of
// scales_h[is % 8].
inline uint8x16_t slot_nibbles(const uint8_t * s, int j) {   // slots 16 j .. 16 j + 15
    const uint8x16_t v = vld1q_u8(s + 16 * (j % 2));
    return j < 2 ? vandq_u8(v, vdupq_n_u8(0xF)) : vshrq_n_u8(v, 4);
}
struct iq2_k_r4_scales : no_mins, fp16_rows {
    static const int8_t * scales(const iq2_k_r4_block & b, int8_t * tmp) {
        for (int j = 0; j < 4; ++j) vst1q_s8(tmp + 16 * j, vsubq_s8(vreinterpretq_s8_u8(slot_nibbles(b.scales, j)), vdupq_n_s8(8)));
        return tmp;
    }
};
struct iq3_k_r4_scales : no_mins, fp16_rows {
    static const int8_t * scales(const iq3_k_r4_block & b, int8_t * tmp) {
        const uint8x8_t h8 = vld1_u8(b.scales_h);
        const uint8x16_t h = vcombine_u8(h8, h8), one = vdupq_n_u8(1);
        for (int j = 0; j < 4; ++j) {
            const int8x16_t m = vreinterpretq_s8_u8(vaddq_u8(vshlq_n_u8(slot_nibbles(b.scales_l, j), 1), one));
            const int8x16_t to = vcombine_s8(vdup_n_s8((int8_t) (-2 * j)), vdup_n_s8((int8_t) (-2 * j - 1)));
            const uint8x16_t neg = vtstq_u8(vshlq_u8(h, to), one);
            vst1q_s8(tmp + 16 * j, vbslq_s8(neg, vnegq_s8(m), m));
        }
        return tmp;
    }
};

// Grid offsets of sub-block ib: the bytes of row k's lanes in half h get the grid size where bit
// ib of extra[k + 4 h] picks the shifted grid (iq2_k_r4 .. iq5_k_r4).
struct extra_offsets {
    template <typename B> static void offsets(const B & b, int ib, uint8_t size, uint8x16_t (&o)[2]) {
        uint8_t bits[8];
        for (int k = 0; k < 8; ++k) bits[k] = (uint8_t) ((b.extra[k] >> ib) & 1);
        const uint8x8_t v = vmul_u8(vld1_u8(bits), vdup_n_u8(size));   // row k of half h at byte k + 4 h
        const uint8x16_t idx = { 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3 };
        const uint8x16_t v2 = vcombine_u8(v, v);
        o[0] = vqtbl1q_u8(v2, idx);
        o[1] = vqtbl1q_u8(v2, vaddq_u8(idx, vdupq_n_u8(4)));
    }
};

// iq4_ks_r4 / iq5_ks_r4: the iq4_ks / iq5_ks scale byte of sub-block ib and row k at
// scales[4 ib + k]: (s & 254) - 127 for both halves, bit 0 the shifted grid.
struct ks_r4_scales : no_mins, f32_header_rows {
    template <typename B> static const int8_t * scales(const B & b, int8_t * tmp) {
        for (int h = 0; h < 2; ++h) {   // sub-blocks 4 h .. 4 h + 3, one u32 lane each
            const uint8x16_t s = vld1q_u8(b.scales + 16 * h);
            const uint32x4_t v = vreinterpretq_u32_u8(vsubq_u8(vandq_u8(s, vdupq_n_u8(254)), vdupq_n_u8(127)));
            vst1q_u32((uint32_t *) (tmp + 32 * h), vzip1q_u32(v, v));
            vst1q_u32((uint32_t *) (tmp + 32 * h + 16), vzip2q_u32(v, v));
        }
        return tmp;
    }
    template <typename B> static void offsets(const B & b, int ib, uint8_t size, uint8x16_t (&o)[2]) {
        uint32_t s;
        std::memcpy(&s, b.scales + 4 * ib, 4);
        const uint8x16_t idx = { 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3 };
        const uint8x16_t v = vqtbl1q_u8(vreinterpretq_u8_u32(vdupq_n_u32(s)), idx);
        o[0] = o[1] = vmulq_u8(vandq_u8(v, vdupq_n_u8(1)), vdupq_n_u8(size));
    }
};

// The 8 unsigned level runs of sub-block ib, Bits 2..5: crumbs (+ the third bit of run j at bit
// j of the sub-block's 16 qh bytes) or nibbles (+ the fifth bit of run j at bit
// iq5_k_r4_hbit(4 j)).
template <int Bits, typename Block>
inline void level_runs(const Block & b, int ib, uint8x16_t (&u)[8]) {
    if constexpr (Bits <= 3) {
        r4_crumb_runs(b.qs + 32 * ib, u);
        if constexpr (Bits == 3) {
            const uint8x16_t qh = vld1q_u8(b.qh + 16 * ib), m4 = vdupq_n_u8(4);
            for (int j = 0; j < 8; ++j) u[j] = or_high(u[j], qh, (int8_t) (2 - j), m4);
        }
    } else {
        r4_runs(b.qs + 64 * ib, u);
        if constexpr (Bits == 5) {
            static const int8_t to_bit4[8] = { 4, 0, 3, -1, 2, -2, 1, -3 };   // 4 - hbit
            const uint8x16_t qh = vld1q_u8(b.qh + 16 * ib), m16 = vdupq_n_u8(0x10);
            for (int j = 0; j < 8; ++j) u[j] = or_high(u[j], qh, to_bit4[j], m16);
        }
    }
}

// The levels of the ik grids (2^Bits plain entries, then the shifted ones) by table lookup of
// level + offset; runs 0-3 are the first half of the sub-block, 4-7 the second.
template <int Bits>
inline void grid_levels(const uint8x16_t (&u)[8], const uint8x16_t (&o)[2], int8x16_t (&w)[8]) {
    if constexpr (Bits <= 3) {
        int8_t t[16] = {};   // iq2_k: 8 entries, the rest never indexed
        std::memcpy(t, Bits == 2 ? ik_iq2nl_values : ik_iq3nl_values, 2 << Bits);
        const int8x16_t g = vld1q_s8(t);
        for (int j = 0; j < 8; ++j) w[j] = vqtbl1q_s8(g, vaddq_u8(u[j], o[j / 4]));
    } else if constexpr (Bits == 4) {
        const int8x16x2_t g = { { vld1q_s8(ik_iq4k_values), vld1q_s8(ik_iq4k_values + 16) } };
        for (int j = 0; j < 8; ++j) w[j] = vqtbl2q_s8(g, vaddq_u8(u[j], o[j / 4]));
    } else {
        const int8x16x4_t g = { { vld1q_s8(ik_iq5nl_values), vld1q_s8(ik_iq5nl_values + 16), vld1q_s8(ik_iq5nl_values + 32),
                                  vld1q_s8(ik_iq5nl_values + 48) } };
        for (int j = 0; j < 8; ++j) w[j] = vqtbl4q_s8(g, vaddq_u8(u[j], o[j / 4]));
    }
}

// The ik r4 layouts: levels of Bits bits through the plain or shifted grid per row and half;
// Scales gives the sub-block scales, the rows' scales and the grid offsets.
template <typename Block, int Bits, typename Scales, typename Offsets = Scales>
struct ik_r4_levels : Scales {
    using block = Block;
    static void levels(const Block & b, int ib, int8x16_t (&w)[8]) {
        uint8x16_t u[8], o[2];
        level_runs<Bits>(b, ib, u);
        Offsets::offsets(b, ib, (uint8_t) (1 << Bits), o);
        grid_levels<Bits>(u, o, w);
    }
};
struct split6_extra : split6_scales, extra_offsets {};
struct iq2_k_r4_extra : iq2_k_r4_scales, extra_offsets {};
struct iq3_k_r4_extra : iq3_k_r4_scales, extra_offsets {};

// q6_k_r4: low nibbles as q4_k_r4, the two high bits of runs 0-3 / 4-7 in the sub-block's first /
// second 16 qh bytes at bits 0, 4, 2, 6 (q6_k_r4_hshift), levels minus 32; int8 scales as stored.
struct q6_k_r4_levels : no_mins, fp16_rows {
    using block = q6_k_r4_block;
    static const int8_t * scales(const block & b, int8_t *) { return b.scales; }
    static void levels(const block & b, int ib, int8x16_t (&w)[8]) {
        static const int8_t to_bit4[4] = { 4, 0, 2, -2 };   // 4 - hshift: high bits to bits 4-5
        uint8x16_t u[8];
        r4_runs(b.ql + 64 * ib, u);
        const uint8x16_t qh[2] = { vld1q_u8(b.qh + 32 * ib), vld1q_u8(b.qh + 32 * ib + 16) }, m30 = vdupq_n_u8(0x30);
        for (int j = 0; j < 8; ++j) {
            w[j] = vsubq_s8(vreinterpretq_s8_u8(or_high(u[j], qh[j / 4], to_bit4[j % 4], m30)), vdupq_n_s8(32));
        }
    }
};

// q2_k_r4: per 16 values of a row a byte (scale low nibble, min high nibble) at slot 8 ib + row
// (+ 4); 2-bit levels as crumbs: the sub-block's first / second 16 bytes hold runs 0-3 / 4-7 at
// bits 0, 2, 4, 6 (r4_crumb_byte, r4_crumb_shift).
struct q2_k_r4_levels : fp16_rows {
    using block = q2_k_r4_block;
    static constexpr bool mins = true;
    static const int8_t * scales(const block & b, int8_t * tmp) {
        for (int j = 0; j < 4; ++j) vst1q_u8((uint8_t *) tmp + 16 * j, vandq_u8(vld1q_u8(b.scales + 16 * j), vdupq_n_u8(0xF)));
        return tmp;
    }
    static const int8_t * min_scales(const block & b, int8_t * tmp) {
        for (int j = 0; j < 4; ++j) vst1q_u8((uint8_t *) tmp + 16 * j, vshrq_n_u8(vld1q_u8(b.scales + 16 * j), 4));
        return tmp;
    }
    static void levels(const block & b, int ib, int8x16_t (&w)[8]) {
        uint8x16_t u[8];
        r4_crumb_runs(b.qs + 32 * ib, u);
        for (int j = 0; j < 8; ++j) w[j] = vreinterpretq_s8_u8(u[j]);
    }
};

// q3_k_r4: q2_k_r4's crumbs plus a third bit (as iq3_k_r4), levels minus 4; 6-bit split scales
// (minus 32) at slot 8 ib + row (+ 4).
struct q3_k_r4_levels : split6_scales {
    using block = q3_k_r4_block;
    static void levels(const block & b, int ib, int8x16_t (&w)[8]) {
        uint8x16_t u[8];
        level_runs<3>(b, ib, u);
        for (int j = 0; j < 8; ++j) w[j] = vsubq_s8(vreinterpretq_s8_u8(u[j]), vdupq_n_s8(4));
    }
};

// 32-value blocks of 4 rows against q8_0 (iq4_nl_r4, q5_0_r4, q6_0_r4): the level decoder D gives
// the 8 signed runs of a block.
template <typename D>
struct r4_q8_0_kernel {
    using block = typename D::block;
    static constexpr int R = 4, QK = 32, header = 0;
    template <int C>
    static void tile(int64_t nb, const float *, const block * wb, const char * x, size_t xs, float * dst, size_t ds) {
        float32x4_t acc[C];
        for (int c = 0; c < C; ++c) acc[c] = vdupq_n_f32(0.0f);
        for (int64_t ib = 0; ib < nb; ++ib) {
            uint8x16_t u[8];
            r4_runs(wb[ib].qs, u);
            int8x16_t w[8][1];
            D::levels(wb[ib], u, w);
            const float32x4_t d = scales4(wb[ib].d);
            for (int c = 0; c < C; ++c) {
                const block_q8_0 & a = ((const block_q8_0 *) (x + c * xs))[ib];
                int32x4_t s[1] = { vdupq_n_s32(0) };
                sdot_runs<1>(w, vld1q_s8(a.qs), vld1q_s8(a.qs + 16), s);
                acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(s[0]), vmulq_n_f32(d, ggml_compute_fp16_to_fp32(a.d)));
            }
        }
        for (int c = 0; c < C; ++c) vst1q_f32(dst + c * ds, acc[c]);
    }
};

struct iq4_nl_r4_levels {   // through the iq4_nl grid
    using block = iq4_nl_r4_block;
    static void levels(const block &, const uint8x16_t (&u)[8], int8x16_t (&w)[8][1]) {
        const int8x16_t grid = vld1q_s8(ik_iq4k_values);
        for (int j = 0; j < 8; ++j) w[j][0] = vqtbl1q_s8(grid, u[j]);
    }
};
struct q5_0_r4_levels {   // fifth bit of run j: bit q5_0_r4_hbit(4 j) of qh; levels minus 16
    using block = q5_0_r4_block;
    static void levels(const block & b, const uint8x16_t (&u)[8], int8x16_t (&w)[8][1]) {
        static const int8_t to_bit4[8] = { 4, 2, 0, -2, 3, 1, -1, -3 };   // 4 - hbit
        const uint8x16_t qh = vld1q_u8(b.qh), m16 = vdupq_n_u8(0x10);
        for (int j = 0; j < 8; ++j) w[j][0] = vsubq_s8(vreinterpretq_s8_u8(or_high(u[j], qh, to_bit4[j], m16)), vdupq_n_s8(16));
    }
};
struct q6_0_r4_levels {   // high bits of run j: qh[16 (j / 4) ..] at bits 2 (j % 4); levels minus 32
    using block = q6_0_r4_block;
    static void levels(const block & b, const uint8x16_t (&u)[8], int8x16_t (&w)[8][1]) {
        static const int8_t to_bit4[4] = { 4, 2, 0, -2 };   // 4 - hshift
        const uint8x16_t qh[2] = { vld1q_u8(b.qh), vld1q_u8(b.qh + 16) }, m30 = vdupq_n_u8(0x30);
        for (int j = 0; j < 8; ++j) {
            w[j][0] = vsubq_s8(vreinterpretq_s8_u8(or_high(u[j], qh[j / 4], to_bit4[j % 4], m30)), vdupq_n_s8(32));
        }
    }
};

#include "neon/gemm-interleaved-loop.inc"

} // namespace sdot
KILN_NEON_DOTPROD_END

template <typename K>
__attribute__((target(KILN_NEON_DOTPROD_TARGET))) void gemm_dotprod(int64_t n, const void * w, size_t ws, const void * x,
                                                                     size_t xs, float * dst, size_t ds, int nr, int nc) {
    sdot::gemm<K>(n, w, ws, x, xs, dst, ds, nr, nc);
}

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_interleaved_neon() {
    if (!ggml_cpu_isa_runs_here(GGML_CPU_ISA_NEON_DOTPROD)) return;
    const ggml_cpu_isa isa = GGML_CPU_ISA_NEON_DOTPROD;
    ggml_cpu_register_gemm(GGML_TYPE_Q4_0_R8, isa, GGML_TYPE_Q8_0, gemm_dotprod<sdot::legacy_r8<sdot::r8_q4_0>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_0_R8, isa, GGML_TYPE_Q8_0, gemm_dotprod<sdot::legacy_r8<sdot::r8_q8_0>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_XS_R8, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::iq4_xs_r8_kernel>);
    ggml_cpu_register_gemm(GGML_TYPE_Q4_K_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::k45_r4_kernel<q4_k_r4_block, false>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_K_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::k45_r4_kernel<q5_k_r4_block, true>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q6_K_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::r4_halves_kernel<sdot::q6_k_r4_levels>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q2_K_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::r4_halves_kernel<sdot::q2_k_r4_levels>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q3_K_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::r4_halves_kernel<sdot::q3_k_r4_levels>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_K_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::r4_halves_kernel<sdot::ik_r4_levels<iq4_k_r4_block, 4, sdot::split6_extra>>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ5_K_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::r4_halves_kernel<sdot::ik_r4_levels<iq5_k_r4_block, 5, sdot::split6_extra>>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_K_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::r4_halves_kernel<sdot::ik_r4_levels<iq2_k_r4_block, 2, sdot::iq2_k_r4_extra>>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_K_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::r4_halves_kernel<sdot::ik_r4_levels<iq3_k_r4_block, 3, sdot::iq3_k_r4_extra>>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_KS_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::r4_halves_kernel<sdot::ik_r4_levels<iq4_ks_r4_block, 4, sdot::ks_r4_scales>>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ5_KS_R4, isa, GGML_TYPE_Q8_K, gemm_dotprod<sdot::r4_halves_kernel<sdot::ik_r4_levels<iq5_ks_r4_block, 5, sdot::ks_r4_scales>>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_NL_R4, isa, GGML_TYPE_Q8_0, gemm_dotprod<sdot::r4_q8_0_kernel<sdot::iq4_nl_r4_levels>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_0_R4, isa, GGML_TYPE_Q8_0, gemm_dotprod<sdot::r4_q8_0_kernel<sdot::q5_0_r4_levels>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q6_0_R4, isa, GGML_TYPE_Q8_0, gemm_dotprod<sdot::r4_q8_0_kernel<sdot::q6_0_r4_levels>>);
}
