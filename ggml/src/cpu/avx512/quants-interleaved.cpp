// AVX512 (VNNI) gemm kernels of the row-interleaved layouts read straight from their woven groups by
// the panel gemm (avx2/panel-r8*.h; the list is register_r8_gemms in panel-r8-types.h), for
// batches and token generation alike; the k-quant r4 layouts with 16-lane decoders
// (avx512/panel-r16-k.h), and q2_k_r4 .. q6_k_r4 (and the rest listed below, the lattice r4
// types with gemv-interleaved-lattice.h's decoders) token generation by the lane-shaped
// loop of gemv-interleaved-loop.h. bf16_r16 is in gemm-float.cpp; q8_KV_r8, whose activations are f32,
// has a float product of its own (gemm-q8-kv-r8.h).
#include "avx512/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "avx2/panel-r8-types.h"
#include "avx512/panel-r16-k.h"
#include "avx2/gemm-q8-kv-r8.h"
#include "gemv-interleaved-loop.h"
#include "gemv-interleaved-lattice.h"
#include "avx512/gemv-interleaved-isa.h"


void ggml_cpu_register_interleaved_avx512() {
    using namespace kiln_panel;
    register_r8_gemms(GGML_CPU_ISA_AVX512);
    register_r16_k_gemms(GGML_CPU_ISA_AVX512);
    // token generation of q2_k_r4 .. q6_k_r4 by the lane-shaped loop, batches by the panel
    auto reg = [](ggml_type t, ggml_gemm_t fn) { ggml_cpu_register_gemm(t, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_K, fn); };
    auto reg0 = [](ggml_type t, ggml_gemm_t fn) { ggml_cpu_register_gemm(t, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, fn); };
    using q8_0 = act_q8_32<false>;
    reg0(GGML_TYPE_Q4_0_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::q4_0_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_q4_0_r8, q8_0>>);
    reg0(GGML_TYPE_Q8_0_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::q8_0_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_q8_0_r8<kSignedLevels>, q8_0>>);
    reg0(GGML_TYPE_MXFP4_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::mxfp4_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_mxfp4_r8<kSignedLevels>, q8_0>>);
    reg0(GGML_TYPE_IQ4_NL_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_nl_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq4_nl_r4<kSignedLevels>, q8_0>>);
    reg0(GGML_TYPE_Q5_0_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q5_0_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q5_0_r4, q8_0>>);
    reg0(GGML_TYPE_Q6_0_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q6_0_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q6_0_r4, q8_0>>);
    reg0(GGML_TYPE_IQ1_S_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq1_s_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq1_s_r4<kSignedLevels>, q8_0>>);
    reg0(GGML_TYPE_IQ1_M_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq1_m_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq1_m_r4<kSignedLevels>, act_q8_0_halves<false>>>);
    reg(GGML_TYPE_IQ4_XS_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_xs_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq4_xs_r8<kSignedLevels>, act_q8_K<32>>>);
    reg(GGML_TYPE_Q2_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q2_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp16_q2_k_r4, act_q8_K<16>>>);
    reg(GGML_TYPE_Q3_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q3_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q3_k_r4, act_q8_K<16>>>);
    reg(GGML_TYPE_Q4_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q4_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp16_q4_k_r4, act_q8_K<32>>>);
    reg(GGML_TYPE_Q5_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q5_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp16_q5_k_r4, act_q8_K<32>>>);
    reg(GGML_TYPE_Q6_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q6_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp16_q6_k_r4, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ2_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_k_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ3_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq3_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq3_k_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ5_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq5_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq5_k_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ5_KS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq5_ks_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq5_ks_r4<kSignedLevels>, act_q8_K<32>>>);
    reg(GGML_TYPE_IQ2_XXS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_xxs_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_xxs_r4<kSignedLevels>, act_q8_K<32>>>);
    reg(GGML_TYPE_IQ2_XS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_xs_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_xs_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ2_S_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_s_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_s_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ3_XXS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq3_xxs_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq3_xxs_r4<kSignedLevels>, act_q8_K<32>>>);
    reg(GGML_TYPE_IQ3_S_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq3_s_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq3_s_r4<kSignedLevels>, act_q8_K<32>>>);
    reg(GGML_TYPE_IQ4_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq4_k_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ4_KS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_ks_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq4_ks_r4<kSignedLevels>, act_q8_K<32>>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_KV_R8, GGML_CPU_ISA_AVX512, GGML_TYPE_F32, q8_kv_r8::gemm<4>);
}
