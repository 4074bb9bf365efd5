// The ik_llama.cpp trellis types iq1_kt .. iq4_kt: decoders into the common ik form
// (quants-ik.h), dequantization and the scalar gemm against q8_K.
//
// Every value is generated from a seed by an integer hash: seed * K^(m+1) mod 2^32, masked to
// four 6-bit bytes whose sum minus 126 is the value (an approximately gaussian integer in
// [-126, 126]). So the values are exact int8 levels and a block dot product with q8_K is exact
// integer arithmetic, like the other ik types.
//
// The reference scales iq2_kt and iq3_kt products by 1.05 and 1.01 at inference time (not in
// its dequantizer); models quantized to these types expect it, so the gemm decoders apply it.
#include "quants-ik.h"

#include "cpu-traits.h"

#include <cstring>

namespace {

constexpr uint32_t kTrellisMul = 0xCBAC1FEDu;
// Seeds are stored without this offset; iq4_kt's second offset selects the upper half of the
// 16-bit seed space.
constexpr uint32_t kSeedOffset = 4096;
constexpr uint32_t kSeedOffsetIq4B = 4096 + 32768;

struct trellis_powers {
    uint32_t p[8];
    constexpr trellis_powers() : p() {
        uint32_t v = kTrellisMul;
        for (int m = 0; m < 8; ++m) {
            p[m] = v;
            v *= kTrellisMul;
        }
    }
};
constexpr trellis_powers k_pow;

// n (4 or 8) values of one seed.
inline void trellis_run(uint32_t seed, int n, int8_t * out) {
    for (int m = 0; m < n; ++m) {
        const uint32_t x = (seed * k_pow.p[m]) & 0x3f3f3f3fu;
        out[m] = (int8_t) ((int) (x & 0xFF) + (int) ((x >> 8) & 0xFF) + (int) ((x >> 16) & 0xFF) + (int) (x >> 24) - 126);
    }
}

// Per-32 scale s of block ib into the 16-value slots of the common form.
inline void set_scale32(ik_decoded & out, int ib, int s) {
    out.sc[2 * ib] = out.sc[2 * ib + 1] = (int16_t) s;
}

inline uint16_t load_u16(const uint8_t * p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

} // namespace

void ik_decode_iq1_kt(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq1_kt *) vb;
    out.d = row_d;
    for (int ib = 0; ib < 8; ++ib) {
        set_scale32(out, ib, ik_iq4k_values[b.sh[ib] & 0xF]);
        for (int g = 0; g < 4; ++g) {
            const int run = 4 * ib + g;
            const uint32_t seed = b.ql[run] | (((uint32_t) (b.qh[run % 16] >> 4 * (run / 16)) & 0xF) << 8) |
                                  (((uint32_t) (b.sh[ib] >> (4 + g)) & 1) << 12);
            trellis_run(seed + kSeedOffset, 8, out.q + 8 * run);
        }
    }
}

void ik_decode_iq2_kt(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq2_kt *) vb;
    out.d = row_d;
    for (int ib = 0; ib < 8; ++ib) {
        set_scale32(out, ib, ik_iq4k_values[(b.scales[ib % 4] >> 4 * (ib / 4)) & 0xF]);
        for (int j = 0; j < 4; ++j) trellis_run(load_u16(b.ql + 2 * (4 * ib + j)) + kSeedOffset, 8, out.q + 32 * ib + 8 * j);
    }
}

void ik_decode_iq3_kt(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq3_kt *) vb;
    out.d = row_d;
    for (int ib = 0; ib < 8; ++ib) {
        set_scale32(out, ib, (b.scales[ib % 4] >> 4 * (ib / 4)) & 0xF);
        for (int j = 0; j < 4; ++j) trellis_run(load_u16(b.ql + 2 * (4 * ib + j)) + kSeedOffset, 8, out.q + 32 * ib + 8 * j);
        int8_t * q = out.q + 32 * ib;
        for (int p = 0; p < 32; ++p) {
            const int a = q[p] < 0 ? -q[p] : q[p];
            q[p] = (int8_t) ((b.qh[p] >> ib) & 1 ? -a : a);
        }
    }
}

