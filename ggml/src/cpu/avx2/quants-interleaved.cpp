// AVX2 gemm kernels of the row-interleaved layouts read straight from their woven groups by
// the panel gemm (avx2/panel-r8*.h; the list is register_r8_gemms in panel-r8-types.h), for
// batches and token generation alike. bf16_r16 is in gemm-float.cpp; q8_KV_r8, whose activations
// are f32, has a float product of its own (gemm-q8-kv-r8.h).
#include "avx2/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "avx2/panel-r8-types.h"
#include "avx2/gemm-q8-kv-r8.h"

void ggml_cpu_register_interleaved_avx2() {
    kiln_panel::register_r8_gemms(GGML_CPU_ISA_AVX2);
    // q6_K's AVX2 batch kernel reads q8_0 pairs each with its scale (kSuper = 1)
    kiln_panel::register_k_r4_batch_gemms<kiln_panel::grp_q4_k_r4, kiln_panel::grp_q5_k_r4, kiln_panel::grp_q6_k_r4,
                                          kiln_panel::act_q8_0_halves<false>>(GGML_CPU_ISA_AVX2);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_KV_R8, GGML_CPU_ISA_AVX2, GGML_TYPE_F32, q8_kv_r8::gemm<2>);
}
