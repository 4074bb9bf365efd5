// The scheduler: runs one graph over several backends, each op where its data lives.
//
// 1. Each node gets a backend (sched_assign):
//    - pinned: the caller's explicit choice; an op that writes into memory that exists (a view, a
//      copy into a cache, the state rows a recurrent op updates in place) runs where that memory
//      is (a copy would take the update); an op that reads a weight runs on the backend
//      whose buffer holds the weight, if that backend can run it -- except that a matrix product
//      whose weight is in host memory (experts kept in RAM: -ot exps=CPU, -cmoe) runs on the
//      offload backend (ggml_backend_sched_set_offload) when its batch is large enough: copying
//      the weight over costs less than computing a prompt batch on the CPU, while one token's
//      product is cheaper where the weight already is;
//    - a node with at most one computed input (a norm, a RoPE, a cast) or a view follows its earliest
//      consumer, so that a layer's first op (the norm of the residual stream) runs with the
//      layer's weights and the stream crosses to the next device once, not twice;
//    - any other node runs where its most recently produced input is (the residual add of a
//      layer stays with the layer that produced the branch it adds);
//    - a view runs where the memory it views is; an op the backend cannot run goes to the last
//      backend (the CPU);
//    - an all-reduce (GGML_OP_ALL_REDUCE) runs where its result is (its rank's part); its parts
//      stay where they were computed and follow no consumer.
// 2. Runs of consecutive nodes on one backend form splits (views join the run they are in); an
//    all-reduce is a split of its own.
// 3. A split that reads a tensor another backend produced, or memory its backend cannot use,
//    gets a copy of it in its own memory, made just before the split runs. The copy is a node of
//    the rebuilt graph (op NONE, its source as src[0]), so the planner keeps the source alive
//    until the copy is made and gives the copy memory in the split's buffer.
// 4. The planner gives every intermediate tensor memory from its backend's buffer type.
// 5. Running: a backend that queues work (graph_enqueue, copy_async: CUDA) gets its splits queued
//    and their inputs copied on its copy stream, so the next split's copies (experts from RAM,
//    the residual stream across a -sm layer boundary, peer copies between GPUs) overlap the
//    current split's compute; a strided view is copied as a few 2D blocks, not row by row. On such
//    a backend a node that reads a weight it gets a copy of starts a split, and the copies of the
//    next split's weights are planned before the current split's nodes, so their memory is not
//    the current split's. An all-reduce split makes no copies: it calls the collective its parts'
//    backends share (ggml_backend_all_reduce) once they are computed -- queued on their streams
//    when all of them queue work, else after the host waited for them -- and every part then
//    holds the sum. A copy into memory that a queued split of the same backend still uses
//    waits for that split only (the planner reuses memory by plan order, not run order:
//    ggml-backend-copy-plan.h). The host waits for
//    queued work before a backend without queues (the CPU) computes, before a synchronous copy
//    that touches it, and at the end of the graph; the CPU alone runs as before.
#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "ggml-ptr-map.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

namespace {

struct sched_split {
    int backend_id;
    int i_start, i_end;                                          // its nodes in the rebuilt graph
    std::vector<std::pair<ggml_tensor *, ggml_tensor *>> copies; // (from, to) before running
    ggml_cgraph * graph = nullptr;                               // nodes [i_start, i_end)
};

ggml_tensor * root_of(ggml_tensor * t) { return t->view_src ? t->view_src : t; }

bool is_view(const ggml_tensor * t) { return ggml_is_view_op(t->op); }

bool is_all_reduce(const ggml_tensor * t) { return t->op == GGML_OP_ALL_REDUCE; }

} // namespace

struct ggml_backend_sched {
    std::vector<ggml_backend_t> backends;
    std::vector<ggml_backend_buffer_type_t> bufts;
    ggml_gallocr_t galloc = nullptr;
    size_t graph_size;

