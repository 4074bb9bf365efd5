// Matrix products: mul_mat, the expert-routed mul_mat_id, and the fused expert gate/up with its
// activation (moe_up_gate).
//
// Two paths:
//  - few columns (token generation): one warp per output value reads the weight row straight
//    from its blocks (decoded 32 values at a time by quants-blocks.h, the functions the host tests
//    compare with the CPU decoders) and dots it with the f32 activations. Memory-bound: each
//    weight byte is read once per column. The expert ops take this path for small batches (the
//    expert id is read on the device, so no copy to the host and no sync); larger ones are
//    grouped by expert and go to cuBLAS (ops-experts.cu).
//  - more columns (prompt batches): cuBLAS. f32 weights go to SGEMM as they are; f16 and bf16 to
//    GemmEx with the activations converted to the same type; quantized weights are first decoded
//    to f16 in scratch memory. Accumulation is f32 throughout.
// Activations stay f32 on the first path, where the CPU quantizes them to q8 for its integer
// kernels, so results differ from the CPU by that quantization (tests compare both with a double
// reference).
#include "cuda-kernels.cuh"
#include "ops-matmul.h"

#include <algorithm>

namespace {

constexpr int k_rows_per_block = 4;      // warps per block, one output row each
constexpr int64_t k_cublas_min_cols = 9; // from this many columns on, cuBLAS

enum class mmv_mode : int { mul_mat, mul_mat_id, moe_up_gate };

struct mmv_args {
    mmv_mode mode;
    cuda_view a, gate, b, ids, dst;
    cuda_view keep;        // expert ops: F32 [n_used, n_tokens], 0 = pair dropped (-ser); data null: none
    int64_t K, M;
    int64_t r2, r3;        // mul_mat: b's dims 2, 3 per weight matrix (broadcast)
    int64_t n_b;           // expert ops: b's columns per token (1 or n_used)
    bool quant;
    int glu;               // moe_up_gate: ggml_glu_op
};

// The weights' layout as warp_row_dot reads it, passed by value: a reference to the kernel's
// parameter block would make every thread copy it to local memory.
struct mmv_weights {
    int type;
    bool quant;
    int64_t K, nb0, nb1;
};

// Chunk ch of weight row m (starting at w, row stride nb1) as a matrix product uses it. The one
// copy of the decoder switch (every type of KILN_BLOCK_TYPES and KILN_INTERLEAVED_TYPES) in this
// file: each inlined copy added about 3 CPU-seconds of nvcc time; the values pass through the
// stack, which costs little next to the weight reads.
__device__ __noinline__ void decode_weight_chunk(int type, const char * w, int64_t m, int64_t nb1, int64_t ch, float * v) {
    decode_row_chunk(type, w, m, nb1, ch, v, /*matmul=*/true);
}

// Weight row m (quantized blocks or f32/f16/bf16 values, starting at w) dotted with x (f32,
// dense); every lane of the warp returns the sum. Not inlined: the kernel calls it at three
// places.
__device__ __noinline__ float warp_row_dot(mmv_weights wt, const char * w, int64_t m, const float * x) {
    const int lane = threadIdx.x % k_warp;
    float acc = 0.0f;
    if (wt.quant) {
        const int64_t chunks = wt.K / 32;
        for (int64_t ch = lane; ch < chunks; ch += k_warp) {
            float v[32];
            decode_weight_chunk(wt.type, w, m, wt.nb1, ch, v);
            const float * xx = x + ch * 32;
#pragma unroll
            for (int j = 0; j < 32; ++j) acc += v[j] * xx[j];
        }
    } else {
        for (int64_t k = lane; k < wt.K; k += k_warp) acc += load_float(w + k * wt.nb0, wt.type) * x[k];
    }
    return warp_sum(acc);
}

// grid: x = row blocks, y = column j (mul_mat) or slot (expert ops), z = batch t (b's dims 2, 3
// flattened) or token.
__global__ void mmv_kernel(mmv_args p) {
    const int64_t m = (int64_t) blockIdx.x * k_rows_per_block + threadIdx.x / k_warp;
    if (m >= p.M) return;
    const int64_t j = blockIdx.y, t = blockIdx.z;
    const mmv_weights wt = { p.a.type, p.quant, p.K, p.a.nb[0], p.a.nb[1] };
    float r;
    if (p.mode == mmv_mode::mul_mat) {
        const int64_t i2 = t % p.b.ne[2], i3 = t / p.b.ne[2];
        const char * w = p.a.data + (i2 / p.r2) * p.a.nb[2] + (i3 / p.r3) * p.a.nb[3] + m * p.a.nb[1];
        const float * x = (const float *) row_at(p.b, j, i2, i3);
        r = warp_row_dot(wt, w, m, x);
        if (threadIdx.x % k_warp == 0) *(float *) (row_at(p.dst, j, i2, i3) + m * p.dst.nb[0]) = r;
        return;
    }
    const int32_t e = *(const int32_t *) (p.ids.data + j * p.ids.nb[0] + t * p.ids.nb[1]);
    // a pair the keep mask drops (smart expert reduction) is not computed: its row is zero, as on
    // the CPU, and its weight bytes are not read
    const bool dropped = p.keep.data && *(const float *) (p.keep.data + j * p.keep.nb[0] + t * p.keep.nb[1]) == 0.0f;
    if (dropped || e < 0 || e >= p.a.ne[2]) {
        if (threadIdx.x % k_warp == 0) *(float *) (row_at(p.dst, j, t, 0) + m * p.dst.nb[0]) = 0.0f;
        return;
    }
    const float * x = (const float *) row_at(p.b, j % p.n_b, t, 0);
    r = warp_row_dot(wt, p.a.data + e * p.a.nb[2] + m * p.a.nb[1], m, x);
    if (p.mode == mmv_mode::moe_up_gate) {
        const float g = warp_row_dot(wt, p.gate.data + e * p.gate.nb[2] + m * p.gate.nb[1], m, x);
        r *= p.glu == GGML_GLU_OP_GEGLU ? gelu1(g) : silu1(g);
    }
    if (threadIdx.x % k_warp == 0) *(float *) (row_at(p.dst, j, t, 0) + m * p.dst.nb[0]) = r;
}

// ---- the cuBLAS path

// Weight matrices of M rows of K decoded to f16, dense, one after the other: the i-th is matrix
// mats[i] of a (nb2 bytes apart), or matrix 0 when mats is null. Several per launch: the batched
// expert products decode their chosen experts together (one small launch each kept the GPU idle).
__global__ void dequantize_f16_kernel(const char * a, int64_t a_nb1, int64_t a_nb2, const int32_t * mats, int type, int64_t K,
                                      int64_t M, int64_t n_chunks, __half * out) {
    const int64_t chunks_per_row = K / 32, chunks_per_mat = M * chunks_per_row;
    for (int64_t t = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; t < n_chunks; t += (int64_t) gridDim.x * blockDim.x) {
        const int64_t i = t / chunks_per_mat, row = (t % chunks_per_mat) / chunks_per_row, ch = t % chunks_per_row;
        const char * w = a + (mats ? (int64_t) mats[i] : 0) * a_nb2;
        float v[32];
        decode_weight_chunk(type, w + row * a_nb1, row, a_nb1, ch, v);
        __half * y = out + (i * M + row) * K + ch * 32;
        for (int j = 0; j < 32; ++j) y[j] = __float2half_rn(v[j]);
    }
}

// Activation slice (N columns of K f32 values, column stride b_nb1) to dense f16 or bf16.
__global__ void activations_to_half_kernel(const char * b, int64_t b_nb1, int64_t K, int64_t n, bool bf16, void * out) {
    for (int64_t t = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; t < n; t += (int64_t) gridDim.x * blockDim.x) {
        const float v = *(const float *) (b + (t / K) * b_nb1 + (t % K) * sizeof(float));
        if (bf16) {
            ((__nv_bfloat16 *) out)[t] = __float2bfloat16_rn(v);
        } else {
            ((__half *) out)[t] = __float2half_rn(v);
        }
    }
}

bool mul_mat_cublas(cuda_context & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const bool quant = !cuda_is_float_type(a->type);
    const bool f32 = a->type == GGML_TYPE_F32;
    const bool bf16 = a->type == GGML_TYPE_BF16;
    const cudaDataType_t half_type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f, beta = 0.0f;
    const int64_t ldc = (int64_t) (dst->nb[1] / sizeof(float));
    for (int64_t ia3 = 0; ia3 < a->ne[3]; ++ia3) {
        for (int64_t ia2 = 0; ia2 < a->ne[2]; ++ia2) {
            const char * a_slice = (const char *) a->data + ia2 * a->nb[2] + ia3 * a->nb[3];
            const void * A = a_slice;
            int64_t lda = quant ? K : (int64_t) (a->nb[1] / ggml_type_size(a->type));
            cuda_scratch decoded(*ctx.pool, quant ? (size_t) (M * K * sizeof(__half)) : 0);   // 0: none
            if (quant) {
                if (!decoded || !cuda_decode_weights_f16(ctx, a_slice, (int64_t) a->nb[1], 0, nullptr, 1, a->type, K, M, decoded.as<void>())) {
                    return false;
                }
                A = decoded.as<void>();
            }
            for (int64_t i3 = ia3 * r3; i3 < (ia3 + 1) * r3; ++i3) {
                for (int64_t i2 = ia2 * r2; i2 < (ia2 + 1) * r2; ++i2) {
                    const char * b_slice = (const char *) b->data + i2 * b->nb[2] + i3 * b->nb[3];
                    float * C = (float *) ((char *) dst->data + i2 * dst->nb[2] + i3 * dst->nb[3]);
                    if (f32) {
                        if (!CUBLAS_OK(cublas_get()->sgemm(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) M, (int) N, (int) K, &alpha,
                                                   (const float *) A, (int) lda, (const float *) b_slice,
                                                   (int) (b->nb[1] / sizeof(float)), &beta, C, (int) ldc))) {
                            return false;
                        }
                        continue;
                    }
                    cuda_scratch bh(*ctx.pool, (size_t) (K * N * 2));
                    if (!bh) return false;
                    activations_to_half_kernel<<<cuda_blocks_for(K * N), k_block_threads, 0, ctx.stream>>>(
                        b_slice, (int64_t) b->nb[1], K, K * N, bf16, bh.as<void>());
                    if (!CUDA_LAUNCHED()) return false;
                    if (!CUBLAS_OK(cublas_get()->gemm_ex(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) M, (int) N, (int) K, &alpha, A,
                                                quant ? CUDA_R_16F : half_type, (int) lda, bh.as<void>(), half_type, (int) K,
                                                &beta, C, CUDA_R_32F, (int) ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))) {
                        return false;
                    }
                }
            }
        }
    }
    return true;
}

