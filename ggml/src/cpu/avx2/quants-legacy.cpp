// AVX2 gemm kernels of the 32-value block formats against q8_0 / q8_1 activations:
// q4_0, q4_1, q5_0, q5_1, q6_0, q8_0, iq4_nl, mxfp4; and iq4_xs against q8_K.
//
// Calls with many activation columns (prompt processing) go to the panel gemm (panel.h); each
// format's decoder below serves both paths (kPanelOffset / kPanelMax: how its signed values
// become the panel's unsigned levels, or 0 where they stay signed).
//
// Token generation of the formats without a minimum: stream_rows below. The rest (q4_1, q5_1):
// tiles of up to 2 weight rows x 4 activation columns (16 ymm registers). Each block is decoded
// to 32 signed bytes once per tile step and multiplied with every column of the tile using the
// sign trick (maddubs needs unsigned x signed: |w| times x carrying w's sign), then pairs are
// summed to int32 and the block is scaled once in float. iq4_xs has its own loop at the end
// (super-blocks of 256 with int32 sums across the eight 32-value scales).
#include "avx2/register.h"
#include "cpu-traits.h"
#include "quants/quants-legacy.h"
#include "panel.h"
#include "scales.h"
#include "simd.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

namespace {

inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

inline uint32_t load_u32(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// 16 bytes of nibbles -> 32 bytes in element order (low nibbles, then high nibbles): a broadcast
// load, one variable shift of the upper half's 64-bit lanes and the mask (the bits a shift
// carries in from the next byte land in the high nibble, which the mask drops).
inline __m256i nibbles(const uint8_t * qs) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) qs));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0F));
}

// bit j of a 32-bit mask -> 0x10 in byte j
inline __m256i fifth_bits(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int) bits), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long) 0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

inline __m256i table_lookup(const int8_t * kv, __m256i idx) {
    const __m128i t = _mm_loadu_si128((const __m128i *) kv);
    return _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(t), t, 1), idx);
}