    ggml_ptr_map assigned;        // tensor -> backend index
    ggml_ptr_map user_assigned;   // the caller's choices
    ggml_ptr_map order;           // node -> its index in the graph being split
    std::vector<sched_split> splits;
    int n_copies = 0;

    ggml_context * ctx = nullptr;        // copies and split graphs of the current graph
    ggml_cgraph * graph_copy = nullptr;  // the graph with copy nodes, consumers rewired
    std::vector<char> ctx_mem;
    std::vector<char> pinned;            // per node of the graph being split
    // split_graph's working lists, kept so that a graph of a known shape allocates nothing
    std::vector<std::pair<int, int>> runs;
    std::vector<std::tuple<ggml_tensor *, int, int>> rewires;
    std::vector<std::pair<ggml_tensor *, int>> needed;
    std::vector<ggml_tensor *> copies;
    std::vector<std::pair<ggml_tensor *, ggml_tensor *>> prefetched;   // while the split graph is built
    ggml_ptr_map copy_index;   // source -> copy, within one run
    std::vector<char> staging;           // strided copies between devices
    std::vector<ggml_copy_plan::block> blocks;   // the blocks of the copy being made
    std::vector<char> queued;            // per backend: work queued the host has not waited for
    ggml_copy_plan::hazards hz;          // memory of queued splits, per backend
    int offload = -1;                    // backend for host-weight products of large batches (-1: none)
    int64_t offload_min_batch = 0;

    int cpu() const { return (int) backends.size() - 1; }

    int backend_of_buffer(ggml_backend_buffer_t buf) const {
        if (!buf) return -1;
        for (size_t i = 0; i < backends.size(); ++i) {
            if (ggml_backend_buffer_get_type(buf) == bufts[i]) return (int) i;
        }
        for (size_t i = 0; i < backends.size(); ++i) {
            if (ggml_backend_supports_buft(backends[i], ggml_backend_buffer_get_type(buf))) return (int) i;
        }
        return -1;
    }

    // where t's memory is (or will be): its buffer's backend, else its assignment (-1: none yet)
    int place_of(ggml_tensor * t) const {
        ggml_tensor * r = root_of(t);
        const int pb = backend_of_buffer(r->buffer);
        if (pb >= 0) return pb;
        const int a = assigned.get(t);
        return a >= 0 ? a : assigned.get(r);
    }

    // whether backend b runs ops that read memory of backend src_b as it is (the host CPU reads
    // any host memory; everything else gets a copy)
    bool reads_directly(int b, int src_b) const {
        return src_b == b || (b == cpu() && ggml_backend_buft_is_host(bufts[src_b]));
    }
};

static int sched_buffer_of(const ggml_tensor * t, void * user) {
    auto * s = (ggml_backend_sched *) user;
    const int b = s->assigned.get(t);
    return b < 0 ? s->cpu() : b;
}

extern "C" {

ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, int n_backends, size_t graph_size) {
    GGML_ASSERT(n_backends >= 1);
    auto * s = new ggml_backend_sched;
    s->backends.assign(backends, backends + n_backends);
    for (auto * b : s->backends) s->bufts.push_back(ggml_backend_get_default_buffer_type(b));
    s->galloc = ggml_gallocr_new_n(s->bufts.data(), n_backends);
    s->graph_size = std::max<size_t>(graph_size, GGML_DEFAULT_GRAPH_SIZE);
    return s;
}

void ggml_backend_sched_free(ggml_backend_sched_t s) {
    if (!s) return;
    ggml_gallocr_free(s->galloc);
    if (s->ctx) ggml_free(s->ctx);
    delete s;
}

void ggml_backend_sched_set_tensor_backend(ggml_backend_sched_t s, ggml_tensor * node, ggml_backend_t backend) {
    for (size_t i = 0; i < s->backends.size(); ++i) {
        if (s->backends[i] == backend) s->user_assigned.set(node, (int) i);
    }
}

