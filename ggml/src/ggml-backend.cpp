// Buffers, backends, and the scheduler that runs each op where its weights live.
#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "ggml-ptr-map.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

extern "C" {

// ---- buffer types

const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft) { return buft->iface.get_name(buft); }

ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    return buft->iface.alloc_buffer(buft, size);
}

size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft) { return buft->iface.get_alignment(buft); }

size_t ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft) {
    return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX;
}

size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const ggml_tensor * t) {
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, t) : ggml_nbytes(t);
}

bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft) { return buft->iface.is_host && buft->iface.is_host(buft); }

// ---- buffers

void ggml_backend_buffer_free(ggml_backend_buffer_t buffer) {
    if (!buffer) return;
    if (buffer->iface.free_buffer) buffer->iface.free_buffer(buffer);
    delete buffer;
}

void * ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer) {
    return buffer->size ? buffer->iface.get_base(buffer) : nullptr;
}
size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer) { return buffer->size; }
const char * ggml_backend_buffer_name(ggml_backend_buffer_t buffer) { return ggml_backend_buft_name(buffer->buft); }
void ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    if (buffer->size) buffer->iface.clear(buffer, value);
}
bool ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer) { return ggml_backend_buft_is_host(buffer->buft); }
void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, ggml_backend_buffer_usage usage) { buffer->usage = usage; }
ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer) { return buffer->usage; }
ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer) { return buffer->buft; }
size_t ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer) { return ggml_backend_buft_get_alignment(buffer->buft); }

void ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, ggml_tensor * t, void * addr) {
    GGML_ASSERT(t->buffer == nullptr && t->data == nullptr && t->view_src == nullptr);
    char * base = (char *) ggml_backend_buffer_get_base(buffer);
    GGML_ASSERT((char *) addr >= base && (char *) addr + ggml_backend_buft_get_alloc_size(buffer->buft, t) <= base + buffer->size);
    t->buffer = buffer;
    t->data = addr;
    if (buffer->iface.init_tensor) buffer->iface.init_tensor(buffer, t);
}

void ggml_backend_view_init(ggml_tensor * t) {
    GGML_ASSERT(t->view_src && t->view_src->data);
    t->buffer = t->view_src->buffer;
    t->data = (char *) t->view_src->data + t->view_offs;
    if (t->buffer && t->buffer->iface.init_tensor) t->buffer->iface.init_tensor(t->buffer, t);
}

} // extern "C"

ggml_backend_buffer_t ggml_backend_buffer_init(ggml_backend_buffer_type_t buft, ggml_backend_buffer_i iface, void * context,
                                               size_t size) {
    return new ggml_backend_buffer{ iface, buft, context, size, GGML_BACKEND_BUFFER_USAGE_ANY };
}

