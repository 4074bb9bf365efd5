// CUDA devices and their memory: enumeration (once, lazily: a binary that never asks for a GPU
// never touches the driver), error reporting, the scratch pool, and the two buffer types:
// device memory ("CUDA0") and page-locked host memory ("CUDA_Host").
#include "cuda-common.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

// ---------------------------------------------------------------------------------------------
// Errors

bool cuda_check(cudaError_t err, const char * what, const char * file, int line) {
    if (err == cudaSuccess) return true;
    ggml_log(GGML_LOG_LEVEL_ERROR, "CUDA error %s (%s) in %s at %s:%d\n", cudaGetErrorName(err), cudaGetErrorString(err),
             what, file, line);
    return false;
}

bool cublas_check(cublasStatus_t st, const char * what, const char * file, int line) {
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    ggml_log(GGML_LOG_LEVEL_ERROR, "cuBLAS error %d in %s at %s:%d\n", (int) st, what, file, line);
    return false;
}

void cuda_log_out_of_memory(const char * device_name, int ordinal, const char * what, size_t asked) {
    size_t free = 0, total = 0;
    cudaGetLastError();   // the failed allocation's error is reported here, not by the next call
    int prev = 0;
    cudaGetDevice(&prev);
    if (cudaSetDevice(ordinal) == cudaSuccess) cudaMemGetInfo(&free, &total);
    cudaSetDevice(prev);
    ggml_log(GGML_LOG_LEVEL_ERROR,
             "%s: not enough device memory for %s: asked %.2f MiB, %.2f MiB free of %.2f MiB\n", device_name, what,
             asked / 1048576.0, free / 1048576.0, total / 1048576.0);
}

// ---------------------------------------------------------------------------------------------
// Devices

namespace {

// Kiln's devices are the runtime's (after CUDA_VISIBLE_DEVICES) minus those this build has no
// kernels for; ordinal[] maps Kiln's index to the runtime's. With KILN_VIRTUAL_CUDA_DEVICES=N the
// first usable GPU is presented as N devices: each has its own buffer type, backends and streams,
// so splitting a model across GPUs (-sm layer|graph) runs on a machine with one.
struct cuda_device_info {
    int count = 0;
    int n_virtual = 0;   // > 0: count virtual devices over ordinal[0]
    int ordinal[GGML_CUDA_MAX_DEVICES];
    cudaDeviceProp props[GGML_CUDA_MAX_DEVICES];
};

// KILN_VIRTUAL_CUDA_DEVICES: 0 when unset, -1 (logged) when not a count from 1 to the maximum
int virtual_device_request() {
    const char * env = std::getenv("KILN_VIRTUAL_CUDA_DEVICES");
    if (!env || !*env) return 0;
    char * end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > GGML_CUDA_MAX_DEVICES) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "KILN_VIRTUAL_CUDA_DEVICES=%s: expected a device count from 1 to %d; the GPUs are "
                 "used as they are\n", env, GGML_CUDA_MAX_DEVICES);
        return -1;
    }
    return (int) n;
}

void make_virtual(cuda_device_info & info, int n) {
    if (info.count > 1) {
        ggml_log(GGML_LOG_LEVEL_WARN, "KILN_VIRTUAL_CUDA_DEVICES=%d: %d GPUs visible, virtual devices use the first only\n",
                 n, info.count);
    }
    for (int i = 1; i < n; ++i) {
        info.ordinal[i] = info.ordinal[0];
        info.props[i] = info.props[0];
    }
    info.count = n;
    info.n_virtual = n;
}

