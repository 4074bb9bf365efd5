// AVX2 products of ik_llama.cpp's BitNet types (iq1_bn, iq2_bn) against q8_0 activations; the
// AVX512 level takes them too (a register of 32 levels is all a 64-value block holds, and the
// AVX2 integer sums are exact); and iq2_bn_r4 (gemm_iq2_bn_r4, below), with iq2_bn's products.
//
// A row is an f32 (iq2_bn) or fp16 (iq1_bn) scale and 64-value blocks of levels -1 / 0 / +1
// (ternary-levels-x86.h decodes them as codes 0..2). The product of a 32-value chunk with a q8_0
// block is an exact int32 sum (vpmaddubsw of |w| and x with w's sign, vpmaddwd), weighted by the
// block's scale in float; the row scale multiplies the row's sum once.
//
// Token generation and small batches: rows one at a time against up to 4 columns, each block
// decoded once per row and tile. Batches of kMinCols or more columns: the panel gemm (panel.h)
// with signed levels and the row scale per 32 values, as the legacy q8_0.
#include "avx2/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "ternary-levels-x86.h"
#include "simd.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

namespace {

template <typename Block> struct bitnet_row;
template <> struct bitnet_row<block_iq1_bn> {
    static constexpr size_t kHeader = 2;
    static float scale(const uint8_t * row) {
        uint16_t h;
        std::memcpy(&h, row, 2);
        return _cvtsh_ss(h);
    }
};
template <> struct bitnet_row<block_iq2_bn> {
    static constexpr size_t kHeader = 4;
    static float scale(const uint8_t * row) {
        float d;
        std::memcpy(&d, row, 4);
        return d;
    }
};

// levels (codes - 1) . activation bytes over 32 values -> 8 int32 lanes
inline __m256i dot_levels(__m256i code, __m256i x) {
    return dot_i8_signed(_mm256_sub_epi8(code, _mm256_set1_epi8(1)), x);
}

// Where the rows loop reads row r of w: its scale and the codes of its block ib.
template <typename Block>
struct plain_rows {
    static float scale(const uint8_t * w, size_t w_stride, int r) { return bitnet_row<Block>::scale(w + r * w_stride); }
    static void codes(const uint8_t * w, size_t w_stride, int r, int64_t ib, __m256i * q) {
        bitnet_codes(((const Block *) (w + r * w_stride + bitnet_row<Block>::kHeader))[ib], q);
    }
};

// iq2_bn_r4: w is one contiguous group of 4 rows (four f32 scales, then 64-byte blocks in which
// value 16 l + 4 m + i of row k is bits 2 m of byte 16 l + 4 k + i). Dword k of each 16-byte
// quarter l holds row k's values 16 l .. 16 l + 15; gathered (two vpermd), one vpshufb spreads
// byte 4 l + i over lanes 4 m + i and a shift per dword by 2 m brings each code down.
struct r4_rows {
    static float scale(const uint8_t * w, size_t, int r) {
        float d;
        std::memcpy(&d, w + 4 * r, 4);
        return d;
    }
    static void codes(const uint8_t * w, size_t, int r, int64_t ib, __m256i * q) {
        const uint8_t * b = w + 16 + 64 * ib;
        const __m256i pick = _mm256_setr_epi32(r, 4 + r, r, 4 + r, r, 4 + r, r, 4 + r);
        const __m256i lo = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *) b), pick);
        const __m256i hi = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *) (b + 32)), pick);
        const __m128i g = _mm_unpacklo_epi64(_mm256_castsi256_si128(lo), _mm256_castsi256_si128(hi));
        const __m256i gg = _mm256_broadcastsi128_si256(g);
        const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6), m3 = _mm256_set1_epi8(3);
        for (int c = 0; c < 2; ++c) {
            const char l0 = (char) (8 * c), l1 = (char) (8 * c + 4);   // 4 l for l = 2 c (low half), 2 c + 1
            const __m256i idx = _mm256_setr_epi8(l0, l0 + 1, l0 + 2, l0 + 3, l0, l0 + 1, l0 + 2, l0 + 3, l0, l0 + 1, l0 + 2,
                                                 l0 + 3, l0, l0 + 1, l0 + 2, l0 + 3, l1, l1 + 1, l1 + 2, l1 + 3, l1, l1 + 1,
                                                 l1 + 2, l1 + 3, l1, l1 + 1, l1 + 2, l1 + 3, l1, l1 + 1, l1 + 2, l1 + 3);
            q[c] = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(gg, idx), shifts), m3);
        }
    }
};

template <typename Src, int C>
void rows_bitnet(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr) {
    for (int r = 0; r < nr; ++r) {
        __m256 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t ib = 0; ib < nb; ++ib) {
            __m256i q[2];
            Src::codes(w, w_stride, r, ib, q);
            for (int c = 0; c < C; ++c) {
                const auto * xb = (const block_q8_0 *) (x + c * x_stride) + 2 * ib;
                for (int h = 0; h < 2; ++h) {
                    const __m256i s = dot_levels(q[h], _mm256_loadu_si256((const __m256i *) xb[h].qs));
                    acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(_cvtsh_ss(xb[h].d)), acc[c]);
                }
            }
        }
        const float d = Src::scale(w, w_stride, r);
        for (int c = 0; c < C; ++c) dst[c * dst_stride + r] = d * hsum8_ps(acc[c]);
    }
}

