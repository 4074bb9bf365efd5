// Element-wise ops: binary arithmetic with broadcasting, scale/clamp/sqr/sqrt, unary
// activations, gated units, and row reductions (sum_rows, mean, argmax).
//
// Every kernel splits dst rows over the threads. Rows that are f32 and dense go straight through
// the vector primitives; anything else (f16/bf16, strided views) is converted row by row into
// per-thread scratch first, so one code path serves every layout.
#include "ops-common.h"

#include <algorithm>
#include <cmath>

namespace {

using binary_fn = void (*)(int64_t, float *, const float *, const float *);

binary_fn pick_binary(ggml_op op, const ggml_cpu_vec_fns & v) {
    switch (op) {
        case GGML_OP_ADD: return v.add;
        case GGML_OP_SUB: return v.sub;
        case GGML_OP_MUL: return v.mul;
        case GGML_OP_DIV: return v.div;
        default: GGML_ABORT("not a binary op: %s", ggml_op_name(op));
    }
}

// Applies fn(row_in, row_out, n) to every row of src into dst (same shape), rows split over threads.
template <typename Fn>
void map_rows(const ggml_compute_params * p, const ggml_tensor * src, ggml_tensor * dst, Fn && fn) {
    const int64_t n = dst->ne[0];
    const int64_t nr = ggml_nrows(dst);
    int64_t r0, r1;
    ggml_cpu_split_rows(nr, p->ith, p->nth, r0, r1);
    float * tmp_in = ggml_cpu_thread_scratch(0, n);
    float * tmp_out = ggml_cpu_thread_scratch(1, n);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(dst, r);
        const float * x = ggml_cpu_load_row(src, c.i1, c.i2, c.i3, tmp_in);
        float * y = ggml_cpu_out_row(dst, c.i1, c.i2, c.i3, tmp_out);
        fn(x, y, n);
        ggml_cpu_finish_row(dst, c.i1, c.i2, c.i3, y);
    }
}

} // namespace

void ggml_cpu_op_binary(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    GGML_ASSERT(ggml_can_repeat(b, a) && ggml_are_same_shape(a, dst));
    const auto & vec = ggml_cpu_vec();
    const binary_fn fn = pick_binary(dst->op, vec);

    const int64_t n = dst->ne[0];
    const int64_t nb_row = b->ne[0];        // b repeats n / nb_row times along each row
    const int64_t nr = ggml_nrows(dst);
    int64_t r0, r1;
    ggml_cpu_split_rows(nr, p->ith, p->nth, r0, r1);
    float * tmp_a = ggml_cpu_thread_scratch(0, n);
    float * tmp_b = ggml_cpu_thread_scratch(1, nb_row);
    float * tmp_y = ggml_cpu_thread_scratch(2, n);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(dst, r);
        const float * x = ggml_cpu_load_row(a, c.i1, c.i2, c.i3, tmp_a);
        const float * y = ggml_cpu_load_row(b, c.i1 % b->ne[1], c.i2 % b->ne[2], c.i3 % b->ne[3], tmp_b);
        float * z = ggml_cpu_out_row(dst, c.i1, c.i2, c.i3, tmp_y);
        if (nb_row == n) {
            fn(n, z, x, y);
        } else if (nb_row == 1 && dst->op != GGML_OP_DIV) {
            // one value per row (the MoE expert weights): a scale or a shift of the whole row, in
            // one vector call rather than one call per element; x*s+0 and x*1+b round as x*s and x+b
            const float s = dst->op == GGML_OP_MUL ? y[0] : 1.0f;
            const float bias = dst->op == GGML_OP_ADD ? y[0] : dst->op == GGML_OP_SUB ? -y[0] : 0.0f;
            vec.scale_bias(n, z, x, s, bias);
        } else if (nb_row == 1) {
            for (int64_t k = 0; k < n; ++k) z[k] = x[k] / y[0];
        } else {
            for (int64_t k = 0; k < n; k += nb_row) fn(nb_row, z + k, x + k, y);
        }
        ggml_cpu_finish_row(dst, c.i1, c.i2, c.i3, z);
    }
}

void ggml_cpu_op_scale(const ggml_compute_params * p, ggml_tensor * dst) {
    const float s = ggml_get_op_params_f32(dst, 0);
    const float b = ggml_get_op_params_f32(dst, 1);
    const auto & v = ggml_cpu_vec();
    map_rows(p, dst->src[0], dst, [&](const float * x, float * y, int64_t n) { v.scale_bias(n, y, x, s, b); });
}

void ggml_cpu_op_clamp(const ggml_compute_params * p, ggml_tensor * dst) {
    const float lo = ggml_get_op_params_f32(dst, 0);
    const float hi = ggml_get_op_params_f32(dst, 1);
    map_rows(p, dst->src[0], dst, [&](const float * x, float * y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) y[i] = std::min(hi, std::max(lo, x[i]));
    });
}

void ggml_cpu_op_sqr(const ggml_compute_params * p, ggml_tensor * dst) {
    map_rows(p, dst->src[0], dst, [](const float * x, float * y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
    });
}