const cuda_device_info & devices() {
    static cuda_device_info info;
    static std::once_flag once;
    std::call_once(once, [] {
        int n = 0;
        const cudaError_t err = cudaGetDeviceCount(&n);
        if (err != cudaSuccess) {
            cudaGetLastError();
            ggml_log(GGML_LOG_LEVEL_INFO, "CUDA: no usable GPU (%s), running on the CPU\n", cudaGetErrorString(err));
            return;
        }
        if (n == 0) {
            ggml_log(GGML_LOG_LEVEL_INFO, "CUDA: no GPU found, running on the CPU\n");
            return;
        }
        for (int i = 0; i < n && info.count < GGML_CUDA_MAX_DEVICES; ++i) {
            cudaDeviceProp p;
            if (!CUDA_OK(cudaGetDeviceProperties(&p, i))) continue;
            if (!cuda_kernels_run_on(i)) {
                ggml_log(GGML_LOG_LEVEL_WARN,
                         "CUDA: skipping %s (compute capability %d.%d): this build has kernels for "
                         "architectures %s only; rebuild with -DKILN_CUDA_ARCHS=native\n",
                         p.name, p.major, p.minor, KILN_CUDA_ARCHS);
                continue;
            }
            info.ordinal[info.count] = i;
            info.props[info.count++] = p;
        }
        const int n_virtual = virtual_device_request();
        if (n_virtual > 0 && info.count > 0) make_virtual(info, n_virtual);
        for (int i = 0; i < info.count; ++i) {
            const cudaDeviceProp & p = info.props[i];
            ggml_log(GGML_LOG_LEVEL_INFO, "CUDA%d: %s, compute capability %d.%d, %.0f MiB%s\n", i, p.name, p.major, p.minor,
                     p.totalGlobalMem / 1048576.0 / std::max(1, info.n_virtual),
                     info.n_virtual ? " (a virtual device: KILN_VIRTUAL_CUDA_DEVICES)" : "");
        }
    });
    return info;
}

bool valid_device(int device) { return device >= 0 && device < devices().count; }

} // namespace

int cuda_device_ordinal(int device) { return valid_device(device) ? devices().ordinal[device] : -1; }

extern "C" {

bool ggml_cuda_compiled(void) { return true; }

int ggml_backend_cuda_get_device_count(void) { return devices().count; }

void ggml_backend_cuda_get_device_description(int device, char * description, size_t size) {
    if (!description || size == 0) return;
    description[0] = '\0';
    if (!valid_device(device)) return;
    const cuda_device_info & info = devices();
    if (info.n_virtual) {
        std::snprintf(description, size, "%s (virtual device %d of %d)", info.props[device].name, device + 1, info.n_virtual);
    } else {
        std::snprintf(description, size, "%s", info.props[device].name);
    }
}

void ggml_backend_cuda_get_device_memory(int device, size_t * free, size_t * total) {
    size_t f = 0, t = 0;
    if (valid_device(device)) {
        int prev = 0;
        cudaGetDevice(&prev);
        if (CUDA_OK(cudaSetDevice(cuda_device_ordinal(device)))) CUDA_OK(cudaMemGetInfo(&f, &t));
        cudaSetDevice(prev);
        const size_t n_virtual = (size_t) std::max(1, devices().n_virtual);   // an equal share each
        f /= n_virtual;
        t /= n_virtual;
    }
    if (free) *free = f;
    if (total) *total = t;
}

} // extern "C"

// ---------------------------------------------------------------------------------------------
// Scratch pool

cuda_pool::~cuda_pool() {
    int prev = 0;
    cudaGetDevice(&prev);
    cudaSetDevice(ordinal_);
    for (const block & b : blocks_) cudaFree(b.ptr);
    cudaSetDevice(prev);
}

void cuda_pool::trim() {
    for (auto it = blocks_.begin(); it != blocks_.end();) {
        if (!it->used) {
            cudaFree(it->ptr);
            held_ -= it->size;
            it = blocks_.erase(it);
        } else {
            ++it;
        }
    }
}

void * cuda_pool::alloc(size_t size) {
    size = std::max<size_t>(ggml_pad(size, 256), 256);
    // best fit among the free blocks, but never a block more than twice the size (it would
    // keep a large block busy for a small need)
    block * best = nullptr;
    for (block & b : blocks_) {
        if (!b.used && b.size >= size && b.size <= 2 * size && (!best || b.size < best->size)) best = &b;
    }
    if (best) {
        best->used = true;
        return best->ptr;
    }
    // new blocks are rounded up to 1 MiB steps so that slowly growing needs reuse them
    const size_t bytes = size < (1u << 20) ? size : ggml_pad(size, 1u << 20);
    void * ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        trim();
        err = cudaMalloc(&ptr, bytes);
    }
    if (err != cudaSuccess) {
        cuda_log_out_of_memory(name_, ordinal_, "scratch memory of an op", bytes);
        return nullptr;
    }
    blocks_.push_back({ ptr, bytes, true });
    held_ += bytes;
    return ptr;
}

