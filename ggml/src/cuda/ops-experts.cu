// Expert products (mul_mat_id, and the fused gate/up moe_up_gate with its activation) for prompt
// batches, grouped by expert. The per-pair kernel of ops-matmul.cu reads an expert's weight rows
// once for every (slot, token) pair that chose it: a 512-token prompt reads each chosen expert
// many times over. Here each expert's weights are read once per product:
//  1. the ids (and the -ser keep mask) are copied to the host and planned there (expert-plan.h:
//     the kept pairs sorted by expert; an id out of range is an error, as on the CPU);
//  2. one kernel gathers every kept pair's activation column into a dense matrix, expert by
//     expert, converted to the type the GEMM reads (f16 for quantized and f16 weights, bf16, f32);
//  3. the chosen experts' weights decoded to f16 (quantized types), many experts per launch
//     within a scratch budget, then one cuBLAS GEMM per expert into a dense f32 result (two for
//     the fused op: up and gate);
//  4. one kernel scatters the results into dst's layout [M, n_used, n_tokens], applying the fused
//     op's activation (up * act(gate), as the per-pair kernel), zero rows for dropped pairs.
// Accumulation is f32 throughout, as in the dense cuBLAS path. Temporaries come from the pool.
#include "cuda-kernels.cuh"
#include "expert-plan.h"
#include "ops-matmul.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

enum class gemm_input : int { f32, f16, bf16 };

// Scratch for the decoded f16 weights of several experts, so that one launch decodes many (one
// expert of Qwen3-30B-A3B is 3 MiB of f16: too little work for a launch of its own).
constexpr size_t k_decoded_bytes = size_t(128) << 20;

// Gathered row r holds the activations of pair pair_of_row[r] = slot + n_used * token: column
// slot % n_b of that token (n_b is 1 when every slot of a token shares its activations).
__global__ void gather_activations_kernel(cuda_view b, int64_t n_b, int64_t n_used, const int32_t * pair_of_row, int64_t n_rows,
                                          int64_t K, gemm_input type, void * out) {
    const int64_t n = n_rows * K;
    for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const int64_t r = i / K, k = i % K;
        const int64_t pair = pair_of_row[r];
        const float v = *(const float *) (b.data + ((pair % n_used) % n_b) * b.nb[1] + (pair / n_used) * b.nb[2] + k * b.nb[0]);
        switch (type) {
            case gemm_input::f16: ((__half *) out)[i] = __float2half_rn(v); break;
            case gemm_input::bf16: ((__nv_bfloat16 *) out)[i] = __float2bfloat16_rn(v); break;
            default: ((float *) out)[i] = v; break;
        }
    }
}

// dst's value m of pair p = row_of_pair[p]'s result (M floats per gathered row), times
// act(gate) for the fused op; a dropped pair (row -1) gets zero.
__global__ void scatter_results_kernel(cuda_view dst, const int32_t * row_of_pair, int64_t n_pairs, int64_t n_used, int64_t M,
                                       const float * up, const float * gate, int glu) {
    const int64_t n = n_pairs * M;
    for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const int64_t p = i / M, m = i % M;
        const int64_t row = row_of_pair[p];
        float v = 0.0f;
        if (row >= 0) {
            v = up[row * M + m];
            if (gate) {
                const float g = gate[row * M + m];
                v *= glu == GGML_GLU_OP_GEGLU ? gelu1(g) : silu1(g);
            }
        }
        *(float *) (dst.data + (p % n_used) * dst.nb[1] + (p / n_used) * dst.nb[2] + m * dst.nb[0]) = v;
    }
}

struct expert_operands {
    const ggml_tensor * up, * gate, * b, * ids, * keep;   // gate: the fused op's, else null
};

expert_operands operands_of(const ggml_tensor * dst) {
    const bool fused = dst->op == GGML_OP_MOE_FUSED_UP_GATE;
    return { dst->src[0], fused ? dst->src[1] : nullptr, fused ? dst->src[2] : dst->src[1], fused ? dst->src[3] : dst->src[2],
             fused ? dst->src[4] : dst->src[3] };
}