// Wide products go to cuBLAS when it is loaded and the leading dimensions hold whole rows (a
// row's bytes are ggml_row_size: ne[0] * type_size counts a whole block per value for a quantized
// type, more than any row holds, which kept every quantized weight off this path).
bool cublas_takes(const ggml_tensor * a, const ggml_tensor * b, const ggml_tensor * dst) {
    return b->ne[1] >= k_cublas_min_cols && cublas_get() && a->nb[1] >= ggml_row_size(a->type, a->ne[0]) &&
           b->nb[1] >= b->ne[0] * sizeof(float) && dst->nb[1] >= dst->ne[0] * sizeof(float);
}

// The block kernels' grid: columns in y, b's dims 2 and 3 in z.
bool block_path_takes(const ggml_tensor * b) { return b->ne[1] <= 65535 && b->ne[2] * b->ne[3] <= 65535; }

bool weights_ok(const ggml_tensor * a) {
    if (cuda_is_float_type(a->type)) return a->nb[0] == ggml_type_size(a->type);
    return cuda_weight_rows_decodable(a);
}

bool f32_rows(const ggml_tensor * t) { return t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0; }

void fill_common(mmv_args & p, const ggml_tensor * a) {
    p.a = cuda_view_of(a);
    p.K = a->ne[0];
    p.M = a->ne[1];
    p.quant = !cuda_is_float_type(a->type);
    p.r2 = p.r3 = 1;
    p.n_b = 1;
    p.glu = 0;
}

} // namespace

