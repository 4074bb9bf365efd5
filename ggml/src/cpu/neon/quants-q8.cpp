// NEON encoders of the activation types q8_0, q8_1 and q8_K. Each reproduces the reference
// encoder (quants/quants-q8.cpp) bit for bit: the same scale arithmetic, and conversions that
// round as the reference does (FCVTAS = roundf's half away from zero for q8_0/q8_1, FCVTNS =
// half to even for q8_K).
#include "neon/register.h"
#include "neon/simd.h"
#include "cpu-traits.h"
#include "quants/quants-common.h"

#include <cfloat>
#include <cstring>

namespace {

// 4 x 4 int32 (values within int8) -> 16 int8 in order
inline int8x16_t narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    const int16x8_t ab = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
    const int16x8_t cd = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
    return vcombine_s8(vmovn_s16(ab), vmovn_s16(cd));
}

// Shared by q8_0 and q8_1: returns the block scale, writes the 32 quants and (when sum is given) their sum.
inline kiln_q8_scale encode32(const float * x, int8_t * qs, int * sum) {
    float32x4_t v[8];
    float32x4_t amax = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; ++k) {
        v[k] = vld1q_f32(x + 4 * k);
        amax = vmaxq_f32(amax, vabsq_f32(v[k]));
    }
    const kiln_q8_scale sc = kiln_q8_block_scale(vmaxvq_f32(amax));
    const float id = sc.id;
    int32x4_t q[8];
    for (int k = 0; k < 8; ++k) q[k] = vcvtaq_s32_f32(vmulq_n_f32(v[k], id));
    if (sum) {
        int32x4_t s = vdupq_n_s32(0);
        for (int k = 0; k < 8; ++k) s = vaddq_s32(s, q[k]);
        *sum = vaddvq_s32(s);
    }
    vst1q_s8(qs, narrow16(q[0], q[1], q[2], q[3]));
    vst1q_s8(qs + 16, narrow16(q[4], q[5], q[6], q[7]));
    return sc;
}

void q8_0_from_float_neon(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_0 *) vy;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) y[ib].d = encode32(x + ib * QK8_0, y[ib].qs, nullptr).d;
}

void q8_1_from_float_neon(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_1 *) vy;
    for (int64_t ib = 0; ib < n / QK8_1; ++ib) {
        int sum = 0;
        const kiln_q8_scale sc = encode32(x + ib * QK8_1, y[ib].qs, &sum);
        y[ib].d = sc.d;
        y[ib].s = GGML_FP32_TO_FP16((float) sum * sc.df);
    }
}

void q8_K_from_float_neon(const float * x, void * vy, int64_t n) {
    auto * y = (block_q8_K *) vy;
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const float * xb = x + ib * QK_K;
        float32x4_t amax_v = vdupq_n_f32(0.0f);
        for (int k = 0; k < QK_K; k += 4) amax_v = vmaxq_f32(amax_v, vabsq_f32(vld1q_f32(xb + k)));
        const float amax = vmaxvq_f32(amax_v);
        if (amax < FLT_MIN) {
            std::memset(&y[ib], 0, sizeof(y[ib]));
            continue;
        }
        // the reference keeps the first element of largest magnitude (its sign matters)
        float max = 0.0f;
        for (int k = 0; k < QK_K; ++k) {
            if (__builtin_fabsf(xb[k]) == amax) {
                max = xb[k];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const int32x4_t cap = vdupq_n_s32(127);
        for (int g = 0; g < QK_K / 16; ++g) {
            int32x4_t q[4];
            for (int k = 0; k < 4; ++k) q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(xb + 16 * g + 4 * k), iscale)), cap);
            y[ib].bsums[g] = (int16_t) vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
            vst1q_s8(y[ib].qs + 16 * g, narrow16(q[0], q[1], q[2], q[3]));
        }
        y[ib].d = 1.0f / iscale;
    }
}

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_q8_neon() {
    ggml_cpu_register_from_float(GGML_TYPE_Q8_0, GGML_CPU_ISA_NEON, q8_0_from_float_neon);
    ggml_cpu_register_from_float(GGML_TYPE_Q8_1, GGML_CPU_ISA_NEON, q8_1_from_float_neon);
    ggml_cpu_register_from_float(GGML_TYPE_Q8_K, GGML_CPU_ISA_NEON, q8_K_from_float_neon);
}