extern "C" {

// ---- tensor data

void ggml_backend_tensor_set(ggml_tensor * t, const void * data, size_t offset, size_t size) {
    if (size == 0) return;
    GGML_ASSERT(t->data && "tensor not allocated");
    GGML_ASSERT(offset + size <= ggml_nbytes(t) && "tensor write out of bounds");
    ggml_backend_buffer_t buf = t->view_src ? t->view_src->buffer : t->buffer;
    if (!buf) {
        std::memcpy((char *) t->data + offset, data, size);
        return;
    }
    buf->iface.set_tensor(buf, t, data, offset, size);
}

void ggml_backend_tensor_get(const ggml_tensor * t, void * data, size_t offset, size_t size) {
    if (size == 0) return;
    GGML_ASSERT(t->data && "tensor not allocated");
    GGML_ASSERT(offset + size <= ggml_nbytes(t) && "tensor read out of bounds");
    ggml_backend_buffer_t buf = t->view_src ? t->view_src->buffer : t->buffer;
    if (!buf) {
        std::memcpy(data, (const char *) t->data + offset, size);
        return;
    }
    buf->iface.get_tensor(buf, t, data, offset, size);
}

void ggml_backend_tensor_memset(ggml_tensor * t, uint8_t value, size_t offset, size_t size) {
    if (size == 0) return;
    GGML_ASSERT(t->data && offset + size <= ggml_nbytes(t));
    ggml_backend_buffer_t buf = t->view_src ? t->view_src->buffer : t->buffer;
    if (!buf) {
        std::memset((char *) t->data + offset, value, size);
        return;
    }
    buf->iface.memset_tensor(buf, t, value, offset, size);
}

void ggml_backend_tensor_copy(ggml_tensor * src, ggml_tensor * dst) {
    GGML_ASSERT(ggml_nbytes(src) == ggml_nbytes(dst));
    if (src == dst) return;
    const bool src_host = !src->buffer || ggml_backend_buffer_is_host(src->buffer);
    const bool dst_host = !dst->buffer || ggml_backend_buffer_is_host(dst->buffer);
    if (src_host) {
        ggml_backend_tensor_set(dst, src->data, 0, ggml_nbytes(src));
    } else if (dst_host) {
        ggml_backend_tensor_get(src, dst->data, 0, ggml_nbytes(src));
    } else {
        std::vector<char> tmp(ggml_nbytes(src));
        ggml_backend_tensor_get(src, tmp.data(), 0, tmp.size());
        ggml_backend_tensor_set(dst, tmp.data(), 0, tmp.size());
    }
}

// ---- backends

const char * ggml_backend_name(ggml_backend_t backend) { return backend->iface.get_name(backend); }

void ggml_backend_free(ggml_backend_t backend) {
    if (backend) backend->iface.free(backend);
}

ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend) {
    return backend->iface.get_default_buffer_type(backend);
}

ggml_backend_buffer_t ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size) {
    return ggml_backend_buft_alloc_buffer(ggml_backend_get_default_buffer_type(backend), size);
}

ggml_status ggml_backend_graph_compute(ggml_backend_t backend, ggml_cgraph * graph) {
    return backend->iface.graph_compute(backend, graph);
}

bool ggml_backend_supports_op(ggml_backend_t backend, const ggml_tensor * op) { return backend->iface.supports_op(backend, op); }
bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft) {
    return backend->iface.supports_buft(backend, buft);
}
void ggml_backend_synchronize(ggml_backend_t backend) {
    if (backend->iface.synchronize) backend->iface.synchronize(backend);
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    const size_t align = ggml_backend_buft_get_alignment(buft);
    size_t total = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data == nullptr && t->view_src == nullptr) total += ggml_pad(ggml_backend_buft_get_alloc_size(buft, t), align);
    }
    if (total == 0) return nullptr;
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, total);
    if (!buf) return nullptr;
    char * base = (char *) ggml_backend_buffer_get_base(buf);
    size_t offs = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data == nullptr && t->view_src == nullptr) {
            ggml_backend_tensor_alloc(buf, t, base + offs);
            offs += ggml_pad(ggml_backend_buft_get_alloc_size(buft, t), align);
        }
    }
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data == nullptr && t->view_src) ggml_backend_view_init(t);
    }
    return buf;
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend) {
    return ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_get_default_buffer_type(backend));
}

} // extern "C"

// ---------------------------------------------------------------------------------------------
// Scheduler
//
// 1. Each node gets a backend: a user's explicit choice; else the backend whose buffer holds a
//    weight it reads (a leaf with data in a WEIGHTS buffer), if that backend can run the op;
//    else the backend of its first computed source; else the last backend (the CPU).
// 2. Runs of consecutive nodes on one backend form splits.
// 3. A split that reads a tensor another backend produced, or whose memory its backend cannot
//    access, gets a copy of it in its own memory (made before the split runs).
// 4. The planner gives every intermediate tensor memory from its backend's buffer type.

namespace {

struct sched_split {
    int backend_id;
    int i_start, i_end;                                          // node range in the rebuilt graph
    std::vector<std::pair<ggml_tensor *, ggml_tensor *>> copies; // (from, to) before running
};

} // namespace

