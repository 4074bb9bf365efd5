// AVX512-VNNI gemm kernels of the 32-value block formats against q8_0 / q8_1 activations:
// q4_0, q4_1, q5_0, q5_1, q6_0, q8_0, iq4_nl, mxfp4; and iq4_xs against q8_K.
//
// Three paths by the number of activation columns of a call:
// - batches (>= kiln_panel::kMinCols columns): the panel gemm of panel.h (weights repacked per
//   call so that vector lanes are rows; broadcast activations; 16 rows x 8 columns per tile);
// - token generation: stream_gemm, one weight row at a time in units of 2-4 blocks, against
//   activations prepared once per call in the order the weights unpack to;
// - otherwise (q5_0 / q5_1 / q6_0, odd lengths) the per-row tile kernel below.
// vpdpbusd multiplies unsigned by signed bytes: weights are decoded to unsigned bytes
// u = w + offset, and offset * sum(x) is subtracted from the int32 block sums. Int32 block sums
// are converted to float once per block and scaled by d_w * d_x.
#include "avx512/register.h"
#include "cpu-traits.h"
#include "quants/quants-legacy.h"
#include "panel.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

namespace {

// fp16 -> fp32 in one instruction (F16C); exact, like the reference conversion
inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

// ---------------------------------------------------------------------------------------------
// activations

// Two fp16 values as 16 floats: a in the lanes of the first block, b (or 0) in those of the
// second (kSecond: a lane mask). Two broadcast loads and one conversion.
template <uint16_t kSecond>
inline __m512 fp16_pair(const ggml_fp16_t * a, const ggml_fp16_t * b) {
    const __m256i h = _mm256_set1_epi16((short) *a);
    return _mm512_cvtph_ps(b ? _mm256_mask_set1_epi16(h, kSecond, (short) *b) : _mm256_maskz_set1_epi16((__mmask16) ~kSecond, (short) *a));
}

// The lanes of the second block of a pair: natural order [a | b] or the nibble order
// [a lo | b lo | a hi | b hi] (weights kept in the order the nibbles unpack to; the activations
// are permuted instead, once per step for all rows).
constexpr uint16_t kHalfNatural = 0xFF00, kHalfNibble = 0xF0F0;

inline __m512i nibble_order(__m512i v) { return _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0)); }

template <typename B>
struct act_q8 {
    using block = B;
    // 64 signed bytes: block ib in the low half, ib+1 (or zeros) in the high half
    static __m512i load2(const B * x, int64_t ib, bool two) {
        const __m256i a = _mm256_loadu_si256((const __m256i *) x[ib].qs);
        const __m256i b = two ? _mm256_loadu_si256((const __m256i *) x[ib + 1].qs) : _mm256_setzero_si256();
        return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
    }
    template <uint16_t kSecond>
    static __m512 scale2(const B * x, int64_t ib, bool two) {
        return fp16_pair<kSecond>(&x[ib].d, two ? &x[ib + 1].d : nullptr);
    }
};

// q8_1's d * sum(q) / 8 in every lane of its block: each block has 8 lanes, so the lane-wise
// product with the weights' minimum sums to min * d * sum(q) exactly (1/8 is a power of two).
template <uint16_t kSecond>
inline __m512 q8_1_sums2(const block_q8_1 * x, int64_t ib, bool two) {
    return _mm512_mul_ps(fp16_pair<kSecond>(&x[ib].s, two ? &x[ib + 1].s : nullptr), _mm512_set1_ps(0.125f));
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
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);   // lo a, lo b, hi a, hi b
}

template <typename B>
inline __m512 fp16_scale2(const B * w, int64_t ib, bool two) {
    return fp16_pair<kHalfNibble>(&w[ib].d, two ? &w[ib + 1].d : nullptr);
}

template <typename B>
inline __m512 fp16_min2(const B * w, int64_t ib, bool two) {
    return fp16_pair<kHalfNibble>(&w[ib].m, two ? &w[ib + 1].m : nullptr);
}

