// AVX2 gemm kernels of the 8-row interleaved layouts (q4_0_r8, q8_0_r8, iq4_xs_r8): the panel
// gemm reading the woven groups directly (panel-r8.h), for batches and token generation alike.
// Their activations are the plain twins' (q8_0, q8_K), so the products equal the plain model's
// up to float summation order.
#include "avx2/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "avx2/panel-r8.h"

void ggml_cpu_register_interleaved_avx2() { kiln_panel::register_r8_gemms(GGML_CPU_ISA_AVX2); }
