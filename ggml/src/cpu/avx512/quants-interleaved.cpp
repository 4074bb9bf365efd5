// AVX512 (VNNI) gemm kernels of the row-interleaved layouts read straight from their woven groups by
// the panel gemm (avx2/panel-r8*.h; the list is register_r8_gemms in panel-r8-types.h), for
// batches and token generation alike; the k-quant r4 layouts with 16-lane decoders
// (avx512/panel-r16-k.h). bf16_r16 is in gemm-float.cpp; q8_KV_r8, whose activations
// are f32, has a float product of its own (gemm-q8-kv-r8.h).
#include "avx512/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "avx2/panel-r8-types.h"
#include "avx512/panel-r16-k.h"
#include "avx2/gemm-q8-kv-r8.h"

void ggml_cpu_register_interleaved_avx512() {
    kiln_panel::register_r8_gemms(GGML_CPU_ISA_AVX512);
    kiln_panel::register_r16_k_gemms(GGML_CPU_ISA_AVX512);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_KV_R8, GGML_CPU_ISA_AVX512, GGML_TYPE_F32, q8_kv_r8::gemm<4>);
}
