// NEON gemm kernels of the ik_llama.cpp non-linear types (iq2_k .. iq6_k, iq2_ks, iq3_ks, iq4_ks,
// iq5_ks; iq4_kss and iq2_kl through the scalar decoder) against q8_K activations, at the
// plain, SDOT and SMMLA levels of the shared block loop (gemm-q8k.h).
//
// The decoders here produce the common form of quants-ik.h (signed levels, a scale per 16 values)
// with table lookups: the level grid sits in one to eight registers and TBL maps each 16 indices
// at once (vqtbl1q for the 8- and 16-entry grids, vqtbl2q/vqtbl4q for the 32- and 64-entry ones).
// A 16-value group's "shifted grid" bit selects the upper half of the table, i.e. one more index
// bit, so no separate shifted table is needed. Integer sums equal the scalar kernel's exactly.
#include "neon/register.h"
#include "neon/gemm-q8k.h"
#include "quants/quants-ik.h"

namespace {

// The decoders run in the batch-1 loop and in the i8mm tile: keep them inlined into both (a
// decoded block that goes through a call is stored and reloaded where it is the whole cost).
#define KILN_DECODE_INLINE inline __attribute__((always_inline))

// A byte vector of 16 copies of (bit ? v : 0).
inline uint8x16_t bit_value(uint32_t bits, int bit, uint8_t v) { return vdupq_n_u8((uint8_t) (((bits >> bit) & 1) * v)); }

// Bits [shift, shift + width) of each byte, moved to bit 0 (shift may be a run-time value).
inline uint8x16_t field(uint8x16_t v, int shift, uint8_t mask) {
    return vandq_u8(vshlq_u8(v, vdupq_n_s8((int8_t) -shift)), vdupq_n_u8(mask));
}

inline void store_scales(int16_t * sc, int8x16_t s) {
    vst1q_s16(sc, vmovl_s8(vget_low_s8(s)));
    vst1q_s16(sc + 8, vmovl_high_s8(s));
}

// The sixteen 6-bit scales (minus 32) of iq4_k / iq5_k: group g's low nibble is nibble g % 2 of
// scales_l[g / 2], its two high bits are bits 2 (g % 4), +1 of scales_h[g / 4].
inline void scales_6bit(const uint8_t * scales_l, const uint8_t * scales_h, int16_t * sc) {
    const uint8x8_t l = vld1_u8(scales_l);
    const uint8x8_t lo = vand_u8(l, vdup_n_u8(0xF)), hi = vshr_n_u8(l, 4);
    const uint8x16_t low = vcombine_u8(vzip1_u8(lo, hi), vzip2_u8(lo, hi));
    uint32_t h32;
    std::memcpy(&h32, scales_h, 4);
    const uint8x16_t spread = { 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3 };
    const int8x16_t shifts = { 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6 };
    const uint8x16_t hb = vqtbl1q_u8(vreinterpretq_u8_u32(vdupq_n_u32(h32)), spread);
    const uint8x16_t high = vshlq_n_u8(vandq_u8(vshlq_u8(hb, shifts), vdupq_n_u8(3)), 4);
    store_scales(sc, vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, high)), vdupq_n_s8(32)));
}

// iq2_k: group g = 2 ib32 + h takes 2-bit indices at bits 2 (ib32 % 4) of qs[32 (ib32 / 4) + 16 h ..].
KILN_DECODE_INLINE void decode_iq2_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq2_k *) vb;
    const int8x16_t table = vcombine_s8(vld1_s8(ik_iq2nl_values), vdup_n_s8(0));
    for (int g = 0; g < 16; ++g) {
        const int ib32 = g / 2, h = g % 2;
        const uint8x16_t qs = vld1q_u8(b.qs + 32 * (ib32 / 4) + 16 * h);
        const uint8x16_t idx = vorrq_u8(field(qs, 2 * (ib32 % 4), 3), bit_value(b.extra, g, 4));
        vst1q_s8(out.q + 16 * g, vqtbl1q_s8(table, idx));
        out.sc[g] = (int16_t) (((b.scales[ib32] >> (4 * h)) & 0xF) - 8);
    }
    out.d = GGML_FP16_TO_FP32(b.d);
}