struct w_q4_0 {
    using block = block_q4_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static constexpr int kPanelOffset = 8, kPanelMax = 15;
    static __m256i decode(const block & b) { return _mm256_sub_epi8(nibbles(b.qs), _mm256_set1_epi8(8)); }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_q4_1 {
    using block = block_q4_1;
    using xblock = block_q8_1;
    static constexpr bool kMin = true;
    static constexpr int kPanelOffset = 0, kPanelMax = 15;
    static __m256i decode(const block & b) { return nibbles(b.qs); }
    static float scale(const block & b) { return h2f(b.d); }
    static float min(const block & b) { return h2f(b.m); }
};

struct w_q5_0 {
    using block = block_q5_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static constexpr int kPanelOffset = 16, kPanelMax = 31;
    static __m256i decode(const block & b) {
        return _mm256_sub_epi8(_mm256_or_si256(nibbles(b.qs), fifth_bits(load_u32(b.qh))), _mm256_set1_epi8(16));
    }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_q5_1 {
    using block = block_q5_1;
    using xblock = block_q8_1;
    static constexpr bool kMin = true;
    static constexpr int kPanelOffset = 0, kPanelMax = 31;
    static __m256i decode(const block & b) { return _mm256_or_si256(nibbles(b.qs), fifth_bits(load_u32(b.qh))); }
    static float scale(const block & b) { return h2f(b.d); }
    static float min(const block & b) { return h2f(b.m); }
};

struct w_q6_0 {
    using block = block_q6_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static constexpr int kPanelOffset = 32, kPanelMax = 63;
    static __m256i decode(const block & b) {
        uint64_t h;
        std::memcpy(&h, b.qh, 8);
        // elements 0-7: bits 0-1 of qh[0..7], 8-15: bits 4-5, 16-23: bits 2-3, 24-31: bits 6-7
        const __m256i hv = _mm256_srlv_epi64(_mm256_set1_epi64x((long long) h), _mm256_setr_epi64x(0, 4, 2, 6));
        const __m256i high = _mm256_slli_epi16(_mm256_and_si256(hv, _mm256_set1_epi8(3)), 4);
        return _mm256_sub_epi8(_mm256_or_si256(nibbles(b.qs), high), _mm256_set1_epi8(32));
    }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_q8_0 {
    using block = block_q8_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static constexpr int kPanelOffset = 0, kPanelMax = 0;
    static __m256i decode(const block & b) { return _mm256_loadu_si256((const __m256i *) b.qs); }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_iq4_nl {
    using block = block_iq4_nl;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static constexpr int kPanelOffset = 0, kPanelMax = 0;
    static __m256i decode(const block & b) { return table_lookup(kvalues_iq4nl, nibbles(b.qs)); }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_mxfp4 {
    using block = block_mxfp4;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static constexpr int kPanelOffset = 0, kPanelMax = 0;
    static __m256i decode(const block & b) { return table_lookup(kvalues_mxfp4, nibbles(b.qs)); }
    static float scale(const block & b) { return e8m0_to_fp32_half(b.e); }
};

template <typename W>
inline void load_x(const uint8_t * row, int64_t ib, __m256i & v, float & d) {
    const auto & b = ((const typename W::xblock *) row)[ib];
    v = _mm256_loadu_si256((const __m256i *) b.qs);
    d = h2f(b.d);
}

template <typename W>
inline void load_w(const uint8_t * row, int64_t ib, __m256i & v, float & d) {
    const auto & b = ((const typename W::block *) row)[ib];
    v = W::decode(b);
    d = W::scale(b);
}

template <typename W, int R, int C>
void tile(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * x, size_t x_stride, float * dst,
          size_t dst_stride) {
    using WB = typename W::block;
    __m256 acc[R][C];
    float mins[R][C] = {};
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        __m256i xv[C];
        float xd[C];
        for (int c = 0; c < C; ++c) load_x<W>(x + c * x_stride, ib, xv[c], xd[c]);
        for (int r = 0; r < R; ++r) {
            __m256i wv;
            float wd;
            load_w<W>(w + r * w_stride, ib, wv, wd);
            for (int c = 0; c < C; ++c) {
                const __m256 s = _mm256_cvtepi32_ps(dot_i8_signed(wv, xv[c]));
                acc[r][c] = _mm256_fmadd_ps(s, _mm256_set1_ps(wd * xd[c]), acc[r][c]);
            }
            if constexpr (W::kMin) {
                const float m = W::min(((const WB *) (w + r * w_stride))[ib]);
                for (int c = 0; c < C; ++c) mins[r][c] += m * h2f(((const block_q8_1 *) (x + c * x_stride))[ib].s);
            }
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) dst[c * dst_stride + r] = hsum8_ps(acc[r][c]) + mins[r][c];
}

// Token generation (a few columns) of the formats without a minimum: one weight row at a time
// against 1 or 2 columns, in groups of 4 blocks. The four blocks' int32 lane sums are reduced
// together (three vphaddd and one add) and scaled as one 4-float vector, so the per-block work is
// the product itself and the weights stream at close to memory speed; the activation scales are
// converted to float once per call (xd: [column][block]).
template <typename W, int C>
void stream_rows(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * x, size_t x_stride, const float * xd,
                 float * dst, size_t dst_stride, int nr) {
    using WB = typename W::block;
    using XB = typename W::xblock;
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t nb4 = nb / 4 * 4;
    for (int r = 0; r < nr; ++r) {
        const WB * wr = (const WB *) (w + r * w_stride);
        __m128 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm_setzero_ps();
        for (int64_t ib = 0; ib < nb4; ib += 4) {
            __m256i s[C][4];
            for (int j = 0; j < 4; ++j) {
                const __m256i wv = W::decode(wr[ib + j]);
                const __m256i aw = _mm256_sign_epi8(wv, wv);
                for (int c = 0; c < C; ++c) {
                    const __m256i xv = _mm256_loadu_si256((const __m256i *) ((const XB *) (x + c * x_stride))[ib + j].qs);
                    s[c][j] = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, wv)), ones);
                }
            }
            const __m128 wd = _mm_setr_ps(W::scale(wr[ib]), W::scale(wr[ib + 1]), W::scale(wr[ib + 2]), W::scale(wr[ib + 3]));
            for (int c = 0; c < C; ++c) {
                const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[c][0], s[c][1]), _mm256_hadd_epi32(s[c][2], s[c][3]));
                const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                acc[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(sums), _mm_mul_ps(wd, _mm_loadu_ps(xd + c * nb + ib)), acc[c]);
            }
        }
        float tail[C] = {};
        for (int64_t ib = nb4; ib < nb; ++ib) {
            const __m256i wv = W::decode(wr[ib]);
            for (int c = 0; c < C; ++c) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *) ((const XB *) (x + c * x_stride))[ib].qs);
                tail[c] += hsum8_ps(_mm256_cvtepi32_ps(dot_i8_signed(wv, xv))) * W::scale(wr[ib]) * xd[c * nb + ib];
            }
        }
        for (int c = 0; c < C; ++c) {
            __m128 t = _mm_add_ps(acc[c], _mm_movehl_ps(acc[c], acc[c]));
            t = _mm_add_ss(t, _mm_movehdup_ps(t));
            dst[c * dst_stride + r] = _mm_cvtss_f32(t) + tail[c];
        }
    }
}

