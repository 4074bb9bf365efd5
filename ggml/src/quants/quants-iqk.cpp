// The ik_llama.cpp non-linear types that are not trellis coded: level tables, the decoders into
// the common form (quants-ik.h), reference dequantization, the scalar gemm against q8_K, and
// registration. Quantizers are in quants-ik-quantize.cpp.
#include "quants-ik.h"

#include "cpu-traits.h"

#include <cmath>
#include <cstring>

// the grids are listed once, in quants-blocks.h, for the CPU and the GPU
const int8_t ik_iq2nl_values[8] = KILN_IQ2NL_VALUES;
const int8_t ik_iq3nl_values[16] = KILN_IQ3NL_VALUES;
const int8_t ik_iq4k_values[32] = KILN_IQ4K_VALUES;
const int8_t ik_iq5nl_values[64] = KILN_IQ5NL_VALUES;
const int8_t ik_iq6nl_values[128] = {
    -127, -121, -115, -109, -104, -98, -93, -88, -84, -79, -74, -70, -66, -62, -58, -54,
    -51, -47, -44, -40, -37, -34, -31, -28, -25, -22, -19, -16, -13, -11, -8, -5,
    -2, 0, 3, 6, 9, 12, 14, 17, 20, 23, 27, 30, 33, 36, 40, 44,
    47, 51, 55, 59, 63, 68, 72, 77, 82, 87, 92, 98, 103, 109, 115, 121,
    -126, -120, -114, -108, -103, -97, -92, -87, -83, -78, -73, -69, -65, -61, -57, -53,
    -50, -46, -43, -39, -36, -33, -30, -27, -24, -21, -18, -15, -12, -10, -7, -4,
    -1, 1, 4, 7, 10, 13, 15, 18, 21, 24, 28, 31, 34, 37, 41, 45,
    48, 52, 56, 60, 64, 69, 73, 78, 83, 88, 93, 99, 104, 110, 116, 122 };
const uint16_t ik_iq2kl_values[32] = KILN_IQ2KL_VALUES;

// ---------------------------------------------------------------------------------------------
// Decoders into the common form. Index arithmetic mirrors where the reference's dequantizer
// reads each value, so (d * sc) * q is its result exactly.

void ik_decode_iq2_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq2_k *) vb;
    out.d = GGML_FP16_TO_FP32(b.d);
    for (int ib32 = 0; ib32 < 8; ++ib32) {
        out.sc[2 * ib32]     = (int16_t) ((b.scales[ib32] & 0xF) - 8);
        out.sc[2 * ib32 + 1] = (int16_t) ((b.scales[ib32] >> 4) - 8);
        const int8_t * v1 = ik_iq2nl_values + ((b.extra >> (2 * ib32)) & 1) * 4;
        const int8_t * v2 = ik_iq2nl_values + ((b.extra >> (2 * ib32 + 1)) & 1) * 4;
        const uint8_t * qs = b.qs + 32 * (ib32 / 4);
        const int shift = 2 * (ib32 % 4);
        int8_t * q = out.q + 32 * ib32;
        for (int j = 0; j < 16; ++j) {
            q[j]      = v1[(qs[j] >> shift) & 3];
            q[j + 16] = v2[(qs[j + 16] >> shift) & 3];
        }
    }
}

void ik_decode_iq3_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq3_k *) vb;
    out.d = GGML_FP16_TO_FP32(b.d);
    for (int ib32 = 0; ib32 < 8; ++ib32) {
        const int m1 = 2 * (b.scales_l[ib32] & 0xF) + 1, m2 = 2 * (b.scales_l[ib32] >> 4) + 1;
        out.sc[2 * ib32]     = (int16_t) ((b.scales_h >> (2 * ib32)) & 1 ? -m1 : m1);
        out.sc[2 * ib32 + 1] = (int16_t) ((b.scales_h >> (2 * ib32 + 1)) & 1 ? -m2 : m2);
        const int8_t * v1 = ik_iq3nl_values + ((b.extra >> (2 * ib32)) & 1) * 8;
        const int8_t * v2 = ik_iq3nl_values + ((b.extra >> (2 * ib32 + 1)) & 1) * 8;
        const uint8_t * qs = b.qs + 32 * (ib32 / 4);
        const int shift = 2 * (ib32 % 4);
        int8_t * q = out.q + 32 * ib32;
        for (int j = 0; j < 16; ++j) {
            q[j]      = v1[((qs[j] >> shift) & 3) | (((b.qh[j] >> ib32) & 1) << 2)];
            q[j + 16] = v2[((qs[j + 16] >> shift) & 3) | (((b.qh[j + 16] >> ib32) & 1) << 2)];
        }
    }
}

