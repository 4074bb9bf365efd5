// Element-wise ops on f32/f16/bf16 tensors of any strides: binary arithmetic with broadcasting,
// scale/clamp/sqr/sqrt, the unary activations, gated units (swiglu, geglu), and the row
// reductions sum_rows, mean and argmax. One thread per output element (per row for the
// reductions: one block per row); the formulas are the CPU's (cpu/ops-vec.cpp).
#include "cuda-kernels.cuh"

namespace {

enum class ew_kind : int { add, sub, mul, div, scale, clamp, sqr, sqrt, silu, gelu, sigmoid, softplus, relu, tanh, neg, exp,
                           swiglu, geglu };

__device__ __forceinline__ float apply1(ew_kind k, float x, float p0, float p1) {
    switch (k) {
        case ew_kind::scale: return p0 * x + p1;
        case ew_kind::clamp: return fminf(p1, fmaxf(p0, x));
        case ew_kind::sqr: return x * x;
        case ew_kind::sqrt: return sqrtf(x);
        case ew_kind::silu: return silu1(x);
        case ew_kind::gelu: return gelu1(x);
        case ew_kind::sigmoid: return 1.0f / (1.0f + expf(-x));
        case ew_kind::softplus: return x > 20.0f ? x : log1pf(expf(x));
        case ew_kind::relu: return x > 0.0f ? x : 0.0f;
        case ew_kind::tanh: return tanhf(x);
        case ew_kind::neg: return -x;
        case ew_kind::exp: return expf(x);
        default: return x;
    }
}

__device__ __forceinline__ float apply2(ew_kind k, float a, float b) {
    switch (k) {
        case ew_kind::add: return a + b;
        case ew_kind::sub: return a - b;
        case ew_kind::mul: return a * b;
        case ew_kind::div: return a / b;
        case ew_kind::swiglu: return silu1(a) * b;
        case ew_kind::geglu: return gelu1(a) * b;
        default: return a;
    }
}

// dst = a op b, b repeating along every dimension (b's extents divide a's).
__global__ void binary_kernel(ew_kind k, cuda_view a, cuda_view b, cuda_view dst, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const coord4 c = unravel(i, dst.ne);
        const float x = load_float(at(a, c.i0, c.i1, c.i2, c.i3), a.type);
        const float y = load_float(at(b, c.i0 % b.ne[0], c.i1 % b.ne[1], c.i2 % b.ne[2], c.i3 % b.ne[3]), b.type);
        store_float(at(dst, c.i0, c.i1, c.i2, c.i3), dst.type, apply2(k, x, y));
    }
}

__global__ void unary_kernel(ew_kind k, cuda_view a, cuda_view dst, float p0, float p1, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const coord4 c = unravel(i, dst.ne);
        const float x = load_float(at(a, c.i0, c.i1, c.i2, c.i3), a.type);
        store_float(at(dst, c.i0, c.i1, c.i2, c.i3), dst.type, apply1(k, x, p0, p1));
    }
}

// One block per row: sum (mean = true: divided by the length) or index of the first maximum.
__global__ void reduce_rows_kernel(cuda_view a, cuda_view dst, bool mean, bool argmax) {
    __shared__ float shared[32];
    __shared__ int shared_idx[32];
    const coord4 r = row_coord(blockIdx.x, a.ne);
    const char * row = row_at(a, r.i1, r.i2, r.i3);
    if (!argmax) {
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) s += load_float(row + i * a.nb[0], a.type);
        s = block_sum(s, shared);
        if (threadIdx.x == 0) store_float(row_at(dst, r.i1, r.i2, r.i3), dst.type, mean ? s / (float) a.ne[0] : s);
        return;
    }
    float best = -INFINITY;
    int best_i = 0x7fffffff;
    for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) {
        const float x = load_float(row + i * a.nb[0], a.type);
        if (x > best || (best_i == 0x7fffffff)) { best = x; best_i = (int) i; }
    }
    // the first index of the maximum wins, as on the CPU
    const float m = block_max(best, shared);
    int cand = best == m ? best_i : 0x7fffffff;
    for (int o = k_warp / 2; o > 0; o >>= 1) cand = min(cand, __shfl_xor_sync(0xffffffffu, cand, o));
    const int lane = threadIdx.x % k_warp, wid = threadIdx.x / k_warp, nw = blockDim.x / k_warp;
    if (lane == 0) shared_idx[wid] = cand;
    __syncthreads();
    if (threadIdx.x == 0) {
        int first = 0x7fffffff;
        for (int w = 0; w < nw; ++w) first = min(first, shared_idx[w]);
        *(int32_t *) (dst.data + r.i1 * dst.nb[0]) = first == 0x7fffffff ? 0 : first;
    }
}

