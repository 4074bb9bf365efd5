// Contexts, tensors, views and graphs. Op constructors are in ggml-ops.cpp.
#include "ggml-impl.h"

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <new>

// ---------------------------------------------------------------------------------------------
// Logging and aborts

namespace {
ggml_log_callback g_log_cb = nullptr;
void * g_log_user = nullptr;

void log_default(ggml_log_level level, const char * text, void *) {
    (void) level;
    std::fputs(text, stderr);
    std::fflush(stderr);
}
} // namespace

extern "C" {

void ggml_log_set(ggml_log_callback cb, void * user_data) {
    g_log_cb = cb;
    g_log_user = user_data;
}

void ggml_log(ggml_log_level level, const char * fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    (g_log_cb ? g_log_cb : log_default)(level, buf, g_log_user);
}

void ggml_abort(const char * file, int line, const char * fmt, ...) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::abort();
}

int64_t ggml_time_us(void) {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

} // extern "C"

// ---------------------------------------------------------------------------------------------
// Contexts: an arena of objects (tensors, graphs) and, unless no_alloc, their data.

namespace {
enum object_kind { OBJ_TENSOR, OBJ_GRAPH, OBJ_DATA };

struct object {
    size_t      offs;   // of the payload, from the arena's start
    size_t      size;
    object *    next;
    object_kind kind;
};

constexpr size_t k_object_size = sizeof(object);
} // namespace

struct ggml_context {
    char *   mem;
    size_t   mem_size;
    bool     owns_mem;
    bool     no_alloc;
    size_t   used;
    object * first;
    object * last;
};

struct ggml_cgraph {
    int size;
    int n_nodes;
    int n_leafs;
    ggml_tensor ** nodes;
    ggml_tensor ** leafs;
    // open-addressing set of visited tensors (pointers), capacity hash_size
    size_t hash_size;
    ggml_tensor ** hash_keys;
};

namespace {

void * ctx_alloc(ggml_context * ctx, size_t size, object_kind kind) {
    // the header sits right before its payload, so a tensor finds its header in O(1)
    const size_t payload = ggml_pad(ctx->used + k_object_size, GGML_MEM_ALIGN);
    const size_t obj_start = payload - k_object_size;
    const size_t end = payload + size;
    if (end > ctx->mem_size) {
        GGML_ABORT("ggml context out of memory: need %zu bytes, have %zu (increase mem_size)", end, ctx->mem_size);
    }
    object * obj = new (ctx->mem + obj_start) object{ payload, size, nullptr, kind };
    if (ctx->last) ctx->last->next = obj; else ctx->first = obj;
    ctx->last = obj;
    ctx->used = end;
    return ctx->mem + payload;
}

} // namespace

extern "C" {

ggml_context * ggml_init(ggml_init_params params) {
    auto * ctx = new ggml_context{};
    ctx->mem_size = params.mem_size ? params.mem_size : 1;
    if (params.mem_buffer) {
        ctx->mem = (char *) params.mem_buffer;
        ctx->owns_mem = false;
    } else {
        ctx->mem = (char *) std::aligned_alloc(GGML_MEM_ALIGN, ggml_pad(ctx->mem_size, GGML_MEM_ALIGN));
        if (!ctx->mem) {
            delete ctx;
            return nullptr;
        }
        ctx->owns_mem = true;
    }
    ctx->no_alloc = params.no_alloc;
    return ctx;
}

void ggml_free(ggml_context * ctx) {
    if (!ctx) return;
    if (ctx->owns_mem) std::free(ctx->mem);
    delete ctx;
}

size_t ggml_used_mem(const ggml_context * ctx) { return ctx->used; }
bool   ggml_get_no_alloc(ggml_context * ctx) { return ctx->no_alloc; }
void   ggml_set_no_alloc(ggml_context * ctx, bool no_alloc) { ctx->no_alloc = no_alloc; }

size_t ggml_tensor_overhead(void) {
    return k_object_size + sizeof(ggml_tensor) + 2 * GGML_MEM_ALIGN;
}

size_t ggml_graph_overhead_custom(size_t size) {
    const size_t hash = 2 * size + 1;
    return k_object_size + 2 * GGML_MEM_ALIGN + sizeof(ggml_cgraph) + (2 * size + hash) * sizeof(ggml_tensor *);
}

size_t ggml_graph_overhead(void) { return ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE); }

