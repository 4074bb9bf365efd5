// Rotary position embedding with llama.cpp's parameters, as cpu/ops-rope.cpp computes it:
// normal (adjacent pairs) and NEOX (halves) pairing, partial rotation (values past n_dims are
// copied), frequency base/scale and per-pair frequency factors, YaRN and the multi-section modes
// (MROPE, IMROPE). The angles come from rope-angles.h, the CPU op's own functions, in double.
// One thread per (rotated pair or copied value, row).
#include "cuda-kernels.cuh"
#include "rope-angles.h"

namespace {

struct rope_args {
    cuda_view a, dst;
    const char * pos;   // I32 positions (4 per token for the multi-section modes)
    int64_t pos_nb0;
    const float * freq_factors;
    rope_angle_params rp;
};

__global__ void rope_kernel(rope_args p, int64_t per_row, int64_t n) {
    const rope_angle_params & rp = p.rp;
    const int half = rp.n_dims / 2;
    for (int64_t t = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; t < n; t += (int64_t) gridDim.x * blockDim.x) {
        const int64_t j = t % per_row;
        const coord4 r = row_coord(t / per_row, p.a.ne);
        const char * x = row_at(p.a, r.i1, r.i2, r.i3);
        char * y = row_at(p.dst, r.i1, r.i2, r.i3);
        if (j >= half) {
            // past the rotated part: copied
            const int64_t e = rp.n_dims + (j - half);
            store_float(y + e * p.dst.nb[0], p.dst.type, load_float(x + e * p.a.nb[0], p.a.type));
            continue;
        }
        const int i = (int) j;
        const int comp = rope_is_multi(rp.mode) ? rope_pair_component(rp, i) : 0;
        const double pos = (double) *(const int32_t *) (p.pos + (r.i2 + comp * p.a.ne[2]) * p.pos_nb0);
        const double inv_freq = rope_inv_freq(rp, i, p.freq_factors ? p.freq_factors[i] : 1.0);
        const double theta = rope_theta(rp, pos, inv_freq, rope_ramp_mix(rp, i));
        const float mscale = rope_mscale(rp);
        const float c = (float) cos(theta) * mscale;
        const float s = (float) sin(theta) * mscale;
        const bool neox = rope_is_neox(rp.mode);
        const int64_t e0 = neox ? i : 2 * i;
        const int64_t e1 = neox ? i + half : 2 * i + 1;
        const float a = load_float(x + e0 * p.a.nb[0], p.a.type);
        const float b = load_float(x + e1 * p.a.nb[0], p.a.type);
        store_float(y + e0 * p.dst.nb[0], p.dst.type, a * c - b * s);
        store_float(y + e1 * p.dst.nb[0], p.dst.type, a * s + b * c);
    }
}

} // namespace

bool cuda_supports_rope(const ggml_tensor * op) {
    if (op->op != GGML_OP_ROPE) return false;
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * pos = op->src[1];
    const ggml_tensor * ff = op->src[2];
    const int n_dims = ggml_get_op_params_i32(op, 1);
    const int mode = ggml_get_op_params_i32(op, 2);
    const bool multi = rope_is_multi(mode);
    if (!cuda_is_float_type(a->type) || !cuda_is_float_type(op->type) || !ggml_are_same_shape(a, op)) return false;
    if (pos->type != GGML_TYPE_I32 || pos->ne[0] != (multi ? 4 : 1) * a->ne[2]) return false;
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0]) return false;
    // a tensor that is both read and written in place with a different layout would race
    if (a->data == op->data && !(a->nb[0] == op->nb[0] && a->nb[1] == op->nb[1] && a->nb[2] == op->nb[2])) return false;
    return !ff || (ff->type == GGML_TYPE_F32 && ggml_is_contiguous(ff) && ff->ne[0] >= n_dims / 2);
}

bool cuda_op_rope(cuda_context & ctx, ggml_tensor * dst) {
    rope_args p;
    p.a = cuda_view_of(dst->src[0]);
    p.dst = cuda_view_of(dst);
    p.pos = (const char *) dst->src[1]->data;
    p.pos_nb0 = (int64_t) dst->src[1]->nb[0];
    p.freq_factors = dst->src[2] ? (const float *) dst->src[2]->data : nullptr;
    p.rp = rope_angle_params_of(dst);
    const int64_t per_row = p.rp.n_dims / 2 + (p.a.ne[0] - p.rp.n_dims);
    const int64_t n = per_row * cuda_nrows(p.a);
    rope_kernel<<<cuda_blocks_for(n), k_block_threads, 0, ctx.stream>>>(p, per_row, n);
    return CUDA_LAUNCHED();
}
