// AVX2 gemm kernels of the ik_llama.cpp non-linear types (iq2_k .. iq6_k, iq2_ks .. iq5_ks,
// iq4_kss, iq2_kl, the trellis types) against q8_K activations; llama.cpp's ternary tq1_0 / tq2_0
// run on the same driver.
//
// Each weight block is brought into registers once per column tile as eight vectors of 32
// signed levels plus eight vectors of 16-bit sub-block scales, then reused for every column:
// |w| x sign(a, w) with vpmaddubsw (no saturation: |w|, |a| <= 127), scales with vpmaddwd,
// int32 accumulation. The integer block sums equal the scalar kernel's exactly; the float
// accumulation runs per lane (one horizontal sum per row), so results differ from the scalar
// path only by float rounding.
//
// Calls with many activation columns (prompt processing) go to the panel gemm (panel.h) with the
// same decoders: signed levels, one scale per 16 values.
//
// Every type decodes in registers: vpshufb table lookups for the grids (the level table sits in
// registers; the shifted-grid bit of a sub-block picks one of two table registers, or adds the
// grid's constant shift), and for the trellis types the seed hash in 8 int32 lanes (vpmulld).
#include "avx2/register.h"
#include "avx2/gemv-kt.h"
#include "quants/quants-ik.h"
#include "cpu-traits.h"
#include "panel.h"
#include "scales.h"
#include "ternary-levels-x86.h"
#include "trellis-seeds-x86.h"
#include "simd.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace {

// The register decoders are called from the token-generation loop and from the panel decoder;
// with two callers GCC stops inlining them ("called once"), and the block then goes through
// memory in the loop where it is the whole cost (measured: iq5_k batch 1 20% slower).
#define KILN_DECODE_INLINE inline __attribute__((always_inline))

struct simd_block {
    __m256i q[8];    // levels of values 32k .. 32k+31
    __m256i sc[8];   // int16: lanes 0-7 scale of the first 16 values, 8-15 of the next 16
    __m256i off;     // token-generation decoders of iq5_k / iq6_k: int16 per 16-value group g,
                     // the grid shift left out of q times the group's scale (see rows_small)
    float   d;
};

inline __m256i scale_pair(int s0, int s1) {
    return _mm256_set_m128i(_mm_set1_epi16((short) s1), _mm_set1_epi16((short) s0));
}

// Both 16-entry grids of the 4-bit types, each replicated in the two 128-bit lanes.
struct iq4_tables {
    __m256i t[2];
    iq4_tables() {
        for (int s = 0; s < 2; ++s) {
            const __m128i v = _mm_loadu_si128((const __m128i *) (ik_iq4k_values + 16 * s));
            t[s] = _mm256_broadcastsi128_si256(v);
        }
    }
};

// 16 bytes of nibbles -> 32 levels: low nibbles are values 0..15, high nibbles 16..31.
inline __m256i nibbles_to_levels(__m128i bytes, const __m256i & table) {
    const __m128i m4 = _mm_set1_epi8(0xF);
    const __m256i idx = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), m4), _mm_and_si128(bytes, m4));
    return _mm256_shuffle_epi8(table, idx);
}

KILN_DECODE_INLINE void decode_iq4_ks_avx2(const void * vb, float row_d, simd_block & sb) {
    static const iq4_tables tables;
    const auto & b = *(const block_iq4_ks *) vb;
    for (int ib = 0; ib < 8; ++ib) {
        const __m128i bytes = _mm_loadu_si128((const __m128i *) (b.qs + 16 * ib));
        sb.q[ib] = nibbles_to_levels(bytes, tables.t[b.scales[ib] & 1]);
        sb.sc[ib] = _mm256_set1_epi16((short) ((b.scales[ib] & 254) - 127));
    }
    sb.d = row_d;
}

// Per-lane grid offset of a 32-block whose two 16-value halves pick their grids separately.
inline __m256i half_offsets(int first, int second, int step) {
    return _mm256_set_m128i(_mm_set1_epi8((char) (second * step)), _mm_set1_epi8((char) (first * step)));
}

// The sixteen 6-bit scales (minus 32) of an iq4_k / iq5_k block as vpmaddwd pairs (sc[ib]: the
// two 16-value halves of 32-block ib), by vector shifts: group g's low nibble is nibble g of
// scales_l, its two high bits are bits 2g, 2g+1 of scales_h read as one 32-bit word.
inline __m256i scales_6bit_all(const uint8_t * scales_l, const uint8_t * scales_h, __m256i * sc) {
    const __m128i l8 = _mm_loadl_epi64((const __m128i *) scales_l);
    const __m128i m4 = _mm_set1_epi8(0xF);
    const __m128i low = _mm_unpacklo_epi8(_mm_and_si128(l8, m4), _mm_and_si128(_mm_srli_epi16(l8, 4), m4));
    uint32_t h;
    std::memcpy(&h, scales_h, 4);
    const __m256i hv = _mm256_set1_epi32((int) h);
    const __m256i three = _mm256_set1_epi32(3);
    const __m256i h0 = _mm256_and_si256(_mm256_srlv_epi32(hv, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)), three);
    const __m256i h1 = _mm256_and_si256(_mm256_srlv_epi32(hv, _mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30)), three);
    // vpackssdw packs per 128-bit lane (groups 0-3, 8-11, 4-7, 12-15): the permute restores order
    const __m256i high = _mm256_permute4x64_epi64(_mm256_packs_epi32(h0, h1), 0xD8);
    const __m256i s16 = _mm256_sub_epi16(_mm256_or_si256(_mm256_cvtepu8_epi16(low), _mm256_slli_epi16(high, 4)),
                                         _mm256_set1_epi16(32));
    spread_scale_pairs(s16, sc);
    return s16;
}

