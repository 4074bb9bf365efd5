// Nodes the CPU backend runs as one op. The graph keeps its ops as the model builders write
// them (every backend understands them); when the CPU plans a graph it recognises a few
// chains and runs each as one kernel, which saves the intermediate results' memory passes and
// the waits between the chain's ops.
//
//  - weighted sum (the end of every MoE layer): m = mul(e, w) with e [n, k, T] and one weight
//    per row, w [1, k, T], then out = view(m, 0) + view(m, 1) + ... + view(m, k-1), the k - 1
//    adds chained. The fused kernel writes out[:, t] = sum_i w[i, t] * e[:, i, t] with the same
//    roundings in the same order (a product, then the sum slot by slot), so the values do not
//    change; 8 ops per layer of a model with 8 experts per token become 1.
//  - rms_norm times weight (every norm of a llama-family layer): mul(rms_norm(x), w), w one
//    row broadcast over all rows. Each row is normalised and multiplied in one pass, with the
//    unfused ops' roundings; 4 ops per qwen3 layer fewer.
//
// A chain is fused only when nothing else reads its intermediate results (nor are they graph
// outputs). The allocator may place the result over the chain's inputs, which are dead by the
// time the unfused chain writes it; the fused kernel still reads them. The weighted sum's
// result usually lands on the weights (the mul was their last reader), so the kernel copies
// the weights before it writes (one chunk for one token; for a batch the team copies, then
// meets at a barrier); a result over e keeps the chain unfused.
#pragma once

#include "cpu-ops.h"

#include <vector>

enum ggml_cpu_fusion_kind {
    GGML_CPU_FUSION_NONE,
    GGML_CPU_FUSION_WEIGHTED_SUM,
    GGML_CPU_FUSION_RMS_NORM_MUL,
};

struct ggml_cpu_fusion {
    ggml_cpu_fusion_kind kind = GGML_CPU_FUSION_NONE;
    const ggml_tensor * src[2] = { nullptr, nullptr };   // weighted sum: e, w; rms_norm_mul: x, w
    float eps = 0.0f;                                    // rms_norm_mul
};

// One op of the plan: a graph node, or the last node of a fused chain (its result).
struct ggml_cpu_plan_op {
    ggml_tensor * node;
    ggml_cpu_fusion fusion;
};

// The graph's compute nodes (views and empty tensors left out), fused chains collapsed.
void ggml_cpu_fuse_graph(ggml_cgraph * graph, std::vector<ggml_cpu_plan_op> & ops);

// Scheduling, scratch and the kernel of a fused op (fusion.kind != NONE).
ggml_cpu_op_sched ggml_cpu_fused_schedule(const ggml_cpu_plan_op & op, int nth);
size_t ggml_cpu_fused_work_size(const ggml_cpu_plan_op & op, int nth);
void ggml_cpu_compute_fused(const ggml_compute_params * p, const ggml_cpu_plan_op & op);