void ik_decode_iq4_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq4_k *) vb;
    out.d = GGML_FP16_TO_FP32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
        const int sh = b.scales_h[ib / 2] >> 4 * (ib % 2);
        out.sc[2 * ib]     = (int16_t) (((b.scales_l[ib] & 0xF) | ((sh << 4) & 0x30)) - 32);
        out.sc[2 * ib + 1] = (int16_t) (((b.scales_l[ib] >> 4) | ((sh << 2) & 0x30)) - 32);
        const int8_t * v1 = ik_iq4k_values + ((b.extra >> (2 * ib)) & 1) * 16;
        const int8_t * v2 = ik_iq4k_values + ((b.extra >> (2 * ib + 1)) & 1) * 16;
        const uint8_t * qs = b.qs + 16 * ib;
        int8_t * q = out.q + 32 * ib;
        for (int j = 0; j < 16; ++j) {
            q[j]      = v1[qs[j] & 0xF];
            q[j + 16] = v2[qs[j] >> 4];
        }
    }
}

void ik_decode_iq5_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq5_k *) vb;
    out.d = GGML_FP16_TO_FP32(b.d);
    for (int ib64 = 0; ib64 < 4; ++ib64) {
        const int sl0 = b.scales_l[2 * ib64], sl1 = b.scales_l[2 * ib64 + 1], sh = b.scales_h[ib64];
        out.sc[4 * ib64 + 0] = (int16_t) (((sl0 & 0xF) | ((sh << 4) & 0x30)) - 32);
        out.sc[4 * ib64 + 1] = (int16_t) (((sl0 >> 4) | ((sh << 2) & 0x30)) - 32);
        out.sc[4 * ib64 + 2] = (int16_t) (((sl1 & 0xF) | (sh & 0x30)) - 32);
        out.sc[4 * ib64 + 3] = (int16_t) (((sl1 >> 4) | ((sh >> 2) & 0x30)) - 32);
        const int8_t * v[4];
        for (int k = 0; k < 4; ++k) v[k] = ik_iq5nl_values + ((b.extra >> (4 * ib64 + k)) & 1) * 32;
        const uint8_t * qs = b.qs + 32 * ib64;
        const int shift = 2 * ib64;
        int8_t * q = out.q + 64 * ib64;
        for (int j = 0; j < 16; ++j) {
            q[j]      = v[0][(qs[j] & 0xF) | (((b.qh[j] >> shift) & 1) << 4)];
            q[j + 16] = v[1][(qs[j + 16] & 0xF) | (((b.qh[j + 16] >> shift) & 1) << 4)];
            q[j + 32] = v[2][(qs[j] >> 4) | (((b.qh[j] >> shift) & 2) << 3)];
            q[j + 48] = v[3][(qs[j + 16] >> 4) | (((b.qh[j + 16] >> shift) & 2) << 3)];
        }
    }
}

// 6-bit level indices (0..63) of an iq6_k block and the shifted flags; shared by the int8
// decoder (dot products) and the polynomial dequantizer.
static void iq6_k_levels(const block_iq6_k & b, uint8_t * L) {
    for (int ib64 = 0; ib64 < 4; ++ib64) {
        const uint8_t * qs = b.qs + 32 * ib64;
        const uint8_t * qh = b.qh + 32 * (ib64 / 2);
        const int shift = 4 * (ib64 % 2);
        uint8_t * l = L + 64 * ib64;
        for (int j = 0; j < 16; ++j) {
            l[j]      = (qs[j] & 0xF) | (((qh[j] >> shift) & 3) << 4);
            l[j + 16] = (qs[j + 16] & 0xF) | (((qh[j + 16] >> shift) & 3) << 4);
            l[j + 32] = (qs[j] >> 4) | (((qh[j] >> shift) & 0xC) << 2);
            l[j + 48] = (qs[j + 16] >> 4) | (((qh[j + 16] >> shift) & 0xC) << 2);
        }
    }
}

void ik_decode_iq6_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq6_k *) vb;
    out.d = GGML_FP16_TO_FP32(b.d);
    uint8_t L[QK_K];
    iq6_k_levels(b, L);
    for (int g = 0; g < 16; ++g) {
        out.sc[g] = b.scales[g];
        const int8_t * v = ik_iq6nl_values + ((b.extra >> g) & 1) * 64;
        for (int i = 16 * g; i < 16 * g + 16; ++i) out.q[i] = v[L[i]];
    }
}

