// NEON gemm kernels of the trellis types iq1_kt .. iq4_kt against q8_K (the shared block loop of
// gemm-q8k.h at the neon, dotprod and i8mm levels), with the trellis decoded in vectors. (The
// quantizers' seed search, ggml_kt_errors_t, has no NEON kernel: Arm runs the plain search.)
//
// A value of a run is the byte sum of (seed * K^(m+1)) & 0x3f3f3f3f, minus 126 (quants-ik.h).
// Four lanes of 32-bit multiplies give four run positions at once (K^1..K^4, K^5..K^8 in two
// registers); a second multiply by 0x01010101 adds the four bytes into the top byte (each is at
// most 63, so no carries reach it), and two unzips of the odd bytes gather sixteen of those top
// bytes in run order. The levels equal the scalar decoder's, so the dot products are exact.
#include "neon/register.h"
#include "neon/gemm-q8k.h"
#include "quants/quants-ik.h"

namespace {

#define KILN_DECODE_INLINE inline __attribute__((always_inline))

// The generator and seed offsets of the format (quants/quants-kt.cpp)
constexpr uint32_t kTrellisMul = 0xCBAC1FEDu;
constexpr uint32_t kSeedOffset = 4096;
constexpr uint32_t kSeedOffsetIq4B = 4096 + 32768;

struct kt_powers {
    uint32_t p[8];   // K^1 .. K^8 mod 2^32
};
constexpr kt_powers make_powers() {
    kt_powers r{};
    uint32_t v = kTrellisMul;
    for (int m = 0; m < 8; ++m, v *= kTrellisMul) r.p[m] = v;
    return r;
}
constexpr kt_powers k_powers = make_powers();

// seed * K^(m+1) for m = 0..3 (hi: 4..7), byte sum in the top byte
KILN_DECODE_INLINE uint32x4_t kt_sums(uint32x4_t products) {
    return vmulq_u32(vandq_u32(products, vdupq_n_u32(0x3f3f3f3fu)), vdupq_n_u32(0x01010101u));
}

// The top bytes of a, b, c, d (4 lanes each, in that order) as 16 levels (sum - 126).
KILN_DECODE_INLINE int8x16_t kt_levels(uint32x4_t a, uint32x4_t b, uint32x4_t c, uint32x4_t d) {
    const uint8x16_t ab = vuzp2q_u8(vreinterpretq_u8_u32(a), vreinterpretq_u8_u32(b));
    const uint8x16_t cd = vuzp2q_u8(vreinterpretq_u8_u32(c), vreinterpretq_u8_u32(d));
    return vsubq_s8(vreinterpretq_s8_u8(vuzp2q_u8(ab, cd)), vdupq_n_s8(126));
}

// Four runs of 8 values (seeds in the lanes of s, offset included) -> 32 levels.
KILN_DECODE_INLINE void kt_runs8(uint32x4_t s, int8_t * out) {
    const uint32x4_t lo = vld1q_u32(k_powers.p), hi = vld1q_u32(k_powers.p + 4);
    vst1q_s8(out, kt_levels(kt_sums(vmulq_laneq_u32(lo, s, 0)), kt_sums(vmulq_laneq_u32(hi, s, 0)),
                            kt_sums(vmulq_laneq_u32(lo, s, 1)), kt_sums(vmulq_laneq_u32(hi, s, 1))));
    vst1q_s8(out + 16, kt_levels(kt_sums(vmulq_laneq_u32(lo, s, 2)), kt_sums(vmulq_laneq_u32(hi, s, 2)),
                                 kt_sums(vmulq_laneq_u32(lo, s, 3)), kt_sums(vmulq_laneq_u32(hi, s, 3))));
}

// Four runs of 4 values -> 16 levels.
KILN_DECODE_INLINE void kt_runs4(uint32x4_t s, int8_t * out) {
    const uint32x4_t lo = vld1q_u32(k_powers.p);
    vst1q_s8(out, kt_levels(kt_sums(vmulq_laneq_u32(lo, s, 0)), kt_sums(vmulq_laneq_u32(lo, s, 1)),
                            kt_sums(vmulq_laneq_u32(lo, s, 2)), kt_sums(vmulq_laneq_u32(lo, s, 3))));
}

// Four little-endian 16-bit seeds plus the offset.
KILN_DECODE_INLINE uint32x4_t seeds16(const uint8_t * p) {
    return vaddq_u32(vmovl_u16(vreinterpret_u16_u8(vld1_u8(p))), vdupq_n_u32(kSeedOffset));
}

inline void set_scale32(ik_decoded & out, int ib, int s) { out.sc[2 * ib] = out.sc[2 * ib + 1] = (int16_t) s; }

KILN_DECODE_INLINE void decode_iq1_kt(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq1_kt *) vb;
    for (int ib = 0; ib < 8; ++ib) {
        uint32_t s[4];
        for (int g = 0; g < 4; ++g) {
            const int run = 4 * ib + g;
            s[g] = b.ql[run] | (((uint32_t) (b.qh[run % 16] >> 4 * (run / 16)) & 0xF) << 8) | (((uint32_t) (b.sh[ib] >> (4 + g)) & 1) << 12);
        }
        kt_runs8(vaddq_u32(vld1q_u32(s), vdupq_n_u32(kSeedOffset)), out.q + 32 * ib);
        set_scale32(out, ib, ik_iq4k_values[b.sh[ib] & 0xF]);
    }
    out.d = row_d;
}

