// CUDA backend: devices, buffers and the backend the scheduler runs graphs on.
//
// Every build has these functions. A build without KILN_CUDA, a machine without the NVIDIA
// driver and a machine without a GPU all answer "0 devices" (the first query logs why, once),
// so callers need no #ifdef and one binary serves every user. CUDA_VISIBLE_DEVICES selects and
// orders the devices as usual; devices are named CUDA0, CUDA1, ... in that order.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_CUDA_MAX_DEVICES 16

// Whether this build contains the CUDA backend (KILN_CUDA=ON).
bool ggml_cuda_compiled(void);

// Usable devices (0 without a driver or a GPU); the reason for 0 is logged at the first call.
int  ggml_backend_cuda_get_device_count(void);
// "NVIDIA H100 80GB HBM3" etc.; empty for an unknown device.
void ggml_backend_cuda_get_device_description(int device, char * description, size_t size);
// Free and total device memory in bytes (0, 0 for an unknown device).
void ggml_backend_cuda_get_device_memory(int device, size_t * free, size_t * total);
// "CUDA3" -> 3; -1 when the name is not of that form or names no usable device.
int  ggml_backend_cuda_device_by_name(const char * name);

// A backend on one device (NULL, with an error logged, for an unknown device).
ggml_backend_t ggml_backend_cuda_init(int device);
bool ggml_backend_is_cuda(ggml_backend_t backend);

// Device memory of one device ("CUDA0"); NULL for an unknown device.
ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device);
// Page-locked host memory ("CUDA_Host"): a CPU buffer the GPU copies from and to at full speed
// (weights kept in RAM for the CPU, staging of inputs). NULL without a device.
ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void);

#ifdef __cplusplus
}
#endif
