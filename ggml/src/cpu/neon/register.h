// The registration functions of the NEON kernel files. Only ggml_cpu_register_neon() (register.cpp)
// calls them, and only the dispatcher (cpu-features.cpp) calls that, on arm64.
//
// Advanced SIMD is part of every arm64 CPU, so this folder is compiled with the baseline flags; the
// same rules as avx2/register.h hold anyway, because the SDOT (dotprod) and SMMLA (i8mm) functions
// here are compiled for extensions a CPU may lack:
//  - no static initializers and no globals with constructors;
//  - everything file-local lives in an anonymous namespace or is static, templates included;
//  - no std:: containers or algorithms (their out-of-line copies could be shared with baseline
//    code and carry extension instructions);
//  - functions using an extension carry __attribute__((target(...))) (KILN_NEON_DOTPROD in
//    simd.h) and are registered at their own level only when getauxval reports the extension
//    (ggml_cpu_isa_runs_here).
// tests/isa/symbols.sh checks the object files for the first three.
#pragma once

void ggml_cpu_register_vec_neon();
void ggml_cpu_register_float_gemm_neon();
void ggml_cpu_register_q8_neon();
void ggml_cpu_register_legacy_neon();
void ggml_cpu_register_k_neon();
void ggml_cpu_register_iq_neon();
void ggml_cpu_register_ik_neon();
void ggml_cpu_register_kt_neon();
void ggml_cpu_register_interleaved_neon();
void ggml_cpu_register_interleaved_float_neon();
