// Internal helpers shared by the tensor library's translation units.
#pragma once

#include "ggml.h"

#include <cmath>
#include <cstring>

// Run fn() once at library load: quant families and generic (baseline-ISA) kernels register
// themselves this way. (ggml is a shared library, so every object file is linked and its
// initializers run.)
#define GGML_CONCAT_(a, b) a##b
#define GGML_CONCAT(a, b) GGML_CONCAT_(a, b)
#define GGML_REGISTER(fn) static const int GGML_CONCAT(ggml_registered_, __LINE__) = ((fn)(), 0)

static inline int64_t ggml_up_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline size_t  ggml_pad(size_t x, size_t n) { return (x + n - 1) / n * n; }

static inline void ggml_set_op_params(ggml_tensor * t, const void * params, size_t size) {
    GGML_ASSERT(size <= GGML_MAX_OP_PARAMS);
    std::memcpy(t->op_params, params, size);
}
static inline int32_t ggml_get_op_params_i32(const ggml_tensor * t, int i) { return t->op_params[i]; }
static inline float ggml_get_op_params_f32(const ggml_tensor * t, int i) {
    float f;
    std::memcpy(&f, &t->op_params[i], sizeof(f));
    return f;
}
static inline void ggml_set_op_params_i32(ggml_tensor * t, int i, int32_t v) { t->op_params[i] = v; }
static inline void ggml_set_op_params_f32(ggml_tensor * t, int i, float v) { std::memcpy(&t->op_params[i], &v, sizeof(v)); }

// The scalar fp16 <-> fp32 conversions used by reference code (exact, IEEE round to nearest even).
static inline float ggml_compute_fp16_to_fp32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exp  = (h >> 10) & 0x1f;
    const uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { // subnormal: normalize
            int e = -1;
            uint32_t m = mant;
            do { m <<= 1; ++e; } while ((m & 0x400) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((m & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
}

static inline uint16_t ggml_compute_fp32_to_fp16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof(x));
    const uint32_t sign = (x >> 16) & 0x8000;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) { // inf or NaN
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    }
    if (absx >= 0x477ff000u) { // rounds to >= 65520: overflow to inf
        return (uint16_t)(sign | 0x7c00);
    }
    if (absx < 0x38800000u) { // result is subnormal or zero: round in the fixed-point domain
        if (absx < 0x33000000u) return (uint16_t)sign; // < 2^-25 rounds to zero
        const uint32_t e = absx >> 23;
        const uint32_t m = (absx & 0x7fffff) | 0x800000;
        const int shift = 126 - (int)e;  // 14 + (113 - e)
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) ++r;
        return (uint16_t)(sign | r);
    }
    uint32_t r = absx - 0x38000000u; // rebias exponent 127 -> 15
    const uint32_t rem = r & 0x1fff;
    r >>= 13;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
    return (uint16_t)(sign | r);
}

static inline float ggml_compute_bf16_to_fp32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
}

static inline uint16_t ggml_compute_fp32_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64); // quiet NaN
    return (uint16_t)((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

#define GGML_FP16_TO_FP32(x) ggml_compute_fp16_to_fp32(x)
#define GGML_FP32_TO_FP16(x) ggml_compute_fp32_to_fp16(x)

// Append a node to a graph without visiting its sources (graphs made of a node range).
void ggml_graph_add_node(ggml_cgraph * graph, ggml_tensor * node);
void ggml_graph_add_leaf(ggml_cgraph * graph, ggml_tensor * leaf);

// Code compiled for an instruction set (ggml/src/cpu/avx2/, avx512/) never registers itself this
// way: a static initializer there would run at library load, before the CPU is checked. Its one
// entry point is called by the CPU dispatcher instead (cpu/cpu-isa.h).
