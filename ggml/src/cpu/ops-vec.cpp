// The scalar reference vector primitives, the per-ISA table they seed, and the row helpers
// the op kernels share.
#include "cpu-isa.h"
#include "ops-common.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

void add_ref(int64_t n, float * z, const float * x, const float * y) { for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i]; }
void sub_ref(int64_t n, float * z, const float * x, const float * y) { for (int64_t i = 0; i < n; ++i) z[i] = x[i] - y[i]; }
void mul_ref(int64_t n, float * z, const float * x, const float * y) { for (int64_t i = 0; i < n; ++i) z[i] = x[i] * y[i]; }
void div_ref(int64_t n, float * z, const float * x, const float * y) { for (int64_t i = 0; i < n; ++i) z[i] = x[i] / y[i]; }

void scale_bias_ref(int64_t n, float * y, const float * x, float s, float b) {
    for (int64_t i = 0; i < n; ++i) y[i] = s * x[i] + b;
}

inline float silu1(float x) { return x / (1.0f + std::exp(-x)); }

// tanh-approximated GELU written as x * sigmoid(2u): 0.5*x*(1 + tanh(u)) without the
// cancellation of 1 + tanh(u) for negative u.
inline float gelu1(float x) {
    const float u = 0.7978845608028654f * x * (1.0f + 0.044715f * x * x);
    return x / (1.0f + std::exp(-2.0f * u));
}

void silu_ref(int64_t n, float * y, const float * x) { for (int64_t i = 0; i < n; ++i) y[i] = silu1(x[i]); }
void gelu_ref(int64_t n, float * y, const float * x) { for (int64_t i = 0; i < n; ++i) y[i] = gelu1(x[i]); }
void swiglu_ref(int64_t n, float * z, const float * g, const float * u) {
    for (int64_t i = 0; i < n; ++i) z[i] = silu1(g[i]) * u[i];
}

// sums in double: the reference must not drift on long rows
float sum_ref(int64_t n, const float * x) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return (float) s;
}
float sum_sq_ref(int64_t n, const float * x) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += (double) x[i] * x[i];
    return (float) s;
}
float max_ref(int64_t n, const float * x) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    return m;
}
float exp_sum_ref(int64_t n, float * y, const float * x, float m) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
        y[i] = std::exp(x[i] - m);
        s += y[i];
    }
    return (float) s;
}
float dot_ref(int64_t n, const float * x, const float * y) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += (double) x[i] * y[i];
    return (float) s;
}
void axpy_ref(int64_t n, float * y, float a, const float * x) { for (int64_t i = 0; i < n; ++i) y[i] += a * x[i]; }

void dot_rows_ref(int64_t n, const float * x, const float * const * rows, int64_t nr, float * out) {
    for (int64_t t = 0; t < nr; ++t) out[t] = dot_ref(n, x, rows[t]);
}
void axpy_rows_ref(int64_t n, float * y, const float * a, const float * const * rows, int64_t nr) {
    for (int64_t t = 0; t < nr; ++t) axpy_ref(n, y, a[t], rows[t]);
}

void f16_to_f32_ref(int64_t n, float * y, const uint16_t * x) { for (int64_t i = 0; i < n; ++i) y[i] = ggml_compute_fp16_to_fp32(x[i]); }
void f32_to_f16_ref(int64_t n, uint16_t * y, const float * x) { for (int64_t i = 0; i < n; ++i) y[i] = ggml_compute_fp32_to_fp16(x[i]); }
void bf16_to_f32_ref(int64_t n, float * y, const uint16_t * x) { for (int64_t i = 0; i < n; ++i) y[i] = ggml_compute_bf16_to_fp32(x[i]); }

void rope_neox_ref(int64_t n, float * y0, float * y1, const float * x0, const float * x1, const float * c, const float * s) {
    for (int64_t i = 0; i < n; ++i) {
        const float a = x0[i], b = x1[i];
        y0[i] = a * c[i] - b * s[i];
        y1[i] = a * s[i] + b * c[i];
    }
}
void rope_norm_ref(int64_t n, float * y, const float * x, const float * cc, const float * ss) {
    for (int64_t i = 0; i < n; i += 2) {
        const float a = x[i], b = x[i + 1];
        y[i]     = a * cc[i] + b * ss[i];
        y[i + 1] = b * cc[i + 1] + a * ss[i + 1];
    }
}

