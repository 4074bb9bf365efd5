// 16-lane group decoders of the interleaved k-quants (q2_k_r4, q4_k_r4, q5_k_r4, q6_k_r4) for the
// AVX512 panel: four 4-row groups per call, so one 512-bit operation decodes what the 8-lane
// decoders of avx2/panel-r8-k.h take two 256-bit calls for. Token generation of these layouts is
// bound by the decode (the product is a few vpdpbusd per 16 rows and 4 values), so halving its
// instruction count is what brings them to their plain twins' speed. Same layouts, same records,
// same levels and coefficients as the 8-lane decoders (test-quants-simd holds both to the scalar
// kernel).
#pragma once

#include "avx2/panel-r8-k.h"

namespace {
namespace kiln_panel {

// 16 bytes of each of four 4-row groups (group q in 128-bit lane q).
inline __m512i quad16(const uint8_t * a, const uint8_t * b, const uint8_t * c, const uint8_t * d) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(pair16(a, b)), pair16(c, d), 1);
}

// 4 bytes of each of four groups widened to 16 int32 lanes.
inline __m512i quad4_epu8(const uint8_t * a, const uint8_t * b, const uint8_t * c, const uint8_t * d) {
    int32_t v[4];
    std::memcpy(v + 0, a, 4);
    std::memcpy(v + 1, b, 4);
    std::memcpy(v + 2, c, 4);
    std::memcpy(v + 3, d, 4);
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) v));
}

// The 4 fp16 values at offset `at` of each group's d[] as 16 floats.
template <typename B>
inline __m512 fp16x4x4(const B * const * blk, int at) {
    int64_t v[4];
    for (int q = 0; q < 4; ++q) std::memcpy(v + q, blk[q]->d + at, 8);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) v));
}

// kWidth bits from bit `from` of every byte moved to bit `to` (move_bits, 16 lanes).
template <int kWidth>
inline __m512i move_bits16(__m512i h, int from, int to) {
    const __m512i t = from >= to ? _mm512_srl_epi16(h, _mm_cvtsi32_si128(from - to)) : _mm512_sll_epi16(h, _mm_cvtsi32_si128(to - from));
    return _mm512_and_si512(t, _mm512_set1_epi8((char) (((1 << kWidth) - 1) << to)));
}

// The 4-bit levels of half `half` of 32-value sub-blocks whose r4 nibble runs start at p[q]
// (quarter 4 half + i in q[i]; see r4_nibble_half).
inline void r4_nibble_half16(const uint8_t * const * p, int half, __m512i * q) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const int o = 16 * half;
    const __m512i x = quad16(p[0] + o, p[1] + o, p[2] + o, p[3] + o);
    const __m512i y = quad16(p[0] + 32 + o, p[1] + 32 + o, p[2] + 32 + o, p[3] + 32 + o);
    q[0] = _mm512_and_si512(x, m4);
    q[1] = _mm512_and_si512(y, m4);
    q[2] = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
    q[3] = _mm512_and_si512(_mm512_srli_epi16(y, 4), m4);
}

inline void store16(uint8_t * out, __m512i v) { _mm512_store_si512((void *) out, v); }

// q4_k_r4 / q5_k_r4 coefficients (k4_r4_coefs over four groups).
template <typename Block>
inline void k4_r4_coefs16(const Block * const * blk, int ib, float * scale, float * bias) {
    const int l = 4 * ib, h = (4 * ib) % 16;
    const __m512i lo = quad4_epu8(blk[0]->scales_l + l, blk[1]->scales_l + l, blk[2]->scales_l + l, blk[3]->scales_l + l);
    const __m512i hi = _mm512_srl_epi32(quad4_epu8(blk[0]->scales_h + h, blk[1]->scales_h + h, blk[2]->scales_h + h, blk[3]->scales_h + h),
                                        _mm_cvtsi32_si128(4 * (ib / 4)));
    const __m512i sc = _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xF)),
                                       _mm512_slli_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(3)), 4));
    const __m512i mn = _mm512_or_si512(_mm512_srli_epi32(lo, 4), _mm512_slli_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(0xC)), 2));
    _mm512_storeu_ps(scale, _mm512_mul_ps(fp16x4x4(blk, 0), _mm512_cvtepi32_ps(sc)));
    _mm512_storeu_ps(bias, _mm512_mul_ps(fp16x4x4(blk, 4), _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_setzero_si512(), mn))));
}

// Sub-block j of q4_k_r4 / q5_k_r4: its coefficients, and its 4-bit levels in q[0..7].
template <typename Block>
inline void k4_r4_nibbles16(const Block * const * blk, int j, __m512i * q, float * scale, float * bias) {
    k4_r4_coefs16(blk, j, scale, bias);
    const uint8_t * p[4] = { blk[0]->qs + 64 * j, blk[1]->qs + 64 * j, blk[2]->qs + 64 * j, blk[3]->qs + 64 * j };
    r4_nibble_half16(p, 0, q);
    r4_nibble_half16(p, 1, q + 4);
}