__global__ void probe_kernel(int *) {}

bool kind_of(const ggml_tensor * op, ew_kind & k) {
    switch (op->op) {
        case GGML_OP_ADD: k = ew_kind::add; return true;
        case GGML_OP_SUB: k = ew_kind::sub; return true;
        case GGML_OP_MUL: k = ew_kind::mul; return true;
        case GGML_OP_DIV: k = ew_kind::div; return true;
        case GGML_OP_SCALE: k = ew_kind::scale; return true;
        case GGML_OP_CLAMP: k = ew_kind::clamp; return true;
        case GGML_OP_SQR: k = ew_kind::sqr; return true;
        case GGML_OP_SQRT: k = ew_kind::sqrt; return true;
        case GGML_OP_UNARY:
            switch ((ggml_unary_op) ggml_get_op_params_i32(op, 0)) {
                case GGML_UNARY_OP_SILU: k = ew_kind::silu; return true;
                case GGML_UNARY_OP_GELU: k = ew_kind::gelu; return true;
                case GGML_UNARY_OP_SIGMOID: k = ew_kind::sigmoid; return true;
                case GGML_UNARY_OP_SOFTPLUS: k = ew_kind::softplus; return true;
                case GGML_UNARY_OP_RELU: k = ew_kind::relu; return true;
                case GGML_UNARY_OP_TANH: k = ew_kind::tanh; return true;
                case GGML_UNARY_OP_NEG: k = ew_kind::neg; return true;
                case GGML_UNARY_OP_EXP: k = ew_kind::exp; return true;
                default: return false;
            }
        case GGML_OP_GLU:
            switch ((ggml_glu_op) ggml_get_op_params_i32(op, 0)) {
                case GGML_GLU_OP_SWIGLU: k = ew_kind::swiglu; return true;
                case GGML_GLU_OP_GEGLU: k = ew_kind::geglu; return true;
                default: return false;
            }
        default: return false;
    }
}

bool is_reduction(ggml_op op) { return op == GGML_OP_SUM_ROWS || op == GGML_OP_MEAN || op == GGML_OP_ARGMAX; }

} // namespace

bool cuda_kernels_run_on(int ordinal) {
    int prev = 0;
    cudaGetDevice(&prev);
    cudaFuncAttributes attr;
    const bool ok = cudaSetDevice(ordinal) == cudaSuccess && cudaFuncGetAttributes(&attr, probe_kernel) == cudaSuccess;
    cudaGetLastError();
    cudaSetDevice(prev);
    return ok;
}

bool cuda_supports_elementwise(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    if (!a) return false;
    if (is_reduction(op->op)) {
        if (!cuda_is_float_type(a->type)) return false;
        if (op->op == GGML_OP_ARGMAX) return op->type == GGML_TYPE_I32 && a->ne[2] == 1 && a->ne[3] == 1;
        return cuda_is_float_type(op->type);
    }
    ew_kind k;
    if (!kind_of(op, k)) return false;
    if (!cuda_is_float_type(a->type) || !cuda_is_float_type(op->type) || !ggml_are_same_shape(a, op)) return false;
    if (op->src[1]) {
        const ggml_tensor * b = op->src[1];
        if (!cuda_is_float_type(b->type)) return false;
        for (int i = 0; i < 4; ++i) {
            if (b->ne[i] == 0 || a->ne[i] % b->ne[i] != 0) return false;
        }
    }
    return true;
}

bool cuda_op_elementwise(cuda_context & ctx, ggml_tensor * dst) {
    const cuda_view a = cuda_view_of(dst->src[0]);
    const cuda_view d = cuda_view_of(dst);
    if (is_reduction(dst->op)) {
        const int64_t rows = cuda_nrows(a);
        reduce_rows_kernel<<<(unsigned) rows, k_block_threads, 0, ctx.stream>>>(a, d, dst->op == GGML_OP_MEAN,
                                                                               dst->op == GGML_OP_ARGMAX);
        return CUDA_LAUNCHED();
    }
    ew_kind k;
    kind_of(dst, k);
    const int64_t n = ggml_nelements(dst);
    const unsigned blocks = cuda_blocks_for(n);
    if (dst->src[1]) {
        binary_kernel<<<blocks, k_block_threads, 0, ctx.stream>>>(k, a, cuda_view_of(dst->src[1]), d, n);
    } else {
        const float p0 = ggml_get_op_params_f32(dst, 0), p1 = ggml_get_op_params_f32(dst, 1);
        unary_kernel<<<blocks, k_block_threads, 0, ctx.stream>>>(k, a, d, p0, p1, n);
    }
    return CUDA_LAUNCHED();
}
