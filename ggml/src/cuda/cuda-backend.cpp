// The CUDA backend: one per device, each with its own stream, cuBLAS handle and scratch pool.
// graph_compute queues every node's kernels on the stream and waits for it at the end;
// graph_enqueue (the scheduler's) does not wait, and copy_async (cuda-async.cpp) copies a split's
// inputs on a second stream meanwhile.
//
// What the scheduler needs from here (ggml-backend.cpp; the multi-device scheduler is another
// engineer's work): the backend, in priority order before the CPU; ggml_backend_cuda_buffer_type
// for the weights and KV cache it places on the device (WEIGHTS usage, so ops follow them);
// supports_op, which already refuses every node the kernels would not take; and for copies
// between devices, copy_async (peer copies between GPUs, 2D copies of strided views; the
// synchronous ggml_backend_tensor_get/set where it declines). Weights that stay in RAM
// for the CPU should live in ggml_backend_cuda_host_buffer_type so that copies of them to the
// GPU (experts for prompt batches) run at full bus speed.
#include "cuda-common.h"
#include "quants/quants-blocks.h"

#include <atomic>
#include <cstdio>

namespace {

const char * cuda_backend_name(ggml_backend_t b) { return ((cuda_context *) b->context)->name; }

void cuda_backend_free(ggml_backend_t b) {
    auto * ctx = (cuda_context *) b->context;
    cudaSetDevice(ctx->ordinal);
    if (ctx->stream) cudaStreamSynchronize(ctx->stream);
    cuda_async_free(*ctx);
    delete ctx->pool;
    if (ctx->cublas) cublas_get()->destroy(ctx->cublas);
    if (ctx->stream) cudaStreamDestroy(ctx->stream);
    delete ctx;
    delete b;
}

ggml_backend_buffer_type_t cuda_backend_buft(ggml_backend_t b) {
    return ggml_backend_cuda_buffer_type(((cuda_context *) b->context)->device);
}

// The launcher family of an op (nullptr: not run on the GPU).
using launcher_fn = bool (*)(cuda_context &, ggml_tensor *);
struct op_family {
    bool (*supports)(const ggml_tensor *);
    launcher_fn launch;
};

const op_family k_families[] = {
    { cuda_supports_elementwise, cuda_op_elementwise },
    { cuda_supports_norm, cuda_op_norm },
    { cuda_supports_rope, cuda_op_rope },
    { cuda_supports_copy, cuda_op_copy },
    { cuda_supports_sort, cuda_op_sort },
    { cuda_supports_matmul, cuda_op_matmul },
    { cuda_supports_attention, cuda_op_attention },
    { cuda_supports_recurrent, cuda_op_recurrent },
};

const op_family * family_of(const ggml_tensor * op) {
    for (const op_family & f : k_families) {
        if (f.supports(op)) return &f;
    }
    return nullptr;
}

// Queues the graph's kernels on the compute stream, after the input copies queued before it.
ggml_status cuda_graph_enqueue(ggml_backend_t b, ggml_cgraph * graph) {
    auto * ctx = (cuda_context *) b->context;
    if (!CUDA_OK(cudaSetDevice(ctx->ordinal))) return GGML_STATUS_FAILED;
    if (ctx->copies_pending) {
        if (!CUDA_OK(cudaStreamWaitEvent(ctx->stream, ctx->copy_done, 0))) return GGML_STATUS_FAILED;
        ctx->copies_pending = false;
    }
    const int n = ggml_graph_n_nodes(graph);
    for (int i = 0; i < n; ++i) {
        ggml_tensor * node = ggml_graph_node(graph, i);
        if (ggml_is_view_op(node->op) || node->op == GGML_OP_NONE || ggml_nelements(node) == 0) continue;
        const op_family * f = family_of(node);
        if (!f) {
            ggml_log(GGML_LOG_LEVEL_ERROR, "%s: unsupported op %s on %s (%s)\n", ctx->name, ggml_op_desc(node), node->name,
                     ggml_type_name(node->src[0] ? node->src[0]->type : node->type));
            return GGML_STATUS_FAILED;
        }
        if (!f->launch(*ctx, node) || !CUDA_OK(cudaGetLastError())) {
            ggml_log(GGML_LOG_LEVEL_ERROR, "%s: %s (%s) failed\n", ctx->name, node->name, ggml_op_desc(node));
            cudaStreamSynchronize(ctx->stream);
            return GGML_STATUS_FAILED;
        }
    }
    if (!CUDA_OK(cudaEventRecord(ctx->graph_done[ctx->n_graphs % cuda_context::k_graph_events], ctx->stream))) {
        return GGML_STATUS_FAILED;
    }
    ++ctx->n_graphs;
    return GGML_STATUS_SUCCESS;
}

ggml_status cuda_graph_compute(ggml_backend_t b, ggml_cgraph * graph) {
    const ggml_status st = cuda_graph_enqueue(b, graph);
    if (st != GGML_STATUS_SUCCESS) return st;
    if (!CUDA_OK(cudaStreamSynchronize(((cuda_context *) b->context)->stream))) return GGML_STATUS_FAILED;
    return GGML_STATUS_SUCCESS;
}

// A weight the kernels cannot decode sends every op that reads it to the CPU, which copies it out
// of device memory for each graph run: said once per type, so that a user who wonders why a
// model runs slowly with -ngl learns why. Every plain quantized type Kiln reads
// (KILN_BLOCK_TYPES) and every row-interleaved layout (KILN_INTERLEAVED_TYPES) is decodable; what
// is left to say is a type neither list holds (q8_1 / q8_K, activation types no model file
// has), or an interleaved weight cut inside its groups of R rows (a view the kernels cannot
// place: cuda_weight_rows_decodable).
void note_undecodable_weight(const ggml_tensor * op) {
    static std::atomic<bool> said[GGML_TYPE_COUNT];
    const ggml_tensor * w = op->src[0];
    if (!w || !ggml_is_quantized(w->type)) return;
    const bool interleaved = ggml_get_type_traits(w->type)->nrows_interleaved > 1;
    if (cuda_type_is_decodable(w->type) && (!interleaved || cuda_weight_rows_decodable(w))) return;
    switch (op->op) {
        case GGML_OP_MUL_MAT: case GGML_OP_MUL_MAT_ID: case GGML_OP_MOE_FUSED_UP_GATE: case GGML_OP_GET_ROWS: break;
        default: return;
    }
    if (w->type < 0 || w->type >= GGML_TYPE_COUNT || said[w->type].exchange(true)) return;
    ggml_log(GGML_LOG_LEVEL_WARN,
             "CUDA: %s weights (%s, ...) are not decoded on the GPU%s: the ops that read them run on the CPU\n",
             ggml_type_name(w->type), w->name,
             interleaved ? " (a view that cuts the row-interleaved layout's groups of rows)" : "");
}

// Likewise for a KV cache type the attention kernel and the cache writes do not take (they read
// and write f32, f16, bf16 and the types of kiln_kv_quant_type: q8_0, q4_0, q4_1, q5_0, q5_1,
// q6_0, iq4_nl, q8_KV): the attention of every layer then runs on the CPU, reading the cache out
// of device memory.
void note_refused_cache_type(const ggml_tensor * op) {
    static std::atomic<bool> said[GGML_TYPE_COUNT];
    const ggml_tensor * cache = op->op == GGML_OP_FLASH_ATTN_EXT ? op->src[1] : op->op == GGML_OP_SET_ROWS ? op : nullptr;
    if (!cache || !ggml_is_quantized(cache->type) || kiln_kv_quant_type(cache->type)) return;
    if (cache->type < 0 || cache->type >= GGML_TYPE_COUNT || said[cache->type].exchange(true)) return;
    ggml_log(GGML_LOG_LEVEL_WARN,
             "CUDA: a %s KV cache is not read or written on the GPU: attention runs on the CPU (-ctk/-ctv f16, bf16, "
             "q8_0, q4_0, q4_1, q5_0, q5_1, q6_0, iq4_nl or q8_KV keep it on the GPU)\n",
             ggml_type_name(cache->type));
}

bool cuda_backend_supports_op(ggml_backend_t, const ggml_tensor * op) {
    if (ggml_cuda_supports_node(op)) return true;
    note_undecodable_weight(op);
    note_refused_cache_type(op);
    return false;
}

bool cuda_backend_supports_buft(ggml_backend_t b, ggml_backend_buffer_type_t buft) {
    return buft == cuda_backend_buft(b);
}

void cuda_backend_synchronize(ggml_backend_t b) {
    auto * ctx = (cuda_context *) b->context;
    cudaSetDevice(ctx->ordinal);
    CUDA_OK(cudaStreamSynchronize(ctx->stream));
    if (ctx->copy_stream) CUDA_OK(cudaStreamSynchronize(ctx->copy_stream));
}

} // namespace