// iq3_k: iq2_k's indices plus a third bit, bit ib32 of qh[16 h ..]; scales 2m + 1 with a sign bit.
KILN_DECODE_INLINE void decode_iq3_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq3_k *) vb;
    const int8x16_t table = vld1q_s8(ik_iq3nl_values);
    for (int g = 0; g < 16; ++g) {
        const int ib32 = g / 2, h = g % 2;
        const uint8x16_t qs = vld1q_u8(b.qs + 32 * (ib32 / 4) + 16 * h);
        const uint8x16_t qh = vld1q_u8(b.qh + 16 * h);
        uint8x16_t idx = vorrq_u8(field(qs, 2 * (ib32 % 4), 3), vshlq_n_u8(field(qh, ib32, 1), 2));
        idx = vorrq_u8(idx, bit_value(b.extra, g, 8));
        vst1q_s8(out.q + 16 * g, vqtbl1q_s8(table, idx));
        const int m = 2 * ((b.scales_l[ib32] >> (4 * h)) & 0xF) + 1;
        out.sc[g] = (int16_t) ((b.scales_h >> g) & 1 ? -m : m);
    }
    out.d = GGML_FP16_TO_FP32(b.d);
}

// iq2_ks: per 64 values ib64, two 32-value halves h with their own scale (4 bits + a fifth in
// extra's high byte, minus 16) and grid bit; group g = 4 ib64 + k reads the crumbs at bits
// 4 (ib64 % 2) + 2 h of qs[32 (ib64 / 2) + 16 (k % 2) ..], h = k / 2.
KILN_DECODE_INLINE void decode_iq2_ks(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq2_ks *) vb;
    const int8x16_t table = vcombine_s8(vld1_s8(ik_iq2nl_values), vdup_n_s8(0));
    for (int g = 0; g < 16; ++g) {
        const int ib64 = g / 4, k = g % 4, h = k / 2;
        const uint8x16_t qs = vld1q_u8(b.qs + 32 * (ib64 / 2) + 16 * (k % 2));
        const uint8x16_t idx = vorrq_u8(field(qs, 4 * (ib64 % 2) + 2 * h, 3), bit_value(b.extra, 2 * ib64 + h, 4));
        vst1q_s8(out.q + 16 * g, vqtbl1q_s8(table, idx));
        out.sc[g] = (int16_t) ((((b.scales[ib64] >> (4 * h)) & 0xF) | (((b.extra >> (8 + 2 * ib64 + h)) & 1) << 4)) - 16);
    }
    out.d = row_d;
}

// iq3_ks: 32-block blk takes 2-bit indices at bits 2 (blk % 4) of qs[32 (blk / 4) ..], the third
// bit blk of qh, the grid bit 8 + blk of extra; its scale is nibble blk / 4 of scales[blk % 4]
// with bit blk of extra as the fifth bit, minus 16.
KILN_DECODE_INLINE void decode_iq3_ks(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq3_ks *) vb;
    const int8x16_t table = vld1q_s8(ik_iq3nl_values);
    for (int g = 0; g < 16; ++g) {
        const int blk = g / 2, h = g % 2;
        const uint8x16_t qs = vld1q_u8(b.qs + 32 * (blk / 4) + 16 * h);
        const uint8x16_t qh = vld1q_u8(b.qh + 16 * h);
        uint8x16_t idx = vorrq_u8(field(qs, 2 * (blk % 4), 3), vshlq_n_u8(field(qh, blk, 1), 2));
        idx = vorrq_u8(idx, bit_value(b.extra, 8 + blk, 8));
        vst1q_s8(out.q + 16 * g, vqtbl1q_s8(table, idx));
        out.sc[g] = (int16_t) ((((b.scales[blk % 4] >> (4 * (blk / 4))) & 0xF) | (((b.extra >> blk) & 1) << 4)) - 16);
    }
    out.d = row_d;
}