bool cuda_decode_weights_f16(cuda_context & ctx, const char * a, int64_t nb1, int64_t nb2, const int32_t * mats, int64_t n_mats,
                             int type, int64_t K, int64_t M, void * out) {
    const int64_t n_chunks = n_mats * M * (K / 32);
    dequantize_f16_kernel<<<cuda_blocks_for(n_chunks), k_block_threads, 0, ctx.stream>>>(a, nb1, nb2, mats, type, K, M, n_chunks,
                                                                                       (__half *) out);
    return CUDA_LAUNCHED();
}

bool cuda_supports_matmul(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_MUL_MAT: {
            const ggml_tensor * a = op->src[0];
            const ggml_tensor * b = op->src[1];
            if (!weights_ok(a) || !f32_rows(b) || !f32_rows(op)) return false;
            // whole elements per row for cuBLAS's leading dimension (float weights; quantized ones are
            // decoded to dense scratch first, and their rows may start with a scale)
            if (cuda_is_float_type(a->type) && a->nb[1] % ggml_type_size(a->type) != 0) return false;
            if (b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
            return cublas_takes(a, b, op) || block_path_takes(b);
        }
        case GGML_OP_MUL_MAT_ID:
        case GGML_OP_MOE_FUSED_UP_GATE: {
            const bool fused = op->op == GGML_OP_MOE_FUSED_UP_GATE;
            const ggml_tensor * a = op->src[0];
            const ggml_tensor * b = fused ? op->src[2] : op->src[1];
            const ggml_tensor * ids = fused ? op->src[3] : op->src[2];
            if (fused) {
                const ggml_glu_op glu = (ggml_glu_op) ggml_get_op_params_i32(op, 0);
                if (glu != GGML_GLU_OP_SWIGLU && glu != GGML_GLU_OP_GEGLU) return false;
                if (!weights_ok(op->src[1]) || op->src[1]->type != a->type) return false;
            }
            if (!weights_ok(a) || !f32_rows(b) || !f32_rows(op) || ids->type != GGML_TYPE_I32) return false;
            const ggml_tensor * keep = fused ? op->src[4] : op->src[3];
            if (keep && (keep->type != GGML_TYPE_F32 || keep->ne[0] != ids->ne[0] || keep->ne[1] != ids->ne[1])) return false;
            return ids->ne[0] <= 65535 && ids->ne[1] <= 65535 && a->ne[3] == 1 && b->ne[2] == ids->ne[1];
        }
        default: return false;
    }
}

