// The one entry point of the AVX512 kernels (see register.h for the rules of this folder).
#include "avx512/register.h"
#include "cpu-isa.h"
#include "ggml-cpu.h"

void ggml_cpu_register_avx512() {
    ggml_cpu_register_float_gemm_avx512();
    ggml_cpu_register_vec_avx512();
    ggml_cpu_register_attn_cache_avx512();
    ggml_cpu_register_attn_tile_avx512();
    ggml_cpu_register_ik_avx512();
    ggml_cpu_register_iq_avx512();
    if (ggml_cpu_has_avx512_vbmi()) ggml_cpu_register_iq_vbmi_avx512();
    ggml_cpu_register_k_avx512();
    if (ggml_cpu_has_avx512_gfni()) ggml_cpu_register_k_gfni_avx512();
    ggml_cpu_register_legacy_avx512();
    ggml_cpu_register_q8_avx512();
    ggml_cpu_register_kt_search_avx512();
    ggml_cpu_register_interleaved_avx512();
    if (ggml_cpu_has_avx512_vbmi()) ggml_cpu_register_interleaved_vbmi_avx512();
}
