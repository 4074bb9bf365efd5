// Run-time detection of the CPU's instruction sets, and the cap tests use to force a level.
#include "cpu-isa.h"
#include "cpu-traits.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <asm/hwcap.h>
#endif

namespace {

struct cpu_features {
    bool avx2 = false, avx512 = false, avx512_vnni = false, avx512_bf16 = false, avx512_vbmi = false, avx512_gfni = false;
    bool neon = false, dotprod = false, i8mm = false, arm_fp16 = false, arm_bf16 = false, sve = false;
};

#if defined(__x86_64__) || defined(__i386__)
// F16C and BMI2 straight from cpuid: clang's __builtin_cpu_supports does not know their names.
bool has_f16c_and_bmi2() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C)) return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_BMI2);
}
#endif

const cpu_features & features() {
    static const cpu_features f = [] {
        cpu_features r;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        // the AVX2 folder is compiled with -mavx2 -mfma -mf16c -mbmi2: the level needs all four
        r.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c_and_bmi2();
        r.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
        r.avx512_vnni = r.avx512 && __builtin_cpu_supports("avx512vnni");
        r.avx512_bf16 = r.avx512 && __builtin_cpu_supports("avx512bf16");
        // KILN_CPU_VBMI=0 keeps the plain AVX512 kernels where VBMI ones exist (tests run both)
        const char * vbmi_env = std::getenv("KILN_CPU_VBMI");
        r.avx512_vbmi = r.avx512 && __builtin_cpu_supports("avx512vbmi") && !(vbmi_env && !std::strcmp(vbmi_env, "0"));
        // GFNI kernels sit beside the VBMI ones (every AVX512 CPU with VBMI but Cannon Lake has it), and
        // the same switch keeps the plain kernels
        r.avx512_gfni = r.avx512_vbmi && __builtin_cpu_supports("gfni");
#elif defined(__aarch64__)
        r.neon = true;   // Advanced SIMD is mandatory in arm64
#if defined(__linux__)
        // The kernel reports what user space may execute (an emulator reports what it emulates).
        const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
        r.dotprod = (hw & HWCAP_ASIMDDP) != 0;
        r.arm_fp16 = (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
        r.sve = (hw & HWCAP_SVE) != 0;
        r.i8mm = (hw2 & HWCAP2_I8MM) != 0;
        r.arm_bf16 = (hw2 & HWCAP2_BF16) != 0;
#endif
#endif
        return r;
    }();
    return f;
}

ggml_cpu_isa detect() {
    const auto & f = features();
    // the i8mm kernels also use SDOT for their odd rows/columns, so that level needs both
    if (f.neon && f.dotprod && f.i8mm) return GGML_CPU_ISA_NEON_I8MM;
    if (f.neon && f.dotprod) return GGML_CPU_ISA_NEON_DOTPROD;
    if (f.neon) return GGML_CPU_ISA_NEON;
    if (f.avx512 && f.avx512_vnni && f.avx2) return GGML_CPU_ISA_AVX512;
    if (f.avx2) return GGML_CPU_ISA_AVX2;
    return GGML_CPU_ISA_SCALAR;
}

ggml_cpu_isa lower(ggml_cpu_isa isa) {
    switch (isa) {
        case GGML_CPU_ISA_AVX512:       return GGML_CPU_ISA_AVX2;
        case GGML_CPU_ISA_NEON_I8MM:    return GGML_CPU_ISA_NEON_DOTPROD;
        case GGML_CPU_ISA_NEON_DOTPROD: return GGML_CPU_ISA_NEON;
        default:                        return GGML_CPU_ISA_SCALAR;
    }
}

// isa lies on the chain at or below hw
bool runs_on(ggml_cpu_isa isa, ggml_cpu_isa hw) {
    for (ggml_cpu_isa l = hw;; l = lower(l)) {
        if (l == isa) return true;
        if (l == GGML_CPU_ISA_SCALAR) return false;
    }
}

ggml_cpu_isa initial_isa() {
    ggml_cpu_isa isa = detect();
    if (const char * env = std::getenv("KILN_CPU_ISA")) {
        ggml_cpu_isa want = isa;
        if (!std::strcmp(env, "scalar")) want = GGML_CPU_ISA_SCALAR;
        else if (!std::strcmp(env, "avx2")) want = GGML_CPU_ISA_AVX2;
        else if (!std::strcmp(env, "avx512")) want = GGML_CPU_ISA_AVX512;
        else if (!std::strcmp(env, "neon")) want = GGML_CPU_ISA_NEON;
        else if (!std::strcmp(env, "dotprod")) want = GGML_CPU_ISA_NEON_DOTPROD;
        else if (!std::strcmp(env, "i8mm")) want = GGML_CPU_ISA_NEON_I8MM;
        if (runs_on(want, isa)) isa = want;
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
bool ggml_cpu_has_avx512_vbmi(void) { return features().avx512_vbmi; }
bool ggml_cpu_has_avx512_gfni(void) { return features().avx512_gfni; }
bool ggml_cpu_has_neon(void)        { return features().neon; }
bool ggml_cpu_has_dotprod(void)     { return features().dotprod; }
bool ggml_cpu_has_i8mm(void)        { return features().i8mm; }
bool ggml_cpu_has_arm_fp16(void)    { return features().arm_fp16; }
bool ggml_cpu_has_arm_bf16(void)    { return features().arm_bf16; }
bool ggml_cpu_has_sve(void)         { return features().sve; }
ggml_cpu_isa ggml_cpu_detected_isa(void) { return detect(); }
ggml_cpu_isa ggml_cpu_isa_lower(ggml_cpu_isa isa) { return lower(isa); }
bool ggml_cpu_isa_runs_here(ggml_cpu_isa isa) { return runs_on(isa, detect()); }

void ggml_cpu_set_isa(ggml_cpu_isa isa) {
    const ggml_cpu_isa hw = detect();
    if (!runs_on(isa, hw)) isa = hw;   // never a level the CPU cannot run
    isa_cap().store((int) isa);
}

ggml_cpu_isa ggml_cpu_get_isa(void) { return (ggml_cpu_isa) isa_cap().load(std::memory_order_relaxed); }

const char * ggml_cpu_isa_name(ggml_cpu_isa isa) {
    switch (isa) {
        case GGML_CPU_ISA_SCALAR: return "scalar";
        case GGML_CPU_ISA_AVX2:   return "avx2";
        case GGML_CPU_ISA_AVX512: return "avx512";
        case GGML_CPU_ISA_NEON:   return "neon";
        case GGML_CPU_ISA_NEON_DOTPROD: return "dotprod";
        case GGML_CPU_ISA_NEON_I8MM:    return "i8mm";
        default:                  return "?";
    }
}

const char * ggml_cpu_features(void) {
    static const std::string s = [] {
        const auto & f = features();
        std::string r;
#if defined(__aarch64__)
        r += "NEON = " + std::to_string(f.neon);
        r += " | DOTPROD = " + std::to_string(f.dotprod);
        r += " | I8MM = " + std::to_string(f.i8mm);
        r += " | FP16 = " + std::to_string(f.arm_fp16);
        r += " | BF16 = " + std::to_string(f.arm_bf16);
        r += " | SVE = " + std::to_string(f.sve);
#else
        r += "AVX2 = " + std::to_string(f.avx2);
        r += " | AVX512 = " + std::to_string(f.avx512);
        r += " | AVX512_VNNI = " + std::to_string(f.avx512_vnni);
        r += " | AVX512_BF16 = " + std::to_string(f.avx512_bf16);
        r += " | NEON = " + std::to_string(f.neon);
#endif
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
        if (runs_on(GGML_CPU_ISA_AVX2, hw)) ggml_cpu_register_avx2();
        if (runs_on(GGML_CPU_ISA_AVX512, hw)) ggml_cpu_register_avx512();
#elif defined(__aarch64__)
        // the NEON folder registers its dotprod / i8mm functions only where detect() found them
        if (runs_on(GGML_CPU_ISA_NEON, detect())) ggml_cpu_register_neon();
#endif
        return true;
    }();
    (void) registered;
}