void ggml_cpu_op_sqrt(const ggml_compute_params * p, ggml_tensor * dst) {
    map_rows(p, dst->src[0], dst, [](const float * x, float * y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
    });
}

namespace {
inline float sigmoid1(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + e^x); beyond 20 the result equals x to float precision (and e^x would overflow later)
inline float softplus1(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
} // namespace

void ggml_cpu_op_unary(const ggml_compute_params * p, ggml_tensor * dst) {
    const auto op = (ggml_unary_op) ggml_get_op_params_i32(dst, 0);
    const auto & v = ggml_cpu_vec();
    auto each = [&](auto f) {
        map_rows(p, dst->src[0], dst, [&](const float * x, float * y, int64_t n) {
            for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
        });
    };
    switch (op) {
        case GGML_UNARY_OP_SILU:
            map_rows(p, dst->src[0], dst, [&](const float * x, float * y, int64_t n) { v.silu(n, y, x); });
            break;
        case GGML_UNARY_OP_GELU:
            map_rows(p, dst->src[0], dst, [&](const float * x, float * y, int64_t n) { v.gelu(n, y, x); });
            break;
        case GGML_UNARY_OP_SIGMOID:  each(sigmoid1); break;
        case GGML_UNARY_OP_SOFTPLUS: each(softplus1); break;
        case GGML_UNARY_OP_RELU:     each([](float x) { return x > 0.0f ? x : 0.0f; }); break;
        case GGML_UNARY_OP_TANH:     each([](float x) { return std::tanh(x); }); break;
        case GGML_UNARY_OP_NEG:      each([](float x) { return -x; }); break;
        case GGML_UNARY_OP_EXP:      each([](float x) { return std::exp(x); }); break;
        default: GGML_ABORT("unary op %d not implemented", (int) op);
    }
}

void ggml_cpu_op_glu(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * gate = dst->src[0];
    const ggml_tensor * up = dst->src[1];
    GGML_ASSERT(ggml_are_same_shape(gate, up) && ggml_are_same_shape(gate, dst));
    const auto op = (ggml_glu_op) ggml_get_op_params_i32(dst, 0);
    const auto & v = ggml_cpu_vec();
    const int64_t n = dst->ne[0];
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), p->ith, p->nth, r0, r1);
    float * tg = ggml_cpu_thread_scratch(0, n);
    float * tu = ggml_cpu_thread_scratch(1, n);
    float * ty = ggml_cpu_thread_scratch(2, n);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(dst, r);
        const float * g = ggml_cpu_load_row(gate, c.i1, c.i2, c.i3, tg);
        const float * u = ggml_cpu_load_row(up, c.i1, c.i2, c.i3, tu);
        float * y = ggml_cpu_out_row(dst, c.i1, c.i2, c.i3, ty);
        switch (op) {
            case GGML_GLU_OP_SWIGLU: v.swiglu(n, y, g, u); break;
            case GGML_GLU_OP_GEGLU:
                v.gelu(n, y, g);
                v.mul(n, y, y, u);
                break;
            default: GGML_ABORT("glu op %d not implemented", (int) op);
        }
        ggml_cpu_finish_row(dst, c.i1, c.i2, c.i3, y);
    }
}

namespace {
void reduce_rows(const ggml_compute_params * p, ggml_tensor * dst, bool mean) {
    const ggml_tensor * a = dst->src[0];
    const auto & v = ggml_cpu_vec();
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(a), p->ith, p->nth, r0, r1);
    float * tmp = ggml_cpu_thread_scratch(0, a->ne[0]);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(a, r);
        const float * x = ggml_cpu_load_row(a, c.i1, c.i2, c.i3, tmp);
        float s = v.sum(a->ne[0], x);
        if (mean) s /= (float) a->ne[0];
        ggml_cpu_set_f32(dst->type, ggml_cpu_row_ptr(dst, c.i1, c.i2, c.i3), s);
    }
}
} // namespace

void ggml_cpu_op_sum_rows(const ggml_compute_params * p, ggml_tensor * dst) { reduce_rows(p, dst, false); }
void ggml_cpu_op_mean(const ggml_compute_params * p, ggml_tensor * dst) { reduce_rows(p, dst, true); }

void ggml_cpu_op_argmax(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    GGML_ASSERT(dst->type == GGML_TYPE_I32);
    int64_t r0, r1;
    ggml_cpu_split_rows(a->ne[1], p->ith, p->nth, r0, r1);
    float * tmp = ggml_cpu_thread_scratch(0, a->ne[0]);
    for (int64_t r = r0; r < r1; ++r) {
        const float * x = ggml_cpu_load_row(a, r, 0, 0, tmp);
        int64_t best = 0;
        for (int64_t i = 1; i < a->ne[0]; ++i) {
            if (x[i] > x[best]) best = i;   // first index of the maximum wins ties
        }
        *(int32_t *) ((char *) dst->data + r * dst->nb[0]) = (int32_t) best;
    }
}
