// NEON versions of the op kernels' vector primitives (see ops-common.h): element-wise maps,
// activations, reductions, softmax's exp, the attention dot/axpy rows, conversions and rope.
// Bodies run four lanes at a time; tails go through a zero-padded vector (simd.h), so every
// element sees the same arithmetic. The blocked attention forms (qk_block, pv_block) keep up to
// four query rows in registers against four key rows (16 accumulators of the 32 registers), so
// a tile of f16 / q8_0 keys and values, decoded once to f32, is read once per 4 query rows. The
// same forms read f16 / bf16 / q8_0 / q4_0 cache rows in place (qk_cache, pv_cache), widening
// them in registers, so a decode step streams the cache once and writes no f32 copy.
#include "neon/register.h"
#include "neon/simd.h"
#include "ggml-impl.h"
#include "ops-common.h"
#include "quants/quants-blocks.h"

#include <cmath>

namespace {

inline float32x4_t silu4(float32x4_t x) {
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), neon_exp(vnegq_f32(x))));
}

// x * sigmoid(2u), u = sqrt(2/pi) * (x + 0.044715 x^3): the tanh form of GELU, as the reference
inline float32x4_t gelu4(float32x4_t x) {
    const float32x4_t x2 = vmulq_f32(x, x);
    const float32x4_t u = vmulq_f32(vmulq_n_f32(x, -2.0f * 0.7978845608028654f),
                                    vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0.044715f), x2));
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), neon_exp(u)));
}

template <typename Op>
inline void map1(int64_t n, float * y, const float * x, Op op) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, op(vld1q_f32(x + i)));
    if (i < n) neon_store_part(y + i, op(neon_load_part(x + i, n - i)), n - i);
}

template <typename Op>
inline void map2(int64_t n, float * z, const float * x, const float * y, Op op) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(z + i, op(vld1q_f32(x + i), vld1q_f32(y + i)));
    if (i < n) neon_store_part(z + i, op(neon_load_part(x + i, n - i), neon_load_part(y + i, n - i)), n - i);
}

void add_v(int64_t n, float * z, const float * x, const float * y) { map2(n, z, x, y, [](float32x4_t a, float32x4_t b) { return vaddq_f32(a, b); }); }
void sub_v(int64_t n, float * z, const float * x, const float * y) { map2(n, z, x, y, [](float32x4_t a, float32x4_t b) { return vsubq_f32(a, b); }); }
void mul_v(int64_t n, float * z, const float * x, const float * y) { map2(n, z, x, y, [](float32x4_t a, float32x4_t b) { return vmulq_f32(a, b); }); }
// padded lanes compute 0/0; they are never stored
void div_v(int64_t n, float * z, const float * x, const float * y) { map2(n, z, x, y, [](float32x4_t a, float32x4_t b) { return vdivq_f32(a, b); }); }

void scale_bias_v(int64_t n, float * y, const float * x, float s, float b) {
    const float32x4_t vs = vdupq_n_f32(s), vb = vdupq_n_f32(b);
    map1(n, y, x, [&](float32x4_t a) { return vfmaq_f32(vb, a, vs); });
}

void silu_v(int64_t n, float * y, const float * x) { map1(n, y, x, silu4); }
void gelu_v(int64_t n, float * y, const float * x) { map1(n, y, x, gelu4); }
void swiglu_v(int64_t n, float * z, const float * g, const float * u) {
    map2(n, z, g, u, [](float32x4_t a, float32x4_t b) { return vmulq_f32(silu4(a), b); });
}

// Reductions keep four accumulators: the FMA latency is about four cycles on most Arm cores.
// Padded tail lanes are zero, which adds nothing to a sum of products or squares.
template <typename Term>
inline float reduce_sum(int64_t n, const float * x, const float * y, Term term) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    const float32x4_t zero = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = term(s0, vld1q_f32(x + i), y ? vld1q_f32(y + i) : zero);
        s1 = term(s1, vld1q_f32(x + i + 4), y ? vld1q_f32(y + i + 4) : zero);
        s2 = term(s2, vld1q_f32(x + i + 8), y ? vld1q_f32(y + i + 8) : zero);
        s3 = term(s3, vld1q_f32(x + i + 12), y ? vld1q_f32(y + i + 12) : zero);
    }
    for (; i + 4 <= n; i += 4) s0 = term(s0, vld1q_f32(x + i), y ? vld1q_f32(y + i) : zero);
    if (i < n) s1 = term(s1, neon_load_part(x + i, n - i), y ? neon_load_part(y + i, n - i) : zero);
    return vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
}

