// Block layouts shared between quant families: the activation types the dot kernels use.
// (Each weight family defines its own blocks in its own file; these are used by several.)
#pragma once

#include "ggml-impl.h"
#include "quants-blocks.h"   // the layouts the CUDA kernels share (q8_0, q8_1, ...)

#include <cstdint>

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
