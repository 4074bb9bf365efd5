// AVX512-VNNI gemm kernels of the 32-value block formats against q8_0 / q8_1 activations:
// q4_0, q4_1, q5_0, q5_1, q6_0, q8_0, iq4_nl, mxfp4; and iq4_xs against q8_K.
//
// Register tiling: a tile of up to 4 weight rows x 4 activation columns keeps 16 float
// accumulators; each step covers two blocks (64 values), so every weight row is decoded once per
// step and multiplied with all the tile's columns. vpdpbusd multiplies unsigned by signed bytes:
// weights are decoded to unsigned bytes u = w + offset, and offset * sum(x) is subtracted from
// the int32 block sums (that sum is computed once per column and step). Int32 block sums are
// converted to float once per block and scaled by d_w * d_x.
#include "cpu-traits.h"
#include "quants/quants-legacy.h"
#include "panel.h"

#include <immintrin.h>

#include <cstring>

namespace {

// fp16 -> fp32 in one instruction (F16C); exact, like the reference conversion
inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

// ---------------------------------------------------------------------------------------------
// activations

template <typename B>
struct act_q8 {
    using block = B;
    // 64 signed bytes: block ib in the low half, ib+1 (or zeros) in the high half
    static __m512i load2(const B * x, int64_t ib, bool two) {
        const __m256i a = _mm256_loadu_si256((const __m256i *) x[ib].qs);
        const __m256i b = two ? _mm256_loadu_si256((const __m256i *) x[ib + 1].qs) : _mm256_setzero_si256();
        return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
    }
    static __m512 scale2(const B * x, int64_t ib, bool two) {
        const __m256 a = _mm256_set1_ps(h2f(x[ib].d));
        const __m256 b = _mm256_set1_ps(two ? h2f(x[ib + 1].d) : 0.0f);
        return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
    }
};

// q8_1's d * sum(q) in lanes 0 and 8 (the lanes the min term is added to)
inline __m512 q8_1_sums2(const block_q8_1 * x, int64_t ib, bool two) {
    const float a = h2f(x[ib].s);
    const float b = two ? h2f(x[ib + 1].s) : 0.0f;
    return _mm512_setr_ps(a, 0, 0, 0, 0, 0, 0, 0, b, 0, 0, 0, 0, 0, 0, 0);
}

// ---------------------------------------------------------------------------------------------
// weights: decode2 gives 64 unsigned bytes (value + kOffset), scale2 the block scales per lane

// 16 bytes of packed nibbles of two blocks -> [lo a | hi a | lo b | hi b] (element order)
inline __m512i nibbles2(const uint8_t * qa, const uint8_t * qb) {
    const __m128i a = _mm_loadu_si128((const __m128i *) qa);
    const __m128i b = qb ? _mm_loadu_si128((const __m128i *) qb) : _mm_setzero_si128();
    const __m256i t  = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
    const __m256i m  = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(t, m);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(t, 4), m);
    const __m512i v  = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);   // lo a, lo b, hi a, hi b
    return _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0));
}

template <typename B>
inline __m512 fp16_scale2(const B * w, int64_t ib, bool two) {
    const __m256 a = _mm256_set1_ps(h2f(w[ib].d));
    const __m256 b = _mm256_set1_ps(two ? h2f(w[ib + 1].d) : 0.0f);
    return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
}

template <typename B>
inline __m512 fp16_min2(const B * w, int64_t ib, bool two) {
    const float a = h2f(w[ib].m);
    const float b = two ? h2f(w[ib + 1].m) : 0.0f;
    return _mm512_setr_ps(a, 0, 0, 0, 0, 0, 0, 0, b, 0, 0, 0, 0, 0, 0, 0);
}

