// The CPU backend: host buffers, a persistent thread pool, and graph execution.
//
// Threads stay alive between graphs. While a graph runs, every thread walks the node list; it
// takes chunks of each node from the node's shared counter and moves on as soon as none are
// left, waiting only where a node needs an earlier node's result (cpu-graph-plan.h). There is
// no barrier between ops: on a machine with more runnable threads than cores, a barrier makes
// every op wait for the slowest thread, which the OS may have descheduled for a whole time
// slice; with shared counters the running thread takes over the descheduled one's work.
// Between graphs the threads spin briefly, then sleep on an atomic wait.
#include "cpu-graph-plan.h"
#include "cpu-ops.h"
#include "cpu-traits.h"
#include "ggml-backend-impl.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void) 0)
#endif

// ---------------------------------------------------------------------------------------------
// Thread pool

struct ggml_cpu_threadpool {
    int n_threads = 1;
    std::vector<std::thread> workers;

    // the job: a graph's plan, the nodes' progress and the scratch
    std::vector<ggml_cpu_node_plan> plan;
    std::unique_ptr<ggml_cpu_node_state[]> states;
    size_t states_cap = 0;
    void * wdata = nullptr;
    size_t wsize = 0;

    std::atomic<int> job_gen{ 0 };       // bumped for every new graph (workers wait on it)
    std::atomic<int> idle_sleepers{ 0 };  // workers asleep on job_gen
    std::atomic<int> n_done{ 0 };        // workers finished with the current graph
    std::atomic<bool> stop{ false };
    std::atomic<int> node_sleepers{ 0 };  // threads asleep on some node's done counter

    // Waits spin briefly (ops take microseconds), then yield the core (on an oversubscribed
    // machine the thread being waited for may need it), then sleep.
    static constexpr int k_spin = 1 << 10;
    static constexpr int k_spin_pause = 256;

    // team ops' barrier: the last thread to arrive wakes sleepers only if there are any
    std::atomic<int> arrived{ 0 };
    std::atomic<int> phase{ 0 };
    std::atomic<int> sleepers{ 0 };

