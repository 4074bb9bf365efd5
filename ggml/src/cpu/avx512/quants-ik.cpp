// AVX512 (BW + VNNI) gemm kernels of the ik_llama.cpp non-linear types against q8_K.
//
// Decoding: every level table of these types is small (4 .. 64 entries) and its "shifted" half
// is the base half plus a constant (iq2: +5, iq3/iq4: +4, iq5: +2, iq6: +1; checked at start-up),
// so a weight's level is one vpshufb of a 16-entry register table (two or four blended lookups
// for the 32/64-entry tables) and a masked byte add for the shifted sub-blocks. Tables hold
// level + 128, so decoding yields unsigned bytes u = q + 128 in natural order, four 64-byte
// vectors per 256-value block, plus 16 int32 scales (one per 16 values).
//
// Products: vpdpbusd (u8 x s8, 4 products per int32 lane) against the q8_K activations; lane j
// of vector k covers group 4k + j/4, so one vpmulld by a permuted scale vector applies the
// sub-block scales. The +128 offset is removed with the activation's 16-value sums (bsums):
//     sum_g sc_g sum_{i in g} q_i a_i = sum_g sc_g (sum u_i a_i - 128 bsum_g),
// all in exact int32 per block, then one float fma per block and column.
//
// Few columns (token generation, small MoE batches): each weight block is decoded once per row
// and reused for up to 8 columns held in registers. Many columns: the shared "panel" kernel
// (panel.h) repacks 16 rows at a time to a row-per-lane layout and runs 16 rows x 8 columns
// per inner loop; it takes the same decoders (value = d*sc * u - 128 d*sc).
#include "avx512/register.h"
#include "avx512/gemv-kt.h"
#include "cpu-traits.h"
#include "panel.h"
#include "quants/quants-ik.h"
#include "trellis-seeds-x86.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

namespace {

inline float f16c_to_f32(uint16_t h) { return _cvtsh_ss(h); }

struct ublock {
    __m512i u[4];   // level + 128 of values 64k .. 64k+63
    __m512i sc;     // int32 lane g: scale of values 16g .. 16g+15
    float   d;
};

// __mmask64 with bytes 16g .. 16g+15 set for each set bit g of a 4-bit group pattern.
constexpr uint64_t group_mask_of(int bits) {
    uint64_t m = 0;
    for (int g = 0; g < 4; ++g) {
        if ((bits >> g) & 1) m |= 0xFFFFull << (16 * g);
    }
    return m;
}
constexpr uint64_t k_group_mask[16] = {
    group_mask_of(0),  group_mask_of(1),  group_mask_of(2),  group_mask_of(3),  group_mask_of(4),  group_mask_of(5),
    group_mask_of(6),  group_mask_of(7),  group_mask_of(8),  group_mask_of(9),  group_mask_of(10), group_mask_of(11),
    group_mask_of(12), group_mask_of(13), group_mask_of(14), group_mask_of(15),
};

// Add the grid shift to the groups of vector k whose bit is set in the 16-bit pattern.
inline void apply_shift(ublock & ub, uint32_t shifted16, int delta) {
    if (!shifted16) return;
    const __m512i dv = _mm512_set1_epi8((char) delta);
    for (int k = 0; k < 4; ++k) {
        const __mmask64 m = k_group_mask[(shifted16 >> (4 * k)) & 0xF];
        ub.u[k] = _mm512_mask_add_epi8(ub.u[k], m, ub.u[k], dv);
    }
}

// Entries first .. first+15 of a level table as level + 128, in all four 128-bit lanes.
inline __m512i table_u(const int8_t * values, int first, int count) {
    alignas(16) uint8_t t[16] = {};
    for (int i = 0; i < 16 && first + i < count; ++i) t[i] = (uint8_t) (values[first + i] + 128);
    return _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *) t));
}

inline __m512i load_lanes_0101(const uint8_t * p) {
    const __m512i z = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) p));
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 0, 1, 0));
}

// Per-lane shift counts 0..15 times `step` (srlv of 16 copies of one 32-bit word).
inline __m512i lane_shifts(int step) {
    return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(step));
}

// Lane g: byte g/2 of 8 bytes, zero-extended.
inline __m512i bytes_per_pair(const uint8_t * p) {
    const __m128i x = _mm_loadl_epi64((const __m128i *) p);
    return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(x, x));
}

// Lane g: nibble g of 8 bytes (low nibble first).
inline __m512i nibbles16(const uint8_t * p) {
    const __m512i odd_shift = _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0);
    return _mm512_and_si512(_mm512_srlv_epi32(bytes_per_pair(p), odd_shift), _mm512_set1_epi32(0xF));
}

