// Internal to the CUDA backend: the per-backend context, the device-memory pool, error checks,
// and the op launchers (ops-*.cu) that cuda-backend.cpp dispatches to. Compiled by g++ (the
// .cpp files) and by nvcc (the .cu files), so it holds no device code.
//
// Ordering: every op of a backend is queued on its one stream, so scratch memory taken from the
// pool for one op may be handed to the next op as soon as the first has been *queued*: the
// stream runs them in order. graph_compute waits for the stream before returning; the
// scheduler's graph_enqueue does not, and the scheduler waits (synchronize: both streams) before
// the host reads or writes memory the GPU may be using.
#pragma once

#include "ggml-backend-impl.h"
#include "ggml-cuda.h"
#include "ggml-impl.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

// Logs a failed runtime call (what, where, the CUDA error) and returns false.
bool cuda_check(cudaError_t err, const char * what, const char * file, int line);
bool cublas_check(cublasStatus_t st, const char * what, const char * file, int line);
#define CUDA_OK(call) cuda_check((call), #call, __FILE__, __LINE__)
#define CUBLAS_OK(call) cublas_check((call), #call, __FILE__, __LINE__)

// The cuBLAS functions the backend calls, from the library loaded at first use (cuda-cublas.cpp);
// nullptr when it cannot be loaded.
struct cublas_api {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSgemm_v2) sgemm;
    // the C entry point (the header adds a C++ overload taking a cudaDataType compute type)
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
};
const cublas_api * cublas_get();

// The "does not fit" message every allocation failure gives: device, what, asked, free, total.
void cuda_log_out_of_memory(const char * device_name, int ordinal, const char * what, size_t asked);

// The CUDA runtime's device number of Kiln's device (they differ when a device was skipped).
int cuda_device_ordinal(int device);

// Scratch memory of one backend, reused across ops and graphs. Blocks are kept after use and
// handed out again best-fit; when the device is full the unused ones are given back and the
// allocation retried once before it fails with cuda_log_out_of_memory.
class cuda_pool {
public:
    cuda_pool(const char * name, int ordinal) : name_(name), ordinal_(ordinal) {}
    ~cuda_pool();
    cuda_pool(const cuda_pool &) = delete;
    cuda_pool & operator=(const cuda_pool &) = delete;

    void * alloc(size_t size);   // nullptr on failure (logged)
    void   release(void * ptr);
    size_t held() const { return held_; }

private:
    struct block { void * ptr; size_t size; bool used; };
    const char * name_;   // for messages ("CUDA0")
    int ordinal_;
    std::vector<block> blocks_;
    size_t held_ = 0;
    void trim();   // frees every unused block
};

// One allocation from the pool, returned when it goes out of scope.
class cuda_scratch {
public:
    cuda_scratch(cuda_pool & pool, size_t size) : pool_(pool), ptr_(size ? pool.alloc(size) : nullptr) {}
    ~cuda_scratch() { if (ptr_) pool_.release(ptr_); }
    cuda_scratch(const cuda_scratch &) = delete;
    cuda_scratch & operator=(const cuda_scratch &) = delete;
    template <typename T> T * as() const { return (T *) ptr_; }
    explicit operator bool() const { return ptr_ != nullptr; }

private:
    cuda_pool & pool_;
    void * ptr_;
};

struct cuda_context {
    int device = 0;    // Kiln's index
    int ordinal = 0;   // the runtime's
    char name[16] = {};
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;   // nullptr without the library: no cuBLAS path
    cuda_pool * pool = nullptr;
    // The scheduler's input copies run on copy_stream, beside the compute stream (cuda-async.cpp):
    // copy_done marks the last copy queued, which the next graph_enqueue waits for;
    // compute_mark is recorded on the compute stream when a copy must wait for all its work;
    // graph_done[n % k_graph_events] after the n-th graph queued, for a copy that must wait for
    // one graph but not those after it (a slot recorded again marks a later graph: waiting on
    // it is later than needed, never earlier).
    static constexpr int k_graph_events = 8;
    cudaStream_t copy_stream = nullptr;
    cudaEvent_t copy_done = nullptr;
    cudaEvent_t compute_mark = nullptr;
    cudaEvent_t graph_done[k_graph_events] = {};
    int64_t n_graphs = 0;
    bool copies_pending = false;
};

