// q8_KV_r8 against f32 activations: its activation type is its twin's (decoded_gemm_activation_type:
// plain q8_KV has no integer product, it runs the decoded float one), so this is a float product
// that reads the woven int8 runs directly instead of decoding whole groups to floats first.
//
// A run of 32 bytes holds values 4 m .. 4 m + 3 of the 8 rows: as four 8-float vectors (rows 2t,
// 2t + 1 x 4 values) each multiplies the column's 4 values broadcast to both halves, so per row
// pair the accumulator keeps 4 partial sums, added across at the end (three hadds and a permute
// give the 8 rows in order) and scaled by the f32 row scales. Columns go C at a time, so each run
// is converted once per C columns.
//
// The plain q8_KV rows' product is at the end. AVX2 + FMA only; included by the AVX2 and AVX512 folders, each with its own C (the AVX512 file
// has 32 vector registers for the 4 C accumulators).
#pragma once

#include <immintrin.h>

#include "cpu-traits.h"
#include "simd.h"

#include <cstring>

namespace {
namespace q8_kv_r8 {

template <int C>
inline void tile(int64_t n, const int8_t * q, const float * d, const float * x, size_t x_stride, float * dst,
                 size_t dst_stride) {
    __m256 acc[C][4];
    for (int c = 0; c < C; ++c) {
        for (int t = 0; t < 4; ++t) acc[c][t] = _mm256_setzero_ps();
    }
    for (int64_t m = 0; m < n / 4; ++m) {
        __m256 w[4];
        for (int t = 0; t < 4; ++t) {
            int64_t b;
            std::memcpy(&b, q + 32 * m + 8 * t, 8);
            w[t] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(b)));
        }
        for (int c = 0; c < C; ++c) {
            const __m256 xb = _mm256_broadcast_ps((const __m128 *) (x + c * x_stride + 4 * m));
            for (int t = 0; t < 4; ++t) acc[c][t] = _mm256_fmadd_ps(w[t], xb, acc[c][t]);
        }
    }
    const __m256 scale = _mm256_loadu_ps(d);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int c = 0; c < C; ++c) {
        // [r0 r2 r4 r6 | r1 r3 r5 r7] after the hadds
        const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[c][0], acc[c][1]), _mm256_hadd_ps(acc[c][2], acc[c][3]));
        _mm256_storeu_ps(dst + c * dst_stride, _mm256_mul_ps(scale, _mm256_permutevar8x32_ps(h, order)));
    }
}

// x rows are f32 (x_stride in bytes, as every gemm); nr a multiple of 8.
template <int C>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride, int nr,
          int nc) {
    const size_t row_size = n + sizeof(float);
    const size_t xs = x_stride / sizeof(float);
    for (int r0 = 0; r0 < nr; r0 += 8) {
        const char * g = ggml_cpu_contiguous_group((const char *) w + r0 * w_stride, w_stride, row_size, 8);
        const float * d = (const float *) g;
        const int8_t * q = (const int8_t *) (d + 8);
        int c = 0;
        for (; c + C <= nc; c += C) tile<C>(n, q, d, (const float *) x + c * xs, xs, dst + c * dst_stride + r0, dst_stride);
        for (; c < nc; ++c) tile<1>(n, q, d, (const float *) x + c * xs, xs, dst + c * dst_stride + r0, dst_stride);
    }
}

} // namespace q8_kv_r8

// Plain q8_KV rows (an f32 scale, the i32 sum of the quants, then one int8 per value) against the
// same f32 activations: the decoded float product, without decoding a row to memory first. Per
// row, C columns at a time; 16 values per step into two accumulators per column (one FMA chain
// each), added and summed across once per row and column, then scaled.
namespace q8_kv {

constexpr size_t kRowHeader = 2 * sizeof(float);

inline __m256 load8(const int8_t * q) {
    int64_t b;
    std::memcpy(&b, q, 8);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(b)));
}

template <int C>
inline void row_tile(int64_t n, const int8_t * q, float d, const float * x, size_t xs, float * dst, size_t dst_stride) {
    __m256 acc[C][2];
    for (int c = 0; c < C; ++c) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {   // n: whole blocks of 32
        const __m256 w0 = load8(q + i), w1 = load8(q + i + 8);
        for (int c = 0; c < C; ++c) {
            acc[c][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + c * xs + i), acc[c][0]);
            acc[c][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + c * xs + i + 8), acc[c][1]);
        }
    }
    for (int c = 0; c < C; ++c) dst[c * dst_stride] = d * hsum8_ps(_mm256_add_ps(acc[c][0], acc[c][1]));
}

template <int C>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride, int nr,
          int nc) {
    const size_t xs = x_stride / sizeof(float);
    for (int r = 0; r < nr; ++r) {
        const char * row = (const char *) w + r * w_stride;
        float d;
        std::memcpy(&d, row, sizeof(float));
        const int8_t * q = (const int8_t *) (row + kRowHeader);
        int c = 0;
        for (; c + C <= nc; c += C) row_tile<C>(n, q, d, (const float *) x + c * xs, xs, dst + c * dst_stride + r, dst_stride);
        for (; c < nc; ++c) row_tile<1>(n, q, d, (const float *) x + c * xs, xs, dst + c * dst_stride + r, dst_stride);
    }
}

} // namespace q8_kv
} // namespace
