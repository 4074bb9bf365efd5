// Small NEON helpers shared by the files of this folder. Everything here is static inline (see
// register.h: no function of this folder may have external linkage besides the entry points).
#pragma once

#include <arm_neon.h>

#include <cmath>
#include <cstdint>
#include <cstring>

// Code that uses SDOT is compiled for this target and registered only at GGML_CPU_ISA_NEON_DOTPROD,
// i.e. where HWCAP_ASIMDDP is set. Kernel loops written once for both levels live in a *.inc file
// that the kernel file includes twice: in a namespace whose Dot is neon_dot_plain, and between
// KILN_NEON_DOTPROD_BEGIN / KILN_NEON_DOTPROD_END in one whose Dot is neon_dot_sdot, so that every
// function of the second copy, template instantiations included, carries the target. (A target
// attribute on the entry point alone is not enough: GCC compiles a template the entry point calls
// with the options of the template's definition, and SDOT then fails to inline into it.)
#define KILN_NEON_DOTPROD_TARGET "arch=armv8.2-a+dotprod"
#define KILN_NEON_DOTPROD_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"arch=armv8.2-a+dotprod\")")
#define KILN_NEON_DOTPROD_END _Pragma("GCC pop_options")
// SMMLA code (GGML_CPU_ISA_NEON_I8MM, where HWCAP2_I8MM is set; detection also requires dotprod,
// which these kernels use for odd rows and columns).
#define KILN_NEON_I8MM_TARGET "arch=armv8.2-a+dotprod+i8mm"
#define KILN_NEON_I8MM_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"arch=armv8.2-a+dotprod+i8mm\")")
#define KILN_NEON_I8MM_END _Pragma("GCC pop_options")
// BFDOT code (FEAT_BF16, HWCAP2_BF16; registered at the dotprod level, which such CPUs have).
#define KILN_NEON_BF16_TARGET "arch=armv8.2-a+dotprod+bf16"
#define KILN_NEON_BF16_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"arch=armv8.2-a+dotprod+bf16\")")
#define KILN_NEON_BF16_END _Pragma("GCC pop_options")

// Tails shorter than a vector go through a zero-padded copy, so every element takes the same
// arithmetic as the body and nothing past the end is read or written.
static inline float32x4_t neon_load_part(const float * x, int64_t n) {
    float t[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
    std::memcpy(t, x, (size_t) n * sizeof(float));
    return vld1q_f32(t);
}

static inline void neon_store_part(float * y, float32x4_t v, int64_t n) {
    float t[4];
    vst1q_f32(t, v);
    std::memcpy(y, t, (size_t) n * sizeof(float));
}

// e^x: x = k*ln2 + r with |r| <= ln2/2, a degree-6 polynomial for e^r (relative error ~1e-7), 2^k
// built in the exponent bits. Below -87.3 the result is 0 (so -inf gives 0), above 88.37 inf.
static inline float32x4_t neon_exp(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.33654f), hi = vdupq_n_f32(88.37626f);
    const float32x4_t xc = vminq_f32(vmaxq_f32(x, lo), hi);
    const float32x4_t k = vrndnq_f32(vmulq_n_f32(xc, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(xc, k, vdupq_n_f32(0.693359375f));   // ln2 split in two for exactness
    r = vfmsq_f32(r, k, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(k), vdupq_n_s32(127)), 23);
    float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    y = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), vcltq_f32(x, lo)));
    return vbslq_f32(vcgtq_f32(x, hi), vdupq_n_f32(INFINITY), y);
}

// 16 signed bytes . 16 signed bytes, accumulated into four int32 lanes: the plain Armv8 form
// (widening multiplies, pairwise accumulate) and the SDOT form. Lane contents differ between the
// two; only the sum of the four lanes is meaningful. The plain form holds two products in an
// int16: callers keep |w * x| <= 127 * 128 (no -128 x -128; q8 activations never reach -128).
struct neon_dot_plain {
    static inline int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t x) {
        const int16x8_t p = vmlal_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), vget_high_s8(w), vget_high_s8(x));
        return vpadalq_s16(acc, p);
    }
};

struct neon_dot_sdot {
    static inline __attribute__((target(KILN_NEON_DOTPROD_TARGET))) int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t x) {
        return vdotq_s32(acc, w, x);
    }
};
