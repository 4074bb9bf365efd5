// NEON gemm kernels for f32, f16 and bf16 weights: tiles of up to 4 weight rows x 4 activation
// columns, 16 accumulators of four lanes (of the 32 vector registers, the rest hold the loads).
// f16 weights are widened with FCVTL (base Armv8) and multiply f32 activations, bf16 weights
// multiply bf16 activations, as the scalar kernels (gemm-float.cpp) define.
#include "neon/register.h"
#include "neon/simd.h"
#include "cpu-traits.h"
#include "ggml-impl.h"

namespace {

struct load_f32 {
    static constexpr size_t elem = 4;
    static float32x4_t four(const void * p) { return vld1q_f32((const float *) p); }
    static float one(const void * p, int64_t i) { return ((const float *) p)[i]; }
};
struct load_f16 {
    static constexpr size_t elem = 2;
    static float32x4_t four(const void * p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *) p))); }
    static float one(const void * p, int64_t i) { return ggml_compute_fp16_to_fp32(((const uint16_t *) p)[i]); }
};
struct load_bf16 {
    static constexpr size_t elem = 2;
    static float32x4_t four(const void * p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *) p), 16)); }
    static float one(const void * p, int64_t i) { return ggml_compute_bf16_to_fp32(((const uint16_t *) p)[i]); }
};

template <typename L, typename LX, int RR, int CC>
inline void tile(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * dst, size_t ds) {
    float32x4_t acc[RR][CC];
    for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c) acc[r][c] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t xv[CC];
        for (int c = 0; c < CC; ++c) xv[c] = LX::four(x + c * xs + i * LX::elem);
        for (int r = 0; r < RR; ++r) {
            const float32x4_t wv = L::four(w + r * ws + i * L::elem);
            for (int c = 0; c < CC; ++c) acc[r][c] = vfmaq_f32(acc[r][c], wv, xv[c]);
        }
    }
    for (int r = 0; r < RR; ++r) {
        for (int c = 0; c < CC; ++c) {
            float s = vaddvq_f32(acc[r][c]);
            for (int64_t k = i; k < n; ++k) s += L::one(w + r * ws, k) * LX::one(x + c * xs, k);
            dst[c * ds + r] = s;
        }
    }
}

template <typename L, typename LX, int RR>
inline void row_block(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * dst, size_t ds, int nc) {
    int c = 0;
    for (; c + 4 <= nc; c += 4) tile<L, LX, RR, 4>(n, w, ws, x + c * xs, xs, dst + c * ds, ds);
    switch (nc - c) {
        case 3: tile<L, LX, RR, 3>(n, w, ws, x + c * xs, xs, dst + c * ds, ds); break;
        case 2: tile<L, LX, RR, 2>(n, w, ws, x + c * xs, xs, dst + c * ds, ds); break;
        case 1: tile<L, LX, RR, 1>(n, w, ws, x + c * xs, xs, dst + c * ds, ds); break;
        default: break;
    }
}

template <typename L, typename LX = L>
void gemm(int64_t n, const void * wv, size_t ws, const void * xv, size_t xs, float * dst, size_t ds, int nr, int nc) {
    const char * w = (const char *) wv;
    const char * x = (const char *) xv;
    int r = 0;
    for (; r + 4 <= nr; r += 4) row_block<L, LX, 4>(n, w + r * ws, ws, x, xs, dst + r, ds, nc);
    for (; r < nr; ++r) row_block<L, LX, 1>(n, w + r * ws, ws, x, xs, dst + r, ds, nc);
}

void f32_to_f16_row(const float * x, void * yv, int64_t n) {
    uint16_t * y = (uint16_t *) yv;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; ++i) y[i] = ggml_compute_fp32_to_fp16(x[i]);
}

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_float_gemm_neon() {
    ggml_cpu_register_gemm(GGML_TYPE_F32, GGML_CPU_ISA_NEON, GGML_TYPE_F32, gemm<load_f32>);
    ggml_cpu_register_gemm(GGML_TYPE_F16, GGML_CPU_ISA_NEON, GGML_TYPE_F32, gemm<load_f16, load_f32>);
    ggml_cpu_register_gemm(GGML_TYPE_BF16, GGML_CPU_ISA_NEON, GGML_TYPE_BF16, gemm<load_bf16>);
    ggml_cpu_register_from_float(GGML_TYPE_F16, GGML_CPU_ISA_NEON, f32_to_f16_row);
}