// The grid shifts of iq5_k / iq6_k (step in every value of group g where bit g of extra is set)
// times the group scales s16, as int16 per group: the shift's part of the block's dot is then
// off . bsums, one vpmaddwd with the activation's 16-value sums (exact in int32), in place of
// four instructions per 32 values building the shift and an add on the levels.
inline __m256i shift_terms(uint16_t extra, int step, __m256i s16) {
    const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, (short) 32768);
    const __m256i set = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16((short) extra), bit), bit);
    return _mm256_and_si256(set, _mm256_mullo_epi16(s16, _mm256_set1_epi16((short) step)));
}

// step in the bytes of each 16-value half of 32-block ib whose bit (2 ib, 2 ib + 1) of extra is set
inline void half_offsets_all(uint16_t extra, int step, __m256i * off) {
    const __m256i e = _mm256_set1_epi16((short) extra);
    const __m256i bits = _mm256_set_m128i(_mm_set1_epi16(2), _mm_set1_epi16(1));
    const __m256i stepv = _mm256_set1_epi8((char) step);
    for (int ib = 0; ib < 8; ++ib) {
        const __m256i t = _mm256_and_si256(_mm256_srl_epi16(e, _mm_cvtsi32_si128(2 * ib)), bits);
        off[ib] = _mm256_and_si256(_mm256_cmpeq_epi16(t, bits), stepv);
    }
}

KILN_DECODE_INLINE void decode_iq4_k_avx2(const void * vb, float, simd_block & sb) {
    static const iq4_tables tables;
    const auto & b = *(const block_iq4_k *) vb;
    for (int ib = 0; ib < 8; ++ib) {
        const __m128i bytes = _mm_loadu_si128((const __m128i *) (b.qs + 16 * ib));
        const __m128i m4 = _mm_set1_epi8(0xF);
        // the two halves of a 32-block may use different grids
        const __m128i lo = _mm_shuffle_epi8(_mm256_castsi256_si128(tables.t[(b.extra >> (2 * ib)) & 1]), _mm_and_si128(bytes, m4));
        const __m128i hi = _mm_shuffle_epi8(_mm256_castsi256_si128(tables.t[(b.extra >> (2 * ib + 1)) & 1]),
                                            _mm_and_si128(_mm_srli_epi16(bytes, 4), m4));
        sb.q[ib] = _mm256_set_m128i(hi, lo);
    }
    scales_6bit_all(b.scales_l, b.scales_h, sb.sc);
    sb.d = _cvtsh_ss(b.d);
}

// iq5_k: a 5-bit index per value into a 32-entry grid; the shifted grid is the plain one + 2
// (ik_iq5nl_values), so a shifted 16-value half only adds 2 after the lookup. vpshufb reads 16
// entries, so the lookup is two shuffles (entries 0-15 and 16-31) and the fifth bit picks one.
// Layout per 64 values (ib64): qs[32 * ib64 + j] holds value j's low nibble (j < 32) and value
// j + 32's in its high nibble; bit 2 * ib64 (first 32) / 2 * ib64 + 1 (next 32) of qh[j] is the
// fifth bit. Both map byte j to value j, so the values come out in natural order.
struct iq5_tables {
    __m256i lo, hi;
    iq5_tables()
        : lo(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) ik_iq5nl_values))),
          hi(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) (ik_iq5nl_values + 16)))) {}
};

// The levels of an iq5_k / iq5_ks block before any grid shift (plain grid).
KILN_DECODE_INLINE void iq5_levels(const uint8_t * qs128, const uint8_t * qh32, __m256i * q) {
    static const iq5_tables tables;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i qh = _mm256_loadu_si256((const __m256i *) qh32);
    for (int ib64 = 0; ib64 < 4; ++ib64) {
        const __m256i qs = _mm256_loadu_si256((const __m256i *) (qs128 + 32 * ib64));
        for (int h = 0; h < 2; ++h) {
            const int ib = 2 * ib64 + h;
            const __m256i idx = _mm256_and_si256(h ? _mm256_srli_epi16(qs, 4) : qs, m4);
            const __m256i bit = _mm256_set1_epi8((char) (1 << ib));
            const __m256i fifth = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
            q[ib] = _mm256_blendv_epi8(_mm256_shuffle_epi8(tables.lo, idx), _mm256_shuffle_epi8(tables.hi, idx), fifth);
        }
    }
}