inline uint32_t load_u32(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// the 5th bits of two q5 blocks as 0x10 bytes
inline __m512i fifth_bits2(const uint8_t * qha, const uint8_t * qhb) {
    const uint64_t bits = (uint64_t) load_u32(qha) | ((uint64_t) (qhb ? load_u32(qhb) : 0) << 32);
    return _mm512_maskz_mov_epi8((__mmask64) bits, _mm512_set1_epi8(0x10));
}

struct w_q4_0 {
    using block = block_q4_0;
    using xblock = block_q8_0;
    using act = act_q8<block_q8_0>;
    static constexpr int kOffset = 8;
    static constexpr bool kMin = false;
    static __m512i decode2(const block * w, int64_t ib, bool two) { return nibbles2(w[ib].qs, two ? w[ib + 1].qs : nullptr); }
    static __m512 scale2(const block * w, int64_t ib, bool two) { return fp16_scale2(w, ib, two); }
    static float scale1(const block * w, int64_t ib) { return h2f(w[ib].d); }
};

struct w_q4_1 {
    using block = block_q4_1;
    using xblock = block_q8_1;
    using act = act_q8<block_q8_1>;
    static constexpr int kOffset = 0;
    static constexpr bool kMin = true;
    static __m512i decode2(const block * w, int64_t ib, bool two) { return nibbles2(w[ib].qs, two ? w[ib + 1].qs : nullptr); }
    static __m512 scale2(const block * w, int64_t ib, bool two) { return fp16_scale2(w, ib, two); }
    static __m512 min2(const block * w, int64_t ib, bool two) { return fp16_min2(w, ib, two); }
    static float scale1(const block * w, int64_t ib) { return h2f(w[ib].d); }
    static float min1(const block * w, int64_t ib) { return h2f(w[ib].m); }
};

struct w_q5_0 {
    using block = block_q5_0;
    using xblock = block_q8_0;
    using act = act_q8<block_q8_0>;
    static constexpr int kOffset = 16;
    static constexpr bool kMin = false;
    static __m512i decode2(const block * w, int64_t ib, bool two) {
        return _mm512_or_si512(nibbles2(w[ib].qs, two ? w[ib + 1].qs : nullptr), fifth_bits2(w[ib].qh, two ? w[ib + 1].qh : nullptr));
    }
    static __m512 scale2(const block * w, int64_t ib, bool two) { return fp16_scale2(w, ib, two); }
    static float scale1(const block * w, int64_t ib) { return h2f(w[ib].d); }
};

struct w_q5_1 {
    using block = block_q5_1;
    using xblock = block_q8_1;
    using act = act_q8<block_q8_1>;
    static constexpr int kOffset = 0;
    static constexpr bool kMin = true;
    static __m512i decode2(const block * w, int64_t ib, bool two) {
        return _mm512_or_si512(nibbles2(w[ib].qs, two ? w[ib + 1].qs : nullptr), fifth_bits2(w[ib].qh, two ? w[ib + 1].qh : nullptr));
    }
    static __m512 scale2(const block * w, int64_t ib, bool two) { return fp16_scale2(w, ib, two); }
    static __m512 min2(const block * w, int64_t ib, bool two) { return fp16_min2(w, ib, two); }
    static float scale1(const block * w, int64_t ib) { return h2f(w[ib].d); }
    static float min1(const block * w, int64_t ib) { return h2f(w[ib].m); }
};

struct w_q6_0 {
    using block = block_q6_0;
    using xblock = block_q8_0;
    using act = act_q8<block_q8_0>;
    static constexpr int kOffset = 32;
    static constexpr bool kMin = false;
    static __m512i decode2(const block * w, int64_t ib, bool two) {
        uint64_t ha, hb = 0;
        std::memcpy(&ha, w[ib].qh, 8);
        if (two) std::memcpy(&hb, w[ib + 1].qh, 8);
        // elements 0-7: bits 0-1 of qh[0..7], 8-15: bits 4-5, 16-23: bits 2-3, 24-31: bits 6-7
        const __m512i h = _mm512_srlv_epi64(_mm512_setr_epi64(ha, ha, ha, ha, hb, hb, hb, hb),
                                            _mm512_setr_epi64(0, 4, 2, 6, 0, 4, 2, 6));
        const __m512i high = _mm512_slli_epi16(_mm512_and_si512(h, _mm512_set1_epi8(3)), 4);
        return _mm512_or_si512(nibbles2(w[ib].qs, two ? w[ib + 1].qs : nullptr), high);
    }
    static __m512 scale2(const block * w, int64_t ib, bool two) { return fp16_scale2(w, ib, two); }
    static float scale1(const block * w, int64_t ib) { return h2f(w[ib].d); }
};

struct w_q8_0 {
    using block = block_q8_0;
    using xblock = block_q8_0;
    using act = act_q8<block_q8_0>;
    static constexpr int kOffset = 128;
    static constexpr bool kMin = false;
    static __m512i decode2(const block * w, int64_t ib, bool two) {
        // w ^ 0x80 = w + 128 as an unsigned byte; a missing second block must decode to 0 + 128
        // too, but its activations are zero, so any value works
        return _mm512_xor_si512(act_q8<block_q8_0>::load2(w, ib, two), _mm512_set1_epi8((char) 0x80));
    }
    static __m512 scale2(const block * w, int64_t ib, bool two) { return fp16_scale2(w, ib, two); }
    static float scale1(const block * w, int64_t ib) { return h2f(w[ib].d); }
};

// table lookups: kvalues + 128 as unsigned bytes, replicated in each 128-bit lane
inline __m512i table_u8(const int8_t * kv) {
    alignas(16) uint8_t t[16];
    for (int i = 0; i < 16; ++i) t[i] = (uint8_t) (kv[i] + 128);
    return _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *) t));
}