ggml_backend_t ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t s, ggml_tensor * node) {
    const int b = s->assigned.get(node);
    return b < 0 ? nullptr : s->backends[b];
}

void ggml_backend_sched_set_offload(ggml_backend_sched_t s, ggml_backend_t backend, int64_t min_batch) {
    s->offload = -1;
    s->offload_min_batch = min_batch;
    for (size_t i = 0; i + 1 < s->backends.size(); ++i) {
        if (s->backends[i] == backend) s->offload = (int) i;
    }
}

void ggml_backend_sched_reset(ggml_backend_sched_t s) {
    s->assigned.reset(0);
    s->user_assigned.reset(0);
    s->splits.clear();
    s->n_copies = 0;
}

int ggml_backend_sched_get_n_splits(ggml_backend_sched_t s) { return (int) s->splits.size(); }
int ggml_backend_sched_get_n_copies(ggml_backend_sched_t s) { return s->n_copies; }

size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t s, ggml_backend_t backend) {
    for (size_t i = 0; i < s->backends.size(); ++i) {
        if (s->backends[i] == backend) return ggml_gallocr_get_buffer_size_n(s->galloc, (int) i);
    }
    return 0;
}

} // extern "C"

namespace {

// A node with at most one computed input (besides leaves such as positions or weights) or a view.
// The source an op updates in place besides computing its result (-1: none): the recurrent ops'
// state rows (ggml.h).
int inplace_src(const ggml_tensor * n) {
    switch (n->op) {
        case GGML_OP_SSM_CONV: return 2;
        case GGML_OP_GATED_DELTA_NET: return 5;
        default: return -1;
    }
}

// The tokens a matrix product works on (0: not a product the offload rule moves). The rule leaves
// every other op that reads a host weight alone: get_rows of the token embeddings would copy the
// whole table for a few rows.
int64_t product_batch(const ggml_tensor * n) {
    switch (n->op) {
        case GGML_OP_MUL_MAT: return n->ne[1] * n->ne[2] * n->ne[3];
        case GGML_OP_MUL_MAT_ID:
        case GGML_OP_MOE_FUSED_UP_GATE: return n->ne[2];   // [rows, experts used, tokens]
        default: return 0;
    }
}

// The backend for node n whose weight lives in backend wb's memory: wb, or the offload backend
// when wb is the host CPU and the batch is at least the threshold (-1: neither can run it).
int weight_backend(const ggml_backend_sched * s, const ggml_tensor * n, int wb) {
    if (wb == s->cpu() && s->offload >= 0 && s->offload_min_batch > 0 && product_batch(n) >= s->offload_min_batch &&
        ggml_backend_supports_op(s->backends[s->offload], n)) {
        return s->offload;
    }
    return wb >= 0 && ggml_backend_supports_op(s->backends[wb], n) ? wb : -1;
}

bool follows_consumer(const ggml_tensor * n) {
    if (is_view(n)) return true;
    int computed = 0;
    for (const ggml_tensor * src : n->src) {
        if (src && src->op != GGML_OP_NONE) ++computed;
    }
    return computed <= 1;
}

void sched_assign(ggml_backend_sched_t s, ggml_cgraph * graph) {
    const int n_nodes = ggml_graph_n_nodes(graph);
    const int cpu = s->cpu();
    s->assigned.reset((size_t) n_nodes + ggml_graph_n_leafs(graph));
    s->order.reset((size_t) n_nodes);
    for (int i = 0; i < n_nodes; ++i) s->order.set(ggml_graph_node(graph, i), i);

    // pinned nodes
    std::vector<char> & pinned = s->pinned;
    pinned.assign(n_nodes, 0);
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        int b = s->user_assigned.size() > 0 ? s->user_assigned.get(n) : -1;
        if (b < 0 && (n->view_src || n->data)) b = s->backend_of_buffer(root_of(n)->buffer);
        if (b < 0 && inplace_src(n) >= 0) b = s->backend_of_buffer(root_of(n->src[inplace_src(n)])->buffer);
        for (int k = 0; k < GGML_MAX_SRC && b < 0; ++k) {
            const ggml_tensor * src = n->src[k];
            if (!src || src->op != GGML_OP_NONE) continue;
            const ggml_tensor * r = src->view_src ? src->view_src : src;
            if (r->buffer && ggml_backend_buffer_get_usage(r->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
                b = weight_backend(s, n, s->backend_of_buffer(r->buffer));
            }
        }
        if (b >= 0) {
            s->assigned.set(n, b);
            pinned[i] = 1;
        }
    }
    // followers take their earliest consumer's backend: walking backwards, every consumer
    // overwrites, so the earliest one is the last to write
    for (int i = n_nodes - 1; i >= 0; --i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        const int b = s->assigned.get(n);
        if (b < 0 || is_all_reduce(n)) continue;   // its parts stay on their devices
        for (ggml_tensor * src : n->src) {
            if (!src || src->op == GGML_OP_NONE) continue;
            const int j = s->order.get(src);
            if (j >= 0 && !pinned[j] && follows_consumer(src)) s->assigned.set(src, b);
        }
    }
    // the rest in graph order: views where their memory is, others with their newest input
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        int b = s->assigned.get(n);
        if (n->view_src && !pinned[i]) {
            const int rb = s->place_of(n->view_src);
            if (rb >= 0) b = rb;
        } else if (b < 0) {
            int newest = -1;
            for (ggml_tensor * src : n->src) {
                if (!src || src->op == GGML_OP_NONE) continue;
                const int j = s->order.get(src);
                const int sb = s->place_of(src);
                if (j > newest && sb >= 0) {
                    newest = j;
                    b = sb;
                }
            }
        }
        if (b < 0) b = cpu;
        // an op the backend cannot run goes to the CPU -- except one that updates memory of its
        // backend in place: on a copy the update would be lost, so it stays and fails loudly
        if (!is_view(n) && !is_all_reduce(n) && !ggml_backend_supports_op(s->backends[b], n) &&
            !(pinned[i] && inplace_src(n) >= 0)) {
            b = cpu;
        }
        s->assigned.set(n, b);
    }
    // graph inputs without memory live with their first consumer
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        for (ggml_tensor * src : n->src) {
            if (src && src->op == GGML_OP_NONE && !src->data && !src->view_src && s->assigned.get(src) < 0) {
                s->assigned.set(src, s->assigned.get(n));
            }
        }
    }
}