void ik_decode_iq4_kt(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq4_kt *) vb;
    out.d = row_d;
    for (int ib = 0; ib < 8; ++ib) {
        uint32_t shb;
        std::memcpy(&shb, b.shb + 4 * ib, 4);
        set_scale32(out, ib, (int) ((shb & 0xFF) >> 1) - 64);
        const uint32_t offset = shb & 1 ? kSeedOffsetIq4B : kSeedOffset;
        for (int g = 0; g < 8; ++g) {
            const int run = 8 * ib + g;
            const uint32_t seed = b.ql[run] | (((uint32_t) (b.qh[run % 32] >> 4 * (run / 32)) & 0xF) << 8) |
                                  (((shb >> (8 + 3 * g)) & 7) << 12);
            trellis_run(seed + offset, 4, out.q + 4 * run);
        }
    }
}

void ik_decode_iq2_kt_gemm(const void * b, float row_d, ik_decoded & out) { ik_decode_iq2_kt(b, row_d * kIq2KtGemmFactor, out); }
void ik_decode_iq3_kt_gemm(const void * b, float row_d, ik_decoded & out) { ik_decode_iq3_kt(b, row_d * kIq3KtGemmFactor, out); }

namespace {

template <ik_decode_t Decode, size_t Bytes>
void kt_to_float(const void * vx, float * y, int64_t n) {
    float row_d;
    std::memcpy(&row_d, vx, 4);
    const auto * blocks = (const uint8_t *) vx + 4;
    ik_decoded db;
    for (int64_t ib = 0; ib < n / QK_K; ++ib, y += QK_K) {
        Decode(blocks + ib * Bytes, row_d, db);
        for (int g = 0; g < QK_K / 16; ++g) {
            const float dl = db.d * (float) db.sc[g];
            for (int i = 16 * g; i < 16 * g + 16; ++i) y[i] = dl * (float) db.q[i];
        }
    }
}

template <ik_decode_t Decode, size_t Bytes>
void kt_gemm_scalar(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                    size_t dst_stride, int nr, int nc) {
    const int64_t nb = n / QK_K;
    ik_decoded db;
    for (int r = 0; r < nr; ++r) {
        const uint8_t * row = (const uint8_t *) w + r * w_stride;
        float row_d;
        std::memcpy(&row_d, row, 4);
        for (int c = 0; c < nc; ++c) dst[c * dst_stride + r] = 0.0f;
        for (int64_t i = 0; i < nb; ++i) {
            Decode(row + 4 + i * Bytes, row_d, db);
            for (int c = 0; c < nc; ++c) {
                const auto & a = ((const block_q8_K *) ((const char *) x + c * x_stride))[i];
                dst[c * dst_stride + r] += (db.d * a.d) * (float) ik_block_dot_scalar(db, a.qs);
            }
        }
    }
}

template <ggml_type T, ik_decode_t Decode, ik_decode_t GemmDecode, size_t Bytes>
void register_kt(ggml_quantize_rows_t quantize) {
    ggml_type_traits * tt = ggml_type_traits_mut(T);
    tt->to_float = kt_to_float<Decode, Bytes>;
    tt->quantize = quantize;   // quants-kt-quantize.cpp
    ggml_cpu_register_gemm(T, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K, kt_gemm_scalar<GemmDecode, Bytes>);
}

void register_kt_types() {
    register_kt<GGML_TYPE_IQ1_KT, ik_decode_iq1_kt, ik_decode_iq1_kt, sizeof(block_iq1_kt)>(ik_quantize_iq1_kt);
    register_kt<GGML_TYPE_IQ2_KT, ik_decode_iq2_kt, ik_decode_iq2_kt_gemm, sizeof(block_iq2_kt)>(ik_quantize_iq2_kt);
    register_kt<GGML_TYPE_IQ3_KT, ik_decode_iq3_kt, ik_decode_iq3_kt_gemm, sizeof(block_iq3_kt)>(ik_quantize_iq3_kt);
    register_kt<GGML_TYPE_IQ4_KT, ik_decode_iq4_kt, ik_decode_iq4_kt, sizeof(block_iq4_kt)>(ik_quantize_iq4_kt);
}
GGML_REGISTER(register_kt_types);

} // namespace