inline uint32_t load_u32(const void * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// iq4_k / iq5_k 6-bit scales: low nibbles in 8 bytes, 2 high bits per group in 4 bytes.
inline __m512i scales_6bit(const uint8_t * sl, const uint8_t * sh) {
    const __m512i hi = _mm512_srlv_epi32(_mm512_set1_epi32((int) load_u32(sh)), lane_shifts(2));
    const __m512i h = _mm512_slli_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(3)), 4);
    return _mm512_sub_epi32(_mm512_or_si512(nibbles16(sl), h), _mm512_set1_epi32(32));
}

// iq4_ks / iq5_ks scale bytes, one per 32 values: bit 0 the shifted grid, (s & 254) - 127 the scale.
inline __m512i scales_ks(const uint8_t * s, uint32_t & shifted16) {
    const __m512i v = bytes_per_pair(s);
    shifted16 = _mm512_test_epi32_mask(v, _mm512_set1_epi32(1));
    return _mm512_sub_epi32(_mm512_and_si512(v, _mm512_set1_epi32(254)), _mm512_set1_epi32(127));
}

// 4-bit indices of 32 nibble bytes per 64 values: low nibbles of qs[0..15] are values 0..15 of a
// 32-block, high nibbles 16..31 (iq4_k, iq4_ks): lanes [lo 0-15, hi 0-15, lo 16-31, hi 16-31].
inline __m512i nibble_index_iq4(__m256i qs32) {
    __m512i z = _mm512_castsi256_si512(qs32);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 1, 0, 0));
    return _mm512_and_si512(_mm512_mask_blend_epi64(0xCC, z, _mm512_srli_epi16(z, 4)), _mm512_set1_epi8(0xF));
}

// The 256 levels (+ 128, plain grid) of the iq4 nibble layout.
inline void iq4_levels(const __m512i & t, const uint8_t * qs128, ublock & ub) {
    for (int k = 0; k < 4; ++k) ub.u[k] = _mm512_shuffle_epi8(t, nibble_index_iq4(_mm256_loadu_si256((const __m256i *) (qs128 + 32 * k))));
}

// iq5/iq6 order: low nibbles of 32 bytes are values 0..31 of a 64-block, high nibbles 32..63.
inline __m512i nibble_index_lohi(const uint8_t * qs32) {
    const __m512i z = load_lanes_0101(qs32);
    return _mm512_and_si512(_mm512_mask_blend_epi64(0xF0, z, _mm512_srli_epi16(z, 4)), _mm512_set1_epi8(0xF));
}

// 2-bit fields of the iq2/iq3 types: 32 bytes, values 0..31 at bit `shift`, 32..63 at shift + 2.
inline __m512i crumb_index(const uint8_t * qs32, int shift) {
    const __m512i z = load_lanes_0101(qs32);
    return _mm512_and_si512(_mm512_mask_blend_epi64(0xF0, _mm512_srli_epi16(z, shift), _mm512_srli_epi16(z, shift + 2)),
                            _mm512_set1_epi8(3));
}

// ---------------------------------------------------------------------------------------------
// Decoders (kRow: bytes of per-row scale before the blocks; kBytes: block size)

struct dec_iq4_ks {
    static constexpr int kRow = IK_ROW_F32;
    static constexpr size_t kBytes = sizeof(block_iq4_ks);
    __m512i t = table_u(ik_iq4k_values, 0, 16);
    void operator()(const uint8_t * p, float row_d, ublock & ub) const {
        const auto & b = *(const block_iq4_ks *) p;
        iq4_levels(t, b.qs, ub);
        uint32_t shifted;
        ub.sc = scales_ks(b.scales, shifted);
        apply_shift(ub, shifted, 4);
        ub.d = row_d;
    }
};

struct dec_iq4_k {
    static constexpr int kRow = IK_ROW_NONE;
    static constexpr size_t kBytes = sizeof(block_iq4_k);
    __m512i t = table_u(ik_iq4k_values, 0, 16);
    void operator()(const uint8_t * p, float, ublock & ub) const {
        const auto & b = *(const block_iq4_k *) p;
        iq4_levels(t, b.qs, ub);
        ub.sc = scales_6bit(b.scales_l, b.scales_h);
        apply_shift(ub, b.extra, 4);
        ub.d = _cvtsh_ss(b.d);
    }
};

// 32-entry lookup: bit 4 of the index chooses the second table.
struct lookup32 {
    __m512i lo, hi;
    lookup32(const int8_t * v) : lo(table_u(v, 0, 32)), hi(table_u(v, 16, 32)) {}
    __m512i operator()(__m512i idx, __mmask64 bit4) const {
        return _mm512_mask_shuffle_epi8(_mm512_shuffle_epi8(lo, idx), bit4, hi, idx);
    }
};