// Whether the whole graph runs on one backend that reads all its memory as it is.
int sched_single_backend(ggml_backend_sched_t s, ggml_cgraph * graph) {
    const int n_nodes = ggml_graph_n_nodes(graph);
    int only = -1;
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        if (is_all_reduce(n)) return -1;   // the scheduler runs it
        if (is_view(n)) continue;
        const int b = s->assigned.get(n);
        if (only >= 0 && b != only) return -1;
        only = b;
        for (ggml_tensor * src : n->src) {
            if (!src) continue;
            const int pb = s->place_of(src);
            if (pb >= 0 && !s->reads_directly(b, pb)) return -1;
        }
    }
    return only < 0 ? s->cpu() : only;
}

bool is_async(ggml_backend_t b) { return b->iface.graph_enqueue && b->iface.copy_async; }

// Whether node n, on backend b that queues work, reads a weight b gets a copy of (experts kept in
// RAM whose prompt products the offload rule moved to the GPU). Such a node starts a split of its
// own, so that the copy of its weight runs while the split before it computes, instead of every
// copy of the graph before the first kernel.
bool sched_is_weight(const ggml_tensor * t) {
    const ggml_tensor * r = t->view_src ? t->view_src : t;
    return r->buffer && ggml_backend_buffer_get_usage(r->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
}

bool sched_copies_weight(const ggml_backend_sched * s, const ggml_tensor * n, int b) {
    if (is_view(n) || !is_async(s->backends[b])) return false;
    for (const ggml_tensor * src : n->src) {
        if (!src) continue;
        if (!sched_is_weight(src)) continue;
        const int src_b = s->backend_of_buffer(root_of((ggml_tensor *) src)->buffer);
        if (src_b >= 0 && !s->reads_directly(b, src_b)) return true;
    }
    return false;
}

// Build splits and copies; returns the graph to allocate and run.
ggml_cgraph * sched_split_graph(ggml_backend_sched_t s, ggml_cgraph * graph) {
    sched_assign(s, graph);
    s->splits.clear();
    s->n_copies = 0;
    const int n_nodes = ggml_graph_n_nodes(graph);
    const int n_leafs = ggml_graph_n_leafs(graph);
    const int single = sched_single_backend(s, graph);
    if (single >= 0) {
        s->splits.push_back({ single, 0, n_nodes, {}, graph });
        return graph;
    }

    // runs of one backend; a view joins the run it sits in
    auto & runs = s->runs;   // (backend, first node)
    runs.clear();
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        const int b = s->assigned.get(n);
        const bool cut = !runs.empty() && b == runs.back().first && runs.back().second < i && sched_copies_weight(s, n, b);
        // an all-reduce alone in its split
        const bool collective = is_all_reduce(n) || (i > 0 && is_all_reduce(ggml_graph_node(graph, i - 1)));
        if (runs.empty() || (b != runs.back().first && !is_view(n)) || cut || collective) runs.push_back({ b, i });
    }
    // the copies each run needs, once per (run, source)
    auto & rewires = s->rewires;   // (node, src slot, copy index)
    auto & needed = s->needed;     // (source, run)
    rewires.clear();
    needed.clear();
    for (size_t r = 0; r < runs.size(); ++r) {
        const int b = runs[r].first;
        const int i1 = r + 1 < runs.size() ? runs[r + 1].second : n_nodes;
        s->copy_index.reset(64);
        for (int i = runs[r].second; i < i1; ++i) {
            ggml_tensor * n = ggml_graph_node(graph, i);
            // a view computes nothing: its consumers get what they need; an all-reduce's parts
            // are summed where they are
            if (is_view(n) || is_all_reduce(n)) continue;
            for (int k = 0; k < GGML_MAX_SRC; ++k) {
                ggml_tensor * src = n->src[k];
                if (!src) continue;
                const int src_b = s->place_of(src);
                if (src_b < 0 || s->reads_directly(b, src_b)) continue;
                int c = s->copy_index.get(src);
                if (c < 0) {
                    c = (int) needed.size();
                    needed.push_back({ src, (int) r });
                    s->copy_index.set(src, c);
                }
                rewires.push_back({ n, k, c });
            }
        }
    }

    // the rebuilt graph, its copies and its split graphs live in memory kept between graphs
    const size_t cap = (size_t) n_nodes + needed.size() + 16;
    size_t mem = ggml_tensor_overhead() * (needed.size() + 16) + ggml_graph_overhead_custom(cap) + 4096;
    for (size_t r = 0; r < runs.size(); ++r) {
        const int i1 = r + 1 < runs.size() ? runs[r + 1].second : n_nodes;
        mem += ggml_graph_overhead_custom((size_t) std::max(1, i1 - runs[r].second)) + 1024;
    }
    if (s->ctx) ggml_free(s->ctx);
    if (s->ctx_mem.size() < mem) s->ctx_mem.resize(mem);
    s->ctx = ggml_init({ s->ctx_mem.size(), s->ctx_mem.data(), true });
    ggml_cgraph * out = ggml_new_graph_custom(s->ctx, cap, false);
    for (int i = 0; i < n_leafs; ++i) ggml_graph_add_leaf(out, ggml_graph_leaf(graph, i));
    std::vector<ggml_tensor *> & copies = s->copies;
    copies.assign(needed.size(), nullptr);
    auto make_copy = [&](size_t c, int b) {
        ggml_tensor * src = needed[c].first;
        ggml_tensor * t = ggml_dup_tensor(s->ctx, src);
        ggml_format_name(t, "%s#%s", src->name, ggml_backend_name(s->backends[b]));
        t->src[0] = src;   // op NONE: the planner sees the copy as src's consumer
        s->assigned.set(t, b);
        copies[c] = t;
        ggml_graph_add_node(out, t);
        return t;
    };
    auto & prefetched = s->prefetched;   // copies of the next run planned before this run's nodes
    prefetched.clear();
    size_t next_rewire = 0;
    for (size_t r = 0; r < runs.size(); ++r) {
        const int b = runs[r].first;
        const int i0 = runs[r].second, i1 = r + 1 < runs.size() ? runs[r + 1].second : n_nodes;
        sched_split sp{ b, 0, 0, {}, nullptr };
        sp.copies.swap(prefetched);
        prefetched.clear();
        for (size_t c = 0; c < needed.size(); ++c) {
            if (needed[c].second == (int) r && !copies[c]) sp.copies.push_back({ needed[c].first, make_copy(c, b) });
        }
        // The weights the next run copies onto a backend that queues work are planned here,
        // before this run's nodes, though copied only when the next run is queued: their memory
        // is then none of this run's (alive across it), so the copies run while this run computes;
        // planned after it, they would often get memory this run frees and wait for it.
        if (r + 1 < runs.size() && is_async(s->backends[runs[r + 1].first])) {
            for (size_t c = 0; c < needed.size(); ++c) {
                if (needed[c].second == (int) r + 1 && sched_is_weight(needed[c].first)) {
                    prefetched.push_back({ needed[c].first, make_copy(c, runs[r + 1].first) });
                }
            }
        }
        for (; next_rewire < rewires.size() && s->order.get(std::get<0>(rewires[next_rewire])) < i1; ++next_rewire) {
            const auto & w = rewires[next_rewire];
            std::get<0>(w)->src[std::get<1>(w)] = copies[std::get<2>(w)];
        }
        sp.i_start = ggml_graph_n_nodes(out);
        for (int i = i0; i < i1; ++i) ggml_graph_add_node(out, ggml_graph_node(graph, i));
        sp.i_end = ggml_graph_n_nodes(out);
        sp.graph = ggml_new_graph_custom(s->ctx, (size_t) std::max(1, sp.i_end - sp.i_start), false);
        for (int i = sp.i_start; i < sp.i_end; ++i) ggml_graph_add_node(sp.graph, ggml_graph_node(out, i));
        s->n_copies += (int) sp.copies.size();
        s->splits.push_back(std::move(sp));
    }
    return out;
}

