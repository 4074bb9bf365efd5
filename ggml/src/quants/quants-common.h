// Block layouts shared between quant families: the activation types the dot kernels use.
// (Each weight family defines its own blocks in its own file; these are used by several.)
#pragma once

#include "ggml-impl.h"

#include <cstdint>

#define QK4_0 32
#define QK8_0 32
#define QK8_1 32
#define QK_K  256

// q8_0: 32 int8 values with an fp16 scale.
struct block_q8_0 {
    ggml_fp16_t d;
    int8_t      qs[QK8_0];
};
static_assert(sizeof(block_q8_0) == 34, "q8_0 block size");

// q8_1: 32 int8 values, fp16 scale d and fp16 s = d * sum(qs) (lets offset formats add their min).
struct block_q8_1 {
    ggml_fp16_t d;
    ggml_fp16_t s;
    int8_t      qs[QK8_1];
};
static_assert(sizeof(block_q8_1) == 36, "q8_1 block size");

// q8_K: 256 int8 values with an f32 scale and the sums of each group of 16 (for k-quant minimums).
// Internal to the CPU kernels (never stored in files).
struct block_q8_K {
    float   d;
    int8_t  qs[QK_K];
    int16_t bsums[QK_K / 16];
};
static_assert(sizeof(block_q8_K) == 292, "q8_K block size");

// Reference encoders of the activation types (quants-q8.cpp). Non-finite input is the caller's
// problem here: activations are checked upstream.
void quantize_row_q8_0_ref(const float * x, void * y, int64_t n);
void quantize_row_q8_1_ref(const float * x, void * y, int64_t n);
void quantize_row_q8_K_ref(const float * x, void * y, int64_t n);
// q8_KV: a row-wide scale (row metadata: f32 d, i32 sum of the quants), int8 quants.
void quantize_row_q8_KV_ref(const float * x, void * y, int64_t n);
void q8_KV_to_float(const void * x, float * y, int64_t n);
