// AVX512 (BW + VNNI) gemm kernels of q2_K .. q6_K against q8_K activations.
//
// Calls with many activation columns (prompt processing) go to the shared panel gemm (panel.h);
// the kernel below serves token generation and small batches.
//
// Each weight block is decoded once per column tile into registers: four 64-byte vectors of
// unsigned levels u in natural order, four vectors of 16-bit sub-block scales laid out to match
// vpmaddubsw's 16-bit pair sums, and the 16 per-group minimum terms. Then for each of up to 8
// activation columns: vpmaddubsw (u8 x s8 -> s16 pairs, no saturation: u <= 63, |a| <= 127) and
// vpdpwssd (VNNI: s16 x scale -> s32 accumulate) give d*sum(s*u*a) in one int32 vector; the
// minimum / offset term comes from the activation's 16-value sums (bsums). Floats only once
// per block and column.
#include "avx512/register.h"
#include "avx2/scales.h"
#include "cpu-traits.h"
#include "quants/quants-k.h"
#include "panel.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

namespace {

struct decoded {
    __m512i w[4];   // levels of values 64k .. 64k+63
    __m512i s[4];   // 16-bit scale of each maddubs pair: group (64k + 2i) / 16
    __m256i mi;     // per-16-group minimum (or offset * scale) term
    float   d, dm;
};

// S_k from 16 group scales (int16 lanes 0..15 of s16): lane i of S_k is group 4k + i/8.
inline void spread_scales(__m256i s16, decoded & out) {
    const __m512i s = _mm512_zextsi256_si512(s16);
    const __m512i step = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                          1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int k = 0; k < 4; ++k) {
        out.s[k] = _mm512_permutexvar_epi16(_mm512_add_epi16(step, _mm512_set1_epi16((short) (4 * k))), s);
    }
}

// Two copies of 32 bytes, the upper one shifted right by `shift` bits within 16-bit lanes.
inline __m512i pair(__m256i v, int shift) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, shift), 1);
}

inline __m256i load256(const void * p) { return _mm256_loadu_si256((const __m256i *) p); }

// 8 bytes each duplicated -> 16 int16 lanes (q4_K / q5_K scales per 32 values, per 16-group).
inline __m256i widen_dup8(const uint8_t * b) {
    uint64_t v;
    std::memcpy(&v, b, 8);
    const __m128i x = _mm_cvtsi64_si128((long long) v);
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x, x));
}

inline void decode_q2_K(const void * vb, decoded & out) {
    const auto * x = (const block_q2_K *) vb;
    const __m512i three = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
        const __m512i z = pair(load256(x->qs + 32 * h), 2);
        out.w[2 * h]     = _mm512_and_si512(z, three);
        out.w[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(z, 4), three);
    }
    const __m128i sc = _mm_loadu_si128((const __m128i *) x->scales);
    spread_scales(_mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0xF))), out);
    out.mi = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0xF)));
    out.d  = _cvtsh_ss(x->d);
    out.dm = _cvtsh_ss(x->dmin);
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
    const __m128i sc = q3_K_scales_epi8(x->scales);
    const __m256i s16 = _mm256_cvtepi8_epi16(sc);
    spread_scales(s16, out);
    out.mi = _mm256_slli_epi16(s16, 2);
    out.d  = _cvtsh_ss(x->d);
    out.dm = out.d;
}

inline void decode_k4_scales(const uint8_t * packed, decoded & out) {
    uint8_t sc[8], mn[8];
    k4_scales_mins(packed, sc, mn);
    spread_scales(widen_dup8(sc), out);
    out.mi = widen_dup8(mn);
}

inline void decode_q4_K(const void * vb, decoded & out) {
    const auto * x = (const block_q4_K *) vb;
    const __m512i f = _mm512_set1_epi8(0xF);
    for (int k = 0; k < 4; ++k) out.w[k] = _mm512_and_si512(pair(load256(x->qs + 32 * k), 4), f);
    decode_k4_scales(x->scales, out);
    out.d  = _cvtsh_ss(x->d);
    out.dm = _cvtsh_ss(x->dmin);
}

