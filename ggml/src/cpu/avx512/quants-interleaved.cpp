// AVX512 (VNNI) gemm kernels of the row-interleaved layouts read straight from their woven groups by
// the panel gemm (avx2/panel-r8*.h; the list is register_r8_gemms in panel-r8-types.h), for
// batches and token generation alike. bf16_r16 is in gemm-float.cpp.
#include "avx512/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "avx2/panel-r8-types.h"

void ggml_cpu_register_interleaved_avx512() { kiln_panel::register_r8_gemms(GGML_CPU_ISA_AVX512); }