// iq5_k / iq5_ks values: nibbles (lohi order) and one high bit per value in qh.
inline void iq5_values(const lookup32 & t, const uint8_t * qs, const uint8_t * qh, ublock & ub) {
    const __m512i hz = load_lanes_0101(qh);
    const __m512i hsh = _mm512_mask_blend_epi64(0xF0, hz, _mm512_srli_epi16(hz, 1));
    const __m512i one = _mm512_set1_epi8(1);
    for (int k = 0; k < 4; ++k) {
        const __mmask64 bit4 = _mm512_test_epi8_mask(_mm512_srli_epi16(hsh, 2 * k), one);
        ub.u[k] = t(nibble_index_lohi(qs + 32 * k), bit4);
    }
}

struct dec_iq5_k {
    static constexpr int kRow = IK_ROW_NONE;
    static constexpr size_t kBytes = sizeof(block_iq5_k);
    lookup32 t{ ik_iq5nl_values };
    void operator()(const uint8_t * p, float, ublock & ub) const {
        const auto & b = *(const block_iq5_k *) p;
        iq5_values(t, b.qs, b.qh, ub);
        ub.sc = scales_6bit(b.scales_l, b.scales_h);
        apply_shift(ub, b.extra, 2);
        ub.d = _cvtsh_ss(b.d);
    }
};

struct dec_iq5_ks {
    static constexpr int kRow = IK_ROW_F32;
    static constexpr size_t kBytes = sizeof(block_iq5_ks);
    lookup32 t{ ik_iq5nl_values };
    void operator()(const uint8_t * p, float row_d, ublock & ub) const {
        const auto & b = *(const block_iq5_ks *) p;
        iq5_values(t, b.qs, b.qh, ub);
        uint32_t shifted;
        ub.sc = scales_ks(b.scales, shifted);
        apply_shift(ub, shifted, 2);
        ub.d = row_d;
    }
};

struct dec_iq6_k {
    static constexpr int kRow = IK_ROW_NONE;
    static constexpr size_t kBytes = sizeof(block_iq6_k);
    __m512i t[4] = { table_u(ik_iq6nl_values, 0, 64), table_u(ik_iq6nl_values, 16, 64), table_u(ik_iq6nl_values, 32, 64),
                     table_u(ik_iq6nl_values, 48, 64) };
    void operator()(const uint8_t * p, float, ublock & ub) const {
        const auto & b = *(const block_iq6_k *) p;
        // high bits: values 0..31 of a 64-block take bits (shift, shift+1) of qh, 32..63 bits +2, +3
        const __m512i b4 = _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi8(1), _mm512_set1_epi8(4));
        const __m512i b5 = _mm512_add_epi8(b4, b4);
        for (int k = 0; k < 4; ++k) {
            const __m512i h = _mm512_srli_epi16(load_lanes_0101(b.qh + 32 * (k / 2)), 4 * (k % 2));
            const __mmask64 m4 = _mm512_test_epi8_mask(h, b4), m5 = _mm512_test_epi8_mask(h, b5);
            const __m512i idx = nibble_index_lohi(b.qs + 32 * k);
            const __m512i r01 = _mm512_mask_shuffle_epi8(_mm512_shuffle_epi8(t[0], idx), m4, t[1], idx);
            const __m512i r23 = _mm512_mask_shuffle_epi8(_mm512_shuffle_epi8(t[2], idx), m4, t[3], idx);
            ub.u[k] = _mm512_mask_blend_epi8(m5, r01, r23);
        }
        ub.sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) b.scales));
        apply_shift(ub, b.extra, 1);
        ub.d = _cvtsh_ss(b.d);
    }
};

// iq2_k / iq2_ks values: 2-bit indices (crumb_index order) into the plain grid.
inline void iq2_values(const __m512i & t, const uint8_t * qs, ublock & ub) {
    for (int k = 0; k < 4; ++k) ub.u[k] = _mm512_shuffle_epi8(t, crumb_index(qs + 32 * (k / 2), 4 * (k % 2)));
}

struct dec_iq2_k {
    static constexpr int kRow = IK_ROW_NONE;
    static constexpr size_t kBytes = sizeof(block_iq2_k);
    __m512i t = table_u(ik_iq2nl_values, 0, 4);
    void operator()(const uint8_t * p, float, ublock & ub) const {
        const auto & b = *(const block_iq2_k *) p;
        iq2_values(t, b.qs, ub);
        ub.sc = _mm512_sub_epi32(nibbles16(b.scales), _mm512_set1_epi32(8));
        apply_shift(ub, b.extra, 5);
        ub.d = _cvtsh_ss(b.d);
    }
};

struct dec_iq2_ks {
    static constexpr int kRow = IK_ROW_F16;
    static constexpr size_t kBytes = sizeof(block_iq2_ks);
    __m512i t = table_u(ik_iq2nl_values, 0, 4);
    void operator()(const uint8_t * p, float row_d, ublock & ub) const {
        const auto & b = *(const block_iq2_ks *) p;
        iq2_values(t, b.qs, ub);
        // lane g: nibble g/2 of the scales, fifth bit from extra bit 8 + g/2
        const __m512i pair_shift = _mm512_srli_epi32(lane_shifts(1), 1);
        const __m512i lo = _mm512_srlv_epi32(_mm512_set1_epi32((int) load_u32(b.scales)), _mm512_slli_epi32(pair_shift, 2));
        const __m512i hi = _mm512_srlv_epi32(_mm512_set1_epi32(b.extra >> 8), pair_shift);
        ub.sc = _mm512_sub_epi32(_mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xF)),
                                                 _mm512_slli_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), 4)),
                                 _mm512_set1_epi32(16));
        apply_shift(ub, _pdep_u32(b.extra & 0xFF, 0x5555) * 3, 5);
        ub.d = row_d;
    }
};

