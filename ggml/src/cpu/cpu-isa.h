// The entry points of the per-ISA kernel folders, and the one place that calls them.
//
// Files under avx2/ and avx512/ are compiled with those instruction sets enabled, so the compiler
// may use them anywhere in that code, initializers included. Nothing there may run before cpuid
// has said the set is present: each folder exposes a single plain function (its register.cpp),
// and ggml_cpu_ensure_kernels() calls it on first use of the kernel tables, never at load time.
// neon/ is compiled for baseline arm64, but its dotprod and i8mm functions are not, so it follows
// the same rules and registers those only where getauxval reports the extension.
#pragma once

void ggml_cpu_register_avx2();     // avx2/register.cpp
void ggml_cpu_register_avx512();   // avx512/register.cpp
void ggml_cpu_register_neon();     // neon/register.cpp (arm64 builds only)

// Registers the kernels of every ISA level this CPU has (once; thread-safe). Every reader of the
// kernel tables calls it first; registration itself does not.
void ggml_cpu_ensure_kernels();