float sum_v(int64_t n, const float * x) {
    return reduce_sum(n, x, nullptr, [](float32x4_t s, float32x4_t a, float32x4_t) { return vaddq_f32(s, a); });
}
float sum_sq_v(int64_t n, const float * x) {
    return reduce_sum(n, x, nullptr, [](float32x4_t s, float32x4_t a, float32x4_t) { return vfmaq_f32(s, a, a); });
}
float dot_v(int64_t n, const float * x, const float * y) {
    return reduce_sum(n, x, y, [](float32x4_t s, float32x4_t a, float32x4_t b) { return vfmaq_f32(s, a, b); });
}

float max_v(int64_t n, const float * x) {
    float32x4_t m = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) m = vmaxq_f32(m, vld1q_f32(x + i));
    float r = vmaxvq_f32(m);
    for (; i < n; ++i) r = x[i] > r ? x[i] : r;
    return r;
}

float exp_sum_v(int64_t n, float * y, const float * x, float mx) {
    const float32x4_t vm = vdupq_n_f32(mx);
    float32x4_t s = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t e = neon_exp(vsubq_f32(vld1q_f32(x + i), vm));
        vst1q_f32(y + i, e);
        s = vaddq_f32(s, e);
    }
    float total = vaddvq_f32(s);
    if (i < n) {
        // padded lanes would add exp(0 - mx): only the real ones are summed
        float t[4];
        vst1q_f32(t, neon_exp(vsubq_f32(neon_load_part(x + i, n - i), vm)));
        for (int64_t j = 0; j < n - i; ++j) {
            y[i + j] = t[j];
            total += t[j];
        }
    }
    return total;
}

void axpy_v(int64_t n, float * y, float a, const float * x) {
    const float32x4_t va = vdupq_n_f32(a);
    map2(n, y, x, y, [&](float32x4_t xv, float32x4_t yv) { return vfmaq_f32(yv, va, xv); });
}

// four key rows per pass share each load of x
void dot_rows_v(int64_t n, const float * x, const float * const * rows, int64_t nr, float * out) {
    for (int64_t t = 0; t < nr; t += 4) {
        const int64_t k = nr - t < 4 ? nr - t : 4;
        const float * r0 = rows[t];
        const float * r1 = rows[t + (k > 1 ? 1 : 0)];
        const float * r2 = rows[t + (k > 2 ? 2 : 0)];
        const float * r3 = rows[t + (k > 3 ? 3 : 0)];
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            const float32x4_t xv = vld1q_f32(x + i);
            a0 = vfmaq_f32(a0, xv, vld1q_f32(r0 + i));
            a1 = vfmaq_f32(a1, xv, vld1q_f32(r1 + i));
            a2 = vfmaq_f32(a2, xv, vld1q_f32(r2 + i));
            a3 = vfmaq_f32(a3, xv, vld1q_f32(r3 + i));
        }
        if (i < n) {
            const int64_t m = n - i;
            const float32x4_t xv = neon_load_part(x + i, m);
            a0 = vfmaq_f32(a0, xv, neon_load_part(r0 + i, m));
            a1 = vfmaq_f32(a1, xv, neon_load_part(r1 + i, m));
            a2 = vfmaq_f32(a2, xv, neon_load_part(r2 + i, m));
            a3 = vfmaq_f32(a3, xv, neon_load_part(r3 + i, m));
        }
        const float s[4] = { vaddvq_f32(a0), vaddvq_f32(a1), vaddvq_f32(a2), vaddvq_f32(a3) };
        for (int64_t j = 0; j < k; ++j) out[t + j] = s[j];
    }
}

