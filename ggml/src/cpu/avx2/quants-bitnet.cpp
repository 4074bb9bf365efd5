// AVX2 products of ik_llama.cpp's BitNet types (iq1_bn, iq2_bn) against q8_0 activations; the
// AVX512 level takes them too (a register of 32 levels is all a 64-value block holds, and the
// AVX2 integer sums are exact). iq2_bn_r4 reaches iq2_bn's kernel through the unweave of
// r_gemm_decoded (quants-interleaved.h), so a repacked model keeps the original's products.
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
    const __m256i w = _mm256_sub_epi8(code, _mm256_set1_epi8(1));
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

template <typename Block, int C>
void rows_bitnet(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr) {
    using R = bitnet_row<Block>;
    for (int r = 0; r < nr; ++r) {
        const uint8_t * row = w + r * w_stride;
        const auto * blocks = (const Block *) (row + R::kHeader);
        __m256 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t ib = 0; ib < nb; ++ib) {
            __m256i q[2];
            bitnet_codes(blocks[ib], q);
            for (int c = 0; c < C; ++c) {
                const auto * xb = (const block_q8_0 *) (x + c * x_stride) + 2 * ib;
                for (int h = 0; h < 2; ++h) {
                    const __m256i s = dot_levels(q[h], _mm256_loadu_si256((const __m256i *) xb[h].qs));
                    acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(_cvtsh_ss(xb[h].d)), acc[c]);
                }
            }
        }
        const float d = R::scale(row);
        for (int c = 0; c < C; ++c) dst[c * dst_stride + r] = d * hsum8(acc[c]);
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
    const int64_t nb = n / 64;
    const auto * wb = (const uint8_t *) w;
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const uint8_t * xc = (const uint8_t *) x + c0 * x_stride;
        float * dc = dst + c0 * dst_stride;
        switch (nc - c0 < 4 ? nc - c0 : 4) {
            case 1: rows_bitnet<Block, 1>(nb, wb, w_stride, xc, x_stride, dc, dst_stride, nr); break;
            case 2: rows_bitnet<Block, 2>(nb, wb, w_stride, xc, x_stride, dc, dst_stride, nr); break;
            case 3: rows_bitnet<Block, 3>(nb, wb, w_stride, xc, x_stride, dc, dst_stride, nr); break;
            default: rows_bitnet<Block, 4>(nb, wb, w_stride, xc, x_stride, dc, dst_stride, nr); break;
        }
    }
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_bitnet_avx2() {
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_BN, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm_bitnet<block_iq1_bn>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_BN, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm_bitnet<block_iq2_bn>);
}
