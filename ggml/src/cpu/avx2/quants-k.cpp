// AVX2 gemm kernels of q2_K .. q6_K against q8_K activations (the fallback below AVX512).
//
// Calls with many activation columns (prompt processing) go to the panel gemm (panel.h); the
// kernel below serves token generation and small batches.
//
// Per weight block and tile of up to 4 activation columns, eight parts of 32 values: the part's
// unsigned levels u in natural order are decoded where they are used and multiplied with every
// column of the tile, with the 16-bit group scales laid out to match vpmaddubsw's pair sums;
// the 16 minimum terms (quants-k.h's common form) come once per block. Every type decodes with
// shifts and masks straight from the block (token generation reads every weight once, so the
// decode is the kernel's cost).
// Per column: vpmaddubsw (u8 x s8 -> s16 pairs; no saturation since u <= 63 and |a| <= 127),
// vpmaddwd with the scales, int32 adds; the minimum term from the activation's bsums. Floats
// once per block and column.
#include "avx2/register.h"
#include "cpu-traits.h"
#include "quants/quants-k.h"
#include "panel.h"
#include "scales.h"
#include "simd.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

namespace {

// A block as the kernels read it: begin() unpacks what is per block (the scales, the 16 minimum
// terms, d and dm); level(k) gives the unsigned levels u of values 32k .. 32k+31. The
// token-generation loop asks for each part where it multiplies it, so no decoded block is kept
// (a whole one is 17 ymm, more than AVX2 has: it went through the stack).
//
// What every column reads per block is stored once (d and dm as floats, and q4_K / q5_K's part
// scales) and read back with broadcasts from memory, which are plain loads: spreading them in
// registers took a shuffle each, and the conversions of d and dm one at a time took six more
// instructions, on the same three vector ports as the products. The stores are read back
// through pointers the compiler cannot follow (launder(), scales.h).

// d and dm (dm = d for the offset types) from the two fp16 at h: one conversion.
struct block_floats {
    alignas(16) float ddm[4];
    const float * dd;   // ddm, laundered: dd[0] = d, dd[1] = dm
    void set(__m128 v) {
        _mm_store_ps(ddm, v);
        dd = launder(ddm);
    }
};

struct block_state : block_floats {
    scale_halves sc;   // int16 scale of each maddubs pair, as scale_pair_of(sc, k) spreads them
    __m256i      mi;   // per-16-group minimum (or offset * scale) term
};

inline __m256i load256(const uint8_t * p) { return _mm256_loadu_si256((const __m256i *) p); }

// Two adjacent fp16 (d, dmin of q2_K, q4_K, q5_K) as floats in lanes 0 and 1.
inline __m128 fp16_pair(const ggml_fp16_t * h) {
    uint32_t v;
    std::memcpy(&v, h, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int) v));
}

// 8 bytes, each repeated for the two 16-value groups of its 32-value sub-block -> 16 int16.
inline __m256i sub_block_bytes_to_groups(uint64_t b8) {
    const __m128i v = _mm_cvtsi64_si128((long long) b8);
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, v));
}

// The 16-group types (q2_K, q3_K, q6_K): part k's scales from the two halves, one byte shuffle.
inline __m256i part_scales(const block_state & st, int k) { return scale_pair_of(st.sc, k); }

// q4_K / q5_K: one scale per 32-value part, so part k's scale vector is a single int16 in every
// lane: kept as a 32-bit word holding it twice, one vpbroadcastd from memory per part.
struct k4_state : block_floats {
    alignas(32) int32_t sc32[8];
    const int32_t * sc;   // sc32, laundered
    __m256i mi;           // per-16-group minimum
};

inline __m256i part_scales(const k4_state & st, int k) { return _mm256_set1_epi32(st.sc[k]); }

template <typename B>
inline void k4_begin(const B * x, k4_state & st) {
    uint64_t sc, mn;
    k4_scales_mins_u64(x->scales, sc, mn);
    const __m256i s32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long) sc));
    _mm256_store_si256((__m256i *) st.sc32, words_of_int16(s32));
    st.sc = launder(st.sc32);
    st.mi = sub_block_bytes_to_groups(mn);
    st.set(fp16_pair(&x->d));
}

// q3_K / q6_K: 16 signed int8 group scales and a fixed offset 2^shift subtracted from every
// level, folded into the minimum term as mi = scale << shift with dm = d.
inline void offset_begin(__m128i scales8, int shift, ggml_fp16_t d, block_state & st) {
    const __m256i s16 = _mm256_cvtepi8_epi16(scales8);
    st.sc = split_scale_halves(s16);
    st.mi = _mm256_sll_epi16(s16, _mm_cvtsi32_si128(shift));
    st.set(_mm_cvtph_ps(_mm_set1_epi16((short) d)));
}

