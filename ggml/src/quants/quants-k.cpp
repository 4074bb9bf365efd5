// k-quants q2_K .. q6_K: reference dequantization, the scalar gemm against q8_K activations
// and registration into the type-traits table. The quantizers are in quants-k-quantize.cpp.
#include "quants-k.h"

#include "cpu-traits.h"

#include <cstring>
#include <type_traits>

// ---------------------------------------------------------------------------------------------
// Dequantization. The float expressions follow the reference's order of operations exactly
// (scale products first, then one multiply and one subtraction) so decoded rows are bit-exact.

namespace {

void dequantize_q2_K(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q2_K *) vx;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d    = GGML_FP16_TO_FP32(x[i].d);
        const float dmin = GGML_FP16_TO_FP32(x[i].dmin);
        const uint8_t * q = x[i].qs;
        int g = 0;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part, ++g) {
                    const float dl = d * (x[i].scales[g] & 0xF);
                    const float ml = dmin * (x[i].scales[g] >> 4);
                    for (int l = 0; l < 16; ++l) {
                        *y++ = dl * ((q[16 * part + l] >> shift) & 3) - ml;
                    }
                }
            }
        }
    }
}

void dequantize_q3_K(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q3_K *) vx;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = GGML_FP16_TO_FP32(x[i].d);
        int8_t sc[16];
        q3_K_scales(x[i].scales, sc);
        const uint8_t * q = x[i].qs;
        int g = 0;
        int bit = 0;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, ++bit) {
                for (int part = 0; part < 2; ++part, ++g) {
                    const float dl = d * sc[g];
                    for (int l = 0; l < 16; ++l) {
                        const int low  = (q[16 * part + l] >> shift) & 3;
                        const int high = (x[i].hmask[16 * part + l] >> bit) & 1;
                        *y++ = dl * (low - (high ? 0 : 4));
                    }
                }
            }
        }
    }
}

void dequantize_q4_K(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q4_K *) vx;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d    = GGML_FP16_TO_FP32(x[i].d);
        const float dmin = GGML_FP16_TO_FP32(x[i].dmin);
        const uint8_t * q = x[i].qs;
        for (int j = 0; j < 8; j += 2, q += 32) {
            uint8_t sc, m;
            k4_scale_min(j, x[i].scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            k4_scale_min(j + 1, x[i].scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void dequantize_q5_K(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q5_K *) vx;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d    = GGML_FP16_TO_FP32(x[i].d);
        const float dmin = GGML_FP16_TO_FP32(x[i].dmin);
        const uint8_t * ql = x[i].qs;
        const uint8_t * qh = x[i].qh;
        for (int j = 0; j < 8; j += 2, ql += 32) {
            uint8_t sc, m;
            k4_scale_min(j, x[i].scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            k4_scale_min(j + 1, x[i].scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (((qh[l] >> j) & 1) << 4)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (((qh[l] >> (j + 1)) & 1) << 4)) - m2;
        }
    }
}

void dequantize_q6_K(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q6_K *) vx;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = GGML_FP16_TO_FP32(x[i].d);
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t  * sc = x[i].scales;
        for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int g  = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l]      = d * sc[g + 0] * q1;
                y[l + 32] = d * sc[g + 2] * q2;
                y[l + 64] = d * sc[g + 4] * q3;
                y[l + 96] = d * sc[g + 6] * q4;
            }
        }
    }
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Decoding into the kernel form (u, s, mi, d, dm). Every value of the block must equal
// d*s[g]*u - dm*mi[g] exactly in integers before the float scales.

void k_decode_q2_K(const void * vb, k_block_decoded & out) {
    const auto * x = (const block_q2_K *) vb;
    for (int half = 0; half < 2; ++half) {
        for (int j = 0; j < 4; ++j) {
            for (int l = 0; l < 32; ++l) {
                out.u[128 * half + 32 * j + l] = (x->qs[32 * half + l] >> (2 * j)) & 3;
            }
        }
    }
    for (int g = 0; g < 16; ++g) {
        out.s[g]  = x->scales[g] & 0xF;
        out.mi[g] = x->scales[g] >> 4;
    }
    out.d  = GGML_FP16_TO_FP32(x->d);
    out.dm = GGML_FP16_TO_FP32(x->dmin);
}

