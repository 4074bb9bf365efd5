// The CUDA entry points of a build without KILN_CUDA: no devices, so every caller takes its
// CPU path. (With KILN_CUDA=ON, ggml/src/cuda/ provides the real ones instead of this file.)
#include "ggml-backend-impl.h"
#include "ggml-cuda.h"

extern "C" {

bool ggml_cuda_compiled(void) { return false; }
bool ggml_cuda_supports_node(const ggml_tensor *) { return false; }
int ggml_backend_cuda_get_device_count(void) { return 0; }
void ggml_backend_cuda_get_device_description(int, char * description, size_t size) {
    if (description && size > 0) description[0] = '\0';
}
void ggml_backend_cuda_get_device_memory(int, size_t * free, size_t * total) {
    if (free) *free = 0;
    if (total) *total = 0;
}
ggml_backend_t ggml_backend_cuda_init(int device) {
    ggml_log(GGML_LOG_LEVEL_ERROR, "CUDA%d: this build has no CUDA backend (configure with -DKILN_CUDA=ON)\n", device);
    return nullptr;
}
bool ggml_backend_is_cuda(ggml_backend_t) { return false; }
ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int) { return nullptr; }
ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void) { return nullptr; }

bool ggml_backend_cuda_tensor_set_async(ggml_backend_t, ggml_tensor *, const void *, size_t, size_t) { return false; }
bool ggml_backend_cuda_tensor_get_async(ggml_backend_t, const ggml_tensor *, void *, size_t, size_t) { return false; }
bool ggml_backend_cuda_tensor_copy_async(ggml_backend_t, ggml_backend_t, const ggml_tensor *, ggml_tensor *) { return false; }
ggml_cuda_event_t ggml_backend_cuda_event_new(ggml_backend_t) { return nullptr; }
void ggml_backend_cuda_event_free(ggml_cuda_event_t) {}
void ggml_backend_cuda_event_record(ggml_cuda_event_t, ggml_backend_t) {}
void ggml_backend_cuda_event_wait(ggml_backend_t, ggml_cuda_event_t) {}
void ggml_backend_cuda_event_synchronize(ggml_cuda_event_t) {}
bool ggml_cuda_nccl_compiled(void) { return false; }
bool ggml_backend_cuda_all_reduce(ggml_backend_t *, ggml_tensor **, int) { return false; }

} // extern "C"

void ggml_backend_cuda_register_devices(void) {}   // no GPUs to list