// Row readers of the blocked attention forms: four values of a row from value i (a multiple of
// 4) as f32. f32 rows (decoded tiles) may end in a partial vector; cache rows read in place
// (qk_cache / pv_cache) have a length that is a multiple of 16 (ggml_cpu_attn_cache_type), so
// their readers have no tail form.
struct row_f32 {
    static constexpr bool tails = true;
    static float32x4_t load(const void * r, int64_t i) { return vld1q_f32((const float *) r + i); }
    static float32x4_t load_part(const void * r, int64_t i, int64_t m) { return neon_load_part((const float *) r + i, m); }
};
struct row_f16 {   // FCVTL: base Armv8
    static constexpr bool tails = false;
    static float32x4_t load(const void * r, int64_t i) {
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *) r + i)));
    }
};
struct row_bf16 {   // bf16 is the high half of an f32
    static constexpr bool tails = false;
    static float32x4_t load(const void * r, int64_t i) {
        return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *) r + i), 16));
    }
};
// The four bytes of a block's quants from byte j (j + 4 <= 32: nothing past the block is read).
inline uint8x8_t block_bytes4(const uint8_t * qs, int64_t j) {
    uint32_t w;
    std::memcpy(&w, qs + j, 4);
    return vreinterpret_u8_u32(vdup_n_u32(w));
}
struct row_q8_0 {   // value = d * q
    static constexpr bool tails = false;
    static float32x4_t load(const void * r, int64_t i) {
        const block_q8_0 * b = (const block_q8_0 *) r + i / QK8_0;
        const int8x8_t q = vreinterpret_s8_u8(block_bytes4((const uint8_t *) b->qs, i % QK8_0));
        const float32x4_t qf = vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(q))));
        return vmulq_n_f32(qf, ggml_compute_fp16_to_fp32(b->d));
    }
};
struct row_q4_0 {   // value = d * (q - 8); values 0..15 are the low nibbles, 16..31 the high ones
    static constexpr bool tails = false;
    static float32x4_t load(const void * r, int64_t i) {
        const block_q4_0 * b = (const block_q4_0 *) r + i / QK4_0;
        const int64_t j = i % QK4_0;
        uint8x8_t q = block_bytes4(b->qs, j % 16);
        q = j < 16 ? vand_u8(q, vdup_n_u8(0x0F)) : vshr_n_u8(q, 4);
        const float32x4_t qf = vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(q))));
        const float d = ggml_compute_fp16_to_fp32(b->d);
        return vfmaq_n_f32(vdupq_n_f32(-8.0f * d), qf, d);
    }
};

// NQ (<= 4) query rows x kk (<= 4) key rows: out[r * os + j] = dot(q[r], kr[j]); each chunk of
// the key rows is read (widened) once for all NQ query rows
template <typename L, int NQ>
void qk_pass(int64_t n, const float * const * q, const void * const * kr, int64_t kk, float * out, int64_t os) {
    float32x4_t acc[NQ][4];
    for (int r = 0; r < NQ; ++r)
        for (int j = 0; j < 4; ++j) acc[r][j] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t kv[4];
        for (int j = 0; j < 4; ++j) kv[j] = L::load(kr[j], i);
        for (int r = 0; r < NQ; ++r) {
            const float32x4_t qv = vld1q_f32(q[r] + i);
            for (int j = 0; j < 4; ++j) acc[r][j] = vfmaq_f32(acc[r][j], qv, kv[j]);
        }
    }
    if constexpr (L::tails) {
        if (i < n) {
            float32x4_t kv[4];
            for (int j = 0; j < 4; ++j) kv[j] = L::load_part(kr[j], i, n - i);
            for (int r = 0; r < NQ; ++r) {
                const float32x4_t qv = neon_load_part(q[r] + i, n - i);
                for (int j = 0; j < 4; ++j) acc[r][j] = vfmaq_f32(acc[r][j], qv, kv[j]);
            }
        }
    }
    for (int r = 0; r < NQ; ++r)
        for (int64_t j = 0; j < kk; ++j) out[r * os + j] = vaddvq_f32(acc[r][j]);
}

// nq query rows, taken four at a time
template <typename L>
void qk_rows(int64_t n, const float * const * q, int64_t nq, const void * const * k, int64_t nk, float * out, int64_t os) {
    for (int64_t r = 0; r < nq; r += 4, q += 4, out += 4 * os) {
        for (int64_t t = 0; t < nk; t += 4) {
            const int64_t kk = nk - t < 4 ? nk - t : 4;
            // a short last group repeats its first row (computed, not stored)
            const void * kr[4] = { k[t], k[t + (kk > 1 ? 1 : 0)], k[t + (kk > 2 ? 2 : 0)], k[t + (kk > 3 ? 3 : 0)] };
            switch (nq - r < 4 ? nq - r : 4) {
                case 1: qk_pass<L, 1>(n, q, kr, kk, out + t, os); break;
                case 2: qk_pass<L, 2>(n, q, kr, kk, out + t, os); break;
                case 3: qk_pass<L, 3>(n, q, kr, kk, out + t, os); break;
                default: qk_pass<L, 4>(n, q, kr, kk, out + t, os); break;
            }
        }
    }
}