void k_decode_q3_K(const void * vb, k_block_decoded & out) {
    const auto * x = (const block_q3_K *) vb;
    for (int half = 0; half < 2; ++half) {
        for (int j = 0; j < 4; ++j) {
            const int bit = 4 * half + j;
            for (int l = 0; l < 32; ++l) {
                const int low  = (x->qs[32 * half + l] >> (2 * j)) & 3;
                const int high = (x->hmask[l] >> bit) & 1;
                out.u[128 * half + 32 * j + l] = (uint8_t) (low | (high << 2));
            }
        }
    }
    int8_t sc[16];
    q3_K_scales(x->scales, sc);
    for (int g = 0; g < 16; ++g) {
        out.s[g]  = sc[g];
        out.mi[g] = (int16_t) (4 * sc[g]);
    }
    out.d  = GGML_FP16_TO_FP32(x->d);
    out.dm = out.d;
}

// q4_K and q5_K are one layout (nibbles in 64-value chunks, 6-bit scale/min pairs per 32, d and
// dmin) except for q5_K's fifth bit per value from qh: one decoder keeps the two from drifting.
template <typename Block>
void k_decode_q45_K(const void * vb, k_block_decoded & out) {
    const auto * x = (const Block *) vb;
    for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) {
            uint8_t lo = x->qs[32 * c + l] & 0xF, hi = x->qs[32 * c + l] >> 4;
            if constexpr (std::is_same_v<Block, block_q5_K>) {
                lo |= ((x->qh[l] >> (2 * c)) & 1) << 4;
                hi |= ((x->qh[l] >> (2 * c + 1)) & 1) << 4;
            }
            out.u[64 * c + l]      = lo;
            out.u[64 * c + 32 + l] = hi;
        }
    }
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        k4_scale_min(j, x->scales, sc, m);
        out.s[2 * j] = out.s[2 * j + 1] = sc;
        out.mi[2 * j] = out.mi[2 * j + 1] = m;
    }
    out.d  = GGML_FP16_TO_FP32(x->d);
    out.dm = GGML_FP16_TO_FP32(x->dmin);
}

void k_decode_q4_K(const void * vb, k_block_decoded & out) { k_decode_q45_K<block_q4_K>(vb, out); }
void k_decode_q5_K(const void * vb, k_block_decoded & out) { k_decode_q45_K<block_q5_K>(vb, out); }

