// The registration functions of the AVX512 kernel files. Only ggml_cpu_register_avx512() (register.cpp)
// calls them, and only the dispatcher (cpu-traits.cpp) calls that, after cpuid has shown the set.
//
// Rules for every file in this folder (it is compiled with AVX512 flags, so any code the compiler
// emits here may use AVX512 instructions):
//  - no static initializers and no globals with constructors: they would run at library load,
//    before the CPU has been checked (tables are constexpr or filled inside the register function);
//  - everything file-local lives in an anonymous namespace or is static, including templates;
//  - no std:: containers or algorithms whose non-inlined instantiations the linker could merge
//    with the baseline copies used by generic files (one definition wins for every caller).
// tests/tools/isa-symbols.sh enforces the last two on the object files: the only global symbols
// defined here are these functions, and nothing is weak.
#pragma once

void ggml_cpu_register_float_gemm_avx512();
void ggml_cpu_register_vec_avx512();
void ggml_cpu_register_attn_cache_avx512();
void ggml_cpu_register_attn_tile_avx512();
void ggml_cpu_register_ik_avx512();
void ggml_cpu_register_iq_avx512();
void ggml_cpu_register_iq_vbmi_avx512();   // only where cpuid reports VBMI
void ggml_cpu_register_interleaved_vbmi_avx512();   // likewise
void ggml_cpu_register_k_avx512();
void ggml_cpu_register_k_gfni_avx512();   // only where cpuid reports GFNI (with VBMI), after the line above
void ggml_cpu_register_legacy_avx512();
void ggml_cpu_register_q8_avx512();
void ggml_cpu_register_kt_search_avx512();
void ggml_cpu_register_interleaved_avx512();