bool cuda_op_matmul(cuda_context & ctx, ggml_tensor * dst) {
    mmv_args p;
    p.dst = cuda_view_of(dst);
    if (dst->op == GGML_OP_MUL_MAT) {
        const ggml_tensor * a = dst->src[0];
        const ggml_tensor * b = dst->src[1];
        if (ctx.cublas && cublas_takes(a, b, dst)) return mul_mat_cublas(ctx, a, b, dst);
        if (!block_path_takes(b)) return false;
        fill_common(p, a);
        p.mode = mmv_mode::mul_mat;
        p.b = cuda_view_of(b);
        p.gate = p.ids = p.b;
        p.keep.data = nullptr;
        p.r2 = b->ne[2] / a->ne[2];
        p.r3 = b->ne[3] / a->ne[3];
        const dim3 grid((unsigned) ((p.M + k_rows_per_block - 1) / k_rows_per_block), (unsigned) b->ne[1],
                        (unsigned) (b->ne[2] * b->ne[3]));
        mmv_kernel<<<grid, k_rows_per_block * k_warp, 0, ctx.stream>>>(p);
        return CUDA_LAUNCHED();
    }
    if (cuda_experts_batched_takes(ctx, dst)) return cuda_op_experts_batched(ctx, dst);
    const bool fused = dst->op == GGML_OP_MOE_FUSED_UP_GATE;
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = fused ? dst->src[2] : dst->src[1];
    const ggml_tensor * ids = fused ? dst->src[3] : dst->src[2];
    fill_common(p, a);
    p.mode = fused ? mmv_mode::moe_up_gate : mmv_mode::mul_mat_id;
    p.gate = fused ? cuda_view_of(dst->src[1]) : p.a;
    p.b = cuda_view_of(b);
    p.ids = cuda_view_of(ids);
    const ggml_tensor * keep = fused ? dst->src[4] : dst->src[3];
    if (keep) {
        p.keep = cuda_view_of(keep);
    } else {
        p.keep.data = nullptr;
    }
    p.n_b = b->ne[1];
    p.glu = fused ? ggml_get_op_params_i32(dst, 0) : 0;
    const dim3 grid((unsigned) ((p.M + k_rows_per_block - 1) / k_rows_per_block), (unsigned) ids->ne[0], (unsigned) ids->ne[1]);
    mmv_kernel<<<grid, k_rows_per_block * k_warp, 0, ctx.stream>>>(p);
    return CUDA_LAUNCHED();
}