ggml_tensor * ggml_get_first_tensor(const ggml_context * ctx) {
    for (object * o = ctx->first; o; o = o->next) {
        if (o->kind == OBJ_TENSOR) return (ggml_tensor *) (ctx->mem + o->offs);
    }
    return nullptr;
}

ggml_tensor * ggml_get_next_tensor(const ggml_context * ctx, ggml_tensor * t) {
    const object * o = (const object *) ((const char *) t - k_object_size);
    for (o = o->next; o; o = o->next) {
        if (o->kind == OBJ_TENSOR) return (ggml_tensor *) (ctx->mem + o->offs);
    }
    return nullptr;
}

ggml_tensor * ggml_get_tensor(ggml_context * ctx, const char * name) {
    for (object * o = ctx->first; o; o = o->next) {
        if (o->kind != OBJ_TENSOR) continue;
        auto * t = (ggml_tensor *) (ctx->mem + o->offs);
        if (std::strcmp(t->name, name) == 0) return t;
    }
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Tensor properties

int64_t ggml_nelements(const ggml_tensor * t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
int64_t ggml_nrows(const ggml_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t ggml_nbytes(const ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] <= 0) return 0;
    }
    const int64_t blck = ggml_blck_size(t->type);
    size_t n;
    if (blck == 1) {
        n = ggml_type_size(t->type);
        for (int i = 0; i < GGML_MAX_DIMS; ++i) n += (t->ne[i] - 1) * t->nb[i];
    } else {
        n = ggml_row_size(t->type, t->ne[0]);
        for (int i = 1; i < GGML_MAX_DIMS; ++i) n += (t->ne[i] - 1) * t->nb[i];
    }
    return n;
}

size_t ggml_element_size(const ggml_tensor * t) { return ggml_type_size(t->type); }

int ggml_n_dims(const ggml_tensor * t) {
    for (int i = GGML_MAX_DIMS - 1; i >= 1; --i) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}

bool ggml_is_contiguous(const ggml_tensor * t) {
    size_t next = ggml_type_size(t->type);
    if (t->ne[0] != ggml_blck_size(t->type) && t->nb[0] != next) return false;
    next = ggml_row_size(t->type, t->ne[0]);
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] != 1) {
            if (t->nb[i] != next) return false;
            next *= t->ne[i];
        } // a dimension of size 1 may have any stride
    }
    return true;
}

bool ggml_is_contiguous_rows(const ggml_tensor * t) {
    return t->ne[0] == ggml_blck_size(t->type) || t->nb[0] == ggml_type_size(t->type);
}

bool ggml_is_transposed(const ggml_tensor * t) { return t->nb[0] > t->nb[1]; }

bool ggml_is_permuted(const ggml_tensor * t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

bool ggml_are_same_shape(const ggml_tensor * a, const ggml_tensor * b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}

bool ggml_can_repeat(const ggml_tensor * a, const ggml_tensor * b) {
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (a->ne[i] == 0 || b->ne[i] % a->ne[i] != 0) return false;
    }
    return true;
}

bool ggml_is_view_op(ggml_op op) {
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE || op == GGML_OP_TRANSPOSE;
}

// ---------------------------------------------------------------------------------------------
// Tensor creation

