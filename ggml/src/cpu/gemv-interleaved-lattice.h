// Token-generation decoders (gemv-interleaved-loop.h) of the interleaved lattice i-quants
// iq2_xxs_r4, iq2_xs_r4, iq2_s_r4, iq3_xxs_r4, iq3_s_r4 against q8_K, and iq1_s_r4, iq1_m_r4
// against q8_0 (at the end); included after the loop by avx2/quants-interleaved.cpp and
// avx512/quants-interleaved.cpp (their own copies).
//
// Why not the panel's group decoders (panel-r8-iq.h) at batch 1: they store every row's grid
// entries into a record in memory 4 bytes at a time and read it back, and left these layouts at
// about 0.3 of their plain twins. Here a sub-block's values go straight into the loop's nibble
// lanes (int32 lane = 4 values of one quarter of row lane % 4, even lane groups the first 16
// values, odd ones the second 16), so each activation load serves 4 rows:
//   magnitudes: per row k and 8-value group i the grid entry (iq3: two 4-value entries) as one
//     64-bit word; four words [k0 k1 | k0 k1] of groups i, i + 2 and [k2 k3 | k2 k3] meet in one
//     vshufps each for quarters 2 i | 2 i + 4 (even dwords) and 2 i + 1 | 2 i + 5 (odd ones);
//   signs: the sub-block's 16 sign bytes (one per row and group, or iq3_s_r4's per row and
//     value) broadcast, each value's byte picked by vpshufb and its bit tested (sign_table);
//   scales: all 8 sub-blocks' odd scales 2 s + 1 once per super-block, as int16 pairs in int32
//     slots, row k's in lane k (per-16 types: the second half's in the odd lane groups).
// The loop then takes the magnitudes unsigned and the signs onto the activations (kSignsApart).
// Every sum is an exact integer per super-block and lane; the float steps are the loop's.
#pragma once

#include "quants/quants-iq.h"