    void barrier(int nth) {
        if (nth == 1) return;
        const int p = phase.load(std::memory_order_acquire);
        if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == nth) {
            arrived.store(0, std::memory_order_relaxed);
            phase.fetch_add(1, std::memory_order_acq_rel);
            if (sleepers.load(std::memory_order_acquire) > 0) phase.notify_all();
            return;
        }
        for (int spins = 0; spins < k_spin; ++spins) {
            if (phase.load(std::memory_order_acquire) != p) return;
            if (spins < k_spin_pause) CPU_RELAX(); else std::this_thread::yield();
        }
        sleepers.fetch_add(1, std::memory_order_acq_rel);
        while (phase.load(std::memory_order_acquire) == p) phase.wait(p, std::memory_order_acquire);
        sleepers.fetch_sub(1, std::memory_order_acq_rel);
    }

    void chunk_done(ggml_cpu_node_state & st, int n = 1) {
        st.done.fetch_add(n, std::memory_order_seq_cst);
        if (node_sleepers.load(std::memory_order_seq_cst) > 0) st.done.notify_all();
    }

    // Until node k has finished all its chunks.
    void wait_node(int k) {
        ggml_cpu_node_state & st = states[k];
        const int need = plan[k].sched.n_chunks;
        int d;
        for (int spins = 0; (d = st.done.load(std::memory_order_acquire)) < need; ++spins) {
            if (spins < k_spin_pause) {
                CPU_RELAX();
            } else if (spins < k_spin) {
                std::this_thread::yield();
            } else {
                node_sleepers.fetch_add(1, std::memory_order_seq_cst);
                if (st.done.load(std::memory_order_seq_cst) == d) st.done.wait(d, std::memory_order_acquire);
                node_sleepers.fetch_sub(1, std::memory_order_seq_cst);
            }
        }
    }

    // verified: nodes at or before it are known complete by this thread
    void wait_prefix(int & verified, int upto) {
        for (; verified < upto; ) wait_node(++verified);
    }

    static void run_node(const ggml_compute_params * params, const ggml_cpu_node_plan & np) {
        if (np.fusion.kind != GGML_CPU_FUSION_NONE) {
            ggml_cpu_compute_fused(params, ggml_cpu_plan_op{ np.node, np.fusion });
        } else {
            ggml_cpu_compute_op(params, np.node);
        }
    }

    void run_graph(int ith) {
        const int nth = n_threads;
        const int n = (int) plan.size();
        int verified = -1;
        for (int j = 0; j < n; ++j) {
            const ggml_cpu_node_plan & np = plan[j];
            ggml_cpu_node_state & st = states[j];
            const int n_chunks = np.sched.n_chunks;
            // all chunks taken: whoever took them waited for this node's inputs; move on
            if (np.sched.mode != GGML_CPU_OP_TEAM && st.claimed.load(std::memory_order_acquire) >= n_chunks) continue;
            wait_prefix(verified, np.wait_upto);
            ggml_compute_params params{ ith, nth, wdata, wsize, this, &st, n_chunks };
            switch (np.sched.mode) {
                case GGML_CPU_OP_CHUNKED:
                    for (int c; (c = st.claimed.fetch_add(1, std::memory_order_acq_rel)) < n_chunks; ) {
                        params.ith = c;
                        params.nth = n_chunks;
                        run_node(&params, np);
                        chunk_done(st);
                    }
                    break;
                case GGML_CPU_OP_SELF:
                    // the first chunk is claimed here, before the op reads its node (cpu-ops.h)
                    params.chunk = st.claimed.fetch_add(1, std::memory_order_acq_rel);
                    if (params.chunk < n_chunks) run_node(&params, np);
                    break;
                case GGML_CPU_OP_TEAM:
                    run_node(&params, np);
                    chunk_done(st);
                    break;
            }
        }
        if (ith == 0) wait_prefix(verified, n - 1);   // the caller returns with every result written
    }

    // seen: the job generation when the worker started (older jobs are not its business)
    void worker_main(int ith, int seen) {
        for (;;) {
            int spins = 0;
            int g;
            while ((g = job_gen.load(std::memory_order_acquire)) == seen) {
                if (stop.load(std::memory_order_acquire)) return;
                if (++spins < k_spin_pause) {
                    CPU_RELAX();
                } else if (spins < k_spin) {
                    std::this_thread::yield();
                } else {
                    idle_sleepers.fetch_add(1, std::memory_order_acq_rel);
                    if (job_gen.load(std::memory_order_acquire) == seen && !stop.load(std::memory_order_acquire)) {
                        job_gen.wait(seen, std::memory_order_acquire);
                    }
                    idle_sleepers.fetch_sub(1, std::memory_order_acq_rel);
                }
            }
            if (stop.load(std::memory_order_acquire)) return;
            seen = g;
            run_graph(ith);
            n_done.fetch_add(1, std::memory_order_acq_rel);
        }
    }

    // Workers still walking the previous graph (all of its work is done, but a descheduled
    // worker may not have noticed yet) must leave it before its plan is replaced. Waiting here
    // rather than at the end of each graph lets the caller use the results meanwhile.
    void wait_workers() {
        for (int spins = 0; n_done.load(std::memory_order_acquire) < (int) workers.size(); ++spins) {
            if (spins < k_spin_pause) CPU_RELAX(); else std::this_thread::yield();
        }
    }

    void resize(int n) {
        if (n == n_threads && (int) workers.size() == n - 1) return;
        shutdown();
        n_threads = n;
        stop.store(false);
        const int gen = job_gen.load(std::memory_order_acquire);
        n_done.store(n - 1, std::memory_order_relaxed);
        for (int i = 1; i < n; ++i) workers.emplace_back([this, i, gen] { worker_main(i, gen); });
    }

    void shutdown() {
        wait_workers();
        stop.store(true, std::memory_order_release);
        job_gen.fetch_add(1, std::memory_order_acq_rel);
        job_gen.notify_all();
        for (auto & w : workers) w.join();
        workers.clear();
        n_done.store(0, std::memory_order_relaxed);
    }

    // Plan the graph (call after wait_workers); returns the scratch it needs.
    size_t prepare(ggml_cgraph * g) {
        size_t need = 0;
        ggml_cpu_plan_graph(g, n_threads, plan, need);
        if (states_cap < plan.size()) {
            states_cap = std::max(plan.size(), 2 * states_cap);
            states.reset(new ggml_cpu_node_state[states_cap]);
        }
        for (size_t i = 0; i < plan.size(); ++i) {
            states[i].claimed.store(0, std::memory_order_relaxed);
            states[i].done.store(0, std::memory_order_relaxed);
        }
        return need;
    }

    void compute(void * wd, size_t ws) {
        wdata = wd;
        wsize = ws;
        n_done.store(0, std::memory_order_relaxed);
        job_gen.fetch_add(1, std::memory_order_acq_rel);   // publishes the plan and the reset states
        if (idle_sleepers.load(std::memory_order_acquire) > 0) job_gen.notify_all();
        run_graph(0);
    }

    ~ggml_cpu_threadpool() { shutdown(); }
};

