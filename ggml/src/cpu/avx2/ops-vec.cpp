// AVX2/FMA/F16C versions of the op kernels' vector primitives (see ops-common.h): the ISA
// description for the shared ones (ops-vec-kernels.h), and the blocked attention forms,
// conversions and rope. Tails use masked loads and stores, so every element goes through the
// same arithmetic as the body.
#include "avx2/register.h"
#include "ops-common.h"
#include "avx2/simd.h"
#include "ops-vec-kernels.h"

#include <algorithm>
#include <immintrin.h>

namespace {

inline __m256i tail_mask(int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int) rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The ISA description of ops-vec-kernels.h.
struct vec_avx2 {
    using vf = __m256;
    using mask = __m256i;
    static constexpr int W = 8, kAcc = 2;
    static mask tail(int64_t rem) { return tail_mask(rem); }
    static vf zero() { return _mm256_setzero_ps(); }
    static vf set1(float v) { return _mm256_set1_ps(v); }
    static vf load(const float * p) { return _mm256_loadu_ps(p); }
    static void store(float * p, vf v) { _mm256_storeu_ps(p, v); }
    static vf loadm(const float * p, mask m) { return _mm256_maskload_ps(p, m); }
    static void storem(float * p, mask m, vf v) { _mm256_maskstore_ps(p, m, v); }
    static vf keep(vf v, mask m) { return _mm256_and_ps(v, _mm256_castsi256_ps(m)); }
    static vf add(vf a, vf b) { return _mm256_add_ps(a, b); }
    static vf sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
    static vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
    static vf div(vf a, vf b) { return _mm256_div_ps(a, b); }
    static vf max(vf a, vf b) { return _mm256_max_ps(a, b); }
    static vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
    static vf exp(vf x) { return exp8(x); }
    static float hsum(vf v) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
};

// NQ (<= 2) query rows x 4 key rows per pass; 16 ymm registers leave no room for more.
template <int NQ>
void qk_pass(int64_t n, const float * const * q, const float * const * kr, __m256 (&acc)[2][4]) {
    for (int r = 0; r < NQ; ++r)
        for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 kv[4];
        for (int j = 0; j < 4; ++j) kv[j] = _mm256_loadu_ps(kr[j] + i);
        for (int r = 0; r < NQ; ++r) {
            const __m256 qv = _mm256_loadu_ps(q[r] + i);
            for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_fmadd_ps(qv, kv[j], acc[r][j]);
        }
    }
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        __m256 kv[4];
        for (int j = 0; j < 4; ++j) kv[j] = _mm256_maskload_ps(kr[j] + i, m);
        for (int r = 0; r < NQ; ++r) {
            const __m256 qv = _mm256_maskload_ps(q[r] + i, m);
            for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_fmadd_ps(qv, kv[j], acc[r][j]);
        }
    }
}

void qk_block_v(int64_t n, const float * const * q, int64_t nq, const float * const * k, int64_t nk, float * out, int64_t os) {
    for (int64_t t = 0; t < nk; t += 4) {
        const int64_t kk = std::min<int64_t>(4, nk - t);
        const float * kr[4] = { k[t], k[t + (kk > 1 ? 1 : 0)], k[t + (kk > 2 ? 2 : 0)], k[t + (kk > 3 ? 3 : 0)] };
        for (int64_t r0 = 0; r0 < nq; r0 += 2) {
            __m256 acc[2][4];
            const int nr = nq - r0 >= 2 ? 2 : 1;
            if (nr == 2) {
                qk_pass<2>(n, q + r0, kr, acc);
            } else {
                qk_pass<1>(n, q + r0, kr, acc);
            }
            float red[2][4];
            for (int r = 0; r < nr; ++r) reduce4_ps(acc[r], red[r]);
            for (int r = 0; r < nr; ++r)
                for (int64_t j = 0; j < kk; ++j) out[(r0 + r) * os + t + j] = red[r][j];
        }
    }
}

