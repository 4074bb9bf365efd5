// AVX512 encoders of the activation types q8_0, q8_1 and q8_K (and the registration of q8_KV's
// float product, avx2/gemm-q8-kv-r8.h); bit-exact with the reference
// encoders in quants/quants-q8.cpp (see the AVX2 versions for the rounding argument).
#include "avx512/register.h"
#include "avx2/gemm-q8-kv-r8.h"
#include "cpu-traits.h"
#include "quants/quants-common.h"

#include <immintrin.h>

#include <cfloat>
#include <cstring>

namespace {

// roundf(): half away from zero; v - trunc(v) is exact for |v| < 2^23.
inline __m512i round_away(__m512 v) {
    const __m512 t    = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
    const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 step = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(_mm512_set1_ps(1.0f)),
        _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int) 0x80000000u))));
    return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, step));
}

inline kiln_q8_scale encode32(const float * x, int8_t * qs, int * sum_out) {
    const __m512 v0 = _mm512_loadu_ps(x);
    const __m512 v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const kiln_q8_scale sc = kiln_q8_block_scale(amax);
    const __m512 vid = _mm512_set1_ps(sc.id);
    const __m512i q0 = round_away(_mm512_mul_ps(v0, vid));
    const __m512i q1 = round_away(_mm512_mul_ps(v1, vid));
    if (sum_out) *sum_out = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    _mm512_mask_cvtepi32_storeu_epi8(qs, 0xffff, q0);
    _mm512_mask_cvtepi32_storeu_epi8(qs + 16, 0xffff, q1);
    return sc;
}

void q8_0_from_float_avx512(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_0 *) vy;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        y[ib].d = encode32(x + ib * QK8_0, y[ib].qs, nullptr).d;
    }
}

void q8_1_from_float_avx512(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_1 *) vy;
    for (int64_t ib = 0; ib < n / QK8_1; ++ib) {
        int sum = 0;
        const kiln_q8_scale sc = encode32(x + ib * QK8_1, y[ib].qs, &sum);
        y[ib].d = sc.d;
        y[ib].s = GGML_FP32_TO_FP16((float) sum * sc.df);
    }
}

void q8_K_from_float_avx512(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_K *) vy;
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const float * xb = x + ib * QK_K;
        __m512 amax_v = _mm512_setzero_ps();
        for (int k = 0; k < QK_K; k += 16) amax_v = _mm512_max_ps(amax_v, _mm512_abs_ps(_mm512_loadu_ps(xb + k)));
        const float amax = _mm512_reduce_max_ps(amax_v);
        if (amax < FLT_MIN) {
            std::memset(&y[ib], 0, sizeof(y[ib]));
            continue;
        }
        // the reference keeps the first element of largest magnitude (its sign matters)
        float max = 0.0f;
        for (int k = 0; k < QK_K; k += 16) {
            const __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (m) { max = xb[k + __builtin_ctz((unsigned) m)]; break; }
        }
        const float iscale = -127.0f / max;
        const __m512 vs = _mm512_set1_ps(iscale);
        const __m512i cap = _mm512_set1_epi32(127);
        for (int g = 0; g < QK_K / 16; ++g) {
            const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(xb + 16 * g))), cap);
            y[ib].bsums[g] = (int16_t) _mm512_reduce_add_epi32(q);
            _mm512_mask_cvtepi32_storeu_epi8(y[ib].qs + 16 * g, 0xffff, q);
        }
        y[ib].d = 1.0f / iscale;
    }
}

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_q8_avx512() {
    ggml_cpu_register_from_float(GGML_TYPE_Q8_0, GGML_CPU_ISA_AVX512, q8_0_from_float_avx512);
    ggml_cpu_register_from_float(GGML_TYPE_Q8_1, GGML_CPU_ISA_AVX512, q8_1_from_float_avx512);
    ggml_cpu_register_from_float(GGML_TYPE_Q8_K, GGML_CPU_ISA_AVX512, q8_K_from_float_avx512);
    // q8_KV weights (f32 activations): the plain rows' float product (gemm-q8-kv-r8.h)
    ggml_cpu_register_gemm(GGML_TYPE_Q8_KV, GGML_CPU_ISA_AVX512, GGML_TYPE_F32, q8_kv::gemm<4>);
}
