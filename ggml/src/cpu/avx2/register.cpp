// The one entry point of the AVX2 kernels (see register.h for the rules of this folder).
#include "avx2/register.h"
#include "cpu-isa.h"

void ggml_cpu_register_avx2() {
    ggml_cpu_register_float_gemm_avx2();
    ggml_cpu_register_vec_avx2();
    ggml_cpu_register_attn_cache_avx2();
    ggml_cpu_register_ik_avx2();
    ggml_cpu_register_bitnet_avx2();
    ggml_cpu_register_iq_avx2();
    ggml_cpu_register_k_avx2();
    ggml_cpu_register_legacy_avx2();
    ggml_cpu_register_q8_avx2();
    ggml_cpu_register_kt_search_avx2();
    ggml_cpu_register_interleaved_avx2();
}
