// The registration functions of the AVX2 kernel files. Only ggml_cpu_register_avx2() (register.cpp)
// calls them, and only the dispatcher (cpu-traits.cpp) calls that, after cpuid has shown the set.
//
// Rules for every file in this folder (it is compiled with AVX2 flags, so any code the compiler
// emits here may use AVX2 instructions):
//  - no static initializers and no globals with constructors: they would run at library load,
//    before the CPU has been checked (tables are constexpr or filled inside the register function);
//  - everything file-local lives in an anonymous namespace or is static, including templates;
//  - no std:: containers or algorithms whose non-inlined instantiations the linker could merge
//    with the baseline copies used by generic files (one definition wins for every caller).
// tests/tools/isa-symbols.sh enforces the last two on the object files: the only global symbols
// defined here are these functions, and nothing is weak.
#pragma once

void ggml_cpu_register_float_gemm_avx2();
void ggml_cpu_register_vec_avx2();
void ggml_cpu_register_attn_cache_avx2();
void ggml_cpu_register_ik_avx2();
void ggml_cpu_register_bitnet_avx2();
void ggml_cpu_register_iq_avx2();
void ggml_cpu_register_k_avx2();
void ggml_cpu_register_legacy_avx2();
void ggml_cpu_register_q8_avx2();
void ggml_cpu_register_kt_search_avx2();
void ggml_cpu_register_interleaved_avx2();