inline uint32_t load_u32(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// the 5th bits of two q5 blocks as 0x10 bytes, in nibble order
inline __m512i fifth_bits2(const uint8_t * qha, const uint8_t * qhb) {
    const uint64_t a = load_u32(qha), b = qhb ? load_u32(qhb) : 0;
    const uint64_t bits = (a & 0xFFFF) | (b & 0xFFFF) << 16 | (a >> 16) << 32 | (b >> 16) << 48;
    return _mm512_maskz_mov_epi8((__mmask64) bits, _mm512_set1_epi8(0x10));
}

struct w_q4_0 {
    using block = block_q4_0;
    using xblock = block_q8_0;
    using act = act_q8<block_q8_0>;
    static constexpr int kOffset = 8;
    static constexpr bool kMin = false;
    static constexpr bool kNibbles = true;
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
    static constexpr bool kNibbles = true;
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
    static constexpr bool kNibbles = true;
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
    static constexpr bool kNibbles = true;
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
    static constexpr bool kNibbles = true;
    static __m512i decode2(const block * w, int64_t ib, bool two) {
        uint64_t ha, hb = 0;
        std::memcpy(&ha, w[ib].qh, 8);
        if (two) std::memcpy(&hb, w[ib + 1].qh, 8);
        // elements 0-7: bits 0-1 of qh[0..7], 8-15: bits 4-5, 16-23: bits 2-3, 24-31: bits 6-7;
        // 64-bit lanes in nibble order: a 0-7, a 8-15, b 0-7, b 8-15, a 16-23, a 24-31, b 16-23, b 24-31
        const __m512i h = _mm512_srlv_epi64(_mm512_setr_epi64(ha, ha, hb, hb, ha, ha, hb, hb),
                                            _mm512_setr_epi64(0, 4, 0, 4, 2, 6, 2, 6));
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
    static constexpr bool kNibbles = false;
    static __m512i decode2(const block * w, int64_t ib, bool two) {
        // w ^ 0x80 = w + 128 as an unsigned byte; a missing second block must decode to 0 + 128
        // too, but its activations are zero, so any value works
        return _mm512_xor_si512(act_q8<block_q8_0>::load2(w, ib, two), _mm512_set1_epi8((char) 0x80));
    }
    static __m512 scale2(const block * w, int64_t ib, bool two) {
        return fp16_pair<kHalfNatural>(&w[ib].d, two ? &w[ib + 1].d : nullptr);
    }
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
    static constexpr bool kNibbles = true;
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
    static constexpr bool kNibbles = true;
    static __m512i decode2(const block * w, int64_t ib, bool two) {
        static const __m512i table = table_u8(kvalues_mxfp4);
        return _mm512_shuffle_epi8(table, nibbles2(w[ib].qs, two ? w[ib + 1].qs : nullptr));
    }
    static __m512 scale2(const block * w, int64_t ib, bool two) {
        return _mm512_mask_blend_ps(kHalfNibble, _mm512_set1_ps(e8m0_to_fp32_half(w[ib].e)),
                                    _mm512_set1_ps(two ? e8m0_to_fp32_half(w[ib + 1].e) : 0.0f));
    }
    static float scale1(const block * w, int64_t ib) { return e8m0_to_fp32_half(w[ib].e); }
};

// q8_K activations seen as 32-value sub-blocks: sub-block ib of a row is at super-block ib / 8
struct act_q8_K {
    using block = block_q8_K;
    static __m512i load2(const block_q8_K * x, int64_t ib, bool) {
        return _mm512_loadu_si512((const void *) (x[ib / 8].qs + 32 * (ib % 8)));
    }
    template <uint16_t>
    static __m512 scale2(const block_q8_K * x, int64_t ib, bool) { return _mm512_set1_ps(x[ib / 8].d); }
};

// iq4_xs in pairs of 32-value sub-blocks (a super-block holds 8, so pairs never straddle)
struct w_iq4_xs {
    using block = block_iq4_xs;
    using act = act_q8_K;
    static constexpr int kOffset = 128;
    static constexpr bool kMin = false;
    static constexpr bool kNibbles = true;
    static __m512i decode2(const block * w, int64_t ib, bool) {
        static const __m512i table = table_u8(kvalues_iq4nl);
        const uint8_t * qs = w[ib / 8].qs + 16 * (ib % 8);
        return _mm512_shuffle_epi8(table, nibbles2(qs, qs + 16));
    }
    static int sub_scale(const block & b, int i) { return iq4_xs_scale(b, i); }
    static __m512 scale2(const block * w, int64_t ib, bool) {
        const block & b = w[ib / 8];
        const float d = h2f(b.d);
        const int i = (int) (ib % 8);
        return _mm512_mask_blend_ps(kHalfNibble, _mm512_set1_ps(d * sub_scale(b, i)), _mm512_set1_ps(d * sub_scale(b, i + 1)));
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
    constexpr uint16_t kHalf = W::kNibbles ? kHalfNibble : kHalfNatural;
    for (int64_t ib = 0; ib < nb; ib += 2) {
        const bool two = ib + 1 < nb;
        __m512i xv[C];
        __m512 xd[C];
        __m512i xo[C];
        for (int c = 0; c < C; ++c) {
            const auto * xc = (const typename W::act::block *) (x + c * x_stride);
            xv[c] = W::act::load2(xc, ib, two);
            if constexpr (W::kNibbles) xv[c] = nibble_order(xv[c]);
            xd[c] = W::act::template scale2<kHalf>(xc, ib, two);
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
                    acc[r][c] = _mm512_fmadd_ps(wm, q8_1_sums2<kHalf>((const block_q8_1 *) (x + c * x_stride), ib, two), acc[r][c]);
                }
            }
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) dst[c * dst_stride + r] = _mm512_reduce_add_ps(acc[r][c]);
}

// ---------------------------------------------------------------------------------------------
// Small batches (token generation): stream each weight row once, with as few instructions per
// byte as possible. The activations are prepared once per call (thread-local) in the order the
// weights decode to, with their scales and offset corrections, so the per-row loop is: load,
// unpack, one or two vpdpbusd per 64 bytes of weights per column, one conversion and one FMA.
// Units: 4 blocks of a nibble format (the 16-byte nibble fields of 4 blocks fill one vector; low
// and high nibbles give two vectors against [x 0-15 of each block] and [x 16-31 of each block]),
// 2 blocks of q8_0, or half an iq4_xs super-block (4 sub-blocks).

struct x_unit {
    __m512i v[4];   // activation bytes matching the decoded weight vectors
    __m512i o[2];   // kOffset * (sum of the bytes) per lane group and part: subtracted from the int dot
    __m512  d;      // activation scale per lane
    __m512  s;      // q8_1: d * sum(q) per lane, divided by the lanes of a block
};

// 4 fp16 values, each in one 4-lane group
inline __m512 fp16_quad(const ggml_fp16_t * a, const ggml_fp16_t * b, const ggml_fp16_t * c, const ggml_fp16_t * d) {
    __m256i h = _mm256_maskz_set1_epi16(0x000F, (short) *a);
    h = _mm256_mask_set1_epi16(h, 0x00F0, (short) *b);
    h = _mm256_mask_set1_epi16(h, 0x0F00, (short) *c);
    h = _mm256_mask_set1_epi16(h, 0xF000, (short) *d);
    return _mm512_cvtph_ps(h);
}

// 16 bytes at each of 4 addresses -> one vector
inline __m512i load4x16(const void * a, const void * b, const void * c, const void * d) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *) a));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *) b), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *) c), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *) d), 3);
}