void ggml_cpu_barrier(const ggml_compute_params * params) { params->pool->barrier(params->nth); }
void ggml_cpu_chunks_done(const ggml_compute_params * params, int n) {
    if (n > 0) params->pool->chunk_done(*params->node, n);
}

// ---------------------------------------------------------------------------------------------
// Buffers

namespace {

// A virtual device's buffer type has the device as its context (see the end of this file).
const char * cpu_buft_name(ggml_backend_buffer_type_t buft) {
    return buft->context ? ggml_backend_dev_name((ggml_backend_dev_t) buft->context) : "CPU";
}
size_t cpu_buft_alignment(ggml_backend_buffer_type_t) { return GGML_MEM_ALIGN; }
bool cpu_buft_is_host(ggml_backend_buffer_type_t) { return true; }

void * cpu_buffer_base(ggml_backend_buffer_t b) { return b->context; }
void cpu_buffer_free(ggml_backend_buffer_t b) { std::free(b->context); }
void cpu_buffer_set(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    std::memcpy((char *) t->data + offset, data, size);
}
void cpu_buffer_get(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    std::memcpy(data, (const char *) t->data + offset, size);
}
void cpu_buffer_memset(ggml_backend_buffer_t, ggml_tensor * t, uint8_t v, size_t offset, size_t size) {
    std::memset((char *) t->data + offset, v, size);
}
void cpu_buffer_clear(ggml_backend_buffer_t b, uint8_t v) { std::memset(b->context, v, b->size); }

ggml_backend_buffer_t cpu_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    void * mem = std::aligned_alloc(GGML_MEM_ALIGN, ggml_pad(std::max<size_t>(size, 1), GGML_MEM_ALIGN));
    if (!mem) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "CPU: failed to allocate a buffer of %.2f MiB\n", size / 1048576.0);
        return nullptr;
    }
    return ggml_backend_host_buffer_init(buft, mem, size, cpu_buffer_free);
}

ggml_backend_buffer_type g_cpu_buft = {
    { cpu_buft_name, cpu_buft_alloc, cpu_buft_alignment, nullptr, nullptr, cpu_buft_is_host },
    nullptr,
};

// ---------------------------------------------------------------------------------------------
// Backend

struct cpu_backend_context {
    const char * name = "CPU";   // or a virtual device's, "CPU1"
    ggml_backend_buffer_type_t buft = &g_cpu_buft;
    int n_threads = 1;
    ggml_cpu_threadpool pool;
    std::vector<uint8_t> work;   // grows to the largest graph's need, then stays
};

const char * cpu_name(ggml_backend_t b) { return ((cpu_backend_context *) b->context)->name; }

void cpu_free(ggml_backend_t b) {
    delete (cpu_backend_context *) b->context;
    delete b;
}

ggml_backend_buffer_type_t cpu_default_buft(ggml_backend_t b) { return ((cpu_backend_context *) b->context)->buft; }