// C (M x n, f32, ldc M) = expert e's weights (M rows of K) times the n gathered columns at B.
// For a quantized type, `decoded` holds the expert's rows decoded to f16 (M * K halves).
bool expert_gemm(cuda_context & ctx, const ggml_tensor * w, int64_t e, const __half * decoded, const void * B, int64_t n, float * C) {
    const int64_t K = w->ne[0], M = w->ne[1];
    const char * slice = (const char *) w->data + e * w->nb[2];
    const float alpha = 1.0f, beta = 0.0f;
    if (w->type == GGML_TYPE_F32) {
        return CUBLAS_OK(cublas_get()->sgemm(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) M, (int) n, (int) K, &alpha,
                                             (const float *) slice, (int) (w->nb[1] / sizeof(float)), (const float *) B, (int) K,
                                             &beta, C, (int) M));
    }
    const bool quant = !cuda_is_float_type(w->type);
    const void * A = quant ? (const void *) decoded : (const void *) slice;
    const int64_t lda = quant ? K : (int64_t) (w->nb[1] / ggml_type_size(w->type));
    const cudaDataType_t type = w->type == GGML_TYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    return CUBLAS_OK(cublas_get()->gemm_ex(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) M, (int) n, (int) K, &alpha, A, type, (int) lda,
                                           B, type, (int) K, &beta, C, CUDA_R_32F, (int) M, CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT));
}

// The ids (and keep mask) of the node, copied to the host. Waits for the stream: they are the
// output of the router, computed just before.
bool read_routing(cuda_context & ctx, const expert_operands & o, std::vector<int32_t> & ids, std::vector<float> & keep) {
    const int64_t n_used = o.ids->ne[0], n_tokens = o.ids->ne[1];
    ids.resize((size_t) (n_used * n_tokens));
    if (!CUDA_OK(cudaMemcpy2DAsync(ids.data(), (size_t) n_used * sizeof(int32_t), o.ids->data, o.ids->nb[1], (size_t) n_used * sizeof(int32_t),
                                   (size_t) n_tokens, cudaMemcpyDefault, ctx.stream))) {
        return false;
    }
    keep.clear();
    if (o.keep) {
        keep.resize((size_t) (n_used * n_tokens));
        if (!CUDA_OK(cudaMemcpy2DAsync(keep.data(), (size_t) n_used * sizeof(float), o.keep->data, o.keep->nb[1],
                                       (size_t) n_used * sizeof(float), (size_t) n_tokens, cudaMemcpyDefault, ctx.stream))) {
            return false;
        }
    }
    return CUDA_OK(cudaStreamSynchronize(ctx.stream));
}

// Weights whose rows cuBLAS (float types: whole elements per row) or the decoder (whole rows
// apart) can take, at sizes it takes as int.
bool gemm_reads(const ggml_tensor * w) {
    if (w->ne[0] > INT_MAX || w->ne[1] > INT_MAX || w->nb[1] < ggml_row_size(w->type, w->ne[0])) return false;
    return !cuda_is_float_type(w->type) || w->nb[1] % ggml_type_size(w->type) == 0;
}

} // namespace

bool cuda_experts_batched_takes(const cuda_context & ctx, const ggml_tensor * dst) {
    // KILN_CUDA_EXPERTS_BATCHED=0 keeps every expert product on the per-pair kernel: the A/B of
    // scripts/gpu-check.sh's sweeps, and a way around this path should it misbehave on a device
    static const bool enabled = [] {
        const char * env = std::getenv("KILN_CUDA_EXPERTS_BATCHED");
        return !(env && std::strcmp(env, "0") == 0);
    }();
    if (!enabled || !ctx.cublas || !cublas_get()) return false;
    const expert_operands o = operands_of(dst);
    // rows and columns the memcpy2D and the kernels read with these strides; sizes cuBLAS takes as int
    const size_t used_bytes = (size_t) o.ids->ne[0] * sizeof(int32_t);
    if (o.ids->nb[0] != sizeof(int32_t) || o.ids->nb[1] < used_bytes) return false;
    if (o.keep && (o.keep->nb[0] != sizeof(float) || o.keep->nb[1] < used_bytes)) return false;
    if (!gemm_reads(o.up) || (o.gate && (!gemm_reads(o.gate) || o.gate->ne[2] != o.up->ne[2]))) return false;
    return expert_products_batched(o.ids->ne[1], o.ids->ne[0], o.up->ne[2]);
}

