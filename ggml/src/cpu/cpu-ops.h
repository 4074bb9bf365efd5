// The CPU backend's op kernels. The thread pool runs each op in one of three ways, chosen per node
// by ggml_cpu_op_schedule():
//  - chunked: the op is cut into n independent chunks; threads take chunk indices from a shared
//    counter and call the op with (ith = chunk, nth = n), so a thread the OS deschedules leaves
//    behind at most the chunk it holds, and a thread that arrives late finds the work done.
//  - self-chunked: the op is called once per thread (ith = thread, nth = threads) and takes its
//    chunks itself with ggml_cpu_chunk_claim / ggml_cpu_chunk_done (a per-thread prologue, such
//    as converting one activation row, then shared chunks).
//  - team: every thread calls the op once (ith = thread); phases inside it are separated with
//    ggml_cpu_barrier() (quantize the activations, then multiply).
// A node starts as soon as the nodes it reads, overwrites or shares scratch with are complete;
// there is no barrier between ops (cpu-graph-plan.h).
#pragma once

#include "ggml.h"
#include "ggml-impl.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

struct ggml_cpu_threadpool;

enum ggml_cpu_op_mode {
    GGML_CPU_OP_CHUNKED,
    GGML_CPU_OP_SELF,
    GGML_CPU_OP_TEAM,
};

struct ggml_cpu_op_sched {
    ggml_cpu_op_mode mode;
    int n_chunks;   // chunks of the op (team ops: one per thread)
};

// Progress of one node while a graph runs: chunks handed out and chunks finished.
struct ggml_cpu_node_state {
    alignas(64) std::atomic<int32_t> claimed{ 0 };
    std::atomic<int32_t> done{ 0 };
};

struct ggml_compute_params {
    int    ith;        // this thread (chunked ops: this chunk)
    int    nth;        // threads working on the op (chunked ops: the number of chunks)
    void * wdata;      // scratch shared by all threads of the op (size from ggml_cpu_op_work_size)
    size_t wsize;
    ggml_cpu_threadpool * pool;
    ggml_cpu_node_state * node = nullptr;   // self-chunked ops: the node's counters
    int    n_chunks = 0;                    // self-chunked ops: how many chunks there are
    int    chunk = -1;                      // self-chunked ops: the first chunk, claimed by the pool
};

void ggml_cpu_barrier(const ggml_compute_params * params);

// Self-chunked ops start with p->chunk, which the pool claimed before calling them (a thread
// that holds an unfinished chunk keeps the graph alive: a late thread that finds every chunk
// taken never reads a node the caller may already have rebuilt). ggml_cpu_chunk_claim gives
// the next chunk index, or -1 when all are taken; ggml_cpu_chunks_done reports n claimed chunks
// finished (the node completes when all are). Report them once, after the last claim fails:
// one shared atomic per chunk instead of two (the done counter's cache line otherwise moves
// between the cores twice per chunk, which cost ~15% of token generation at 64 KB chunks).
static inline int ggml_cpu_chunk_claim(const ggml_compute_params * p) {
    const int c = p->node->claimed.fetch_add(1, std::memory_order_acq_rel);
    return c < p->n_chunks ? c : -1;
}
void ggml_cpu_chunks_done(const ggml_compute_params * p, int n);

// Rows [r0, r1) of n that thread ith of nth handles.
static inline void ggml_cpu_split_rows(int64_t n, int ith, int nth, int64_t & r0, int64_t & r1) {
    const int64_t per = (n + nth - 1) / nth;
    r0 = std::min<int64_t>(n, per * ith);
    r1 = std::min<int64_t>(n, r0 + per);
}

// How the pool runs this node with nth threads.
ggml_cpu_op_sched ggml_cpu_op_schedule(const ggml_tensor * node, int nth);
// Scratch bytes an op needs when run as nth threads or chunks (0 for most).
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
// Token generation sized products run self-chunked (no barrier): their chunk counts, else 0.
int ggml_cpu_mul_mat_self_chunks(const ggml_tensor * dst, int nth);
int ggml_cpu_mul_mat_id_self_chunks(const ggml_tensor * dst, int nth);
size_t ggml_cpu_mul_mat_id_work_size(const ggml_tensor * dst, int nth);
size_t ggml_cpu_flash_attn_work_size(const ggml_tensor * dst, int nth);
size_t ggml_cpu_soft_max_work_size(const ggml_tensor * dst, int nth);
size_t ggml_cpu_argsort_work_size(const ggml_tensor * dst, int nth);

// Convert one row of any type with a to_float into f32 (helpers for ops that accept several types).
void ggml_cpu_row_to_f32(ggml_type type, const void * src, float * dst, int64_t n);
void ggml_cpu_row_from_f32(ggml_type type, const float * src, void * dst, int64_t n);
