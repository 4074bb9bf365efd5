// Group decoders (panel-r8.h) of the interleaved 32-value-block layouts: q4_0_r8, mxfp4_r8,
// q8_0_r8, iq4_nl_r4, q5_0_r4, q6_0_r4 (activations q8_0, as for the plain twins), q8_KV_r8
// (q8_0: its twin has no integer product), and the 8-bit super-block layouts q8_k_r8 / q8_k_r16
// (q8_K).
#pragma once

#include "avx2/panel-r8.h"

namespace {
namespace kiln_panel {

// q8_0_r8: qs run k holds values 4k..4k+3 of the 8 rows, all 8 runs in order.
template <bool kSigned>
struct grp_q8_0_r8 : grid_traits<q8_0_r8_block, 8, 32, 32, kSigned> {
    KILN_GROUP_DECODE decode(const q8_0_r8_block * const * blk, int, uint8_t * out, size_t vs, float * scale, float * bias) {
        const q8_0_r8_block * b = blk[0];
        store_signed_coefs<kSigned>(fp16x8(b->d), scale, bias);
        for (int k = 0; k < 8; ++k) store_levels<kSigned>(out + k * vs, _mm256_loadu_si256((const __m256i *) (b->qs + 32 * k)));
    }
};

// q8_k_r8: one fp16 scale per row and 256 values; run k (32 bytes) holds values 4k..4k+3 of the
// 8 rows, so sub-block j (32 values) is runs 8j .. 8j + 7 with the block's scales.
template <bool kSigned>
struct grp_q8_k_r8 : grid_traits<q8_k_r8_block, 8, 32, QK_K, kSigned> {
    KILN_GROUP_DECODE decode(const q8_k_r8_block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        const q8_k_r8_block * b = blk[0];
        store_signed_coefs<kSigned>(fp16x8(b->d), scale, bias);
        for (int k = 0; k < 8; ++k) {
            store_levels<kSigned>(out + k * vs, _mm256_loadu_si256((const __m256i *) (b->qs + 256 * j + 32 * k)));
        }
    }
};

// q8_k_r16: as q8_k_r8 with 16 rows per run (64 bytes: rows 0..7, then 8..15), each int8 stored
// plus 128; `half` picks the 8 rows.
template <bool kSigned>
struct grp_q8_k_r16 : grid_traits<q8_k_r16_block, 16, 32, QK_K, kSigned> {
    KILN_GROUP_DECODE decode(const q8_k_r16_block * const * blk, int half, int j, uint8_t * out, size_t vs, float * scale,
                             float * bias) {
        const q8_k_r16_block * b = blk[0];
        store_signed_coefs<kSigned>(fp16x8(b->d + 8 * half), scale, bias);
        const __m256i flip = _mm256_set1_epi8((char) 0x80);
        for (int k = 0; k < 8; ++k) {
            const __m256i u = _mm256_loadu_si256((const __m256i *) (b->qs + 512 * j + 64 * k + 32 * half));
            store_levels<kSigned>(out + k * vs, _mm256_xor_si256(u, flip));
        }
    }
};

// q4_0_r8: run l (0..3) holds values 4l..4l+3 of the 8 rows in its low nibbles and values
// 16+4l.. in its high nibbles; a value is d * (level - 8).
struct grp_q4_0_r8 : group_traits<q4_0_r8_block, 8, 32, 32, 15, true> {
    static constexpr int kLevelOffset = 8;   // the bias is only that (folded on AVX512, like q4_0's)
    KILN_GROUP_DECODE decode(const Block * const * blk, int, uint8_t * out, size_t vs, float * scale, float * bias) {
        const Block * b = blk[0];
        store_offset_coefs(fp16x8(b->d), -8.0f, scale, bias);
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (int l = 0; l < 4; ++l) {
            const __m256i v = _mm256_loadu_si256((const __m256i *) (b->qs + 32 * l));
            _mm256_store_si256((__m256i *) (out + l * vs), _mm256_and_si256(v, m4));
            _mm256_store_si256((__m256i *) (out + (4 + l) * vs), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        }
    }
};

// mxfp4_r8: q4_0_r8's runs of 4-bit indices into the fp4 values (kvalues_mxfp4, twice the e2m1
// value), under e8m0 row exponents; a value is 2^(e - 128) * table[index] (e8m0_to_fp32_half).
alignas(16) constexpr int8_t kMxfp4Grid[16] = KILN_MXFP4_VALUES;
inline __m256 e8m0_half_x8(const uint8_t * e) {
    int64_t v;
    std::memcpy(&v, e, 8);
    const __m256i x = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v));
    // exponents 0 and 1 give subnormals 2^-128, 2^-127: the bit 2^21 << e
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(x, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), x);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), x)));
}

