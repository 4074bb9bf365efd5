// AVX512 (VNNI) gemm kernels of the row-interleaved layouts (q4_0_r8, q8_0_r8, iq4_nl_r4, q5_0_r4,
// q6_0_r4, q2_k_r4 .. q6_k_r4, iq4_xs_r8, iq2_k_r4, iq3_k_r4, iq5_k_r4, iq5_ks_r4): the panel gemm
// reading the woven groups directly (avx2/panel-r8*.h), for batches and token generation alike.
#include "avx512/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "avx2/panel-r8-types.h"

void ggml_cpu_register_interleaved_avx512() { kiln_panel::register_r8_gemms(GGML_CPU_ISA_AVX512); }
