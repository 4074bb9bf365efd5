// The recurrent (gated delta-net) ops, as cpu/ops-recurrent.cpp computes them token by token:
//   ssm_conv: the short causal depthwise convolution with its rolling window, one thread per
//     channel walking the batch's tokens in order (each token uses its sequence's window);
//   gated_delta_net: per value head h and token, with the state S [d_k x d_v] of its sequence,
//     S = e^g S;  u = beta (v - S^T k);  S += k u^T;  out = scale S^T q.
//     Every column j of S evolves on its own (it needs k, q, v_j and the column itself), so one
//     thread owns one column of one head and walks the tokens in batch order, keeping the column
//     in memory it alone touches. The chunked form the CPU uses for prompts is the same
//     arithmetic reordered; here the recurrence serves both.
// Both update the state rows in place. A slot outside the state is skipped (the CPU aborts; the
// graph builder never makes one).
#include "cuda-kernels.cuh"

namespace {

struct conv_args {
    cuda_view x, w, state, dst;
    const int32_t * slots;
    int64_t n_ch, n_tokens, d_conv;
};

__global__ void ssm_conv_kernel(conv_args p) {
    const int64_t c = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
    if (c >= p.n_ch) return;
    const int64_t n_win = p.d_conv - 1;
    const float * wc = (const float *) (p.w.data + c * p.w.nb[1]);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t slot = p.slots[t];
        if (slot < 0 || slot >= p.state.ne[1]) continue;
        const float xt = *(const float *) (p.x.data + c * p.x.nb[0] + t * p.x.nb[1]);
        float * win = (float *) (p.state.data + slot * p.state.nb[1]) + c * n_win;   // oldest first
        float sum = wc[n_win] * xt;
        for (int64_t j = 0; j < n_win; ++j) sum += wc[j] * win[j];
        *(float *) (p.dst.data + c * p.dst.nb[0] + t * p.dst.nb[1]) = sum;
        for (int64_t j = 0; j + 1 < n_win; ++j) win[j] = win[j + 1];
        if (n_win > 0) win[n_win - 1] = xt;
    }
}

struct delta_args {
    cuda_view q, k, v, g, beta, state, dst;
    const int32_t * slots;
    int64_t d_k, d_v, n_kh, n_tokens;
    float scale;
};

// grid: (columns / block, value heads)
__global__ void gated_delta_net_kernel(delta_args p) {
    const int64_t j = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
    const int64_t h = blockIdx.y;
    if (j >= p.d_v) return;
    const int64_t kh = h % p.n_kh;
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t slot = p.slots[t];
        if (slot < 0 || slot >= p.state.ne[1]) continue;
        float * S = (float *) (p.state.data + slot * p.state.nb[1]) + h * p.d_k * p.d_v + j;   // column j, stride d_v
        const float * qt = (const float *) (p.q.data + kh * p.q.nb[1] + t * p.q.nb[2]);
        const float * kt = (const float *) (p.k.data + kh * p.k.nb[1] + t * p.k.nb[2]);
        const float vj = *(const float *) (p.v.data + j * p.v.nb[0] + h * p.v.nb[1] + t * p.v.nb[2]);
        const float decay = expf(*(const float *) (p.g.data + h * p.g.nb[0] + t * p.g.nb[1]));
        const float b = *(const float *) (p.beta.data + h * p.beta.nb[0] + t * p.beta.nb[1]);
        float recalled = 0.0f;   // (S^T k)_j of the decayed state
        for (int64_t i = 0; i < p.d_k; ++i) {
            const float s = S[i * p.d_v] * decay;
            S[i * p.d_v] = s;
            recalled += kt[i] * s;
        }
        const float u = (vj - recalled) * b;
        float o = 0.0f;
        for (int64_t i = 0; i < p.d_k; ++i) {
            const float s = S[i * p.d_v] + kt[i] * u;
            S[i * p.d_v] = s;
            o += p.scale * qt[i] * s;
        }
        *(float *) (p.dst.data + j * p.dst.nb[0] + h * p.dst.nb[1] + t * p.dst.nb[2]) = o;
    }
}

bool f32_rows(const ggml_tensor * t) { return t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float); }

} // namespace

bool cuda_supports_recurrent(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_SSM_CONV:
            return f32_rows(op->src[0]) && f32_rows(op->src[1]) && ggml_is_contiguous(op->src[1]) && f32_rows(op->src[2]) &&
                   f32_rows(op) && op->src[3]->type == GGML_TYPE_I32 && ggml_is_contiguous(op->src[3]);
        case GGML_OP_GATED_DELTA_NET:
            for (int i = 0; i < 6; ++i) {
                if (!f32_rows(op->src[i])) return false;
            }
            // the state rows are read as [d_k x d_v] per head: dense within a row
            return f32_rows(op) && op->src[6]->type == GGML_TYPE_I32 && ggml_is_contiguous(op->src[6]) &&
                   ggml_is_contiguous_rows(op->src[5]);
        default: return false;
    }
}

bool cuda_op_recurrent(cuda_context & ctx, ggml_tensor * dst) {
    if (dst->op == GGML_OP_SSM_CONV) {
        conv_args p;
        p.x = cuda_view_of(dst->src[0]);
        p.w = cuda_view_of(dst->src[1]);
        p.state = cuda_view_of(dst->src[2]);
        p.dst = cuda_view_of(dst);
        p.slots = (const int32_t *) dst->src[3]->data;
        p.n_ch = dst->src[0]->ne[0];
        p.n_tokens = dst->src[0]->ne[1];
        p.d_conv = dst->src[1]->ne[0];
        ssm_conv_kernel<<<(unsigned) ((p.n_ch + k_block_threads - 1) / k_block_threads), k_block_threads, 0, ctx.stream>>>(p);
        return CUDA_LAUNCHED();
    }
    delta_args p;
    p.q = cuda_view_of(dst->src[0]);
    p.k = cuda_view_of(dst->src[1]);
    p.v = cuda_view_of(dst->src[2]);
    p.g = cuda_view_of(dst->src[3]);
    p.beta = cuda_view_of(dst->src[4]);
    p.state = cuda_view_of(dst->src[5]);
    p.dst = cuda_view_of(dst);
    p.slots = (const int32_t *) dst->src[6]->data;
    p.d_k = dst->src[0]->ne[0];
    p.n_kh = dst->src[0]->ne[1];
    p.n_tokens = dst->src[0]->ne[2];
    p.d_v = dst->src[2]->ne[0];
    p.scale = ggml_get_op_params_f32(dst, 0);
    const int threads = p.d_v >= 128 ? 128 : 32;
    const dim3 grid((unsigned) ((p.d_v + threads - 1) / threads), (unsigned) dst->src[2]->ne[1]);
    gated_delta_net_kernel<<<grid, threads, 0, ctx.stream>>>(p);
    return CUDA_LAUNCHED();
}