// iq3_k / iq3_ks values: 2 low bits as in iq2_k, the third from bit b of qh[j] for 32-block b.
inline void iq3_values(const __m512i & t, const uint8_t * qs, const uint8_t * qh, ublock & ub) {
    const __m512i hz = load_lanes_0101(qh);
    const __m512i hsh = _mm512_mask_blend_epi64(0xF0, hz, _mm512_srli_epi16(hz, 1));
    const __m512i one = _mm512_set1_epi8(1), four = _mm512_set1_epi8(4);
    for (int k = 0; k < 4; ++k) {
        const __mmask64 bit2 = _mm512_test_epi8_mask(_mm512_srli_epi16(hsh, 2 * k), one);
        const __m512i idx = crumb_index(qs + 32 * (k / 2), 4 * (k % 2));
        ub.u[k] = _mm512_shuffle_epi8(t, _mm512_mask_add_epi8(idx, bit2, idx, four));
    }
}

struct dec_iq3_k {
    static constexpr int kRow = IK_ROW_NONE;
    static constexpr size_t kBytes = sizeof(block_iq3_k);
    __m512i t = table_u(ik_iq3nl_values, 0, 8);
    void operator()(const uint8_t * p, float, ublock & ub) const {
        const auto & b = *(const block_iq3_k *) p;
        iq3_values(t, b.qs, b.qh, ub);
        const __m512i m = _mm512_add_epi32(_mm512_slli_epi32(nibbles16(b.scales_l), 1), _mm512_set1_epi32(1));
        ub.sc = _mm512_mask_sub_epi32(m, (__mmask16) b.scales_h, _mm512_setzero_si512(), m);
        apply_shift(ub, b.extra, 4);
        ub.d = _cvtsh_ss(b.d);
    }
};

struct dec_iq3_ks {
    static constexpr int kRow = IK_ROW_F16;
    static constexpr size_t kBytes = sizeof(block_iq3_ks);
    __m512i t = table_u(ik_iq3nl_values, 0, 8);
    void operator()(const uint8_t * p, float row_d, ublock & ub) const {
        const auto & b = *(const block_iq3_ks *) p;
        iq3_values(t, b.qs, b.qh, ub);
        // lane g, 32-block blk = g/2: nibble (blk/4) of scales[blk%4] = bits 8 (blk%4) + 4 (blk/4);
        // fifth bit: extra bit blk
        const __m512i blk = _mm512_srli_epi32(lane_shifts(1), 1);
        const __m512i sh = _mm512_add_epi32(_mm512_slli_epi32(_mm512_and_si512(blk, _mm512_set1_epi32(3)), 3),
                                            _mm512_slli_epi32(_mm512_srli_epi32(blk, 2), 2));
        const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int) load_u32(b.scales)), sh), _mm512_set1_epi32(0xF));
        const __m512i hi = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(b.extra), blk), _mm512_set1_epi32(1));
        ub.sc = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(16));
        apply_shift(ub, _pdep_u32(b.extra >> 8, 0x5555) * 3, 4);
        ub.d = row_d;
    }
};

// iq4_kss: iq4_ks folded into 16-bit words. Word k of 32-block ib: bit 0 is bit k of the scale
// byte; the other bits, x ^ (x >> 1) with bit 0 cleared, are bytes 2k, 2k+1 of iq4_ks's nibbles.
struct dec_iq4_kss {
    static constexpr int kRow = IK_ROW_F32;
    static constexpr size_t kBytes = sizeof(block_iq4_kss);
    __m512i t = table_u(ik_iq4k_values, 0, 16);
    void operator()(const uint8_t * p, float row_d, ublock & ub) const {
        const auto & b = *(const block_iq4_kss *) p;
        const __m512i one = _mm512_set1_epi16(1);
        uint8_t scales[8];
        for (int h = 0; h < 2; ++h) {   // 32-blocks 4h .. 4h+3
            const __m512i w = _mm512_loadu_si512((const void *) (b.qs + 16 * h));
            const uint32_t bits = _mm512_test_epi16_mask(w, one);   // bit 8j + k: bit k of scale byte 4h + j
            std::memcpy(scales + 4 * h, &bits, 4);
            const __m512i v = _mm512_andnot_si512(one, w);
            const __m512i nib = _mm512_xor_si512(v, _mm512_srli_epi16(v, 1));
            ub.u[2 * h] = _mm512_shuffle_epi8(t, nibble_index_iq4(_mm512_castsi512_si256(nib)));
            ub.u[2 * h + 1] = _mm512_shuffle_epi8(t, nibble_index_iq4(_mm512_extracti64x4_epi64(nib, 1)));
        }
        uint32_t shifted;
        ub.sc = scales_ks(scales, shifted);
        apply_shift(ub, shifted, 4);
        ub.d = row_d;
    }
};

