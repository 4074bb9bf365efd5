// Asynchronous copies and events on the backends' streams: the pieces a scheduler uses to copy
// the next split's inputs (or experts kept in RAM) while the GPU computes, and to order work
// between devices without waiting on the host.
#include "cuda-common.h"

#include <mutex>
#include <utility>

struct ggml_cuda_event {
    cudaEvent_t event;
    int ordinal;
};

namespace {

cuda_context * cuda_ctx(ggml_backend_t backend, const char * what) {
    if (!ggml_backend_is_cuda(backend)) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "%s: not a CUDA backend\n", what);
        return nullptr;
    }
    return (cuda_context *) backend->context;
}

// The tensor's bytes [offset, offset + size) lie in this backend's device memory.
bool on_this_device(ggml_backend_t backend, const ggml_tensor * t, size_t offset, size_t size, const char * what) {
    const ggml_tensor * r = t->view_src ? t->view_src : t;
    if (!r->buffer || ggml_backend_buffer_get_type(r->buffer) != ggml_backend_get_default_buffer_type(backend)) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "%s: %s is not in %s's memory\n", what, t->name, ggml_backend_name(backend));
        return false;
    }
    if (offset + size > ggml_nbytes(t)) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "%s: %zu bytes at %zu are outside %s (%zu bytes)\n", what, size, offset, t->name,
                 ggml_nbytes(t));
        return false;
    }
    return true;
}

} // namespace

extern "C" {

bool ggml_backend_cuda_tensor_set_async(ggml_backend_t backend, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    cuda_context * ctx = cuda_ctx(backend, "tensor_set_async");
    if (!ctx || !on_this_device(backend, t, offset, size, "tensor_set_async")) return false;
    return CUDA_OK(cudaSetDevice(ctx->ordinal)) &&
           CUDA_OK(cudaMemcpyAsync((char *) t->data + offset, data, size, cudaMemcpyHostToDevice, ctx->stream));
}

bool ggml_backend_cuda_tensor_get_async(ggml_backend_t backend, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    cuda_context * ctx = cuda_ctx(backend, "tensor_get_async");
    if (!ctx || !on_this_device(backend, t, offset, size, "tensor_get_async")) return false;
    return CUDA_OK(cudaSetDevice(ctx->ordinal)) &&
           CUDA_OK(cudaMemcpyAsync(data, (const char *) t->data + offset, size, cudaMemcpyDeviceToHost, ctx->stream));
}

bool ggml_backend_cuda_tensor_copy_async(ggml_backend_t backend_src, ggml_backend_t backend_dst, const ggml_tensor * src,
                                         ggml_tensor * dst) {
    cuda_context * s = cuda_ctx(backend_src, "tensor_copy_async");
    cuda_context * d = cuda_ctx(backend_dst, "tensor_copy_async");
    const size_t n = ggml_nbytes(src);
    if (!s || !d || n != ggml_nbytes(dst)) return false;
    if (!on_this_device(backend_src, src, 0, n, "tensor_copy_async") || !on_this_device(backend_dst, dst, 0, n, "tensor_copy_async")) {
        return false;
    }
    if (s->ordinal != d->ordinal) cuda_enable_peer_access(s->ordinal, d->ordinal);
    if (!CUDA_OK(cudaSetDevice(s->ordinal))) return false;
    const bool copied = s->ordinal == d->ordinal
                            ? CUDA_OK(cudaMemcpyAsync(dst->data, src->data, n, cudaMemcpyDeviceToDevice, s->stream))
                            : CUDA_OK(cudaMemcpyPeerAsync(dst->data, d->ordinal, src->data, s->ordinal, n, s->stream));
    if (!copied) return false;
    if (s == d) return true;
    // the destination's stream must not run ahead of the copy
    ggml_cuda_event_t ev = ggml_backend_cuda_event_new(backend_src);
    if (!ev) return false;
    ggml_backend_cuda_event_record(ev, backend_src);
    ggml_backend_cuda_event_wait(backend_dst, ev);
    ggml_backend_cuda_event_free(ev);   // destroying a recorded event is safe: the wait is already queued
    return true;
}

ggml_cuda_event_t ggml_backend_cuda_event_new(ggml_backend_t backend) {
    cuda_context * ctx = cuda_ctx(backend, "event_new");
    if (!ctx || !CUDA_OK(cudaSetDevice(ctx->ordinal))) return nullptr;
    cudaEvent_t e = nullptr;
    if (!CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming))) return nullptr;
    return new ggml_cuda_event{ e, ctx->ordinal };
}

void ggml_backend_cuda_event_free(ggml_cuda_event_t event) {
    if (!event) return;
    cudaSetDevice(event->ordinal);
    CUDA_OK(cudaEventDestroy(event->event));
    delete event;
}

