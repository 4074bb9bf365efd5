// Device helpers shared by the kernels (ops-*.cu only): element access by type, strided
// indexing, warp and block reductions, and launch sizes. Kernels favour plain code that is easy
// to check against the CPU over cleverness: one thread per element, one block per row, one warp
// per dot product.
#pragma once

#include "cuda-common.h"
#include "quants/quants-blocks.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

constexpr int k_block_threads = 256;
constexpr int k_warp = 32;

// Blocks for a grid-stride loop over n items (kernels loop, so the grid may be capped).
static inline unsigned cuda_blocks_for(int64_t n, int threads = k_block_threads) {
    const int64_t b = (n + threads - 1) / threads;
    return (unsigned) (b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

// f32 / f16 / bf16 element access (the types the element-wise kernels take).
static __device__ __forceinline__ float load_float(const char * p, int type) {
    switch (type) {
        case GGML_TYPE_F16: return kiln_fp16_to_f32(*(const ggml_fp16_t *) p);
        case GGML_TYPE_BF16: return kiln_bf16_to_f32(*(const ggml_bf16_t *) p);
        default: return *(const float *) p;
    }
}

static __device__ __forceinline__ void store_float(char * p, int type, float v) {
    switch (type) {
        case GGML_TYPE_F16: *(ggml_fp16_t *) p = kiln_f32_to_fp16(v); break;
        case GGML_TYPE_BF16: *(ggml_bf16_t *) p = kiln_f32_to_bf16(v); break;
        default: *(float *) p = v; break;
    }
}

static inline bool cuda_is_float_type(int type) {
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
}

// Flat element index -> coordinates (ne[0] fastest), as the CPU counts elements.
struct coord4 { int64_t i0, i1, i2, i3; };
static __device__ __forceinline__ coord4 unravel(int64_t i, const int64_t * ne) {
    coord4 c;
    c.i0 = i % ne[0]; i /= ne[0];
    c.i1 = i % ne[1]; i /= ne[1];
    c.i2 = i % ne[2];
    c.i3 = i / ne[2];
    return c;
}

static __device__ __forceinline__ char * at(const cuda_view & v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return v.data + i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
}

static __device__ __forceinline__ char * row_at(const cuda_view & v, int64_t i1, int64_t i2, int64_t i3) {
    return v.data + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
}

// Row r (counted over dims 1..3) -> its coordinates.
static __device__ __forceinline__ coord4 row_coord(int64_t r, const int64_t * ne) {
    coord4 c;
    c.i0 = 0;
    c.i1 = r % ne[1]; r /= ne[1];
    c.i2 = r % ne[2];
    c.i3 = r / ne[2];
    return c;
}

static inline int64_t cuda_nrows(const cuda_view & v) { return v.ne[1] * v.ne[2] * v.ne[3]; }

static __device__ __forceinline__ float warp_sum(float x) {
    for (int o = k_warp / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

static __device__ __forceinline__ float warp_max(float x) {
    for (int o = k_warp / 2; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

// Sum / max over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result. `shared` holds 32 floats.
static __device__ __forceinline__ float block_sum(float x, float * shared) {
    x = warp_sum(x);
    const int lane = threadIdx.x % k_warp, wid = threadIdx.x / k_warp, nw = blockDim.x / k_warp;
    __syncthreads();   // shared may still be read by a previous reduction
    if (lane == 0) shared[wid] = x;
    __syncthreads();
    x = lane < nw ? shared[lane] : 0.0f;
    return warp_sum(x);
}

static __device__ __forceinline__ float block_max(float x, float * shared) {
    x = warp_max(x);
    const int lane = threadIdx.x % k_warp, wid = threadIdx.x / k_warp, nw = blockDim.x / k_warp;
    __syncthreads();
    if (lane == 0) shared[wid] = x;
    __syncthreads();
    x = lane < nw ? shared[lane] : -INFINITY;
    return warp_max(x);
}

// Chunk ch (values 32 ch .. 32 ch + 31) of weight row i1 (its index along dimension 1; `row` is
// where it starts, row_bytes the row stride) of a type of KILN_BLOCK_TYPES or
// KILN_INTERLEAVED_TYPES (quants-blocks.h): kiln_decode_row_chunk, the functions the host tests
// compare with the CPU decoders. An interleaved row is read from its group (i1 - i1 % R), so the
// caller passes the row index along dimension 1 of a tensor whose groups start at row 0.
// matmul: the values a matrix product uses, which for iq2_kt and iq3_kt carry the reference's
// inference-time factor (to_float's values do not). Placement never hands a kernel another type
// or an interleaved tensor cut inside a group (cuda_weight_rows_decodable gates every op that
// decodes).
static __device__ __forceinline__ void decode_row_chunk(int type, const char * row, int64_t i1, int64_t row_bytes, int64_t ch,
                                                        float * y, bool matmul = false) {
    kiln_decode_row_chunk(type, row, i1, row_bytes, ch, y, matmul);
}

// The ALiBi slope of head h (1 without max_bias), as ggml_cpu_alibi_slope computes it.
static __device__ float alibi_slope(float max_bias, int64_t n_head, int64_t h) {
    if (max_bias <= 0.0f) return 1.0f;
    const int64_t n_head_log2 = int64_t(1) << (int64_t) floor(log2((double) n_head));
    const float m0 = powf(2.0f, -max_bias / n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);
    return h < n_head_log2 ? powf(m0, (float) (h + 1)) : powf(m1, (float) (2 * (h - n_head_log2) + 1));
}

// The activations in the CPU's forms (cpu/ops-vec.cpp): GELU is the tanh approximation written
// as x * sigmoid(2u), which avoids the cancellation of 1 + tanh(u) for negative u.
static __device__ __forceinline__ float silu1(float x) { return x / (1.0f + expf(-x)); }
static __device__ __forceinline__ float gelu1(float x) {
    const float u = 0.7978845608028654f * x * (1.0f + 0.044715f * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

// Launch check: a launch error (bad configuration) is reported at once, not at the sync.
#define CUDA_LAUNCHED() CUDA_OK(cudaGetLastError())