inline void decode_q5_K(const void * vb, decoded & out) {
    const auto * x = (const block_q5_K *) vb;
    const __m512i f = _mm512_set1_epi8(0xF);
    const __m512i sixteen = _mm512_set1_epi8(16);
    const __m512i qh = pair(load256(x->qh), 1);
    for (int k = 0; k < 4; ++k) {
        const __m512i low = _mm512_and_si512(pair(load256(x->qs + 32 * k), 4), f);
        const __mmask64 high = _mm512_test_epi8_mask(qh, _mm512_set1_epi8((char) (1 << (2 * k))));
        out.w[k] = _mm512_mask_add_epi8(low, high, low, sixteen);
    }
    decode_k4_scales(x->scales, out);
    out.d  = _cvtsh_ss(x->d);
    out.dm = _cvtsh_ss(x->dmin);
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
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->scales));
    spread_scales(s16, out);
    out.mi = _mm256_slli_epi16(s16, 5);
    out.d  = _cvtsh_ss(x->d);
    out.dm = out.d;
}

using decode_fn = void (*)(const void *, decoded &);

// Per activation block of a column tile, computed once and shared by all rows: the group sums
// as floats times the block scale (for the minimum term) and the scale itself.
struct column_block {
    __m512 bsums_scaled;
    float  d;
};

inline void prepare_columns(int64_t nb, int C, const char * x, size_t x_stride, column_block * out) {
    for (int64_t b = 0; b < nb; ++b) {
        for (int c = 0; c < C; ++c) {
            const block_q8_K * a = (const block_q8_K *) (x + c * x_stride) + b;
            const __m512 bs = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(load256(a->bsums)));
            out[b * C + c].bsums_scaled = _mm512_mul_ps(bs, _mm512_set1_ps(a->d));
            out[b * C + c].d = a->d;
        }
    }
}

// One weight row times C activation columns: per block and column four vpmaddubsw + vpdpwssd,
// one conversion and two FMAs (block scale, minimum term).
// The rounding is per lane on purpose (sum * d, then * a.d; each group's mi * dm against its
// bsum * a.d): scaling whole blocks by the rounded d * a.d with the minimum term as pairs in 8 of
// the 16 lanes (0d3771b) ran 4% faster in L2 but rounded 4-5x worse on one-signed activations,
// since the two terms then cancel only in the final horizontal sum
// (QuantSimd.SmallBatchKQuantsRoundLikeTheScalarOrder).
template <decode_fn Decode, size_t BlockBytes, int C>
inline void row_times_columns(int64_t nb, const char * wrow, const char * x, size_t x_stride,
                              const column_block * cols, float * dst, size_t dst_stride) {
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    decoded blk;
    for (int64_t b = 0; b < nb; ++b) {
        Decode(wrow + b * BlockBytes, blk);
        const __m512 d = _mm512_set1_ps(blk.d);
        const __m512 fm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(blk.mi)), _mm512_set1_ps(blk.dm));
        for (int c = 0; c < C; ++c) {
            const block_q8_K * a = (const block_q8_K *) (x + c * x_stride) + b;
            const column_block & cb = cols[b * C + c];
            __m512i sum = _mm512_setzero_si512();
            for (int k = 0; k < 4; ++k) {
                const __m512i prod = _mm512_maddubs_epi16(blk.w[k], _mm512_loadu_si512(a->qs + 64 * k));
                sum = _mm512_dpwssd_epi32(sum, prod, blk.s[k]);
            }
            const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), d);
            acc[c] = _mm512_fmadd_ps(t, _mm512_set1_ps(cb.d), acc[c]);
            acc[c] = _mm512_fnmadd_ps(fm, cb.bsums_scaled, acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) dst[c * dst_stride] = _mm512_reduce_add_ps(acc[c]);
}

template <decode_fn Decode, size_t BlockBytes, int C>
void tile_rows(int64_t nb, const void * w, size_t w_stride, const char * xc, size_t x_stride, float * dst,
               size_t dst_stride, int nr) {
    thread_local std::vector<column_block> cols;
    if (cols.size() < (size_t) (nb * C)) cols.resize(nb * C);
    prepare_columns(nb, C, xc, x_stride, cols.data());
    for (int r = 0; r < nr; ++r) {
        row_times_columns<Decode, BlockBytes, C>(nb, (const char *) w + r * w_stride, xc, x_stride, cols.data(),
                                                 dst + r, dst_stride);
    }
}