// The bytes of src as 2D blocks (ggml-backend-copy-plan.h), in s->blocks.
bool sched_blocks(ggml_backend_sched_t s, const ggml_tensor * src) {
    const size_t nb[4] = { src->nb[0], src->nb[1], src->nb[2], src->nb[3] };
    return ggml_copy_plan::strided_blocks(src->ne, nb, ggml_type_size(src->type), ggml_blck_size(src->type), s->blocks);
}

// src (any layout, any backend) into dst (contiguous, same shape) with the host waiting: one copy
// when src is contiguous, else its rows gathered block by block (straight from host memory,
// with one read per row from a device) and written at once.
void sched_copy_sync(ggml_backend_sched_t s, ggml_tensor * src, ggml_tensor * dst) {
    if (ggml_is_contiguous(src)) {
        ggml_backend_tensor_copy(src, dst);
        return;
    }
    GGML_ASSERT(sched_blocks(s, src) && "scheduler: a view whose bytes cannot be copied");
    const ggml_backend_buffer_t sbuf = root_of(src)->buffer;
    const bool host = !sbuf || ggml_backend_buffer_is_host(sbuf);
    s->staging.resize(ggml_nbytes(dst));
    char * out = s->staging.data();
    for (const ggml_copy_plan::block & b : s->blocks) {
        for (size_t r = 0; r < b.height; ++r, out += b.width) {
            const size_t offs = b.offset + r * b.pitch;
            if (host) {
                std::memcpy(out, (const char *) src->data + offs, b.width);
            } else {
                ggml_backend_tensor_get(src, out, offs, b.width);
            }
        }
    }
    GGML_ASSERT(out == s->staging.data() + s->staging.size());
    ggml_backend_tensor_set(dst, s->staging.data(), 0, s->staging.size());
}