ggml_status cpu_graph_compute(ggml_backend_t b, ggml_cgraph * graph) {
    auto * ctx = (cpu_backend_context *) b->context;
    const int nth = std::max(1, ctx->n_threads);
    const int n = ggml_graph_n_nodes(graph);
    for (int i = 0; i < n; ++i) {
        ggml_tensor * node = ggml_graph_node(graph, i);
        if (ggml_is_view_op(node->op) || node->op == GGML_OP_NONE) continue;
        if (!ggml_cpu_supports_op(node)) {
            ggml_log(GGML_LOG_LEVEL_ERROR, "CPU backend: unsupported op %s on %s (%s)\n", ggml_op_desc(node),
                     node->name, ggml_type_name(node->src[0] ? node->src[0]->type : node->type));
            return GGML_STATUS_FAILED;
        }
    }
    ctx->pool.wait_workers();
    ctx->pool.resize(nth);
    size_t need = ctx->pool.prepare(graph);
    if (need > 0) need += 64 * nth + 4096;   // room for per-thread alignment
    if (ctx->work.size() < need) ctx->work.resize(need);
    ctx->pool.compute(ctx->work.empty() ? nullptr : ctx->work.data(), ctx->work.size());
    return GGML_STATUS_SUCCESS;
}

bool cpu_supports_op(ggml_backend_t, const ggml_tensor * op) { return ggml_cpu_supports_op(op); }
bool cpu_supports_buft(ggml_backend_t, ggml_backend_buffer_type_t buft) { return ggml_backend_buft_is_host(buft); }

// The all-reduce over CPU devices (virtual ones: KILN_VIRTUAL_CPU_DEVICES): the sum formed in f32,
// parts added in rank order (the order the gather form's nodes add them in), then written to every
// part in its type: an f16 or bf16 part carries the sum rounded as it would arrive over a link.
// The host does it between the devices' graphs (they compute synchronously), a block of rows at a
// time so that the f32 sum stays in cache.
bool cpu_all_reduce(ggml_backend_t * backends, ggml_tensor ** tensors, int n) {
    for (int i = 0; i < n; ++i) {
        if (!ggml_backend_is_cpu(backends[i])) return false;
    }
    if (!tensors) return true;
    const ggml_tensor * t0 = tensors[0];
    for (int i = 0; i < n; ++i) {
        const ggml_tensor * t = tensors[i];
        const ggml_tensor * r = t && t->view_src ? t->view_src : t;
        if (!t || !t->data || t->type != t0->type || !ggml_are_same_shape(t, t0) || !ggml_is_contiguous(t) ||
            !r->buffer || !ggml_backend_buffer_is_host(r->buffer) ||
            (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16)) {
            ggml_log(GGML_LOG_LEVEL_ERROR, "all-reduce: part %d on %s is not a contiguous f32/f16/bf16 tensor of part 0's shape "
                     "in host memory\n", i, ggml_backend_name(backends[i]));
            return false;
        }
    }
    const int64_t n_el = ggml_nelements(t0), block = 4096;
    const size_t ts = ggml_type_size(t0->type);
    std::vector<float> sum((size_t) std::min(n_el, block)), row(sum.size());
    for (int64_t i0 = 0; i0 < n_el; i0 += block) {
        const int64_t m = std::min(block, n_el - i0);
        ggml_cpu_row_to_f32(t0->type, (const char *) t0->data + i0 * ts, sum.data(), m);
        for (int p = 1; p < n; ++p) {
            ggml_cpu_row_to_f32(t0->type, (const char *) tensors[p]->data + i0 * ts, row.data(), m);
            for (int64_t j = 0; j < m; ++j) sum[(size_t) j] += row[(size_t) j];
        }
        for (int p = 0; p < n; ++p) ggml_cpu_row_from_f32(t0->type, sum.data(), (char *) tensors[p]->data + i0 * ts, m);
    }
    return true;
}

} // namespace

ggml_backend_buffer_t ggml_backend_host_buffer_init(ggml_backend_buffer_type_t buft, void * ptr, size_t size,
                                                    void (*free_buffer)(ggml_backend_buffer_t buffer)) {
    const ggml_backend_buffer_i iface = {
        free_buffer, cpu_buffer_base, nullptr, cpu_buffer_memset, cpu_buffer_set, cpu_buffer_get, cpu_buffer_clear,
    };
    return ggml_backend_buffer_init(buft, iface, ptr, size);
}

extern "C" {

ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void) { return &g_cpu_buft; }

ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size) {
    GGML_ASSERT(((uintptr_t) ptr % 32) == 0 && "buffer pointer must be aligned");
    return ggml_backend_host_buffer_init(&g_cpu_buft, ptr, size, nullptr);   // memory the caller owns (mmap)
}