// Batches go through the shared panel gemm (panel.h), with the coefficients of panel-common.h.
// Off: the level offset of a format whose bias is only that (-Off * scale: q3_K, q6_K), which the
// panel folds away (as it does for their r4 twins); 0 for the formats with minimums.
template <decode_fn Decode, size_t BlockBytes, int S, void (*Coef)(const void *, float *, float *), int Off>
struct panel_decoder {
    static constexpr int kSub = S, kChunk = QK_K;
    static constexpr int kLevelOffset = Off;
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        const uint8_t * b = row + i * BlockBytes;
        decoded blk;
        Decode(b, blk);
        for (int k = 0; k < 4; ++k) v[k] = blk.w[k];
        Coef(b, scale, bias);
    }
};

// Column tiles outside, rows inside: a tile's activations stay in L1 while the rows (a gemm
// call's share of the weights) stream past them.
template <decode_fn Decode, size_t BlockBytes, int S = 32, void (*Coef)(const void *, float *, float *) = nullptr, int Off = 0>
void gemm_k(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
            size_t dst_stride, int nr, int nc) {
    if constexpr (Coef != nullptr) {
        if (nc >= kiln_panel::kMinCols) {
            kiln_panel::gemm<panel_decoder<Decode, BlockBytes, S, Coef, Off>, kiln_panel::act_q8_K<S>>(
                n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
            return;
        }
    }
    const int64_t nb = n / QK_K;
    constexpr int tile = 8;
    int c = 0;
    for (; c + tile <= nc; c += tile) {
        tile_rows<Decode, BlockBytes, tile>(nb, w, w_stride, (const char *) x + c * x_stride, x_stride,
                                            dst + c * dst_stride, dst_stride, nr);
    }
    const char * xc = (const char *) x + c * x_stride;
    float * dc = dst + c * dst_stride;
    switch (nc - c) {
        case 0: break;
        case 1: tile_rows<Decode, BlockBytes, 1>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
        case 2: tile_rows<Decode, BlockBytes, 2>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
        case 3: tile_rows<Decode, BlockBytes, 3>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
        case 4: tile_rows<Decode, BlockBytes, 4>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
        case 5: tile_rows<Decode, BlockBytes, 5>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
        case 6: tile_rows<Decode, BlockBytes, 6>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
        default: tile_rows<Decode, BlockBytes, 7>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
    }
}

// Batch products with q8_0 activations (one scale per 32 values, cpu-traits.h's batch pair):
// always the panel, whatever the column count (an expert of a batch may get a few columns).
// 32-value sub-blocks take the per-sub-block scale path (as q4_1); 16-value ones read a q8_0
// block as two sub-blocks sharing its scale.
template <decode_fn Decode, size_t BlockBytes, int S, void (*Coef)(const void *, float *, float *), int Off>
void gemm_k_q8_0(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr, int nc) {
    using act = std::conditional_t<S == 32, kiln_panel::act_q8_32<false>, kiln_panel::act_q8_0_halves<true>>;
    kiln_panel::gemm<panel_decoder<Decode, BlockBytes, S, Coef, Off>, act>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
}

// The kernels of a type: q8_K activations (token generation, small batches) and, kBatch, q8_0
// for batches (quants/quants-k.cpp's scalar reference says which types and why). Off: as
// panel_decoder's, for both.
template <decode_fn Decode, size_t BlockBytes, int S, void (*Coef)(const void *, float *, float *), bool kBatch, int Off = 0>
void register_k_type(ggml_type t) {
    ggml_cpu_register_gemm(t, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_K, gemm_k<Decode, BlockBytes, S, Coef, Off>);
    if constexpr (kBatch) ggml_cpu_register_batch_gemm(t, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, gemm_k_q8_0<Decode, BlockBytes, S, Coef, Off>);
}

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_k_avx512() {
    using namespace kiln_panel;
    register_k_type<decode_q2_K, sizeof(block_q2_K), 16, coef_q2_K, false>(GGML_TYPE_Q2_K);
    register_k_type<decode_q3_K, sizeof(block_q3_K), 16, coef_q3_K, false, 4>(GGML_TYPE_Q3_K);
    register_k_type<decode_q4_K, sizeof(block_q4_K), 32, coef_k4<block_q4_K>, true>(GGML_TYPE_Q4_K);
    register_k_type<decode_q5_K, sizeof(block_q5_K), 32, coef_k4<block_q5_K>, true>(GGML_TYPE_Q5_K);
    register_k_type<decode_q6_K, sizeof(block_q6_K), 16, coef_q6_K, true, 32>(GGML_TYPE_Q6_K);
}