void ggml_backend_cuda_event_record(ggml_cuda_event_t event, ggml_backend_t backend) {
    cuda_context * ctx = cuda_ctx(backend, "event_record");
    if (!ctx || !event) return;
    cudaSetDevice(ctx->ordinal);
    CUDA_OK(cudaEventRecord(event->event, ctx->stream));
}

void ggml_backend_cuda_event_wait(ggml_backend_t backend, ggml_cuda_event_t event) {
    cuda_context * ctx = cuda_ctx(backend, "event_wait");
    if (!ctx || !event) return;
    cudaSetDevice(ctx->ordinal);
    CUDA_OK(cudaStreamWaitEvent(ctx->stream, event->event, 0));
}

void ggml_backend_cuda_event_synchronize(ggml_cuda_event_t event) {
    if (!event) return;
    CUDA_OK(cudaEventSynchronize(event->event));
}

} // extern "C"

// ---------------------------------------------------------------------------------------------
// The scheduler's copies (ggml-backend-impl.h copy_async): a split's inputs copied on the
// destination's copy stream while its compute stream still runs the previous split.

bool cuda_async_init(cuda_context & ctx) {
    bool ok = CUDA_OK(cudaSetDevice(ctx.ordinal)) && CUDA_OK(cudaStreamCreateWithFlags(&ctx.copy_stream, cudaStreamNonBlocking)) &&
              CUDA_OK(cudaEventCreateWithFlags(&ctx.copy_done, cudaEventDisableTiming)) &&
              CUDA_OK(cudaEventCreateWithFlags(&ctx.compute_mark, cudaEventDisableTiming));
    for (cudaEvent_t & e : ctx.graph_done) ok = ok && CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return ok;
}

void cuda_async_free(cuda_context & ctx) {
    cudaSetDevice(ctx.ordinal);
    if (ctx.copy_stream) cudaStreamSynchronize(ctx.copy_stream);
    if (ctx.copy_done) cudaEventDestroy(ctx.copy_done);
    if (ctx.compute_mark) cudaEventDestroy(ctx.compute_mark);
    for (cudaEvent_t & e : ctx.graph_done) {
        if (e) cudaEventDestroy(e);
        e = nullptr;
    }
    if (ctx.copy_stream) cudaStreamDestroy(ctx.copy_stream);
    ctx.copy_stream = nullptr;
    ctx.copy_done = ctx.compute_mark = nullptr;
}

bool cuda_enable_peer_access(int a, int b) {
    if (a == b) return true;
    if (a < 0 || b < 0 || a >= GGML_CUDA_MAX_DEVICES || b >= GGML_CUDA_MAX_DEVICES) return false;
    static std::mutex mutex;
    static signed char state[GGML_CUDA_MAX_DEVICES][GGML_CUDA_MAX_DEVICES];   // 0 unknown, 1 on, -1 not possible
    std::lock_guard<std::mutex> lock(mutex);
    int prev = 0;
    cudaGetDevice(&prev);
    // each direction on its own: a copy between the two goes direct when either device reaches the other
    for (const auto & [from, to] : { std::pair<int, int>{ a, b }, std::pair<int, int>{ b, a } }) {
        if (state[from][to] != 0) continue;
        int can = 0;
        state[from][to] = -1;
        if (!CUDA_OK(cudaDeviceCanAccessPeer(&can, from, to)) || !can || !CUDA_OK(cudaSetDevice(from))) continue;
        const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
        if (err == cudaSuccess || err == cudaErrorPeerAccessAlreadyEnabled) {
            cudaGetLastError();   // the already-enabled error is not a failure
            state[from][to] = 1;
        } else {
            CUDA_OK(err);
        }
    }
    cudaSetDevice(prev);
    return state[a][b] == 1 || state[b][a] == 1;
}

namespace {

// Where a tensor's memory is: a device of the runtime (its ordinal), or the host (-1); false
// when neither (a buffer of another kind, or none).
bool cuda_place(const ggml_tensor * t, int & ordinal) {
    const ggml_tensor * r = t->view_src ? t->view_src : t;
    if (!r->buffer || !t->data) return false;
    ggml_backend_buffer_type_t buft = ggml_backend_buffer_get_type(r->buffer);
    if (ggml_backend_buft_is_host(buft)) {
        ordinal = -1;
        return true;
    }
    for (int i = 0; i < ggml_backend_cuda_get_device_count(); ++i) {
        if (buft == ggml_backend_cuda_buffer_type(i)) {
            ordinal = cuda_device_ordinal(i);
            return true;
        }
    }
    return false;
}

// stream waits for the work queued on ctx's compute stream so far
bool wait_for_compute(cudaStream_t stream, cuda_context & ctx) {
    return CUDA_OK(cudaSetDevice(ctx.ordinal)) && CUDA_OK(cudaEventRecord(ctx.compute_mark, ctx.stream)) &&
           CUDA_OK(cudaStreamWaitEvent(stream, ctx.compute_mark, 0));
}

// stream waits for ctx's graphs but the last `back` queued (all of its compute when there is no
// such graph)
bool wait_for_graph(cudaStream_t stream, cuda_context & ctx, int back) {
    const int64_t g = ctx.n_graphs - 1 - back;
    if (g < 0) return wait_for_compute(stream, ctx);
    return CUDA_OK(cudaSetDevice(ctx.ordinal)) && CUDA_OK(cudaStreamWaitEvent(stream, ctx.graph_done[g % cuda_context::k_graph_events], 0));
}

} // namespace