template <typename W_>
struct unit_nibbles4 {
    using W = W_;
    using block = typename W::block;
    static constexpr int kValues = 128, kV = 2, kParts = 1;
    static constexpr bool kTable = std::is_same_v<W_, w_iq4_nl> || std::is_same_v<W, w_mxfp4>;
    static void decode(const uint8_t * row, int64_t u, __m512i * v) {
        const block * p = (const block *) row + 4 * u;
        const __m512i q = load4x16(p[0].qs, p[1].qs, p[2].qs, p[3].qs);
        const __m512i m = _mm512_set1_epi8(0x0F);
        v[0] = _mm512_and_si512(q, m);
        v[1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m);
        if constexpr (kTable) {
            static const __m512i table = table_u8(std::is_same_v<W, w_iq4_nl> ? kvalues_iq4nl : kvalues_mxfp4);
            v[0] = _mm512_shuffle_epi8(table, v[0]);
            v[1] = _mm512_shuffle_epi8(table, v[1]);
        }
    }
    static __m512 scale(const uint8_t * row, int64_t u) {
        const block * p = (const block *) row + 4 * u;
        if constexpr (std::is_same_v<W, w_mxfp4>) {
            const __m128 s = _mm_setr_ps(e8m0_to_fp32_half(p[0].e), e8m0_to_fp32_half(p[1].e), e8m0_to_fp32_half(p[2].e),
                                         e8m0_to_fp32_half(p[3].e));
            return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), _mm512_castps128_ps512(s));
        } else {
            return fp16_quad(&p[0].d, &p[1].d, &p[2].d, &p[3].d);
        }
    }
    static __m512 min(const uint8_t * row, int64_t u) {
        if constexpr (W::kMin) {
            const block * p = (const block *) row + 4 * u;
            return fp16_quad(&p[0].m, &p[1].m, &p[2].m, &p[3].m);
        } else {
            return _mm512_setzero_ps();
        }
    }
    static void prepare(const uint8_t * xrow, int64_t u, x_unit & out) {
        using XB = typename W::xblock;
        const XB * p = (const XB *) xrow + 4 * u;
        out.v[0] = load4x16(p[0].qs, p[1].qs, p[2].qs, p[3].qs);
        out.v[1] = load4x16(p[0].qs + 16, p[1].qs + 16, p[2].qs + 16, p[3].qs + 16);
        out.d = fp16_quad(&p[0].d, &p[1].d, &p[2].d, &p[3].d);
        if constexpr (W::kMin) {
            // each block owns 4 lanes
            out.s = _mm512_mul_ps(fp16_quad(&p[0].s, &p[1].s, &p[2].s, &p[3].s), _mm512_set1_ps(0.25f));
        }
    }
};