// q4_K: 64 values per 32 bytes of qs, low nibbles first.
struct parts_q4_K {
    using state = k4_state;
    static void begin(const void * vb, state & st) { k4_begin((const block_q4_K *) vb, st); }
    static __m256i level(const void * vb, int k, const state &) {
        const __m256i q = load256(((const block_q4_K *) vb)->qs + 32 * (k / 2));
        return _mm256_and_si256(k & 1 ? _mm256_srli_epi16(q, 4) : q, _mm256_set1_epi8(0xF));
    }
};

// Bit j of every byte of v moved to bit t (others cleared). The 16-bit shifts stay inside each
// byte for the bit kept, so the mask drops whatever crossed; j and t are constants after unrolling.
inline __m256i bit_to(__m256i v, int j, int t) {
    const __m256i moved = j <= t ? _mm256_slli_epi16(v, t - j) : _mm256_srli_epi16(v, j - t);
    return _mm256_and_si256(moved, _mm256_set1_epi8((char) (1 << t)));
}

// q5_K: as q4_K plus the fifth bit of value 32k + l in bit k of qh[l].
struct parts_q5_K {
    using state = k4_state;
    static void begin(const void * vb, state & st) { k4_begin((const block_q5_K *) vb, st); }
    static __m256i level(const void * vb, int k, const state &) {
        const auto * x = (const block_q5_K *) vb;
        const __m256i q = load256(x->qs + 32 * (k / 2));
        const __m256i low = _mm256_and_si256(k & 1 ? _mm256_srli_epi16(q, 4) : q, _mm256_set1_epi8(0xF));
        return _mm256_or_si256(low, bit_to(load256(x->qh), k, 4));
    }
};

// q6_K, per 128 values (half h = k / 4): ql bytes 0-31 give values 0-31 (low nibbles) and 64-95
// (high), bytes 32-63 give 32-63 and 96-127; bits 2j..2j+1 of qh[l] are the top two bits of
// value 32j + l. The offset 32 is folded into mi = 32 * scale with dm = d.
struct parts_q6_K {
    using state = block_state;
    static constexpr int kOffset = 32;
    static void begin(const void * vb, state & st) {
        const auto * x = (const block_q6_K *) vb;
        offset_begin(_mm_loadu_si128((const __m128i *) x->scales), 5, x->d, st);
    }
    static __m256i level(const void * vb, int k, const state &) {
        const auto * x = (const block_q6_K *) vb;
        const int h = k / 4, j = k % 4;
        const __m256i m4 = _mm256_set1_epi8(0xF), top = _mm256_set1_epi8(0x30);
        const __m256i q = load256(x->ql + 64 * h + 32 * (j & 1));
        const __m256i qh = load256(x->qh + 32 * h);
        const __m256i low = _mm256_and_si256(j < 2 ? q : _mm256_srli_epi16(q, 4), m4);
        // the two qh bits of each quarter moved to bits 4-5 (shifts cross bytes; the mask drops that)
        const __m256i high = j == 0 ? _mm256_slli_epi16(qh, 4) : j == 1 ? _mm256_slli_epi16(qh, 2)
                           : j == 2 ? qh : _mm256_srli_epi16(qh, 2);
        return _mm256_or_si256(low, _mm256_and_si256(high, top));
    }
};

// q2_K / q3_K, per 128 values (half h = k / 4): bits 2j..2j+1 of qs[32h + l] are the low two
// bits of value 128h + 32j + l (j = k % 4). The 16-bit shift may pull bits of the next byte into
// the top of this one; the mask keeps bits 0-1 only, which came from this byte.
inline __m256i two_bits(const uint8_t * qs, int k) {
    const __m256i q = load256(qs + 32 * (k / 4));
    return _mm256_and_si256(_mm256_srli_epi16(q, 2 * (k % 4)), _mm256_set1_epi8(3));
}

// q2_K: 2-bit levels; scales byte g holds group g's scale (low nibble) and min (high nibble).
struct parts_q2_K {
    using state = block_state;
    static void begin(const void * vb, state & st) {
        const auto * x = (const block_q2_K *) vb;
        const __m128i sc = _mm_loadu_si128((const __m128i *) x->scales);
        const __m128i f = _mm_set1_epi8(0xF);
        st.sc = split_scale_halves(_mm256_cvtepu8_epi16(_mm_and_si128(sc, f)));
        st.mi = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), f));
        st.set(fp16_pair(&x->d));
    }
    static __m256i level(const void * vb, int k, const state &) { return two_bits(((const block_q2_K *) vb)->qs, k); }
};

