// Exact products for measurement (ggml_cpu_set_exact_products in ggml-cpu.h): each weight row
// decoded to floats by the type's own dequantizer, times the f32 activations as they are (no
// rounding to q8_0 / q8_K), summed in double. Every ISA level then computes the same numbers, so
// a perplexity or KL-divergence run measures the weights themselves: the "true" KLD of a
// quantized file, free of the activation rounding (q8_0 per 32 in batches) whose noise moves a
// random-weight model's KLD by about 1% from one product path to the next (synth-deepseek2 Q4_K_M:
// 0.434 exact; 0.439 / 0.442 / 0.441 at AVX512 / AVX2 / scalar). Slow; not an inference path.
// Plain C++: it runs before and without the ISA kernels.
#include "cpu-traits.h"
#include "ggml-impl.h"

#include <cstring>
#include <utility>
#include <vector>

namespace {

template <int T>
void gemm_exact(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
                int nr, int nc) {
    thread_local std::vector<float> row;
    row.resize((size_t) n);
    const ggml_type_traits * tr = ggml_get_type_traits((ggml_type) T);
    for (int r = 0; r < nr; ++r) {
        const char * wr = (const char *) w + r * w_stride;
        if (T == GGML_TYPE_F32) std::memcpy(row.data(), wr, (size_t) n * sizeof(float));
        else tr->to_float(wr, row.data(), n);
        for (int c = 0; c < nc; ++c) {
            const float * xc = (const float *) ((const char *) x + c * x_stride);
            double s = 0;   // float x float is exact in double: only the sum rounds
            for (int64_t k = 0; k < n; ++k) s += (double) row[k] * (double) xc[k];
            dst[c * dst_stride + r] = (float) s;
        }
    }
}

template <size_t... I>
ggml_gemm_t gemm_exact_of(ggml_type t, std::index_sequence<I...>) {
    static const ggml_gemm_t table[] = { gemm_exact<(int) I>... };
    return table[t];
}

} // namespace

ggml_gemm_t ggml_cpu_exact_gemm(ggml_type type) {
    if (type < 0 || type >= GGML_TYPE_COUNT) return nullptr;
    const ggml_type_traits * tr = ggml_get_type_traits(type);
    // interleaved layouts decode groups of rows, not one row: they keep their own kernels
    if (tr->nrows_interleaved > 1) return nullptr;
    if (type != GGML_TYPE_F32 && !tr->to_float) return nullptr;
    return gemm_exact_of(type, std::make_index_sequence<GGML_TYPE_COUNT>{});
}