void cuda_pool::release(void * ptr) {
    for (block & b : blocks_) {
        if (b.ptr == ptr) {
            b.used = false;
            return;
        }
    }
    GGML_ABORT("cuda_pool: release of a pointer it did not give out");
}

// ---------------------------------------------------------------------------------------------
// Device buffers

namespace {

struct device_buffer_type_context {
    int device;    // Kiln's index
    char name[16];
};

struct device_buffer_context {
    int ordinal;   // the runtime's index
    void * ptr;
};

// Runs fn with device as the current device, restoring the caller's afterwards.
template <typename Fn> void on_device(int device, Fn && fn) {
    int prev = 0;
    cudaGetDevice(&prev);
    if (prev != device) cudaSetDevice(device);
    fn();
    if (prev != device) cudaSetDevice(prev);
}

void device_buffer_free(ggml_backend_buffer_t b) {
    auto * ctx = (device_buffer_context *) b->context;
    on_device(ctx->ordinal, [&] { CUDA_OK(cudaFree(ctx->ptr)); });
    delete ctx;
}

void * device_buffer_base(ggml_backend_buffer_t b) { return ((device_buffer_context *) b->context)->ptr; }

void device_buffer_set(ggml_backend_buffer_t b, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    auto * ctx = (device_buffer_context *) b->context;
    on_device(ctx->ordinal, [&] { CUDA_OK(cudaMemcpy((char *) t->data + offset, data, size, cudaMemcpyHostToDevice)); });
}

void device_buffer_get(ggml_backend_buffer_t b, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    auto * ctx = (device_buffer_context *) b->context;
    on_device(ctx->ordinal, [&] { CUDA_OK(cudaMemcpy(data, (const char *) t->data + offset, size, cudaMemcpyDeviceToHost)); });
}

void device_buffer_memset(ggml_backend_buffer_t b, ggml_tensor * t, uint8_t v, size_t offset, size_t size) {
    auto * ctx = (device_buffer_context *) b->context;
    on_device(ctx->ordinal, [&] { CUDA_OK(cudaMemset((char *) t->data + offset, v, size)); });
}

void device_buffer_clear(ggml_backend_buffer_t b, uint8_t v) {
    auto * ctx = (device_buffer_context *) b->context;
    on_device(ctx->ordinal, [&] { CUDA_OK(cudaMemset(ctx->ptr, v, b->size)); });
}

const ggml_backend_buffer_i k_device_buffer_iface = {
    device_buffer_free, device_buffer_base, nullptr, device_buffer_memset, device_buffer_set, device_buffer_get,
    device_buffer_clear,
};

const char * device_buft_name(ggml_backend_buffer_type_t buft) {
    return ((device_buffer_type_context *) buft->context)->name;
}

ggml_backend_buffer_t device_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    const auto * bctx = (device_buffer_type_context *) buft->context;
    const int ordinal = cuda_device_ordinal(bctx->device);
    void * ptr = nullptr;
    cudaError_t err = cudaSuccess;
    on_device(ordinal, [&] { err = cudaMalloc(&ptr, std::max<size_t>(size, 1)); });
    if (err != cudaSuccess) {
        cuda_log_out_of_memory(bctx->name, ordinal, "a buffer", size);
        return nullptr;
    }
    return ggml_backend_buffer_init(buft, k_device_buffer_iface, new device_buffer_context{ ordinal, ptr }, size);
}

size_t device_buft_alignment(ggml_backend_buffer_type_t) { return 256; }

size_t device_buft_max_size(ggml_backend_buffer_type_t buft) {
    size_t free = 0, total = 0;
    ggml_backend_cuda_get_device_memory(((device_buffer_type_context *) buft->context)->device, &free, &total);
    return total;
}

bool device_buft_is_host(ggml_backend_buffer_type_t) { return false; }

