// Normalisation over each row (ne0): layer norm without affine terms, RMS norm and L2 norm.
#include "ops-common.h"

#include <algorithm>
#include <cmath>

namespace {

template <typename RowFn>
void norm_rows(const ggml_compute_params * p, ggml_tensor * dst, RowFn && fn) {
    const ggml_tensor * a = dst->src[0];
    GGML_ASSERT(ggml_are_same_shape(a, dst));
    const int64_t n = a->ne[0];
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(a), p->ith, p->nth, r0, r1);
    float * tmp_in = ggml_cpu_thread_scratch(0, n);
    float * tmp_out = ggml_cpu_thread_scratch(1, n);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(a, r);
        const float * x = ggml_cpu_load_row(a, c.i1, c.i2, c.i3, tmp_in);
        float * y = ggml_cpu_out_row(dst, c.i1, c.i2, c.i3, tmp_out);
        fn(x, y, n);
        ggml_cpu_finish_row(dst, c.i1, c.i2, c.i3, y);
    }
}

} // namespace

void ggml_cpu_op_rms_norm(const ggml_compute_params * p, ggml_tensor * dst) {
    const float eps = ggml_get_op_params_f32(dst, 0);
    const auto & v = ggml_cpu_vec();
    norm_rows(p, dst, [&](const float * x, float * y, int64_t n) {
        const float mean_sq = v.sum_sq(n, x) / (float) n;
        v.scale_bias(n, y, x, 1.0f / std::sqrt(mean_sq + eps), 0.0f);
    });
}

void ggml_cpu_op_norm(const ggml_compute_params * p, ggml_tensor * dst) {
    const float eps = ggml_get_op_params_f32(dst, 0);
    const auto & v = ggml_cpu_vec();
    norm_rows(p, dst, [&](const float * x, float * y, int64_t n) {
        const float mean = v.sum(n, x) / (float) n;
        // centre first, then the variance of the centred values (no cancellation)
        v.scale_bias(n, y, x, 1.0f, -mean);
        const float var = v.sum_sq(n, y) / (float) n;
        v.scale_bias(n, y, y, 1.0f / std::sqrt(var + eps), 0.0f);
    });
}

void ggml_cpu_op_l2_norm(const ggml_compute_params * p, ggml_tensor * dst) {
    const float eps = ggml_get_op_params_f32(dst, 0);
    const auto & v = ggml_cpu_vec();
    norm_rows(p, dst, [&](const float * x, float * y, int64_t n) {
        // eps bounds the scale of an all-zero row instead of producing 0/0
        v.scale_bias(n, y, x, 1.0f / std::max(std::sqrt(v.sum_sq(n, x)), eps), 0.0f);
    });
}
