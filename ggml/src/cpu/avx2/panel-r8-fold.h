// AVX2 batches of the interleaved non-linear ik layouts (iq2_k_r4 .. iq5_ks_r4) and iq4_xs_r8
// with the records of their plain twins' batch kernels: whole 256-value super-blocks whose
// integer sub-block scales are multiplied into int16 levels (kFolded, avx2/panel.h), so that a
// super-block's products stay in int32 and become float once per 256 values.
//
// Why: the group decoders (panel-r8-iqk.h) give per 16 or 32 values a float scale, and the panel
// then converts and scales the int32 sums of every sub-block for every column: as many float
// steps as 4 (16-value sub-blocks) or 8 steps of products. At K = M = 4096, 512 columns, one
// thread, the layouts took 171-175 CPU ms against their twins' 153-155.
//
// How: pack_groups makes the group decoders' byte records (rows in lanes, 4 values a step), with
// the integer scales and the rows' d in the places of the float scales and biases
// (int_scale_records); each super-block's records are then widened to int16 in the row order
// of sub_dots_wide and multiplied by their scales, as pack_weights does for the twins. AVX2 only
// (the AVX512 panel has no folded records); included by avx2/quants-interleaved.cpp.
#pragma once

#include "avx2/panel-r8-iqk.h"

namespace {
namespace kiln_panel {

// G's byte records with the integer scales (as floats: exact) in place of the float scales and
// the rows' d in place of the biases (G::decode_int: panel-r8-iqk.h).
template <typename G>
struct int_scale_records : G {
    using Block = typename G::Block;
    using RowScale = typename row_scale_of<G>::type;
    static constexpr int kMaxLevel = 255;   // any level bound: records of bytes in row order (not wide_x)
    KILN_GROUP_DECODE decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        store(G::decode_int(blk, j, out, vs), scale, bias);
    }
    KILN_GROUP_DECODE decode(const Block * const * blk, const RowScale * const * rs, int j, uint8_t * out, size_t vs, float * scale,
                             float * bias) {
        store(G::decode_int(blk, rs, j, out, vs), scale, bias);
    }
    static inline void store(const int_coefs & c, float * scale, float * bias) {
        _mm256_storeu_ps(scale, _mm256_cvtepi32_ps(c.sc));
        _mm256_storeu_ps(bias, c.d);
    }
};

// The group decoder of a batch: G's levels and scales as the twins' folded records, one record
// per super-block (kSub == kBlockValues == 256), no bias. It packs its records itself (pack,
// called by gemm_r8 in place of pack_groups).
template <typename G>
struct folded_groups {
    using Block = typename G::Block;
    static constexpr int kR = G::kR, kSub = QK_K, kChunk = QK_K, kSubs = 1, kBlockValues = QK_K, kMaxLevel = 0;
    static constexpr bool kBias = false, kFolded = true;
    static_assert(G::kBlockValues == QK_K && G::kMaxLevel == 0 && QK_K % G::kSub == 0, "super-blocks of signed levels");

    // pack_groups' arguments: blocks b0 .. b1 - 1 of the kRows rows from row0 (rows of them real).
    static void pack(const uint8_t * w, size_t w_stride, int64_t row0, int rows, int64_t n, int64_t b0, int64_t b1, uint8_t * out) {
        constexpr int S = G::kSub, NS = QK_K / S;
        constexpr size_t brec = w_record<S>, frec = w_record_of<folded_groups>;
        static_assert(frec == (QK_K / 4) * 64 + 64, "folded record: int16 steps, then scales and biases");
        // the byte records of the slab (a few KB per super-block; this scratch is otherwise used
        // only by AVX512 kernels, never inside an AVX2 call)
        auto * tmp = (uint8_t *) ggml_cpu_kernel_scratch(GGML_CPU_SCRATCH_PLAIN, (size_t) (b1 - b0) * NS * brec);
        pack_groups<int_scale_records<G>>(w, w_stride, row0, rows, n, b0, b1, tmp);
        // per 4-value step: rows 0, 2, 4, 6 widened, then 1, 3, 5, 7 (sub_dots_wide), each row's
        // 4 int16 times its scale: the scales' dwords as int16 pairs, spread to match
        const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
        const __m256i even = _mm256_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6), odd = _mm256_setr_epi32(1, 1, 3, 3, 5, 5, 7, 7);
        for (int64_t b = 0; b < b1 - b0; ++b) {
            uint8_t * o = out + b * frec;
            for (int j = 0; j < NS; ++j) {
                const uint8_t * r = tmp + (b * NS + j) * brec;
                const __m256i sc = _mm256_cvtps_epi32(_mm256_load_ps((const float *) (r + 8 * S)));
                const __m256i pairs = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));
                const __m256i m_lo = _mm256_permutevar8x32_epi32(pairs, even), m_hi = _mm256_permutevar8x32_epi32(pairs, odd);
                for (int k = 0; k < S / 4; ++k) {
                    const __m256i p = _mm256_permutevar8x32_epi32(_mm256_load_si256((const __m256i *) (r + 32 * k)), order);
                    uint8_t * q = o + (size_t) (j * (S / 4) + k) * 64;
                    _mm256_store_si256((__m256i *) q, _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(p)), m_lo));
                    _mm256_store_si256((__m256i *) (q + 32),
                                       _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(p, 1)), m_hi));
                }
            }
            // the rows' d (in the biases' place of every byte record; the first's), no biases
            float * f = (float *) (o + (QK_K / 4) * 64);
            _mm256_store_ps(f, _mm256_load_ps((const float *) (tmp + b * NS * brec + 8 * S + 32)));
            _mm256_store_ps(f + 8, _mm256_setzero_ps());
        }
    }
};

} // namespace kiln_panel
} // namespace
