// Group decoders (panel-r8.h) of iq1_s_r4 and iq1_m_r4, the 1.5- and 1.75-bit 4-row layouts
// (quants-interleaved.h). Their blocks hold 32 values of each row, so rows need not be whole
// 256-value super-blocks, and the activations are q8_0 (32-value blocks).
//
// A value is dl (g + delta), g in {-1, 0, 1} from the 11-bit iq1s grid index of its 8-value group
// and delta = +-1/8. Eight times that, 8 g + 8 delta in {-9, -7, -1, 1, 7, 9}, is a signed byte,
// so the decoders store those levels with scale dl / 8, offset (grid_traits) by 9 into 0 .. 18
// at AVX2 (vpmaddubsw then sums four steps in int16, as for the plain iq1_s / iq1_m) or by 128
// at AVX512, the bias -offset * scale: the panel product is exact in integers, as for the other grids. Per sub-block the 8 rows' grid entries come from one
// gather per 4 rows; lanes are rows, so a 64-bit entry (two quarters of a row) is split into the
// two quarter vectors by a dword permute.
#pragma once

#include "avx2/panel-iq-index.h"
#include "avx2/panel-r8.h"
#include "quants/quants-iq.h"

namespace {
namespace kiln_panel {

// The two quarter vectors (values 8 i .. 8 i + 3 and 8 i + 4 .. 8 i + 7 of rows 0..7) of the grid
// entries idx (8 int32 lanes, one per row), each byte 8 g + delta (delta8: +-1 in every byte of
// a lane).
inline void iq1_quarters(__m256i idx, __m256i delta8, __m256i & lo, __m256i & hi) {
    const auto * grid = (const long long *) ggml_iq::iq1s_grid;
    const __m256i a = _mm256_i32gather_epi64(grid, _mm256_castsi256_si128(idx), 8);        // rows 0..3
    const __m256i b = _mm256_i32gather_epi64(grid, _mm256_extracti128_si256(idx, 1), 8);   // rows 4..7
    const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i pa = _mm256_permutevar8x32_epi32(a, order), pb = _mm256_permutevar8x32_epi32(b, order);
    // g * 8 per byte: the 16-bit shift moves bits of a byte's neighbour in only below bit 3
    const __m256i m = _mm256_set1_epi8((char) 0xF8);
    lo = _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(_mm256_permute2x128_si256(pa, pb, 0x20), 3), m), delta8);
    hi = _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(_mm256_permute2x128_si256(pa, pb, 0x31), 3), m), delta8);
}

// +-1 in every byte of lanes whose `bit` of v is clear / set.
inline __m256i iq1_delta8(__m256i v, int bit) {
    const __m256i neg = _mm256_srai_epi32(_mm256_sll_epi32(v, _mm_cvtsi32_si128(31 - bit)), 31);
    return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

// The 4 fp16 row scales of two groups over 8, as 8 floats.
inline __m256 iq1_row_scales(const ggml_fp16_t * const * rs) { return _mm256_mul_ps(fp16x4x2(rs[0], rs[1]), _mm256_set1_ps(0.125f)); }

// iq1_s_r4: one 32-value sub-block per block; row k's qh[k] holds the high index bits 3 i .. 3 i + 2
// of group i, the 3-bit scale ls in bits 12..14 (dl = d (2 ls + 1)) and the delta sign in bit 15.
template <bool kSigned>
struct grp_iq1_s_r4 : grid_traits<iq1_s_r4_block, 4, 32, 32, kSigned, lattice_row<ggml_iq::block_iq1_s>.max_magnitude> {
    static constexpr bool kRowScales = true;
    using RowScale = ggml_fp16_t;
    KILN_GROUP_DECODE decode(const iq1_s_r4_block * const * blk, const ggml_fp16_t * const * rs, int, uint8_t * out,
                             size_t vs, float * scale, float * bias) {
        const iq1_s_r4_block * a = blk[0], * b = blk[1];
        int64_t ha, hb;
        std::memcpy(&ha, a->qh, 8);
        std::memcpy(&hb, b->qh, 8);
        const __m256i qh = _mm256_cvtepu16_epi32(_mm_unpacklo_epi64(_mm_cvtsi64_si128(ha), _mm_cvtsi64_si128(hb)));
        const __m256i ls = _mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7));
        const __m256i odd = _mm256_add_epi32(_mm256_add_epi32(ls, ls), _mm256_set1_epi32(1));
        store_grid_coefs<grp_iq1_s_r4::kOffset>(_mm256_mul_ps(iq1_row_scales(rs), _mm256_cvtepi32_ps(odd)), scale, bias);
        const __m256i delta8 = iq1_delta8(qh, 15);
        for (int i = 0; i < 4; ++i) {
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(qh, 3 * i), _mm256_set1_epi32(7));
            const __m256i idx = _mm256_or_si256(pair4_epu8(a->qs + 4 * i, b->qs + 4 * i), _mm256_slli_epi32(hi, 8));
            __m256i lo_q, hi_q;
            iq1_quarters(idx, delta8, lo_q, hi_q);
            store_offset_levels<grp_iq1_s_r4::kOffset>(out + 2 * i * vs, lo_q);
            store_offset_levels<grp_iq1_s_r4::kOffset>(out + (2 * i + 1) * vs, hi_q);
        }
    }
};

// iq1_m_r4: two 16-value sub-blocks per block; in half j, qs[8 j + k] and qs[8 j + 4 + k] index
// row k's two groups, qh[4 j + k] holds their high bits (bits 0..2, 4..6) and delta signs (bits
// 3, 7), and the 4-bit nibble j of scales[k] is the scale (dl = d s).
template <bool kSigned>
struct grp_iq1_m_r4 : grid_traits<iq1_m_r4_block, 4, 16, 32, kSigned, lattice_row<ggml_iq::block_iq1_m>.max_magnitude> {
    static constexpr bool kRowScales = true;
    using RowScale = ggml_fp16_t;
    KILN_GROUP_DECODE decode(const iq1_m_r4_block * const * blk, const ggml_fp16_t * const * rs, int j, uint8_t * out,
                             size_t vs, float * scale, float * bias) {
        const iq1_m_r4_block * a = blk[0], * b = blk[1];
        const __m256i s = _mm256_and_si256(_mm256_srli_epi32(pair4_epu8(a->scales, b->scales), 4 * j), _mm256_set1_epi32(15));
        store_grid_coefs<grp_iq1_m_r4::kOffset>(_mm256_mul_ps(iq1_row_scales(rs), _mm256_cvtepi32_ps(s)), scale, bias);
        const __m256i qh = pair4_epu8(a->qh + 4 * j, b->qh + 4 * j);
        for (int g = 0; g < 2; ++g) {
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(qh, 4 * g), _mm256_set1_epi32(7));
            const __m256i idx = _mm256_or_si256(pair4_epu8(a->qs + 8 * j + 4 * g, b->qs + 8 * j + 4 * g), _mm256_slli_epi32(hi, 8));
            __m256i lo_q, hi_q;
            iq1_quarters(idx, iq1_delta8(qh, 4 * g + 3), lo_q, hi_q);
            store_offset_levels<grp_iq1_m_r4::kOffset>(out + 2 * g * vs, lo_q);
            store_offset_levels<grp_iq1_m_r4::kOffset>(out + (2 * g + 1) * vs, hi_q);
        }
    }
};

} // namespace kiln_panel
} // namespace
