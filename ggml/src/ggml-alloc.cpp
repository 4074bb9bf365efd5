// Graph memory planning: every intermediate tensor gets an offset in a buffer, and memory is
// reused once a tensor's last consumer has run. The plan is simulated on offsets first; the
// real buffer is (re)allocated only when the plan needs more than it has, so a model that
// decodes batches of a repeating shape allocates nothing per token.
#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "ggml-ptr-map.h"

#include <algorithm>
#include <vector>

namespace {

// First-fit over a sorted free list, merging neighbours on release.
struct offset_allocator {
    struct block { size_t offs, size; };
    std::vector<block> free_blocks;
    size_t alignment = GGML_MEM_ALIGN;
    size_t high_water = 0;
    static constexpr size_t k_unbounded = SIZE_MAX / 4;

    void reset(size_t align) {
        alignment = align;
        free_blocks.assign(1, { 0, k_unbounded });
        high_water = 0;
    }

    size_t alloc(size_t size) {
        size = ggml_pad(std::max<size_t>(size, 1), alignment);
        // best fit among blocks that end below the high-water mark, else the tail block
        size_t best = SIZE_MAX;
        size_t best_size = SIZE_MAX;
        for (size_t i = 0; i < free_blocks.size(); ++i) {
            const block & b = free_blocks[i];
            if (b.size >= size && b.offs + b.size <= high_water && b.size < best_size) {
                best = i;
                best_size = b.size;
            }
        }
        if (best == SIZE_MAX) {
            for (size_t i = 0; i < free_blocks.size(); ++i) {
                if (free_blocks[i].size >= size) { best = i; break; }
            }
        }
        GGML_ASSERT(best != SIZE_MAX);
        block & b = free_blocks[best];
        const size_t offs = b.offs;
        b.offs += size;
        b.size -= size;
        if (b.size == 0) free_blocks.erase(free_blocks.begin() + best);
        high_water = std::max(high_water, offs + size);
        return offs;
    }

    void release(size_t offs, size_t size) {
        size = ggml_pad(std::max<size_t>(size, 1), alignment);
        auto it = std::lower_bound(free_blocks.begin(), free_blocks.end(), offs,
                                   [](const block & b, size_t o) { return b.offs < o; });
        it = free_blocks.insert(it, { offs, size });
        // merge with the next, then with the previous
        if (it + 1 != free_blocks.end() && it->offs + it->size == (it + 1)->offs) {
            it->size += (it + 1)->size;
            free_blocks.erase(it + 1);
        }
        if (it != free_blocks.begin() && (it - 1)->offs + (it - 1)->size == it->offs) {
            (it - 1)->size += it->size;
            free_blocks.erase(it);
        }
    }
};

struct tensor_plan {
    int    n_consumers = 0;
    int    buffer_id = -1;
    size_t offs = 0;
    size_t size = 0;
    bool   planned = false;   // memory assigned by this planner
    bool   keep = false;      // input, output or leaf: never released
};

ggml_tensor * root_of(ggml_tensor * t) { return t->view_src ? t->view_src : t; }

bool needs_memory(const ggml_tensor * t) { return t->data == nullptr && t->view_src == nullptr; }

} // namespace

struct ggml_gallocr {
    std::vector<ggml_backend_buffer_type_t> bufts;
    std::vector<ggml_backend_buffer_t>      buffers;
    std::vector<offset_allocator>           allocators;
    std::vector<size_t>                     planned_sizes;
    // per-graph planning state, kept between calls so that replanning allocates nothing
    ggml_ptr_map             index;   // tensor -> slot in plans
    std::vector<tensor_plan> plans;
};

ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n) {
    auto * g = new ggml_gallocr;
    g->bufts.assign(bufts, bufts + n);
    g->buffers.assign(n, nullptr);
    g->allocators.resize(n);
    g->planned_sizes.assign(n, 0);
    return g;
}

extern "C" {

ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft) { return ggml_gallocr_new_n(&buft, 1); }

void ggml_gallocr_free(ggml_gallocr_t g) {
    if (!g) return;
    for (auto * b : g->buffers) {
        if (b) ggml_backend_buffer_free(b);
    }
    delete g;
}

size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t g) {
    return g->buffers[0] ? ggml_backend_buffer_get_size(g->buffers[0]) : 0;
}

bool ggml_gallocr_reserve(ggml_gallocr_t g, ggml_cgraph * graph) {
    return ggml_gallocr_alloc_graph_n(g, graph, nullptr, nullptr, true);
}

bool ggml_gallocr_alloc_graph(ggml_gallocr_t g, ggml_cgraph * graph) {
    return ggml_gallocr_alloc_graph_n(g, graph, nullptr, nullptr, false);
}

} // extern "C"