// q3_K: as q2_K plus a third bit, bit k of hmask[l] for value 32k + l; the stored value is
// level - 4 when that bit is clear, so u = low + 4 * bit and the offset 4 is folded into
// mi = 4 * scale with dm = d.
struct parts_q3_K {
    using state = block_state;
    static constexpr int kOffset = 4;
    static void begin(const void * vb, state & st) {
        const auto * x = (const block_q3_K *) vb;
        offset_begin(q3_K_scales_epi8(x->scales), 2, x->d, st);
    }
    static __m256i level(const void * vb, int k, const state &) {
        const auto * x = (const block_q3_K *) vb;
        return _mm256_or_si256(two_bits(x->qs, k), bit_to(load256(x->hmask), k, 2));
    }
};

// Whether a type's minimum term is only its level offset times the scales (q3_K, q6_K: dm = d).
template <typename Parts, typename = void> constexpr bool kIntOffset = false;
template <typename Parts> constexpr bool kIntOffset<Parts, std::void_t<decltype(Parts::kOffset)>> = true;

// One weight block times C activation columns, added to acc. Per part k: the levels once, then
// per column vpmaddubsw and vpmaddwd with the part's scales into an int32 sum; per block and
// column two FMAs (the scaled sum, the minimum term from the activation's bsums).
template <typename Parts, int C>
inline void block_times_columns(const char * wb, const char * x, size_t x_stride, int64_t b, __m256 * acc) {
    typename Parts::state st;
    Parts::begin(wb, st);
    __m256i sum[C];
    for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
    auto part_times_column = [&](int c, int k, __m256i w, __m256i s) {
        const block_q8_K * a = (const block_q8_K *) (x + c * x_stride) + b;
        const __m256i prod = _mm256_maddubs_epi16(w, _mm256_loadu_si256((const __m256i *) (a->qs + 32 * k)));
        sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(prod, s));
    };
    if constexpr (C <= 2) {
        for (int k = 0; k < 8; ++k) {
            const __m256i w = Parts::level(wb, k, st), s = part_scales(st, k);
            for (int c = 0; c < C; ++c) part_times_column(c, k, w, s);
        }
    } else {
        // three or four columns: their sums and accumulators leave too few registers for
        // the decode, so the parts are decoded first (to the stack) and read per column
        __m256i w[8], s[8];
        for (int k = 0; k < 8; ++k) {
            w[k] = Parts::level(wb, k, st);
            s[k] = part_scales(st, k);
        }
        for (int c = 0; c < C; ++c)
            for (int k = 0; k < 8; ++k) part_times_column(c, k, w[k], s[k]);
    }
    const __m256 d = _mm256_set1_ps(st.dd[0]), dm = _mm256_set1_ps(st.dd[1]);
    for (int c = 0; c < C; ++c) {
        const block_q8_K * a = (const block_q8_K *) (x + c * x_stride) + b;
        const __m256 ad = _mm256_set1_ps(a->d);
        const __m256i mins = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) a->bsums), st.mi);
        if constexpr (kIntOffset<Parts>) {
            // an offset's term has the block's d: subtracted in int32 (exact, |sums| < 2^26)
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum[c], mins)), _mm256_mul_ps(d, ad), acc[c]);
        } else {
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[c]), _mm256_mul_ps(d, ad), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dm, ad), acc[c]);
        }
    }
}

// One weight row times C activation columns.
template <typename Parts, size_t BlockBytes, int C>
inline void row_times_columns(int64_t nb, const char * wrow, const char * x, size_t x_stride, float * dst,
                              size_t dst_stride) {
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) block_times_columns<Parts, C>(wrow + b * BlockBytes, x, x_stride, b, acc);
    for (int c = 0; c < C; ++c) dst[c * dst_stride] = hsum8_ps(acc[c]);
}

// Batches go through the panel gemm (panel.h): the levels of the register decoders above, the
// sub-block coefficients of panel-common.h.
template <typename Parts, size_t BlockBytes, int S, int MaxLevel, void (*Coef)(const void *, float *, float *)>
struct panel_decoder {
    static constexpr int kSub = S, kChunk = QK_K, kMaxLevel = MaxLevel;
    static constexpr bool kBias = true;
    static void decode(const uint8_t * row, int64_t i, __m256i * v, float * scale, float * bias) {
        const uint8_t * b = row + i * BlockBytes;
        typename Parts::state st;
        Parts::begin(b, st);
        for (int k = 0; k < 8; ++k) v[k] = Parts::level(b, k, st);
        Coef(b, scale, bias);
    }
};

