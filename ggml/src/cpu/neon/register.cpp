// The one entry point of the NEON kernels (see register.h for the rules of this folder).
#include "neon/register.h"
#include "cpu-isa.h"

void ggml_cpu_register_neon() {
    ggml_cpu_register_vec_neon();
    ggml_cpu_register_float_gemm_neon();
    ggml_cpu_register_q8_neon();
    ggml_cpu_register_legacy_neon();
    ggml_cpu_register_k_neon();
    ggml_cpu_register_iq_neon();
    ggml_cpu_register_ik_neon();
    ggml_cpu_register_kt_neon();
    ggml_cpu_register_interleaved_neon();
    ggml_cpu_register_interleaved_float_neon();
}