static ggml_tensor * new_tensor_impl(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne,
                                     ggml_tensor * view_src, size_t view_offs) {
    GGML_ASSERT(ggml_type_is_valid(type));
    GGML_ASSERT(n_dims >= 1 && n_dims <= GGML_MAX_DIMS);
    if (view_src && view_src->view_src) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }
    int64_t full[GGML_MAX_DIMS] = { 1, 1, 1, 1 };
    for (int i = 0; i < n_dims; ++i) full[i] = ne[i];

    size_t data_size = ggml_row_size(type, full[0]);
    for (int i = 1; i < GGML_MAX_DIMS; ++i) data_size *= full[i];

    void * data = nullptr;
    if (view_src) {
        GGML_ASSERT(view_offs + data_size <= ggml_nbytes(view_src) || data_size == 0 || ggml_nbytes(view_src) == 0 ||
                    view_src->data == nullptr);
        data = view_src->data ? (char *) view_src->data + view_offs : nullptr;
    }

    auto * t = (ggml_tensor *) ctx_alloc(ctx, sizeof(ggml_tensor) + ((view_src || ctx->no_alloc) ? 0 : data_size + GGML_MEM_ALIGN), OBJ_TENSOR);
    std::memset(t, 0, sizeof(*t));
    if (!view_src && !ctx->no_alloc) {
        data = (void *) ggml_pad((uintptr_t) (t + 1), GGML_MEM_ALIGN);
    }
    t->type = type;
    t->buffer = view_src ? view_src->buffer : nullptr;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) t->ne[i] = full[i];
    t->nb[0] = ggml_type_size(type);
    t->nb[1] = ggml_row_size(type, full[0]);
    for (int i = 2; i < GGML_MAX_DIMS; ++i) t->nb[i] = t->nb[i - 1] * t->ne[i - 1];
    t->op = GGML_OP_NONE;
    t->view_src = view_src;
    t->view_offs = view_offs;
    t->data = data;
    return t;
}

ggml_tensor * ggml_new_tensor(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne) {
    return new_tensor_impl(ctx, type, n_dims, ne, nullptr, 0);
}
ggml_tensor * ggml_new_tensor_1d(ggml_context * ctx, ggml_type type, int64_t ne0) {
    return ggml_new_tensor(ctx, type, 1, &ne0);
}
ggml_tensor * ggml_new_tensor_2d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    return ggml_new_tensor(ctx, type, 2, ne);
}
ggml_tensor * ggml_new_tensor_3d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return ggml_new_tensor(ctx, type, 3, ne);
}
ggml_tensor * ggml_new_tensor_4d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return ggml_new_tensor(ctx, type, 4, ne);
}
ggml_tensor * ggml_dup_tensor(ggml_context * ctx, const ggml_tensor * src) {
    return ggml_new_tensor(ctx, src->type, GGML_MAX_DIMS, src->ne);
}

ggml_tensor * ggml_set_name(ggml_tensor * t, const char * name) {
    std::snprintf(t->name, sizeof(t->name), "%s", name);
    return t;
}

ggml_tensor * ggml_format_name(ggml_tensor * t, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(t->name, sizeof(t->name), fmt, ap);
    va_end(ap);
    return t;
}

const char * ggml_get_name(const ggml_tensor * t) { return t->name; }
void ggml_set_input(ggml_tensor * t)  { t->flags |= GGML_TENSOR_FLAG_INPUT; }
void ggml_set_output(ggml_tensor * t) { t->flags |= GGML_TENSOR_FLAG_OUTPUT; }

// ---------------------------------------------------------------------------------------------
// Views and layout changes (no computation: the result shares the source's memory)

static ggml_tensor * view_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne, size_t offset) {
    ggml_tensor * r = new_tensor_impl(ctx, a->type, n_dims, ne, a, offset);
    ggml_format_name(r, "%s (view)", a->name);
    r->op = GGML_OP_VIEW;
    r->src[0] = a;
    ggml_set_op_params(r, &offset, sizeof(offset));
    return r;
}

ggml_tensor * ggml_view_tensor(ggml_context * ctx, ggml_tensor * src) {
    ggml_tensor * r = new_tensor_impl(ctx, src->type, GGML_MAX_DIMS, src->ne, src, 0);
    ggml_format_name(r, "%s (view)", src->name);
    for (int i = 0; i < GGML_MAX_DIMS; ++i) r->nb[i] = src->nb[i];
    return r;
}

ggml_tensor * ggml_view_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, size_t offset) {
    return view_impl(ctx, a, 1, &ne0, offset);
}

