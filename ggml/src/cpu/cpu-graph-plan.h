// What the CPU thread pool needs to know about a graph before running it without a barrier
// between ops: the nodes that compute something, how each is run (cpu-ops.h), and for each
// node the last earlier node it must wait for.
//
// Node b must wait for an earlier node a when a writes memory that b reads (the usual
// dependency), when b overwrites memory a still reads or writes (the allocator reuses buffers
// once their last reader is planned, so a later node can land on an earlier node's input), or
// when both use the op scratch buffer. Memory is compared as byte ranges, which covers views.
// Waiting is by prefix: "all nodes up to wait_upto are complete", so a thread checks each node's
// completion once per graph.
#pragma once

#include "cpu-fusion.h"
#include "cpu-ops.h"

#include <vector>

struct ggml_cpu_node_plan {
    ggml_tensor * node;
    ggml_cpu_fusion fusion;   // kind NONE: node alone; else node ends a fused chain (cpu-fusion.h)
    ggml_cpu_op_sched sched;
    int  wait_upto;   // every node at or before this index must be complete first (-1: none)
    bool scratch;     // uses the shared op scratch (wdata)
};

// Fill plan with the graph's compute nodes (views and empty tensors left out, fused chains as
// one entry); scratch_bytes
// gets the largest scratch any node needs.
void ggml_cpu_plan_graph(ggml_cgraph * graph, int nth, std::vector<ggml_cpu_node_plan> & plan, size_t & scratch_bytes);