// q6_K batches (q8_0 activations) keep the block's int8 scales as integers (kScales16,
// avx2/panel.h): records of 32 values, the offset 32 taken from the activations' sums per 16.
struct panel_q6_K_scaled {
    static constexpr int kSub = 32, kChunk = QK_K, kMaxLevel = 63, kLevelOffset = 32;
    static constexpr bool kBias = false, kScales16 = true;
    static void decode_scaled(const uint8_t * row, int64_t i, __m256i * v, __m256i & scales, float & d) {
        const auto * x = (const block_q6_K *) (row + i * sizeof(block_q6_K));
        block_state st;
        for (int k = 0; k < 8; ++k) v[k] = parts_q6_K::level(x, k, st);
        scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->scales));
        d = _cvtsh_ss(x->d);
    }
};

template <typename Parts, size_t BlockBytes, int S, int MaxLevel, void (*Coef)(const void *, float *, float *)>
void gemm_k(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
            size_t dst_stride, int nr, int nc) {
    if (nc >= kiln_panel::kMinCols) {
        kiln_panel::gemm<panel_decoder<Parts, BlockBytes, S, MaxLevel, Coef>, kiln_panel::act_q8_K<S>>(
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
            row_times_columns<Parts, BlockBytes, tile>(nb, (const char *) w + r * w_stride, xc, x_stride,
                                                    dst + c * dst_stride + r, dst_stride);
        }
    }
    if (c == nc) return;
    const char * xc = (const char *) x + c * x_stride;
    for (int r = 0; r < nr; ++r) {
        const char * wrow = (const char *) w + r * w_stride;
        float * dc = dst + c * dst_stride + r;
        switch (nc - c) {
            case 1: row_times_columns<Parts, BlockBytes, 1>(nb, wrow, xc, x_stride, dc, dst_stride); break;
            case 2: row_times_columns<Parts, BlockBytes, 2>(nb, wrow, xc, x_stride, dc, dst_stride); break;
            default: row_times_columns<Parts, BlockBytes, 3>(nb, wrow, xc, x_stride, dc, dst_stride); break;
        }
    }
}

// Batch products with q8_0 activations (one scale per 32 values, cpu-traits.h's batch pair):
// always the panel, whatever the column count (an expert of a batch may get a few columns).
// 32-value sub-blocks take the per-sub-block scale path (as q4_1); 16-value ones read a q8_0
// block as two sub-blocks sharing its scale.
template <typename Parts, size_t BlockBytes, int S, int MaxLevel, void (*Coef)(const void *, float *, float *)>
void gemm_k_q8_0(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr, int nc) {
    if constexpr (std::is_same_v<Parts, parts_q6_K>) {
        kiln_panel::gemm<panel_q6_K_scaled, kiln_panel::act_q8_0_half_sums>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    } else {
        using act = std::conditional_t<S == 32, kiln_panel::act_q8_32<false>, kiln_panel::act_q8_0_halves<false>>;
        kiln_panel::gemm<panel_decoder<Parts, BlockBytes, S, MaxLevel, Coef>, act>(n, w, w_stride, x, x_stride, dst,
                                                                                  dst_stride, nr, nc);
    }
}

// The kernels of a type: q8_K activations (token generation, small batches) and, kBatch, q8_0
// for batches (quants/quants-k.cpp's scalar reference says which types and why).
template <typename Parts, size_t BlockBytes, int S, int MaxLevel, void (*Coef)(const void *, float *, float *), bool kBatch>
void register_k_type(ggml_type t) {
    ggml_cpu_register_gemm(t, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_k<Parts, BlockBytes, S, MaxLevel, Coef>);
    if constexpr (kBatch) {
        ggml_cpu_register_batch_gemm(t, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm_k_q8_0<Parts, BlockBytes, S, MaxLevel, Coef>);
    }
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_k_avx2() {
    using namespace kiln_panel;
    register_k_type<parts_q2_K, sizeof(block_q2_K), 16, 3, coef_q2_K, false>(GGML_TYPE_Q2_K);
    register_k_type<parts_q3_K, sizeof(block_q3_K), 16, 7, coef_q3_K, false>(GGML_TYPE_Q3_K);
    register_k_type<parts_q4_K, sizeof(block_q4_K), 32, 15, coef_k4<block_q4_K>, true>(GGML_TYPE_Q4_K);
    register_k_type<parts_q5_K, sizeof(block_q5_K), 32, 31, coef_k4<block_q5_K>, true>(GGML_TYPE_Q5_K);
    register_k_type<parts_q6_K, sizeof(block_q6_K), 16, 63, coef_q6_K, true>(GGML_TYPE_Q6_K);
}