namespace {
namespace r4k_gemv {

inline uint64_t lattice_u64(uint32_t lo, uint32_t hi) { return lo | (uint64_t) hi << 32; }

// The parts (kNibbleLanes) of a sub-block from e[k][i], row k's 8 magnitudes of group i.
template <typename I>
inline void lattice_parts(const uint64_t (&e)[4][4], typename I::vi * lv) {
    for (int i = 0; i < 2; ++i) {
        const __m256 y = _mm256_castsi256_ps(_mm256_setr_epi64x((long long) e[0][i], (long long) e[1][i], (long long) e[0][i + 2], (long long) e[1][i + 2]));
        const __m256 z = _mm256_castsi256_ps(_mm256_setr_epi64x((long long) e[2][i], (long long) e[3][i], (long long) e[2][i + 2], (long long) e[3][i + 2]));
        const __m256i a = _mm256_castps_si256(_mm256_shuffle_ps(y, z, 0x88));   // quarters 2 i | 2 i + 4
        const __m256i b = _mm256_castps_si256(_mm256_shuffle_ps(y, z, 0xDD));   // quarters 2 i + 1 | 2 i + 5
        if constexpr (I::kBytes == 32) {
            lv[i] = a, lv[2 + i] = b;   // parts {0,4} {2,6} {1,5} {3,7}
        } else {
            lv[i] = I::join(a, b);      // parts {0,4,1,5} {2,6,3,7}
        }
    }
}

// Where value b of quarter q of row k takes its sign: bit Bit(k, q, b) of byte Byte(k, q, b) of
// the sub-block's 16 sign bytes; per part, the vpshufb control and the bit of every byte.
template <int V, int (*Byte)(int, int, int), int (*Bit)(int, int, int)>
struct sign_table {
    static constexpr int kParts = 128 / V;
    alignas(64) uint8_t pick[kParts][V] = {}, bit[kParts][V] = {};
    constexpr sign_table() {
        for (int j = 0; j < kParts; ++j) {
            for (int p = 0; p < V; ++p) {
                const int l = p / 4, k = l % 4, q = nibble_quarter(V, j, l);
                pick[j][p] = (uint8_t) Byte(k, q, p % 4);
                bit[j][p] = (uint8_t) (1 << Bit(k, q, p % 4));
            }
        }
    }
};
// a sign byte per row and group (4 k + group), bit = the value within the group
constexpr int group_sign_byte(int k, int q, int) { return 4 * k + q / 2; }
constexpr int group_sign_bit(int, int q, int b) { return 4 * (q % 2) + b; }
// iq3_s_r4: a byte per row and value of the quarter (4 k + b), bit = the quarter
constexpr int value_sign_byte(int k, int, int b) { return 4 * k + b; }
constexpr int value_sign_bit(int, int q, int) { return q; }
template <int V> constexpr sign_table<V, group_sign_byte, group_sign_bit> kGroupSigns{};
template <int V> constexpr sign_table<V, value_sign_byte, value_sign_bit> kValueSigns{};

// The 8 signs of 8 groups from their 7-bit scrambled codes t (bytes): t ^ (t << 1).
inline __m128i unscramble16(__m128i t) { return _mm_xor_si128(t, _mm_add_epi8(t, t)); }

// Odd scales 2 s + 1 (int32 lanes) as int16 pairs.
inline __m256i odd_pairs(__m256i s) {
    const __m256i odd = _mm256_add_epi32(_mm256_add_epi32(s, s), _mm256_set1_epi32(1));
    return _mm256_or_si256(odd, _mm256_slli_epi32(odd, 16));
}

// What the five decoders share. Derived: kMaxLevel, kFactor, Block, levels(b, ib, lv), sign
// bytes sign_bytes(b, ib) and their table, begin() filling st.s.
template <typename I, typename B, int kMax, bool kPer16>
struct lattice_dec {
    using vi = typename I::vi;
    using Block = B;
    static constexpr int kPairs = 0, kMaxLevel = kMax, NM = 0, kSubs = 8, kRows = 4;
    static constexpr bool kSigned = true, kSignsApart = true;
    static constexpr lane_shape kLanes = kNibbleLanes;
    static constexpr size_t kHeader = 0;
    struct state {
        alignas(64) int32_t s[64];   // int16 pairs; per16: slot 8 ib + 4 half + k, else 4 ib + k
        typename I::vf d, dm;
    };
    static vi scale(const state & st, int ib) {
        if constexpr (kPer16) return I::bcast32(st.s + 8 * ib);
        else return I::bcast16(st.s + 4 * ib);
    }
    static void row_scales(const B & b, float factor, state & st) {
        st.d = I::rows4(_mm_mul_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) b.d)), _mm_set1_ps(factor)));
    }
    template <typename T>
    static void signs_from(__m128i bytes, const T & table, vi * sign) {
        const vi s = I::bcast16(&bytes);
        for (int j = 0; j < 128 / I::kBytes; ++j) {
            sign[j] = I::negative_where(I::shuffle(s, I::load(table.pick[j])), I::load(table.bit[j]));
        }
    }
};

// iq2_xxs_r4 / iq3_xxs_r4: the scale of row k's sub-block ib is bit 0 of the 4 bytes of its sas
// word sas[4 (4 ib + k)] (gathered by one multiply), the signs 7-bit codes above it.
template <typename I, typename B, int kMax, const float & kFactor>
struct sas_dec : lattice_dec<I, B, kMax, false> {
    using base = lattice_dec<I, B, kMax, false>;
    static void begin(const B & b, typename base::state & st) {
        for (int v = 0; v < 4; ++v) {
            const __m256i x = _mm256_loadu_si256((const __m256i *) (b.sas + 32 * v));
            const __m256i s = _mm256_srli_epi32(_mm256_mullo_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x01010101)), _mm256_set1_epi32(0x01020408)), 24);
            _mm256_store_si256((__m256i *) (st.s + 8 * v), odd_pairs(s));
        }
        base::row_scales(b, kFactor, st);
    }
    static void signs(const B & b, int ib, typename I::vi * sign) {
        const __m128i x = _mm_loadu_si128((const __m128i *) (b.sas + 16 * ib));
        base::signs_from(unscramble16(_mm_and_si128(_mm_srli_epi16(x, 1), _mm_set1_epi8(0x7F))), kGroupSigns<I::kBytes>, sign);
    }
};

template <typename I>
struct iq2_xxs_r4_dec : sas_dec<I, iq2_xxs_r4_block, 43, ggml_iq::IQ2_DOT_FACTOR> {
    static void levels(const iq2_xxs_r4_block & b, int ib, typename I::vi * lv) {
        uint64_t e[4][4];
        for (int k = 0; k < 4; ++k) {
            for (int i = 0; i < 4; ++i) e[k][i] = ggml_iq::iq2xxs_grid[b.qs[16 * ib + 4 * k + i]];
        }
        lattice_parts<I>(e, lv);
    }
};