// ---------------------------------------------------------------------------------------------
// Page-locked host buffers: CPU memory (the CPU backend uses them as its own) that copies to
// and from the GPU at full bus speed and asynchronously.

void host_buffer_free(ggml_backend_buffer_t b) { CUDA_OK(cudaFreeHost(b->context)); }

const char * host_buft_name(ggml_backend_buffer_type_t) { return "CUDA_Host"; }

ggml_backend_buffer_t host_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    void * ptr = nullptr;
    const cudaError_t err = cudaMallocHost(&ptr, std::max<size_t>(size, 1));
    if (err != cudaSuccess) {
        cudaGetLastError();
        ggml_log(GGML_LOG_LEVEL_ERROR, "CUDA_Host: cannot pin %.2f MiB of host memory (%s)\n", size / 1048576.0,
                 cudaGetErrorString(err));
        return nullptr;
    }
    return ggml_backend_host_buffer_init(buft, ptr, size, host_buffer_free);
}

size_t host_buft_alignment(ggml_backend_buffer_type_t) { return GGML_MEM_ALIGN; }
bool host_buft_is_host(ggml_backend_buffer_type_t) { return true; }

} // namespace

extern "C" {

ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device) {
    static device_buffer_type_context contexts[GGML_CUDA_MAX_DEVICES];
    static ggml_backend_buffer_type types[GGML_CUDA_MAX_DEVICES];
    static std::once_flag once;
    if (!valid_device(device)) return nullptr;
    std::call_once(once, [] {
        for (int i = 0; i < GGML_CUDA_MAX_DEVICES; ++i) {
            contexts[i].device = i;
            std::snprintf(contexts[i].name, sizeof(contexts[i].name), "CUDA%d", i);
            types[i] = { { device_buft_name, device_buft_alloc, device_buft_alignment, device_buft_max_size, nullptr,
                           device_buft_is_host },
                         &contexts[i] };
        }
    });
    return &types[device];
}

ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void) {
    static ggml_backend_buffer_type type = {
        { host_buft_name, host_buft_alloc, host_buft_alignment, nullptr, nullptr, host_buft_is_host },
        nullptr,
    };
    return ggml_backend_cuda_get_device_count() > 0 ? &type : nullptr;
}

} // extern "C"

// ---------------------------------------------------------------------------------------------
// The devices in the registry (ggml-backend.h): what placement (-ngl, -ot, -dev, -sm, -ts, -mg)
// and --list-devices see. Called once by the registry, before any other provider.

namespace {

struct registered_device {
    int device;   // Kiln's index
    char name[16];
    char description[256];
    ggml_backend_device dev;
};

registered_device & registered(ggml_backend_dev_t d) { return *(registered_device *) d->context; }
const char * reg_name(ggml_backend_dev_t d) { return registered(d).name; }
const char * reg_description(ggml_backend_dev_t d) { return registered(d).description; }
void reg_memory(ggml_backend_dev_t d, size_t * free, size_t * total) {
    ggml_backend_cuda_get_device_memory(registered(d).device, free, total);
}
ggml_backend_buffer_type_t reg_buft(ggml_backend_dev_t d) { return ggml_backend_cuda_buffer_type(registered(d).device); }
ggml_backend_t reg_init(ggml_backend_dev_t d) { return ggml_backend_cuda_init(registered(d).device); }
ggml_backend_buffer_type_t reg_host_buft(ggml_backend_dev_t) { return ggml_backend_cuda_host_buffer_type(); }

} // namespace

void ggml_backend_cuda_register_devices(void) {
    static registered_device table[GGML_CUDA_MAX_DEVICES];
    const int n = ggml_backend_cuda_get_device_count();
    for (int i = 0; i < n; ++i) {
        registered_device & r = table[i];
        r.device = i;
        std::snprintf(r.name, sizeof(r.name), "CUDA%d", i);
        ggml_backend_cuda_get_device_description(i, r.description, sizeof(r.description));
        r.dev = { { reg_name, reg_description, reg_memory, reg_buft, reg_init, reg_host_buft }, &r };
        ggml_backend_device_register(&r.dev);
    }
}
