// The block loop of the x86 lattice i-quant kernels (iq1_s/m, iq2_xxs/xs/s, iq3_xxs/s against
// q8_K) for token generation and other calls of fewer than I::kPanelMinCols columns, written once
// over an ISA description; included only by avx2/quants-iq.cpp and avx512/quants-iq.cpp, each of
// which compiles its own copy (internal linkage) with its flags.
// An ISA struct I provides:
//   prepared                        a block's signed levels and int16 scales in its registers;
//   prepare<X>(block, prepared)     built in vectors from the index layer X = lattice_index<Block>
//                                   (avx2/panel-iq-index.h: grid gather + sign mask, as the
//                                   panels decode);
//   block_dot(prepared, q8)         -> the exact int32 block sum, sum_j sc_j sum q a;
//   kPanelMinCols and panel<Block>(gemm arguments)  its panel gemm, for batches.
// Per row: zero the outputs; per block: prepare once, then per column (each weight block is read
// and decoded once for all of them): acc = fma(d * a.d, block_dot, acc), then the type's dot
// factor once per output. That is the scalar kernel's order, and the block sum is an exact
// integer (|sum| < 62 * 127 * 256 * 31 < 2^31) whatever order the lanes add in, so the results
// equal the scalar kernel's bit for bit at every ISA.
#pragma once

#include "avx2/panel-iq-index.h"
#include "cpu-traits.h"
#include "quants/quants-iq.h"

#include <cmath>

namespace {

// nc < I::kPanelMinCols.
template <typename I, typename Block>
void gemm_iq(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
             int nr, int nc) {
    using X = kiln_panel::lattice_index<Block>;
    const int64_t nb = n / QK_K;
    typename I::prepared pb;
    // the sums in registers: in dst, each fma would wait on the last one's store (dst may alias)
    float acc[I::kPanelMinCols];
    for (int r = 0; r < nr; ++r) {
        const auto * b = (const Block *) ((const char *) w + r * w_stride);
        for (int c = 0; c < nc; ++c) acc[c] = 0.0f;
        for (int64_t i = 0; i < nb; ++i) {
            I::template prepare<X>(b[i], pb);
            const float d = X::d(b[i]);
            for (int c = 0; c < nc; ++c) {
                const auto & a = ((const block_q8_K *) ((const char *) x + c * x_stride))[i];
                acc[c] = std::fma(d * a.d, (float) I::block_dot(pb, a.qs), acc[c]);
            }
        }
        for (int c = 0; c < nc; ++c) dst[c * dst_stride + r] = acc[c] * X::kFactor;
    }
}

// The kernel registered per type: batches of at least I::kPanelMinCols columns go to the ISA's
// panel gemm (I::panel<Block>: weights repacked once per call and register-tiled over the
// columns), fewer (token generation, the few tokens of a MoE expert) to the block loop above.
template <typename I, typename Block>
void gemm_iq_type(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                  size_t dst_stride, int nr, int nc) {
    if (nc >= I::kPanelMinCols) {
        I::template panel<Block>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    gemm_iq<I, Block>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
}

// Registers every lattice type's kernel at one ISA level.
template <typename I>
void register_iq_gemms(ggml_cpu_isa isa) {
    using namespace ggml_iq;
    const ggml_type q8 = GGML_TYPE_Q8_K;
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_XXS, isa, q8, gemm_iq_type<I, block_iq2_xxs>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_XS, isa, q8, gemm_iq_type<I, block_iq2_xs>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_S, isa, q8, gemm_iq_type<I, block_iq2_s>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_XXS, isa, q8, gemm_iq_type<I, block_iq3_xxs>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_S, isa, q8, gemm_iq_type<I, block_iq3_s>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_S, isa, q8, gemm_iq_type<I, block_iq1_s>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_M, isa, q8, gemm_iq_type<I, block_iq1_m>);
}

} // namespace
