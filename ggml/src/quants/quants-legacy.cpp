// The 32-value "legacy" formats q4_0, q4_1, q5_0, q5_1, q6_0 and q8_0 (as a weight type):
// decoders, reference encoders, the imatrix-weighted quantizers (the same search as llama.cpp's
// make_qx_quants / make_qkx3_quants, so that files come out alike), and the scalar gemm kernels
// that define what the SIMD kernels must compute.
#include "quants-legacy.h"
#include "quants-rows.h"
#include "quants-search.h"

#include "cpu-traits.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace {

// ---------------------------------------------------------------------------------------------
// decoders

void q4_0_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q4_0 *) vx;
    for (int64_t ib = 0; ib < n / QK4_0; ++ib, y += QK4_0) {
        const float d = GGML_FP16_TO_FP32(x[ib].d);
        for (int j = 0; j < 16; ++j) {
            y[j]      = ((x[ib].qs[j] & 0xF) - 8) * d;
            y[j + 16] = ((x[ib].qs[j] >> 4) - 8) * d;
        }
    }
}

void q4_1_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q4_1 *) vx;
    for (int64_t ib = 0; ib < n / QK4_1; ++ib, y += QK4_1) {
        const float d = GGML_FP16_TO_FP32(x[ib].d);
        const float m = GGML_FP16_TO_FP32(x[ib].m);
        for (int j = 0; j < 16; ++j) {
            y[j]      = (x[ib].qs[j] & 0xF) * d + m;
            y[j + 16] = (x[ib].qs[j] >> 4) * d + m;
        }
    }
}

inline uint32_t load_u32(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

// q5_0 and q5_1 are one 5-bit layout (value j's low nibble in qs[j % 16], low half first; its
// fifth bit is bit j of the 32-bit qh): one unpacker serves both decoders and dot products.
template <typename Block>
void q5_levels(const Block & b, int * q) {
    const uint32_t qh = load_u32(b.qh);
    for (int j = 0; j < 16; ++j) {
        q[j]      = (b.qs[j] & 0xF) | (((qh >> j) & 1) << 4);
        q[j + 16] = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    }
}

void q5_0_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q5_0 *) vx;
    for (int64_t ib = 0; ib < n / QK5_0; ++ib, y += QK5_0) {
        const float d = GGML_FP16_TO_FP32(x[ib].d);
        int q[32];
        q5_levels(x[ib], q);
        for (int j = 0; j < 32; ++j) y[j] = (q[j] - 16) * d;
    }
}

void q5_1_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q5_1 *) vx;
    for (int64_t ib = 0; ib < n / QK5_1; ++ib, y += QK5_1) {
        const float d = GGML_FP16_TO_FP32(x[ib].d);
        const float m = GGML_FP16_TO_FP32(x[ib].m);
        int q[32];
        q5_levels(x[ib], q);
        for (int j = 0; j < 32; ++j) y[j] = q[j] * d + m;
    }
}