ggml_tensor * ggml_view_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
    const int64_t ne[2] = { ne0, ne1 };
    ggml_tensor * r = view_impl(ctx, a, 2, ne, offset);
    r->nb[1] = nb1;
    r->nb[2] = r->nb[1] * ne1;
    r->nb[3] = r->nb[2];
    return r;
}

ggml_tensor * ggml_view_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
                           size_t nb2, size_t offset) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    ggml_tensor * r = view_impl(ctx, a, 3, ne, offset);
    r->nb[1] = nb1;
    r->nb[2] = nb2;
    r->nb[3] = r->nb[2] * ne2;
    return r;
}

ggml_tensor * ggml_view_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                           size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    ggml_tensor * r = view_impl(ctx, a, 4, ne, offset);
    r->nb[1] = nb1;
    r->nb[2] = nb2;
    r->nb[3] = nb3;
    return r;
}

static ggml_tensor * reshape_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne) {
    GGML_ASSERT(ggml_is_contiguous(a));
    int64_t n = 1;
    for (int i = 0; i < n_dims; ++i) n *= ne[i];
    GGML_ASSERT(n == ggml_nelements(a));
    ggml_tensor * r = new_tensor_impl(ctx, a->type, n_dims, ne, a, 0);
    ggml_format_name(r, "%s (reshaped)", a->name);
    r->op = GGML_OP_RESHAPE;
    r->src[0] = a;
    return r;
}

ggml_tensor * ggml_reshape(ggml_context * ctx, ggml_tensor * a, ggml_tensor * shape) {
    return reshape_impl(ctx, a, GGML_MAX_DIMS, shape->ne);
}
ggml_tensor * ggml_reshape_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0) {
    return reshape_impl(ctx, a, 1, &ne0);
}
ggml_tensor * ggml_reshape_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    return reshape_impl(ctx, a, 2, ne);
}
ggml_tensor * ggml_reshape_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return reshape_impl(ctx, a, 3, ne);
}
ggml_tensor * ggml_reshape_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return reshape_impl(ctx, a, 4, ne);
}

ggml_tensor * ggml_permute(ggml_context * ctx, ggml_tensor * a, int axis0, int axis1, int axis2, int axis3) {
    const int axes[4] = { axis0, axis1, axis2, axis3 };
    bool seen[4] = {};
    for (int i = 0; i < 4; ++i) {
        GGML_ASSERT(axes[i] >= 0 && axes[i] < 4 && !seen[axes[i]]);
        seen[axes[i]] = true;
    }
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    ggml_format_name(r, "%s (permuted)", a->name);
    for (int i = 0; i < 4; ++i) {
        r->ne[axes[i]] = a->ne[i];
        r->nb[axes[i]] = a->nb[i];
    }
    r->op = GGML_OP_PERMUTE;
    r->src[0] = a;
    ggml_set_op_params(r, axes, sizeof(axes));
    return r;
}

ggml_tensor * ggml_transpose(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    ggml_format_name(r, "%s (transposed)", a->name);
    r->ne[0] = a->ne[1];
    r->ne[1] = a->ne[0];
    r->nb[0] = a->nb[1];
    r->nb[1] = a->nb[0];
    r->op = GGML_OP_TRANSPOSE;
    r->src[0] = a;
    return r;
}

// ---------------------------------------------------------------------------------------------
// Graphs

static size_t hash_ptr(const void * p, size_t n) { return ((uintptr_t) p >> 4) % n; }

// true if inserted, false if already present
static bool hash_insert(ggml_cgraph * g, ggml_tensor * t) {
    size_t i = hash_ptr(t, g->hash_size);
    for (size_t k = 0; k < g->hash_size; ++k) {
        ggml_tensor *& slot = g->hash_keys[i];
        if (slot == t) return false;
        if (!slot) {
            slot = t;
            return true;
        }
        i = (i + 1) % g->hash_size;
    }
    GGML_ABORT("graph hash set full");
}