struct grp16_q4_k_r4 : grp_q4_k_r4 {
    static constexpr int kLanes = 16;
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        __m512i q[8];
        k4_r4_nibbles16(blk, j, q, scale, bias);
        for (int k = 0; k < 8; ++k) store16(out + k * vs, q[k]);
    }
};

struct grp16_q5_k_r4 : grp_q5_k_r4 {
    static constexpr int kLanes = 16;
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        __m512i q[8];
        k4_r4_nibbles16(blk, j, q, scale, bias);
        const int o = 16 * j;
        const __m512i h = quad16(blk[0]->qh + o, blk[1]->qh + o, blk[2]->qh + o, blk[3]->qh + o);
        for (int k = 0; k < 8; ++k) store16(out + k * vs, _mm512_or_si512(q[k], move_bits16<1>(h, q5_k_r4_hbit(4 * k), 4)));
    }
};

struct grp16_q6_k_r4 : grp_q6_k_r4 {
    static constexpr int kLanes = 16;
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        const int ib = j / 2, half = j % 2;
        int32_t s[4];
        for (int q = 0; q < 4; ++q) std::memcpy(s + q, blk[q]->scales + 8 * ib + 4 * half, 4);
        const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) s));
        const __m512 v = _mm512_mul_ps(fp16x4x4(blk, 0), _mm512_cvtepi32_ps(sc));
        _mm512_storeu_ps(scale, v);
        _mm512_storeu_ps(bias, _mm512_mul_ps(v, _mm512_set1_ps(-32.0f)));
        const uint8_t * p[4] = { blk[0]->ql + 64 * ib, blk[1]->ql + 64 * ib, blk[2]->ql + 64 * ib, blk[3]->ql + 64 * ib };
        __m512i q[4];
        r4_nibble_half16(p, half, q);
        const int o = 32 * ib + 16 * half;
        const __m512i h = quad16(blk[0]->qh + o, blk[1]->qh + o, blk[2]->qh + o, blk[3]->qh + o);
        for (int i = 0; i < 4; ++i) store16(out + i * vs, _mm512_or_si512(q[i], move_bits16<2>(h, q6_k_r4_hshift(4 * i), 4)));
    }
};

struct grp16_q2_k_r4 : grp_q2_k_r4 {
    static constexpr int kLanes = 16;
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        const int ib = j / 2, half = j % 2;
        const __m512i sm = quad4_epu8(blk[0]->scales + 4 * j, blk[1]->scales + 4 * j, blk[2]->scales + 4 * j, blk[3]->scales + 4 * j);
        const __m512i sc = _mm512_and_si512(sm, _mm512_set1_epi32(0xF));
        const __m512i mn = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_srli_epi32(sm, 4));
        _mm512_storeu_ps(scale, _mm512_mul_ps(fp16x4x4(blk, 0), _mm512_cvtepi32_ps(sc)));
        _mm512_storeu_ps(bias, _mm512_mul_ps(fp16x4x4(blk, 4), _mm512_cvtepi32_ps(mn)));
        const int o = 32 * ib + 16 * half;
        const __m512i x = quad16(blk[0]->qs + o, blk[1]->qs + o, blk[2]->qs + o, blk[3]->qs + o), m3 = _mm512_set1_epi8(3);
        store16(out, _mm512_and_si512(x, m3));
        store16(out + vs, _mm512_and_si512(_mm512_srli_epi16(x, 2), m3));
        store16(out + 2 * vs, _mm512_and_si512(_mm512_srli_epi16(x, 4), m3));
        store16(out + 3 * vs, _mm512_and_si512(_mm512_srli_epi16(x, 6), m3));
    }
};

// After register_r8_gemms: the same layouts through the wide decoders.
inline void register_r16_k_gemms(ggml_cpu_isa isa) {
    auto reg = [isa](ggml_type t, ggml_gemm_t fn) { ggml_cpu_register_gemm(t, isa, GGML_TYPE_Q8_K, fn); };
    reg(GGML_TYPE_Q2_K_R4, gemm_r8<grp16_q2_k_r4, act_q8_K<16>>);
    reg(GGML_TYPE_Q4_K_R4, gemm_r8<grp16_q4_k_r4, act_q8_K<32>>);
    reg(GGML_TYPE_Q5_K_R4, gemm_r8<grp16_q5_k_r4, act_q8_K<32>>);
    reg(GGML_TYPE_Q6_K_R4, gemm_r8<grp16_q6_k_r4, act_q8_K<16>>);
    // q6_K's AVX512 batch kernel reads q8_0 pairs with the scale shared (kSuper = 2)
    register_k_r4_batch_gemms<grp16_q4_k_r4, grp16_q5_k_r4, grp16_q6_k_r4, act_q8_0_halves<true>>(isa);
}

} // namespace kiln_panel
} // namespace
