// AVX2 encoders of the activation types q8_0, q8_1 and q8_K (and the registration of q8_KV's
// float product, gemm-q8-kv-r8.h). Each reproduces the reference
// encoder in quants/quants-q8.cpp bit for bit (same scale arithmetic, same rounding rule), so
// that the choice of ISA never changes a result beyond the gemm's float summation order.
#include "avx2/register.h"
#include "avx2/gemm-q8-kv-r8.h"
#include "cpu-traits.h"
#include "quants/quants-common.h"

#include <immintrin.h>

#include <cfloat>
#include <cstring>

namespace {

inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

// roundf(): round half away from zero. v - trunc(v) is exact for |v| < 2^23.
inline __m256i round_away(__m256 v) {
    const __m256 t    = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 frac = _mm256_and_ps(_mm256_sub_ps(v, t), abs_mask);
    const __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_andnot_ps(abs_mask, v)); // +-1
    const __m256 up   = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, step)));
}

// Pack 4 x 8 int32 (values within int8) into 32 int8 in order.
inline __m256i pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b);      // a0-3 b0-3 | a4-7 b4-7
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packs_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Shared by q8_0 and q8_1: returns the block scale and writes the 32 quants.
inline kiln_q8_scale encode32(const float * x, int8_t * qs, __m256i * sum_out) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_and_ps(v[k], abs_mask));
    }
    const kiln_q8_scale sc = kiln_q8_block_scale(hmax8(amax));
    const float id = sc.id;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = round_away(_mm256_mul_ps(v[k], vid));
    if (sum_out) {
        *sum_out = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    }
    _mm256_storeu_si256((__m256i *) qs, pack_i32_to_i8(q[0], q[1], q[2], q[3]));
    return sc;
}

inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

void q8_0_from_float_avx2(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_0 *) vy;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        y[ib].d = encode32(x + ib * QK8_0, y[ib].qs, nullptr).d;
    }
}

void q8_1_from_float_avx2(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_1 *) vy;
    for (int64_t ib = 0; ib < n / QK8_1; ++ib) {
        __m256i sum;
        const kiln_q8_scale sc = encode32(x + ib * QK8_1, y[ib].qs, &sum);
        y[ib].d = sc.d;
        y[ib].s = GGML_FP32_TO_FP16((float) hsum_i32(sum) * sc.df);
    }
}

void q8_K_from_float_avx2(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_K *) vy;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const float * xb = x + ib * QK_K;
        __m256 amax_v = _mm256_setzero_ps();
        for (int k = 0; k < QK_K; k += 8) amax_v = _mm256_max_ps(amax_v, _mm256_and_ps(_mm256_loadu_ps(xb + k), abs_mask));
        const float amax = hmax8(amax_v);
        if (amax < FLT_MIN) {
            std::memset(&y[ib], 0, sizeof(y[ib]));
            continue;
        }
        // the reference keeps the first element of largest magnitude (its sign matters)
        float max = 0.0f;
        for (int k = 0; k < QK_K; k += 8) {
            const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(xb + k), abs_mask),
                                                           _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (m) { max = xb[k + __builtin_ctz(m)]; break; }
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i cap = _mm256_set1_epi32(127);
        for (int g = 0; g < QK_K / 32; ++g) {
            __m256i q[4];
            for (int k = 0; k < 4; ++k) {
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(xb + 32 * g + 8 * k))), cap);
            }
            y[ib].bsums[2 * g + 0] = (int16_t) hsum_i32(_mm256_add_epi32(q[0], q[1]));
            y[ib].bsums[2 * g + 1] = (int16_t) hsum_i32(_mm256_add_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *) (y[ib].qs + 32 * g), pack_i32_to_i8(q[0], q[1], q[2], q[3]));
        }
        y[ib].d = 1.0f / iscale;
    }
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_q8_avx2() {
    ggml_cpu_register_from_float(GGML_TYPE_Q8_0, GGML_CPU_ISA_AVX2, q8_0_from_float_avx2);
    ggml_cpu_register_from_float(GGML_TYPE_Q8_1, GGML_CPU_ISA_AVX2, q8_1_from_float_avx2);
    ggml_cpu_register_from_float(GGML_TYPE_Q8_K, GGML_CPU_ISA_AVX2, q8_K_from_float_avx2);
    // q8_KV weights (f32 activations): the plain rows' float product (gemm-q8-kv-r8.h)
    ggml_cpu_register_gemm(GGML_TYPE_Q8_KV, GGML_CPU_ISA_AVX2, GGML_TYPE_F32, q8_kv::gemm<2>);
}