ggml_cgraph * ggml_new_graph_custom(ggml_context * ctx, size_t size, bool grads) {
    (void) grads;
    const size_t hash = 2 * size + 1;
    const size_t bytes = sizeof(ggml_cgraph) + (2 * size + hash) * sizeof(ggml_tensor *);
    auto * g = (ggml_cgraph *) ctx_alloc(ctx, bytes, OBJ_GRAPH);
    auto ** ptrs = (ggml_tensor **) (g + 1);
    g->size = (int) size;
    g->n_nodes = 0;
    g->n_leafs = 0;
    g->nodes = ptrs;
    g->leafs = ptrs + size;
    g->hash_size = hash;
    g->hash_keys = ptrs + 2 * size;
    std::memset(g->hash_keys, 0, hash * sizeof(ggml_tensor *));
    return g;
}

ggml_cgraph * ggml_new_graph(ggml_context * ctx) { return ggml_new_graph_custom(ctx, GGML_DEFAULT_GRAPH_SIZE, false); }

static void visit(ggml_cgraph * g, ggml_tensor * t) {
    // iterative DFS: sources first, then the node (post-order)
    struct frame { ggml_tensor * t; int next_src; };
    frame stack[512];
    int sp = 0;
    if (!hash_insert(g, t)) return;
    stack[sp++] = { t, 0 };
    while (sp > 0) {
        frame & f = stack[sp - 1];
        if (f.next_src < GGML_MAX_SRC) {
            ggml_tensor * s = f.t->src[f.next_src++];
            if (s && hash_insert(g, s)) {
                if (sp >= (int) (sizeof(stack) / sizeof(stack[0]))) GGML_ABORT("graph too deep");
                stack[sp++] = { s, 0 };
            }
            continue;
        }
        ggml_tensor * n = f.t;
        --sp;
        if (n->op == GGML_OP_NONE && !(n->flags & GGML_TENSOR_FLAG_PARAM)) {
            GGML_ASSERT(g->n_leafs < g->size && "graph leaf capacity exceeded");
            if (n->name[0] == '\0') ggml_format_name(n, "leaf_%d", g->n_leafs);
            g->leafs[g->n_leafs++] = n;
        } else {
            GGML_ASSERT(g->n_nodes < g->size && "graph node capacity exceeded");
            if (n->name[0] == '\0') ggml_format_name(n, "node_%d", g->n_nodes);
            g->nodes[g->n_nodes++] = n;
        }
    }
}

void ggml_build_forward_expand(ggml_cgraph * g, ggml_tensor * t) { visit(g, t); }

int ggml_graph_n_nodes(const ggml_cgraph * g) { return g->n_nodes; }
int ggml_graph_n_leafs(const ggml_cgraph * g) { return g->n_leafs; }
int ggml_graph_size(const ggml_cgraph * g) { return g->size; }

ggml_tensor * ggml_graph_node(ggml_cgraph * g, int i) {
    if (i < 0) i += g->n_nodes;
    GGML_ASSERT(i >= 0 && i < g->n_nodes);
    return g->nodes[i];
}

ggml_tensor * ggml_graph_leaf(ggml_cgraph * g, int i) {
    GGML_ASSERT(i >= 0 && i < g->n_leafs);
    return g->leafs[i];
}

ggml_tensor * ggml_graph_get_tensor(const ggml_cgraph * g, const char * name) {
    for (int i = 0; i < g->n_leafs; ++i) {
        if (std::strcmp(g->leafs[i]->name, name) == 0) return g->leafs[i];
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        if (std::strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    }
    return nullptr;
}

void ggml_graph_clear(ggml_cgraph * g) {
    g->n_nodes = 0;
    g->n_leafs = 0;
    std::memset(g->hash_keys, 0, g->hash_size * sizeof(ggml_tensor *));
}

} // extern "C"

void ggml_graph_add_node(ggml_cgraph * g, ggml_tensor * node) {
    GGML_ASSERT(g->n_nodes < g->size);
    hash_insert(g, node);
    g->nodes[g->n_nodes++] = node;
}

void ggml_graph_add_leaf(ggml_cgraph * g, ggml_tensor * leaf) {
    GGML_ASSERT(g->n_leafs < g->size);
    hash_insert(g, leaf);
    g->leafs[g->n_leafs++] = leaf;
}