inline __m512i scales_per32(const int * s8) {
    alignas(64) int32_t sc[16];
    for (int g = 0; g < 16; ++g) sc[g] = s8[g / 2];
    return _mm512_load_si512((const void *) sc);
}

// iq2_kl: per 32 values, 16 pairs of levels from a 32-entry grid of level pairs, so one vpermw
// over the grid (as 16-bit words, each byte + 128) decodes 32 pairs. Vector k is 32-blocks 2k
// (low nibbles of qs[16 k + j], fifth index bit: bit 2k of qh[j]) and 2k + 1 (high nibbles, bit 2k + 1).
struct dec_iq2_kl {
    static constexpr int kRow = IK_ROW_F16;
    static constexpr size_t kBytes = sizeof(block_iq2_kl);
    __m512i t = [] {
        alignas(64) uint16_t v[32];
        for (int i = 0; i < 32; ++i) v[i] = ik_iq2kl_values[i] ^ 0x8080;
        return _mm512_load_si512((const void *) v);
    }();
    void operator()(const uint8_t * p, float row_d, ublock & ub) const {
        const auto & b = *(const block_iq2_kl *) p;
        const __m128i m4 = _mm_set1_epi8(0xF), bit4 = _mm_set1_epi8(0x10);
        const __m128i qh = _mm_loadu_si128((const __m128i *) b.qh);
        for (int k = 0; k < 4; ++k) {
            const __m128i qs = _mm_loadu_si128((const __m128i *) (b.qs + 16 * k));
            const __m128i h = _mm_srli_epi16(qh, 2 * k);   // bits 2k, 2k + 1 of each byte at bits 0, 1
            const __m128i lo = _mm_or_si128(_mm_and_si128(qs, m4), _mm_and_si128(_mm_slli_epi16(h, 4), bit4));
            const __m128i hi = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(qs, 4), m4), _mm_and_si128(_mm_slli_epi16(h, 3), bit4));
            ub.u[k] = _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm256_set_m128i(hi, lo)), t);
        }
        int s8[8];
        for (int ib = 0; ib < 8; ++ib) s8[ib] = (((b.scales_l[ib % 4] >> 4 * (ib / 4)) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4)) - 32;
        ub.sc = scales_per32(s8);
        ub.d = row_d;
    }
};

// Trellis types: 16 values per step. Lane i: seed_i * K^(m_i + 1), masked to four 6-bit bytes,
// whose sum (vpdpbusd with ones) minus 126 is the value; vpmovdb narrows to int8. Seeds are
// assembled in int32 lanes from their bit fields (no scalar loop per run).
struct trellis_simd {
    __m512i pow8, pow4;   // K^1..K^8 twice; K^1..K^4 four times
    trellis_simd() {
        alignas(64) uint32_t p8[16], p4[16];
        uint32_t v = 0xCBAC1FEDu;
        uint32_t pw[8];
        for (int m = 0; m < 8; ++m) {
            pw[m] = v;
            v *= 0xCBAC1FEDu;
        }
        for (int i = 0; i < 16; ++i) {
            p8[i] = pw[i % 8];
            p4[i] = pw[i % 4];
        }
        pow8 = _mm512_load_si512((const void *) p8);
        pow4 = _mm512_load_si512((const void *) p4);
    }
    static __m512i values16(__m512i seeds, __m512i pows) {   // int32 lanes
        const __m512i x = _mm512_and_si512(_mm512_mullo_epi32(seeds, pows), _mm512_set1_epi32(0x3f3f3f3f));
        return _mm512_dpbusd_epi32(_mm512_set1_epi32(-126), x, _mm512_set1_epi32(0x01010101));
    }
    // 64 values + 128: 8 runs of 8 (Run 8: seeds in lanes 0..7) or 16 runs of 4 (Run 4). The four
    // int32 vectors are narrowed by two packs (no saturation: |v| <= 126), which leave 128-bit
    // lane L holding dwords 4L .. 4L+3 of each vector in turn; one dword permute puts them back
    // in order (cheaper than four vpmovdb and the inserts).
    template <int Run>
    __m512i values64_u(__m512i seeds) const {
        __m512i part[4];
        for (int j = 0; j < 4; ++j) {
            const __m512i sel = Run == 8 ? _mm512_set_epi32(2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1,
                                                            2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j)
                                         : _mm512_set_epi32(4 * j + 3, 4 * j + 3, 4 * j + 3, 4 * j + 3, 4 * j + 2, 4 * j + 2, 4 * j + 2, 4 * j + 2,
                                                            4 * j + 1, 4 * j + 1, 4 * j + 1, 4 * j + 1, 4 * j, 4 * j, 4 * j, 4 * j);
            part[j] = values16(_mm512_permutexvar_epi32(sel, seeds), Run == 8 ? pow8 : pow4);
        }
        const __m512i p8 = _mm512_packs_epi16(_mm512_packs_epi32(part[0], part[1]), _mm512_packs_epi32(part[2], part[3]));
        // output dword 4s + L <- packed dword 4L + s
        const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
        return _mm512_xor_si512(_mm512_permutexvar_epi32(order, p8), _mm512_set1_epi8((char) 0x80));
    }
};

