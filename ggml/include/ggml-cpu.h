// CPU backend: features, threads, kernel selection.
#pragma once

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// Instruction-set levels, in increasing order. A kernel registered for a level runs on any
// CPU that has that level; the best registered level not above the CPU's is chosen.
enum ggml_cpu_isa {
    GGML_CPU_ISA_SCALAR = 0,
    GGML_CPU_ISA_AVX2   = 1,   // AVX2 + FMA + F16C
    GGML_CPU_ISA_AVX512 = 2,   // AVX512 F/BW/VL/DQ + VNNI
    GGML_CPU_ISA_NEON   = 3,   // arm64 (a separate family; never compared with the x86 levels)
    GGML_CPU_ISA_COUNT,
};

bool ggml_cpu_has_avx2(void);
bool ggml_cpu_has_avx512(void);       // F, BW, VL, DQ
bool ggml_cpu_has_avx512_vnni(void);
bool ggml_cpu_has_avx512_bf16(void);
bool ggml_cpu_has_neon(void);
enum ggml_cpu_isa ggml_cpu_detected_isa(void);
// Cap the ISA used for kernel selection (tests compare SIMD paths with the scalar one;
// KILN_CPU_ISA=scalar|avx2|avx512 in the environment does the same at start-up).
void ggml_cpu_set_isa(enum ggml_cpu_isa isa);
enum ggml_cpu_isa ggml_cpu_get_isa(void);
const char * ggml_cpu_isa_name(enum ggml_cpu_isa isa);
const char * ggml_cpu_features(void);   // "AVX2 = 1 | AVX512 = 1 | ..." for logs

ggml_backend_t ggml_backend_cpu_init(void);
bool ggml_backend_is_cpu(ggml_backend_t backend);
void ggml_backend_cpu_set_n_threads(ggml_backend_t backend, int n_threads);
ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void);
// Wrap memory the caller owns (e.g. an mmap of a model file) as a CPU buffer.
ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size);

// Convenience for tests and tools: run a graph on the CPU with n threads.
enum ggml_status ggml_graph_compute_cpu(struct ggml_cgraph * graph, int n_threads);

#ifdef __cplusplus
}
#endif