struct unit_q8_0 {
    using W = w_q8_0;
    static constexpr int kValues = 64, kV = 1, kParts = 1;
    static void decode(const uint8_t * row, int64_t u, __m512i * v) { v[0] = W::decode2((const block_q8_0 *) row, 2 * u, true); }
    static __m512 scale(const uint8_t * row, int64_t u) { return W::scale2((const block_q8_0 *) row, 2 * u, true); }
    static __m512 min(const uint8_t *, int64_t) { return _mm512_setzero_ps(); }
    static void prepare(const uint8_t * xrow, int64_t u, x_unit & out) {
        const auto * x = (const block_q8_0 *) xrow;
        out.v[0] = act_q8<block_q8_0>::load2(x, 2 * u, true);
        out.d = act_q8<block_q8_0>::scale2<kHalfNatural>(x, 2 * u, true);
    }
};

// a whole super-block: two parts of 4 sub-blocks, each part two vectors (low / high nibbles)
struct unit_iq4_xs {
    using W = w_iq4_xs;
    static constexpr int kValues = 256, kV = 4, kParts = 2;
    static void decode(const uint8_t * row, int64_t u, __m512i * v) {
        static const __m512i table = table_u8(kvalues_iq4nl);
        const auto & b = ((const block_iq4_xs *) row)[u];
        const __m512i m = _mm512_set1_epi8(0x0F);
        for (int h = 0; h < 2; ++h) {
            const __m512i q = _mm512_loadu_si512((const void *) (b.qs + 64 * h));
            v[2 * h] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m));
            v[2 * h + 1] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), m));
        }
    }
    // the 8 sub-block scales d * (ls - 32), 4 per part in 4-lane groups
    static void scales(const uint8_t * row, int64_t u, __m512 * wd) {
        const auto & b = ((const block_iq4_xs *) row)[u];
        uint32_t l;
        std::memcpy(&l, b.scales_l, 4);
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int) l), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                            _mm256_set1_epi32(0xF));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                            _mm256_set1_epi32(3));
        const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        const __m512 sc = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_cvtepi32_ps(ls), _mm256_set1_ps(h2f(b.d))));
        const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        wd[0] = _mm512_permutexvar_ps(idx, sc);
        wd[1] = _mm512_permutexvar_ps(_mm512_add_epi32(idx, _mm512_set1_epi32(4)), sc);
    }
    static __m512 min(const uint8_t *, int64_t) { return _mm512_setzero_ps(); }
    static void prepare(const uint8_t * xrow, int64_t u, x_unit & out) {
        const auto & x = ((const block_q8_K *) xrow)[u];
        for (int h = 0; h < 2; ++h) {
            const int8_t * q = x.qs + 128 * h;
            out.v[2 * h] = load4x16(q, q + 32, q + 64, q + 96);
            out.v[2 * h + 1] = load4x16(q + 16, q + 48, q + 80, q + 112);
        }
        out.d = _mm512_set1_ps(x.d);
    }
};

template <typename U, int C>
void stream_rows(int64_t nu, const uint8_t * w, size_t w_stride, const x_unit * xp, float * dst, size_t dst_stride, int nr) {
    using W = typename U::W;
    for (int r = 0; r < nr; ++r) {
        const uint8_t * row = w + r * w_stride;
        __m512 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
        for (int64_t u = 0; u < nu; ++u) {
            constexpr int P = U::kParts, VP = U::kV / U::kParts;
            __m512i v[U::kV];
            U::decode(row, u, v);
            __m512 wd[P];
            if constexpr (P == 1) wd[0] = U::scale(row, u);
            else U::scales(row, u, wd);
            for (int c = 0; c < C; ++c) {
                const x_unit & x = xp[c * nu + u];
                for (int p = 0; p < P; ++p) {
                    __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[p * VP], x.v[p * VP]);
                    if constexpr (VP == 2) s = _mm512_dpbusd_epi32(s, v[p * VP + 1], x.v[p * VP + 1]);
                    if constexpr (W::kOffset != 0) s = _mm512_sub_epi32(s, x.o[p]);
                    acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd[p], x.d), acc[c]);
                }
                if constexpr (W::kMin) acc[c] = _mm512_fmadd_ps(U::min(row, u), x.s, acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) dst[c * dst_stride + r] = _mm512_reduce_add_ps(acc[c]);
    }
}

