// Flash attention: softmax(q·kᵀ * scale [softcapped] + slope * mask) · v with an online softmax,
// as cpu/ops-attention.cpp computes it: grouped-query heads (n_head a multiple of n_head_kv),
// K/V in f32/f16/bf16 or any KV-cache block type (q8_0, q4_0, q4_1, q5_0, q5_1, q6_0, iq4_nl, and
// q8_KV with its per-row scale), f16/f32 masks broadcast over heads and sequences, ALiBi, softcap,
// attention sinks, and head sizes up to 1024 (MLA's 576/512 included).
//
// One block of 128 threads per (query, head, sequence). Keys go by in tiles of 32: each warp
// scores a quarter of the tile (lanes split the head dimension), the tile's weights go to shared
// memory, and each thread updates the accumulators of its own output dimensions. K and V rows are
// first decoded into shared memory as floats (a block type with the shared decoders of
// quants-blocks.h, a lane per 32-value chunk), so that no thread decodes a whole block for one
// value. Simple and checkable rather than fast: a tiled, tensor-core version for prompt batches
// is future work.
#include "cuda-kernels.cuh"

namespace {

constexpr int k_fa_threads = 128;
constexpr int k_fa_tile = 32;
constexpr int k_fa_max_dv_per_thread = 8;   // Dv <= 1024
constexpr int64_t k_fa_max_d = 1024;

struct fa_args {
    cuda_view q, k, v, mask, dst;
    bool has_mask;
    const float * sinks;
    float scale, max_bias, softcap;
    int64_t D, Dv, n_kv, G;   // G: query heads per kv head
};

constexpr int k_fa_rows = k_fa_threads / k_warp;   // K or V rows decoded at once (one per warp)

// Chunk ch (32 values) of a K or V row of a KV-cache block type, through the shared decoders.
__device__ void decode_kv_chunk(const char * row, int type, int64_t ch, float * y) {
    switch (type) {
#define FA_DECODE_CASE(t, block, fn) \
    case t: kiln_block_traits<t>::decode_row(row, ch, y); return;
        KILN_KV_BLOCK_TYPES(FA_DECODE_CASE)
#undef FA_DECODE_CASE
        case GGML_TYPE_Q8_KV: kiln_block_traits<GGML_TYPE_Q8_KV>::decode_row(row, ch, y); return;
        default:
            for (int j = 0; j < 32; ++j) y[j] = 0.0f;   // not reached: cuda_supports_attention refuses the type
    }
}

// n values of a K or V row into out, by the `count` threads numbered `idx` (float types: a value
// each in turn; block types: a 32-value chunk each in turn). The caller synchronizes after.
__device__ void stage_kv_row(const char * row, int type, int64_t n, float * out, int idx, int count) {
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) {
        const int64_t es = type == GGML_TYPE_F32 ? 4 : 2;
        for (int64_t d = idx; d < n; d += count) out[d] = load_float(row + d * es, type);
        return;
    }
    for (int64_t ch = idx; ch < n / 32; ch += count) decode_kv_chunk(row, type, ch, out + 32 * ch);
}

__global__ void flash_attn_kernel(fa_args p) {
    __shared__ float q[k_fa_max_d];
    __shared__ float w[k_fa_tile];
    __shared__ float rows[k_fa_rows][k_fa_max_d];   // decoded K rows (one per warp), then V rows
    const int64_t iq = blockIdx.x, h = blockIdx.y, sq = blockIdx.z;
    const int64_t hk = h / p.G;
    const int tid = threadIdx.x, lane = tid % k_warp, warp = tid / k_warp, n_warps = blockDim.x / k_warp;

    const char * qrow = row_at(p.q, iq, h, sq);
    for (int64_t d = tid; d < p.D; d += blockDim.x) q[d] = load_float(qrow + d * p.q.nb[0], p.q.type);
    const char * mrow = p.has_mask ? row_at(p.mask, iq, h % p.mask.ne[2], sq % p.mask.ne[3]) : nullptr;
    const float slope = p.has_mask ? alibi_slope(p.max_bias, p.q.ne[2], h) : 1.0f;

    float acc[k_fa_max_dv_per_thread];
    for (int i = 0; i < k_fa_max_dv_per_thread; ++i) acc[i] = 0.0f;
    float M = -INFINITY, S = 0.0f;
    __syncthreads();

    for (int64_t j0 = 0; j0 < p.n_kv; j0 += k_fa_tile) {
        const int nt = (int) min((int64_t) k_fa_tile, p.n_kv - j0);
        // 1. scores of the tile, one warp per key
        for (int t = warp; t < nt; t += n_warps) {
            const int64_t j = j0 + t;
            float m = 0.0f;
            if (mrow) m = load_float(mrow + j * p.mask.nb[0], p.mask.type);
            float x = -INFINITY;
            if (m != -INFINITY) {
                float * kr = rows[warp];
                stage_kv_row(row_at(p.k, j, hk, sq), p.k.type, p.D, kr, lane, k_warp);
                __syncwarp();
                float dot = 0.0f;
                for (int64_t d = lane; d < p.D; d += k_warp) dot += q[d] * kr[d];
                dot = warp_sum(dot);
                __syncwarp();   // every lane has read kr before the warp's next key overwrites it
                x = dot * p.scale;
                if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
                if (mrow) x += slope * m;
            }
            if (lane == 0) w[t] = x;
        }
        __syncthreads();
        // 2. online softmax: every thread computes the same new max and rescale
        float tile_max = -INFINITY;
        for (int t = 0; t < nt; ++t) tile_max = fmaxf(tile_max, w[t]);
        if (tile_max != -INFINITY) {
            const float M_new = fmaxf(M, tile_max);
            const float r = M == -INFINITY ? 0.0f : expf(M - M_new);
            __syncthreads();   // everyone has read the raw scores
            if (tid < nt) w[tid] = expf(w[tid] - M_new);
            __syncthreads();
            float tile_sum = 0.0f;
            for (int t = 0; t < nt; ++t) tile_sum += w[t];
            S = S * r + tile_sum;
            M = M_new;
            // 3. accumulate this thread's output dimensions, k_fa_rows V rows decoded at a time
            // (a key of weight 0, masked, is neither decoded nor added)
            for (int i = 0; i < k_fa_max_dv_per_thread; ++i) acc[i] *= r;
            for (int t0 = 0; t0 < nt; t0 += k_fa_rows) {
                const int nr = min(k_fa_rows, nt - t0);
                for (int t = 0; t < nr; ++t) {
                    if (w[t0 + t] != 0.0f) stage_kv_row(row_at(p.v, j0 + t0 + t, hk, sq), p.v.type, p.Dv, rows[t], tid, blockDim.x);
                }
                __syncthreads();
                for (int i = 0; i < k_fa_max_dv_per_thread; ++i) {
                    const int64_t d = tid + (int64_t) i * blockDim.x;
                    if (d >= p.Dv) break;
                    float a = acc[i];
                    for (int t = 0; t < nr; ++t) {
                        if (w[t0 + t] != 0.0f) a += w[t0 + t] * rows[t][d];
                    }
                    acc[i] = a;
                }
                __syncthreads();   // the rows are read before the next ones (or the next tile's K) overwrite them
            }
        }
        __syncthreads();   // the tile's weights are read before the next tile's scores overwrite them
    }

    float rescale = 1.0f;
    if (p.sinks && S > 0.0f) {
        // the sink may exceed every score: take the larger as the reference so nothing overflows
        const float sink = p.sinks[h];
        const float M2 = fmaxf(M, sink);
        rescale = expf(M - M2);
        S = S * rescale + expf(sink - M2);
    }
    const float inv = S > 0.0f ? rescale / S : 0.0f;   // every key masked: zeros, not NaN
    float * out = (float *) row_at(p.dst, h, iq, sq);
    for (int i = 0; i < k_fa_max_dv_per_thread; ++i) {
        const int64_t d = tid + (int64_t) i * blockDim.x;
        if (d >= p.Dv) break;
        out[d] = acc[i] * inv;
    }
}

