// Drivers shared by the iq1 / iq2 / iq3 families (quants-iq{1,2,3}.cpp): the row quantizer
// loop and the scalar gemm against q8_K that the SIMD kernels are tested against. Each family
// only supplies its per-block pieces, so the loops (and the order of the float operations the
// reference results depend on) cannot drift between families.
#pragma once

#include "quants-iq.h"

#include <cmath>

namespace ggml_iq {

// Whole rows of QK_K superblocks encoded by row_fn; check_rows names the type in its message.
template <typename Block, void (*row_fn)(const float *, Block *, int64_t, const float *)>
size_t quantize_iq_rows(const char * name, const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                        const float * imatrix) {
    if (!check_rows(name, src, nrows, n_per_row)) return 0;
    const size_t row_size = (size_t) (n_per_row / QK_K) * sizeof(Block);
    for (int64_t r = 0; r < nrows; ++r) {
        row_fn(src + r * n_per_row, (Block *) ((char *) dst + r * row_size), n_per_row, imatrix);
    }
    return (size_t) nrows * row_size;
}

// dst[c, r] = factor * sum over superblocks of d_block * d_q8 * dot(block, q8 block), the sum
// accumulated by fma in block order; factor is the type's *_DOT_FACTOR (quants-iq.h).
template <typename Block, int32_t (*dot)(const Block &, const block_q8_K &), float (*block_d)(const Block &),
          const float & factor>
void gemm_iq_scalar(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                    size_t dst_stride, int nr, int nc) {
    const int64_t nb = n / QK_K;
    for (int c = 0; c < nc; ++c) {
        const auto * a = (const block_q8_K *) ((const char *) x + c * x_stride);
        for (int r = 0; r < nr; ++r) {
            const auto * b = (const Block *) ((const char *) w + r * w_stride);
            float sum = 0;
            for (int64_t i = 0; i < nb; ++i) sum = std::fma(block_d(b[i]) * a[i].d, (float) dot(b[i], a[i]), sum);
            dst[c * dst_stride + r] = factor * sum;
        }
    }
}

// The common block scale: the fp16 d (iq1_m keeps its own, split over its scales).
template <typename Block>
float fp16_block_d(const Block & b) {
    return GGML_FP16_TO_FP32(b.d);
}

} // namespace ggml_iq