size_t ggml_gallocr_get_buffer_size_n(ggml_gallocr_t g, int buffer_id) {
    return g->buffers[buffer_id] ? ggml_backend_buffer_get_size(g->buffers[buffer_id]) : 0;
}

bool ggml_gallocr_alloc_graph_n(ggml_gallocr_t g, ggml_cgraph * graph, int (*buffer_of)(const ggml_tensor *, void *),
                                void * user, bool reserve_only) {
    const int n_buf = (int) g->bufts.size();
    for (int b = 0; b < n_buf; ++b) g->allocators[b].reset(ggml_backend_buft_get_alignment(g->bufts[b]));

    const int n_nodes = ggml_graph_n_nodes(graph);
    const int n_leafs = ggml_graph_n_leafs(graph);
    g->index.reset(2 * (size_t) (n_nodes + n_leafs));
    g->plans.clear();
    g->plans.reserve(2 * (size_t) (n_nodes + n_leafs));
    auto plan_of = [g](const ggml_tensor * t) -> tensor_plan & {
        int i = g->index.get(t);
        if (i < 0) {
            i = (int) g->plans.size();
            g->plans.emplace_back();
            g->index.set(t, i);
        }
        return g->plans[i];
    };

    auto buffer_id = [&](const ggml_tensor * t) { return buffer_of ? buffer_of(t, user) : 0; };

    // count the consumers of every root tensor
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (n->src[s]) plan_of(root_of(n->src[s])).n_consumers++;
        }
    }

    auto assign = [&](ggml_tensor * t) {
        tensor_plan & p = plan_of(t);
        if (p.planned || !needs_memory(t)) return;
        p.buffer_id = buffer_id(t);
        p.size = ggml_backend_buft_get_alloc_size(g->bufts[p.buffer_id], t);
        p.offs = g->allocators[p.buffer_id].alloc(p.size);
        p.planned = true;
    };

    // leaves without data (graph inputs) live for the whole graph
    for (int i = 0; i < n_leafs; ++i) {
        ggml_tensor * l = ggml_graph_leaf(graph, i);
        plan_of(l).keep = true;
        assign(l);
    }

    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        {
            tensor_plan & p = plan_of(n);
            if (n->flags & (GGML_TENSOR_FLAG_OUTPUT | GGML_TENSOR_FLAG_INPUT)) p.keep = true;
            if (i == n_nodes - 1) p.keep = true;
        }
        assign(n);
        // release the sources whose last consumer this node was
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (!n->src[s]) continue;
            ggml_tensor * r = root_of(n->src[s]);
            tensor_plan & rp = plan_of(r);
            if (--rp.n_consumers == 0 && rp.planned && !rp.keep && !(r->flags & (GGML_TENSOR_FLAG_OUTPUT | GGML_TENSOR_FLAG_INPUT))) {
                // a node that is itself an unconsumed root stays until the end
                g->allocators[rp.buffer_id].release(rp.offs, rp.size);
                rp.keep = true;   // released once
            }
        }
    }

    // make sure the buffers are large enough
    for (int b = 0; b < n_buf; ++b) {
        const size_t need = g->allocators[b].high_water;
        g->planned_sizes[b] = std::max(g->planned_sizes[b], need);
        const size_t have = g->buffers[b] ? ggml_backend_buffer_get_size(g->buffers[b]) : 0;
        if (need > have || (!g->buffers[b] && need > 0)) {
            if (g->buffers[b]) ggml_backend_buffer_free(g->buffers[b]);
            g->buffers[b] = ggml_backend_buft_alloc_buffer(g->bufts[b], std::max<size_t>(g->planned_sizes[b], 1));
            if (!g->buffers[b]) {
                ggml_log(GGML_LOG_LEVEL_ERROR, "%s: failed to allocate %s buffer of %.2f MiB\n", __func__,
                         ggml_backend_buft_name(g->bufts[b]), g->planned_sizes[b] / 1048576.0);
                return false;
            }
            ggml_backend_buffer_set_usage(g->buffers[b], GGML_BACKEND_BUFFER_USAGE_COMPUTE);
        }
    }
    if (reserve_only) return true;

    // place the tensors, then the views in graph order (a view's source comes first)
    auto place = [&](ggml_tensor * t) {
        if (t->data == nullptr && t->view_src == nullptr) {
            const tensor_plan & p = plan_of(t);
            if (!p.planned) return;
            char * base = (char *) ggml_backend_buffer_get_base(g->buffers[p.buffer_id]);
            ggml_backend_tensor_alloc(g->buffers[p.buffer_id], t, base + p.offs);
        } else if (t->data == nullptr && t->view_src && t->view_src->data) {
            ggml_backend_view_init(t);
        }
    };
    for (int i = 0; i < n_leafs; ++i) place(ggml_graph_leaf(graph, i));
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (n->src[s] && n->src[s]->data == nullptr) place(n->src[s]);
        }
        place(n);
    }
    return true;
}
