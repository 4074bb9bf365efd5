// Chains of graph nodes the CPU runs as one op (see cpu-fusion.h).
#include "cpu-fusion.h"
#include "ops-common.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace {

bool f32_rows(const ggml_tensor * t) { return t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float); }

bool overlaps(const ggml_tensor * a, const ggml_tensor * b) {
    const uintptr_t a0 = (uintptr_t) a->data, a1 = a0 + ggml_nbytes(a);
    const uintptr_t b0 = (uintptr_t) b->data, b1 = b0 + ggml_nbytes(b);
    return a0 < b1 && b0 < a1;
}

// Whether v is view(m, slot i): [n, T] rows of slot i.
bool is_slot_view(const ggml_tensor * v, const ggml_tensor * m, int64_t i) {
    return v->op == GGML_OP_VIEW && v->view_src == m && v->view_offs == (size_t) i * m->nb[1] && v->ne[0] == m->ne[0] &&
           v->ne[1] == m->ne[2] && v->ne[2] == 1 && v->ne[3] == 1 && v->nb[0] == m->nb[0] && v->nb[1] == m->nb[2];
}

// How many times each tensor is read as a source by the graph's nodes.
using use_counts = std::unordered_map<const ggml_tensor *, int>;

// The weighted sum starting at nodes[j] (the mul); returns the number of nodes it covers
// (1 + k - 1 adds), or 0.
int match_weighted_sum(const std::vector<ggml_tensor *> & nodes, size_t j, const use_counts & uses) {
    const ggml_tensor * m = nodes[j];
    if (m->op != GGML_OP_MUL) return 0;
    const ggml_tensor * e = m->src[0], * w = m->src[1];
    const int64_t k = m->ne[1];
    if (k < 2 || m->ne[3] != 1 || w->ne[0] != 1 || w->ne[1] != k || w->ne[2] != m->ne[2] || w->ne[3] != 1) return 0;
    if (!ggml_are_same_shape(e, m) || !f32_rows(e) || !f32_rows(w) || !f32_rows(m)) return 0;
    if (j + k > nodes.size() || (m->flags & GGML_TENSOR_FLAG_OUTPUT)) return 0;
    auto used_once = [&](const ggml_tensor * t) {
        const auto it = uses.find(t);
        return it != uses.end() && it->second == 1 && !(t->flags & GGML_TENSOR_FLAG_OUTPUT);
    };
    // m is read only through its k slot views, each only by its add
    const auto mu = uses.find(m);
    if (mu == uses.end() || mu->second != k) return 0;
    const ggml_tensor * prev = nullptr;
    for (int64_t i = 1; i < k; ++i) {
        const ggml_tensor * a = nodes[j + i];
        if (a->op != GGML_OP_ADD || !f32_rows(a)) return 0;
        const ggml_tensor * lhs = a->src[0], * rhs = a->src[1];
        const bool lhs_ok = i == 1 ? is_slot_view(lhs, m, 0) && used_once(lhs) : lhs == prev && used_once(prev);
        if (!lhs_ok || !is_slot_view(rhs, m, i) || !used_once(rhs)) return 0;
        prev = a;
    }
    const ggml_tensor * out = prev;
    if (out->ne[0] != m->ne[0] || out->ne[1] != m->ne[2] || !ggml_is_contiguous(out)) return 0;
    if (overlaps(out, e)) return 0;
    return (int) k;
}

