// The trellis (KT) quantizers' seed search (cpu-traits.h, ggml_kt_errors_t), 8 seeds per step:
// the weighted squared distance of a target run to every run of the codebook, which is stored
// run-position major so that one load takes position m of 8 consecutive seeds.
#include "avx2/register.h"
#include "cpu-traits.h"

#include <immintrin.h>

namespace {

void kt_errors_avx2(const float * cb, int count, int n, const float * t, const float * w, float * err) {
    for (int s = 0; s < count; s += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int m = 0; m < n; ++m) {
            const __m256 d = _mm256_sub_ps(_mm256_set1_ps(t[m]), _mm256_loadu_ps(cb + (size_t) m * count + s));
            acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(w[m]), d), d, acc);
        }
        _mm256_storeu_ps(err + s, acc);
    }
}

} // namespace

void ggml_cpu_register_kt_search_avx2() { ggml_cpu_register_kt_errors(GGML_CPU_ISA_AVX2, kt_errors_avx2); }