template <typename W>
void stream_gemm(int64_t n, const uint8_t * w, size_t w_stride, const uint8_t * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr, int nc) {
    using XB = typename W::xblock;
    const int64_t nb = n / 32;
    auto * xd = (float *) kiln_panel::scratch(1, nc * nb * sizeof(float));
    for (int c = 0; c < nc; ++c) {
        for (int64_t ib = 0; ib < nb; ++ib) xd[c * nb + ib] = h2f(((const XB *) (x + c * x_stride))[ib].d);
    }
    for (int c0 = 0; c0 < nc; c0 += 2) {
        if (nc - c0 >= 2) {
            stream_rows<W, 2>(nb, w, w_stride, x + c0 * x_stride, x_stride, xd + c0 * nb, dst + c0 * dst_stride, dst_stride, nr);
        } else {
            stream_rows<W, 1>(nb, w, w_stride, x + c0 * x_stride, x_stride, xd + c0 * nb, dst + c0 * dst_stride, dst_stride, nr);
        }
    }
}

// Batches: the panel gemm (panel.h), one 32-value block per decode.
template <typename W>
struct panel_decoder {
    static constexpr int kSub = 32, kChunk = 32, kMaxLevel = W::kPanelMax;
    static constexpr bool kBias = W::kMin || W::kPanelOffset != 0;
    static void decode(const uint8_t * row, int64_t i, __m256i * v, float * scale, float * bias) {
        const auto & b = ((const typename W::block *) row)[i];
        v[0] = W::decode(b);
        if constexpr (W::kPanelOffset != 0) v[0] = _mm256_add_epi8(v[0], _mm256_set1_epi8((char) W::kPanelOffset));
        scale[0] = W::scale(b);
        if constexpr (W::kMin) bias[0] = W::min(b);
        else bias[0] = -(float) W::kPanelOffset * scale[0];
    }
};