template <typename I>
struct iq3_xxs_r4_dec : sas_dec<I, iq3_xxs_r4_block, 62, ggml_iq::IQ3XXS_DOT_FACTOR> {
    static void levels(const iq3_xxs_r4_block & b, int ib, typename I::vi * lv) {
        uint64_t e[4][4];
        for (int k = 0; k < 4; ++k) {
            const uint8_t * q = b.qs + 32 * ib + 8 * k;
            for (int i = 0; i < 4; ++i) e[k][i] = lattice_u64(ggml_iq::iq3xxs_grid[q[2 * i]], ggml_iq::iq3xxs_grid[q[2 * i + 1]]);
        }
        lattice_parts<I>(e, lv);
    }
};

// iq2_xs_r4 / iq2_s_r4: row k's two 4-bit half scales in scales[4 ib + k] (low nibble: the
// first 16 values), into slots 8 ib + 4 half + k.
template <typename I, typename B>
struct half_scale_dec : lattice_dec<I, B, 43, true> {
    using base = lattice_dec<I, B, 43, true>;
    static void begin(const B & b, typename base::state & st) {
        const __m256i x = _mm256_loadu_si256((const __m256i *) b.scales), m4 = _mm256_set1_epi8(0x0F);
        const __m256i lo = _mm256_and_si256(x, m4), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        // per 128-bit lane: sub-blocks 2 m, 2 m + 1 (lane 0) and 2 m + 4, 2 m + 5 (lane 1) in slot order
        const __m256i u0 = _mm256_unpacklo_epi32(lo, hi), u1 = _mm256_unpackhi_epi32(lo, hi);
        alignas(32) uint8_t slots[64];
        _mm256_store_si256((__m256i *) slots, _mm256_permute2x128_si256(u0, u1, 0x20));
        _mm256_store_si256((__m256i *) (slots + 32), _mm256_permute2x128_si256(u0, u1, 0x31));
        for (int ib = 0; ib < 8; ++ib) {
            _mm256_store_si256((__m256i *) (st.s + 8 * ib), odd_pairs(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (slots + 8 * ib)))));
        }
        base::row_scales(b, ggml_iq::IQ2_DOT_FACTOR, st);
    }
};

template <typename I>
struct iq2_xs_r4_dec : half_scale_dec<I, iq2_xs_r4_block> {
    using base = lattice_dec<I, iq2_xs_r4_block, 43, true>;
    static void levels(const iq2_xs_r4_block & b, int ib, typename I::vi * lv) {
        uint64_t e[4][4];
        for (int k = 0; k < 4; ++k) {
            for (int i = 0; i < 4; ++i) e[k][i] = ggml_iq::iq2xs_grid[b.qs[16 * ib + 4 * k + i] & 511];
        }
        lattice_parts<I>(e, lv);
    }
    // the 7-bit codes are the top bits of the 16-bit entries
    static void signs(const iq2_xs_r4_block & b, int ib, typename I::vi * sign) {
        const __m128i a = _mm_loadu_si128((const __m128i *) (b.qs + 16 * ib)), c = _mm_loadu_si128((const __m128i *) (b.qs + 16 * ib + 8));
        base::signs_from(unscramble16(_mm_packus_epi16(_mm_srli_epi16(a, 9), _mm_srli_epi16(c, 9))), kGroupSigns<I::kBytes>, sign);
    }
};

template <typename I>
struct iq2_s_r4_dec : half_scale_dec<I, iq2_s_r4_block> {
    using base = lattice_dec<I, iq2_s_r4_block, 43, true>;
    static void levels(const iq2_s_r4_block & b, int ib, typename I::vi * lv) {
        uint64_t e[4][4];
        for (int k = 0; k < 4; ++k) {
            const uint32_t qh = b.qh[4 * ib + k];
            for (int i = 0; i < 4; ++i) e[k][i] = ggml_iq::iq2s_grid[b.qs[16 * ib + 4 * k + i] | ((qh << (8 - 2 * i)) & 0x300)];
        }
        lattice_parts<I>(e, lv);
    }
    static void signs(const iq2_s_r4_block & b, int ib, typename I::vi * sign) {
        base::signs_from(_mm_loadu_si128((const __m128i *) (b.signs + 16 * ib)), kGroupSigns<I::kBytes>, sign);
    }
};