template <bool kSigned>
struct grp_mxfp4_r8 : grid_traits<mxfp4_r8_block, 8, 32, 32, kSigned> {
    KILN_GROUP_DECODE decode(const mxfp4_r8_block * const * blk, int, uint8_t * out, size_t vs, float * scale, float * bias) {
        const mxfp4_r8_block * b = blk[0];
        store_signed_coefs<kSigned>(e8m0_half_x8(b->e), scale, bias);
        const __m256i table = grid16(kMxfp4Grid), m4 = _mm256_set1_epi8(0x0F);
        for (int l = 0; l < 4; ++l) {
            const __m256i v = _mm256_loadu_si256((const __m256i *) (b->qs + 32 * l));
            store_levels<kSigned>(out + l * vs, _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4)));
            store_levels<kSigned>(out + (4 + l) * vs, _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4)));
        }
    }
};

// iq4_nl_r4: 4-bit indices into the iq4_nl grid in the r4 nibble runs; a value is d * grid[index].
template <bool kSigned>
struct grp_iq4_nl_r4 : grid_traits<iq4_nl_r4_block, 4, 32, 32, kSigned> {
    KILN_GROUP_DECODE decode(const iq4_nl_r4_block * const * blk, int, uint8_t * out, size_t vs, float * scale, float * bias) {
        store_signed_coefs<kSigned>(fp16x4x2(blk[0]->d, blk[1]->d), scale, bias);
        const __m256i table = grid16(kIq4Grid);
        __m256i q[8];
        r4_nibbles(blk[0]->qs, blk[1]->qs, q);
        for (int k = 0; k < 8; ++k) store_levels<kSigned>(out + k * vs, _mm256_shuffle_epi8(table, q[k]));
    }
};

// q5_0_r4 / q6_0_r4: r4 nibble runs plus the top bits, whose byte of row k and position p % 4
// is 4 k + p % 4 of a 16-byte run (the same shape as a quarter): q5_0_r4's fifth bit of quarter
// Q at bit q5_0_r4_hbit, q6_0_r4's two bits in run Q / 4 at bit 2 (Q % 4). A value is
// d * (level - 16) or d * (level - 32).
struct grp_q5_0_r4 : group_traits<q5_0_r4_block, 4, 32, 32, 31, true> {
    static constexpr int kLevelOffset = 16;   // the bias is only that (folded on AVX512, like q5_0's)
    KILN_GROUP_DECODE decode(const Block * const * blk, int, uint8_t * out, size_t vs, float * scale, float * bias) {
        store_offset_coefs(fp16x4x2(blk[0]->d, blk[1]->d), -16.0f, scale, bias);
        __m256i q[8];
        r4_nibbles(blk[0]->qs, blk[1]->qs, q);
        const __m256i h = pair16(blk[0]->qh, blk[1]->qh);
        for (int k = 0; k < 8; ++k) {
            _mm256_store_si256((__m256i *) (out + k * vs), _mm256_or_si256(q[k], move_bits<1>(h, q5_0_r4_hbit(4 * k), 4)));
        }
    }
};

struct grp_q6_0_r4 : group_traits<q6_0_r4_block, 4, 32, 32, 63, true> {
    static constexpr int kLevelOffset = 32;   // the bias is only that (folded on AVX512, like q6_0's)
    KILN_GROUP_DECODE decode(const Block * const * blk, int, uint8_t * out, size_t vs, float * scale, float * bias) {
        store_offset_coefs(fp16x4x2(blk[0]->d, blk[1]->d), -32.0f, scale, bias);
        __m256i q[8];
        r4_nibbles(blk[0]->qs, blk[1]->qs, q);
        const __m256i h[2] = { pair16(blk[0]->qh, blk[1]->qh), pair16(blk[0]->qh + 16, blk[1]->qh + 16) };
        for (int k = 0; k < 8; ++k) {
            const __m256i top = move_bits<2>(h[q6_0_r4_hoff(4 * k) / 16], q6_0_r4_hshift(4 * k), 4);
            _mm256_store_si256((__m256i *) (out + k * vs), _mm256_or_si256(q[k], top));
        }
    }
};

} // namespace kiln_panel
} // namespace