struct dec_iq1_kt {
    static constexpr int kRow = IK_ROW_F32;
    static constexpr size_t kBytes = sizeof(block_iq1_kt);
    trellis_simd tr;
    void operator()(const uint8_t * p, float row_d, ublock & ub) const {
        const auto & b = *(const block_iq1_kt *) p;
        for (int k = 0; k < 4; ++k) ub.u[k] = tr.values64_u<8>(_mm512_castsi256_si512(iq1_kt_seeds8(b, k)));
        int s8[8];
        for (int ib = 0; ib < 8; ++ib) s8[ib] = ik_iq4k_values[b.sh[ib] & 0xF];
        ub.sc = scales_per32(s8);
        ub.d = row_d;
    }
};

template <bool Signed>   // false: iq2_kt (iq4_k-grid scales), true: iq3_kt (magnitudes + sign bits)
struct dec_iq23_kt {
    static constexpr int kRow = IK_ROW_F32;
    static constexpr size_t kBytes = Signed ? sizeof(block_iq3_kt) : sizeof(block_iq2_kt);
    trellis_simd tr;
    void operator()(const uint8_t * p, float row_d, ublock & ub) const {
        // iq2_kt and iq3_kt share the scales + seeds prefix: 16-bit seeds, 8 per 64 values
        const uint8_t * scales = p;
        const uint8_t * ql = p + 4;
        for (int k = 0; k < 4; ++k) {
            ub.u[k] = tr.values64_u<8>(_mm512_castsi256_si512(kt_word_seeds(ql, 8 * k, 8)));
        }
        int s8[8];
        for (int ib = 0; ib < 8; ++ib) {
            const int nib = (scales[ib % 4] >> 4 * (ib / 4)) & 0xF;
            s8[ib] = Signed ? nib : ik_iq4k_values[nib];
        }
        if constexpr (Signed) {
            // u = v + 128 -> |v| + 128, negated where the sign bit is set: 128 - |v|
            const auto & b = *(const block_iq3_kt *) p;
            const __m512i hz = load_lanes_0101(b.qh);
            const __m512i hsh = _mm512_mask_blend_epi64(0xF0, hz, _mm512_srli_epi16(hz, 1));
            const __m512i off = _mm512_set1_epi8((char) 0x80);
            for (int k = 0; k < 4; ++k) {
                const __m512i v = _mm512_abs_epi8(_mm512_xor_si512(ub.u[k], off));
                const __mmask64 neg = _mm512_test_epi8_mask(_mm512_srli_epi16(hsh, 2 * k), _mm512_set1_epi8(1));
                ub.u[k] = _mm512_xor_si512(_mm512_mask_sub_epi8(v, neg, _mm512_setzero_si512(), v), off);
            }
            ub.d = row_d * kIq3KtGemmFactor;
        } else {
            ub.d = row_d * kIq2KtGemmFactor;
        }
        ub.sc = scales_per32(s8);
    }
};

struct dec_iq4_kt {
    static constexpr int kRow = IK_ROW_F32;
    static constexpr size_t kBytes = sizeof(block_iq4_kt);
    trellis_simd tr;
    void operator()(const uint8_t * p, float row_d, ublock & ub) const {
        const auto & b = *(const block_iq4_kt *) p;
        // 32-block ib's u32 shb: bit 0 the seed offset, bits 1-7 scale + 64, bits 8 + 3g.. seed bits
        // 12-14 of run g; run r's low seed bits: ql[r], nibble r / 32 of qh[r % 32]
        alignas(16) uint32_t shb[8];
        std::memcpy(shb, b.shb, 32);
        const __m512i g_bits = _mm512_set_epi32(29, 26, 23, 20, 17, 14, 11, 8, 29, 26, 23, 20, 17, 14, 11, 8);
        int s8[8];
        for (int k = 0; k < 4; ++k) {   // runs 16k .. 16k+15: 32-blocks 2k, 2k+1
            const __m512i ql = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) (b.ql + 16 * k)));
            const __m512i qh = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) (b.qh + 16 * (k % 2))));
            const __m512i w = _mm512_inserti64x4(_mm512_set1_epi32((int) shb[2 * k]), _mm256_set1_epi32((int) shb[2 * k + 1]), 1);
            const __m512i top = _mm512_and_si512(_mm512_srlv_epi32(w, g_bits), _mm512_set1_epi32(7));
            const __m512i offset = _mm512_add_epi32(_mm512_set1_epi32(kKtSeedOffset),
                                                    _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(1)), 15));
            __m512i seeds = _mm512_or_si512(ql, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 4 * (k / 2)), _mm512_set1_epi32(0xF)), 8));
            seeds = _mm512_add_epi32(_mm512_or_si512(seeds, _mm512_slli_epi32(top, 12)), offset);
            ub.u[k] = tr.values64_u<4>(seeds);
        }
        for (int ib = 0; ib < 8; ++ib) s8[ib] = (int) ((shb[ib] & 0xFF) >> 1) - 64;
        ub.sc = scales_per32(s8);
        ub.d = row_d;
    }
};