// iq3_s_r4: row k's quarter g index byte at qs[32 ib + k + 8 (g % 4) + 4 (g / 4)], its ninth bit
// bit g of qh[4 ib + k]; the 4-bit scale of slot l = 4 ib + k is nibble l / 16 of scales[l % 16].
template <typename I>
struct iq3_s_r4_dec : lattice_dec<I, iq3_s_r4_block, 15, false> {
    using base = lattice_dec<I, iq3_s_r4_block, 15, false>;
    static void begin(const iq3_s_r4_block & b, typename base::state & st) {
        const __m128i x = _mm_loadu_si128((const __m128i *) b.scales), m4 = _mm_set1_epi8(0x0F);
        const __m128i nib[2] = { _mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4) };
        for (int v = 0; v < 4; ++v) {
            const __m128i bytes = v % 2 ? _mm_srli_si128(nib[v / 2], 8) : nib[v / 2];
            _mm256_store_si256((__m256i *) (st.s + 8 * v), odd_pairs(_mm256_cvtepu8_epi32(bytes)));
        }
        base::row_scales(b, ggml_iq::IQ3S_DOT_FACTOR, st);
    }
    static void levels(const iq3_s_r4_block & b, int ib, typename I::vi * lv) {
        uint64_t e[4][4];
        for (int k = 0; k < 4; ++k) {
            const uint8_t * q = b.qs + 32 * ib + k;
            const uint32_t qh = b.qh[4 * ib + k];
            auto entry = [&](int g) { return ggml_iq::iq3s_grid[q[8 * (g % 4) + 4 * (g / 4)] | ((qh >> g) & 1) << 8]; };
            for (int i = 0; i < 4; ++i) e[k][i] = lattice_u64(entry(2 * i), entry(2 * i + 1));
        }
        lattice_parts<I>(e, lv);
    }
    static void signs(const iq3_s_r4_block & b, int ib, typename I::vi * sign) {
        base::signs_from(_mm_loadu_si128((const __m128i *) (b.signs + 16 * ib)), kValueSigns<I::kBytes>, sign);
    }
};

// iq1_s_r4 / iq1_m_r4 (quants-blocks-interleaved.h): 32-value blocks of 4 rows, 4 fp16 row scales
// d leading the group, q8_0 activations (b32_dec's shape). A value is d dl (g + delta) with g the
// grid byte (-1, 0, 1) and delta +-1/8, so the exact integer level is 8 g +- 1 (odd, |level| <= 9:
// the loop's vpabsb / sign path never meets a 0), the row factor d / 8 and the int16 scale dl
// (iq1_s: 2 ls + 1 per block and row; iq1_m: a 4-bit scale per 16 values, the second 16's in the
// odd lane groups as the per-16 lattice types'). The delta signs come like the lattice signs:
// one bit of the 8 qh bytes per lane and group (sign_table), here turned into +-1.
static_assert(ggml_iq::IQ1_DELTA == 0.125f, "iq1 levels are 8 g +- 1");
// iq1_s_r4: row k's delta sign is bit 15 of qh[k]
constexpr int iq1_s_delta_byte(int k, int, int) { return 2 * k + 1; }
constexpr int iq1_s_delta_bit(int, int, int) { return 7; }
// iq1_m_r4: group i = q / 2 of row k is group i % 2 of half h = i / 2: its delta sign is bit
// 3 + 4 (i % 2) of qh[4 h + k]
constexpr int iq1_m_delta_byte(int k, int q, int) { return 4 * (q / 4) + k; }
constexpr int iq1_m_delta_bit(int, int q, int) { return 3 + 4 * (q / 2 % 2); }
template <int V> constexpr sign_table<V, iq1_s_delta_byte, iq1_s_delta_bit> kIq1sDeltas{};
template <int V> constexpr sign_table<V, iq1_m_delta_byte, iq1_m_delta_bit> kIq1mDeltas{};

