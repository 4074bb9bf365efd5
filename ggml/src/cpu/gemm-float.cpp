// Reference (scalar) gemm kernels for f32, f16 and bf16 weights, and their registration.
// f16 weights multiply f32 activations (no rounding of the activations: the reference's f16
// products are exact to f32 precision); bf16 weights multiply bf16 activations, as the reference
// does, so that results match its rounding.
#include "cpu-traits.h"
#include "ggml-impl.h"

namespace {

template <typename T> inline float load(const T * p, int64_t i);
template <> inline float load<float>(const float * p, int64_t i) { return p[i]; }

struct f16_tag { uint16_t v; };
struct bf16_tag { uint16_t v; };
template <> inline float load<f16_tag>(const f16_tag * p, int64_t i) { return ggml_compute_fp16_to_fp32(p[i].v); }
template <> inline float load<bf16_tag>(const bf16_tag * p, int64_t i) { return ggml_compute_bf16_to_fp32(p[i].v); }

template <typename T, typename TX = T>
void gemm_ref(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
              size_t dst_stride, int nr, int nc) {
    for (int c = 0; c < nc; ++c) {
        const TX * xr = (const TX *) ((const char *) x + c * x_stride);
        for (int r = 0; r < nr; ++r) {
            const T * wr = (const T *) ((const char *) w + r * w_stride);
            double sum = 0.0;   // the reference sums in double: SIMD paths are compared to it
            for (int64_t i = 0; i < n; ++i) sum += (double) load(wr, i) * (double) load(xr, i);
            dst[c * dst_stride + r] = (float) sum;
        }
    }
}

void register_float_gemms() {
    ggml_cpu_register_gemm(GGML_TYPE_F32, GGML_CPU_ISA_SCALAR, GGML_TYPE_F32, gemm_ref<float>);
    ggml_cpu_register_gemm(GGML_TYPE_F16, GGML_CPU_ISA_SCALAR, GGML_TYPE_F32, gemm_ref<f16_tag, float>);
    ggml_cpu_register_gemm(GGML_TYPE_BF16, GGML_CPU_ISA_SCALAR, GGML_TYPE_BF16, gemm_ref<bf16_tag>);
}
GGML_REGISTER(register_float_gemms);

} // namespace
