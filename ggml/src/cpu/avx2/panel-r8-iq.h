// Group decoders (panel-r8.h) of the interleaved lattice i-quants: iq2_xxs_r4, iq2_xs_r4,
// iq2_s_r4, iq3_xxs_r4, iq3_s_r4 (activations q8_K, as for the plain twins).
//
// Their values come from grid tables (8 values per index for iq2, 4 for iq3) with separate sign
// bits, so there is no vector decode of a whole run: each row's grid entries are signed in a
// 64-bit register (kSignMasks, as the plain kernels do) and stored as 4-byte quarters straight
// into lane r of the record's vectors (but iq3_s_r4, whose plain sign bits and 4-value entries
// let one gather and a byte mask decode a quarter of all 8 rows). The woven layout still pays: the 8 rows of a record come
// from two contiguous groups, and the panel multiplies them with no transpose. The levels are
// offset as grid_traits says: at AVX2 by the grid's largest magnitude, as the plain twins' (so
// the products run the twins' micro kernel; signed, iq3_s_r4 took 175 CPU ms against iq3_s's
// 116 at K = M = 4096, 512 columns, one thread).
#pragma once

#include "avx2/panel-iq-index.h"
#include "avx2/panel-r8.h"
#include "quants/quants-iq.h"

namespace {
namespace kiln_panel {

// Quarter (4 values) with the signs of bits 0..3 of `signs` at p, plus kOffset (grid_traits).
// Grid magnitudes are never 0, so negating a byte never carries into the next; q + 128 is
// q ^ 0x80, and from there q + M (M <= 128) borrows from no byte, since q >= -M.
template <int kOffset>
inline void put_quarter(uint8_t * p, uint32_t magnitudes, uint32_t signs) {
    const uint32_t m = (uint32_t) ggml_iq::kSignMasks[signs & 15];
    uint32_t v = (magnitudes ^ m) + (m & 0x01010101u);
    if constexpr (kOffset != 0) v = (v ^ 0x80808080u) - (uint32_t) (128 - kOffset) * 0x01010101u;
    std::memcpy(p, &v, 4);
}

// 8 values (quarters 2 i, 2 i + 1 of the sub-block) with 8 sign bits.
template <int kOffset>
inline void put_eight(uint8_t * p, size_t vs, int i, uint64_t magnitudes, uint32_t signs) {
    put_quarter<kOffset>(p + 2 * i * vs, (uint32_t) magnitudes, signs);
    put_quarter<kOffset>(p + (2 * i + 1) * vs, (uint32_t) (magnitudes >> 32), signs >> 4);
}

inline uint32_t load_u32(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// The shared decode: Rows::row(block, k, j, p, vs) writes row k's sub-block j into lane p and
// returns its scale in units of the row's fp16 d. Levels offset as grid_traits says: at AVX2 by
// the grid's largest magnitude, that of the plain twin's grid (lattice_row, panel-iq-index.h).
template <typename Rows, typename RBlock, typename Twin, int kSubValues, bool kSigned>
struct lattice_group : grid_traits<RBlock, 4, kSubValues, QK_K, kSigned, lattice_row<Twin>.max_magnitude> {
    KILN_GROUP_DECODE decode(const RBlock * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        constexpr int kOffset = lattice_group::kOffset;
        alignas(32) float s[8];
        for (int r = 0; r < 8; ++r) s[r] = Rows::template row<kOffset>(*blk[r / 4], r % 4, j, out + 4 * r, vs);
        store_grid_coefs<kOffset>(_mm256_mul_ps(fp16x4x2(blk[0]->d, blk[1]->d), _mm256_load_ps(s)), scale, bias);
    }
};

// iq2_xxs_r4: per 32-value sub-block ib, row k's grid indices at qs[16 ib + 4 k + i] and its sas
// word (scrambled signs, 4-bit scale) at sas[4 (4 ib + k)]; a value is d (2 s + 1) / 8 grid.
struct rows_iq2_xxs_r4 {
    template <int kOffset>
    static inline float row(const iq2_xxs_r4_block & b, int k, int ib, uint8_t * p, size_t vs) {
        const uint32_t sas = load_u32(b.sas + 4 * (4 * ib + k));
        for (int i = 0; i < 4; ++i) {
            put_eight<kOffset>(p, vs, i, ggml_iq::iq2xxs_grid[b.qs[16 * ib + 4 * k + i]], unscramble_signs((uint8_t) ((sas >> (8 * i + 1)) & 127)));
        }
        return 0.125f * (float) (2 * r4_sas_scale(sas) + 1);
    }
};

// iq2_xs_r4 / iq2_s_r4: 16-value sub-blocks j = 2 ib + half; row k's two 4-bit scales in
// scales[4 ib + k] (one per half); its 8-value group i of sub-block ib: iq2_xs_r4 a 9-bit index
// and scrambled signs in qs[16 ib + 4 k + i], iq2_s_r4 an index byte there plus 2 high bits in
// qh[4 ib + k] (bits 2 i) and plain signs in signs[16 ib + 4 k + i].
inline float iq2_half_scale(uint8_t sc, int half) { return 0.125f * (float) (2 * ((sc >> 4 * half) & 0xF) + 1); }

struct rows_iq2_xs_r4 {
    template <int kOffset>
    static inline float row(const iq2_xs_r4_block & b, int k, int j, uint8_t * p, size_t vs) {
        const int ib = j / 2, half = j % 2;
        for (int t = 0; t < 2; ++t) {
            const uint16_t q = b.qs[16 * ib + 4 * k + 2 * half + t];
            put_eight<kOffset>(p, vs, t, ggml_iq::iq2xs_grid[q & 511], unscramble_signs((uint8_t) (q >> 9)));
        }
        return iq2_half_scale(b.scales[4 * ib + k], half);
    }
};

struct rows_iq2_s_r4 {
    template <int kOffset>
    static inline float row(const iq2_s_r4_block & b, int k, int j, uint8_t * p, size_t vs) {
        const int ib = j / 2, half = j % 2;
        for (int t = 0; t < 2; ++t) {
            const int i = 2 * half + t;
            const int idx = b.qs[16 * ib + 4 * k + i] | ((b.qh[4 * ib + k] << (8 - 2 * i)) & 0x300);
            put_eight<kOffset>(p, vs, t, ggml_iq::iq2s_grid[idx], b.signs[16 * ib + 4 * k + i]);
        }
        return iq2_half_scale(b.scales[4 * ib + k], half);
    }
};

// iq3_xxs_r4: row k's 4-value grid indices at qs[32 ib + 8 k + i] (one quarter each), its sas
// word as iq2_xxs_r4's (byte l: the signs of quarters 2 l, 2 l + 1); a value is d (2 s + 1) / 4 grid.
struct rows_iq3_xxs_r4 {
    template <int kOffset>
    static inline float row(const iq3_xxs_r4_block & b, int k, int ib, uint8_t * p, size_t vs) {
        const uint32_t sas = load_u32(b.sas + 4 * (4 * ib + k));
        const uint8_t * q = b.qs + 32 * ib + 8 * k;
        for (int l = 0; l < 4; ++l) {
            const uint32_t signs = unscramble_signs((uint8_t) ((sas >> (8 * l + 1)) & 127));
            put_quarter<kOffset>(p + 2 * l * vs, ggml_iq::iq3xxs_grid[q[2 * l]], signs);
            put_quarter<kOffset>(p + (2 * l + 1) * vs, ggml_iq::iq3xxs_grid[q[2 * l + 1]], signs >> 4);
        }
        return 0.25f * (float) (2 * r4_sas_scale(sas) + 1);
    }
};

// iq3_s_r4: row k's quarter g index byte at qs[32 ib + k + 8 (g % 4) + 4 (g / 4)], its ninth bit
// bit g of qh[4 ib + k]; the sign of value v of quarter g is bit g of signs[16 ib + 4 k + v];
// the 4-bit scale of slot l = 4 ib + k is nibble l / 16 of scales[l % 16]; a value is d (2 s + 1) grid.
// The 8 rows at once, as the plain iq3_s decoder does (panel-iq.h): per quarter one gather of
// their grid entries, the sign bits of their values (bit g of each row's 4 sign bytes) as a byte
// mask. Row by row (a table load and scalar sign work per quarter) the packing was 1.1% of a
// 512-column product's profile against iq3_s's 0.4%.
template <bool kSigned>
struct grp_iq3_s_r4 : grid_traits<iq3_s_r4_block, 4, 32, QK_K, kSigned, lattice_row<ggml_iq::block_iq3_s>.max_magnitude> {
    KILN_GROUP_DECODE decode(const iq3_s_r4_block * const * blk, int ib, uint8_t * out, size_t vs, float * scale, float * bias) {
        constexpr int kOffset = grp_iq3_s_r4::kOffset;
        const iq3_s_r4_block * a = blk[0], * b = blk[1];
        const int l0 = 4 * ib;   // the slots of rows 0..3: 4 bytes from scales[l0 % 16], nibble l0 / 16
        const __m256i s = _mm256_and_si256(_mm256_srl_epi32(pair4_epu8(a->scales + l0 % 16, b->scales + l0 % 16), _mm_cvtsi32_si128(4 * (l0 / 16))),
                                           _mm256_set1_epi32(0xF));
        const __m256i odd = _mm256_add_epi32(_mm256_add_epi32(s, s), _mm256_set1_epi32(1));
        store_grid_coefs<kOffset>(_mm256_mul_ps(fp16x4x2(a->d, b->d), _mm256_cvtepi32_ps(odd)), scale, bias);
        const __m256i qh = pair4_epu8(a->qh + 4 * ib, b->qh + 4 * ib);
        const __m256i signs = pair16(a->signs + 16 * ib, b->signs + 16 * ib);   // lane r: row r's 4 sign bytes
        for (int g = 0; g < 8; ++g) {
            const int at = 32 * ib + 8 * (g % 4) + 4 * (g / 4);
            const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, g), _mm256_set1_epi32(1)), 8);
            const __m256i idx = _mm256_or_si256(pair4_epu8(a->qs + at, b->qs + at), hi);
            const __m256i m = _mm256_i32gather_epi32((const int *) ggml_iq::iq3s_grid, idx, 4);
            const __m256i bit = _mm256_set1_epi8((char) (1 << g));
            const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(signs, bit), bit);
            store_offset_levels<kOffset>(out + g * vs, _mm256_sub_epi8(_mm256_xor_si256(m, neg), neg));
        }
    }
};

template <bool kSigned> using grp_iq2_xxs_r4 = lattice_group<rows_iq2_xxs_r4, iq2_xxs_r4_block, ggml_iq::block_iq2_xxs, 32, kSigned>;
template <bool kSigned> using grp_iq2_xs_r4 = lattice_group<rows_iq2_xs_r4, iq2_xs_r4_block, ggml_iq::block_iq2_xs, 16, kSigned>;
template <bool kSigned> using grp_iq2_s_r4 = lattice_group<rows_iq2_s_r4, iq2_s_r4_block, ggml_iq::block_iq2_s, 16, kSigned>;
template <bool kSigned> using grp_iq3_xxs_r4 = lattice_group<rows_iq3_xxs_r4, iq3_xxs_r4_block, ggml_iq::block_iq3_xxs, 32, kSigned>;

} // namespace kiln_panel
} // namespace
