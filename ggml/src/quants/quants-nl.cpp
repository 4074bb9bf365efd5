// The non-linear 4-bit formats: iq4_nl (32-value blocks on a fixed 16-level grid), iq4_xs (the
// same grid with 6-bit sub-block scales in 256-value super-blocks) and mxfp4 (e2m1 values with a
// power-of-two e8m0 block scale). Decoders, quantizers and scalar gemm kernels.
#include "quants-legacy.h"
#include "quants-rows.h"
#include "quants-search.h"

#include "cpu-traits.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

// Grid levels as llama.cpp defines them (facts of the formats).
const int8_t kvalues_iq4nl[16] = KILN_IQ4NL_VALUES;   // quants-blocks.h: one list for the CPU and the GPU
const int8_t kvalues_mxfp4[16] = KILN_MXFP4_VALUES;

namespace {

using legacy_search::best_index_int8;
using legacy_search::nearest_int;
using legacy_search::refine_sub_scale;

// ---------------------------------------------------------------------------------------------
// decoders

void iq4_nl_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_iq4_nl *) vx;
    for (int64_t ib = 0; ib < n / QK4_NL; ++ib, y += QK4_NL) {
        const float d = GGML_FP16_TO_FP32(x[ib].d);
        for (int j = 0; j < 16; ++j) {
            y[j]      = d * kvalues_iq4nl[x[ib].qs[j] & 0xF];
            y[j + 16] = d * kvalues_iq4nl[x[ib].qs[j] >> 4];
        }
    }
}