inline float hsum(__m512 v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// ---------------------------------------------------------------------------------------------
// Direct kernel: one row at a time, C columns in registers.

// The scales of a decoded block per int32 lane of the vpdpbusd products: lane j of vector k
// belongs to group 4k + j/4.
struct lane_scales {
    __m512i perm[4];
    lane_scales() {
        for (int k = 0; k < 4; ++k) perm[k] = _mm512_add_epi32(_mm512_srli_epi32(lane_shifts(1), 2), _mm512_set1_epi32(4 * k));
    }
    void spread(const __m512i & sc, __m512i * S) const {
        for (int k = 0; k < 4; ++k) S[k] = _mm512_permutexvar_epi32(perm[k], sc);
    }
};

// acc += d * a.d * (scaled integer dot of a decoded block with q8_K block a), lane-wise.
inline __m512 block_fma(const ublock & ub, const __m512i * S, const block_q8_K & a, __m512 acc) {
    const __m512i z = _mm512_setzero_si512();
    __m512i t = _mm512_mullo_epi32(_mm512_dpbusd_epi32(z, ub.u[0], _mm512_loadu_si512((const void *) a.qs)), S[0]);
    for (int k = 1; k < 4; ++k) {
        const __m512i p = _mm512_dpbusd_epi32(z, ub.u[k], _mm512_loadu_si512((const void *) (a.qs + 64 * k)));
        t = _mm512_add_epi32(t, _mm512_mullo_epi32(p, S[k]));
    }
    // the +128 of the levels: 128 * sc_g * bsum_g
    const __m512i bs = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *) a.bsums));
    t = _mm512_sub_epi32(t, _mm512_slli_epi32(_mm512_mullo_epi32(bs, ub.sc), 7));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(ub.d * a.d), acc);
}

template <typename D, int C>
void rows_direct(const D & dec, int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * x, size_t x_stride,
                 float * dst, size_t dst_stride, int nr) {
    const lane_scales ls;
    const block_q8_K * xc[C];
    for (int c = 0; c < C; ++c) xc[c] = (const block_q8_K *) (x + c * x_stride);
    ublock ub;
    for (int r = 0; r < nr; ++r) {
        const uint8_t * row = w + r * w_stride;
        const float row_d = ik_row_scale_of<D::kRow, f16c_to_f32>(row);
        const uint8_t * blocks = row + D::kRow;
        __m512 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
        for (int64_t i = 0; i < nb; ++i) {
            dec(blocks + i * D::kBytes, row_d, ub);
            __m512i S[4];
            ls.spread(ub.sc, S);
            for (int c = 0; c < C; ++c) acc[c] = block_fma(ub, S, xc[c][i], acc[c]);
        }
        for (int c = 0; c < C; ++c) dst[c * dst_stride + r] = hsum(acc[c]);
    }
}

// Panel adapter: value = (d sc) u - 128 (d sc); kSub = 32 where both halves share the scale.
template <typename D, int S>
struct panel_dec {
    static constexpr int kSub = S, kChunk = QK_K;
    static constexpr int kLevelOffset = 128;   // the bias below, folded away by the panel
    static void decode(const uint8_t * row, int64_t i, int64_t, __m512i * v, float * scale, float * bias) {
        static const D dec;
        ublock ub;
        dec(row + D::kRow + i * D::kBytes, ik_row_scale_of<D::kRow, f16c_to_f32>(row), ub);
        for (int k = 0; k < 4; ++k) v[k] = ub.u[k];
        alignas(64) int32_t sc[16];
        _mm512_store_si512((void *) sc, ub.sc);
        for (int j = 0; j < QK_K / S; ++j) {
            scale[j] = ub.d * (float) sc[j * (S / 16)];
            bias[j] = -128.0f * scale[j];
        }
    }
};

constexpr int kPanelMinCols = 24;