// ShiftOut (token generation, rows_small): the plain grid's levels and the shift in sb.off;
// otherwise (the panel) the shift added to the levels.
template <bool ShiftOut>
KILN_DECODE_INLINE void decode_iq5_k_avx2(const void * vb, float, simd_block & sb) {
    const auto & b = *(const block_iq5_k *) vb;
    iq5_levels(b.qs, b.qh, sb.q);
    const __m256i s16 = scales_6bit_all(b.scales_l, b.scales_h, sb.sc);
    if constexpr (ShiftOut) {
        sb.off = shift_terms(b.extra, 2, s16);
    } else {
        __m256i shift[8];
        half_offsets_all(b.extra, 2, shift);
        for (int ib = 0; ib < 8; ++ib) sb.q[ib] = _mm256_add_epi8(sb.q[ib], shift[ib]);
    }
    sb.d = _cvtsh_ss(b.d);
}

// iq5_ks: iq5_k's levels; one scale byte per 32 values as iq4_ks (bit 0: the shifted grid, +2).
KILN_DECODE_INLINE void decode_iq5_ks_avx2(const void * vb, float row_d, simd_block & sb) {
    const auto & b = *(const block_iq5_ks *) vb;
    iq5_levels(b.qs, b.qh, sb.q);
    for (int ib = 0; ib < 8; ++ib) {
        sb.q[ib] = _mm256_add_epi8(sb.q[ib], _mm256_set1_epi8((char) (2 * (b.scales[ib] & 1))));
        sb.sc[ib] = _mm256_set1_epi16((short) ((b.scales[ib] & 254) - 127));
    }
    sb.d = row_d;
}

// iq6_k: a 6-bit index per value into a 64-entry grid (the shifted grid is the plain one + 1):
// four vpshufb over the 16-entry quarters, the index's bits 4 and 5 pick among them. 32-block
// ib = 2 ib64 + h: nibble h of qs[32 ib64 + j]; bits 4 (ib64 % 2) + 2 h, +1 of qh[32 (ib64 / 2) + j].
struct iq6_tables {
    __m256i t[4];
    iq6_tables() {
        for (int i = 0; i < 4; ++i) t[i] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) (ik_iq6nl_values + 16 * i)));
    }
};

template <bool ShiftOut>
KILN_DECODE_INLINE void decode_iq6_k_avx2(const void * vb, float, simd_block & sb) {
    static const iq6_tables tables;
    const auto & b = *(const block_iq6_k *) vb;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1), two = _mm256_set1_epi8(2);
    __m256i shift[8];
    if constexpr (!ShiftOut) half_offsets_all(b.extra, 1, shift);
    for (int ib64 = 0; ib64 < 4; ++ib64) {
        const __m256i qs = _mm256_loadu_si256((const __m256i *) (b.qs + 32 * ib64));
        const __m256i qh = _mm256_loadu_si256((const __m256i *) (b.qh + 32 * (ib64 / 2)));
        for (int h = 0; h < 2; ++h) {
            const int ib = 2 * ib64 + h;
            const __m256i idx = _mm256_and_si256(h ? _mm256_srli_epi16(qs, 4) : qs, m4);
            // bits 4, 5 of the index at bits 0, 1 of each byte (a 16-bit shift by <= 6 leaves them in place)
            const __m256i hb = _mm256_srli_epi16(qh, 4 * (ib64 % 2) + 2 * h);
            const __m256i b4 = _mm256_cmpeq_epi8(_mm256_and_si256(hb, one), one);
            const __m256i b5 = _mm256_cmpeq_epi8(_mm256_and_si256(hb, two), two);
            const __m256i r01 = _mm256_blendv_epi8(_mm256_shuffle_epi8(tables.t[0], idx), _mm256_shuffle_epi8(tables.t[1], idx), b4);
            const __m256i r23 = _mm256_blendv_epi8(_mm256_shuffle_epi8(tables.t[2], idx), _mm256_shuffle_epi8(tables.t[3], idx), b4);
            sb.q[ib] = _mm256_blendv_epi8(r01, r23, b5);
            if constexpr (!ShiftOut) sb.q[ib] = _mm256_add_epi8(sb.q[ib], shift[ib]);
        }
    }
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) b.scales));
    spread_scale_pairs(s16, sb.sc);
    if constexpr (ShiftOut) sb.off = shift_terms(b.extra, 1, s16);
    sb.d = _cvtsh_ss(b.d);
}

// A small grid (8 levels + 8 shifted, or 4 + 4) replicated in both lanes for vpshufb.
template <int N>
struct small_table {
    __m256i t;
    explicit small_table(const int8_t * values) {
        int8_t v[16] = {};
        for (int i = 0; i < 2 * N; ++i) v[i] = values[i];
        t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) v));
    }
};


// The 2-bit fields of 32-block ib in the iq2/iq3 types: bits 2 (ib % 4), +1 of qs[32 (ib / 4) + j].
inline __m256i crumbs(const uint8_t * qs64, int ib) {
    const __m256i qs = _mm256_loadu_si256((const __m256i *) (qs64 + 32 * (ib / 4)));
    return _mm256_and_si256(_mm256_srli_epi16(qs, 2 * (ib % 4)), _mm256_set1_epi8(3));
}