struct ggml_backend_sched {
    std::vector<ggml_backend_t> backends;
    std::vector<ggml_backend_buffer_type_t> bufts;
    ggml_gallocr_t galloc = nullptr;
    size_t graph_size;

    ggml_ptr_map assigned;        // tensor -> backend index
    ggml_ptr_map user_assigned;   // the caller's choices
    std::vector<sched_split> splits;
    int n_copies = 0;

    ggml_context * ctx = nullptr;        // copies and split graphs
    std::vector<char> ctx_mem;
    ggml_cgraph * graph_copy = nullptr;  // the graph with copy nodes' consumers rewired
    std::vector<ggml_cgraph *> split_graphs;

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
};

static int sched_buffer_of(const ggml_tensor * t, void * user) {
    auto * s = (ggml_backend_sched *) user;
    const int b = s->assigned.get(t);
    return b < 0 ? (int) s->backends.size() - 1 : b;
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

// Assign backends, build splits and copies; returns the graph to allocate and run.
static ggml_cgraph * sched_split_graph(ggml_backend_sched_t s, ggml_cgraph * graph) {
    const int cpu = (int) s->backends.size() - 1;
    const int n_nodes = ggml_graph_n_nodes(graph);
    s->assigned.reset((size_t) n_nodes + ggml_graph_n_leafs(graph));
    s->splits.clear();
    s->n_copies = 0;

    // tensors that already have memory: they belong to their buffer's backend
    auto place_of_data = [&](const ggml_tensor * t) -> int {
        const ggml_tensor * r = t->view_src ? t->view_src : t;
        return s->backend_of_buffer(r->buffer);
    };

    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        int b = -1;
        if (s->user_assigned.size() > 0) b = s->user_assigned.get(n);
        if (b < 0 && (n->view_src || n->data)) {
            // views and in-place writes run where the memory is
            const int pb = place_of_data(n);
            if (pb >= 0) b = pb;
        }
        if (b < 0) {
            for (int k = 0; k < GGML_MAX_SRC && b < 0; ++k) {
                const ggml_tensor * src = n->src[k];
                if (!src || src->op != GGML_OP_NONE) continue;
                const ggml_tensor * r = src->view_src ? src->view_src : src;
                if (r->buffer && ggml_backend_buffer_get_usage(r->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
                    const int wb = s->backend_of_buffer(r->buffer);
                    if (wb >= 0 && ggml_backend_supports_op(s->backends[wb], n)) b = wb;
                }
            }
        }
        if (b < 0) {
            for (int k = 0; k < GGML_MAX_SRC && b < 0; ++k) {
                if (n->src[k]) b = s->assigned.get(n->src[k]);
            }
        }
        if (b < 0) b = cpu;
        if (!ggml_backend_supports_op(s->backends[b], n)) b = cpu;
        s->assigned.set(n, b);
    }
    // graph inputs without memory live with their first consumer
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            ggml_tensor * src = n->src[k];
            if (src && src->op == GGML_OP_NONE && !src->data && !src->view_src && s->assigned.get(src) < 0) {
                s->assigned.set(src, s->assigned.get(n));
            }
        }
    }

    // single backend, no foreign memory: run the graph as it is
    bool one = true;
    for (int i = 0; i < n_nodes && one; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        const int b = s->assigned.get(n);
        if (b != cpu && s->backends.size() > 1) one = false;
        for (int k = 0; k < GGML_MAX_SRC && one; ++k) {
            const ggml_tensor * src = n->src[k];
            if (!src) continue;
            const int pb = place_of_data(src);
            if (pb >= 0 && pb != b && !ggml_backend_buffer_is_host((src->view_src ? src->view_src : src)->buffer)) one = false;
        }
    }
    if (one) {
        s->splits.push_back({ cpu, 0, n_nodes, {} });
        return graph;
    }

    // rebuild: copy nodes for cross-backend inputs, then each split's nodes
    const size_t mem = ggml_tensor_overhead() * (size_t) (4 * n_nodes + 16) + ggml_graph_overhead_custom(4 * s->graph_size);
    if (s->ctx) ggml_free(s->ctx);
    s->ctx = ggml_init({ mem, nullptr, true });
    ggml_cgraph * out = ggml_new_graph_custom(s->ctx, 4 * s->graph_size, false);

    // rebuilt node list (the graph struct's arrays are filled by hand through build_forward)
    std::unordered_map<const ggml_tensor *, ggml_tensor *> copy_of;  // (tensor, backend) collapsed per split
    int cur = -1;
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * n = ggml_graph_node(graph, i);
        const int b = s->assigned.get(n);
        if (b != cur) {
            if (!s->splits.empty()) s->splits.back().i_end = ggml_graph_n_nodes(out);
            s->splits.push_back({ b, ggml_graph_n_nodes(out), -1, {} });
            copy_of.clear();
            cur = b;
        }
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            ggml_tensor * src = n->src[k];
            if (!src) continue;
            int src_b = place_of_data(src);
            if (src_b < 0) {
                const int ab = s->assigned.get(src->view_src ? src->view_src : src);
                src_b = ab < 0 ? b : ab;
            }
            const ggml_tensor * r = src->view_src ? src->view_src : src;
            const bool host_ok = r->buffer && ggml_backend_buffer_is_host(r->buffer) && b == cpu;
            if (src_b == b || host_ok) continue;
            auto it = copy_of.find(src);
            ggml_tensor * c;
            if (it != copy_of.end()) {
                c = it->second;
            } else {
                c = ggml_dup_tensor(s->ctx, src);
                ggml_format_name(c, "%s#%s", src->name, ggml_backend_name(s->backends[b]));
                ggml_set_input(c);
                s->assigned.set(c, b);
                s->splits.back().copies.push_back({ src, c });
                copy_of[src] = c;
                s->n_copies++;
            }
            n->src[k] = c;
        }
        ggml_build_forward_expand(out, n);
    }
    s->splits.back().i_end = ggml_graph_n_nodes(out);
    return out;
}