cuda_view cuda_view_of(const ggml_tensor * t) {
    cuda_view v;
    v.data = (char *) t->data;
    v.type = (int) t->type;
    for (int i = 0; i < 4; ++i) {
        v.ne[i] = t->ne[i];
        v.nb[i] = (int64_t) t->nb[i];
    }
    return v;
}

extern "C" {

bool ggml_cuda_supports_node(const ggml_tensor * op) {
    return ggml_is_view_op(op->op) || op->op == GGML_OP_NONE || family_of(op) != nullptr;
}

ggml_backend_t ggml_backend_cuda_init(int device) {
    if (device < 0 || device >= ggml_backend_cuda_get_device_count()) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "CUDA%d: no such device (%d usable)\n", device, ggml_backend_cuda_get_device_count());
        return nullptr;
    }
    auto * ctx = new cuda_context;
    ctx->device = device;
    ctx->ordinal = cuda_device_ordinal(device);
    std::snprintf(ctx->name, sizeof(ctx->name), "CUDA%d", device);
    const cublas_api * blas = cublas_get();
    bool ok = CUDA_OK(cudaSetDevice(ctx->ordinal)) && CUDA_OK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    if (ok && blas) ok = CUBLAS_OK(blas->create(&ctx->cublas)) && CUBLAS_OK(blas->set_stream(ctx->cublas, ctx->stream));
    if (ok) ok = cuda_async_init(*ctx);
    if (!ok) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "%s: cannot start the backend\n", ctx->name);
        cuda_async_free(*ctx);
        if (ctx->cublas) blas->destroy(ctx->cublas);
        if (ctx->stream) cudaStreamDestroy(ctx->stream);
        delete ctx;
        return nullptr;
    }
    ctx->pool = new cuda_pool(ctx->name, ctx->ordinal);
    return new ggml_backend{
        { cuda_backend_name, cuda_backend_free, cuda_backend_buft, cuda_graph_compute, cuda_backend_supports_op,
          cuda_backend_supports_buft, cuda_backend_synchronize, cuda_graph_enqueue, cuda_copy_async, cuda_all_reduce },
        ctx,
    };
}

bool ggml_backend_is_cuda(ggml_backend_t backend) { return backend && backend->iface.get_name == cuda_backend_name; }

} // extern "C"