void iq4_xs_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_iq4_xs *) vx;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float d = GGML_FP16_TO_FP32(x[ibl].d);
        const uint8_t * qs = x[ibl].qs;
        for (int ib = 0; ib < QK_K / 32; ++ib, y += 32, qs += 16) {
            const float dl = d * iq4_xs_scale(x[ibl], ib);
            for (int j = 0; j < 16; ++j) {
                y[j]      = dl * kvalues_iq4nl[qs[j] & 0xF];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

void mxfp4_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_mxfp4 *) vx;
    for (int64_t ib = 0; ib < n / QK_MXFP4; ++ib, y += QK_MXFP4) {
        const float d = e8m0_to_fp32_half(x[ib].e);
        for (int j = 0; j < 16; ++j) {
            y[j]      = kvalues_mxfp4[x[ib].qs[j] & 0xF] * d;
            y[j + 16] = kvalues_mxfp4[x[ib].qs[j] >> 4] * d;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// iq4_nl / iq4_xs quantization: per 32-value block, find the scale whose grid rounding maximizes
// the weighted (sum w q x)^2 / (sum w q^2) over 2*ntry+1 trial inverse scales (llama.cpp's search);
// iq4_xs then quantizes the block scales to 6 bits (each the best of the nearest few on the
// super-block grid: refine_sub_scale) and re-rounds the values.

struct nl_super_block {
    ggml_fp16_t * d;
    uint8_t *     qs;        // super / 2 bytes
    uint16_t *    scales_h;  // iq4_xs only
    uint8_t *     scales_l;  // iq4_xs only
};

void quantize_nl_super_block(int super, const float * x, const nl_super_block & out, const float * imatrix, int ntry) {
    constexpr int bs = 32;
    const int nblocks = super / bs;
    float scales[QK_K / bs];
    float weight[bs];
    uint8_t L[QK_K];

    float sigma2 = 0;
    for (int j = 0; j < super; ++j) sigma2 += x[j] * x[j];
    sigma2 *= 2.f / super;

    std::memset(out.qs, 0, super / 2);
    *out.d = GGML_FP32_TO_FP16(0.f);

    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < nblocks; ++ib) {
        const float * xb = x + ib * bs;
        uint8_t * Lb = L + ib * bs;
        if (imatrix) {
            for (int j = 0; j < bs; ++j) weight[j] = imatrix[ib * bs + j] * std::sqrt(sigma2 + xb[j] * xb[j]);
        } else {
            for (int j = 0; j < bs; ++j) weight[j] = xb[j] * xb[j];
        }
        float amax = 0, max = 0;
        for (int j = 0; j < bs; ++j) {
            const float ax = std::fabs(xb[j]);
            if (ax > amax) { amax = ax; max = xb[j]; }
        }
        if (amax < 1e-15f) {
            scales[ib] = 0;
            std::memset(Lb, 0, bs);
            continue;
        }
        float d = ntry > 0 ? -max / kvalues_iq4nl[0] : max / kvalues_iq4nl[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < bs; ++j) {
            const int l = best_index_int8(16, kvalues_iq4nl, id * xb[j]);
            Lb[j] = (uint8_t) l;
            const float q = kvalues_iq4nl[l];
            sumqx += weight[j] * q * xb[j];
            sumq2 += weight[j] * q * q;
        }
        d = sumqx / sumq2;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; ++itry) {
            id = (itry + kvalues_iq4nl[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < bs; ++j) {
                const float q = kvalues_iq4nl[best_index_int8(16, kvalues_iq4nl, id * xb[j])];
                sumqx += weight[j] * q * xb[j];
                sumq2 += weight[j] * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if (std::fabs(d) > amax_scale) {
            amax_scale = std::fabs(d);
            max_scale = d;
        }
    }

    if (nblocks > 1) {
        *out.scales_h = 0;
        std::memset(out.scales_l, 0, nblocks / 2);
        const float d = -max_scale / 32;
        *out.d = GGML_FP32_TO_FP16(d);
        const float id = d != 0.0f ? 1 / d : 0.f;
        for (int ib = 0; ib < nblocks; ++ib) {
            const float * xb = x + ib * bs;
            int l = refine_sub_scale(std::clamp(nearest_int(id * scales[ib]), -32, 31), -32, 31, 3, d, xb,
                                     imatrix ? imatrix + ib * bs : nullptr, bs, [](float step, float v) {
                                         return step != 0.0f ? step * kvalues_iq4nl[best_index_int8(16, kvalues_iq4nl, (1 / step) * v)] : 0.0f;
                                     });
            const float dl = d * l;
            const float idl = dl != 0.0f ? 1 / dl : 0.f;
            for (int j = 0; j < bs; ++j) L[ib * bs + j] = (uint8_t) best_index_int8(16, kvalues_iq4nl, idl * x[ib * bs + j]);
            l += 32;
            out.scales_l[ib / 2] |= (uint8_t) ((l & 0xF) << 4 * (ib % 2));
            *out.scales_h |= (uint16_t) ((l >> 4) << 2 * (ib % 8));
        }
    } else {
        *out.d = GGML_FP32_TO_FP16(scales[0]);
        if (ntry > 0) {
            const float id = scales[0] != 0.0f ? 1 / scales[0] : 0.f;
            for (int j = 0; j < super; ++j) L[j] = (uint8_t) best_index_int8(16, kvalues_iq4nl, id * x[j]);
        }
    }
    for (int i = 0; i < super / 32; ++i) {
        for (int j = 0; j < 16; ++j) out.qs[16 * i + j] = L[32 * i + j] | (L[32 * i + 16 + j] << 4);
    }
}

void iq4_nl_quantize_row(const float * x, void * vy, int64_t n, const float * imatrix, int ntry) {
    auto * y = (block_iq4_nl *) vy;
    for (int64_t ib = 0; ib < n / QK4_NL; ++ib) {
        const nl_super_block out = { &y[ib].d, y[ib].qs, nullptr, nullptr };
        quantize_nl_super_block(QK4_NL, x + ib * QK4_NL, out, imatrix ? imatrix + ib * QK4_NL : nullptr, ntry);
    }
}

void iq4_xs_quantize_row(const float * x, void * vy, int64_t n, const float * imatrix) {
    auto * y = (block_iq4_xs *) vy;
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const nl_super_block out = { &y[ib].d, y[ib].qs, &y[ib].scales_h, y[ib].scales_l };
        quantize_nl_super_block(QK_K, x + ib * QK_K, out, imatrix ? imatrix + ib * QK_K : nullptr, 7);
    }
}

void iq4_nl_from_float(const float * x, void * y, int64_t n) { iq4_nl_quantize_row(x, y, n, nullptr, -1); }
void iq4_xs_from_float(const float * x, void * y, int64_t n) { iq4_xs_quantize_row(x, y, n, nullptr); }

// ---------------------------------------------------------------------------------------------
// mxfp4: the reference takes e = floor(log2(amax)) - 2 (+127 bias) and rounds each value to the
// nearest grid point. The quantizer also tries the neighbouring exponents and keeps the one with
// the smallest (importance-weighted) squared error, which can only lower the error.

int mxfp4_nearest(float x, float d) {
    int best = 0;
    float best_err = std::fabs(kvalues_mxfp4[0] * d - x);
    for (int i = 1; i < 16; ++i) {
        const float err = std::fabs(kvalues_mxfp4[i] * d - x);
        if (err < best_err) { best = i; best_err = err; }
    }
    return best;
}

uint8_t mxfp4_base_exponent(const float * x) {
    float amax = 0.0f;
    for (int j = 0; j < QK_MXFP4; ++j) amax = std::max(amax, std::fabs(x[j]));
    if (!(amax > 0.0f)) return 0;
    const int e = (int) std::floor(std::log2(amax)) - 2 + 127;
    return (uint8_t) std::clamp(e, 0, 254);
}

void mxfp4_encode_block(const float * x, uint8_t e, block_mxfp4 & y) {
    const float d = e8m0_to_fp32_half(e);
    y.e = e;
    for (int j = 0; j < 16; ++j) y.qs[j] = (uint8_t) (mxfp4_nearest(x[j], d) | (mxfp4_nearest(x[j + 16], d) << 4));
}

void mxfp4_from_float(const float * x, void * vy, int64_t n) {
    auto * y = (block_mxfp4 *) vy;
    for (int64_t ib = 0; ib < n / QK_MXFP4; ++ib) mxfp4_encode_block(x + ib * QK_MXFP4, mxfp4_base_exponent(x + ib * QK_MXFP4), y[ib]);
}

void mxfp4_quantize_row(const float * x, void * vy, int64_t n, const float * imatrix) {
    auto * y = (block_mxfp4 *) vy;
    for (int64_t ib = 0; ib < n / QK_MXFP4; ++ib) {
        const float * xb = x + ib * QK_MXFP4;
        const uint8_t e0 = mxfp4_base_exponent(xb);
        double best_err = INFINITY;
        for (int de = -1; de <= 1; ++de) {
            const int e = e0 + de;
            if (e < 0 || e > 254) continue;
            block_mxfp4 cand;
            mxfp4_encode_block(xb, (uint8_t) e, cand);
            const float d = e8m0_to_fp32_half(cand.e);
            double err = 0;
            for (int j = 0; j < 16; ++j) {
                const double d0 = kvalues_mxfp4[cand.qs[j] & 0xF] * d - xb[j];
                const double d1 = kvalues_mxfp4[cand.qs[j] >> 4] * d - xb[j + 16];
                const double w0 = imatrix ? imatrix[ib * QK_MXFP4 + j] : 1.0;
                const double w1 = imatrix ? imatrix[ib * QK_MXFP4 + j + 16] : 1.0;
                err += w0 * d0 * d0 + w1 * d1 * d1;
            }
            if (err < best_err) {
                best_err = err;
                y[ib] = cand;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------

size_t quantize_iq4_nl(const float * src, void * dst, int64_t nrows, int64_t n, const float * imatrix) {
    return quantize_rows(GGML_TYPE_IQ4_NL, src, dst, nrows, n,
                         [&](const float * x, uint8_t * y) { iq4_nl_quantize_row(x, y, n, imatrix, 7); });
}

size_t quantize_iq4_xs(const float * src, void * dst, int64_t nrows, int64_t n, const float * imatrix) {
    return quantize_rows(GGML_TYPE_IQ4_XS, src, dst, nrows, n,
                         [&](const float * x, uint8_t * y) { iq4_xs_quantize_row(x, y, n, imatrix); });
}

size_t quantize_mxfp4(const float * src, void * dst, int64_t nrows, int64_t n, const float * imatrix) {
    return quantize_rows(GGML_TYPE_MXFP4, src, dst, nrows, n,
                         [&](const float * x, uint8_t * y) { mxfp4_quantize_row(x, y, n, imatrix); });
}

// ---------------------------------------------------------------------------------------------
// scalar gemm

int nl_block_dot(const uint8_t * qs, const int8_t * table, const int8_t * y) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += table[qs[j] & 0xF] * y[j] + table[qs[j] >> 4] * y[j + 16];
    return sum;
}

void gemm_iq4_nl_scalar(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                        size_t dst_stride, int nr, int nc) {
    for (int c = 0; c < nc; ++c) {
        const auto * xr = (const block_q8_0 *) ((const uint8_t *) x + c * x_stride);
        for (int r = 0; r < nr; ++r) {
            const auto * wr = (const block_iq4_nl *) ((const uint8_t *) w + r * w_stride);
            float sum = 0;
            for (int64_t ib = 0; ib < n / QK4_NL; ++ib) {
                sum += nl_block_dot(wr[ib].qs, kvalues_iq4nl, xr[ib].qs) * GGML_FP16_TO_FP32(wr[ib].d) * GGML_FP16_TO_FP32(xr[ib].d);
            }
            dst[c * dst_stride + r] = sum;
        }
    }
}

void gemm_mxfp4_scalar(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                       size_t dst_stride, int nr, int nc) {
    for (int c = 0; c < nc; ++c) {
        const auto * xr = (const block_q8_0 *) ((const uint8_t *) x + c * x_stride);
        for (int r = 0; r < nr; ++r) {
            const auto * wr = (const block_mxfp4 *) ((const uint8_t *) w + r * w_stride);
            float sum = 0;
            for (int64_t ib = 0; ib < n / QK_MXFP4; ++ib) {
                sum += nl_block_dot(wr[ib].qs, kvalues_mxfp4, xr[ib].qs) * e8m0_to_fp32_half(wr[ib].e) * GGML_FP16_TO_FP32(xr[ib].d);
            }
            dst[c * dst_stride + r] = sum;
        }
    }
}

void gemm_iq4_xs_scalar(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                        size_t dst_stride, int nr, int nc) {
    for (int c = 0; c < nc; ++c) {
        const auto * xr = (const block_q8_K *) ((const uint8_t *) x + c * x_stride);
        for (int r = 0; r < nr; ++r) {
            const auto * wr = (const block_iq4_xs *) ((const uint8_t *) w + r * w_stride);
            float sum = 0;
            for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
                int sumi = 0;
                for (int ib = 0; ib < QK_K / 32; ++ib) {
                    sumi += iq4_xs_scale(wr[ibl], ib) * nl_block_dot(wr[ibl].qs + 16 * ib, kvalues_iq4nl, xr[ibl].qs + 32 * ib);
                }
                sum += GGML_FP16_TO_FP32(wr[ibl].d) * xr[ibl].d * sumi;
            }
            dst[c * dst_stride + r] = sum;
        }
    }
}

void register_nl_types() {
    auto * nl = ggml_type_traits_mut(GGML_TYPE_IQ4_NL);
    nl->to_float = iq4_nl_to_float;
    nl->from_float_ref = iq4_nl_from_float;
    nl->quantize = quantize_iq4_nl;
    auto * xs = ggml_type_traits_mut(GGML_TYPE_IQ4_XS);
    xs->to_float = iq4_xs_to_float;
    xs->from_float_ref = iq4_xs_from_float;
    xs->quantize = quantize_iq4_xs;
    auto * mx = ggml_type_traits_mut(GGML_TYPE_MXFP4);
    mx->to_float = mxfp4_to_float;
    mx->from_float_ref = mxfp4_from_float;
    mx->quantize = quantize_mxfp4;
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_NL, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, gemm_iq4_nl_scalar);
    ggml_cpu_register_gemm(GGML_TYPE_MXFP4, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, gemm_mxfp4_scalar);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_XS, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K, gemm_iq4_xs_scalar);
}
GGML_REGISTER(register_nl_types);

} // namespace