// iq3_k / iq3_ks third index bit of 32-block ib: bit ib of qh[j], as 4.
inline __m256i iq3_high_bit(const __m256i & qh32, int ib) {
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh32, ib), _mm256_set1_epi8(1)), 2);
}

KILN_DECODE_INLINE void decode_iq3_k_avx2(const void * vb, float, simd_block & sb) {
    static const small_table<8> table(ik_iq3nl_values);
    const auto & b = *(const block_iq3_k *) vb;
    const __m256i hbits = _mm256_loadu_si256((const __m256i *) b.qh);
    for (int ib32 = 0; ib32 < 8; ++ib32) {
        const __m256i idx = _mm256_or_si256(_mm256_or_si256(crumbs(b.qs, ib32), iq3_high_bit(hbits, ib32)),
                                            half_offsets((b.extra >> (2 * ib32)) & 1, (b.extra >> (2 * ib32 + 1)) & 1, 8));
        sb.q[ib32] = _mm256_shuffle_epi8(table.t, idx);
        const int m1 = 2 * (b.scales_l[ib32] & 0xF) + 1, m2 = 2 * (b.scales_l[ib32] >> 4) + 1;
        sb.sc[ib32] = scale_pair((b.scales_h >> (2 * ib32)) & 1 ? -m1 : m1, (b.scales_h >> (2 * ib32 + 1)) & 1 ? -m2 : m2);
    }
    sb.d = _cvtsh_ss(b.d);
}

// iq3_ks: iq3_k's levels with one grid bit per 32 values (extra bit 8 + ib); scale of 32-block
// ib: nibble ib / 4 of scales[ib % 4], fifth bit extra bit ib, minus 16.
KILN_DECODE_INLINE void decode_iq3_ks_avx2(const void * vb, float row_d, simd_block & sb) {
    static const small_table<8> table(ik_iq3nl_values);
    const auto & b = *(const block_iq3_ks *) vb;
    const __m256i hbits = _mm256_loadu_si256((const __m256i *) b.qh);
    for (int ib = 0; ib < 8; ++ib) {
        const __m256i idx = _mm256_or_si256(_mm256_or_si256(crumbs(b.qs, ib), iq3_high_bit(hbits, ib)),
                                            _mm256_set1_epi8((char) (8 * ((b.extra >> (8 + ib)) & 1))));
        sb.q[ib] = _mm256_shuffle_epi8(table.t, idx);
        const int ls = ((b.scales[ib % 4] >> 4 * (ib / 4)) & 0xF) | (((b.extra >> ib) & 1) << 4);
        sb.sc[ib] = _mm256_set1_epi16((short) (ls - 16));
    }
    sb.d = row_d;
}

KILN_DECODE_INLINE void decode_iq2_k_avx2(const void * vb, float, simd_block & sb) {
    static const small_table<4> table(ik_iq2nl_values);
    const auto & b = *(const block_iq2_k *) vb;
    for (int ib32 = 0; ib32 < 8; ++ib32) {
        const __m256i idx = _mm256_or_si256(crumbs(b.qs, ib32), half_offsets((b.extra >> (2 * ib32)) & 1, (b.extra >> (2 * ib32 + 1)) & 1, 4));
        sb.q[ib32] = _mm256_shuffle_epi8(table.t, idx);
        sb.sc[ib32] = scale_pair((b.scales[ib32] & 0xF) - 8, (b.scales[ib32] >> 4) - 8);
    }
    sb.d = _cvtsh_ss(b.d);
}