// The host waits for backend b's queued work.
void sched_wait(ggml_backend_sched_t s, int b) {
    if (!s->queued[b]) return;
    ggml_backend_synchronize(s->backends[b]);
    s->queued[b] = 0;
    s->hz.synchronized(b);
}

void sched_wait_all(ggml_backend_sched_t s) {
    for (size_t b = 0; b < s->backends.size(); ++b) sched_wait(s, (int) b);
}

ggml_copy_plan::range range_of(const ggml_tensor * t) {
    const uintptr_t p = (uintptr_t) t->data;
    return { p, p + ggml_nbytes(t) };
}

// An all-reduce split (its one node n): the collective over the parts' backends. When they all
// queue work it is queued after what they computed (their streams order it) and their memory is
// in flight; otherwise the host first waits for every backend, as before a CPU split.
ggml_status sched_all_reduce(ggml_backend_sched_t s, const ggml_tensor * n) {
    ggml_backend_t backends[GGML_MAX_SRC];
    ggml_tensor * parts[GGML_MAX_SRC];
    int ids[GGML_MAX_SRC];
    int np = 0;
    bool all_async = true;
    for (; np < GGML_MAX_SRC && n->src[np]; ++np) {
        ids[np] = s->place_of(n->src[np]);
        if (ids[np] < 0) {
            ggml_log(GGML_LOG_LEVEL_ERROR, "scheduler: all-reduce %s: part %s has no device\n", n->name, n->src[np]->name);
            return GGML_STATUS_FAILED;
        }
        backends[np] = s->backends[ids[np]];
        parts[np] = n->src[np];
        all_async = all_async && is_async(backends[np]);
    }
    if (!all_async) sched_wait_all(s);
    if (!ggml_backend_all_reduce(backends, parts, np)) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "scheduler: all-reduce %s over %d devices failed\n", n->name, np);
        return GGML_STATUS_FAILED;
    }
    for (int i = 0; i < np && all_async; ++i) {
        s->queued[ids[i]] = 1;
        s->hz.begin_split(ids[i]);
        s->hz.enqueued(ids[i], range_of(parts[i]));
    }
    return GGML_STATUS_SUCCESS;
}