struct w_iq4_nl {
    using block = block_iq4_nl;
    using xblock = block_q8_0;
    using act = act_q8<block_q8_0>;
    static constexpr int kOffset = 128;
    static constexpr bool kMin = false;
    static __m512i decode2(const block * w, int64_t ib, bool two) {
        static const __m512i table = table_u8(kvalues_iq4nl);
        return _mm512_shuffle_epi8(table, nibbles2(w[ib].qs, two ? w[ib + 1].qs : nullptr));
    }
    static __m512 scale2(const block * w, int64_t ib, bool two) { return fp16_scale2(w, ib, two); }
    static float scale1(const block * w, int64_t ib) { return h2f(w[ib].d); }
};

struct w_mxfp4 {
    using block = block_mxfp4;
    using xblock = block_q8_0;
    using act = act_q8<block_q8_0>;
    static constexpr int kOffset = 128;
    static constexpr bool kMin = false;
    static __m512i decode2(const block * w, int64_t ib, bool two) {
        static const __m512i table = table_u8(kvalues_mxfp4);
        return _mm512_shuffle_epi8(table, nibbles2(w[ib].qs, two ? w[ib + 1].qs : nullptr));
    }
    static __m512 scale2(const block * w, int64_t ib, bool two) {
        const __m256 a = _mm256_set1_ps(e8m0_to_fp32_half(w[ib].e));
        const __m256 b = _mm256_set1_ps(two ? e8m0_to_fp32_half(w[ib + 1].e) : 0.0f);
        return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
    }
    static float scale1(const block * w, int64_t ib) { return e8m0_to_fp32_half(w[ib].e); }
};

// q8_K activations seen as 32-value sub-blocks: sub-block ib of a row is at super-block ib / 8
struct act_q8_K {
    using block = block_q8_K;
    static __m512i load2(const block_q8_K * x, int64_t ib, bool) {
        return _mm512_loadu_si512((const void *) (x[ib / 8].qs + 32 * (ib % 8)));
    }
    static __m512 scale2(const block_q8_K * x, int64_t ib, bool) { return _mm512_set1_ps(x[ib / 8].d); }
};

// iq4_xs in pairs of 32-value sub-blocks (a super-block holds 8, so pairs never straddle)
struct w_iq4_xs {
    using block = block_iq4_xs;
    using act = act_q8_K;
    static constexpr int kOffset = 128;
    static constexpr bool kMin = false;
    static __m512i decode2(const block * w, int64_t ib, bool) {
        static const __m512i table = table_u8(kvalues_iq4nl);
        const uint8_t * qs = w[ib / 8].qs + 16 * (ib % 8);
        return _mm512_shuffle_epi8(table, nibbles2(qs, qs + 16));
    }
    static int sub_scale(const block & b, int i) {
        return (((b.scales_l[i / 2] >> 4 * (i % 2)) & 0xF) | (((b.scales_h >> 2 * i) & 3) << 4)) - 32;
    }
    static __m512 scale2(const block * w, int64_t ib, bool) {
        const block & b = w[ib / 8];
        const float d = h2f(b.d);
        const int i = (int) (ib % 8);
        const __m256 a = _mm256_set1_ps(d * sub_scale(b, i));
        const __m256 c = _mm256_set1_ps(d * sub_scale(b, i + 1));
        return _mm512_insertf32x8(_mm512_castps256_ps512(a), c, 1);
    }
    static float scale1(const block * w, int64_t ib) { return h2f(w[ib / 8].d) * sub_scale(w[ib / 8], (int) (ib % 8)); }
};

// ---------------------------------------------------------------------------------------------