template <typename W>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
          int nr, int nc) {
    if (nc >= kiln_panel::kMinCols) {
        using A = kiln_panel::act_q8_32<W::kMin>;   // q4_1 / q5_1 take q8_1 (with its sums)
        using D = panel_decoder<W>;
        // signed levels: int16 records, whatever K (the panel's K slabs keep them in L2)
        using R = std::conditional_t<kiln_panel::wide_x<D>(), kiln_panel::int16_records<D>, D>;
        kiln_panel::gemm<R, A>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    if constexpr (!W::kMin) {
        stream_gemm<W>(n, (const uint8_t *) w, w_stride, (const uint8_t *) x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    using tile_fn = void (*)(int64_t, const uint8_t *, size_t, const uint8_t *, size_t, float *, size_t);
    static constexpr tile_fn tiles[2][4] = {
        { tile<W, 1, 1>, tile<W, 1, 2>, tile<W, 1, 3>, tile<W, 1, 4> },
        { tile<W, 2, 1>, tile<W, 2, 2>, tile<W, 2, 3>, tile<W, 2, 4> },
    };
    const int64_t nb = n / 32;
    const auto * wb = (const uint8_t *) w;
    const auto * xb = (const uint8_t *) x;
    for (int r0 = 0; r0 < nr; r0 += 2) {
        const int R = nr - r0 < 2 ? nr - r0 : 2;
        for (int c0 = 0; c0 < nc; c0 += 4) {
            const int C = nc - c0 < 4 ? nc - c0 : 4;
            tiles[R - 1][C - 1](nb, wb + r0 * w_stride, w_stride, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride + r0,
                                dst_stride);
        }
    }
}

// iq4_xs against q8_K, a super-block at a time: the eight 32-value products are weighted by
// their 6-bit scales in int32 (vpmaddwd), so the float work is once per 256 values rather than
// once per 32, and the scales are unpacked with vector shifts rather than per sub-block.
struct iq4_xs_block {
    __m256i abs_w[8], sign_w[8];
    __m256i scale[8];   // the sub-block's scale (ls - 32) in every int16 lane
    float   d;
};

// The signed levels of sub-block ib (32 values).
inline __m256i iq4_xs_levels(const block_iq4_xs & b, int ib) { return table_lookup(kvalues_iq4nl, nibbles(b.qs + 16 * ib)); }

// The eight scales ls - 32 as int32 lanes. Sub-block ib: low 4 bits are nibble ib of scales_l
// (read as one 32-bit word), high 2 bits are bits 2ib..2ib+1 of scales_h.
inline __m256i iq4_xs_scales32(const block_iq4_xs & b) {
    uint32_t sl;
    std::memcpy(&sl, b.scales_l, 4);
    const __m256i low = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int) sl), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                         _mm256_set1_epi32(0xF));
    const __m256i high = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                          _mm256_set1_epi32(3));
    return _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
}

// The eight scales as int16, in both 128-bit halves.
inline __m256i iq4_xs_scales16(const block_iq4_xs & b) {
    const __m256i ls32 = iq4_xs_scales32(b);
    return _mm256_broadcastsi128_si256(_mm_packs_epi32(_mm256_castsi256_si128(ls32), _mm256_extracti128_si256(ls32, 1)));
}

// Scale ib of iq4_xs_scales16 in every int16 lane.
inline __m256i iq4_xs_scale(__m256i ls16, int ib) {
    return _mm256_shuffle_epi8(ls16, _mm256_set1_epi16((short) (((2 * ib + 1) << 8) | (2 * ib))));
}

inline void decode_iq4_xs(const block_iq4_xs & b, iq4_xs_block & out) {
    const __m256i ls16 = iq4_xs_scales16(b);
    for (int ib = 0; ib < 8; ++ib) {
        const __m256i w = iq4_xs_levels(b, ib);
        out.sign_w[ib] = w;
        out.abs_w[ib] = _mm256_sign_epi8(w, w);
        out.scale[ib] = iq4_xs_scale(ls16, ib);
    }
    out.d = h2f(b.d);
}