// iq4_k: 32-block ib's 16 bytes hold values 0-15 in the low nibbles, 16-31 in the high ones.
KILN_DECODE_INLINE void decode_iq4_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq4_k *) vb;
    const int8x16x2_t table = vld1q_s8_x2(ik_iq4k_values);
    for (int ib = 0; ib < 8; ++ib) {
        const uint8x16_t qs = vld1q_u8(b.qs + 16 * ib);
        const uint8x16_t lo = vorrq_u8(vandq_u8(qs, vdupq_n_u8(0xF)), bit_value(b.extra, 2 * ib, 16));
        const uint8x16_t hi = vorrq_u8(vshrq_n_u8(qs, 4), bit_value(b.extra, 2 * ib + 1, 16));
        vst1q_s8(out.q + 32 * ib, vqtbl2q_s8(table, lo));
        vst1q_s8(out.q + 32 * ib + 16, vqtbl2q_s8(table, hi));
    }
    scales_6bit(b.scales_l, b.scales_h, out.sc);
    out.d = GGML_FP16_TO_FP32(b.d);
}

// iq4_ks: as iq4_k with one scale byte per 32 values (bit 0: shifted grid) and the row's scale.
KILN_DECODE_INLINE void decode_iq4_ks(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq4_ks *) vb;
    const int8x16x2_t table = vld1q_s8_x2(ik_iq4k_values);
    for (int ib = 0; ib < 8; ++ib) {
        const uint8x16_t qs = vld1q_u8(b.qs + 16 * ib);
        const uint8x16_t grid = bit_value(b.scales[ib], 0, 16);
        vst1q_s8(out.q + 32 * ib, vqtbl2q_s8(table, vorrq_u8(vandq_u8(qs, vdupq_n_u8(0xF)), grid)));
        vst1q_s8(out.q + 32 * ib + 16, vqtbl2q_s8(table, vorrq_u8(vshrq_n_u8(qs, 4), grid)));
        out.sc[2 * ib] = out.sc[2 * ib + 1] = (int16_t) ((b.scales[ib] & 254) - 127);
    }
    out.d = row_d;
}

// The 5-bit grids (iq5_k, iq5_ks) per 64 values ib64: group k of the four takes the low (k < 2)
// or high nibbles of qs[32 ib64 + 16 (k % 2) ..] and the fifth bit 2 ib64 + k / 2 of qh[16 (k % 2) ..];
// the shifted-grid bit is the sixth index bit into the 64-entry table.
KILN_DECODE_INLINE int8x16_t iq5_group(const int8x16x4_t & table, const uint8_t * qs, const uint8_t * qh, int ib64, int k,
                                       uint8x16_t grid) {
    const uint8x16_t q = vld1q_u8(qs + 32 * ib64 + 16 * (k % 2));
    const uint8x16_t nib = k < 2 ? vandq_u8(q, vdupq_n_u8(0xF)) : vshrq_n_u8(q, 4);
    const uint8x16_t fifth = vshlq_n_u8(field(vld1q_u8(qh + 16 * (k % 2)), 2 * ib64 + k / 2, 1), 4);
    return vqtbl4q_s8(table, vorrq_u8(vorrq_u8(nib, fifth), grid));
}

KILN_DECODE_INLINE void decode_iq5_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq5_k *) vb;
    const int8x16x4_t table = vld1q_s8_x4(ik_iq5nl_values);
    for (int g = 0; g < 16; ++g) vst1q_s8(out.q + 16 * g, iq5_group(table, b.qs, b.qh, g / 4, g % 4, bit_value(b.extra, g, 32)));
    scales_6bit(b.scales_l, b.scales_h, out.sc);
    out.d = GGML_FP16_TO_FP32(b.d);
}