// iq2_ks: iq2_k's levels with one grid bit per 32 values (extra bit ib); scale of 32-block ib:
// nibble ib % 2 of scales[ib / 2], fifth bit extra bit 8 + ib, minus 16.
KILN_DECODE_INLINE void decode_iq2_ks_avx2(const void * vb, float row_d, simd_block & sb) {
    static const small_table<4> table(ik_iq2nl_values);
    const auto & b = *(const block_iq2_ks *) vb;
    for (int ib = 0; ib < 8; ++ib) {
        const __m256i idx = _mm256_or_si256(crumbs(b.qs, ib), _mm256_set1_epi8((char) (4 * ((b.extra >> ib) & 1))));
        sb.q[ib] = _mm256_shuffle_epi8(table.t, idx);
        const int ls = ((b.scales[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((b.extra >> (8 + ib)) & 1) << 4);
        sb.sc[ib] = _mm256_set1_epi16((short) (ls - 16));
    }
    sb.d = row_d;
}

// iq4_kss: iq4_ks's nibbles and scale bytes folded into 16-bit words. Word k of 32-block ib
// (eight words, 16 bytes): bit 0 is bit k of the scale byte; the other bits, x ^ (x >> 1) with
// bit 0 cleared, are bytes 2k, 2k+1 of the block's iq4_ks nibbles.
KILN_DECODE_INLINE void decode_iq4_kss_avx2(const void * vb, float row_d, simd_block & sb) {
    static const iq4_tables tables;
    const auto & b = *(const block_iq4_kss *) vb;
    const __m256i one = _mm256_set1_epi16(1);
    for (int i = 0; i < 4; ++i) {   // 32-blocks 2i and 2i + 1
        const __m256i w = _mm256_loadu_si256((const __m256i *) (b.qs + 8 * i));
        const __m256i v = _mm256_andnot_si256(one, w);
        const __m256i nib = _mm256_xor_si256(v, _mm256_srli_epi16(v, 1));
        // bit 0 of word k to bit k: the two scale bytes (words as 0 / -1 packed to bytes per
        // 128-bit lane, each lane's 8 bytes twice; no pext, which is microcoded before Zen 3)
        const __m256i lsb = _mm256_cmpeq_epi16(_mm256_and_si256(w, one), one);
        const uint32_t m = (uint32_t) _mm256_movemask_epi8(_mm256_packs_epi16(lsb, lsb));
        const uint32_t s = (m & 0xFF) | ((m >> 8) & 0xFF00);
        for (int h = 0; h < 2; ++h) {
            const int ls = (s >> (8 * h)) & 0xFF;
            const __m128i bytes = h ? _mm256_extracti128_si256(nib, 1) : _mm256_castsi256_si128(nib);
            sb.q[2 * i + h] = nibbles_to_levels(bytes, tables.t[ls & 1]);
            sb.sc[2 * i + h] = _mm256_set1_epi16((short) ((ls & 254) - 127));
        }
    }
    sb.d = row_d;
}

// iq2_kl: per 32 values, 16 pairs of levels from a 32-entry pair grid. 32-block ib: index j =
// nibble ib % 2 of qs[16 (ib / 2) + j] plus bit ib of qh[j] as 16; pair j gives values 2j, 2j+1.
// Each index is doubled into both bytes of a 16-bit lane; the even bytes look up the pairs' first
// levels, the odd bytes their second (two vpshufb per 16-entry half, bit 4 picks the half).
struct iq2_kl_tables {
    __m256i t[2][2];   // [byte of the pair][entries 0-15 / 16-31]
    iq2_kl_tables() {
        for (int byte = 0; byte < 2; ++byte) {
            for (int half = 0; half < 2; ++half) {
                alignas(16) int8_t v[16];
                for (int i = 0; i < 16; ++i) v[i] = (int8_t) (ik_iq2kl_values[16 * half + i] >> (8 * byte));
                t[byte][half] = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *) v));
            }
        }
    }
};

