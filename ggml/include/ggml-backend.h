// Buffers, backends and the scheduler.
//
// A buffer is memory owned by a backend (host RAM for the CPU, device memory for CUDA). A
// backend runs graphs whose tensors live in its buffers. The scheduler takes a graph whose
// weights live in different backends' buffers, assigns each op to the backend holding its
// weights (or its inputs), splits the graph where the backend changes, copies the inputs each
// split needs, and plans the intermediate memory of every split.
#pragma once

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

enum ggml_status {
    GGML_STATUS_ALLOC_FAILED = -2,
    GGML_STATUS_FAILED       = -1,
    GGML_STATUS_SUCCESS      = 0,
    GGML_STATUS_ABORTED      = 1,
};

typedef struct ggml_backend_buffer_type * ggml_backend_buffer_type_t;
typedef struct ggml_backend_buffer *      ggml_backend_buffer_t;
typedef struct ggml_backend *             ggml_backend_t;
typedef struct ggml_gallocr *             ggml_gallocr_t;
typedef struct ggml_backend_sched *       ggml_backend_sched_t;
typedef struct ggml_backend_device *      ggml_backend_dev_t;

enum ggml_backend_buffer_usage {
    GGML_BACKEND_BUFFER_USAGE_ANY     = 0,
    GGML_BACKEND_BUFFER_USAGE_WEIGHTS = 1,
    GGML_BACKEND_BUFFER_USAGE_COMPUTE = 2,
};

// ---- buffer types
const char *          ggml_backend_buft_name(ggml_backend_buffer_type_t buft);
ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size);
size_t                ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft);
size_t                ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft);
size_t                ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const struct ggml_tensor * t);
bool                  ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft);

// ---- buffers
void         ggml_backend_buffer_free(ggml_backend_buffer_t buffer);
void *       ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer);
size_t       ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer);
const char * ggml_backend_buffer_name(ggml_backend_buffer_t buffer);
void         ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value);
bool         ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer);
void         ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage);
enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer);
ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer);
size_t       ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer);
// place t at addr inside the buffer (addr between base and base + size)
void         ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, struct ggml_tensor * t, void * addr);
// a view gets its data from its view_src
void         ggml_backend_view_init(struct ggml_tensor * t);

// ---- tensor data access (works for any backend's buffer)
void ggml_backend_tensor_set(struct ggml_tensor * t, const void * data, size_t offset, size_t size);
void ggml_backend_tensor_get(const struct ggml_tensor * t, void * data, size_t offset, size_t size);
void ggml_backend_tensor_memset(struct ggml_tensor * t, uint8_t value, size_t offset, size_t size);
void ggml_backend_tensor_copy(struct ggml_tensor * src, struct ggml_tensor * dst);

// ---- backends
const char * ggml_backend_name(ggml_backend_t backend);
void         ggml_backend_free(ggml_backend_t backend);
ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend);
ggml_backend_buffer_t ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size);
enum ggml_status ggml_backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph * graph);
bool ggml_backend_supports_op(ggml_backend_t backend, const struct ggml_tensor * op);
bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft);
void ggml_backend_synchronize(ggml_backend_t backend);

// The all-reduce of one tensor per backend (ggml_all_reduce's step): tensors[i], in backends[i]'s
// memory, all become their sum, in place, queued or done before the call returns (as the backends'
// graphs are). Only when every backend offers the same collective (ggml_backend_i::all_reduce): the
// CPU's over CPU devices (virtual ones included), CUDA's over distinct GPUs in a KILN_NCCL build.
// _supported asks without tensors (decide when the graph is built); false: the caller reduces with
// graph nodes (copies and adds). A refusal or failure is logged.
bool ggml_backend_all_reduce_supported(ggml_backend_t * backends, int n);
bool ggml_backend_all_reduce(ggml_backend_t * backends, struct ggml_tensor ** tensors, int n);

// Allocate all tensors of a context in one buffer of the given type (NULL if nothing to allocate).
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context * ctx, ggml_backend_buffer_type_t buft);
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend);
// Allocate these tensors (no data, not views) in one new buffer of the type (NULL: failed or none).
ggml_backend_buffer_t ggml_backend_alloc_tensors_from_buft(ggml_backend_buffer_type_t buft, struct ggml_tensor * const * tensors,
                                                           size_t n);

// ---- graph memory planner (one buffer type)
// Intermediate tensors get offsets in one buffer; a tensor's memory is reused once its last
// consumer has run. Inputs (GGML_TENSOR_FLAG_INPUT) and outputs are never overwritten.
ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft);
void   ggml_gallocr_free(ggml_gallocr_t galloc);
// size the buffer for the largest graph it will see (optional; alloc_graph grows it as needed)
bool   ggml_gallocr_reserve(ggml_gallocr_t galloc, struct ggml_cgraph * graph);
bool   ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_cgraph * graph);
size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc);

// ---- devices
// The places a model can be put besides the host CPU: GPUs (in builds with a GPU backend) and,
// for testing the splitting logic on any machine, virtual CPU devices (KILN_VIRTUAL_CPU_DEVICES=N
// in the environment: CPU0 ... CPU<N-1>, each with its own buffers and backend). The host CPU
// itself is not in this list: it is always there (ggml_backend_cpu_init) and runs what no device
// holds. The list is fixed at its first use.
size_t             ggml_backend_dev_count(void);
ggml_backend_dev_t ggml_backend_dev_get(size_t index);
ggml_backend_dev_t ggml_backend_dev_by_name(const char * name);   // case-insensitive; NULL if none
const char *       ggml_backend_dev_name(ggml_backend_dev_t dev);
const char *       ggml_backend_dev_description(ggml_backend_dev_t dev);
void               ggml_backend_dev_memory(ggml_backend_dev_t dev, size_t * free, size_t * total);
ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t dev);
ggml_backend_t     ggml_backend_dev_init(ggml_backend_dev_t dev);   // a new backend on the device
// Host memory this device copies from and to at full speed (CUDA_Host: page-locked); NULL if none.
// Weights kept in RAM and read (not mapped) live there, so prompt batches copy them over quickly.
ggml_backend_buffer_type_t ggml_backend_dev_host_buffer_type(ggml_backend_dev_t dev);
// The device whose buffers have this type (NULL: the host CPU's, or unknown).
ggml_backend_dev_t ggml_backend_buft_get_device(ggml_backend_buffer_type_t buft);

// ---- scheduler
// backends in priority order; the last one must be the CPU backend (it runs what others can't).
ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, int n_backends, size_t graph_size);
void   ggml_backend_sched_free(ggml_backend_sched_t sched);
bool   ggml_backend_sched_reserve(ggml_backend_sched_t sched, struct ggml_cgraph * measure_graph);
bool   ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
enum ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
void   ggml_backend_sched_reset(ggml_backend_sched_t sched);
int    ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched);
int    ggml_backend_sched_get_n_copies(ggml_backend_sched_t sched);
size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend);
// The hybrid offload rule: a matrix product (mul_mat, mul_mat_id, the fused MoE gate/up) whose
// weight is in host memory runs on backend, its weight copied there with its other inputs, when
// it works on at least min_batch tokens and backend supports it; smaller batches compute where the
// weight is. backend NULL or min_batch <= 0: off (the default).
void   ggml_backend_sched_set_offload(ggml_backend_sched_t sched, ggml_backend_t backend, int64_t min_batch);
void   ggml_backend_sched_set_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node, ggml_backend_t backend);
ggml_backend_t ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node);

#ifdef __cplusplus
}
#endif