void qk_block_v(int64_t n, const float * const * q, int64_t nq, const float * const * k, int64_t nk, float * out, int64_t os) {
    qk_rows<row_f32>(n, q, nq, (const void * const *) k, nk, out, os);
}

// NY (<= 4) output rows x 16 values in registers per pass over the value rows; per element the
// same fma chain over t as axpy_rows
template <typename L, int NY>
void pv_pass(int64_t n, float * const * y, const float * p, int64_t ps, const void * const * v, int64_t nt) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t acc[NY][4];
        for (int r = 0; r < NY; ++r)
            for (int k = 0; k < 4; ++k) acc[r][k] = vld1q_f32(y[r] + i + 4 * k);
        for (int64_t t = 0; t < nt; ++t) {
            float32x4_t vv[4];
            for (int k = 0; k < 4; ++k) vv[k] = L::load(v[t], i + 4 * k);
            for (int r = 0; r < NY; ++r) {
                const float32x4_t pr = vdupq_n_f32(p[r * ps + t]);
                for (int k = 0; k < 4; ++k) acc[r][k] = vfmaq_f32(acc[r][k], pr, vv[k]);
            }
        }
        for (int r = 0; r < NY; ++r)
            for (int k = 0; k < 4; ++k) vst1q_f32(y[r] + i + 4 * k, acc[r][k]);
    }
    if constexpr (L::tails) {
        for (; i < n; i += 4) {
            const int64_t m = n - i < 4 ? n - i : 4;
            float32x4_t acc[NY];
            for (int r = 0; r < NY; ++r) acc[r] = neon_load_part(y[r] + i, m);
            for (int64_t t = 0; t < nt; ++t) {
                const float32x4_t vv = L::load_part(v[t], i, m);
                for (int r = 0; r < NY; ++r) acc[r] = vfmaq_f32(acc[r], vdupq_n_f32(p[r * ps + t]), vv);
            }
            for (int r = 0; r < NY; ++r) neon_store_part(y[r] + i, acc[r], m);
        }
    }
}

// ny output rows, taken four at a time
template <typename L>
void pv_rows(int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny, const void * const * v, int64_t nt) {
    for (int64_t r = 0; r < ny; r += 4, y += 4, p += 4 * ps) {
        switch (ny - r < 4 ? ny - r : 4) {
            case 1: pv_pass<L, 1>(n, y, p, ps, v, nt); break;
            case 2: pv_pass<L, 2>(n, y, p, ps, v, nt); break;
            case 3: pv_pass<L, 3>(n, y, p, ps, v, nt); break;
            default: pv_pass<L, 4>(n, y, p, ps, v, nt); break;
        }
    }
}

void pv_block_v(int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny, const float * const * v, int64_t nt) {
    pv_rows<row_f32>(n, y, p, ps, ny, (const void * const *) v, nt);
}

// Calls f with the reader of a cache type; only the four types of ggml_cpu_attn_cache_type
// reach here (ops-attention.cpp checks).
template <typename F>
void with_cache_row(ggml_type type, F f) {
    switch (type) {
        case GGML_TYPE_F16: f(row_f16()); break;
        case GGML_TYPE_BF16: f(row_bf16()); break;
        case GGML_TYPE_Q8_0: f(row_q8_0()); break;
        case GGML_TYPE_Q4_0: f(row_q4_0()); break;
        default: break;
    }
}

void qk_cache_v(ggml_type type, int64_t n, const float * const * q, int64_t nq, const void * const * k, int64_t nk,
                float * out, int64_t os) {
    with_cache_row(type, [&](auto row) { qk_rows<decltype(row)>(n, q, nq, k, nk, out, os); });
}

void pv_cache_v(ggml_type type, int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny,
                const void * const * v, int64_t nt) {
    with_cache_row(type, [&](auto row) { pv_rows<decltype(row)>(n, y, p, ps, ny, v, nt); });
}