// iq5_ks: iq5_k's levels with one scale byte per 32 values (bit 0: shifted grid): scales[g / 2]
// covers groups 0-1 (low nibbles) and 2-3 (high nibbles) of each 64-block, and the row's scale.
KILN_DECODE_INLINE void decode_iq5_ks(const void * vb, float row_d, ik_decoded & out) {
    const auto & b = *(const block_iq5_ks *) vb;
    const int8x16x4_t table = vld1q_s8_x4(ik_iq5nl_values);
    for (int g = 0; g < 16; ++g) {
        const uint8_t s = b.scales[g / 2];
        vst1q_s8(out.q + 16 * g, iq5_group(table, b.qs, b.qh, g / 4, g % 4, bit_value(s, 0, 32)));
        out.sc[g] = (int16_t) ((s & 254) - 127);
    }
    out.d = row_d;
}

// iq6_k: 6-bit indices (nibble + two bits of qh) into a 64-entry grid; the shifted grid is the
// other 64 entries, so the group's bit picks one of two four-register tables.
KILN_DECODE_INLINE void decode_iq6_k(const void * vb, float, ik_decoded & out) {
    const auto & b = *(const block_iq6_k *) vb;
    const int8x16x4_t t0 = vld1q_s8_x4(ik_iq6nl_values), t1 = vld1q_s8_x4(ik_iq6nl_values + 64);
    for (int g = 0; g < 16; ++g) {
        const int ib64 = g / 4, k = g % 4;
        const uint8x16_t q = vld1q_u8(b.qs + 32 * ib64 + 16 * (k % 2));
        const uint8x16_t nib = k < 2 ? vandq_u8(q, vdupq_n_u8(0xF)) : vshrq_n_u8(q, 4);
        const uint8x16_t qh = vld1q_u8(b.qh + 32 * (ib64 / 2) + 16 * (k % 2));
        const uint8x16_t idx = vorrq_u8(nib, vshlq_n_u8(field(qh, 4 * (ib64 % 2) + 2 * (k / 2), 3), 4));
        vst1q_s8(out.q + 16 * g, (b.extra >> g) & 1 ? vqtbl4q_s8(t1, idx) : vqtbl4q_s8(t0, idx));
        out.sc[g] = b.scales[g];
    }
    out.d = GGML_FP16_TO_FP32(b.d);
}

template <ggml_type T, ik_decode_t Decode>
struct dec_ik {
    using block = ik_decoded;
    static constexpr bool kMins = false;
    static q8k_row row(const char * r) {
        const ik_row_format & f = *ik_get_row_format(T);
        return { r + f.row_scale, f.block_bytes, ik_row_scale_value(f, r) };
    }
    static void decode(const q8k_row & r, int64_t i, block & out) { Decode(r.blocks + i * r.block_bytes, r.d, out); }
    static q8k_view view(const block & b) { return { b.q, b.sc, nullptr, b.d, 0.0f }; }
};

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_ik_neon() {
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ2_K, decode_iq2_k>>(GGML_TYPE_IQ2_K);
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ3_K, decode_iq3_k>>(GGML_TYPE_IQ3_K);
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ4_K, decode_iq4_k>>(GGML_TYPE_IQ4_K);
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ5_K, decode_iq5_k>>(GGML_TYPE_IQ5_K);
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ6_K, decode_iq6_k>>(GGML_TYPE_IQ6_K);
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ4_KS, decode_iq4_ks>>(GGML_TYPE_IQ4_KS);
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ5_KS, decode_iq5_ks>>(GGML_TYPE_IQ5_KS);
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ2_KS, decode_iq2_ks>>(GGML_TYPE_IQ2_KS);
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ3_KS, decode_iq3_ks>>(GGML_TYPE_IQ3_KS);
    // the scalar decoders: the rarer row-scaled types still get the vector dot products
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ4_KSS, ik_decode_iq4_kss>>(GGML_TYPE_IQ4_KSS);
    add_q8k_kernels<dec_ik<GGML_TYPE_IQ2_KL, ik_decode_iq2_kl>>(GGML_TYPE_IQ2_KL);
}