KILN_DECODE_INLINE void decode_iq2_kl_avx2(const void * vb, float row_d, simd_block & sb) {
    static const iq2_kl_tables tables;
    const auto & b = *(const block_iq2_kl *) vb;
    const __m128i m4 = _mm_set1_epi8(0xF), one = _mm_set1_epi8(1);
    const __m128i qh = _mm_loadu_si128((const __m128i *) b.qh);
    const __m256i odd = _mm256_set1_epi16((short) 0xFF00);
    for (int ib = 0; ib < 8; ++ib) {
        const __m128i qs = _mm_loadu_si128((const __m128i *) (b.qs + 16 * (ib / 2)));
        const __m128i idx = _mm_and_si128(_mm_srli_epi16(qs, 4 * (ib % 2)), m4);
        const __m128i hi = _mm_cmpeq_epi8(_mm_and_si128(_mm_srli_epi16(qh, ib), one), one);
        const __m256i i16 = _mm256_cvtepu8_epi16(idx), h16 = _mm256_cvtepu8_epi16(hi);
        const __m256i dup = _mm256_or_si256(i16, _mm256_slli_epi16(i16, 8));
        const __m256i hsel = _mm256_or_si256(h16, _mm256_slli_epi16(h16, 8));
        const __m256i first = _mm256_blendv_epi8(_mm256_shuffle_epi8(tables.t[0][0], dup), _mm256_shuffle_epi8(tables.t[0][1], dup), hsel);
        const __m256i second = _mm256_blendv_epi8(_mm256_shuffle_epi8(tables.t[1][0], dup), _mm256_shuffle_epi8(tables.t[1][1], dup), hsel);
        sb.q[ib] = _mm256_blendv_epi8(first, second, odd);
        const int ls = ((b.scales_l[ib % 4] >> 4 * (ib / 4)) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
        sb.sc[ib] = _mm256_set1_epi16((short) (ls - 32));
    }
    sb.d = row_d;
}

// ---------------------------------------------------------------------------------------------
// Trellis types (quants-kt.cpp): value m of a seed's run is the byte sum of (seed * K^(m+1)) &
// 0x3f3f3f3f minus 126. Eight int32 lanes hold one run of 8 (or two runs of 4) times the lane's
// power of K (vpmulld); vpmaddubsw + vpmaddwd sum each lane's bytes; two packs narrow four such
// vectors to the 32 levels of a 32-block.
struct trellis_avx2 {
    __m256i pow8;   // K^1 .. K^8
    __m256i pow4;   // K^1 .. K^4 twice
    trellis_avx2() {
        alignas(32) uint32_t p8[8], p4[8];
        uint32_t v = 0xCBAC1FEDu;
        for (int m = 0; m < 8; ++m) {
            p8[m] = v;
            v *= 0xCBAC1FEDu;
        }
        for (int m = 0; m < 8; ++m) p4[m] = p8[m % 4];
        pow8 = _mm256_load_si256((const __m256i *) p8);
        pow4 = _mm256_load_si256((const __m256i *) p4);
    }
    // byte sums (0..252) of each lane of seeds * pows
    static __m256i sums(__m256i seeds, __m256i pows) {
        const __m256i x = _mm256_and_si256(_mm256_mullo_epi32(seeds, pows), _mm256_set1_epi32(0x3f3f3f3f));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(x, _mm256_set1_epi8(1)), _mm256_set1_epi16(1));
    }
    // 32 levels from 8 seeds: runs of 8 (Run == 8: seeds 0..3 used) or of 4 (Run == 4: all 8)
    template <int Run>
    __m256i levels32(__m256i seeds) const {
        __m256i s[4];
        for (int j = 0; j < 4; ++j) {
            const __m256i pick = Run == 8 ? _mm256_set1_epi32(j) : _mm256_setr_epi32(2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1);
            s[j] = sums(_mm256_permutevar8x32_epi32(seeds, pick), Run == 8 ? pow8 : pow4);
        }
        // packs work per 128-bit lane: dwords come out as s0[0-3] s1[0-3] s2[0-3] s3[0-3] | s0[4-7] ...
        const __m256i off = _mm256_set1_epi16(126);
        const __m256i b = _mm256_packs_epi16(_mm256_sub_epi16(_mm256_packs_epi32(s[0], s[1]), off),
                                             _mm256_sub_epi16(_mm256_packs_epi32(s[2], s[3]), off));
        return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
};

KILN_DECODE_INLINE void decode_iq1_kt_avx2(const void * vb, float row_d, simd_block & sb) {
    static const trellis_avx2 tr;
    const auto & b = *(const block_iq1_kt *) vb;
    for (int t = 0; t < 4; ++t) {   // runs 8t .. 8t+7: 32-blocks 2t, 2t+1
        const __m256i seeds = iq1_kt_seeds8(b, t);
        sb.q[2 * t] = tr.levels32<8>(seeds);
        sb.q[2 * t + 1] = tr.levels32<8>(_mm256_permute2x128_si256(seeds, seeds, 0x11));
    }
    for (int ib = 0; ib < 8; ++ib) sb.sc[ib] = _mm256_set1_epi16(ik_iq4k_values[b.sh[ib] & 0xF]);
    sb.d = row_d;
}

// iq2_kt (Signed = false: scales index the iq4_k grid) and iq3_kt (Signed: unsigned scales,
// levels are magnitudes with a sign bit per value, bit ib of qh[j]). Both start with
// scales[4] and ql[64]; the decoders carry the reference's inference-time factor.
template <bool Signed>
KILN_DECODE_INLINE void decode_iq23_kt_avx2(const void * vb, float row_d, simd_block & sb) {
    static const trellis_avx2 tr;
    const uint8_t * scales = (const uint8_t *) vb;
    const uint8_t * ql = scales + 4;
    for (int ib = 0; ib < 8; ++ib) {
        const __m256i q = tr.levels32<8>(kt_word_seeds(ql, 4 * ib, 4));
        const int nib = (scales[ib % 4] >> 4 * (ib / 4)) & 0xF;
        if constexpr (Signed) {
            const auto & b = *(const block_iq3_kt *) vb;
            const __m256i one = _mm256_set1_epi8(1);
            const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *) b.qh), ib), one), one);
            const __m256i a = _mm256_abs_epi8(q);
            sb.q[ib] = _mm256_sub_epi8(_mm256_xor_si256(a, neg), neg);
            sb.sc[ib] = _mm256_set1_epi16((short) nib);
        } else {
            sb.q[ib] = q;
            sb.sc[ib] = _mm256_set1_epi16(ik_iq4k_values[nib]);
        }
    }
    sb.d = row_d * (Signed ? kIq3KtGemmFactor : kIq2KtGemmFactor);
}

// iq4_kt: runs of 4. 32-block ib's u32 shb word: bit 0 the seed offset, bits 1-7 the scale + 64,
// bits 8 + 3g .. seed bits 12-14 of run g; run r's low seed bits: ql[r], nibble r / 32 of qh[r % 32].
KILN_DECODE_INLINE void decode_iq4_kt_avx2(const void * vb, float row_d, simd_block & sb) {
    static const trellis_avx2 tr;
    const auto & b = *(const block_iq4_kt *) vb;
    for (int ib = 0; ib < 8; ++ib) {
        uint32_t shb;
        std::memcpy(&shb, b.shb + 4 * ib, 4);
        const __m256i seeds = iq4_kt_seeds8(b, ib);
        sb.q[ib] = tr.levels32<4>(seeds);
        sb.sc[ib] = _mm256_set1_epi16((short) ((int) ((shb & 0xFF) >> 1) - 64));
    }
    sb.d = row_d;
}

// llama.cpp's ternary types take the same driver: levels -1..1 (ternary-levels-x86.h), every
// sub-block scale 1, the block's fp16 scale.
template <typename Block>
KILN_DECODE_INLINE void decode_ternary_avx2(const void * vb, float, simd_block & sb) {
    const auto & b = *(const Block *) vb;
    ternary_levels(b, sb.q);
    for (int k = 0; k < 8; ++k) sb.sc[k] = _mm256_set1_epi16(1);
    sb.d = _cvtsh_ss(b.d);
}

