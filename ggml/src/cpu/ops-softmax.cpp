// Softmax over rows with scale, optional mask (f32/f16, broadcast over dims 2 and 3), ALiBi
// slopes and attention sinks (one extra logit per dim-2 index that only adds to the
// denominator); and the causal diagonal mask.
#include "ops-common.h"

#include <cmath>

namespace {
// per-thread row buffer inside wdata
float * thread_row(const ggml_compute_params * p, int64_t n) {
    const size_t per = ggml_pad(n * sizeof(float), 64);
    GGML_ASSERT(p->wdata && p->wsize >= per * p->nth + 64 && "soft_max: scratch too small");
    char * base = (char *) ggml_pad((uintptr_t) p->wdata, 64);
    return (float *) (base + per * p->ith);
}
} // namespace

size_t ggml_cpu_soft_max_work_size(const ggml_tensor * dst, int nth) {
    return (ggml_pad(dst->ne[0] * sizeof(float), 64)) * nth + 64;
}

void ggml_cpu_op_soft_max(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * mask = dst->src[1];
    const ggml_tensor * sinks = dst->src[2];
    GGML_ASSERT(ggml_are_same_shape(a, dst));
    GGML_ASSERT(!sinks || (sinks->type == GGML_TYPE_F32 && sinks->ne[0] == a->ne[2]));
    const float scale = ggml_get_op_params_f32(dst, 0);
    const float max_bias = ggml_get_op_params_f32(dst, 1);
    if (mask) {
        GGML_ASSERT(mask->type == GGML_TYPE_F32 || mask->type == GGML_TYPE_F16);
        GGML_ASSERT(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1]);
    }
    const auto & v = ggml_cpu_vec();
    const int64_t n = a->ne[0];
    float * w = thread_row(p, n);
    float * tmp_in = ggml_cpu_thread_scratch(0, n);
    float * tmp_out = ggml_cpu_thread_scratch(1, n);
    float * tmp_mask = ggml_cpu_thread_scratch(2, n);

    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(a), p->ith, p->nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(a, r);
        const float * x = ggml_cpu_load_row(a, c.i1, c.i2, c.i3, tmp_in);
        v.scale_bias(n, w, x, scale, 0.0f);
        if (mask) {
            const float slope = ggml_cpu_alibi_slope(max_bias, a->ne[2], c.i2);
            const float * m = ggml_cpu_load_row(mask, c.i1, c.i2 % mask->ne[2], c.i3 % mask->ne[3], tmp_mask);
            if (slope == 1.0f) {
                v.add(n, w, w, m);
            } else {
                v.axpy(n, w, slope, m);
            }
        }
        float * y = ggml_cpu_out_row(dst, c.i1, c.i2, c.i3, tmp_out);
        const float sink = sinks ? ((const float *) sinks->data)[c.i2] : -INFINITY;
        const float mx = std::max(v.max(n, w), sink);
        if (mx == -INFINITY) {
            // every entry masked: no distribution to speak of; zeros rather than NaN
            std::memset(y, 0, n * sizeof(float));
        } else {
            const float sum = v.exp_sum(n, y, w, mx) + (sinks ? std::exp(sink - mx) : 0.0f);
            v.scale_bias(n, y, y, 1.0f / sum, 0.0f);
        }
        ggml_cpu_finish_row(dst, c.i1, c.i2, c.i3, y);
    }
}

void ggml_cpu_op_diag_mask_inf(const ggml_compute_params * p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const int n_past = ggml_get_op_params_i32(dst, 0);
    const int64_t n = a->ne[0];
    float * tmp_in = ggml_cpu_thread_scratch(0, n);
    float * tmp_out = ggml_cpu_thread_scratch(1, n);
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(a), p->ith, p->nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(a, r);
        const float * x = ggml_cpu_load_row(a, c.i1, c.i2, c.i3, tmp_in);
        float * y = ggml_cpu_out_row(dst, c.i1, c.i2, c.i3, tmp_out);
        // query row i1 sees keys up to n_past + i1
        for (int64_t i = 0; i < n; ++i) y[i] = i > n_past + c.i1 ? -INFINITY : x[i];
        ggml_cpu_finish_row(dst, c.i1, c.i2, c.i3, y);
    }
}
