// AVX2 gemm kernels of q2_K .. q6_K against q8_K activations (the fallback below AVX512).
//
// Calls with many activation columns (prompt processing) go to the panel gemm (panel.h); the
// kernel below serves token generation and small batches.
//
// A weight block is decoded once per tile of up to 4 activation columns into registers: eight
// vectors of 32 unsigned levels u in natural order, eight vectors of 16-bit group scales laid
// out to match vpmaddubsw's pair sums, and the 16 minimum terms (quants-k.h's common form).
// q4_K, q5_K and q6_K decode with shifts and masks straight from the block (token generation
// reads every weight once, so the decode is the kernel's cost); q2_K and q3_K go through the
// scalar common-form decoder. Per column: vpmaddubsw (u8 x s8 -> s16 pairs; no saturation
// since u <= 63 and |a| <= 127), vpmaddwd with the scales, int32 adds; the minimum term from
// the activation's bsums. Floats once per block and column.
#include "avx2/register.h"
#include "cpu-traits.h"
#include "quants/quants-k.h"
#include "panel.h"
#include "scales.h"

#include <immintrin.h>

namespace {

struct decoded {
    __m256i w[8];   // levels of values 32k .. 32k+31
    __m256i s[8];   // int16 scale of each maddubs pair: lanes 0-7 group 2k, lanes 8-15 group 2k+1
    __m256i mi;     // per-16-group minimum (or offset * scale) term
    float   d, dm;
};

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline void spread_scales(__m256i s16, decoded & out) { spread_scale_pairs(s16, out.s); }

// 8 bytes, each repeated for the two 16-value groups of its 32-value sub-block -> 16 int16.
inline __m256i sub_block_bytes_to_groups(const uint8_t * b8) {
    const __m128i v = _mm_loadl_epi64((const __m128i *) b8);
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, v));
}

inline void q4_K_scales(const uint8_t * packed, decoded & out) {
    alignas(8) uint8_t sc[8], mn[8];
    k4_scales_mins(packed, sc, mn);
    spread_scales(sub_block_bytes_to_groups(sc), out);
    out.mi = sub_block_bytes_to_groups(mn);
}

// q4_K: 64 values per 32 bytes of qs, low nibbles first.
inline void decode_q4_K(const void * vb, decoded & out) {
    const auto * x = (const block_q4_K *) vb;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int c = 0; c < 4; ++c) {
        const __m256i q = _mm256_loadu_si256((const __m256i *) (x->qs + 32 * c));
        out.w[2 * c] = _mm256_and_si256(q, m4);
        out.w[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
    q4_K_scales(x->scales, out);
    out.d = _cvtsh_ss(x->d);
    out.dm = _cvtsh_ss(x->dmin);
}

// Bit j of every byte of v moved to bit 4 (others cleared). The 16-bit shifts stay inside each
// byte for the bit kept, so the mask drops whatever crossed; j is a constant after unrolling.
inline __m256i bit_to_16(__m256i v, int j) {
    const __m256i moved = j <= 4 ? _mm256_slli_epi16(v, 4 - j) : _mm256_srli_epi16(v, j - 4);
    return _mm256_and_si256(moved, _mm256_set1_epi8(0x10));
}

// q5_K: as q4_K plus the fifth bit of value 32k + l in bit k of qh[l].
inline void decode_q5_K(const void * vb, decoded & out) {
    const auto * x = (const block_q5_K *) vb;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i qh = _mm256_loadu_si256((const __m256i *) x->qh);
    for (int c = 0; c < 4; ++c) {
        const __m256i q = _mm256_loadu_si256((const __m256i *) (x->qs + 32 * c));
        for (int h = 0; h < 2; ++h) {
            const __m256i low = _mm256_and_si256(h ? _mm256_srli_epi16(q, 4) : q, m4);
            out.w[2 * c + h] = _mm256_or_si256(low, bit_to_16(qh, 2 * c + h));
        }
    }
    q4_K_scales(x->scales, out);
    out.d = _cvtsh_ss(x->d);
    out.dm = _cvtsh_ss(x->dmin);
}

// q6_K, per 128 values (half): ql bytes 0-31 give values 0-31 (low nibbles) and 64-95 (high),
// bytes 32-63 give 32-63 and 96-127; bits 2j..2j+1 of qh[l] are the top two bits of value
// 32j + l. The offset 32 is folded into mi = 32 * scale with dm = d.
inline void decode_q6_K(const void * vb, decoded & out) {
    const auto * x = (const block_q6_K *) vb;
    const __m256i m4 = _mm256_set1_epi8(0xF), top = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
        const __m256i a = _mm256_loadu_si256((const __m256i *) (x->ql + 64 * h));
        const __m256i b = _mm256_loadu_si256((const __m256i *) (x->ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *) (x->qh + 32 * h));
        // the two qh bits of each quarter moved to bits 4-5 (shifts cross bytes; the mask drops that)
        out.w[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top));
        out.w[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top));
        out.w[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(qh, top));
        out.w[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), top));
    }
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->scales));
    spread_scales(s16, out);
    out.mi = _mm256_slli_epi16(s16, 5);
    out.d = _cvtsh_ss(x->d);
    out.dm = out.d;
}

