// The block loop of the x86 lattice i-quant kernels (iq1_s/m, iq2_xxs/xs/s, iq3_xxs/s against
// q8_K), written once over an ISA description; included only by avx2/quants-iq.cpp and
// avx512/quants-iq.cpp, each of which compiles its own copy (internal linkage) with its flags.
// An ISA struct I provides:
//   prepared                        a decoded block in that ISA's registers
//   prepare(decoded_block, prepared) and block_dot(prepared, q8) -> the exact int32 block sum.
//   kPanelMinCols and panel<T>(gemm arguments)  its panel gemm of type T (iq_type), for batches.
// Per row: zero the outputs; per block: decode (quants-iq.h), prepare; per column:
//   acc = fma(d * a.d, block_dot, acc), then the type's dot factor once per output: the scalar
// kernel's order, so the results equal it bit for bit.
// (Factor by reference: clang 14, Debian 12's, has no float template parameters.)
#pragma once

#include "cpu-traits.h"
#include "quants/quants-iq.h"

#include <cmath>

namespace {

// One lattice type as the kernels see it: its block, decoder and dot factor.
template <typename Block_, void (*Decode)(const Block_ &, ggml_iq::decoded_block &), const float & Factor>
struct iq_type {
    using Block = Block_;
    static void decode(const Block & b, ggml_iq::decoded_block & db) { Decode(b, db); }
    static float factor() { return Factor; }
};

template <typename I, typename T>
void gemm_iq(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
             int nr, int nc) {
    const int64_t nb = n / QK_K;
    ggml_iq::decoded_block db;
    typename I::prepared pb;
    for (int r = 0; r < nr; ++r) {
        const auto * b = (const typename T::Block *) ((const char *) w + r * w_stride);
        for (int c = 0; c < nc; ++c) dst[c * dst_stride + r] = 0.0f;
        for (int64_t i = 0; i < nb; ++i) {
            T::decode(b[i], db);
            I::prepare(db, pb);
            for (int c = 0; c < nc; ++c) {
                const auto & a = ((const block_q8_K *) ((const char *) x + c * x_stride))[i];
                float & acc = dst[c * dst_stride + r];
                acc = std::fma(db.d * a.d, (float) I::block_dot(pb, a.qs), acc);
            }
        }
        for (int c = 0; c < nc; ++c) dst[c * dst_stride + r] *= T::factor();
    }
}

// The kernel registered per type: batches of at least I::kPanelMinCols columns go to the ISA's
// panel gemm (I::panel<T>: weights repacked once per call and register-tiled over the columns),
// fewer (token generation, the few tokens of a MoE expert) to the block loop above.
template <typename I, typename T>
void gemm_iq_type(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                  size_t dst_stride, int nr, int nc) {
    if (nc >= I::kPanelMinCols) {
        I::template panel<T>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    gemm_iq<I, T>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
}

// Registers every lattice type's kernel at one ISA level.
template <typename I>
void register_iq_gemms(ggml_cpu_isa isa) {
    using namespace ggml_iq;
    const ggml_type q8 = GGML_TYPE_Q8_K;
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_XXS, isa, q8, gemm_iq_type<I, iq_type<block_iq2_xxs, decode_iq2_xxs, IQ2_DOT_FACTOR>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_XS, isa, q8, gemm_iq_type<I, iq_type<block_iq2_xs, decode_iq2_xs, IQ2_DOT_FACTOR>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_S, isa, q8, gemm_iq_type<I, iq_type<block_iq2_s, decode_iq2_s, IQ2_DOT_FACTOR>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_XXS, isa, q8, gemm_iq_type<I, iq_type<block_iq3_xxs, decode_iq3_xxs, IQ3XXS_DOT_FACTOR>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_S, isa, q8, gemm_iq_type<I, iq_type<block_iq3_s, decode_iq3_s, IQ3S_DOT_FACTOR>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_S, isa, q8, gemm_iq_type<I, iq_type<block_iq1_s, decode_iq1_s, IQ1_DOT_FACTOR>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_M, isa, q8, gemm_iq_type<I, iq_type<block_iq1_m, decode_iq1_m, IQ1_DOT_FACTOR>>);
}

} // namespace