void q6_0_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_q6_0 *) vx;
    for (int64_t ib = 0; ib < n / QK6_0; ++ib, y += QK6_0) {
        const float d = GGML_FP16_TO_FP32(x[ib].d);
        for (int j = 0; j < 16; ++j) {
            const int shift = 4 * (j / 8);
            const int h = x[ib].qh[j % 8] >> shift;
            const int q0 = (x[ib].qs[j] & 0xF) | ((h & 3) << 4);
            const int q1 = (x[ib].qs[j] >> 4) | (((h >> 2) & 3) << 4);
            y[j]      = (q0 - 32) * d;
            y[j + 16] = (q1 - 32) * d;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// reference encoders (no importance weights): the simple round-to-grid of ggml

// The encoders are quants-blocks.h's, shared with the GPU's cache writes (one definition, so
// that a block the GPU writes is the block the CPU writes).
template <typename Block, void (*Encode)(const float *, Block &)>
void encode_blocks(const float * x, void * vy, int64_t n) {
    auto * y = (Block *) vy;
    for (int64_t ib = 0; ib < n / 32; ++ib) Encode(x + 32 * ib, y[ib]);
}

void q4_0_from_float(const float * x, void * vy, int64_t n) { encode_blocks<block_q4_0, encode32_q4_0>(x, vy, n); }
void q4_1_from_float(const float * x, void * vy, int64_t n) { encode_blocks<block_q4_1, encode32_q4_1>(x, vy, n); }
void q5_0_from_float(const float * x, void * vy, int64_t n) { encode_blocks<block_q5_0, encode32_q5_0>(x, vy, n); }
void q5_1_from_float(const float * x, void * vy, int64_t n) { encode_blocks<block_q5_1, encode32_q5_1>(x, vy, n); }
void q6_0_from_float(const float * x, void * vy, int64_t n) { encode_blocks<block_q6_0, encode32_q6_0>(x, vy, n); }

// ---------------------------------------------------------------------------------------------
// full quantizers (importance weights): per block, weight_j = imatrix_j * sqrt(sigma2 + x_j^2)
// with sigma2 the row's mean square, then the weighted least-squares scale search.

struct row_weights {
    float sigma2;
    row_weights(const float * x, int64_t n) {
        float sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += x[j] * x[j];
        sigma2 = sum / n;
    }
    void block(const float * xb, const float * qw, float * w, int n) const {
        for (int j = 0; j < n; ++j) w[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
    }
};

// Symmetric formats: levels -nmax .. nmax-1 stored with offset nmax.
template <int NMAX>
void quantize_row_symmetric(const float * x, const float * imatrix, int64_t n, ggml_fp16_t * d_out, size_t stride,
                            void (*pack)(const uint8_t *, uint8_t *, uint8_t *), size_t qs_off, size_t qh_off,
                            bool x2_weights_without_imatrix) {
    const row_weights rw(x, n);
    uint8_t * base = (uint8_t *) d_out;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float * xb = x + 32 * ib;
        float w[32];
        if (imatrix) {
            rw.block(xb, imatrix + 32 * ib, w, 32);
        } else {
            for (int j = 0; j < 32; ++j) w[j] = x2_weights_without_imatrix ? xb[j] * xb[j] : 1.0f;
        }
        int8_t L[32];
        const float d = legacy_search::make_qx_quants(32, NMAX, xb, L, w);
        uint8_t * blk = base + ib * stride;
        const ggml_fp16_t dh = GGML_FP32_TO_FP16(d);
        std::memcpy(blk, &dh, sizeof(dh));
        pack((const uint8_t *) L, blk + qs_off, qh_off ? blk + qh_off : nullptr);
    }
}

void pack_q4(const uint8_t * L, uint8_t * qs, uint8_t *) {
    for (int j = 0; j < 16; ++j) qs[j] = L[j] | (L[j + 16] << 4);
}

// Asymmetric formats (q4_1, q5_1): levels 0 .. nmax with a min.
template <int NMAX>
void quantize_row_asymmetric(const float * x, const float * imatrix, int64_t n, void * vy, size_t stride,
                             void (*pack)(const uint8_t *, uint8_t *, uint8_t *), size_t qs_off, size_t qh_off) {
    const row_weights rw(x, n);
    uint8_t * base = (uint8_t *) vy;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float * xb = x + 32 * ib;
        float w[32];
        rw.block(xb, imatrix + 32 * ib, w, 32);
        uint8_t L[32], Laux[32];
        float min;
        const float d = legacy_search::make_qkx3_quants(32, NMAX, xb, w, L, &min, Laux, -0.9f, 0.05f, 36);
        uint8_t * blk = base + ib * stride;
        const ggml_fp16_t dh = GGML_FP32_TO_FP16(d), mh = GGML_FP32_TO_FP16(-min);
        std::memcpy(blk, &dh, sizeof(dh));
        std::memcpy(blk + 2, &mh, sizeof(mh));
        pack(L, blk + qs_off, qh_off ? blk + qh_off : nullptr);
    }
}

size_t quantize_q4_0(const float * src, void * dst, int64_t nrows, int64_t n, const float * imatrix) {
    return quantize_rows(GGML_TYPE_Q4_0, src, dst, nrows, n, [&](const float * x, uint8_t * y) {
        if (!imatrix) return q4_0_from_float(x, y, n);
        quantize_row_symmetric<8>(x, imatrix, n, (ggml_fp16_t *) y, sizeof(block_q4_0), pack_q4,
                                  offsetof(block_q4_0, qs), 0, false);
    });
}

size_t quantize_q5_0(const float * src, void * dst, int64_t nrows, int64_t n, const float * imatrix) {
    return quantize_rows(GGML_TYPE_Q5_0, src, dst, nrows, n, [&](const float * x, uint8_t * y) {
        if (!imatrix) return q5_0_from_float(x, y, n);
        quantize_row_symmetric<16>(x, imatrix, n, (ggml_fp16_t *) y, sizeof(block_q5_0), kiln_pack_q5,
                                   offsetof(block_q5_0, qs), offsetof(block_q5_0, qh), false);
    });
}

// q6_0 always searches the scale (x^2 weights without an imatrix), as ik_llama.cpp does.
size_t quantize_q6_0(const float * src, void * dst, int64_t nrows, int64_t n, const float * imatrix) {
    return quantize_rows(GGML_TYPE_Q6_0, src, dst, nrows, n, [&](const float * x, uint8_t * y) {
        quantize_row_symmetric<32>(x, imatrix, n, (ggml_fp16_t *) y, sizeof(block_q6_0), kiln_pack_q6,
                                   offsetof(block_q6_0, qs), offsetof(block_q6_0, qh), true);
    });
}

size_t quantize_q4_1(const float * src, void * dst, int64_t nrows, int64_t n, const float * imatrix) {
    return quantize_rows(GGML_TYPE_Q4_1, src, dst, nrows, n, [&](const float * x, uint8_t * y) {
        if (!imatrix) return q4_1_from_float(x, y, n);
        quantize_row_asymmetric<15>(x, imatrix, n, y, sizeof(block_q4_1), pack_q4, offsetof(block_q4_1, qs), 0);
    });
}

size_t quantize_q5_1(const float * src, void * dst, int64_t nrows, int64_t n, const float * imatrix) {
    return quantize_rows(GGML_TYPE_Q5_1, src, dst, nrows, n, [&](const float * x, uint8_t * y) {
        if (!imatrix) return q5_1_from_float(x, y, n);
        quantize_row_asymmetric<31>(x, imatrix, n, y, sizeof(block_q5_1), kiln_pack_q5, offsetof(block_q5_1, qs),
                                    offsetof(block_q5_1, qh));
    });
}

// ---------------------------------------------------------------------------------------------
// scalar gemm: the reference the SIMD kernels are compared with. Each block's integer dot
// product is exact; it is scaled once per block.

struct dot_q4_0 {
    using wblock = block_q4_0;
    using xblock = block_q8_0;
    static float block(const wblock & w, const xblock & x) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) {
            sum += ((w.qs[j] & 0xF) - 8) * x.qs[j] + ((w.qs[j] >> 4) - 8) * x.qs[j + 16];
        }
        return sum * GGML_FP16_TO_FP32(w.d) * GGML_FP16_TO_FP32(x.d);
    }
};