constexpr ggml_cpu_vec_fns k_scalar_fns = {
    add_ref, sub_ref, mul_ref, div_ref, scale_bias_ref, silu_ref, gelu_ref, swiglu_ref, sum_ref, sum_sq_ref,
    max_ref, exp_sum_ref, dot_ref, axpy_ref, dot_rows_ref, axpy_rows_ref, nullptr, nullptr, f16_to_f32_ref, f32_to_f16_ref, bf16_to_f32_ref, rope_neox_ref,
    rope_norm_ref,
    nullptr, nullptr,   // qk_cache, pv_cache: the scalar level decodes cache tiles to f32 instead
    nullptr,            // cache_reads_more
    nullptr, nullptr, nullptr,   // pack_kt, qk_kt, pv_tile: the scalar level decodes tiles to f32 and uses the row forms
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,   // the bf16 tile kernels: f32 products instead
    nullptr, nullptr,   // qk_cells, qk_cells_rows: as qk_cache
};

constexpr int k_n_fns = sizeof(ggml_cpu_vec_fns) / sizeof(void *);
static_assert(sizeof(ggml_cpu_vec_fns) == k_n_fns * sizeof(void (*)()), "table holds only function pointers");

// what each level registered (the ISA levels by ggml_cpu_ensure_kernels(), see cpu-isa.h)
ggml_cpu_vec_fns * registered() {
    static ggml_cpu_vec_fns t[GGML_CPU_ISA_COUNT] = {};
    return t;
}

struct resolved_tables {
    ggml_cpu_vec_fns at[GGML_CPU_ISA_COUNT];
};

// Built on first use, after the ISA levels this CPU has have registered.
const resolved_tables & resolved() {
    static const resolved_tables r = [] {
        ggml_cpu_ensure_kernels();
        resolved_tables out{};
        using fn_t = void (*)();
        auto slots = [](ggml_cpu_vec_fns & f) { return reinterpret_cast<fn_t *>(&f); };
        registered()[GGML_CPU_ISA_SCALAR] = k_scalar_fns;
        for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
            fn_t * dst = slots(out.at[isa]);
            for (int k = 0; k < k_n_fns; ++k) {
                fn_t f = nullptr;
                for (ggml_cpu_isa l = (ggml_cpu_isa) isa; !f; l = ggml_cpu_isa_lower(l)) {
                    f = slots(registered()[l])[k];
                    if (l == GGML_CPU_ISA_SCALAR) break;
                }
                dst[k] = f ? f : slots(registered()[GGML_CPU_ISA_SCALAR])[k];
            }
        }
        return out;
    }();
    return r;
}

} // namespace

void ggml_cpu_register_vec(ggml_cpu_isa isa, const ggml_cpu_vec_fns & fns) {
    GGML_ASSERT(isa >= 0 && isa < GGML_CPU_ISA_COUNT);
    using fn_t = void (*)();
    const fn_t * src = reinterpret_cast<const fn_t *>(&fns);
    fn_t * dst = reinterpret_cast<fn_t *>(&registered()[isa]);
    for (int k = 0; k < k_n_fns; ++k) {
        if (src[k]) dst[k] = src[k];
    }
}

const ggml_cpu_vec_fns & ggml_cpu_vec() { return resolved().at[ggml_cpu_get_isa()]; }
const ggml_cpu_vec_fns & ggml_cpu_vec_at(ggml_cpu_isa isa) { return resolved().at[isa]; }

// ---- element and row access

float ggml_cpu_get_f32(ggml_type type, const void * p) {
    switch (type) {
        case GGML_TYPE_F32:  return *(const float *) p;
        case GGML_TYPE_F16:  return ggml_compute_fp16_to_fp32(*(const uint16_t *) p);
        case GGML_TYPE_BF16: return ggml_compute_bf16_to_fp32(*(const uint16_t *) p);
        case GGML_TYPE_I32:  return (float) *(const int32_t *) p;
        case GGML_TYPE_I16:  return (float) *(const int16_t *) p;
        case GGML_TYPE_I8:   return (float) *(const int8_t *) p;
        case GGML_TYPE_F64:  return (float) *(const double *) p;
        default: GGML_ABORT("element access to a %s tensor is not supported", ggml_type_name(type));
    }
}

