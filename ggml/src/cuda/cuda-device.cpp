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
// kernels for; ordinal[] maps Kiln's index to the runtime's.
struct cuda_device_info {
    int count = 0;
    int ordinal[GGML_CUDA_MAX_DEVICES];
    cudaDeviceProp props[GGML_CUDA_MAX_DEVICES];
};

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
        for (int i = 0; i < info.count; ++i) {
            const cudaDeviceProp & p = info.props[i];
            ggml_log(GGML_LOG_LEVEL_INFO, "CUDA%d: %s, compute capability %d.%d, %.0f MiB\n", i, p.name, p.major, p.minor,
                     p.totalGlobalMem / 1048576.0);
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
    if (valid_device(device)) std::snprintf(description, size, "%s", devices().props[device].name);
}

void ggml_backend_cuda_get_device_memory(int device, size_t * free, size_t * total) {
    size_t f = 0, t = 0;
    if (valid_device(device)) {
        int prev = 0;
        cudaGetDevice(&prev);
        if (CUDA_OK(cudaSetDevice(cuda_device_ordinal(device)))) CUDA_OK(cudaMemGetInfo(&f, &t));
        cudaSetDevice(prev);
    }
    if (free) *free = f;
    if (total) *total = t;
}

int ggml_backend_cuda_device_by_name(const char * name) {
    if (!name) return -1;
    std::string s(name);
    for (char & c : s) c = (char) std::toupper((unsigned char) c);
    if (s.rfind("CUDA", 0) != 0 || s.size() == 4 || s.size() > 6) return -1;
    int device = 0;
    for (size_t i = 4; i < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') return -1;
        device = device * 10 + (s[i] - '0');
    }
    return valid_device(device) ? device : -1;
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
void * host_buffer_base(ggml_backend_buffer_t b) { return b->context; }
void host_buffer_set(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    std::memcpy((char *) t->data + offset, data, size);
}
void host_buffer_get(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    std::memcpy(data, (const char *) t->data + offset, size);
}
void host_buffer_memset(ggml_backend_buffer_t, ggml_tensor * t, uint8_t v, size_t offset, size_t size) {
    std::memset((char *) t->data + offset, v, size);
}
void host_buffer_clear(ggml_backend_buffer_t b, uint8_t v) { std::memset(b->context, v, b->size); }

const ggml_backend_buffer_i k_host_buffer_iface = {
    host_buffer_free, host_buffer_base, nullptr, host_buffer_memset, host_buffer_set, host_buffer_get, host_buffer_clear,
};

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
    return ggml_backend_buffer_init(buft, k_host_buffer_iface, ptr, size);
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
