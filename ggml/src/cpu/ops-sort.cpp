// Sorting along rows: argsort (ascending or descending) and top-k (indices of the k largest
// values, largest first). Both write I32 indices.
#include "ops-common.h"

#include <algorithm>
#include <numeric>

namespace {

// per-thread index buffer in wdata
int32_t * thread_indices(const ggml_compute_params * p, int64_t n) {
    const size_t per = ggml_pad(n * sizeof(int32_t), 64);
    GGML_ASSERT(p->wdata && p->wsize >= per * p->nth + 64 && "argsort: scratch too small");
    char * base = (char *) ggml_pad((uintptr_t) p->wdata, 64);
    return (int32_t *) (base + per * p->ith);
}

// Sort the indices of each row; ties keep index order, so results are deterministic.
template <typename Finish>
void sort_rows(const ggml_compute_params * p, const ggml_tensor * a, Finish && finish) {
    const int64_t n = a->ne[0];
    int32_t * idx = thread_indices(p, n);
    float * tmp = ggml_cpu_thread_scratch(0, n);
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(a), p->ith, p->nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(a, r);
        const float * x = ggml_cpu_load_row(a, c.i1, c.i2, c.i3, tmp);
        std::iota(idx, idx + n, 0);
        finish(c, x, idx, n);
    }
}

void write_indices(const ggml_tensor * dst, const ggml_row_coord & c, const int32_t * idx, int64_t k) {
    char * d = ggml_cpu_row_ptr(dst, c.i1, c.i2, c.i3);
    for (int64_t i = 0; i < k; ++i) *(int32_t *) (d + i * dst->nb[0]) = idx[i];
}

} // namespace

size_t ggml_cpu_argsort_work_size(const ggml_tensor * dst, int nth) {
    return ggml_pad(dst->src[0]->ne[0] * sizeof(int32_t), 64) * nth + 64;
}

void ggml_cpu_op_argsort(const ggml_compute_params * p, ggml_tensor * dst) {
    GGML_ASSERT(dst->type == GGML_TYPE_I32 && ggml_are_same_shape(dst, dst->src[0]));
    const bool desc = ggml_get_op_params_i32(dst, 0) == GGML_SORT_ORDER_DESC;
    sort_rows(p, dst->src[0], [&](const ggml_row_coord & c, const float * x, int32_t * idx, int64_t n) {
        // ties broken by index: deterministic like a stable sort, without its temporary buffer
        if (desc) {
            std::sort(idx, idx + n, [x](int32_t i, int32_t j) { return x[i] > x[j] || (x[i] == x[j] && i < j); });
        } else {
            std::sort(idx, idx + n, [x](int32_t i, int32_t j) { return x[i] < x[j] || (x[i] == x[j] && i < j); });
        }
        write_indices(dst, c, idx, n);
    });
}

void ggml_cpu_op_top_k(const ggml_compute_params * p, ggml_tensor * dst) {
    GGML_ASSERT(dst->type == GGML_TYPE_I32);
    const int64_t k = dst->ne[0];
    GGML_ASSERT(k <= dst->src[0]->ne[0]);
    sort_rows(p, dst->src[0], [&](const ggml_row_coord & c, const float * x, int32_t * idx, int64_t n) {
        std::partial_sort(idx, idx + k, idx + n, [x](int32_t i, int32_t j) { return x[i] > x[j] || (x[i] == x[j] && i < j); });
        write_indices(dst, c, idx, k);
    });
}