bool cuda_op_experts_batched(cuda_context & ctx, ggml_tensor * dst) {
    const expert_operands o = operands_of(dst);
    const int64_t n_used = o.ids->ne[0], n_tokens = o.ids->ne[1], n_expert = o.up->ne[2];
    const int64_t K = o.up->ne[0], M = o.up->ne[1], n_pairs = n_used * n_tokens;

    std::vector<int32_t> ids;
    std::vector<float> keep;
    if (!read_routing(ctx, o, ids, keep)) return false;
    expert_plan plan;
    std::string error;
    if (!expert_plan_build(ids.data(), o.keep ? keep.data() : nullptr, n_used, n_tokens, n_expert, plan, &error)) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "%s: %s (%s): %s\n", ctx.name, ggml_op_desc(dst), dst->name, error.c_str());
        return false;
    }
    const int64_t n_rows = (int64_t) plan.pair_of_row.size();

    // the active experts in expert order, and the plan's index arrays, in one block:
    // pair_of_row, row_of_pair, active
    std::vector<int32_t> active;
    for (int64_t e = 0; e < n_expert; ++e) {
        if (plan.offsets[(size_t) e + 1] > plan.offsets[(size_t) e]) active.push_back((int32_t) e);
    }
    std::vector<int32_t> index(plan.pair_of_row);
    index.insert(index.end(), plan.row_of_pair.begin(), plan.row_of_pair.end());
    index.insert(index.end(), active.begin(), active.end());
    cuda_scratch index_d(*ctx.pool, index.size() * sizeof(int32_t));
    if (!index_d) return false;
    if (!CUDA_OK(cudaMemcpyAsync(index_d.as<void>(), index.data(), index.size() * sizeof(int32_t), cudaMemcpyHostToDevice, ctx.stream))) {
        return false;
    }
    // `index` is pageable and dies with this function, and a copy from pageable memory may still
    // read it after the call returns: wait (the stream holds nothing else since read_routing's wait)
    if (!CUDA_OK(cudaStreamSynchronize(ctx.stream))) return false;
    const int32_t * pair_of_row = index_d.as<int32_t>();
    const int32_t * row_of_pair = pair_of_row + n_rows;
    const int32_t * active_d = row_of_pair + n_pairs;

    const gemm_input in_type = o.up->type == GGML_TYPE_F32 ? gemm_input::f32 : o.up->type == GGML_TYPE_BF16 ? gemm_input::bf16 : gemm_input::f16;
    const size_t in_size = in_type == gemm_input::f32 ? sizeof(float) : 2;
    const bool quant = !cuda_is_float_type(o.up->type);
    // quantized weights: the chosen experts are decoded k_decoded_bytes at a time (at least one
    // expert), up and gate in turn into the same scratch (the stream orders the reuse)
    const size_t expert_f16_bytes = (size_t) (M * K) * sizeof(__half);
    const int64_t per_decode = std::max<int64_t>(1, std::min<int64_t>((int64_t) active.size(), (int64_t) (k_decoded_bytes / expert_f16_bytes)));
    // every temporary sized at least 1 byte: a batch whose pairs are all dropped still scatters zeros
    cuda_scratch gathered(*ctx.pool, (size_t) std::max<int64_t>(n_rows * K, 1) * in_size);
    cuda_scratch up_out(*ctx.pool, (size_t) std::max<int64_t>(n_rows * M, 1) * sizeof(float));
    cuda_scratch gate_out(*ctx.pool, o.gate ? (size_t) std::max<int64_t>(n_rows * M, 1) * sizeof(float) : 0);
    cuda_scratch decoded(*ctx.pool, quant && !active.empty() ? (size_t) per_decode * expert_f16_bytes : 0);
    if (!gathered || !up_out || (o.gate && !gate_out) || (quant && !active.empty() && !decoded)) return false;

    if (n_rows > 0) {
        gather_activations_kernel<<<cuda_blocks_for(n_rows * K), k_block_threads, 0, ctx.stream>>>(
            cuda_view_of(o.b), o.b->ne[1], n_used, pair_of_row, n_rows, K, in_type, gathered.as<void>());
        if (!CUDA_LAUNCHED()) return false;
    }
    // experts no pair chose are not in `active`: their weights are not read
    for (int64_t c0 = 0; c0 < (int64_t) active.size(); c0 += per_decode) {
        const int64_t n_c = std::min<int64_t>(per_decode, (int64_t) active.size() - c0);
        for (const ggml_tensor * w : { o.up, o.gate }) {
            if (!w) continue;
            float * out = (w == o.up ? up_out : gate_out).as<float>();
            if (quant && !cuda_decode_weights_f16(ctx, (const char *) w->data, (int64_t) w->nb[1], (int64_t) w->nb[2], active_d + c0, n_c,
                                                  w->type, K, M, decoded.as<void>())) {
                return false;
            }
            for (int64_t i = 0; i < n_c; ++i) {
                const int64_t e = active[(size_t) (c0 + i)];
                const int64_t first = plan.offsets[(size_t) e], n = plan.offsets[(size_t) e + 1] - first;
                const void * B = gathered.as<char>() + (size_t) (first * K) * in_size;
                const __half * A = quant ? decoded.as<__half>() + i * M * K : nullptr;
                if (!expert_gemm(ctx, w, e, A, B, n, out + first * M)) return false;
            }
        }
    }
    const int glu = o.gate ? ggml_get_op_params_i32(dst, 0) : 0;
    scatter_results_kernel<<<cuda_blocks_for(n_pairs * M), k_block_threads, 0, ctx.stream>>>(
        cuda_view_of(dst), row_of_pair, n_pairs, n_used, M, up_out.as<float>(), o.gate ? gate_out.as<float>() : nullptr, glu);
    return CUDA_LAUNCHED();
}
