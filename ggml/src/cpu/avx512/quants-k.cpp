// AVX512 (BW + VNNI) gemm kernels of q2_K .. q6_K against q8_K activations.
//
// Calls with many activation columns (prompt processing) go to the shared panel gemm (panel.h);
// token generation and small batches to the kernel of avx512/gemv-k.h, with the decoders below.
#include "avx512/register.h"
#include "avx2/scales.h"
#include "cpu-traits.h"
#include "quants/quants-k.h"
#include "panel.h"
#include "avx512/gemv-k.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

namespace {

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
    const __m256i s16 = _mm256_cvtepi8_epi16(q3_K_scales_epi8(x->scales));
    pack_scales_natural(s16, out);
    out.soff = _mm512_zextsi256_si512(_mm256_slli_epi16(s16, 2));   // the offset 4 times the scale
    out.d  = _cvtsh_ss(x->d);
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
    scales_q6_K(x, out);
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
    gemv_k_columns<Tg>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
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
