// The interfaces a backend implements (CPU now, CUDA later). Internal to the tensor library.
#pragma once

#include "ggml-backend.h"
#include "ggml-backend-copy-plan.h"

struct ggml_backend_buffer_type_i {
    const char *          (*get_name)(ggml_backend_buffer_type_t buft);
    ggml_backend_buffer_t (*alloc_buffer)(ggml_backend_buffer_type_t buft, size_t size);
    size_t                (*get_alignment)(ggml_backend_buffer_type_t buft);
    size_t                (*get_max_size)(ggml_backend_buffer_type_t buft);     // optional
    size_t                (*get_alloc_size)(ggml_backend_buffer_type_t buft, const ggml_tensor * t); // optional
    bool                  (*is_host)(ggml_backend_buffer_type_t buft);
};

struct ggml_backend_buffer_type {
    ggml_backend_buffer_type_i iface;
    void * context;
};

struct ggml_backend_buffer_i {
    void   (*free_buffer)(ggml_backend_buffer_t buffer);                  // optional
    void * (*get_base)(ggml_backend_buffer_t buffer);
    void   (*init_tensor)(ggml_backend_buffer_t buffer, ggml_tensor * t); // optional
    void   (*memset_tensor)(ggml_backend_buffer_t buffer, ggml_tensor * t, uint8_t value, size_t offset, size_t size);
    void   (*set_tensor)(ggml_backend_buffer_t buffer, ggml_tensor * t, const void * data, size_t offset, size_t size);
    void   (*get_tensor)(ggml_backend_buffer_t buffer, const ggml_tensor * t, void * data, size_t offset, size_t size);
    void   (*clear)(ggml_backend_buffer_t buffer, uint8_t value);
};

struct ggml_backend_buffer {
    ggml_backend_buffer_i iface;
    ggml_backend_buffer_type_t buft;
    void * context;
    size_t size;
    ggml_backend_buffer_usage usage;
};

ggml_backend_buffer_t ggml_backend_buffer_init(ggml_backend_buffer_type_t buft, ggml_backend_buffer_i iface,
                                               void * context, size_t size);
// A buffer over host memory at ptr (its context): tensors are read and written with memcpy, as
// the CPU backend does. free_buffer releases the memory (NULL: the caller owns it, e.g. mmap).
// Every host buffer type (the CPU's, a virtual device's, CUDA's page-locked one) builds on it.
ggml_backend_buffer_t ggml_backend_host_buffer_init(ggml_backend_buffer_type_t buft, void * ptr, size_t size,
                                                    void (*free_buffer)(ggml_backend_buffer_t buffer));

struct ggml_backend_i {
    const char * (*get_name)(ggml_backend_t backend);
    void         (*free)(ggml_backend_t backend);
    ggml_backend_buffer_type_t (*get_default_buffer_type)(ggml_backend_t backend);
    ggml_status  (*graph_compute)(ggml_backend_t backend, ggml_cgraph * graph);
    bool         (*supports_op)(ggml_backend_t backend, const ggml_tensor * op);
    bool         (*supports_buft)(ggml_backend_t backend, ggml_backend_buffer_type_t buft);
    void         (*synchronize)(ggml_backend_t backend);   // optional

    // Optional, both or neither: work queued without the host waiting (the CPU has neither, and
    // the scheduler copies for it synchronously, as before). synchronize must then wait for all
    // of it.
    // graph_enqueue: graph_compute without the final wait; the graph's first kernel waits for
    // the copies copy_async queued before it.
    ggml_status (*graph_enqueue)(ggml_backend_t backend, ggml_cgraph * graph);
    // copy_async: src's bytes, given as blocks (ggml_copy_plan::strided_blocks), into dst
    // (contiguous), queued on this backend's copy stream. One of the two is in this backend's
    // memory; the other in its memory, in another backend's of the same kind (src_backend), or
    // in host memory (page-locked for the copy to run in the background). The copy first waits
    // for the work src_backend (NULL: none, host memory) has queued and, when wait_back >= 0,
    // for this backend's queued graphs but the last wait_back of them (dst's memory may still be
    // in use there: ggml_copy_plan::hazards); the work src_backend queues next waits for the
    // copy. false (nothing queued): the caller copies synchronously.
    bool (*copy_async)(ggml_backend_t backend, ggml_backend_t src_backend, const ggml_tensor * src, ggml_tensor * dst,
                       const ggml_copy_plan::block * blocks, size_t n_blocks, int wait_back);

    // Optional: the all-reduce over backends[0..n) (this one among them, all with this same
    // function): tensors[i] in backends[i]'s memory all become their sum, in place, done or queued
    // on each backend's stream (after the work queued there before). tensors NULL: whether it
    // would run over these backends, nothing done. false: refused or failed (logged). On backends
    // that queue work it counts as one more queued graph on each (the scheduler's hazards count
    // it as a split: copy_async's wait_back must see it as one).
    bool (*all_reduce)(ggml_backend_t * backends, ggml_tensor ** tensors, int n);
};

struct ggml_backend {
    ggml_backend_i iface;
    void * context;
};

// A device (see ggml-backend.h). A backend library registers its devices from its provider
// function, which the registry calls once, on first use (ggml-backend.cpp lists the providers).
// A device's buffer type must be its own (the scheduler tells devices apart by it), even where
// two devices share the hardware (KILN_VIRTUAL_CUDA_DEVICES, KILN_VIRTUAL_CPU_DEVICES).
struct ggml_backend_device_i {
    const char * (*get_name)(ggml_backend_dev_t dev);          // "CUDA0", "CPU1": what -dev and -ot take
    const char * (*get_description)(ggml_backend_dev_t dev);
    void         (*get_memory)(ggml_backend_dev_t dev, size_t * free, size_t * total);
    ggml_backend_buffer_type_t (*get_buffer_type)(ggml_backend_dev_t dev);
    ggml_backend_t (*init_backend)(ggml_backend_dev_t dev);
    // optional: host memory the device copies from and to at full speed (page-locked), for the
    // weights a model keeps in RAM when they are read rather than mapped (NULL: none)
    ggml_backend_buffer_type_t (*get_host_buffer_type)(ggml_backend_dev_t dev);
};

struct ggml_backend_device {
    ggml_backend_device_i iface;
    void * context;
};

void ggml_backend_device_register(ggml_backend_dev_t dev);

// Device providers, called in this order. Each registers its devices with ggml_backend_device_register.
void ggml_backend_cuda_register_devices(void);          // GPUs: CUDA0 ... (cuda-device.cpp; none in cuda-absent.cpp)
void ggml_backend_cpu_register_virtual_devices(void);   // KILN_VIRTUAL_CPU_DEVICES (cpu-backend.cpp)