// NY (<= 4) output rows x 16 values in registers per pass over the value rows
template <int NY>
void pv_block_t(int64_t n, float * const * y, const float * p, int64_t ps, const float * const * v, int64_t nt) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m256i m0 = tail_mask(std::min<int64_t>(8, n - i));
        const __m256i m1 = tail_mask(std::max<int64_t>(0, std::min<int64_t>(8, n - i - 8)));
        __m256 acc[NY][2];
        for (int r = 0; r < NY; ++r) {
            acc[r][0] = _mm256_maskload_ps(y[r] + i, m0);
            acc[r][1] = _mm256_maskload_ps(y[r] + i + 8, m1);
        }
        for (int64_t t = 0; t < nt; ++t) {
            const __m256 v0 = _mm256_maskload_ps(v[t] + i, m0);
            const __m256 v1 = _mm256_maskload_ps(v[t] + i + 8, m1);
            for (int r = 0; r < NY; ++r) {
                const __m256 pr = _mm256_broadcast_ss(p + r * ps + t);
                acc[r][0] = _mm256_fmadd_ps(pr, v0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(pr, v1, acc[r][1]);
            }
        }
        for (int r = 0; r < NY; ++r) {
            _mm256_maskstore_ps(y[r] + i, m0, acc[r][0]);
            _mm256_maskstore_ps(y[r] + i + 8, m1, acc[r][1]);
        }
    }
}

void pv_block_v(int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny, const float * const * v, int64_t nt) {
    switch (ny) {
        case 1: pv_block_t<1>(n, y, p, ps, v, nt); break;
        case 2: pv_block_t<2>(n, y, p, ps, v, nt); break;
        case 3: pv_block_t<3>(n, y, p, ps, v, nt); break;
        default: pv_block_t<4>(n, y, p, ps, v, nt); break;
    }
}

void f16_to_f32_v(int64_t n, float * y, const uint16_t * x) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (x + i))));
    for (; i < n; ++i) y[i] = ggml_compute_fp16_to_fp32(x[i]);
}

void f32_to_f16_v(int64_t n, uint16_t * y, const float * x) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128((__m128i *) (y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; ++i) y[i] = ggml_compute_fp32_to_fp16(x[i]);
}

void bf16_to_f32_v(int64_t n, float * y, const uint16_t * x) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) (x + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; ++i) y[i] = ggml_compute_bf16_to_fp32(x[i]);
}

void rope_neox_v(int64_t n, float * y0, float * y1, const float * x0, const float * x1, const float * c, const float * s) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 a = _mm256_loadu_ps(x0 + i), b = _mm256_loadu_ps(x1 + i);
        const __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
        _mm256_storeu_ps(y0 + i, _mm256_fmsub_ps(a, vc, _mm256_mul_ps(b, vs)));
        _mm256_storeu_ps(y1 + i, _mm256_fmadd_ps(a, vs, _mm256_mul_ps(b, vc)));
    }
    for (; i < n; ++i) {
        const float a = x0[i], b = x1[i];
        y0[i] = a * c[i] - b * s[i];
        y1[i] = a * s[i] + b * c[i];
    }
}

void rope_norm_v(int64_t n, float * y, const float * x, const float * cc, const float * ss) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 swapped = _mm256_permute_ps(v, 0xB1);   // (x1, x0, x3, x2, ...)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(v, _mm256_loadu_ps(cc + i), _mm256_mul_ps(swapped, _mm256_loadu_ps(ss + i))));
    }
    for (; i < n; i += 2) {
        const float a = x[i], b = x[i + 1];
        y[i] = a * cc[i] + b * ss[i];
        y[i + 1] = b * cc[i + 1] + a * ss[i + 1];
    }
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_vec_avx2() {
    ggml_cpu_vec_fns f = {};
    vec_kernels<vec_avx2>::fill(f);
    f.qk_block = qk_block_v;
    f.pv_block = pv_block_v;
    f.f16_to_f32 = f16_to_f32_v;
    f.f32_to_f16 = f32_to_f16_v;
    f.bf16_to_f32 = bf16_to_f32_v;
    f.rope_neox = rope_neox_v;
    f.rope_norm = rope_norm_v;
    ggml_cpu_register_vec(GGML_CPU_ISA_AVX2, f);
}