template <typename D, int S>
void gemm_ik(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
             int nr, int nc) {
    if (nc >= kPanelMinCols) {
        kiln_panel::gemm<panel_dec<D, S>, kiln_panel::act_q8_K<S>>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    static const D dec;
    const int64_t nb = n / QK_K;
    const auto * wb = (const uint8_t *) w;
    const auto * xb = (const uint8_t *) x;
    int c = 0;
    for (; c + 8 <= nc; c += 8) {
        rows_direct<D, 8>(dec, nb, wb, w_stride, xb + c * x_stride, x_stride, dst + c * dst_stride, dst_stride, nr);
    }
    const uint8_t * xr = xb + c * x_stride;
    float * dr = dst + c * dst_stride;
    switch (nc - c) {
        case 0: break;
        case 1: rows_direct<D, 1>(dec, nb, wb, w_stride, xr, x_stride, dr, dst_stride, nr); break;
        case 2: rows_direct<D, 2>(dec, nb, wb, w_stride, xr, x_stride, dr, dst_stride, nr); break;
        case 3: rows_direct<D, 3>(dec, nb, wb, w_stride, xr, x_stride, dr, dst_stride, nr); break;
        case 4: rows_direct<D, 4>(dec, nb, wb, w_stride, xr, x_stride, dr, dst_stride, nr); break;
        case 5: rows_direct<D, 5>(dec, nb, wb, w_stride, xr, x_stride, dr, dst_stride, nr); break;
        case 6: rows_direct<D, 6>(dec, nb, wb, w_stride, xr, x_stride, dr, dst_stride, nr); break;
        default: rows_direct<D, 7>(dec, nb, wb, w_stride, xr, x_stride, dr, dst_stride, nr); break;
    }
}

// Trellis types (gemv-kt.h): the run-order kernel for one or two columns, the packed-order one
// up to the panel (iq3_kt, whose values are not linear in the hash bytes, takes it from one
// column). The run-order kernel lost from four columns on (kiln-bench-matmul 512 x 4096 iq2_kt,
// CPU ms: batch 4 0.334 against 0.263 for decoding levels per block, batch 8 0.671 against 0.379).
// The packed kernel in tiles of 8 beats the panel below 24 columns (iq2_kt / iq4_kt batch 16:
// 0.56 / 0.93 against 0.76 / 0.93 ms; batch 24: 0.84 / 1.76 against 0.54 / 0.65).
// At one and two columns run order stays ahead (iq2_kt 0.096 / 0.139 against 0.127 / 0.140 packed).
template <typename G, typename D, int kRunOrderCols = 2>
void gemm_kt(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
             int nr, int nc) {
    if (nc >= kPanelMinCols) {
        gemm_ik<D, 32>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    } else if (nc <= kRunOrderCols) {
        kt_gemv<G>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    } else {
        kt_gemm_packed<G>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    }
}

bool shifted_grid_is_offset(const int8_t * v, int n, int delta) {
    for (int i = 0; i < n; ++i) {
        if (v[n + i] - v[i] != delta) return false;
    }
    return true;
}

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_ik_avx512() {
    // the decoders rely on each shifted grid being its base grid plus a constant
    GGML_ASSERT(shifted_grid_is_offset(ik_iq2nl_values, 4, 5) && shifted_grid_is_offset(ik_iq3nl_values, 8, 4) &&
                shifted_grid_is_offset(ik_iq4k_values, 16, 4) && shifted_grid_is_offset(ik_iq5nl_values, 32, 2) &&
                shifted_grid_is_offset(ik_iq6nl_values, 64, 1));
    const ggml_cpu_isa isa = GGML_CPU_ISA_AVX512;
    const ggml_type q8 = GGML_TYPE_Q8_K;
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_KS, isa, q8, gemm_ik<dec_iq4_ks, 32>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_K, isa, q8, gemm_ik<dec_iq4_k, 16>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ5_KS, isa, q8, gemm_ik<dec_iq5_ks, 32>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ5_K, isa, q8, gemm_ik<dec_iq5_k, 16>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ6_K, isa, q8, gemm_ik<dec_iq6_k, 16>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_K, isa, q8, gemm_ik<dec_iq2_k, 16>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_KS, isa, q8, gemm_ik<dec_iq2_ks, 32>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_K, isa, q8, gemm_ik<dec_iq3_k, 16>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_KS, isa, q8, gemm_ik<dec_iq3_ks, 32>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_KSS, isa, q8, gemm_ik<dec_iq4_kss, 32>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_KL, isa, q8, gemm_ik<dec_iq2_kl, 32>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_KT, isa, q8, gemm_kt<kt_gemv_iq1, dec_iq1_kt>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_KT, isa, q8, gemm_kt<kt_gemv_iq2, dec_iq23_kt<false>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_KT, isa, q8, gemm_kt<kt_gemv_iq3, dec_iq23_kt<true>, 0>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_KT, isa, q8, gemm_kt<kt_gemv_iq4, dec_iq4_kt>);
}