// q2_K / q3_K: the scalar common-form decoder, then into registers.
template <void (*Scalar)(const void *, k_block_decoded &)>
inline void decode_via_common(const void * vb, decoded & out) {
    k_block_decoded blk;
    Scalar(vb, blk);
    for (int k = 0; k < 8; ++k) out.w[k] = _mm256_load_si256((const __m256i *) (blk.u + 32 * k));
    spread_scales(_mm256_loadu_si256((const __m256i *) blk.s), out);
    out.mi = _mm256_loadu_si256((const __m256i *) blk.mi);
    out.d = blk.d;
    out.dm = blk.dm;
}

using decode_fn = void (*)(const void *, decoded &);

template <decode_fn Decode, size_t BlockBytes, int C>
inline void row_times_columns(int64_t nb, const char * wrow, const char * x, size_t x_stride, float * dst,
                              size_t dst_stride) {
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    decoded e;
    for (int64_t b = 0; b < nb; ++b) {
        Decode(wrow + b * BlockBytes, e);
        for (int c = 0; c < C; ++c) {
            const block_q8_K * a = (const block_q8_K *) (x + c * x_stride) + b;
            __m256i sum = _mm256_setzero_si256();
            for (int k = 0; k < 8; ++k) {
                const __m256i prod = _mm256_maddubs_epi16(e.w[k], _mm256_loadu_si256((const __m256i *) (a->qs + 32 * k)));
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(prod, e.s[k]));
            }
            const __m256i mins = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) a->bsums), e.mi);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(e.d * a->d), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(e.dm * a->d), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) dst[c * dst_stride] = hsum(acc[c]);
}

// Batches go through the panel gemm (panel.h): the levels of the register decoders above, the
// sub-block coefficients of panel-common.h.
template <decode_fn Decode, size_t BlockBytes, int S, int MaxLevel, void (*Coef)(const void *, float *, float *)>
struct panel_decoder {
    static constexpr int kSub = S, kChunk = QK_K, kMaxLevel = MaxLevel;
    static constexpr bool kBias = true;
    static void decode(const uint8_t * row, int64_t i, __m256i * v, float * scale, float * bias) {
        const uint8_t * b = row + i * BlockBytes;
        decoded blk;
        Decode(b, blk);
        for (int k = 0; k < 8; ++k) v[k] = blk.w[k];
        Coef(b, scale, bias);
    }
};

template <decode_fn Decode, size_t BlockBytes, int S, int MaxLevel, void (*Coef)(const void *, float *, float *)>
void gemm_k(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
            size_t dst_stride, int nr, int nc) {
    if (nc >= kiln_panel::kMinCols) {
        kiln_panel::gemm<panel_decoder<Decode, BlockBytes, S, MaxLevel, Coef>, kiln_panel::act_q8_K<S>>(
            n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    const int64_t nb = n / QK_K;
    constexpr int tile = 4;
    // Column tiles outside, rows inside: a tile's activations stay in L1 while the rows (a
    // gemm call's share of the weights) stream past them.
    int c = 0;
    for (; c + tile <= nc; c += tile) {
        const char * xc = (const char *) x + c * x_stride;
        for (int r = 0; r < nr; ++r) {
            row_times_columns<Decode, BlockBytes, tile>(nb, (const char *) w + r * w_stride, xc, x_stride,
                                                    dst + c * dst_stride + r, dst_stride);
        }
    }
    if (c == nc) return;
    const char * xc = (const char *) x + c * x_stride;
    for (int r = 0; r < nr; ++r) {
        const char * wrow = (const char *) w + r * w_stride;
        float * dc = dst + c * dst_stride + r;
        switch (nc - c) {
            case 1: row_times_columns<Decode, BlockBytes, 1>(nb, wrow, xc, x_stride, dc, dst_stride); break;
            case 2: row_times_columns<Decode, BlockBytes, 2>(nb, wrow, xc, x_stride, dc, dst_stride); break;
            default: row_times_columns<Decode, BlockBytes, 3>(nb, wrow, xc, x_stride, dc, dst_stride); break;
        }
    }
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_k_avx2() {
    using namespace kiln_panel;
    ggml_cpu_register_gemm(GGML_TYPE_Q2_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K,
                           gemm_k<decode_via_common<k_decode_q2_K>, sizeof(block_q2_K), 16, 3, coef_q2_K>);
    ggml_cpu_register_gemm(GGML_TYPE_Q3_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K,
                           gemm_k<decode_via_common<k_decode_q3_K>, sizeof(block_q3_K), 16, 7, coef_q3_K>);
    ggml_cpu_register_gemm(GGML_TYPE_Q4_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K,
                           gemm_k<decode_q4_K, sizeof(block_q4_K), 32, 15, coef_k4<block_q4_K>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K,
                           gemm_k<decode_q5_K, sizeof(block_q5_K), 32, 31, coef_k4<block_q5_K>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q6_K, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K,
                           gemm_k<decode_q6_K, sizeof(block_q6_K), 16, 63, coef_q6_K>);
}
