// Rotary position embedding with llama.cpp's parameters, as cpu/ops-rope.cpp computes it:
// normal (adjacent pairs) and NEOX (halves) pairing, partial rotation (values past n_dims are
// copied), frequency base/scale and per-pair frequency factors, YaRN (ramp between extrapolated
// and interpolated angles, magnitude scaling) and the multi-section modes (MROPE, IMROPE).
// Angles are computed in double as on the CPU: positions reach 10^5 and a float angle would be
// off by 10^-2 radians there. One thread per (rotated pair or copied value, row).
#include "cuda-kernels.cuh"

namespace {

struct rope_args {
    cuda_view a, dst;
    const char * pos;   // I32 positions (4 per token for the multi-section modes)
    int64_t pos_nb0;
    const float * freq_factors;
    int n_dims, mode;
    float freq_base, freq_scale, ext_factor, attn_factor;
    float corr0, corr1;   // YaRN correction range (ggml_rope_yarn_corr_dims)
    int sections[4];
};

__device__ bool is_multi(int mode) { return (mode & GGML_ROPE_TYPE_MROPE) != 0; }

// Which of the four position components pair i rotates by (multi-section modes).
__device__ int pair_component(const rope_args & p, int i) {
    const int * s = p.sections;
    const int sector = i % (s[0] + s[1] + s[2] + s[3]);
    if (p.mode == GGML_ROPE_TYPE_IMROPE) {
        if (sector % 3 == 0 && sector < 3 * s[0]) return 0;
        if (sector % 3 == 1 && sector < 3 * s[1]) return 1;
        if (sector % 3 == 2 && sector < 3 * s[2]) return 2;
        return 3;
    }
    if (sector < s[0]) return 0;
    if (sector < s[0] + s[1]) return 1;
    if (sector < s[0] + s[1] + s[2]) return 2;
    return 3;
}

__global__ void rope_kernel(rope_args p, int64_t per_row, int64_t n) {
    const int half = p.n_dims / 2;
    for (int64_t t = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; t < n; t += (int64_t) gridDim.x * blockDim.x) {
        const int64_t j = t % per_row;
        const coord4 r = row_coord(t / per_row, p.a.ne);
        const char * x = row_at(p.a, r.i1, r.i2, r.i3);
        char * y = row_at(p.dst, r.i1, r.i2, r.i3);
        if (j >= half) {
            // past the rotated part: copied
            const int64_t e = p.n_dims + (j - half);
            store_float(y + e * p.dst.nb[0], p.dst.type, load_float(x + e * p.a.nb[0], p.a.type));
            continue;
        }
        const int i = (int) j;
        const int comp = is_multi(p.mode) ? pair_component(p, i) : 0;
        const double pos = (double) *(const int32_t *) (p.pos + (r.i2 + comp * p.a.ne[2]) * p.pos_nb0);
        const double ff = p.freq_factors ? p.freq_factors[i] : 1.0;
        const double inv_freq = pow((double) p.freq_base, -2.0 * i / p.n_dims) / ff;
        float ramp = 0.0f, mscale = p.attn_factor;
        if (p.ext_factor != 0.0f) {
            const float yv = (i - p.corr0) / fmaxf(0.001f, p.corr1 - p.corr0);
            ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, yv))) * p.ext_factor;
            mscale *= 1.0f + 0.1f * logf(1.0f / p.freq_scale);
        }
        const double extrap = pos * inv_freq;
        const double interp = p.freq_scale * extrap;
        const double theta = interp * (1.0 - ramp) + extrap * ramp;
        const float c = (float) cos(theta) * mscale;
        const float s = (float) sin(theta) * mscale;
        const bool neox = is_multi(p.mode) || (p.mode & GGML_ROPE_TYPE_NEOX) != 0;
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
    const bool multi = (mode & GGML_ROPE_TYPE_MROPE) != 0;
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
    p.n_dims = ggml_get_op_params_i32(dst, 1);
    p.mode = ggml_get_op_params_i32(dst, 2);
    const int n_ctx_orig = ggml_get_op_params_i32(dst, 4);
    p.freq_base = ggml_get_op_params_f32(dst, 5);
    p.freq_scale = ggml_get_op_params_f32(dst, 6);
    p.ext_factor = ggml_get_op_params_f32(dst, 7);
    p.attn_factor = ggml_get_op_params_f32(dst, 8);
    const float beta_fast = ggml_get_op_params_f32(dst, 9);
    const float beta_slow = ggml_get_op_params_f32(dst, 10);
    for (int i = 0; i < 4; ++i) p.sections[i] = ggml_get_op_params_i32(dst, 11 + i);
    float corr[2] = { 0.0f, 0.0f };
    if (p.ext_factor != 0.0f) ggml_rope_yarn_corr_dims(p.n_dims, n_ctx_orig, p.freq_base, beta_fast, beta_slow, corr);
    p.corr0 = corr[0];
    p.corr1 = corr[1];
    const int64_t per_row = p.n_dims / 2 + (p.a.ne[0] - p.n_dims);
    const int64_t n = per_row * cuda_nrows(p.a);
    rope_kernel<<<cuda_blocks_for(n), k_block_threads, 0, ctx.stream>>>(p, per_row, n);
    return CUDA_LAUNCHED();
}
