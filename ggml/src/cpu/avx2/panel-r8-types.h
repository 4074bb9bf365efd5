// The interleaved layouts the panel gemm reads directly (panel-r8.h), registered the same way
// in both ISA folders (each instantiates its own panel). Activations are the plain twins'
// (q8_0, q8_K), so the products equal the plain model's up to float summation order, except
// iq1_s_r4 / iq1_m_r4, whose 32-value blocks take q8_0 where their twins take q8_K.
#pragma once

#include "avx2/panel-r8-iq.h"
#include "avx2/panel-r8-iq1.h"
#include "avx2/panel-r8-iqk.h"
#include "avx2/panel-r8-k.h"
#include "avx2/panel-r8-legacy.h"

namespace {
namespace kiln_panel {

inline void register_r8_gemms(ggml_cpu_isa isa) {
    constexpr bool s = kSignedLevels;
    using q8_0 = act_q8_32<false>;
    auto reg = [isa](ggml_type t, ggml_type act, ggml_gemm_t fn) { ggml_cpu_register_gemm(t, isa, act, fn); };
    reg(GGML_TYPE_Q4_0_R8, GGML_TYPE_Q8_0, gemm_r8<grp_q4_0_r8, q8_0>);
    reg(GGML_TYPE_Q8_0_R8, GGML_TYPE_Q8_0, gemm_r8<grp_q8_0_r8<s>, q8_0>);
    reg(GGML_TYPE_IQ4_NL_R4, GGML_TYPE_Q8_0, gemm_r8<grp_iq4_nl_r4<s>, q8_0>);
    reg(GGML_TYPE_Q5_0_R4, GGML_TYPE_Q8_0, gemm_r8<grp_q5_0_r4, q8_0>);
    reg(GGML_TYPE_Q6_0_R4, GGML_TYPE_Q8_0, gemm_r8<grp_q6_0_r4, q8_0>);
    reg(GGML_TYPE_MXFP4_R8, GGML_TYPE_Q8_0, gemm_r8<grp_mxfp4_r8<s>, q8_0>);
    reg(GGML_TYPE_IQ1_S_R4, GGML_TYPE_Q8_0, gemm_r8<grp_iq1_s_r4<s>, q8_0>);
    reg(GGML_TYPE_IQ1_M_R4, GGML_TYPE_Q8_0, gemm_r8<grp_iq1_m_r4<s>, act_q8_0_halves<false>>);
    reg(GGML_TYPE_Q8_K_R8, GGML_TYPE_Q8_K, gemm_r8<grp_q8_k_r8<s>, act_q8_K<32>>);
    reg(GGML_TYPE_Q8_K_R16, GGML_TYPE_Q8_K, gemm_r8<grp_q8_k_r16<s>, act_q8_K<32>>);
    reg(GGML_TYPE_Q2_K_R4, GGML_TYPE_Q8_K, gemm_r8<grp_q2_k_r4, act_q8_K<16>>);
    reg(GGML_TYPE_Q3_K_R4, GGML_TYPE_Q8_K, gemm_r8<grp_q3_k_r4, act_q8_K<16>>);
    reg(GGML_TYPE_Q4_K_R4, GGML_TYPE_Q8_K, gemm_r8<grp_q4_k_r4, act_q8_K<32>>);
    reg(GGML_TYPE_Q5_K_R4, GGML_TYPE_Q8_K, gemm_r8<grp_q5_k_r4, act_q8_K<32>>);
    reg(GGML_TYPE_Q6_K_R4, GGML_TYPE_Q8_K, gemm_r8<grp_q6_k_r4, act_q8_K<16>>);
    reg(GGML_TYPE_IQ4_XS_R8, GGML_TYPE_Q8_K, gemm_r8<grp_iq4_xs_r8<s>, act_q8_K<32>>);
    reg(GGML_TYPE_IQ2_XXS_R4, GGML_TYPE_Q8_K, gemm_r8<grp_iq2_xxs_r4<s>, act_q8_K<32>>);
    reg(GGML_TYPE_IQ2_XS_R4, GGML_TYPE_Q8_K, gemm_r8<grp_iq2_xs_r4<s>, act_q8_K<16>>);
    reg(GGML_TYPE_IQ2_S_R4, GGML_TYPE_Q8_K, gemm_r8<grp_iq2_s_r4<s>, act_q8_K<16>>);
    reg(GGML_TYPE_IQ3_XXS_R4, GGML_TYPE_Q8_K, gemm_r8<grp_iq3_xxs_r4<s>, act_q8_K<32>>);
    reg(GGML_TYPE_IQ3_S_R4, GGML_TYPE_Q8_K, gemm_r8<grp_iq3_s_r4<s>, act_q8_K<32>>);
    reg(GGML_TYPE_IQ2_K_R4, GGML_TYPE_Q8_K, gemm_r8<grp_iq2_k_r4<s>, act_q8_K<16>>);
    reg(GGML_TYPE_IQ3_K_R4, GGML_TYPE_Q8_K, gemm_r8<grp_iq3_k_r4<s>, act_q8_K<16>>);
    reg(GGML_TYPE_IQ5_K_R4, GGML_TYPE_Q8_K, gemm_r8<grp_iq5_k_r4<s>, act_q8_K<16>>);
    reg(GGML_TYPE_IQ5_KS_R4, GGML_TYPE_Q8_K, gemm_r8<grp_iq5_ks_r4<s>, act_q8_K<32>>);
}

// Batches of the k-quant r4 layouts whose twins round batch activations per 32 (q8_0, the batch
// pair of cpu-traits.h): the same group decoders over the twins' batch activation readers. The
// records and the micro kernel are those of the twins' batch kernels (avx2/quants-k.cpp,
// avx512/quants-k.cpp: gemm_k_q8_0), so the products are the same bits; X6 is the reader of
// q8_0 blocks that the folder's q6_K batch kernel takes (16-value halves, or at AVX2 whole
// blocks with their sums per 16 for the integer scales, kScales16).
template <typename G4, typename G5, typename G6, typename X6>
inline void register_k_r4_batch_gemms(ggml_cpu_isa isa) {
    using q8_0 = act_q8_32<false>;
    ggml_cpu_register_batch_gemm(GGML_TYPE_Q4_K_R4, isa, GGML_TYPE_Q8_0, gemm_r8<G4, q8_0>);
    ggml_cpu_register_batch_gemm(GGML_TYPE_Q5_K_R4, isa, GGML_TYPE_Q8_0, gemm_r8<G5, q8_0>);
    ggml_cpu_register_batch_gemm(GGML_TYPE_Q6_K_R4, isa, GGML_TYPE_Q8_0, gemm_r8<G6, X6>);
}

} // namespace kiln_panel
} // namespace