void ik_decode_iq4_ks(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq4_ks *) vb;
    out.d = row_d;
    for (int ib = 0; ib < 8; ++ib) {
        out.sc[2 * ib] = out.sc[2 * ib + 1] = (int16_t) ((b.scales[ib] & 254) - 127);
        const int8_t * v = ik_iq4k_values + (b.scales[ib] & 1) * 16;
        const uint8_t * qs = b.qs + 16 * ib;
        int8_t * q = out.q + 32 * ib;
        for (int j = 0; j < 16; ++j) {
            q[j]      = v[qs[j] & 0xF];
            q[j + 16] = v[qs[j] >> 4];
        }
    }
}

void ik_decode_iq4_kss(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq4_kss *) vb;
    out.d = row_d;
    uint16_t w[128];
    std::memcpy(w, b.qs, sizeof(w));
    for (int ib = 0; ib < 8; ++ib) {
        int ls = 0;
        uint8_t nib[16];
        for (int k = 0; k < 8; ++k) {
            const uint16_t word = w[8 * ib + k];
            uint16_t v = word & 0xFFFE;
            v ^= (uint16_t) (v >> 1);
            ls |= (word & 1) << k;
            nib[2 * k]     = (uint8_t) (v & 0xFF);
            nib[2 * k + 1] = (uint8_t) (v >> 8);
        }
        out.sc[2 * ib] = out.sc[2 * ib + 1] = (int16_t) ((ls & 254) - 127);
        const int8_t * vals = ik_iq4k_values + (ls & 1) * 16;
        int8_t * q = out.q + 32 * ib;
        for (int j = 0; j < 16; ++j) {
            q[j]      = vals[nib[j] & 0xF];
            q[j + 16] = vals[nib[j] >> 4];
        }
    }
}

void ik_decode_iq5_ks(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq5_ks *) vb;
    out.d = row_d;
    for (int ib64 = 0; ib64 < 4; ++ib64) {
        const uint8_t s1 = b.scales[2 * ib64], s2 = b.scales[2 * ib64 + 1];
        out.sc[4 * ib64] = out.sc[4 * ib64 + 1] = (int16_t) ((s1 & 254) - 127);
        out.sc[4 * ib64 + 2] = out.sc[4 * ib64 + 3] = (int16_t) ((s2 & 254) - 127);
        const int8_t * v1 = ik_iq5nl_values + (s1 & 1) * 32;
        const int8_t * v2 = ik_iq5nl_values + (s2 & 1) * 32;
        const uint8_t * qs = b.qs + 32 * ib64;
        int8_t * q = out.q + 64 * ib64;
        for (int j = 0; j < 32; ++j) {
            q[j]      = v1[(qs[j] & 0xF) | (((b.qh[j] >> (2 * ib64)) & 1) << 4)];
            q[j + 32] = v2[(qs[j] >> 4) | (((b.qh[j] >> (2 * ib64 + 1)) & 1) << 4)];
        }
    }
}

void ik_decode_iq2_ks(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq2_ks *) vb;
    out.d = row_d;
    for (int ib64 = 0; ib64 < 4; ++ib64) {
        const int ls1 = ((b.scales[ib64] & 0xF) | (((b.extra >> (8 + 2 * ib64)) & 1) << 4)) - 16;
        const int ls2 = ((b.scales[ib64] >> 4) | (((b.extra >> (9 + 2 * ib64)) & 1) << 4)) - 16;
        out.sc[4 * ib64] = out.sc[4 * ib64 + 1] = (int16_t) ls1;
        out.sc[4 * ib64 + 2] = out.sc[4 * ib64 + 3] = (int16_t) ls2;
        const int8_t * v1 = ik_iq2nl_values + ((b.extra >> (2 * ib64)) & 1) * 4;
        const int8_t * v2 = ik_iq2nl_values + ((b.extra >> (2 * ib64 + 1)) & 1) * 4;
        const uint8_t * qs = b.qs + 32 * (ib64 / 2);
        const int shift = 4 * (ib64 % 2);
        int8_t * q = out.q + 64 * ib64;
        for (int j = 0; j < 32; ++j) {
            q[j]      = v1[(qs[j] >> shift) & 3];
            q[j + 32] = v2[(qs[j] >> (shift + 2)) & 3];
        }
    }
}

