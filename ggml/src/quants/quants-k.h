// The k-quant family (q2_K .. q6_K): 256-value super-blocks with 16 or 8 sub-block scales.
// Block layouts are those of llama.cpp's GGUF files (docs/FORMATS.md); the CPU kernels in
// cpu/*/quants-k.cpp include this header for the layouts and the shared scale decoding.
#pragma once

#include "quants-common.h"

#include <cstdint>
#include <cstring>

// The blocks (block_q2_K .. block_q6_K) and k4_scale_min are declared in quants-blocks.h
// (included through quants-common.h), which the CUDA kernels share.

// All eight at once, 32 bits at a time (what the SIMD kernels use): sc[j], mn[j] for j < 8.
static inline void k4_scales_mins(const uint8_t * packed, uint8_t * sc, uint8_t * mn) {
    uint32_t u[3];
    std::memcpy(u, packed, 12);
    const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
    const uint32_t s0 = u[0] & lo6;
    const uint32_t s1 = (u[2] & lo4) | (((u[0] >> 6) & lo2) << 4);
    const uint32_t m0 = u[1] & lo6;
    const uint32_t m1 = ((u[2] >> 4) & lo4) | (((u[1] >> 6) & lo2) << 4);
    std::memcpy(sc, &s0, 4);
    std::memcpy(sc + 4, &s1, 4);
    std::memcpy(mn, &m0, 4);
    std::memcpy(mn + 4, &m1, 4);
}

// The same as two 64-bit words (byte j of sc / mn is sc[j] / mn[j]), for kernels that move them
// into vector registers: no bytes stored and read back (an 8-byte load of two 4-byte stores
// cannot be forwarded and stalls).
static inline void k4_scales_mins_u64(const uint8_t * packed, uint64_t & sc, uint64_t & mn) {
    uint64_t u01;
    uint32_t u2;
    std::memcpy(&u01, packed, 8);
    std::memcpy(&u2, packed + 8, 4);
    // low: sc[0..3] | mn[0..3] << 32; high: sc[4..7] | mn[4..7] << 32 (the shift by 6 moves no
    // bit across the 32-bit halves' kept fields)
    const uint64_t low = u01 & 0x3f3f3f3f3f3f3f3full;
    const uint64_t high = (((u01 >> 6) & 0x0303030303030303ull) << 4) | (u2 & 0x0f0f0f0fu) |
                          (uint64_t) ((u2 >> 4) & 0x0f0f0f0fu) << 32;
    sc = (low & 0xffffffffu) | high << 32;
    mn = low >> 32 | (high & 0xffffffff00000000ull);
}

// The 16 signed 6-bit scales of a q3_K block (already minus 32).
static inline void q3_K_scales(const uint8_t * packed, int8_t * out) {
    for (int j = 0; j < 16; ++j) out[j] = (int8_t) q3_K_scale(packed, j);
}

// One block reduced to the form every kernel uses: value = d * s[g] * u - dm * mi[g] for the
// 16 groups g of 16 values, u unsigned (natural order). For q3_K / q6_K the offset is folded
// into mi (mi = offset * s, dm = d); for q2/q4/q5_K mi is the min and dm = dmin.
struct k_block_decoded {
    alignas(64) uint8_t u[QK_K];
    int16_t s[16];
    int16_t mi[16];
    float   d;
    float   dm;
};

// Scalar decoders into that form (quants-k.cpp); SIMD kernels have their own.
void k_decode_q2_K(const void * block, k_block_decoded & out);
void k_decode_q3_K(const void * block, k_block_decoded & out);
void k_decode_q4_K(const void * block, k_block_decoded & out);
void k_decode_q5_K(const void * block, k_block_decoded & out);
void k_decode_q6_K(const void * block, k_block_decoded & out);

// The batch reference's arithmetic for one decoded super-block against its 8 q8_0 activation
// blocks (one scale per 32 values, two 16-value groups): sum plus, block by block,
// dx * (d * sum_g s*dot - dm * sum_g mi*sum(q)). Shared by the plain k-quants' scalar batch
// kernel and their interleaved twins' (quants-interleaved.cpp), so that both give the same bits.
static inline float k_block_dot_q8_0(const k_block_decoded & blk, const block_q8_0 * xa, float sum) {
    for (int j = 0; j < QK_K / QK8_0; ++j) {
        int32_t dot = 0, mins = 0;
        for (int g = 2 * j; g < 2 * j + 2; ++g) {
            int32_t dg = 0, sg = 0;
            for (int l = 0; l < 16; ++l) {
                const int q = xa[j].qs[16 * (g - 2 * j) + l];
                dg += blk.u[16 * g + l] * q;
                sg += q;
            }
            dot  += blk.s[g] * dg;
            mins += blk.mi[g] * sg;
        }
        sum += GGML_FP16_TO_FP32(xa[j].d) * (blk.d * (float) dot - blk.dm * (float) mins);
    }
    return sum;
}

// Reference encoders (no importance weights; what llama.cpp writes without an imatrix) and the
// full quantizers: with imatrix != NULL the importance-weighted search. The quantizers return
// bytes written, or 0 if a value is not finite. (quants-k-quantize.cpp)
void quantize_row_q2_K_ref(const float * x, void * y, int64_t n);
void quantize_row_q3_K_ref(const float * x, void * y, int64_t n);
void quantize_row_q4_K_ref(const float * x, void * y, int64_t n);
void quantize_row_q5_K_ref(const float * x, void * y, int64_t n);
void quantize_row_q6_K_ref(const float * x, void * y, int64_t n);
size_t quantize_q2_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t quantize_q3_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t quantize_q4_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t quantize_q5_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
size_t quantize_q6_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix);
