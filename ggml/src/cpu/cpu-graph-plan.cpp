// Dependencies between the nodes of a graph for the CPU thread pool (see cpu-graph-plan.h).
#include "cpu-graph-plan.h"

#include <algorithm>

namespace {

// Earlier nodes looked at for each node. Graphs are chains with short side branches (q, k and v
// from one input, a router beside the experts), so the nearest conflict is almost always within
// a few nodes; beyond the window the node simply waits for everything before it.
constexpr int k_window = 16;

struct byte_span {
    uintptr_t lo = 0, hi = 0;   // [lo, hi)
    bool overlaps(const byte_span & o) const { return lo < o.hi && o.lo < hi; }
};

byte_span span_of(const ggml_tensor * t) {
    byte_span s;
    if (!t || !t->data) return s;
    s.lo = (uintptr_t) t->data;
    s.hi = s.lo + ggml_nbytes(t);
    return s;
}

// Ops that update one of their sources in place (recurrent states).
bool writes_sources(const ggml_tensor * t) { return t->op == GGML_OP_SSM_CONV || t->op == GGML_OP_GATED_DELTA_NET; }

// The byte ranges a node reads (its sources; a fused chain's: the fusion's) and writes (its
// output, and its sources when it updates them in place).
struct node_memory {
    byte_span spans[GGML_MAX_SRC + 1];   // [0]: the output, then the sources
    int n = 0;
    bool src_written = false;

    explicit node_memory(const ggml_cpu_node_plan & np) : src_written(writes_sources(np.node)) {
        const ggml_tensor * t = np.node;
        spans[n++] = span_of(t);
        const bool fused = np.fusion.kind != GGML_CPU_FUSION_NONE;
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            const ggml_tensor * src = fused ? (k < 2 ? np.fusion.src[k] : nullptr) : t->src[k];
            const byte_span s = span_of(src);
            if (s.hi > s.lo) spans[n++] = s;
        }
    }
    int written_end() const { return src_written ? n : 1; }
};

bool any_overlap(const node_memory & a, int a0, int a1, const node_memory & b, int b0, int b1) {
    for (int i = a0; i < a1; ++i) {
        for (int k = b0; k < b1; ++k) {
            if (a.spans[i].overlaps(b.spans[k])) return true;
        }
    }
    return false;
}

// Whether b (later) must wait for a (earlier): a writes what b reads or writes, or b writes
// what a reads, or both use the scratch.
bool must_follow(const ggml_cpu_node_plan & a, const node_memory & ma, const ggml_cpu_node_plan & b,
                 const node_memory & mb) {
    if (a.scratch && b.scratch) return true;
    return any_overlap(ma, 0, ma.written_end(), mb, 0, mb.n) || any_overlap(ma, 1, ma.n, mb, 0, mb.written_end());
}

} // namespace

void ggml_cpu_plan_graph(ggml_cgraph * graph, int nth, std::vector<ggml_cpu_node_plan> & plan, size_t & scratch_bytes) {
    plan.clear();
    scratch_bytes = 0;
    thread_local std::vector<ggml_cpu_plan_op> ops;
    ggml_cpu_fuse_graph(graph, ops);
    for (const ggml_cpu_plan_op & op : ops) {
        ggml_tensor * node = op.node;
        ggml_cpu_node_plan np;
        np.node = node;
        np.fusion = op.fusion;
        const bool fused = op.fusion.kind != GGML_CPU_FUSION_NONE;
        np.sched = fused ? ggml_cpu_fused_schedule(op, nth) : ggml_cpu_op_schedule(node, nth);
        // chunked ops index their scratch by chunk, the others by thread
        const int users = np.sched.mode == GGML_CPU_OP_CHUNKED ? std::max(nth, np.sched.n_chunks) : nth;
        const size_t ws = fused ? ggml_cpu_fused_work_size(op, users) : ggml_cpu_op_work_size(node, users);
        np.scratch = ws > 0;
        scratch_bytes = std::max(scratch_bytes, ws);
        np.wait_upto = -1;
        plan.push_back(np);
    }

    // complete: every node at or before it is complete when any thread starts the current node
    // (whoever claimed a chunk of an earlier node waited for that node's wait_upto first)
    int complete = -1;
    for (int j = 0; j < (int) plan.size(); ++j) {
        const node_memory mj(plan[j]);
        const int lo = std::max(complete, j - 1 - k_window);
        int wait = lo > complete ? lo : -1;   // nodes past the window: wait for all of them
        for (int i = j - 1; i > lo; --i) {
            if (must_follow(plan[i], node_memory(plan[i]), plan[j], mj)) {
                wait = i;
                break;
            }
        }
        plan[j].wait_upto = wait;
        complete = std::max(complete, wait);
    }
}