template <typename U>
void stream_gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
                 int nr, int nc) {
    using W = typename U::W;
    const int64_t nu = n / U::kValues;
    auto * xp = (x_unit *) kiln_panel::scratch(1, nc * nu * sizeof(x_unit));
    const __m512i offset = _mm512_set1_epi8((char) W::kOffset);
    for (int c = 0; c < nc; ++c) {
        for (int64_t u = 0; u < nu; ++u) {
            x_unit & xu = xp[c * nu + u];
            U::prepare((const uint8_t *) x + c * x_stride, u, xu);
            constexpr int VP = U::kV / U::kParts;
            for (int p = 0; p < U::kParts; ++p) {
                xu.o[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, xu.v[p * VP]);
                if constexpr (VP == 2) xu.o[p] = _mm512_dpbusd_epi32(xu.o[p], offset, xu.v[p * VP + 1]);
            }
        }
    }
    const auto * wb = (const uint8_t *) w;
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const int C = std::min(4, nc - c0);
        const x_unit * xc = xp + c0 * nu;
        float * dc = dst + c0 * dst_stride;
        switch (C) {
            case 1: stream_rows<U, 1>(nu, wb, w_stride, xc, dc, dst_stride, nr); break;
            case 2: stream_rows<U, 2>(nu, wb, w_stride, xc, dc, dst_stride, nr); break;
            case 3: stream_rows<U, 3>(nu, wb, w_stride, xc, dc, dst_stride, nr); break;
            default: stream_rows<U, 4>(nu, wb, w_stride, xc, dc, dst_stride, nr); break;
        }
    }
}

template <typename W> struct stream_unit { using type = void; };
template <> struct stream_unit<w_q8_0> { using type = unit_q8_0; };
template <> struct stream_unit<w_iq4_xs> { using type = unit_iq4_xs; };
template <> struct stream_unit<w_q4_0> { using type = unit_nibbles4<w_q4_0>; };
template <> struct stream_unit<w_q4_1> { using type = unit_nibbles4<w_q4_1>; };
template <> struct stream_unit<w_iq4_nl> { using type = unit_nibbles4<w_iq4_nl>; };
template <> struct stream_unit<w_mxfp4> { using type = unit_nibbles4<w_mxfp4>; };

// Batches: the shared panel gemm (panel.h). Two 32-value blocks per decode; a weight value is
// scale * u + bias with u the decoded unsigned level.
template <typename W>
struct panel_decoder {
    static constexpr int kSub = 32, kChunk = 64;
    // without a minimum the bias is only the level offset, which the panel folds away (panel.h)
    static constexpr int kLevelOffset = W::kMin ? 0 : W::kOffset;
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
        if constexpr (W::kNibbles) v[0] = nibble_order(v[0]);   // the panel wants natural order
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
    using U = typename stream_unit<W>::type;
    if constexpr (!std::is_void_v<U>) {
        if (n % U::kValues == 0) {
            stream_gemm<U>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
            return;
        }
    }
    // the rest (q5_0, q5_1, q6_0, rows not a whole number of stream units): one row at a time
    // against up to 4 columns (a single sequential weight stream measured faster than 4
    // interleaved rows)
    using tile_fn = void (*)(int64_t, const uint8_t *, size_t, const uint8_t *, size_t, float *, size_t);
    static constexpr tile_fn tiles[4] = { tile<W, 1, 1>, tile<W, 1, 2>, tile<W, 1, 3>, tile<W, 1, 4> };
    const int64_t nb = n / 32;
    const auto * wb = (const uint8_t *) w;
    const auto * xb = (const uint8_t *) x;
    for (int r = 0; r < nr; ++r) {
        for (int c0 = 0; c0 < nc; c0 += 4) {
            const int C = nc - c0 < 4 ? nc - c0 : 4;
            tiles[C - 1](nb, wb + r * w_stride, w_stride, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride + r, dst_stride);
        }
    }
}

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_legacy_avx512() {
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
