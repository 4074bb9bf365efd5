// AVX512 versions of the op kernels' vector primitives (see ops-common.h): 16 lanes, tails via
// mask registers. Entries not set here fall back to the AVX2 ones.
#include "avx512/register.h"
#include "ops-common.h"
#include "avx512/simd.h"

#include <algorithm>
#include <immintrin.h>

namespace {

inline __mmask16 tail(int64_t rem) { return (__mmask16) ((1u << rem) - 1); }

inline __m512 silu16(__m512 x) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

inline __m512 gelu16(__m512 x) {
    const __m512 x2 = _mm512_mul_ps(x, x);
    const __m512 u = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-2.0f * 0.7978845608028654f), x),
                                   _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x2, _mm512_set1_ps(1.0f)));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(u)));
}

template <typename Op>
inline void map1(int64_t n, float * y, const float * x, Op op) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, op(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = tail(n - i);
        _mm512_mask_storeu_ps(y + i, m, op(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

template <typename Op>
inline void map2(int64_t n, float * z, const float * x, const float * y, Op op) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(z + i, op(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        const __mmask16 m = tail(n - i);
        _mm512_mask_storeu_ps(z + i, m, op(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
    }
}

void add16(int64_t n, float * z, const float * x, const float * y) { map2(n, z, x, y, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); }); }
void mul16(int64_t n, float * z, const float * x, const float * y) { map2(n, z, x, y, [](__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }); }

void scale_bias16(int64_t n, float * y, const float * x, float s, float b) {
    const __m512 vs = _mm512_set1_ps(s), vb = _mm512_set1_ps(b);
    map1(n, y, x, [&](__m512 a) { return _mm512_fmadd_ps(a, vs, vb); });
}

void silu_v(int64_t n, float * y, const float * x) { map1(n, y, x, silu16); }
void gelu_v(int64_t n, float * y, const float * x) { map1(n, y, x, gelu16); }
void swiglu_v(int64_t n, float * z, const float * g, const float * u) {
    map2(n, z, g, u, [](__m512 a, __m512 b) { return _mm512_mul_ps(silu16(a), b); });
}

template <typename Term>
inline float reduce_sum(int64_t n, const float * x, const float * y, Term term) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = term(s0, _mm512_loadu_ps(x + i), y ? _mm512_loadu_ps(y + i) : _mm512_setzero_ps());
        s1 = term(s1, _mm512_loadu_ps(x + i + 16), y ? _mm512_loadu_ps(y + i + 16) : _mm512_setzero_ps());
    }
    for (; i + 16 <= n; i += 16) s0 = term(s0, _mm512_loadu_ps(x + i), y ? _mm512_loadu_ps(y + i) : _mm512_setzero_ps());
    if (i < n) {
        const __mmask16 m = tail(n - i);
        s1 = term(s1, _mm512_maskz_loadu_ps(m, x + i), y ? _mm512_maskz_loadu_ps(m, y + i) : _mm512_setzero_ps());
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

float sum_v(int64_t n, const float * x) {
    return reduce_sum(n, x, nullptr, [](__m512 s, __m512 a, __m512) { return _mm512_add_ps(s, a); });
}
float sum_sq_v(int64_t n, const float * x) {
    return reduce_sum(n, x, nullptr, [](__m512 s, __m512 a, __m512) { return _mm512_fmadd_ps(a, a, s); });
}
float dot_v(int64_t n, const float * x, const float * y) {
    return reduce_sum(n, x, y, [](__m512 s, __m512 a, __m512 b) { return _mm512_fmadd_ps(a, b, s); });
}

float max_v(int64_t n, const float * x) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
    if (i < n) m = _mm512_mask_max_ps(m, tail(n - i), m, _mm512_maskz_loadu_ps(tail(n - i), x + i));
    return _mm512_reduce_max_ps(m);
}

float exp_sum_v(int64_t n, float * y, const float * x, float mx) {
    const __m512 vm = _mm512_set1_ps(mx);
    __m512 s = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        _mm512_storeu_ps(y + i, e);
        s = _mm512_add_ps(s, e);
    }
    if (i < n) {
        const __mmask16 m = tail(n - i);
        const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm)));
        _mm512_mask_storeu_ps(y + i, m, e);
        s = _mm512_add_ps(s, e);
    }
    return _mm512_reduce_add_ps(s);
}