// Token generation: each sub-block is decoded where it is used, so nothing of the block is
// stored (a whole decoded block is 24 ymm, more than AVX2 has: it went through the stack and cost
// half the time). The int32 lane sums, and so the results, are those of the block-at-once form.
// The sub-block scales are stored once per block and read with a broadcast from memory each
// (launder(), scales.h): a shuffle per sub-block competed with the products.
template <int C>
void iq4_xs_row_times_columns(int64_t nb, const uint8_t * wrow, const uint8_t * x, size_t x_stride, float * dst,
                              size_t dst_stride) {
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    alignas(32) int32_t sc_words[8];
    for (int64_t i = 0; i < nb; ++i) {
        const block_iq4_xs & b = ((const block_iq4_xs *) wrow)[i];
        _mm256_store_si256((__m256i *) sc_words, words_of_int16(iq4_xs_scales32(b)));
        const int32_t * scw = launder(sc_words);
        __m256i sum[C];
        for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ++ib) {
            const __m256i w = iq4_xs_levels(b, ib);
            const __m256i aw = _mm256_sign_epi8(w, w);
            const __m256i sc = _mm256_set1_epi32(scw[ib]);
            for (int c = 0; c < C; ++c) {
                const block_q8_K & a = ((const block_q8_K *) (x + c * x_stride))[i];
                const __m256i av = _mm256_loadu_si256((const __m256i *) (a.qs + 32 * ib));
                const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(av, w));
                sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(p16, sc));
            }
        }
        const float d = h2f(b.d);
        for (int c = 0; c < C; ++c) {
            const float ad = ((const block_q8_K *) (x + c * x_stride))[i].d;
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[c]), _mm256_set1_ps(d * ad), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) dst[c * dst_stride] = hsum8_ps(acc[c]);
}

// Batches: the panel gemm (panel.h), a super-block per decode; signed levels with the
// sub-block scales folded in (kFolded).
struct panel_iq4_xs {
    static constexpr int kSub = QK_K, kChunk = QK_K, kMaxLevel = 0;
    static constexpr bool kBias = false, kFolded = true;
    static void decode_folded(const uint8_t * row, int64_t i, __m256i * v, int16_t * scales, float & d) {
        const auto & b = ((const block_iq4_xs *) row)[i];
        iq4_xs_block blk;
        decode_iq4_xs(b, blk);
        for (int k = 0; k < 8; ++k) {
            v[k] = blk.sign_w[k];
            scales[2 * k] = scales[2 * k + 1] = (int16_t) iq4_xs_scale(b, k);
        }
        d = blk.d;
    }
};

// Column tiles of up to 4 outside, rows inside: a tile's activations stay in L1 while the rows
// stream past them.
void gemm_iq4_xs(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr, int nc) {
    if (nc >= kiln_panel::kMinCols) {
        kiln_panel::gemm<panel_iq4_xs, kiln_panel::act_q8_K<QK_K>>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    using row_fn = void (*)(int64_t, const uint8_t *, const uint8_t *, size_t, float *, size_t);
    static constexpr row_fn rows[4] = { iq4_xs_row_times_columns<1>, iq4_xs_row_times_columns<2>,
                                        iq4_xs_row_times_columns<3>, iq4_xs_row_times_columns<4> };
    const int64_t nb = n / QK_K;
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const int C = nc - c0 < 4 ? nc - c0 : 4;
        for (int r = 0; r < nr; ++r) {
            rows[C - 1](nb, (const uint8_t *) w + r * w_stride, (const uint8_t *) x + c0 * x_stride, x_stride,
                        dst + c0 * dst_stride + r, dst_stride);
        }
    }
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_legacy_avx2() {
    ggml_cpu_register_gemm(GGML_TYPE_Q4_0, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_q4_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q4_1, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_1, gemm<w_q4_1>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_0, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_q5_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_1, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_1, gemm<w_q5_1>);
    ggml_cpu_register_gemm(GGML_TYPE_Q6_0, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_q6_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_0, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_q8_0>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_NL, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_iq4_nl>);
    ggml_cpu_register_gemm(GGML_TYPE_MXFP4, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_mxfp4>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_XS, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm_iq4_xs);
}