// rms_norm(x) times one weight row, starting at nodes[j]; returns 2 or 0.
int match_rms_norm_mul(const std::vector<ggml_tensor *> & nodes, size_t j, const use_counts & uses) {
    const ggml_tensor * r = nodes[j];
    if (r->op != GGML_OP_RMS_NORM || j + 1 >= nodes.size()) return 0;
    const ggml_tensor * x = r->src[0], * out = nodes[j + 1];
    if (out->op != GGML_OP_MUL || out->src[0] != r || (r->flags & GGML_TENSOR_FLAG_OUTPUT)) return 0;
    const auto ru = uses.find(r);
    if (ru == uses.end() || ru->second != 1) return 0;
    const ggml_tensor * w = out->src[1];
    if (!f32_rows(x) || !f32_rows(w) || !f32_rows(out) || !ggml_are_same_shape(x, out)) return 0;
    if (w->ne[0] != x->ne[0] || ggml_nrows(w) != 1) return 0;
    if (overlaps(out, w)) return 0;
    // the result over x is fine row for row (a row is read whole before it is written)
    const bool in_place = out->data == x->data && out->nb[1] == x->nb[1] && out->nb[2] == x->nb[2] && out->nb[3] == x->nb[3];
    if (!in_place && overlaps(out, x)) return 0;
    return 2;
}

void rms_norm_mul(const ggml_compute_params * p, const ggml_cpu_plan_op & op) {
    const ggml_tensor * x = op.fusion.src[0], * w = op.fusion.src[1];
    ggml_tensor * out = op.node;
    const int64_t n = x->ne[0];
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(x), p->ith, p->nth, r0, r1);
    const auto & v = ggml_cpu_vec();
    const float * wr = (const float *) w->data;
    float * normed = ggml_cpu_thread_scratch(0, (size_t) n);
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_row_coord c = ggml_cpu_row_coord(x, r);
        const float * xr = (const float *) ggml_cpu_row_ptr(x, c.i1, c.i2, c.i3);
        float * y = (float *) ggml_cpu_row_ptr(out, c.i1, c.i2, c.i3);
        // as ggml_cpu_op_rms_norm, then the mul
        const float mean_sq = v.sum_sq(n, xr) / (float) n;
        v.scale_bias(n, normed, xr, 1.0f / std::sqrt(mean_sq + op.fusion.eps), 0.0f);
        v.mul(n, y, normed, wr);
    }
}

// One token (token generation): one chunk, which reads the weights before it writes. A batch:
// a team op, the weights copied to the scratch before a barrier.
bool weighted_sum_team(const ggml_cpu_plan_op & op, int nth) { return nth > 1 && op.fusion.src[0]->ne[2] > 1; }

size_t weighted_sum_work_size(const ggml_cpu_plan_op & op, int nth) {
    return weighted_sum_team(op, nth) ? (size_t) ggml_nelements(op.fusion.src[1]) * sizeof(float) : 0;
}

// out[:, t] for tokens [t0, t1); wt(i, t) reads weight i of token t
template <typename Weight>
void weighted_sum_rows(const ggml_cpu_plan_op & op, int64_t t0, int64_t t1, Weight wt) {
    const ggml_tensor * e = op.fusion.src[0];
    ggml_tensor * out = op.node;
    const int64_t n = e->ne[0], k = e->ne[1];
    const auto & vec = ggml_cpu_vec();
    float * tmp = ggml_cpu_thread_scratch(0, (size_t) n);
    for (int64_t t = t0; t < t1; ++t) {
        float * y = (float *) ((char *) out->data + t * out->nb[1]);
        for (int64_t i = 0; i < k; ++i) {
            const float * x = (const float *) ((const char *) e->data + i * e->nb[1] + t * e->nb[2]);
            // as mul (one value per row: scale_bias) and then add would round
            if (i == 0) {
                vec.scale_bias(n, y, x, wt(i, t), 0.0f);
            } else {
                vec.scale_bias(n, tmp, x, wt(i, t), 0.0f);
                vec.add(n, y, y, tmp);
            }
        }
    }
}

