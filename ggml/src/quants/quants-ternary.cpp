// Ternary types of llama.cpp (BitNet b1.58 / TriLM models): TQ1_0 (id 34, 1.6875 bpw) and TQ2_0
// (id 35, 2.0625 bpw). Every weight is -1, 0 or +1 times one fp16 scale per 256 (the block's
// largest magnitude). The layouts and the decoders (shared with the CUDA kernels) are in
// quants-blocks.h; here are the reference encoders and the registration.
#include "quants-interleaved.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

// Pack trits t[0..count) (0..2, most significant first) into one byte, with (5 - count) zero
// trits after them.
inline uint8_t pack_trits(const int * t, int count) {
    int q = 0;
    for (int i = 0; i < count; ++i) q = 3 * q + t[i];
    for (int i = count; i < 5; ++i) q *= 3;
    return (uint8_t) ((q * 256 + 242) / 243);
}

float block_scale(const float * x) {
    float amax = 0;
    for (int j = 0; j < QK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
    return amax;
}

inline int ternary_level(float v, float id) { return std::clamp((int) std::lround(v * id), -1, 1) + 1; }

void quantize_row_tq1_0_ref(const float * x, void * vy, int64_t n) {
    auto * y = (block_tq1_0 *) vy;
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        const float d = block_scale(x), id = d ? 1 / d : 0.f;
        y[i].d = GGML_FP32_TO_FP16(d);
        int t[5];
        // 160 weights in a 32-byte run, 80 in a 16-byte one, 16 four to a byte
        int base = 0;
        for (int run : { 32, 16 }) {
            const int byte0 = run == 32 ? 0 : 32;
            for (int m = 0; m < run; ++m) {
                for (int k = 0; k < 5; ++k) t[k] = ternary_level(x[base + m + k * run], id);
                y[i].qs[byte0 + m] = pack_trits(t, 5);
            }
            base += 5 * run;
        }
        for (int m = 0; m < 4; ++m) {
            for (int k = 0; k < 4; ++k) t[k] = ternary_level(x[base + m + 4 * k], id);
            y[i].qh[m] = pack_trits(t, 4);
        }
    }
}


void quantize_row_tq2_0_ref(const float * x, void * vy, int64_t n) {
    auto * y = (block_tq2_0 *) vy;
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        const float d = block_scale(x), id = d ? 1 / d : 0.f;
        y[i].d = GGML_FP32_TO_FP16(d);
        for (int j = 0; j < 64; j += 32) {
            for (int m = 0; m < 32; ++m) {
                uint8_t q = 0;
                for (int l = 0; l < 4; ++l) q |= (uint8_t) (ternary_level(x[4 * j + m + 32 * l], id) << 2 * l);
                y[i].qs[j + m] = q;
            }
        }
    }
}


void register_ternary_types() {
    ggml_type_traits_mut(GGML_TYPE_TQ1_0)->from_float_ref = quantize_row_tq1_0_ref;
    ggml_type_traits_mut(GGML_TYPE_TQ2_0)->from_float_ref = quantize_row_tq2_0_ref;
    // products over decoded rows with q8_K activations (no integer kernel yet)
    register_float_path<GGML_TYPE_TQ1_0>(kiln_row_to_float<GGML_TYPE_TQ1_0>);   // quants-blocks.h, shared with the GPU
    register_float_path<GGML_TYPE_TQ2_0>(kiln_row_to_float<GGML_TYPE_TQ2_0>);
}
GGML_REGISTER(register_ternary_types);

} // namespace