void axpy_v(int64_t n, float * y, float a, const float * x) {
    const __m512 va = _mm512_set1_ps(a);
    map2(n, y, x, y, [&](__m512 xv, __m512 yv) { return _mm512_fmadd_ps(va, xv, yv); });
}

// chunk masks for 4 registers starting at element i of n
inline void chunk_masks(int64_t n, int64_t i, __mmask16 m[4]) {
    for (int j = 0; j < 4; ++j) {
        const int64_t rem = n - i - 16 * j;
        m[j] = rem >= 16 ? (__mmask16) 0xffff : rem <= 0 ? (__mmask16) 0 : tail(rem);
    }
}

// four rows per pass: each chunk of x is loaded once for all of them
void dot_rows_v(int64_t n, const float * x, const float * const * rows, int64_t nr, float * out) {
    for (int64_t t = 0; t < nr; t += 4) {
        const int64_t k = std::min<int64_t>(4, nr - t);
        const float * r0 = rows[t];
        const float * r1 = rows[t + (k > 1 ? 1 : 0)];
        const float * r2 = rows[t + (k > 2 ? 2 : 0)];
        const float * r3 = rows[t + (k > 3 ? 3 : 0)];
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            const __m512 xv = _mm512_loadu_ps(x + i);
            a0 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(r0 + i), a0);
            a1 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(r1 + i), a1);
            a2 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(r2 + i), a2);
            a3 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(r3 + i), a3);
        }
        if (i < n) {
            const __mmask16 m = tail(n - i);
            const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
            a0 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, r0 + i), a0);
            a1 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, r1 + i), a1);
            a2 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, r2 + i), a2);
            a3 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, r3 + i), a3);
        }
        const float s[4] = { _mm512_reduce_add_ps(a0), _mm512_reduce_add_ps(a1), _mm512_reduce_add_ps(a2),
                             _mm512_reduce_add_ps(a3) };
        for (int64_t j = 0; j < k; ++j) out[t + j] = s[j];
    }
}

// y stays in registers (64 values at a time) while all rows are added into it
void axpy_rows_v(int64_t n, float * y, const float * a, const float * const * rows, int64_t nr) {
    for (int64_t i = 0; i < n; i += 64) {
        __mmask16 m[4];
        chunk_masks(n, i, m);
        __m512 y0 = _mm512_maskz_loadu_ps(m[0], y + i), y1 = _mm512_maskz_loadu_ps(m[1], y + i + 16);
        __m512 y2 = _mm512_maskz_loadu_ps(m[2], y + i + 32), y3 = _mm512_maskz_loadu_ps(m[3], y + i + 48);
        for (int64_t t = 0; t < nr; ++t) {
            const __m512 va = _mm512_set1_ps(a[t]);
            const float * r = rows[t] + i;
            y0 = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m[0], r), y0);
            y1 = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m[1], r + 16), y1);
            y2 = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m[2], r + 32), y2);
            y3 = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m[3], r + 48), y3);
        }
        _mm512_mask_storeu_ps(y + i, m[0], y0);
        _mm512_mask_storeu_ps(y + i + 16, m[1], y1);
        _mm512_mask_storeu_ps(y + i + 32, m[2], y2);
        _mm512_mask_storeu_ps(y + i + 48, m[3], y3);
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
    f.add = add16;
    f.mul = mul16;
    f.scale_bias = scale_bias16;
    f.silu = silu_v;
    f.gelu = gelu_v;
    f.swiglu = swiglu_v;
    f.sum = sum_v;
    f.sum_sq = sum_sq_v;
    f.max = max_v;
    f.exp_sum = exp_sum_v;
    f.dot = dot_v;
    f.axpy = axpy_v;
    f.dot_rows = dot_rows_v;
    f.axpy_rows = axpy_rows_v;
    f.qk_block = qk_block_v;
    f.pv_block = pv_block_v;
    f.f16_to_f32 = f16_to_f32_v;
    f.rope_neox = rope_neox_v;
    f.rope_norm = rope_norm_v;
    ggml_cpu_register_vec(GGML_CPU_ISA_AVX512, f);
}