bool cuda_copy_async(ggml_backend_t backend, ggml_backend_t src_backend, const ggml_tensor * src, ggml_tensor * dst,
                     const ggml_copy_plan::block * blocks, size_t n_blocks, int wait_back) {
    cuda_context * ctx = cuda_ctx(backend, "copy_async");
    cuda_context * sctx = src_backend ? cuda_ctx(src_backend, "copy_async") : nullptr;
    if (!ctx || (src_backend && !sctx) || !blocks || n_blocks == 0 || !ggml_is_contiguous(dst)) return false;
    int so = 0, d_o = 0;
    if (!cuda_place(src, so) || !cuda_place(dst, d_o)) return false;
    // this device on one side at least, host memory at most on one
    if (d_o != ctx->ordinal && so != ctx->ordinal) return false;
    if (so < 0 && d_o < 0) return false;
    // the blocks must lie inside src and fill dst exactly
    size_t total = 0;
    const size_t src_bytes = ggml_nbytes(src);
    for (size_t i = 0; i < n_blocks; ++i) {
        const ggml_copy_plan::block & b = blocks[i];
        if (b.width == 0 || b.height == 0 || (b.height > 1 && b.pitch < b.width)) return false;
        if (b.offset + (b.height - 1) * b.pitch + b.width > src_bytes) return false;
        total += b.width * b.height;
    }
    if (total != ggml_nbytes(dst)) return false;
    if (so >= 0 && d_o >= 0 && so != d_o) cuda_enable_peer_access(so, d_o);

    // order: after the producer's work (src_backend's compute) and, when asked, after the graph
    // of this backend whose memory the planner gave to dst too
    if (sctx && !wait_for_compute(ctx->copy_stream, *sctx)) return false;
    if (wait_back >= 0 && sctx != ctx && !wait_for_graph(ctx->copy_stream, *ctx, wait_back)) return false;
    if (!CUDA_OK(cudaSetDevice(ctx->ordinal))) return false;

    const cudaMemcpyKind kind = so < 0 ? cudaMemcpyHostToDevice : d_o < 0 ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
    char * out = (char *) dst->data;
    for (size_t i = 0; i < n_blocks; ++i) {
        const ggml_copy_plan::block & b = blocks[i];
        const char * in = (const char *) src->data + b.offset;
        const size_t pitch = b.height > 1 ? b.pitch : b.width;
        bool ok;
        if (kind == cudaMemcpyDeviceToDevice && so != d_o) {
            // between GPUs: the peer calls (direct where peer access is on, else staged by the driver)
            if (b.height == 1) {
                ok = CUDA_OK(cudaMemcpyPeerAsync(out, d_o, in, so, b.width, ctx->copy_stream));
            } else {
                cudaMemcpy3DPeerParms p = {};
                p.srcPtr = make_cudaPitchedPtr((void *) in, pitch, b.width, b.height);
                p.srcDevice = so;
                p.dstPtr = make_cudaPitchedPtr(out, b.width, b.width, b.height);
                p.dstDevice = d_o;
                p.extent = make_cudaExtent(b.width, b.height, 1);
                ok = CUDA_OK(cudaMemcpy3DPeerAsync(&p, ctx->copy_stream));
            }
        } else {
            // host memory that is not page-locked is staged by the driver: correct, without the overlap
            ok = CUDA_OK(cudaMemcpy2DAsync(out, b.width, in, pitch, b.width, b.height, kind, ctx->copy_stream));
        }
        if (!ok) {
            // part may be queued: let it finish so that the caller's synchronous copy is not raced
            cudaStreamSynchronize(ctx->copy_stream);
            return false;
        }
        out += b.width * b.height;
    }
    if (!CUDA_OK(cudaEventRecord(ctx->copy_done, ctx->copy_stream))) {
        cudaStreamSynchronize(ctx->copy_stream);
        return false;
    }
    ctx->copies_pending = true;
    // the source's backend must not overwrite what the copy reads before it is done
    if (sctx && sctx != ctx) {
        cudaSetDevice(sctx->ordinal);
        if (!CUDA_OK(cudaStreamWaitEvent(sctx->stream, ctx->copy_done, 0)) ||
            !CUDA_OK(cudaStreamWaitEvent(sctx->copy_stream, ctx->copy_done, 0))) {
            cudaStreamSynchronize(ctx->copy_stream);
            return false;
        }
    }
    return true;
}