// The backend's all_reduce entry (cuda-nccl.cpp): NCCL over distinct GPUs, in place on each
// backend's stream; tensors NULL: whether it would run over these backends.
bool cuda_all_reduce(ggml_backend_t * backends, ggml_tensor ** tensors, int n);

// cuda-async.cpp: the copy stream and events of a backend (false, logged: not created), their
// release, the scheduler's copy_async (ggml-backend-impl.h), and peer access between two devices
// of the runtime (enabled once per pair where the hardware allows it; false: copies between
// them are staged by the driver).
bool cuda_async_init(cuda_context & ctx);
void cuda_async_free(cuda_context & ctx);
bool cuda_copy_async(ggml_backend_t backend, ggml_backend_t src_backend, const ggml_tensor * src, ggml_tensor * dst,
                     const ggml_copy_plan::block * blocks, size_t n_blocks, int wait_back);
bool cuda_enable_peer_access(int ordinal_a, int ordinal_b);

// What one launcher sees of a tensor: its data pointer, shape and byte strides. Passed to kernels
// by value (plain data, no ggml_tensor on the device).
struct cuda_view {
    char *  data;
    int     type;
    int64_t ne[4];
    int64_t nb[4];
};
cuda_view cuda_view_of(const ggml_tensor * t);

// ---------------------------------------------------------------------------------------------
// Ops. cuda_supports_* say whether the launcher of that family takes the node (types, shapes);
// cuda-backend.cpp's supports_op is their union, so the scheduler never hands a node to the GPU
// that its launcher would refuse. Launchers queue work on ctx.stream and return false (logged)
// only on a runtime failure.

bool cuda_supports_elementwise(const ggml_tensor * op);   // ops-elementwise.cu
bool cuda_op_elementwise(cuda_context & ctx, ggml_tensor * dst);

bool cuda_supports_norm(const ggml_tensor * op);          // ops-norm.cu: norms, softmax
bool cuda_op_norm(cuda_context & ctx, ggml_tensor * dst);

bool cuda_supports_rope(const ggml_tensor * op);          // ops-rope.cu
bool cuda_op_rope(cuda_context & ctx, ggml_tensor * dst);

bool cuda_supports_copy(const ggml_tensor * op);          // ops-copy.cu: cpy, get_rows, set_rows, concat
bool cuda_op_copy(cuda_context & ctx, ggml_tensor * dst);

bool cuda_supports_sort(const ggml_tensor * op);          // ops-sort.cu: argsort, top_k
bool cuda_op_sort(cuda_context & ctx, ggml_tensor * dst);

bool cuda_supports_matmul(const ggml_tensor * op);        // ops-matmul.cu: mul_mat, mul_mat_id, moe_up_gate
bool cuda_op_matmul(cuda_context & ctx, ggml_tensor * dst);

bool cuda_supports_recurrent(const ggml_tensor * op);     // ops-recurrent.cu: ssm_conv, gated_delta_net
bool cuda_op_recurrent(cuda_context & ctx, ggml_tensor * dst);

bool cuda_supports_attention(const ggml_tensor * op);     // ops-attention.cu: flash_attn_ext
bool cuda_op_attention(cuda_context & ctx, ggml_tensor * dst);

// Whether this build's kernels have an image (or PTX) the device can run.
bool cuda_kernels_run_on(int device);

// Shared by the launchers: which weight types the matmul and get_rows kernels decode (the plain
// block types and the row-interleaved layouts of quants-blocks.h), and whether a tensor's rows of
// such a type can be decoded as they lie: whole 32-value chunks, dense blocks, and for an
// interleaved layout whole groups of R rows that start at row 0 of every matrix.
bool cuda_type_is_decodable(ggml_type type);
bool cuda_weight_rows_decodable(const ggml_tensor * t);