void ggml_cpu_set_f32(ggml_type type, void * p, float v) {
    switch (type) {
        case GGML_TYPE_F32:  *(float *) p = v; break;
        case GGML_TYPE_F16:  *(uint16_t *) p = ggml_compute_fp32_to_fp16(v); break;
        case GGML_TYPE_BF16: *(uint16_t *) p = ggml_compute_fp32_to_bf16(v); break;
        case GGML_TYPE_I32:  *(int32_t *) p = (int32_t) v; break;
        case GGML_TYPE_I16:  *(int16_t *) p = (int16_t) v; break;
        case GGML_TYPE_I8:   *(int8_t *) p = (int8_t) v; break;
        case GGML_TYPE_F64:  *(double *) p = v; break;
        default: GGML_ABORT("element store to a %s tensor is not supported", ggml_type_name(type));
    }
}

const float * ggml_cpu_load_row(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3, float * tmp) {
    const char * row = ggml_cpu_row_ptr(t, i1, i2, i3);
    const int64_t n = t->ne[0];
    if (ggml_cpu_is_f32_dense_rows(t)) return (const float *) row;
    const size_t es = ggml_type_size(t->type);
    if (const int R = ggml_get_type_traits(t->type)->nrows_interleaved; R > 1) {
        // row-interleaved layout: decode the row's group of R rows, keep the one asked for
        thread_local std::vector<float> group;
        group.resize((size_t) R * n);
        ggml_cpu_row_to_f32(t->type, ggml_cpu_row_ptr(t, i1 - i1 % R, i2, i3), group.data(), R * n);
        std::memcpy(tmp, group.data() + (i1 % R) * n, n * sizeof(float));
    } else if (ggml_is_quantized(t->type)) {
        ggml_cpu_row_to_f32(t->type, row, tmp, n);
    } else if (t->nb[0] == es && t->type == GGML_TYPE_F16) {
        ggml_cpu_vec().f16_to_f32(n, tmp, (const uint16_t *) row);
    } else if (t->nb[0] == es && t->type == GGML_TYPE_BF16) {
        ggml_cpu_vec().bf16_to_f32(n, tmp, (const uint16_t *) row);
    } else {
        for (int64_t i = 0; i < n; ++i) tmp[i] = ggml_cpu_get_f32(t->type, row + i * t->nb[0]);
    }
    return tmp;
}

void ggml_cpu_store_row(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3, const float * src) {
    char * row = ggml_cpu_row_ptr(t, i1, i2, i3);
    const int64_t n = t->ne[0];
    const size_t es = ggml_type_size(t->type);
    if (ggml_is_quantized(t->type)) {
        ggml_cpu_row_from_f32(t->type, src, row, n);
    } else if (t->nb[0] == es && t->type == GGML_TYPE_F32) {
        if ((const void *) row != (const void *) src) std::memcpy(row, src, n * sizeof(float));
    } else if (t->nb[0] == es && t->type == GGML_TYPE_F16) {
        ggml_cpu_vec().f32_to_f16(n, (uint16_t *) row, src);
    } else {
        for (int64_t i = 0; i < n; ++i) ggml_cpu_set_f32(t->type, row + i * t->nb[0], src[i]);
    }
}

float * ggml_cpu_out_row(const ggml_tensor * dst, int64_t i1, int64_t i2, int64_t i3, float * tmp) {
    return ggml_cpu_is_f32_dense_rows(dst) ? (float *) ggml_cpu_row_ptr(dst, i1, i2, i3) : tmp;
}

void ggml_cpu_finish_row(const ggml_tensor * dst, int64_t i1, int64_t i2, int64_t i3, const float * row) {
    if (!ggml_cpu_is_f32_dense_rows(dst)) ggml_cpu_store_row(dst, i1, i2, i3, row);
}

float * ggml_cpu_thread_scratch(int slot, size_t n_floats) {
    constexpr int k_slots = 4;
    thread_local std::vector<float> bufs[k_slots];
    GGML_ASSERT(slot >= 0 && slot < k_slots);
    auto & b = bufs[slot];
    if (b.size() < n_floats) b.resize(std::max(n_floats, (size_t) 256));
    return b.data();
}

float ggml_cpu_alibi_slope(float max_bias, int64_t n_head, int64_t h) {
    if (max_bias <= 0.0f) return 1.0f;
    const int64_t n_head_log2 = int64_t(1) << (int64_t) std::floor(std::log2((double) n_head));
    const float m0 = std::pow(2.0f, -max_bias / n_head_log2);
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / n_head_log2);
    return h < n_head_log2 ? std::pow(m0, (float) (h + 1)) : std::pow(m1, (float) (2 * (h - n_head_log2) + 1));
}