KILN_DECODE_INLINE void decode_iq2_kt(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq2_kt *) vb;
    for (int ib = 0; ib < 8; ++ib) {
        kt_runs8(seeds16(b.ql + 8 * ib), out.q + 32 * ib);
        set_scale32(out, ib, ik_iq4k_values[(b.scales[ib % 4] >> 4 * (ib / 4)) & 0xF]);
    }
    out.d = row_d;
}

// iq3_kt: the runs give magnitudes; bit ib of qh[p] makes value p of 32-block ib negative.
KILN_DECODE_INLINE void decode_iq3_kt(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq3_kt *) vb;
    for (int ib = 0; ib < 8; ++ib) {
        int8_t * q = out.q + 32 * ib;
        kt_runs8(seeds16(b.ql + 8 * ib), q);
        for (int h = 0; h < 2; ++h) {
            const int8x16_t a = vabsq_s8(vld1q_s8(q + 16 * h));
            const uint8x16_t neg = vtstq_u8(vld1q_u8(b.qh + 16 * h), vdupq_n_u8((uint8_t) (1u << ib)));
            vst1q_s8(q + 16 * h, vbslq_s8(neg, vnegq_s8(a), a));
        }
        set_scale32(out, ib, (b.scales[ib % 4] >> 4 * (ib / 4)) & 0xF);
    }
    out.d = row_d;
}

// iq4_kt: 8 runs of 4 per 32-block; seed bits 0-7 from ql, 8-11 from a nibble of qh, 12-14 from
// the block's 32-bit word (bits 8 + 3g), whose bit 0 picks the seed offset.
KILN_DECODE_INLINE void decode_iq4_kt(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq4_kt *) vb;
    const int32x4_t shifts_lo = { -8, -11, -14, -17 }, shifts_hi = { -20, -23, -26, -29 };
    for (int ib = 0; ib < 8; ++ib) {
        uint32_t shb;
        std::memcpy(&shb, b.shb + 4 * ib, 4);
        const uint8x8_t qh = vand_u8(vshl_u8(vld1_u8(b.qh + 8 * (ib % 4)), vdup_n_s8((int8_t) (-4 * (ib / 4)))), vdup_n_u8(0xF));
        const uint16x8_t low = vorrq_u16(vmovl_u8(vld1_u8(b.ql + 8 * ib)), vshll_n_u8(qh, 8));
        const uint32x4_t w = vdupq_n_u32(shb), seven = vdupq_n_u32(7);
        const uint32x4_t off = vdupq_n_u32(shb & 1 ? kSeedOffsetIq4B : kSeedOffset);
        const uint32x4_t s0 = vmovl_u16(vget_low_u16(low)) | vshlq_n_u32(vandq_u32(vshlq_u32(w, shifts_lo), seven), 12);
        const uint32x4_t s1 = vmovl_high_u16(low) | vshlq_n_u32(vandq_u32(vshlq_u32(w, shifts_hi), seven), 12);
        kt_runs4(vaddq_u32(s0, off), out.q + 32 * ib);
        kt_runs4(vaddq_u32(s1, off), out.q + 32 * ib + 16);
        set_scale32(out, ib, (int) ((shb & 0xFF) >> 1) - 64);
    }
    out.d = row_d;
}

// Row: f32 scale, then the blocks. iq2_kt / iq3_kt products carry the reference's inference-time
// factor on the row scale, as the scalar gemm's decoders do (quants-ik.h).
template <void (*Decode)(const void *, float, ik_decoded &), size_t Bytes, float Factor>
struct dec_kt {
    using block = ik_decoded;
    static constexpr bool kMins = false;
    static q8k_row row(const char * r) {
        float d;
        std::memcpy(&d, r, 4);
        return { r + 4, Bytes, d * Factor };
    }
    static void decode(const q8k_row & r, int64_t i, block & out) { Decode(r.blocks + i * Bytes, r.d, out); }
    static q8k_view view(const block & b) { return { b.q, b.sc, nullptr, b.d, 0.0f }; }
};

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_kt_neon() {
    add_q8k_kernels<dec_kt<decode_iq1_kt, sizeof(block_iq1_kt), 1.0f>>(GGML_TYPE_IQ1_KT);
    add_q8k_kernels<dec_kt<decode_iq2_kt, sizeof(block_iq2_kt), kIq2KtGemmFactor>>(GGML_TYPE_IQ2_KT);
    add_q8k_kernels<dec_kt<decode_iq3_kt, sizeof(block_iq3_kt), kIq3KtGemmFactor>>(GGML_TYPE_IQ3_KT);
    add_q8k_kernels<dec_kt<decode_iq4_kt, sizeof(block_iq4_kt), 1.0f>>(GGML_TYPE_IQ4_KT);
}