// rows_bitnet over the columns in tiles of up to 4.
template <typename Src>
void small_batch(int64_t n, const uint8_t * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr, int nc) {
    const int64_t nb = n / 64;
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const uint8_t * xc = (const uint8_t *) x + c0 * x_stride;
        float * dc = dst + c0 * dst_stride;
        switch (nc - c0 < 4 ? nc - c0 : 4) {
            case 1: rows_bitnet<Src, 1>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
            case 2: rows_bitnet<Src, 2>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
            case 3: rows_bitnet<Src, 3>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
            default: rows_bitnet<Src, 4>(nb, w, w_stride, xc, x_stride, dc, dst_stride, nr); break;
        }
    }
}

// The panel's view: a 64-value chunk as two sub-blocks of 32 signed levels, scale d. Signed, not
// codes 0..2 with a bias of -d: the bias term d * d_x * sum(q) nearly cancels the codes' term
// where most levels are 0, and its float rounding left 3e-5 of such a product (test-quants-simd).
template <typename Block>
struct panel_bitnet {
    static constexpr int kSub = 32, kChunk = 64, kMaxLevel = 0;
    static constexpr bool kBias = false;
    static void decode(const uint8_t * row, int64_t i, __m256i * v, float * scale, float * bias) {
        using R = bitnet_row<Block>;
        bitnet_codes(((const Block *) (row + R::kHeader))[i], v);
        v[0] = _mm256_sub_epi8(v[0], _mm256_set1_epi8(1));
        v[1] = _mm256_sub_epi8(v[1], _mm256_set1_epi8(1));
        const float d = R::scale(row);
        scale[0] = scale[1] = d;
        bias[0] = bias[1] = 0.0f;
    }
};

template <typename Block>
void gemm_bitnet(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr, int nc) {
    if (nc >= kiln_panel::kMinCols) {
        // signed levels: int16 records, as the legacy q8_0's (avx2/quants-legacy.cpp)
        using D = panel_bitnet<Block>;
        using R = std::conditional_t<kiln_panel::wide_x<D>(), kiln_panel::int16_records<D>, D>;
        kiln_panel::gemm<R, kiln_panel::act_q8_32<false>>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    small_batch<plain_rows<Block>>(n, (const uint8_t *) w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
}

// iq2_bn_r4: token generation reads the groups in place; batches unweave them into iq2_bn rows
// (codes from r4_rows, packed back four to a byte: a vector or two per block) and take iq2_bn's
// panel, so both give iq2_bn's products. (The generic unweave of r_gemm_decoded, which reads the
// weave's bit map, took 19 CPU ms per batch-1 product at K = M = 4096 where iq2_bn takes 0.7.)
void gemm_iq2_bn_r4(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                    size_t dst_stride, int nr, int nc) {
    const size_t row_size = 4 + (size_t) (n / 64) * sizeof(block_iq2_bn);
    if (nc < kiln_panel::kMinCols) {
        for (int r0 = 0; r0 < nr; r0 += 4) {
            const char * group = ggml_cpu_contiguous_group((const char *) w + r0 * w_stride, w_stride, row_size, 4);
            small_batch<r4_rows>(n, (const uint8_t *) group, row_size, x, x_stride, dst + r0, dst_stride, 4, nc);
        }
        return;
    }
    auto * plain = (uint8_t *) ggml_cpu_kernel_scratch(GGML_CPU_SCRATCH_PLAIN, (size_t) nr * row_size);
    for (int r0 = 0; r0 < nr; r0 += 4) {
        const auto * group = (const uint8_t *) ggml_cpu_contiguous_group((const char *) w + r0 * w_stride, w_stride, row_size, 4);
        for (int k = 0; k < 4; ++k) {
            uint8_t * row = plain + (r0 + k) * row_size;
            std::memcpy(row, group + 4 * k, 4);
            for (int64_t ib = 0; ib < n / 64; ++ib) {
                __m256i q[2];
                r4_rows::codes(group, row_size, k, ib, q);
                // iq2_bn byte j: values j, j + 16, j + 32, j + 48 at bits 0, 2, 4, 6
                const __m128i b = _mm_or_si128(
                    _mm_or_si128(_mm256_castsi256_si128(q[0]), _mm_slli_epi16(_mm256_extracti128_si256(q[0], 1), 2)),
                    _mm_or_si128(_mm_slli_epi16(_mm256_castsi256_si128(q[1]), 4), _mm_slli_epi16(_mm256_extracti128_si256(q[1], 1), 6)));
                _mm_storeu_si128((__m128i *) (row + 4 + 16 * ib), b);
            }
        }
    }
    gemm_bitnet<block_iq2_bn>(n, plain, row_size, x, x_stride, dst, dst_stride, nr, nc);
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_bitnet_avx2() {
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_BN, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm_bitnet<block_iq1_bn>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_BN, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm_bitnet<block_iq2_bn>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_BN_R4, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm_iq2_bn_r4);
}