// The scaled integer dot of a block with 256 activations, in 8 int32 lanes.
inline __m256i block_dot_lanes(const simd_block & sb, const int8_t * a) {
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
        const __m256i av = _mm256_loadu_si256((const __m256i *) (a + 32 * k));
        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(sb.q[k], sb.q[k]), _mm256_sign_epi8(av, sb.q[k]));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, sb.sc[k]));
    }
    return acc;
}

// The panel's view of a row of Row (an ik_row_scale) then blocks of Bytes: the row scale read per
// block, the levels as decoded and the integer scales of every 16 values from the decoder's int16
// pairs, which the panel folds into the levels (kFolded, avx2/panel.h).
template <int Row, size_t Bytes, void (*Decode)(const void *, float, simd_block &)>
struct panel_decoder {
    static constexpr int kSub = QK_K, kChunk = QK_K, kMaxLevel = 0;
    static constexpr bool kBias = false, kFolded = true;
    static void decode_folded(const uint8_t * row, int64_t i, __m256i * v, int16_t * scales, float & d) {
        simd_block sb;
        Decode(row + Row + i * Bytes, ik_row_scale_of<Row, kiln_panel::fp16_to_f32>(row), sb);
        for (int k = 0; k < 8; ++k) {
            v[k] = sb.q[k];
            scales[2 * k] = (int16_t) _mm256_extract_epi16(sb.sc[k], 0);
            scales[2 * k + 1] = (int16_t) _mm256_extract_epi16(sb.sc[k], 8);
        }
        d = sb.d;
    }
};

// Token generation and small batches: one row at a time against C columns, each block decoded
// once and its int32 dot per column converted and accumulated lane-wise; one horizontal sum per
// row and column (summing per block went through a scalar and dst every block: 20-25% of an
// iq5_k row's time, measured). RowBlocks(row, rb): the row's scale and first block. ShiftOut:
// the decoder leaves its grid shift out of the levels and the block's dot adds sb.off . bsums.
template <int C, void (*decode)(const void *, float, simd_block &), bool ShiftOut, typename RowBlocks>
void rows_small(int64_t nb, size_t block_bytes, const char * w, size_t w_stride, const char * x, size_t x_stride, float * dst,
                size_t dst_stride, int nr, RowBlocks row_blocks) {
    simd_block sb;
    for (int r = 0; r < nr; ++r) {
        float row_d;
        const char * blocks = row_blocks(w + r * w_stride, row_d);
        __m256 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; ++i) {
            decode(blocks + i * block_bytes, row_d, sb);
            for (int c = 0; c < C; ++c) {
                const auto & a = ((const block_q8_K *) (x + c * x_stride))[i];
                __m256i dot = block_dot_lanes(sb, a.qs);
                if constexpr (ShiftOut) {
                    dot = _mm256_add_epi32(dot, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) a.bsums), sb.off));
                }
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(sb.d * a.d), acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) dst[c * dst_stride + r] = hsum8_ps(acc[c]);
    }
}

// rows_small over the columns in tiles of up to 4.
template <void (*decode)(const void *, float, simd_block &), bool ShiftOut, typename RowBlocks>
void gemm_small(int64_t n, size_t block_bytes, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                size_t dst_stride, int nr, int nc, RowBlocks row_blocks) {
    const int64_t nb = n / QK_K;
    const auto * wb = (const char *) w;
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const char * xc = (const char *) x + c0 * x_stride;
        float * dc = dst + c0 * dst_stride;
        switch (std::min(4, nc - c0)) {
            case 1: rows_small<1, decode, ShiftOut>(nb, block_bytes, wb, w_stride, xc, x_stride, dc, dst_stride, nr, row_blocks); break;
            case 2: rows_small<2, decode, ShiftOut>(nb, block_bytes, wb, w_stride, xc, x_stride, dc, dst_stride, nr, row_blocks); break;
            case 3: rows_small<3, decode, ShiftOut>(nb, block_bytes, wb, w_stride, xc, x_stride, dc, dst_stride, nr, row_blocks); break;
            default: rows_small<4, decode, ShiftOut>(nb, block_bytes, wb, w_stride, xc, x_stride, dc, dst_stride, nr, row_blocks); break;
        }
    }
}

// decode_tg: the token-generation decoder where it differs from the panel's (ShiftOut above).
template <int Row, size_t Bytes, void (*decode)(const void *, float, simd_block &),
          void (*decode_tg)(const void *, float, simd_block &) = nullptr>
void gemm_ik_avx2(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                  size_t dst_stride, int nr, int nc) {
    if (nc >= kiln_panel::kMinCols) {
        kiln_panel::gemm<panel_decoder<Row, Bytes, decode>, kiln_panel::act_q8_K<QK_K>>(n, w, w_stride, x, x_stride, dst,
                                                                                       dst_stride, nr, nc);
        return;
    }
    const auto row_blocks = [](const char * row, float & row_d) {
        row_d = ik_row_scale_of<Row, kiln_panel::fp16_to_f32>(row);
        return row + Row;
    };
    if constexpr (decode_tg != nullptr) {
        gemm_small<decode_tg, true>(n, Bytes, w, w_stride, x, x_stride, dst, dst_stride, nr, nc, row_blocks);
    } else {
        gemm_small<decode, false>(n, Bytes, w, w_stride, x, x_stride, dst, dst_stride, nr, nc, row_blocks);
    }
}