void k_decode_q6_K(const void * vb, k_block_decoded & out) {
    const auto * x = (const block_q6_K *) vb;
    for (int half = 0; half < 2; ++half) {
        const uint8_t * ql = x->ql + 64 * half;
        const uint8_t * qh = x->qh + 32 * half;
        uint8_t * u = out.u + 128 * half;
        for (int l = 0; l < 32; ++l) {
            u[l]      = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
            u[l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
            u[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            u[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
    for (int g = 0; g < 16; ++g) {
        out.s[g]  = x->scales[g];
        out.mi[g] = (int16_t) (32 * x->scales[g]);
    }
    out.d  = GGML_FP16_TO_FP32(x->d);
    out.dm = out.d;
}

// ---------------------------------------------------------------------------------------------
// Scalar gemm: the reference the SIMD kernels are compared with. Integer sums per block are
// exact; the float combination per block is da * (d * sum_g s*dot - dm * sum_g mi*bsum).

namespace {

using decode_fn = void (*)(const void *, k_block_decoded &);

template <decode_fn Decode, size_t BlockBytes>
void gemm_k_scalar(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride,
                   float * dst, size_t dst_stride, int nr, int nc) {
    const int64_t nb = n / QK_K;
    k_block_decoded blk;
    for (int r = 0; r < nr; ++r) {
        const char * wrow = (const char *) w + r * w_stride;
        for (int c = 0; c < nc; ++c) {
            const auto * a = (const block_q8_K *) ((const char *) x + c * x_stride);
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                Decode(wrow + b * BlockBytes, blk);
                int32_t dot = 0, mins = 0;
                for (int g = 0; g < 16; ++g) {
                    int32_t dg = 0;
                    for (int l = 0; l < 16; ++l) dg += blk.u[16 * g + l] * a[b].qs[16 * g + l];
                    dot  += blk.s[g] * dg;
                    mins += blk.mi[g] * a[b].bsums[g];
                }
                sum += a[b].d * (blk.d * (float) dot - blk.dm * (float) mins);
            }
            dst[c * dst_stride + r] = sum;
        }
    }
}

// The batch reference: q8_0 activations, one scale per 32 values (two 16-value groups), so the
// float combination is per 32: dx * (d * sum_g s*dot - dm * sum_g mi*sum(q)) over its 2 groups.
// For q4_K, q5_K and q6_K, whose batches the reference rounds per 32 as well (ik_llama.cpp
// converts their weights to q8_1 / q8_0 rows against per-32 activations from 32 or 64 columns);
// q2_K and q3_K it converts to q8_k_r8 / q8_k_r16 against per-256 activations, so they keep q8_K.
template <decode_fn Decode, size_t BlockBytes>
void gemm_k_q8_0_scalar(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride,
                        float * dst, size_t dst_stride, int nr, int nc) {
    const int64_t nb = n / QK_K;
    constexpr int kPer = QK_K / QK8_0;
    k_block_decoded blk;
    for (int r = 0; r < nr; ++r) {
        const char * wrow = (const char *) w + r * w_stride;
        for (int c = 0; c < nc; ++c) {
            const auto * a = (const block_q8_0 *) ((const char *) x + c * x_stride);
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                Decode(wrow + b * BlockBytes, blk);
                sum = k_block_dot_q8_0(blk, a + b * kPer, sum);
            }
            dst[c * dst_stride + r] = sum;
        }
    }
}

void register_k_quants() {
    struct entry {
        ggml_type type;
        ggml_to_float_t to_float;
        ggml_from_float_t from_float_ref;
        ggml_quantize_rows_t quantize;
        ggml_gemm_t gemm;
        ggml_gemm_t batch_gemm;
    };
    const entry entries[] = {
        { GGML_TYPE_Q2_K, dequantize_q2_K, quantize_row_q2_K_ref, quantize_q2_K,
          gemm_k_scalar<k_decode_q2_K, sizeof(block_q2_K)>, nullptr },
        { GGML_TYPE_Q3_K, dequantize_q3_K, quantize_row_q3_K_ref, quantize_q3_K,
          gemm_k_scalar<k_decode_q3_K, sizeof(block_q3_K)>, nullptr },
        { GGML_TYPE_Q4_K, dequantize_q4_K, quantize_row_q4_K_ref, quantize_q4_K,
          gemm_k_scalar<k_decode_q4_K, sizeof(block_q4_K)>, gemm_k_q8_0_scalar<k_decode_q4_K, sizeof(block_q4_K)> },
        { GGML_TYPE_Q5_K, dequantize_q5_K, quantize_row_q5_K_ref, quantize_q5_K,
          gemm_k_scalar<k_decode_q5_K, sizeof(block_q5_K)>, gemm_k_q8_0_scalar<k_decode_q5_K, sizeof(block_q5_K)> },
        { GGML_TYPE_Q6_K, dequantize_q6_K, quantize_row_q6_K_ref, quantize_q6_K,
          gemm_k_scalar<k_decode_q6_K, sizeof(block_q6_K)>, gemm_k_q8_0_scalar<k_decode_q6_K, sizeof(block_q6_K)> },
    };
    for (const entry & e : entries) {
        ggml_type_traits * t = ggml_type_traits_mut(e.type);
        t->to_float       = e.to_float;
        t->from_float_ref = e.from_float_ref;
        t->quantize       = e.quantize;
        ggml_cpu_register_gemm(e.type, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K, e.gemm);
        if (e.batch_gemm) ggml_cpu_register_batch_gemm(e.type, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, e.batch_gemm);
    }
}
GGML_REGISTER(register_k_quants);

} // namespace
