// Row-wise normalisations: layer norm without affine terms, RMS norm, L2 norm, and softmax with
// scale, mask (f32/f16, broadcast over dims 2 and 3), ALiBi slopes and attention sinks. One block
// per row; each pass re-reads the row (rows are short enough to stay in L1/L2), so no scratch.
// The formulas and special cases are the CPU's (cpu/ops-norm.cpp, cpu/ops-softmax.cpp).
#include "cuda-kernels.cuh"

namespace {

enum class norm_kind : int { norm, rms, l2 };

__global__ void norm_kernel(norm_kind k, cuda_view a, cuda_view dst, float eps) {
    __shared__ float shared[32];
    const coord4 r = row_coord(blockIdx.x, a.ne);
    const char * x = row_at(a, r.i1, r.i2, r.i3);
    char * y = row_at(dst, r.i1, r.i2, r.i3);
    const int64_t n = a.ne[0];
    float mean = 0.0f;
    if (k == norm_kind::norm) {
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += load_float(x + i * a.nb[0], a.type);
        mean = block_sum(s, shared) / (float) n;
    }
    float sq = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = load_float(x + i * a.nb[0], a.type) - mean;
        sq += v * v;
    }
    sq = block_sum(sq, shared);
    float scale;
    switch (k) {
        case norm_kind::rms: scale = 1.0f / sqrtf(sq / (float) n + eps); break;
        case norm_kind::l2: scale = 1.0f / fmaxf(sqrtf(sq), eps); break;   // eps bounds an all-zero row
        default: scale = 1.0f / sqrtf(sq / (float) n + eps); break;
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        store_float(y + i * dst.nb[0], dst.type, (load_float(x + i * a.nb[0], a.type) - mean) * scale);
    }
}

struct softmax_args {
    cuda_view a, mask, dst;
    const float * sinks;   // nullptr: none
    bool has_mask;
    float scale, max_bias;
};

__global__ void softmax_kernel(softmax_args p) {
    __shared__ float shared[32];
    const coord4 r = row_coord(blockIdx.x, p.a.ne);
    const char * x = row_at(p.a, r.i1, r.i2, r.i3);
    char * y = row_at(p.dst, r.i1, r.i2, r.i3);
    const char * m = p.has_mask ? row_at(p.mask, r.i1, r.i2 % p.mask.ne[2], r.i3 % p.mask.ne[3]) : nullptr;
    const float slope = p.has_mask ? alibi_slope(p.max_bias, p.a.ne[2], r.i2) : 1.0f;
    const int64_t n = p.a.ne[0];
    auto logit = [&](int64_t i) {
        float w = load_float(x + i * p.a.nb[0], p.a.type) * p.scale;
        if (m) w += slope * load_float(m + i * p.mask.nb[0], p.mask.type);
        return w;
    };
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, logit(i));
    const float sink = p.sinks ? p.sinks[r.i2] : -INFINITY;
    mx = fmaxf(block_max(mx, shared), sink);
    if (mx == -INFINITY) {
        // every entry masked: zeros rather than NaN, as on the CPU
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) store_float(y + i * p.dst.nb[0], p.dst.type, 0.0f);
        return;
    }
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(logit(i) - mx);
    s = block_sum(s, shared) + (p.sinks ? expf(sink - mx) : 0.0f);
    const float inv = 1.0f / s;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) store_float(y + i * p.dst.nb[0], p.dst.type, expf(logit(i) - mx) * inv);
}

} // namespace

bool cuda_supports_norm(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    switch (op->op) {
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
        case GGML_OP_L2_NORM:
            return cuda_is_float_type(a->type) && cuda_is_float_type(op->type) && ggml_are_same_shape(a, op);
        case GGML_OP_SOFT_MAX: {
            const ggml_tensor * mask = op->src[1];
            const ggml_tensor * sinks = op->src[2];
            if (!cuda_is_float_type(a->type) || !cuda_is_float_type(op->type) || !ggml_are_same_shape(a, op)) return false;
            if (mask && (!(mask->type == GGML_TYPE_F32 || mask->type == GGML_TYPE_F16) || mask->ne[0] != a->ne[0] ||
                         mask->ne[1] < a->ne[1])) {
                return false;
            }
            return !sinks || (sinks->type == GGML_TYPE_F32 && ggml_is_contiguous(sinks) && sinks->ne[0] == a->ne[2]);
        }
        default: return false;
    }
}

bool cuda_op_norm(cuda_context & ctx, ggml_tensor * dst) {
    const cuda_view a = cuda_view_of(dst->src[0]);
    const unsigned rows = (unsigned) cuda_nrows(a);
    if (dst->op == GGML_OP_SOFT_MAX) {
        softmax_args p;
        p.a = a;
        p.dst = cuda_view_of(dst);
        p.has_mask = dst->src[1] != nullptr;
        p.mask = p.has_mask ? cuda_view_of(dst->src[1]) : p.a;
        p.sinks = dst->src[2] ? (const float *) dst->src[2]->data : nullptr;
        p.scale = ggml_get_op_params_f32(dst, 0);
        p.max_bias = ggml_get_op_params_f32(dst, 1);
        softmax_kernel<<<rows, k_block_threads, 0, ctx.stream>>>(p);
        return CUDA_LAUNCHED();
    }
    const norm_kind k = dst->op == GGML_OP_NORM ? norm_kind::norm : dst->op == GGML_OP_RMS_NORM ? norm_kind::rms : norm_kind::l2;
    norm_kernel<<<rows, k_block_threads, 0, ctx.stream>>>(k, a, cuda_view_of(dst), ggml_get_op_params_f32(dst, 0));
    return CUDA_LAUNCHED();
}
