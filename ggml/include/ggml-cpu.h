// CPU backend: features, threads, kernel selection.
#pragma once

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// Instruction-set levels. Each architecture has its own chain of levels, each including the one
// below it: x86-64 scalar < AVX2 < AVX512, arm64 scalar < NEON < NEON_DOTPROD < NEON_I8MM. A kernel
// registered for a level runs on any CPU that has that level; selection walks down the chain from
// the cap (ggml_cpu_isa_lower) to the first level with a kernel. The numeric ids are stable.
enum ggml_cpu_isa {
    GGML_CPU_ISA_SCALAR       = 0,
    GGML_CPU_ISA_AVX2         = 1,   // AVX2 + FMA + F16C
    GGML_CPU_ISA_AVX512       = 2,   // AVX512 F/BW/VL/DQ + VNNI
    GGML_CPU_ISA_NEON         = 3,   // arm64 Advanced SIMD (every arm64 CPU)
    GGML_CPU_ISA_NEON_DOTPROD = 4,   // + SDOT/UDOT (Armv8.2 dotprod)
    GGML_CPU_ISA_NEON_I8MM    = 5,   // + SMMLA/USMMLA (Armv8.6 i8mm)
    GGML_CPU_ISA_COUNT,
};

bool ggml_cpu_has_avx2(void);
bool ggml_cpu_has_avx512(void);       // F, BW, VL, DQ
bool ggml_cpu_has_avx512_vnni(void);
bool ggml_cpu_has_avx512_bf16(void);
bool ggml_cpu_has_avx512_vbmi(void);  // byte permutes (vpermb, vpermi2b, vpmultishiftqb)
bool ggml_cpu_has_avx512_gfni(void);  // GF(2) bit-matrix byte transforms, with the VBMI set (KILN_CPU_VBMI=0 turns both off)
bool ggml_cpu_has_neon(void);
bool ggml_cpu_has_dotprod(void);      // arm64 HWCAP_ASIMDDP
bool ggml_cpu_has_i8mm(void);         // arm64 HWCAP2_I8MM
bool ggml_cpu_has_arm_fp16(void);     // arm64 HWCAP_FPHP + HWCAP_ASIMDHP (half-precision arithmetic)
bool ggml_cpu_has_arm_bf16(void);     // arm64 HWCAP2_BF16
bool ggml_cpu_has_sve(void);          // arm64 HWCAP_SVE
enum ggml_cpu_isa ggml_cpu_detected_isa(void);
// The level below isa in its architecture's chain (GGML_CPU_ISA_SCALAR for the lowest levels).
enum ggml_cpu_isa ggml_cpu_isa_lower(enum ggml_cpu_isa isa);
// Whether this CPU runs isa: it lies on the chain below the detected level (scalar always does).
bool ggml_cpu_isa_runs_here(enum ggml_cpu_isa isa);
// Cap the ISA used for kernel selection (tests compare SIMD paths with the scalar one;
// KILN_CPU_ISA=scalar|avx2|avx512|neon|dotprod|i8mm in the environment does the same at start-up;
// a level this CPU does not run is ignored).
void ggml_cpu_set_isa(enum ggml_cpu_isa isa);
enum ggml_cpu_isa ggml_cpu_get_isa(void);
const char * ggml_cpu_isa_name(enum ggml_cpu_isa isa);
const char * ggml_cpu_features(void);   // "AVX2 = 1 | AVX512 = 1 | ..." for logs

// How batch products (8+ activation columns) of q4_K, q5_K and q6_K round their activations.
// true (the default): per 32 values (q8_0), as the reference's batch path does; false: per 256
// (q8_K, their token-generation type) for batches too. Per 256 lets one outlier channel coarsen
// the rounding of its 255 neighbours: up to 2x the product error on hidden states with large
// channels; per 32 costs prompt processing time (kiln-bench-matmul -t 1 -K 2048 -M 4096
// --batches 512, Zen 4, CPU time): 8% to 11% on AVX512; on AVX2 5% to 13% (q4_K, q5_K) and
// 26% to 29% (q6_K). x86 only so far: NEON has no per-32 batch kernels and keeps q8_K.
// KILN_BATCH_ACT=per32|per256 in the environment sets it at start-up (another value is an
// error). Set it before graphs are planned: it decides the size of their activation buffers.
void ggml_cpu_set_batch_act_per32(bool on);
bool ggml_cpu_get_batch_act_per32(void);

// Exact matrix products, for measurement only: the weight rows decoded to floats times the
// unrounded f32 activations, summed in double, at every ISA level (interleaved layouts keep their
// kernels). The KL-divergence of a quantized model then depends on its weights alone, not on the
// activation rounding of the product path (q8_0 per 32 moves a random-weight model's KLD by ~1%).
// Many times slower than the kernels. KILN_EXACT_MATMUL=0|1 in the environment sets it at
// start-up (another value is an error). Set it before graphs are planned (buffer sizes).
void ggml_cpu_set_exact_products(bool on);
bool ggml_cpu_get_exact_products(void);

// Whether repacking weights into the row-interleaved layout `interleaved` (-rtr) pays at the
// current ISA cap: its kernels were measured at least as fast as its plain twin's, at batch 1
// (token generation) and in batches (kiln-bench-matmul). False for layouts whose products still
// go through unweaving or decoded floats.
bool ggml_cpu_repack_pays(enum ggml_type interleaved);

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