// Rows of contiguous values (blocks) of a type the kernel decodes. A q8_KV row starts with its
// scale: each (cell, head) row of the view is a whole row of the cache (per-head rows).
bool kv_type_ok(const ggml_tensor * t) {
    if (kiln_kv_quant_type(t->type)) return t->nb[0] == ggml_type_size(t->type) && t->ne[0] % 32 == 0;
    return cuda_is_float_type(t->type) && t->nb[0] == ggml_type_size(t->type);
}

} // namespace

bool cuda_supports_attention(const ggml_tensor * op) {
    if (op->op != GGML_OP_FLASH_ATTN_EXT) return false;
    const ggml_tensor * q = op->src[0];
    const ggml_tensor * k = op->src[1];
    const ggml_tensor * v = op->src[2];
    const ggml_tensor * mask = op->src[3];
    const ggml_tensor * sinks = op->src[4];
    if (!cuda_is_float_type(q->type) || !kv_type_ok(k) || !kv_type_ok(v)) return false;
    if (op->type != GGML_TYPE_F32 || op->nb[0] != sizeof(float)) return false;
    if (q->ne[0] > k_fa_max_d || v->ne[0] > (int64_t) k_fa_threads * k_fa_max_dv_per_thread) return false;
    if (q->ne[2] % k->ne[2] != 0 || k->ne[2] != v->ne[2] || k->ne[1] != v->ne[1]) return false;
    if (q->ne[1] > 0x7fffffff || q->ne[2] > 65535 || q->ne[3] > 65535) return false;
    if (mask && (!(mask->type == GGML_TYPE_F16 || mask->type == GGML_TYPE_F32) || mask->ne[0] != k->ne[1] ||
                 mask->ne[1] < q->ne[1])) {
        return false;
    }
    return !sinks || (sinks->type == GGML_TYPE_F32 && ggml_is_contiguous(sinks) && sinks->ne[0] == q->ne[2]);
}

bool cuda_op_attention(cuda_context & ctx, ggml_tensor * dst) {
    fa_args p;
    p.q = cuda_view_of(dst->src[0]);
    p.k = cuda_view_of(dst->src[1]);
    p.v = cuda_view_of(dst->src[2]);
    p.has_mask = dst->src[3] != nullptr;
    p.mask = p.has_mask ? cuda_view_of(dst->src[3]) : p.q;
    p.dst = cuda_view_of(dst);
    p.sinks = dst->src[4] ? (const float *) dst->src[4]->data : nullptr;
    p.scale = ggml_get_op_params_f32(dst, 0);
    p.max_bias = ggml_get_op_params_f32(dst, 1);
    p.softcap = ggml_get_op_params_f32(dst, 2);
    p.D = p.q.ne[0];
    p.Dv = p.v.ne[0];
    p.n_kv = p.k.ne[1];
    p.G = p.q.ne[2] / p.k.ne[2];
    const dim3 grid((unsigned) p.q.ne[1], (unsigned) p.q.ne[2], (unsigned) p.q.ne[3]);
    flash_attn_kernel<<<grid, k_fa_threads, 0, ctx.stream>>>(p);
    return CUDA_LAUNCHED();
}