template <typename I, typename B, bool kPer16>
struct iq1_dec {
    using vi = typename I::vi;
    using Block = B;
    static constexpr int kPairs = 0, kMaxLevel = 9, NM = 0, kSubs = 1, kRows = 4;
    static constexpr bool kSigned = true;
    static constexpr lane_shape kLanes = kNibbleLanes;
    static constexpr size_t kHeader = 4 * sizeof(ggml_fp16_t);
    struct state {
        alignas(32) int32_t s[8];   // int16 pairs, row k's in slot k (iq1_m: 4 half + k)
        typename I::vf d, dm;
    };
    static void group(const uint8_t * g, state & st) {
        st.d = I::rows4(_mm_mul_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) g)), _mm_set1_ps(ggml_iq::IQ1_DELTA)));
    }
    static vi scale(const state & st, int) {
        if constexpr (kPer16) return I::bcast32(st.s);
        else return I::bcast16(st.s);
    }
    // the levels 8 g + delta from e[k][i] (row k's grid entry of group i) and the delta table
    template <typename T>
    static void levels_from(const uint64_t (&e)[4][4], const uint8_t * qh, const T & table, vi * lv) {
        lattice_parts<I>(e, lv);
        vi delta[128 / I::kBytes];
        lattice_dec<I, B, 9, kPer16>::signs_from(_mm_loadl_epi64((const __m128i *) qh), table, delta);
        for (int j = 0; j < 128 / I::kBytes; ++j) {
            const vi g2 = I::add8(lv[j], lv[j]), g4 = I::add8(g2, g2);
            lv[j] = I::add8(I::add8(g4, g4), I::or_(delta[j], I::set8(1)));   // negative_where gives -1 / 0 or -1 / 1
        }
    }
};

// iq1_s_r4: group i of row k indexes the grid by qs[4 i + k] | (bits 3 i .. 3 i + 2 of qh[k]) << 8;
// the block scale ls in bits 12..14 of qh[k] (dl = 2 ls + 1)
template <typename I>
struct iq1_s_r4_dec : iq1_dec<I, iq1_s_r4_block, false> {
    using base = iq1_dec<I, iq1_s_r4_block, false>;
    static void begin(const iq1_s_r4_block & b, typename base::state & st) {
        const __m128i h = _mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *) b.qh));
        const __m128i ls = _mm_and_si128(_mm_srli_epi32(h, 12), _mm_set1_epi32(7));
        const __m128i odd = _mm_add_epi32(_mm_add_epi32(ls, ls), _mm_set1_epi32(1));
        _mm_store_si128((__m128i *) st.s, _mm_or_si128(odd, _mm_slli_epi32(odd, 16)));
    }
    static void levels(const iq1_s_r4_block & b, int, typename I::vi * lv) {
        uint64_t e[4][4];
        for (int k = 0; k < 4; ++k) {
            const uint32_t h = b.qh[k];
            for (int i = 0; i < 4; ++i) e[k][i] = ggml_iq::iq1s_grid[b.qs[4 * i + k] | ((h >> 3 * i) & 7) << 8];
        }
        base::levels_from(e, (const uint8_t *) b.qh, kIq1sDeltas<I::kBytes>, lv);
    }
};

// iq1_m_r4: group 2 h + j of row k indexes the grid by qs[8 h + 4 j + k] | (bits 4 j .. 4 j + 2 of
// qh[4 h + k]) << 8; nibble h of scales[k] scales half h
template <typename I>
struct iq1_m_r4_dec : iq1_dec<I, iq1_m_r4_block, true> {
    using base = iq1_dec<I, iq1_m_r4_block, true>;
    static void begin(const iq1_m_r4_block & b, typename base::state & st) {
        const __m128i x = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(*(const int32_t *) b.scales)), m4 = _mm_set1_epi32(15);
        const __m128i lo = _mm_and_si128(x, m4), hi = _mm_srli_epi32(x, 4);
        _mm_store_si128((__m128i *) st.s, _mm_or_si128(lo, _mm_slli_epi32(lo, 16)));
        _mm_store_si128((__m128i *) (st.s + 4), _mm_or_si128(hi, _mm_slli_epi32(hi, 16)));
    }
    static void levels(const iq1_m_r4_block & b, int, typename I::vi * lv) {
        uint64_t e[4][4];
        for (int k = 0; k < 4; ++k) {
            for (int i = 0; i < 4; ++i) {
                const int h = i / 2, j = i % 2;
                e[k][i] = ggml_iq::iq1s_grid[b.qs[8 * h + 4 * j + k] | ((b.qh[4 * h + k] >> 4 * j) & 7) << 8];
            }
        }
        base::levels_from(e, b.qh, kIq1mDeltas<I::kBytes>, lv);
    }
};

} // namespace r4k_gemv
} // namespace
