// The 8-bit activation types q8_0, q8_1 and q8_K: reference encoders (the SIMD encoders in
// cpu/avx2 and cpu/avx512 must reproduce these bit for bit) and their decoders.
// q8_0 is also a weight type; its gemm kernels live with the other legacy formats.
#include "quants-common.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace {

// llama.cpp's nearest_int: round half to even via the 1.5*2^23 trick (valid for |v| < 2^22).
// SIMD code gets the same result from cvtps2dq under the default rounding mode.
inline int round_half_even(float v) {
    float t = v + 12582912.f;
    int32_t i;
    std::memcpy(&i, &t, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

void q8_0_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q8_0 *) vx;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        const float d = GGML_FP16_TO_FP32(x[ib].d);
        for (int j = 0; j < QK8_0; ++j) y[ib * QK8_0 + j] = x[ib].qs[j] * d;
    }
}

void q8_1_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q8_1 *) vx;
    for (int64_t ib = 0; ib < n / QK8_1; ++ib) {
        const float d = GGML_FP16_TO_FP32(x[ib].d);
        for (int j = 0; j < QK8_1; ++j) y[ib * QK8_1 + j] = x[ib].qs[j] * d;
    }
}

void q8_K_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q8_K *) vx;
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        for (int j = 0; j < QK_K; ++j) y[ib * QK_K + j] = x[ib].qs[j] * x[ib].d;
    }
}

void q8_KV_to_float_row(const void * vx, float * y, int64_t n) { q8_KV_to_float(vx, y, n); }

void q8_0_from_float(const float * x, void * y, int64_t n) { quantize_row_q8_0_ref(x, y, n); }
void q8_1_from_float(const float * x, void * y, int64_t n) { quantize_row_q8_1_ref(x, y, n); }
void q8_K_from_float(const float * x, void * y, int64_t n) { quantize_row_q8_K_ref(x, y, n); }

void register_q8_types() {
    auto * q80 = ggml_type_traits_mut(GGML_TYPE_Q8_0);
    q80->to_float       = q8_0_to_float;
    q80->from_float_ref = q8_0_from_float;
    auto * q81 = ggml_type_traits_mut(GGML_TYPE_Q8_1);
    q81->to_float       = q8_1_to_float;
    q81->from_float_ref = q8_1_from_float;
    auto * q8k = ggml_type_traits_mut(GGML_TYPE_Q8_K);
    q8k->to_float       = q8_K_to_float;
    q8k->from_float_ref = q8_K_from_float;
    auto * q8kv = ggml_type_traits_mut(GGML_TYPE_Q8_KV);
    q8kv->to_float       = q8_KV_to_float_row;
    q8kv->from_float_ref = quantize_row_q8_KV_ref;
}
GGML_REGISTER(register_q8_types);

} // namespace

// The scale d = max|x| / 127 as stored (fp16, rounded up: kiln_q8_block_scale in quants-blocks.h
// says why), q = round(x / d) with ties away from zero (roundf).
void quantize_row_q8_0_ref(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_0 *) vy;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) encode32_q8_0(x + ib * QK8_0, y[ib]);
}

// As q8_0, plus s = d * sum(q) in fp16 so that offset formats (q4_1, q5_1) can add min * sum(x).
void quantize_row_q8_1_ref(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_1 *) vy;
    for (int64_t ib = 0; ib < n / QK8_1; ++ib) {
        const float * xb = x + ib * QK8_1;
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const kiln_q8_scale sc = kiln_q8_block_scale(amax);
        int sum = 0;
        for (int j = 0; j < QK8_1; ++j) {
            const int8_t q = (int8_t) std::roundf(xb[j] * sc.id);
            y[ib].qs[j] = q;
            sum += q;
        }
        y[ib].d = sc.d;
        y[ib].s = GGML_FP32_TO_FP16((float) sum * sc.df);
    }
}

// q8_K scales by the signed value of largest magnitude: that value maps to -127 exactly, the
// rest round half to even and are clamped at 127. bsums hold the sum of each group of 16.
void quantize_row_q8_K_ref(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_K *) vy;
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const float * xb = x + ib * QK_K;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; ++j) {
            const float ax = std::fabs(xb[j]);
            if (ax > amax) { amax = ax; max = xb[j]; }
        }
        if (amax < FLT_MIN) {   // zero (or subnormal: -127/max would overflow)
            y[ib].d = 0.0f;
            std::memset(y[ib].qs, 0, sizeof(y[ib].qs));
            std::memset(y[ib].bsums, 0, sizeof(y[ib].bsums));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; ++j) y[ib].qs[j] = (int8_t) std::min(127, round_half_even(iscale * xb[j]));
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += y[ib].qs[16 * g + j];
            y[ib].bsums[g] = (int16_t) sum;
        }
        y[ib].d = 1.0f / iscale;
    }
}

// q8_KV (ik_llama.cpp type 151): one scale for the whole row. Row = f32 d = max|x| / 127, the
// i32 sum of the quants, then the int8 quants q = round(x / d), ties to even as the reference's
// SIMD rounding does.
void quantize_row_q8_KV_ref(const float * x, void * vy, int64_t n) {
    kiln_encode_row_q8_KV([x](int64_t j) { return x[j]; }, n, (char *) vy);
}

void q8_KV_to_float(const void * vx, float * y, int64_t n) {
    const auto * dptr = (const float *) vx;
    const auto * q8 = (const int8_t *) (dptr + 2);
    for (int64_t j = 0; j < n; ++j) y[j] = dptr[0] * q8[j];
}