ggml_backend_t ggml_backend_cpu_init(void) {
    auto * ctx = new cpu_backend_context;
    auto * b = new ggml_backend{
        { cpu_name, cpu_free, cpu_default_buft, cpu_graph_compute, cpu_supports_op, cpu_supports_buft, nullptr, nullptr, nullptr,
          cpu_all_reduce },
        ctx,
    };
    return b;
}


bool ggml_backend_is_cpu(ggml_backend_t backend) { return backend && backend->iface.get_name == cpu_name; }

void ggml_backend_cpu_set_n_threads(ggml_backend_t backend, int n_threads) {
    GGML_ASSERT(ggml_backend_is_cpu(backend));
    ((cpu_backend_context *) backend->context)->n_threads = std::max(1, n_threads);
}

ggml_status ggml_graph_compute_cpu(ggml_cgraph * graph, int n_threads) {
    ggml_backend_t b = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(b, n_threads);
    const ggml_status st = cpu_graph_compute(b, graph);
    ggml_backend_free(b);
    return st;
}

} // extern "C"

// ---------------------------------------------------------------------------------------------
// Virtual CPU devices (KILN_VIRTUAL_CPU_DEVICES=N): the host CPU presented as N devices, so that
// placement and splitting across devices run, and are tested, on any machine. Each has its own
// buffer type (its weights, KV cache and compute memory are apart from the others', and the
// scheduler copies activations between them as it would between GPUs) and its own backend
// with its own thread pool; the context gives each a share of the threads.

namespace {

struct cpu_virtual_device {
    char name[16];
    char description[64];
    int count;
    ggml_backend_buffer_type buft;
    ggml_backend_device dev;
};

const char * cpu_virtual_name(ggml_backend_dev_t d) { return ((cpu_virtual_device *) d->context)->name; }
const char * cpu_virtual_description(ggml_backend_dev_t d) { return ((cpu_virtual_device *) d->context)->description; }

// an equal share of the host's memory each
void cpu_virtual_memory(ggml_backend_dev_t d, size_t * free, size_t * total) {
    const int n = ((cpu_virtual_device *) d->context)->count;
    const long page = sysconf(_SC_PAGESIZE);
    *free = (size_t) sysconf(_SC_AVPHYS_PAGES) * (size_t) page / (size_t) n;
    *total = (size_t) sysconf(_SC_PHYS_PAGES) * (size_t) page / (size_t) n;
}

ggml_backend_buffer_type_t cpu_virtual_buft(ggml_backend_dev_t d) { return &((cpu_virtual_device *) d->context)->buft; }

ggml_backend_t cpu_virtual_init(ggml_backend_dev_t d) {
    ggml_backend_t b = ggml_backend_cpu_init();
    auto * ctx = (cpu_backend_context *) b->context;
    ctx->name = cpu_virtual_name(d);
    ctx->buft = cpu_virtual_buft(d);
    return b;
}

} // namespace

void ggml_backend_cpu_register_virtual_devices(void) {
    const char * env = std::getenv("KILN_VIRTUAL_CPU_DEVICES");
    if (!env || !*env) return;
    char * end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > 64) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "KILN_VIRTUAL_CPU_DEVICES=%s: expected a device count from 1 to 64; no virtual "
                 "devices\n", env);
        return;
    }
    static std::vector<cpu_virtual_device> devices((size_t) n);   // registered for the process's lifetime
    for (long i = 0; i < n; ++i) {
        cpu_virtual_device & v = devices[(size_t) i];
        std::snprintf(v.name, sizeof(v.name), "CPU%ld", i);
        std::snprintf(v.description, sizeof(v.description), "virtual CPU device %ld of %ld", i + 1, n);
        v.count = (int) n;
        v.buft = { { cpu_buft_name, cpu_buft_alloc, cpu_buft_alignment, nullptr, nullptr, cpu_buft_is_host }, &v.dev };
        v.dev = { { cpu_virtual_name, cpu_virtual_description, cpu_virtual_memory, cpu_virtual_buft, cpu_virtual_init, nullptr }, &v };
        ggml_backend_device_register(&v.dev);
    }
}
