// AVX512 versions of the op kernels' vector primitives (see ops-common.h): the ISA description
// for the shared ones (ops-vec-kernels.h), and the blocked attention forms, f16 conversion and
// rope. 16 lanes, tails via mask registers. Entries not set here fall back to the AVX2 ones.
#include "avx512/register.h"
#include "ops-common.h"
#include "avx512/simd.h"
#include "ops-vec-kernels.h"

#include <algorithm>
#include <immintrin.h>

namespace {

inline __mmask16 tail(int64_t rem) { return (__mmask16) ((1u << rem) - 1); }

// The ISA description of ops-vec-kernels.h.
struct vec_avx512 {
    using vf = __m512;
    using mask = __mmask16;
    static constexpr int W = 16, kAcc = 2;
    static mask tail(int64_t rem) { return (__mmask16) ((1u << rem) - 1); }   // rem <= 16
    static vf zero() { return _mm512_setzero_ps(); }
    static vf set1(float v) { return _mm512_set1_ps(v); }
    static vf load(const float * p) { return _mm512_loadu_ps(p); }
    static void store(float * p, vf v) { _mm512_storeu_ps(p, v); }
    static vf loadm(const float * p, mask m) { return _mm512_maskz_loadu_ps(m, p); }
    static void storem(float * p, mask m, vf v) { _mm512_mask_storeu_ps(p, m, v); }
    static vf keep(vf v, mask m) { return _mm512_maskz_mov_ps(m, v); }
    static vf add(vf a, vf b) { return _mm512_add_ps(a, b); }
    static vf sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
    static vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
    static vf div(vf a, vf b) { return _mm512_div_ps(a, b); }
    static vf max(vf a, vf b) { return _mm512_max_ps(a, b); }
    static vf fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
    static vf exp(vf x) { return exp16(x); }
    static float hsum(vf v) { return _mm512_reduce_add_ps(v); }
};

// chunk masks for 4 registers starting at element i of n
inline void chunk_masks(int64_t n, int64_t i, __mmask16 m[4]) {
    for (int j = 0; j < 4; ++j) {
        const int64_t rem = n - i - 16 * j;
        m[j] = rem >= 16 ? (__mmask16) 0xffff : rem <= 0 ? (__mmask16) 0 : tail(rem);
    }
}

// NQ query rows x 4 key rows per pass: each loaded chunk feeds several FMAs.
template <int NQ>
void qk_block_t(int64_t n, const float * const * q, const float * const * k, int64_t nk, float * out, int64_t os) {
    for (int64_t t = 0; t < nk; t += 4) {
        const int64_t kk = std::min<int64_t>(4, nk - t);
        const float * kr[4] = { k[t], k[t + (kk > 1 ? 1 : 0)], k[t + (kk > 2 ? 2 : 0)], k[t + (kk > 3 ? 3 : 0)] };
        __m512 acc[NQ][4];
        for (int r = 0; r < NQ; ++r)
            for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 m = n - i >= 16 ? (__mmask16) 0xffff : tail(n - i);
            __m512 kv[4];
            for (int j = 0; j < 4; ++j) kv[j] = _mm512_maskz_loadu_ps(m, kr[j] + i);
            for (int r = 0; r < NQ; ++r) {
                const __m512 qv = _mm512_maskz_loadu_ps(m, q[r] + i);
                for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_fmadd_ps(qv, kv[j], acc[r][j]);
            }
        }
        // reduce with compile-time indices only, so acc stays in registers during the loop
        float red[NQ][4];
        for (int r = 0; r < NQ; ++r) reduce4_ps(acc[r], red[r]);
        for (int r = 0; r < NQ; ++r)
            for (int64_t j = 0; j < kk; ++j) out[r * os + t + j] = red[r][j];
    }
}

void qk_block_v(int64_t n, const float * const * q, int64_t nq, const float * const * k, int64_t nk, float * out, int64_t os) {
    switch (nq) {
        case 1: qk_block_t<1>(n, q, k, nk, out, os); break;
        case 2: qk_block_t<2>(n, q, k, nk, out, os); break;
        case 3: qk_block_t<3>(n, q, k, nk, out, os); break;
        default: qk_block_t<4>(n, q, k, nk, out, os); break;
    }
}

// NY output rows x 64 values in registers (16 accumulators); each value row is loaded once per
// chunk for all of them, so a load feeds NY FMAs
template <int NY>
void pv_block_t(int64_t n, float * const * y, const float * p, int64_t ps, const float * const * v, int64_t nt) {
    for (int64_t i = 0; i < n; i += 64) {
        __mmask16 m[4];
        chunk_masks(n, i, m);
        __m512 acc[NY][4];
        for (int r = 0; r < NY; ++r)
            for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_maskz_loadu_ps(m[c], y[r] + i + 16 * c);
        for (int64_t t = 0; t < nt; ++t) {
            __m512 vv[4];
            for (int c = 0; c < 4; ++c) vv[c] = _mm512_maskz_loadu_ps(m[c], v[t] + i + 16 * c);
            for (int r = 0; r < NY; ++r) {
                const __m512 pr = _mm512_set1_ps(p[r * ps + t]);
                for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(pr, vv[c], acc[r][c]);
            }
        }
        for (int r = 0; r < NY; ++r)
            for (int c = 0; c < 4; ++c) _mm512_mask_storeu_ps(y[r] + i + 16 * c, m[c], acc[r][c]);
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
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (x + i))));
    if (i < n) {
        const __mmask16 m = tail(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
    }
}

void rope_neox_v(int64_t n, float * y0, float * y1, const float * x0, const float * x1, const float * c, const float * s) {
    int64_t i = 0;
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16) 0xffff : tail(n - i);
        const __m512 a = _mm512_maskz_loadu_ps(m, x0 + i), b = _mm512_maskz_loadu_ps(m, x1 + i);
        const __m512 vc = _mm512_maskz_loadu_ps(m, c + i), vs = _mm512_maskz_loadu_ps(m, s + i);
        _mm512_mask_storeu_ps(y0 + i, m, _mm512_fmsub_ps(a, vc, _mm512_mul_ps(b, vs)));
        _mm512_mask_storeu_ps(y1 + i, m, _mm512_fmadd_ps(a, vs, _mm512_mul_ps(b, vc)));
    }
}

void rope_norm_v(int64_t n, float * y, const float * x, const float * cc, const float * ss) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16) 0xffff : tail(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        const __m512 swapped = _mm512_permute_ps(v, 0xB1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, cc + i),
                                                        _mm512_mul_ps(swapped, _mm512_maskz_loadu_ps(m, ss + i))));
    }
}

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_vec_avx512() {
    ggml_cpu_vec_fns f = {};
    vec_kernels<vec_avx512>::fill(f);
    f.qk_block = qk_block_v;
    f.pv_block = pv_block_v;
    f.f16_to_f32 = f16_to_f32_v;
    f.rope_neox = rope_neox_v;
    f.rope_norm = rope_norm_v;
    ggml_cpu_register_vec(GGML_CPU_ISA_AVX512, f);
}