// The copy src -> dst (dst in backend dst_b's memory) queued without the host waiting: on the
// destination's copy stream when it is a backend that queues work (from its own kind's memory or
// host memory), else on the source's (device to host; the host waits before it reads). false:
// nothing was queued.
bool sched_copy_async(ggml_backend_sched_t s, ggml_tensor * src, ggml_tensor * dst, int dst_b) {
    const int src_b = s->place_of(src);
    if (src_b < 0 || !sched_blocks(s, src)) return false;
    ggml_backend_t bd = s->backends[dst_b], bs = s->backends[src_b];
    if (is_async(bd)) {
        const int wait = s->hz.copy_must_wait(dst_b, range_of(dst));
        if (!bd->iface.copy_async(bd, is_async(bs) ? bs : nullptr, src, dst, s->blocks.data(), s->blocks.size(), wait)) {
            return false;
        }
        s->queued[dst_b] = 1;
        if (is_async(bs)) s->queued[src_b] = 1;   // its next work waits for the copy
        return true;
    }
    if (is_async(bs) && ggml_backend_buft_is_host(s->bufts[dst_b])) {
        if (!bs->iface.copy_async(bs, bs, src, dst, s->blocks.data(), s->blocks.size(), -1)) return false;
        s->queued[src_b] = 1;
        return true;
    }
    return false;
}