struct dot_q4_1 {
    using wblock = block_q4_1;
    using xblock = block_q8_1;
    static float block(const wblock & w, const xblock & x) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += (w.qs[j] & 0xF) * x.qs[j] + (w.qs[j] >> 4) * x.qs[j + 16];
        return sum * GGML_FP16_TO_FP32(w.d) * GGML_FP16_TO_FP32(x.d) + GGML_FP16_TO_FP32(w.m) * GGML_FP16_TO_FP32(x.s);
    }
};

struct dot_q5_0 {
    using wblock = block_q5_0;
    using xblock = block_q8_0;
    static float block(const wblock & w, const xblock & x) {
        int q[32], sum = 0;
        q5_levels(w, q);
        for (int j = 0; j < 32; ++j) sum += (q[j] - 16) * x.qs[j];
        return sum * GGML_FP16_TO_FP32(w.d) * GGML_FP16_TO_FP32(x.d);
    }
};

struct dot_q5_1 {
    using wblock = block_q5_1;
    using xblock = block_q8_1;
    static float block(const wblock & w, const xblock & x) {
        int q[32], sum = 0;
        q5_levels(w, q);
        for (int j = 0; j < 32; ++j) sum += q[j] * x.qs[j];
        return sum * GGML_FP16_TO_FP32(w.d) * GGML_FP16_TO_FP32(x.d) + GGML_FP16_TO_FP32(w.m) * GGML_FP16_TO_FP32(x.s);
    }
};