void ik_decode_iq3_ks(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq3_ks *) vb;
    out.d = row_d;
    for (int j = 0; j < 4; ++j) {
        const int ls1 = ((b.scales[j] & 0xF) | (((b.extra >> j) & 1) << 4)) - 16;
        const int ls2 = ((b.scales[j] >> 4) | (((b.extra >> (j + 4)) & 1) << 4)) - 16;
        out.sc[2 * j] = out.sc[2 * j + 1] = (int16_t) ls1;
        out.sc[2 * (j + 4)] = out.sc[2 * (j + 4) + 1] = (int16_t) ls2;
    }
    for (int i128 = 0; i128 < 2; ++i128) {
        const uint8_t * qs = b.qs + 32 * i128;
        for (int ib = 0; ib < 4; ++ib) {
            const int blk = 4 * i128 + ib;
            const int8_t * v = ik_iq3nl_values + ((b.extra >> (8 + blk)) & 1) * 8;
            int8_t * q = out.q + 32 * blk;
            for (int j = 0; j < 32; ++j) q[j] = v[((qs[j] >> (2 * ib)) & 3) | (((b.qh[j] >> blk) & 1) << 2)];
        }
    }
}

void ik_decode_iq2_kl(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq2_kl *) vb;
    out.d = row_d;
    for (int ib64 = 0; ib64 < 4; ++ib64) {
        const int ls1 = (((b.scales_l[(2 * ib64) % 4] >> 4 * (ib64 / 2)) & 0xF) | (((b.scales_h >> (4 * ib64)) & 3) << 4)) - 32;
        const int ls2 = (((b.scales_l[(2 * ib64 + 1) % 4] >> 4 * (ib64 / 2)) & 0xF) | (((b.scales_h >> (4 * ib64 + 2)) & 3) << 4)) - 32;
        out.sc[4 * ib64] = out.sc[4 * ib64 + 1] = (int16_t) ls1;
        out.sc[4 * ib64 + 2] = out.sc[4 * ib64 + 3] = (int16_t) ls2;
        const uint8_t * qs = b.qs + 16 * ib64;
        int8_t * q = out.q + 64 * ib64;
        for (int j = 0; j < 16; ++j) {
            const uint16_t p1 = ik_iq2kl_values[(qs[j] & 0xF) | (((b.qh[j] >> (2 * ib64)) & 1) << 4)];
            const uint16_t p2 = ik_iq2kl_values[(qs[j] >> 4) | (((b.qh[j] >> (2 * ib64 + 1)) & 1) << 4)];
            q[2 * j]          = (int8_t) (p1 & 0xFF);
            q[2 * j + 1]      = (int8_t) (p1 >> 8);
            q[2 * j + 32]     = (int8_t) (p2 & 0xFF);
            q[2 * j + 33]     = (int8_t) (p2 >> 8);
        }
    }
}

namespace {

const ik_row_format k_formats[] = {
    { IK_ROW_NONE, sizeof(block_iq2_k), ik_decode_iq2_k },   { IK_ROW_NONE, sizeof(block_iq3_k), ik_decode_iq3_k },
    { IK_ROW_NONE, sizeof(block_iq4_k), ik_decode_iq4_k },   { IK_ROW_NONE, sizeof(block_iq5_k), ik_decode_iq5_k },
    { IK_ROW_NONE, sizeof(block_iq6_k), ik_decode_iq6_k },   { IK_ROW_F32, sizeof(block_iq4_ks), ik_decode_iq4_ks },
    { IK_ROW_F16, sizeof(block_iq2_ks), ik_decode_iq2_ks },  { IK_ROW_F32, sizeof(block_iq4_kss), ik_decode_iq4_kss },
    { IK_ROW_F32, sizeof(block_iq5_ks), ik_decode_iq5_ks },  { IK_ROW_F16, sizeof(block_iq3_ks), ik_decode_iq3_ks },
    { IK_ROW_F16, sizeof(block_iq2_kl), ik_decode_iq2_kl },
};

} // namespace

const ik_row_format * ik_get_row_format(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_K:   return &k_formats[0];
        case GGML_TYPE_IQ3_K:   return &k_formats[1];
        case GGML_TYPE_IQ4_K:   return &k_formats[2];
        case GGML_TYPE_IQ5_K:   return &k_formats[3];
        case GGML_TYPE_IQ6_K:   return &k_formats[4];
        case GGML_TYPE_IQ4_KS:  return &k_formats[5];
        case GGML_TYPE_IQ2_KS:  return &k_formats[6];
        case GGML_TYPE_IQ4_KSS: return &k_formats[7];
        case GGML_TYPE_IQ5_KS:  return &k_formats[8];
        case GGML_TYPE_IQ3_KS:  return &k_formats[9];
        case GGML_TYPE_IQ2_KL:  return &k_formats[10];
        default:                return nullptr;
    }
}