// A split's memory in its backend, in flight once the split is queued.
void sched_note_enqueued(ggml_backend_sched_t s, const sched_split & sp) {
    const int b = sp.backend_id;
    s->hz.begin_split(b);
    auto mark = [&](const ggml_tensor * t) {
        const ggml_tensor * r = root_of((ggml_tensor *) t);
        if (t->data && r->buffer && ggml_backend_buffer_get_type(r->buffer) == s->bufts[b]) s->hz.enqueued(b, range_of(t));
    };
    for (int i = 0; i < ggml_graph_n_nodes(sp.graph); ++i) {
        const ggml_tensor * n = ggml_graph_node(sp.graph, i);
        mark(n);
        for (const ggml_tensor * src : n->src) {
            if (src) mark(src);
        }
    }
}

bool sched_alloc(ggml_backend_sched_t s, ggml_cgraph * graph, bool reserve_only) {
    s->graph_copy = sched_split_graph(s, graph);
    return ggml_gallocr_alloc_graph_n(s->galloc, s->graph_copy, sched_buffer_of, s, reserve_only);
}

} // namespace

extern "C" {

bool ggml_backend_sched_reserve(ggml_backend_sched_t s, ggml_cgraph * graph) { return sched_alloc(s, graph, true); }

bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t s, ggml_cgraph * graph) { return sched_alloc(s, graph, false); }

ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t s, ggml_cgraph * graph) {
    if (s->splits.empty() || s->graph_copy == nullptr) {
        if (!ggml_backend_sched_alloc_graph(s, graph)) return GGML_STATUS_ALLOC_FAILED;
    }
    // Backends that queue work (CUDA) get their inputs copied on their copy streams and their
    // splits queued, so that the copies of the next split's inputs run while this one computes;
    // the host waits only where it must: before a backend without queues (the CPU) computes or
    // copies synchronously, and at the end. The CPU alone keeps the synchronous path.
    s->queued.assign(s->backends.size(), 0);
    s->hz.reset(s->backends.size());
    ggml_status st = GGML_STATUS_SUCCESS;
    for (const auto & sp : s->splits) {
        ggml_backend_t b = s->backends[sp.backend_id];
        for (const auto & c : sp.copies) {
            if (sched_copy_async(s, c.first, c.second, sp.backend_id)) continue;
            const int src_b = s->place_of(c.first);
            if (src_b >= 0) sched_wait(s, src_b);   // the source is produced and read by the host
            sched_wait(s, sp.backend_id);           // the destination is not in use
            sched_copy_sync(s, c.first, c.second);
        }
        if (sp.i_end <= sp.i_start) continue;
        if (is_all_reduce(ggml_graph_node(sp.graph, 0))) {
            st = sched_all_reduce(s, ggml_graph_node(sp.graph, 0));
            if (st != GGML_STATUS_SUCCESS) break;
            continue;
        }
        if (is_async(b) && s->splits.size() > 1) {
            st = b->iface.graph_enqueue(b, sp.graph);
            s->queued[sp.backend_id] = 1;
            if (st != GGML_STATUS_SUCCESS) break;
            sched_note_enqueued(s, sp);
            continue;
        }
        // the host computes (or the backend runs the whole graph): what other backends queued
        // may read or write memory this split uses
        sched_wait_all(s);
        st = ggml_backend_graph_compute(b, sp.graph);
        if (st != GGML_STATUS_SUCCESS) break;
        // the next split may read this one's results from another backend
        if (s->splits.size() > 1) ggml_backend_synchronize(b);
    }
    sched_wait_all(s);
    return st;
}

} // extern "C"