// Trellis types (gemv-kt.h): the run-order kernel for one or two columns, the packed-order one
// up to 8 (iq3_kt, whose values are not linear in the hash bytes, takes it from one column), the
// panel above. The run-order kernel's per-column products (vpmaddubsw, vpmaddwd, adds per 8
// values) lost to decoding levels per block from three columns on (kiln-bench-matmul 512 x 4096,
// batch 4: 0.61 against 0.49 ms); the packed kernel beats the panel up to one tile of 8 columns
// (CPU ms, iq2_kt / iq3_kt / iq4_kt: batch 6 0.43 / 0.44 / 0.53 against 0.77 / 0.64 / 0.71, batch
// 8 0.52 / 0.53 / 0.65 against 0.83 / 0.70 / 0.79; batch 12, two tiles: 0.85 / 0.89 / 1.10
// against 0.93 / 0.81 / 0.88). At one and two columns run order stays ahead (iq2_kt 0.131 / 0.205
// against 0.195 / 0.258 packed).
constexpr int kPackedMaxCols = 8;

template <typename G, size_t Bytes, void (*decode)(const void *, float, simd_block &), int kRunOrderCols = 2>
void gemm_kt_avx2(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                  size_t dst_stride, int nr, int nc) {
    if (nc > kPackedMaxCols) {
        gemm_ik_avx2<IK_ROW_F32, Bytes, decode>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    } else if (nc <= kRunOrderCols) {
        kt_gemv<G>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    } else {
        kt_gemm_packed<G>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    }
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_ik_avx2() {
    using namespace kiln_panel;
    // iq4_k_r4 / iq4_ks_r4: quants-interleaved.cpp (the lane-shaped loop of gemv-interleaved-loop.h)
    const ggml_cpu_isa isa = GGML_CPU_ISA_AVX2;
    const ggml_type q8 = GGML_TYPE_Q8_K;
    // S: values per scale (32 where both 16-value halves of a 32-block share one)
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_KS, isa, q8, gemm_ik_avx2<IK_ROW_F32, sizeof(block_iq4_ks), decode_iq4_ks_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_K, isa, q8, gemm_ik_avx2<IK_ROW_NONE, sizeof(block_iq4_k), decode_iq4_k_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_K, isa, q8, gemm_ik_avx2<IK_ROW_NONE, sizeof(block_iq2_k), decode_iq2_k_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_K, isa, q8, gemm_ik_avx2<IK_ROW_NONE, sizeof(block_iq3_k), decode_iq3_k_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ5_K, isa, q8, gemm_ik_avx2<IK_ROW_NONE, sizeof(block_iq5_k), decode_iq5_k_avx2<false>, decode_iq5_k_avx2<true>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ6_K, isa, q8, gemm_ik_avx2<IK_ROW_NONE, sizeof(block_iq6_k), decode_iq6_k_avx2<false>, decode_iq6_k_avx2<true>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_KS, isa, q8, gemm_ik_avx2<IK_ROW_F16, sizeof(block_iq2_ks), decode_iq2_ks_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_KS, isa, q8, gemm_ik_avx2<IK_ROW_F16, sizeof(block_iq3_ks), decode_iq3_ks_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ5_KS, isa, q8, gemm_ik_avx2<IK_ROW_F32, sizeof(block_iq5_ks), decode_iq5_ks_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_KSS, isa, q8, gemm_ik_avx2<IK_ROW_F32, sizeof(block_iq4_kss), decode_iq4_kss_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_KL, isa, q8, gemm_ik_avx2<IK_ROW_F16, sizeof(block_iq2_kl), decode_iq2_kl_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_KT, isa, q8, gemm_kt_avx2<kt_gemv_iq1, sizeof(block_iq1_kt), decode_iq1_kt_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ2_KT, isa, q8, gemm_kt_avx2<kt_gemv_iq2, sizeof(block_iq2_kt), decode_iq23_kt_avx2<false>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_KT, isa, q8, gemm_kt_avx2<kt_gemv_iq3, sizeof(block_iq3_kt), decode_iq23_kt_avx2<true>, 0>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_KT, isa, q8, gemm_kt_avx2<kt_gemv_iq4, sizeof(block_iq4_kt), decode_iq4_kt_avx2>);
    ggml_cpu_register_gemm(GGML_TYPE_TQ1_0, isa, q8,
                           gemm_ik_avx2<IK_ROW_NONE, sizeof(block_tq1_0), decode_ternary_avx2<block_tq1_0>>);
    ggml_cpu_register_gemm(GGML_TYPE_TQ2_0, isa, q8,
                           gemm_ik_avx2<IK_ROW_NONE, sizeof(block_tq2_0), decode_ternary_avx2<block_tq2_0>>);
}