namespace {

// ---------------------------------------------------------------------------------------------
// Dequantization: (d * sc) * q per value, the reference's expression.

template <ggml_type T>
void ik_to_float(const void * vx, float * y, int64_t n) {
    const ik_row_format & f = *ik_get_row_format(T);
    const float row_d = ik_row_scale_value(f, vx);
    const char * blocks = (const char *) vx + f.row_scale;
    ik_decoded db;
    for (int64_t ib = 0; ib < n / QK_K; ++ib, y += QK_K) {
        f.decode(blocks + ib * f.block_bytes, row_d, db);
        for (int g = 0; g < QK_K / 16; ++g) {
            const float dl = db.d * (float) db.sc[g];
            for (int i = 16 * g; i < 16 * g + 16; ++i) y[i] = dl * (float) db.q[i];
        }
    }
}

// iq6_k's reference dequantizer evaluates a cubic in the 6-bit index (the int8 table is its
// rounded form, used only by dot products); the polynomial is kept here for bit-exact output.
void iq6_k_to_float(const void * vx, float * y, int64_t n) {
    const auto * x = (const block_iq6_k *) vx;
    const float A = -127.f, B = 6.2568f, C = 0.11218f, D = 0.0011972f;
    uint8_t L[QK_K];
    for (int64_t ib = 0; ib < n / QK_K; ++ib, y += QK_K) {
        const float d = GGML_FP16_TO_FP32(x[ib].d);
        iq6_k_levels(x[ib], L);
        for (int g = 0; g < 16; ++g) {
            const float dl = d * x[ib].scales[g];
            const float m = (x[ib].extra >> g) & 1 ? 1.f : 0.f;
            for (int i = 16 * g; i < 16 * g + 16; ++i) {
                const float q = (float) L[i];
                // the reference is built with FMA contraction: the cubic is a chain of fused steps
                y[i] = dl * (std::fma(q, std::fma(q, std::fma(q, D, -C), B), A) + m);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Scalar gemm against q8_K: decode each weight block once, reuse it for every column.

template <ggml_type T>
void ik_gemm_scalar(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                    size_t dst_stride, int nr, int nc) {
    const ik_row_format & f = *ik_get_row_format(T);
    const int64_t nb = n / QK_K;
    ik_decoded db;
    for (int r = 0; r < nr; ++r) {
        const char * row = (const char *) w + r * w_stride;
        const float row_d = ik_row_scale_value(f, row);
        const char * blocks = row + f.row_scale;
        for (int c = 0; c < nc; ++c) dst[c * dst_stride + r] = 0.0f;
        for (int64_t i = 0; i < nb; ++i) {
            f.decode(blocks + i * f.block_bytes, row_d, db);
            for (int c = 0; c < nc; ++c) {
                const auto & a = ((const block_q8_K *) ((const char *) x + c * x_stride))[i];
                dst[c * dst_stride + r] += (db.d * a.d) * (float) ik_block_dot_scalar(db, a.qs);
            }
        }
    }
}

template <ggml_type T>
void register_one(ggml_quantize_rows_t quantize, ggml_to_float_t to_float = ik_to_float<T>) {
    ggml_type_traits * tt = ggml_type_traits_mut(T);
    tt->to_float = to_float;
    tt->quantize = quantize;
    tt->requires_imatrix = false;
    ggml_cpu_register_gemm(T, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K, ik_gemm_scalar<T>);
}

void register_iqk_types() {
    register_one<GGML_TYPE_IQ2_K>(ik_quantize_iq2_k);
    register_one<GGML_TYPE_IQ3_K>(ik_quantize_iq3_k);
    register_one<GGML_TYPE_IQ4_K>(ik_quantize_iq4_k);
    register_one<GGML_TYPE_IQ5_K>(ik_quantize_iq5_k);
    register_one<GGML_TYPE_IQ6_K>(ik_quantize_iq6_k, iq6_k_to_float);
    register_one<GGML_TYPE_IQ4_KS>(ik_quantize_iq4_ks);
    register_one<GGML_TYPE_IQ2_KS>(ik_quantize_iq2_ks);
    register_one<GGML_TYPE_IQ4_KSS>(ik_quantize_iq4_kss);
    register_one<GGML_TYPE_IQ5_KS>(ik_quantize_iq5_ks);
    register_one<GGML_TYPE_IQ3_KS>(ik_quantize_iq3_ks);
    register_one<GGML_TYPE_IQ2_KL>(ik_quantize_iq2_kl);
}
GGML_REGISTER(register_iqk_types);

} // namespace
