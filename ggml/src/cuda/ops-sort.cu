// argsort and top-k along rows (MoE routing: rows of at most a few hundred experts). Each element
// finds its own rank by counting the elements that sort before it (ties by index, as the CPU's
// comparator), then writes its index at that rank: O(n^2 / threads) per row, obviously the same
// order as a stable sort, and fast enough for the row lengths routing has.
#include "cuda-kernels.cuh"

namespace {

constexpr int64_t k_max_row = 4096;   // a row is staged in shared memory

__global__ void rank_sort_kernel(cuda_view a, cuda_view dst, bool desc, int64_t k) {
    extern __shared__ float row[];
    const coord4 r = row_coord(blockIdx.x, a.ne);
    const char * x = row_at(a, r.i1, r.i2, r.i3);
    const int64_t n = a.ne[0];
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] = load_float(x + i * a.nb[0], a.type);
    __syncthreads();
    char * y = row_at(dst, r.i1, r.i2, r.i3);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = row[i];
        int64_t rank = 0;
        for (int64_t j = 0; j < n; ++j) {
            const float w = row[j];
            const bool before = desc ? (w > v || (w == v && j < i)) : (w < v || (w == v && j < i));
            rank += before;
        }
        if (rank < k) *(int32_t *) (y + rank * dst.nb[0]) = (int32_t) i;
    }
}

} // namespace

bool cuda_supports_sort(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    if (op->op != GGML_OP_ARGSORT && op->op != GGML_OP_TOP_K) return false;
    if (!a || !cuda_is_float_type(a->type) || op->type != GGML_TYPE_I32 || a->ne[0] > k_max_row) return false;
    for (int i = 1; i < 4; ++i) {
        if (a->ne[i] != op->ne[i]) return false;
    }
    return op->op == GGML_OP_TOP_K ? op->ne[0] <= a->ne[0] : op->ne[0] == a->ne[0];
}

bool cuda_op_sort(cuda_context & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const bool desc = dst->op == GGML_OP_TOP_K || ggml_get_op_params_i32(dst, 0) == GGML_SORT_ORDER_DESC;
    const size_t shared = (size_t) a->ne[0] * sizeof(float);
    rank_sort_kernel<<<(unsigned) ggml_nrows(a), k_block_threads, shared, ctx.stream>>>(cuda_view_of(a), cuda_view_of(dst), desc,
                                                                                       dst->ne[0]);
    return CUDA_LAUNCHED();
}
