// Buffers, backends and the device registry (the scheduler is in ggml-backend-sched.cpp).
#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "ggml-ptr-map.h"

#include <algorithm>
#include <cctype>
#include <mutex>
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

// one collective for all: every backend must offer the same one (a mixed CPU + CUDA list has none)
static bool all_reduce_common(ggml_backend_t * backends, int n) {
    if (!backends || n < 2 || !backends[0] || !backends[0]->iface.all_reduce) return false;
    for (int i = 1; i < n; ++i) {
        if (!backends[i] || backends[i]->iface.all_reduce != backends[0]->iface.all_reduce) return false;
    }
    return true;
}

bool ggml_backend_all_reduce_supported(ggml_backend_t * backends, int n) {
    return all_reduce_common(backends, n) && backends[0]->iface.all_reduce(backends, nullptr, n);
}

bool ggml_backend_all_reduce(ggml_backend_t * backends, ggml_tensor ** tensors, int n) {
    if (!tensors || !all_reduce_common(backends, n)) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "all-reduce: %d backends without one collective they all offer\n", n);
        return false;
    }
    return backends[0]->iface.all_reduce(backends, tensors, n);
}

ggml_backend_buffer_t ggml_backend_alloc_tensors_from_buft(ggml_backend_buffer_type_t buft, ggml_tensor * const * tensors,
                                                           size_t n) {
    const size_t align = ggml_backend_buft_get_alignment(buft);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += ggml_pad(ggml_backend_buft_get_alloc_size(buft, tensors[i]), align);
    if (total == 0) return nullptr;
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, total);
    if (!buf) return nullptr;
    char * base = (char *) ggml_backend_buffer_get_base(buf);
    size_t offs = 0;
    for (size_t i = 0; i < n; ++i) {
        ggml_backend_tensor_alloc(buf, tensors[i], base + offs);
        offs += ggml_pad(ggml_backend_buft_get_alloc_size(buft, tensors[i]), align);
    }
    return buf;
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    std::vector<ggml_tensor *> todo;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data == nullptr && t->view_src == nullptr) todo.push_back(t);
    }
    ggml_backend_buffer_t buf = ggml_backend_alloc_tensors_from_buft(buft, todo.data(), todo.size());
    if (!buf) return nullptr;
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
// Device registry

namespace {

std::vector<ggml_backend_dev_t> & device_list() {
    static std::vector<ggml_backend_dev_t> devices;
    return devices;
}

// The providers run once, on the first question about devices.
const std::vector<ggml_backend_dev_t> & devices() {
    static std::once_flag once;
    std::call_once(once, [] {
        // GPUs first (index 0 is the default main device, -mg 0), then virtual CPU devices
        ggml_backend_cuda_register_devices();
        ggml_backend_cpu_register_virtual_devices();
    });
    return device_list();
}

bool iequal(const char * a, const char * b) {
    for (; *a && *b; ++a, ++b) {
        if (std::tolower((unsigned char) *a) != std::tolower((unsigned char) *b)) return false;
    }
    return *a == *b;
}

} // namespace

void ggml_backend_device_register(ggml_backend_dev_t dev) { device_list().push_back(dev); }

extern "C" {

size_t ggml_backend_dev_count(void) { return devices().size(); }

ggml_backend_dev_t ggml_backend_dev_get(size_t index) {
    GGML_ASSERT(index < devices().size());
    return devices()[index];
}

ggml_backend_dev_t ggml_backend_dev_by_name(const char * name) {
    for (ggml_backend_dev_t d : devices()) {
        if (iequal(ggml_backend_dev_name(d), name)) return d;
    }
    return nullptr;
}

const char * ggml_backend_dev_name(ggml_backend_dev_t dev) { return dev->iface.get_name(dev); }
const char * ggml_backend_dev_description(ggml_backend_dev_t dev) { return dev->iface.get_description(dev); }

void ggml_backend_dev_memory(ggml_backend_dev_t dev, size_t * free, size_t * total) {
    size_t f = 0, t = 0;
    dev->iface.get_memory(dev, &f, &t);
    if (free) *free = f;
    if (total) *total = t;
}

ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t dev) { return dev->iface.get_buffer_type(dev); }
ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t dev) { return dev->iface.init_backend(dev); }
ggml_backend_buffer_type_t ggml_backend_dev_host_buffer_type(ggml_backend_dev_t dev) {
    return dev->iface.get_host_buffer_type ? dev->iface.get_host_buffer_type(dev) : nullptr;
}

ggml_backend_dev_t ggml_backend_buft_get_device(ggml_backend_buffer_type_t buft) {
    for (ggml_backend_dev_t d : devices()) {
        if (ggml_backend_dev_buffer_type(d) == buft) return d;
    }
    return nullptr;
}

} // extern "C"
