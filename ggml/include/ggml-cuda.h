// CUDA backend: devices, buffers and the backend the scheduler runs graphs on.
//
// Every build has these functions. A build without KILN_CUDA, a machine without the NVIDIA
// driver and a machine without a GPU all answer "0 devices" (the first query logs why, once),
// so callers need no #ifdef and one binary serves every user. CUDA_VISIBLE_DEVICES selects and
// orders the devices as usual; devices are named CUDA0, CUDA1, ... in that order, and each is a
// device of the registry (ggml_backend_dev_by_name("CUDA1"), -dev, -ot ...=CUDA1).
// KILN_VIRTUAL_CUDA_DEVICES=N presents the first GPU as N devices (own buffers, own streams) so
// that a split across GPUs can be run and checked on a machine with one.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_CUDA_MAX_DEVICES 16

// Whether this build contains the CUDA backend (KILN_CUDA=ON).
bool ggml_cuda_compiled(void);
// Whether the CUDA backend has a kernel for this node as it is (op, types, shapes, strides): what
// its supports_op answers, asked without a device, so that a build without a GPU can check which
// nodes of a model's graph would run on the CPU. Always false in a build without CUDA.
bool ggml_cuda_supports_node(const struct ggml_tensor * node);

// Usable devices (0 without a driver or a GPU); the reason for 0 is logged at the first call.
int  ggml_backend_cuda_get_device_count(void);
// "NVIDIA H100 80GB HBM3" etc.; empty for an unknown device.
void ggml_backend_cuda_get_device_description(int device, char * description, size_t size);
// Free and total device memory in bytes (0, 0 for an unknown device).
void ggml_backend_cuda_get_device_memory(int device, size_t * free, size_t * total);

// A backend on one device (NULL, with an error logged, for an unknown device).
ggml_backend_t ggml_backend_cuda_init(int device);
bool ggml_backend_is_cuda(ggml_backend_t backend);

// Device memory of one device ("CUDA0"); NULL for an unknown device.
ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device);
// Page-locked host memory ("CUDA_Host"): a CPU buffer the GPU copies from and to at full speed
// (weights kept in RAM for the CPU, staging of inputs). NULL without a device.
ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void);

// ---- asynchronous work on a backend's stream (what a scheduler needs to overlap copies with
// compute; ggml_backend_synchronize waits for all of it). Host memory should be page-locked
// (ggml_backend_cuda_host_buffer_type) for a copy to run in the background; t must live in this
// backend's device buffer. Return false (logged) when the copy cannot be queued.
bool ggml_backend_cuda_tensor_set_async(ggml_backend_t backend, struct ggml_tensor * t, const void * data, size_t offset, size_t size);
bool ggml_backend_cuda_tensor_get_async(ggml_backend_t backend, const struct ggml_tensor * t, void * data, size_t offset, size_t size);
// src in backend_src's device buffer, dst in backend_dst's (the same or another device): queued on
// backend_src's stream; backend_dst's stream waits for it before its next work.
bool ggml_backend_cuda_tensor_copy_async(ggml_backend_t backend_src, ggml_backend_t backend_dst, const struct ggml_tensor * src,
                                         struct ggml_tensor * dst);

// Events: a point in a backend's stream that another stream, or the host, can wait for.
typedef struct ggml_cuda_event * ggml_cuda_event_t;
ggml_cuda_event_t ggml_backend_cuda_event_new(ggml_backend_t backend);   // NULL (logged) on failure
void ggml_backend_cuda_event_free(ggml_cuda_event_t event);
void ggml_backend_cuda_event_record(ggml_cuda_event_t event, ggml_backend_t backend);
void ggml_backend_cuda_event_wait(ggml_backend_t backend, ggml_cuda_event_t event);   // the stream waits, not the host
void ggml_backend_cuda_event_synchronize(ggml_cuda_event_t event);                   // the host waits

// ---- all-reduce across GPUs (issue 16). Whether this build has NCCL (KILN_NCCL=ON).
bool ggml_cuda_nccl_compiled(void);
// tensors[i] (contiguous f32, f16 or bf16, one shape, in backends[i]'s device memory) all become
// their sum, queued on each backend's stream, through one NCCL communicator per device set (made
// at the first call, kept). Only when NCCL is built and the backends are distinct GPUs (not
// virtual devices over one, not CPU devices): otherwise, and on any NCCL error, false (logged)
// with nothing queued (an error inside NCCL's group may leave it partly queued: synchronize and
// redo the reduce) and the caller reduces with peer copies.
bool ggml_backend_cuda_all_reduce(ggml_backend_t * backends, struct ggml_tensor ** tensors, int n);

#ifdef __cplusplus
}
#endif
