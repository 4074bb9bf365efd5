// cuBLAS, loaded when the first CUDA backend starts rather than linked: libcublas and libcublasLt
// are some 700 MB that every process would otherwise map and relocate at start-up (0.4 s per
// process natively, 5 s under the emulators the ISA tests use), including the many that never
// touch a GPU. Without the library the backend still runs: products of any width take the
// kernels that read the weights' blocks (slower for batches), and one log line says so.
#include "cuda-common.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

namespace {

cublas_api g_api;
bool g_loaded = false;

template <typename Fn> bool resolve(void * lib, const char * name, Fn & fn) {
    fn = (Fn) dlsym(lib, name);
    return fn != nullptr;
}

} // namespace

const cublas_api * cublas_get() {
    static std::once_flag once;
    std::call_once(once, [] {
        char name[32];
        std::snprintf(name, sizeof(name), "libcublas.so.%d", CUBLAS_VER_MAJOR);
        void * lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            ggml_log(GGML_LOG_LEVEL_WARN, "CUDA: %s not found (%s): batched products use the slower block kernels\n", name,
                     dlerror());
            return;
        }
        g_loaded = resolve(lib, "cublasCreate_v2", g_api.create) && resolve(lib, "cublasDestroy_v2", g_api.destroy) &&
                   resolve(lib, "cublasSetStream_v2", g_api.set_stream) && resolve(lib, "cublasSgemm_v2", g_api.sgemm) &&
                   resolve(lib, "cublasGemmEx", g_api.gemm_ex);
        if (!g_loaded) {
            ggml_log(GGML_LOG_LEVEL_WARN, "CUDA: %s lacks a function Kiln uses: batched products use the slower block kernels\n",
                     name);
        }
        // the library stays loaded for the life of the process (handles may outlive any backend)
    });
    return g_loaded ? &g_api : nullptr;
}