static bool sched_alloc(ggml_backend_sched_t s, ggml_cgraph * graph, bool reserve_only) {
    s->graph_copy = sched_split_graph(s, graph);
    return ggml_gallocr_alloc_graph_n(s->galloc, s->graph_copy, sched_buffer_of, s, reserve_only);
}

extern "C" {

bool ggml_backend_sched_reserve(ggml_backend_sched_t s, ggml_cgraph * graph) { return sched_alloc(s, graph, true); }

bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t s, ggml_cgraph * graph) { return sched_alloc(s, graph, false); }

ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t s, ggml_cgraph * graph) {
    if (s->splits.empty() || s->graph_copy == nullptr) {
        if (!ggml_backend_sched_alloc_graph(s, graph)) return GGML_STATUS_ALLOC_FAILED;
    }
    ggml_cgraph * g = s->graph_copy;
    if (s->splits.size() == 1 && s->splits[0].copies.empty()) {
        return ggml_backend_graph_compute(s->backends[s->splits[0].backend_id], g);
    }
    // each split runs as a view of the rebuilt graph's node range
    for (const auto & sp : s->splits) {
        for (const auto & c : sp.copies) ggml_backend_tensor_copy(c.first, c.second);
        const int n = sp.i_end - sp.i_start;
        if (n <= 0) continue;
        const size_t mem = ggml_graph_overhead_custom(n) + 1024;
        ggml_context * tmp = ggml_init({ mem, nullptr, true });
        ggml_cgraph * part = ggml_new_graph_custom(tmp, n, false);
        for (int i = sp.i_start; i < sp.i_end; ++i) ggml_graph_add_node(part, ggml_graph_node(g, i));
        const ggml_status st = ggml_backend_graph_compute(s->backends[sp.backend_id], part);
        ggml_free(tmp);
        if (st != GGML_STATUS_SUCCESS) return st;
    }
    return GGML_STATUS_SUCCESS;
}

} // extern "C"
