// Run-time detection of the CPU's instruction sets, and the cap tests use to force a level.
#include "cpu-isa.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct cpu_features {
    bool avx2 = false, avx512 = false, avx512_vnni = false, avx512_bf16 = false, neon = false;
};

const cpu_features & features() {
    static const cpu_features f = [] {
        cpu_features r;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        // the AVX2 folder is compiled with -mavx2 -mfma -mf16c -mbmi2: the level needs all four
        r.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                 __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
        r.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
        r.avx512_vnni = r.avx512 && __builtin_cpu_supports("avx512vnni");
        r.avx512_bf16 = r.avx512 && __builtin_cpu_supports("avx512bf16");
#elif defined(__aarch64__)
        r.neon = true;
#endif
        return r;
    }();
    return f;
}

ggml_cpu_isa detect() {
    const auto & f = features();
    if (f.neon) return GGML_CPU_ISA_NEON;
    if (f.avx512 && f.avx512_vnni && f.avx2) return GGML_CPU_ISA_AVX512;
    if (f.avx2) return GGML_CPU_ISA_AVX2;
    return GGML_CPU_ISA_SCALAR;
}

ggml_cpu_isa initial_isa() {
    ggml_cpu_isa isa = detect();
    if (const char * env = std::getenv("KILN_CPU_ISA")) {
        ggml_cpu_isa want = isa;
        if (!std::strcmp(env, "scalar")) want = GGML_CPU_ISA_SCALAR;
        else if (!std::strcmp(env, "avx2")) want = GGML_CPU_ISA_AVX2;
        else if (!std::strcmp(env, "avx512")) want = GGML_CPU_ISA_AVX512;
        if (isa != GGML_CPU_ISA_NEON && want < isa) isa = want;
    }
    return isa;
}

std::atomic<int> & isa_cap() {
    static std::atomic<int> cap{ (int) initial_isa() };
    return cap;
}

} // namespace

extern "C" {

bool ggml_cpu_has_avx2(void)        { return features().avx2; }
bool ggml_cpu_has_avx512(void)      { return features().avx512; }
bool ggml_cpu_has_avx512_vnni(void) { return features().avx512_vnni; }
bool ggml_cpu_has_avx512_bf16(void) { return features().avx512_bf16; }
bool ggml_cpu_has_neon(void)        { return features().neon; }
ggml_cpu_isa ggml_cpu_detected_isa(void) { return detect(); }

void ggml_cpu_set_isa(ggml_cpu_isa isa) {
    const ggml_cpu_isa hw = detect();
    if (hw != GGML_CPU_ISA_NEON && isa > hw) isa = hw;   // never above what the CPU runs
    if (hw == GGML_CPU_ISA_NEON && isa != GGML_CPU_ISA_SCALAR) isa = GGML_CPU_ISA_NEON;
    isa_cap().store((int) isa);
}

ggml_cpu_isa ggml_cpu_get_isa(void) { return (ggml_cpu_isa) isa_cap().load(std::memory_order_relaxed); }

const char * ggml_cpu_isa_name(ggml_cpu_isa isa) {
    switch (isa) {
        case GGML_CPU_ISA_SCALAR: return "scalar";
        case GGML_CPU_ISA_AVX2:   return "avx2";
        case GGML_CPU_ISA_AVX512: return "avx512";
        case GGML_CPU_ISA_NEON:   return "neon";
        default:                  return "?";
    }
}

const char * ggml_cpu_features(void) {
    static const std::string s = [] {
        const auto & f = features();
        std::string r;
        r += "AVX2 = " + std::to_string(f.avx2);
        r += " | AVX512 = " + std::to_string(f.avx512);
        r += " | AVX512_VNNI = " + std::to_string(f.avx512_vnni);
        r += " | AVX512_BF16 = " + std::to_string(f.avx512_bf16);
        r += " | NEON = " + std::to_string(f.neon);
        return r;
    }();
    return s.c_str();
}

} // extern "C"

// The only caller of the per-ISA entry points (cpu-isa.h). detect() runs cpuid in baseline code
// first; a level's kernels are registered only when the CPU has its instruction set, whatever
// KILN_CPU_ISA says (the cap selects among registered levels at run time, so tests can compare).
void ggml_cpu_ensure_kernels() {
    static const bool registered = [] {
#if defined(__x86_64__) || defined(__i386__)
        const ggml_cpu_isa hw = detect();
        if (hw >= GGML_CPU_ISA_AVX2 && hw != GGML_CPU_ISA_NEON) ggml_cpu_register_avx2();
        if (hw == GGML_CPU_ISA_AVX512) ggml_cpu_register_avx512();
#endif
        return true;
    }();
    (void) registered;
}
