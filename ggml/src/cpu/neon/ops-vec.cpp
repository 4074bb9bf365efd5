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
#include "ops-vec-kernels.h"
#include "quants/quants-blocks.h"

#include <cmath>

namespace {

// The ISA description of ops-vec-kernels.h; a tail is its length (zero-padded copies, simd.h).
struct vec_neon {
    using vf = float32x4_t;
    using mask = int64_t;
    static constexpr int W = 4, kAcc = 4;   // the FMA latency is about four cycles on most Arm cores
    static mask tail(int64_t rem) { return rem; }
    static vf zero() { return vdupq_n_f32(0.0f); }
    static vf set1(float v) { return vdupq_n_f32(v); }
    static vf load(const float * p) { return vld1q_f32(p); }
    static void store(float * p, vf v) { vst1q_f32(p, v); }
    static vf loadm(const float * p, mask m) { return neon_load_part(p, m); }
    static void storem(float * p, mask m, vf v) { neon_store_part(p, v, m); }
    static vf keep(vf v, mask m) {
        const uint32x4_t lane = { 0, 1, 2, 3 };
        return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), vcltq_u32(lane, vdupq_n_u32((uint32_t) m))));
    }
    static vf add(vf a, vf b) { return vaddq_f32(a, b); }
    static vf sub(vf a, vf b) { return vsubq_f32(a, b); }
    static vf mul(vf a, vf b) { return vmulq_f32(a, b); }
    static vf div(vf a, vf b) { return vdivq_f32(a, b); }
    static vf max(vf a, vf b) { return vmaxq_f32(a, b); }
    static vf fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
    static vf exp(vf x) { return neon_exp(x); }
    static float hsum(vf v) { return vaddvq_f32(v); }
};

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
    vec_kernels<vec_neon>::fill(f);
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