void weighted_sum(const ggml_compute_params * p, const ggml_cpu_plan_op & op) {
    const ggml_tensor * e = op.fusion.src[0], * w = op.fusion.src[1];
    const int64_t k = e->ne[1], T = e->ne[2];
    auto w_at = [&](int64_t i, int64_t t) { return *(const float *) ((const char *) w->data + i * w->nb[1] + t * w->nb[2]); };
    if (!weighted_sum_team(op, p->nth)) {   // one chunk: all weights first
        float * ws = ggml_cpu_thread_scratch(1, (size_t) (k * T));
        for (int64_t t = 0; t < T; ++t)
            for (int64_t i = 0; i < k; ++i) ws[t * k + i] = w_at(i, t);
        weighted_sum_rows(op, 0, T, [&](int64_t i, int64_t t) { return ws[t * k + i]; });
        return;
    }
    float * ws = (float *) p->wdata;
    int64_t t0, t1;
    ggml_cpu_split_rows(T, p->ith, p->nth, t0, t1);
    for (int64_t t = t0; t < t1; ++t)
        for (int64_t i = 0; i < k; ++i) ws[t * k + i] = w_at(i, t);
    ggml_cpu_barrier(p);
    weighted_sum_rows(op, t0, t1, [&](int64_t i, int64_t t) { return ws[t * k + i]; });
}

} // namespace

void ggml_cpu_fuse_graph(ggml_cgraph * graph, std::vector<ggml_cpu_plan_op> & ops) {
    ops.clear();
    const int n = ggml_graph_n_nodes(graph);
    use_counts uses;
    std::vector<ggml_tensor *> nodes;   // compute nodes
    nodes.reserve((size_t) n);
    for (int i = 0; i < n; ++i) {
        ggml_tensor * node = ggml_graph_node(graph, i);
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (node->src[s]) uses[node->src[s]]++;
        }
        if (ggml_is_view_op(node->op) || node->op == GGML_OP_NONE) continue;
        if (ggml_nelements(node) == 0) continue;
        nodes.push_back(node);
    }
    for (size_t j = 0; j < nodes.size(); ) {
        if (const int len = match_weighted_sum(nodes, j, uses)) {
            ggml_cpu_plan_op op{ nodes[j + len - 1], {} };
            op.fusion.kind = GGML_CPU_FUSION_WEIGHTED_SUM;
            op.fusion.src[0] = nodes[j]->src[0];
            op.fusion.src[1] = nodes[j]->src[1];
            ops.push_back(op);
            j += (size_t) len;
            continue;
        }
        if (match_rms_norm_mul(nodes, j, uses)) {
            ggml_cpu_plan_op op{ nodes[j + 1], {} };
            op.fusion.kind = GGML_CPU_FUSION_RMS_NORM_MUL;
            op.fusion.src[0] = nodes[j]->src[0];
            op.fusion.src[1] = nodes[j + 1]->src[1];
            op.fusion.eps = ggml_get_op_params_f32(nodes[j], 0);
            ops.push_back(op);
            j += 2;
            continue;
        }
        ops.push_back({ nodes[j], {} });
        ++j;
    }
}

ggml_cpu_op_sched ggml_cpu_fused_schedule(const ggml_cpu_plan_op & op, int nth) {
    switch (op.fusion.kind) {
        case GGML_CPU_FUSION_WEIGHTED_SUM:
            return weighted_sum_team(op, nth) ? ggml_cpu_op_sched{ GGML_CPU_OP_TEAM, nth } : ggml_cpu_op_sched{ GGML_CPU_OP_CHUNKED, 1 };
        case GGML_CPU_FUSION_RMS_NORM_MUL:   // chunked as the element-wise mul it ends with
            return ggml_cpu_op_schedule(op.node, nth);
        default: GGML_ABORT("CPU backend: unknown fusion %d", (int) op.fusion.kind);
    }
}

size_t ggml_cpu_fused_work_size(const ggml_cpu_plan_op & op, int nth) {
    switch (op.fusion.kind) {
        case GGML_CPU_FUSION_WEIGHTED_SUM: return weighted_sum_work_size(op, nth);
        default: return 0;
    }
}

void ggml_cpu_compute_fused(const ggml_compute_params * p, const ggml_cpu_plan_op & op) {
    switch (op.fusion.kind) {
        case GGML_CPU_FUSION_WEIGHTED_SUM: weighted_sum(p, op); break;
        case GGML_CPU_FUSION_RMS_NORM_MUL: rms_norm_mul(p, op); break;
        default: GGML_ABORT("CPU backend: unknown fusion %d", (int) op.fusion.kind);
    }
}
