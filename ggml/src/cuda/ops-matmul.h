// Between the two matrix-product files: ops-matmul.cu (mul_mat; expert ops one pair at a time) and
// ops-experts.cu (expert ops batched by expert). nvcc compiles each .cu alone (no relocatable
// device code), so they share host launchers, not device functions.
#pragma once

#include "cuda-common.h"

// Queues the decoding of n_mats weight matrices of M rows of K values (a quantized type the
// kernels decode; rows nb1 bytes apart) to dense f16 at out, one after the other (row-major, K
// per row): the i-th is the matrix at a + mats[i] * nb2 (mats: device memory), or at a when mats
// is null (then n_mats is 1). ops-matmul.cu.
bool cuda_decode_weights_f16(cuda_context & ctx, const char * a, int64_t nb1, int64_t nb2, const int32_t * mats, int64_t n_mats,
                             int type, int64_t K, int64_t M, void * out);

// Whether the batched path takes this mul_mat_id / moe_up_gate node (cuBLAS loaded, the batch
// large enough for its shape, strides it reads); else the per-pair kernel does. ops-experts.cu.
bool cuda_experts_batched_takes(const cuda_context & ctx, const ggml_tensor * dst);
// Runs a node cuda_experts_batched_takes took; false (logged) on a runtime failure or an expert
// id out of range. Waits for the stream (it reads the ids on the host).
bool cuda_op_experts_batched(cuda_context & ctx, ggml_tensor * dst);