void axpy_rows_v(int64_t n, float * y, const float * a, const float * const * rows, int64_t nr) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t y0 = vld1q_f32(y + i), y1 = vld1q_f32(y + i + 4);
        float32x4_t y2 = vld1q_f32(y + i + 8), y3 = vld1q_f32(y + i + 12);
        for (int64_t t = 0; t < nr; ++t) {
            const float32x4_t va = vdupq_n_f32(a[t]);
            const float * r = rows[t] + i;
            y0 = vfmaq_f32(y0, va, vld1q_f32(r));
            y1 = vfmaq_f32(y1, va, vld1q_f32(r + 4));
            y2 = vfmaq_f32(y2, va, vld1q_f32(r + 8));
            y3 = vfmaq_f32(y3, va, vld1q_f32(r + 12));
        }
        vst1q_f32(y + i, y0);
        vst1q_f32(y + i + 4, y1);
        vst1q_f32(y + i + 8, y2);
        vst1q_f32(y + i + 12, y3);
    }
    for (; i < n; i += 4) {
        const int64_t m = n - i < 4 ? n - i : 4;
        float32x4_t y0 = neon_load_part(y + i, m);
        for (int64_t t = 0; t < nr; ++t) y0 = vfmaq_f32(y0, vdupq_n_f32(a[t]), neon_load_part(rows[t] + i, m));
        neon_store_part(y + i, y0, m);
    }
}

// FCVTL / FCVTN are part of base Armv8 (no fp16 arithmetic needed); FCVTN rounds to nearest even
// and handles overflow, subnormals and NaN as IEEE conversion does.
void f16_to_f32_v(int64_t n, float * y, const uint16_t * x) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    for (; i < n; ++i) {
        uint16_t t[4] = { x[i], 0, 0, 0 };
        y[i] = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(t))), 0);
    }
}

void f32_to_f16_v(int64_t n, uint16_t * y, const float * x) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; ++i) y[i] = vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(x[i]))), 0);
}

// bf16 is the high half of an f32
void bf16_to_f32_v(int64_t n, float * y, const uint16_t * x) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(x + i), 16)));
    for (; i < n; ++i) {
        const uint32_t u = (uint32_t) x[i] << 16;
        std::memcpy(y + i, &u, 4);
    }
}

void rope_neox_v(int64_t n, float * y0, float * y1, const float * x0, const float * x1, const float * c, const float * s) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t a = vld1q_f32(x0 + i), b = vld1q_f32(x1 + i);
        const float32x4_t cv = vld1q_f32(c + i), sv = vld1q_f32(s + i);
        vst1q_f32(y0 + i, vsubq_f32(vmulq_f32(a, cv), vmulq_f32(b, sv)));   // no FMA: the reference rounds each product
        vst1q_f32(y1 + i, vaddq_f32(vmulq_f32(a, sv), vmulq_f32(b, cv)));
    }
    for (; i < n; ++i) {
        const float a = x0[i], b = x1[i];
        y0[i] = a * c[i] - b * s[i];
        y1[i] = a * s[i] + b * c[i];
    }
}

// adjacent pairs: vrev64q swaps the two values of each pair
void rope_norm_v(int64_t n, float * y, const float * x, const float * cc, const float * ss) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t xv = vld1q_f32(x + i);
        vst1q_f32(y + i, vaddq_f32(vmulq_f32(xv, vld1q_f32(cc + i)), vmulq_f32(vrev64q_f32(xv), vld1q_f32(ss + i))));
    }
    for (; i < n; i += 2) {
        const float a = x[i], b = x[i + 1];
        y[i]     = a * cc[i] + b * ss[i];
        y[i + 1] = b * cc[i + 1] + a * ss[i + 1];
    }
}

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_vec_neon() {
    ggml_cpu_vec_fns f = {};
    f.add = add_v;
    f.sub = sub_v;
    f.mul = mul_v;
    f.div = div_v;
    f.scale_bias = scale_bias_v;
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
    f.qk_cache = qk_cache_v;
    f.pv_cache = pv_cache_v;
    f.f16_to_f32 = f16_to_f32_v;
    f.f32_to_f16 = f32_to_f16_v;
    f.bf16_to_f32 = bf16_to_f32_v;
    f.rope_neox = rope_neox_v;
    f.rope_norm = rope_norm_v;
    ggml_cpu_register_vec(GGML_CPU_ISA_NEON, f);
}
