// The CPU backend's op kernels. Every op runs on all threads of the pool at once: thread ith of
// nth computes its share of dst (usually a range of rows). An op that needs phases (quantize the
// activations, then multiply) separates them with ggml_cpu_barrier().
#pragma once

#include "ggml.h"
#include "ggml-impl.h"

#include <cstddef>
#include <cstdint>

struct ggml_cpu_threadpool;

struct ggml_compute_params {
    int    ith;        // this thread
    int    nth;        // threads working on the op
    void * wdata;      // scratch shared by all threads of the op (size from ggml_cpu_op_work_size)
    size_t wsize;
    ggml_cpu_threadpool * pool;
};

void ggml_cpu_barrier(const ggml_compute_params * params);

// Rows [r0, r1) of n that thread ith of nth handles.
static inline void ggml_cpu_split_rows(int64_t n, int ith, int nth, int64_t & r0, int64_t & r1) {
    const int64_t per = (n + nth - 1) / nth;
    r0 = std::min<int64_t>(n, per * ith);
    r1 = std::min<int64_t>(n, r0 + per);
}

// Scratch bytes an op needs with nth threads (0 for most).
size_t ggml_cpu_op_work_size(const ggml_tensor * node, int nth);
// Run one op (all threads call it with their own params).
void ggml_cpu_compute_op(const ggml_compute_params * params, ggml_tensor * node);
// Whether the CPU backend implements this op with these types.
bool ggml_cpu_supports_op(const ggml_tensor * node);

// ---- per-op entry points (ops-*.cpp)
void ggml_cpu_op_binary(const ggml_compute_params * p, ggml_tensor * dst);      // add sub mul div
void ggml_cpu_op_scale(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_clamp(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_sqr(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_sqrt(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_unary(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_glu(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_sum_rows(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_mean(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_argmax(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_norm(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_rms_norm(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_l2_norm(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_rope(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_soft_max(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_diag_mask_inf(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_cpy(const ggml_compute_params * p, ggml_tensor * dst);         // cpy, cont, dup
void ggml_cpu_op_get_rows(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_set_rows(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_concat(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_argsort(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_top_k(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_mul_mat(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_mul_mat_id(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_moe_up_gate(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_flash_attn_ext(const ggml_compute_params * p, ggml_tensor * dst);
void ggml_cpu_op_ssm_conv(const ggml_compute_params * p, ggml_tensor * dst);          // ops-recurrent.cpp
void ggml_cpu_op_gated_delta_net(const ggml_compute_params * p, ggml_tensor * dst);

size_t ggml_cpu_mul_mat_work_size(const ggml_tensor * dst, int nth);
size_t ggml_cpu_mul_mat_id_work_size(const ggml_tensor * dst, int nth);
size_t ggml_cpu_flash_attn_work_size(const ggml_tensor * dst, int nth);
size_t ggml_cpu_soft_max_work_size(const ggml_tensor * dst, int nth);
size_t ggml_cpu_argsort_work_size(const ggml_tensor * dst, int nth);

// Convert one row of any type with a to_float into f32 (helpers for ops that accept several types).
void ggml_cpu_row_to_f32(ggml_type type, const void * src, float * dst, int64_t n);
void ggml_cpu_row_from_f32(ggml_type type, const float * src, void * dst, int64_t n);
