// Asynchronous copies and events on the backends' streams: the pieces a scheduler uses to copy
// the next split's inputs (or experts kept in RAM) while the GPU computes, and to order work
// between devices without waiting on the host.
#include "cuda-common.h"

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