struct dot_q6_0 {
    using wblock = block_q6_0;
    using xblock = block_q8_0;
    static float block(const wblock & w, const xblock & x) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) {
            const int h = w.qh[j % 8] >> (4 * (j / 8));
            const int q0 = ((w.qs[j] & 0xF) | ((h & 3) << 4)) - 32;
            const int q1 = ((w.qs[j] >> 4) | (((h >> 2) & 3) << 4)) - 32;
            sum += q0 * x.qs[j] + q1 * x.qs[j + 16];
        }
        return sum * GGML_FP16_TO_FP32(w.d) * GGML_FP16_TO_FP32(x.d);
    }
};

struct dot_q8_0 {
    using wblock = block_q8_0;
    using xblock = block_q8_0;
    static float block(const wblock & w, const xblock & x) {
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += w.qs[j] * x.qs[j];
        return sum * GGML_FP16_TO_FP32(w.d) * GGML_FP16_TO_FP32(x.d);
    }
};

template <typename Dot>
void gemm_scalar(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                 size_t dst_stride, int nr, int nc) {
    const int64_t nb = n / 32;
    for (int c = 0; c < nc; ++c) {
        const auto * xr = (const typename Dot::xblock *) ((const uint8_t *) x + c * x_stride);
        for (int r = 0; r < nr; ++r) {
            const auto * wr = (const typename Dot::wblock *) ((const uint8_t *) w + r * w_stride);
            float sum = 0.0f;
            for (int64_t ib = 0; ib < nb; ++ib) sum += Dot::block(wr[ib], xr[ib]);
            dst[c * dst_stride + r] = sum;
        }
    }
}

void register_legacy_types() {
    struct entry {
        ggml_type t;
        ggml_to_float_t to_float;
        ggml_from_float_t from_float;
        ggml_quantize_rows_t quantize;
    };
    const entry entries[] = {
        { GGML_TYPE_Q4_0, q4_0_to_float, q4_0_from_float, quantize_q4_0 },
        { GGML_TYPE_Q4_1, q4_1_to_float, q4_1_from_float, quantize_q4_1 },
        { GGML_TYPE_Q5_0, q5_0_to_float, q5_0_from_float, quantize_q5_0 },
        { GGML_TYPE_Q5_1, q5_1_to_float, q5_1_from_float, quantize_q5_1 },
        { GGML_TYPE_Q6_0, q6_0_to_float, q6_0_from_float, quantize_q6_0 },
    };
    for (const entry & e : entries) {
        auto * tt = ggml_type_traits_mut(e.t);
        tt->to_float = e.to_float;
        tt->from_float_ref = e.from_float;
        tt->quantize = e.quantize;
    }
    // q8_0's decoder and encoder are registered with the activation types (quants-q8.cpp)
    ggml_cpu_register_gemm(GGML_TYPE_Q4_0, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, gemm_scalar<dot_q4_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q4_1, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_1, gemm_scalar<dot_q4_1>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_0, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, gemm_scalar<dot_q5_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_1, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_1, gemm_scalar<dot_q5_1>);
    ggml_cpu_register_gemm(GGML_TYPE_Q6_0, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, gemm_scalar<dot_q6_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_0, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_0, gemm_scalar<dot_q8_0>);
}
GGML_REGISTER(register_legacy_types);

} // namespace
