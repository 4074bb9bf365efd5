// The trellis (KT) quantizers' seed search (cpu-traits.h, ggml_kt_errors_t), 16 seeds per step,
// two steps interleaved for the FMA latency: the weighted squared distance of a target run to
// every run of the codebook (stored run-position major).
#include "avx512/register.h"
#include "cpu-traits.h"

#include <immintrin.h>

namespace {

void kt_errors_avx512(const float * cb, int count, int n, const float * t, const float * w, float * err) {
    int s = 0;
    for (; s + 32 <= count; s += 32) {
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        for (int m = 0; m < n; ++m) {
            const float * row = cb + (size_t) m * count + s;
            const __m512 tm = _mm512_set1_ps(t[m]), wm = _mm512_set1_ps(w[m]);
            const __m512 d0 = _mm512_sub_ps(tm, _mm512_loadu_ps(row));
            const __m512 d1 = _mm512_sub_ps(tm, _mm512_loadu_ps(row + 16));
            acc0 = _mm512_fmadd_ps(_mm512_mul_ps(wm, d0), d0, acc0);
            acc1 = _mm512_fmadd_ps(_mm512_mul_ps(wm, d1), d1, acc1);
        }
        _mm512_storeu_ps(err + s, acc0);
        _mm512_storeu_ps(err + s + 16, acc1);
    }
    for (; s < count; s += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int m = 0; m < n; ++m) {
            const __m512 d = _mm512_sub_ps(_mm512_set1_ps(t[m]), _mm512_loadu_ps(cb + (size_t) m * count + s));
            acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(w[m]), d), d, acc);
        }
        _mm512_storeu_ps(err + s, acc);
    }
}

} // namespace

void ggml_cpu_register_kt_search_avx512() { ggml_cpu_register_kt_errors(GGML_CPU_ISA_AVX512, kt_errors_avx512); }