template <typename W, int R, int C>
void tile(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * x, size_t x_stride, float * dst,
          size_t dst_stride) {
    using WB = typename W::block;
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    const __m512i offset = _mm512_set1_epi8((char) W::kOffset);
    for (int64_t ib = 0; ib < nb; ib += 2) {
        const bool two = ib + 1 < nb;
        __m512i xv[C];
        __m512 xd[C];
        __m512i xo[C];
        for (int c = 0; c < C; ++c) {
            const auto * xc = (const typename W::act::block *) (x + c * x_stride);
            xv[c] = W::act::load2(xc, ib, two);
            xd[c] = W::act::scale2(xc, ib, two);
            if constexpr (W::kOffset != 0) xo[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, xv[c]);
        }
        for (int r = 0; r < R; ++r) {
            const WB * wr = (const WB *) (w + r * w_stride);
            const __m512i wv = W::decode2(wr, ib, two);
            const __m512 wd = W::scale2(wr, ib, two);
            for (int c = 0; c < C; ++c) {
                __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, xv[c]);
                if constexpr (W::kOffset != 0) s = _mm512_sub_epi32(s, xo[c]);
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd, xd[c]), acc[r][c]);
            }
            if constexpr (W::kMin) {
                const __m512 wm = W::min2(wr, ib, two);
                for (int c = 0; c < C; ++c) {
                    acc[r][c] = _mm512_fmadd_ps(wm, q8_1_sums2((const block_q8_1 *) (x + c * x_stride), ib, two), acc[r][c]);
                }
            }
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) dst[c * dst_stride + r] = _mm512_reduce_add_ps(acc[r][c]);
}

// Batches: the shared panel gemm (panel.h). Two 32-value blocks per decode; a weight value is
// scale * u + bias with u the decoded unsigned level.
template <typename W>
struct panel_decoder {
    static constexpr int kSub = 32, kChunk = 64;
    static void coef(const typename W::block * b, int64_t ib, float & scale, float & bias) {
        scale = W::scale1(b, ib);
        if constexpr (W::kMin) bias = W::min1(b, ib);
        else bias = -(float) W::kOffset * scale;
    }
    static void decode(const uint8_t * row, int64_t i, int64_t n, __m512i * v, float * scale, float * bias) {
        const auto * b = (const typename W::block *) row;
        const int64_t ib = 2 * i;
        const bool two = ib + 1 < n / 32;
        v[0] = W::decode2(b, ib, two);
        coef(b, ib, scale[0], bias[0]);
        if (two) coef(b, ib + 1, scale[1], bias[1]);
        else scale[1] = bias[1] = 0.0f;
    }
};

template <typename W> struct panel_act { using type = kiln_panel::act_q8_32<false>; };
template <> struct panel_act<w_q4_1> { using type = kiln_panel::act_q8_32<true>; };
template <> struct panel_act<w_q5_1> { using type = kiln_panel::act_q8_32<true>; };
template <> struct panel_act<w_iq4_xs> { using type = kiln_panel::act_q8_K<32>; };

template <typename W>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
          int nr, int nc) {
    if (nc >= kiln_panel::kMinCols) {
        kiln_panel::gemm<panel_decoder<W>, typename panel_act<W>::type>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    using tile_fn = void (*)(int64_t, const uint8_t *, size_t, const uint8_t *, size_t, float *, size_t);
    static constexpr tile_fn tiles[4][4] = {
        { tile<W, 1, 1>, tile<W, 1, 2>, tile<W, 1, 3>, tile<W, 1, 4> },
        { tile<W, 2, 1>, tile<W, 2, 2>, tile<W, 2, 3>, tile<W, 2, 4> },
        { tile<W, 3, 1>, tile<W, 3, 2>, tile<W, 3, 3>, tile<W, 3, 4> },
        { tile<W, 4, 1>, tile<W, 4, 2>, tile<W, 4, 3>, tile<W, 4, 4> },
    };
    const int64_t nb = n / 32;
    const auto * wb = (const uint8_t *) w;
    const auto * xb = (const uint8_t *) x;
    // rows outside, columns inside: a 4-row strip of weights stays in L1 while all columns pass
    for (int r0 = 0; r0 < nr; r0 += 4) {
        const int R = nr - r0 < 4 ? nr - r0 : 4;
        for (int c0 = 0; c0 < nc; c0 += 4) {
            const int C = nc - c0 < 4 ? nc - c0 : 4;
            tiles[R - 1][C - 1](nb, wb + r0 * w_stride, w_stride, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride + r0,
                                dst_stride);
        }
    }
}

void register_avx512_legacy() {
    ggml_cpu_register_gemm(GGML_TYPE_Q4_0, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, gemm<w_q4_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q4_1, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_1, gemm<w_q4_1>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_0, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, gemm<w_q5_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_1, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_1, gemm<w_q5_1>);
    ggml_cpu_register_gemm(GGML_TYPE_Q6_0, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, gemm<w_q6_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_0, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, gemm<w_q8_0>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_NL, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, gemm<w_iq4_nl>);
    ggml_cpu_register_gemm(GGML_TYPE_MXFP4, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, gemm<w_mxfp4>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_XS, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_K, gemm<w_iq4_xs>);
}
GGML_REGISTER(register_avx512_legacy);

} // namespace
