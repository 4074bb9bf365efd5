// Products of the row-interleaved layouts q4_0_r8, q8_0_r8, iq4_xs_r8, q4_k_r4 and q6_k_r4 on the panel
// gemms, read from their woven blocks directly: no unweaving back to the plain rows.
//
// Why it is cheap: these layouts already hold, per run of 32 (r8) or 16 (r4) bytes, 4
// consecutive values of each row of a group, which is one panel vector [row 0..7][4 levels]
// (two r4 runs side by side). Decoding is therefore a handful of loads (q8_0_r8), nibble splits
// (q4_0_r8, q4_k_r4) or one table lookup (iq4_xs_r8) per vector, with no transpose; an AVX512
// panel (16 lanes) takes two such 8-lane decodes. The fp16 row scales of an r8 block arrive as
// one 8-wide conversion.
//
// Batches pack all their row groups once per call (like the plain types) and run the shared
// column tiles. Few columns (token generation) decode 256-value slices of one row group into L1
// and multiply them with every column right away, so the weights are read from memory once.
//
// Included by each ISA folder after its panel.h (it uses that panel's kRows, kCols, records and
// micro kernel); the code here is AVX2 + F16C, valid in both folders.
#pragma once

#include "quants/quants-interleaved.h"

#include <algorithm>
#include <cstring>

namespace {
namespace kiln_panel {

// Group decoder concept G (on top of the panel decoder's kSub / kMaxLevel / kBias):
//   Block, kR, kBlockValues  the woven block of one group of kR (4 or 8) rows and how many
//                            values of each row it holds;
//   kSubs                    sub-blocks (kSub values each) per block;
//   decode(blocks, j, out, vs, scale, bias): sub-block j of 8 rows (blocks[0 .. 8 / kR - 1], one
//   per group; nullptr: rows past the end, decoded as zeros) -> kSub / 4 vectors of 32 bytes
//   ([row 0..7][4 levels], natural value order) at out + k * vs, 8 scales and 8 biases.

inline __m256 fp16x8(const ggml_fp16_t * h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) h)); }

// q8_0_r8: qs run k holds values 4k..4k+3 of the 8 rows, all 8 runs in order.
template <bool kSigned>
struct grp_q8_0_r8 {
    using Block = q8_0_r8_block;
    static constexpr int kR = 8, kSub = 32, kSubs = 1, kBlockValues = 32;
    static constexpr int kMaxLevel = kSigned ? 0 : 255;
    static constexpr bool kBias = !kSigned;
    static void decode(const Block * const * blk, int, uint8_t * out, size_t vs, float * scale, float * bias) {
        const Block * b = blk[0];
        const __m256 d = fp16x8(b->d);
        _mm256_storeu_ps(scale, d);
        _mm256_storeu_ps(bias, kSigned ? _mm256_setzero_ps() : _mm256_mul_ps(d, _mm256_set1_ps(-128.0f)));
        const __m256i flip = _mm256_set1_epi8(kSigned ? 0 : (char) 0x80);
        for (int k = 0; k < 8; ++k) {
            const __m256i v = _mm256_loadu_si256((const __m256i *) (b->qs + 32 * k));
            _mm256_store_si256((__m256i *) (out + k * vs), _mm256_xor_si256(v, flip));
        }
    }
};

// q4_0_r8: run l (0..3) holds values 4l..4l+3 of the 8 rows in its low nibbles and values
// 16+4l.. in its high nibbles; a value is d * (level - 8).
struct grp_q4_0_r8 {
    using Block = q4_0_r8_block;
    static constexpr int kR = 8, kSub = 32, kSubs = 1, kBlockValues = 32;
    static constexpr int kMaxLevel = 15;
    static constexpr bool kBias = true;
    static void decode(const Block * const * blk, int, uint8_t * out, size_t vs, float * scale, float * bias) {
        const Block * b = blk[0];
        const __m256 d = fp16x8(b->d);
        _mm256_storeu_ps(scale, d);
        _mm256_storeu_ps(bias, _mm256_mul_ps(d, _mm256_set1_ps(-8.0f)));
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (int l = 0; l < 4; ++l) {
            const __m256i v = _mm256_loadu_si256((const __m256i *) (b->qs + 32 * l));
            _mm256_store_si256((__m256i *) (out + l * vs), _mm256_and_si256(v, m4));
            _mm256_store_si256((__m256i *) (out + (4 + l) * vs), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        }
    }
};

// iq4_xs_r8: per 32-value sub-block j, run l (0..3) holds values 8l..8l+3 of the 8 rows in its
// low nibbles and 8l+4.. in its high nibbles, as indices into the iq4_nl table; row k's 6-bit
// scale is split_scale6 slot 8j + k (stored + 32).
template <bool kSigned>
struct grp_iq4_xs_r8 {
    using Block = iq4_xs_r8_block;
    static constexpr int kR = 8, kSub = 32, kSubs = 8, kBlockValues = QK_K;
    static constexpr int kMaxLevel = kSigned ? 0 : 255;
    static constexpr bool kBias = !kSigned;
    static void decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        const Block * b = blk[0];
        // split_scale6 slots 8j .. 8j+7 at once: low nibbles from scales_l, top 2 bits from scales_h
        __m128i lo, hi;
        std::memcpy(&lo, b->scales_l + (8 * j) % 32, 8);   // only the low 8 bytes are used
        std::memcpy(&hi, b->scales_h + (8 * j) % 16, 8);
        lo = _mm_and_si128(_mm_srl_epi16(lo, _mm_cvtsi32_si128(4 * (j / 4))), _mm_set1_epi8(0x0F));
        hi = _mm_and_si128(_mm_srl_epi16(hi, _mm_cvtsi32_si128(2 * (j / 2))), _mm_set1_epi8(0x03));
        const __m128i l6 = _mm_or_si128(lo, _mm_slli_epi16(hi, 4));
        const __m256i ls = _mm256_sub_epi32(_mm256_cvtepu8_epi32(l6), _mm256_set1_epi32(32));
        const __m256 s = _mm256_mul_ps(fp16x8(b->d), _mm256_cvtepi32_ps(ls));
        _mm256_storeu_ps(scale, s);
        _mm256_storeu_ps(bias, kSigned ? _mm256_setzero_ps() : _mm256_mul_ps(s, _mm256_set1_ps(-128.0f)));
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) kvalues_iq4nl));
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        const __m256i flip = _mm256_set1_epi8(kSigned ? 0 : (char) 0x80);
        const uint8_t * qs = b->qs + 128 * j;
        for (int l = 0; l < 4; ++l) {
            const __m256i v = _mm256_loadu_si256((const __m256i *) (qs + 32 * l));
            const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
            const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            _mm256_store_si256((__m256i *) (out + (2 * l) * vs), _mm256_xor_si256(lo, flip));
            _mm256_store_si256((__m256i *) (out + (2 * l + 1) * vs), _mm256_xor_si256(hi, flip));
        }
    }
};

// q4_k_r4: two 4-row groups per 8 lanes. Per 32-value sub-block ib, the 64 bytes of a group
// hold 16-byte runs (4 values x 4 rows) of the eight quarters (values 4Q..4Q+3): bytes 0..15
// quarters 0 (low nibbles) and 2 (high), 16..31 quarters 4 and 6, 32..47 quarters 1 and 3, 48..63
// quarters 5 and 7. Row k's 6-bit scale and min of sub-block ib: slot 4 ib + k, low 4 bits in
// scales_l (scale: low nibble, min: high), top 2 in scales_h; a value is d sc u - dmin mn.
struct grp_q4_k_r4 {
    using Block = q4_k_r4_block;
    static constexpr int kR = 4, kSub = 32, kSubs = 8, kBlockValues = QK_K;
    static constexpr int kMaxLevel = 15;
    static constexpr bool kBias = true;
    static __m128i run(const Block * b, int j, int off) {
        return b ? _mm_loadu_si128((const __m128i *) (b->qs + 64 * j + off)) : _mm_setzero_si128();
    }
    static void decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        for (int q = 0; q < 2; ++q) {
            const Block * b = blk[q];
            if (!b) {
                _mm_storeu_ps(scale + 4 * q, _mm_setzero_ps());
                _mm_storeu_ps(bias + 4 * q, _mm_setzero_ps());
                continue;
            }
            // slots 4j .. 4j+3 (rows 0..3): 4 low bytes, 4 high bytes shifted by 4 (j / 4)
            int32_t lo4, hi4;
            std::memcpy(&lo4, b->scales_l + 4 * j, 4);
            std::memcpy(&hi4, b->scales_h + (4 * j) % 16, 4);
            const __m128i lo = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(lo4));
            const __m128i hi = _mm_srl_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(hi4)), _mm_cvtsi32_si128(4 * (j / 4)));
            const __m128i sc = _mm_or_si128(_mm_and_si128(lo, _mm_set1_epi32(0xF)), _mm_slli_epi32(_mm_and_si128(hi, _mm_set1_epi32(3)), 4));
            const __m128i mn = _mm_or_si128(_mm_srli_epi32(lo, 4), _mm_slli_epi32(_mm_and_si128(hi, _mm_set1_epi32(0xC)), 2));
            const __m256 dm = fp16x8(b->d);   // d of rows 0..3, then their dmin
            _mm_storeu_ps(scale + 4 * q, _mm_mul_ps(_mm256_castps256_ps128(dm), _mm_cvtepi32_ps(sc)));
            _mm_storeu_ps(bias + 4 * q, _mm_sub_ps(_mm_setzero_ps(), _mm_mul_ps(_mm256_extractf128_ps(dm, 1), _mm_cvtepi32_ps(mn))));
        }
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        // byte offset of the run pair and the quarters of its low and high nibbles
        static constexpr int kOff[4] = { 0, 16, 32, 48 }, kLo[4] = { 0, 4, 1, 5 }, kHi[4] = { 2, 6, 3, 7 };
        for (int c = 0; c < 4; ++c) {
            const __m256i v = _mm256_set_m128i(run(blk[1], j, kOff[c]), run(blk[0], j, kOff[c]));
            _mm256_store_si256((__m256i *) (out + kLo[c] * vs), _mm256_and_si256(v, m4));
            _mm256_store_si256((__m256i *) (out + kHi[c] * vs), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        }
    }
};

// q6_k_r4: two 4-row groups per 8 lanes, 16-value sub-blocks j = 2 ib + half. Low 4 bits as
// q4_k_r4's nibble runs (half 0: quarters 0..3 from the runs at 0 and 32, half 1: quarters 4..7
// from 16 and 48), the top 2 bits of quarter Q in the 16-byte run at qh + 32 ib + 16 half, at
// bit 0, 4, 2, 6 for its four quarters; row k's int8 scale at scales[8 ib + k + 4 half].
// A value is d sc (u - 32).
struct grp_q6_k_r4 {
    using Block = q6_k_r4_block;
    static constexpr int kR = 4, kSub = 16, kSubs = 16, kBlockValues = QK_K;
    static constexpr int kMaxLevel = 63;
    static constexpr bool kBias = true;
    static __m256i runs(const Block * const * blk, const uint8_t * (*at)(const Block *, int), int arg) {
        auto one = [&](const Block * b) { return b ? _mm_loadu_si128((const __m128i *) at(b, arg)) : _mm_setzero_si128(); };
        return _mm256_set_m128i(one(blk[1]), one(blk[0]));
    }
    static void decode(const Block * const * blk, int j, uint8_t * out, size_t vs, float * scale, float * bias) {
        const int ib = j / 2, half = j % 2;
        for (int q = 0; q < 2; ++q) {
            const Block * b = blk[q];
            __m128 sc = _mm_setzero_ps();
            if (b) {
                int32_t s4;
                std::memcpy(&s4, b->scales + 8 * ib + 4 * half, 4);
                const __m128 d = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) b->d));
                sc = _mm_mul_ps(d, _mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(s4))));
            }
            _mm_storeu_ps(scale + 4 * q, sc);
            _mm_storeu_ps(bias + 4 * q, _mm_mul_ps(sc, _mm_set1_ps(-32.0f)));
        }
        auto ql = [](const Block * b, int off) { return (const uint8_t *) b->ql + off; };
        auto qh = [](const Block * b, int off) { return (const uint8_t *) b->qh + off; };
        const __m256i a = runs(blk, ql, 64 * ib + 16 * half), c = runs(blk, ql, 64 * ib + 32 + 16 * half);
        const __m256i h = runs(blk, qh, 32 * ib + 16 * half);
        const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x30);
        auto top = [&](int shift) {   // bits shift, shift+1 of h moved to bits 4, 5
            return _mm256_and_si256(shift >= 4 ? _mm256_srli_epi16(h, shift - 4) : _mm256_slli_epi16(h, 4 - shift), m3);
        };
        const __m256i v[4] = { _mm256_or_si256(_mm256_and_si256(a, m4), top(0)),
                               _mm256_or_si256(_mm256_and_si256(c, m4), top(4)),
                               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), top(2)),
                               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4), top(6)) };
        for (int k = 0; k < 4; ++k) _mm256_store_si256((__m256i *) (out + k * vs), v[k]);
    }
};

// The panel records of blocks b0 .. b1 - 1 of kRows rows starting at w, 8 lanes (one decode:
// 8 / G::kR woven groups) at a time: lanes past `rows` are zero. A woven group whose rows are
// not contiguous (w_stride != the row size) is gathered first.
template <typename G>
void pack_groups(const uint8_t * w, size_t w_stride, int rows, int64_t n, int64_t b0, int64_t b1, uint8_t * out) {
    constexpr int S = G::kSub, KV = S / 4, VB = kRows * 4, R = G::kR, NG = 8 / R;
    constexpr size_t rec = w_record<S>;
    const int64_t nblocks = b1 - b0;
    const size_t row_size = (size_t) (n / G::kBlockValues) * sizeof(typename G::Block) / R;
    for (int h = 0; h < kRows / 8; ++h) {
        if (8 * h >= rows) {
            for (int64_t sb = 0; sb < nblocks * G::kSubs; ++sb) {
                uint8_t * o = out + sb * rec;
                for (int k = 0; k < KV; ++k) std::memset(o + k * VB + 32 * h, 0, 32);
                float * f = (float *) (o + KV * VB);
                std::fill(f + 8 * h, f + 8 * h + 8, 0.0f);
                std::fill(f + kRows + 8 * h, f + kRows + 8 * h + 8, 0.0f);
            }
            continue;
        }
        // the woven groups of these 8 lanes (nullptr: past `rows`, decoded as zeros)
        const typename G::Block * grp[NG];
        for (int q = 0; q < NG; ++q) {
            const int r0 = 8 * h + R * q;
            const uint8_t * g = r0 < rows ? w + r0 * w_stride : nullptr;
            if (g && w_stride != row_size) {
                auto * buf = (uint8_t *) ggml_cpu_kernel_scratch(GGML_CPU_SCRATCH_GATHER, 8 * row_size) + q * R * row_size;
                for (int k = 0; k < R; ++k) std::memcpy(buf + k * row_size, g + k * w_stride, row_size);
                g = buf;
            }
            grp[q] = g ? (const typename G::Block *) g + b0 : nullptr;
        }
        for (int64_t b = 0; b < nblocks; ++b) {
            for (int j = 0; j < G::kSubs; ++j) {
                uint8_t * o = out + (b * G::kSubs + j) * rec;
                float * f = (float *) (o + KV * VB);
                const typename G::Block * blk[NG];
                for (int q = 0; q < NG; ++q) blk[q] = grp[q] ? grp[q] + b : nullptr;
                G::decode(blk, j, o + 32 * h, VB, f + 8 * h, f + kRows + 8 * h);
            }
        }
    }
}

// f(std::integral_constant<int, C>) for the runtime column count c (1 <= c <= kCols).
template <int C, typename F>
inline void with_cols(int c, F && f) {
    if constexpr (C > 0) {
        if (c == C) f(std::integral_constant<int, C>());
        else with_cols<C - 1>(c, f);
    }
}

// nr a multiple of G::kR (whole groups), n a multiple of G::kBlockValues.
template <typename G, typename A>
void gemm_r8(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
             int nr, int nc) {
    constexpr int S = G::kSub;
    GGML_ASSERT(nr % G::kR == 0 && n % G::kBlockValues == 0 && "interleaved gemm: whole row groups and blocks");
    const int ngroups = (nr + kRows - 1) / kRows;
    const size_t group_bytes = n / S * w_record<S>;
    const auto * wb = (const uint8_t *) w;
    if (nc >= kMinCols) {
        uint8_t * wbuf = scratch(0, ngroups * group_bytes);
        for (int g = 0; g < ngroups; ++g) {
            pack_groups<G>(wb + g * kRows * w_stride, w_stride, std::min(kRows, nr - g * kRows), n, 0, n / G::kBlockValues,
                           wbuf + g * group_bytes);
        }
        gemm_tiles<G, A>(n, ngroups, wbuf, group_bytes, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    // few columns: every column tile packed once, then one row group at a time through all of them
    const int64_t nsb = n / S;
    const size_t tile_bytes = nsb * x_record<S, kCols, kSpread>;
    const int ntiles = (nc + kCols - 1) / kCols;
    uint8_t * xbuf = scratch(1, ntiles * tile_bytes);
    const auto * xb = (const uint8_t *) x;
    for (int t = 0; t < ntiles; ++t) {
        with_cols<kCols>(std::min(kCols, nc - t * kCols), [&](auto cc) {
            pack_columns<A, S, decltype(cc)::value, kSpread>(xb + t * kCols * x_stride, x_stride, nsb, xbuf + t * tile_bytes);
        });
    }
    // a slice of about 256 values per row group: its decoded record (5 KB on AVX512) stays in L1
    constexpr int64_t kSliceBlocks = (256 + G::kBlockValues - 1) / G::kBlockValues;
    constexpr int64_t kSliceSubs = kSliceBlocks * G::kSubs;
    const int64_t nblocks = n / G::kBlockValues;
    uint8_t * wbuf = scratch(0, kSliceSubs * w_record<S>);
    for (int g = 0; g < ngroups; ++g) {
        const int rows = std::min(kRows, nr - g * kRows);
        for (int64_t b0 = 0; b0 < nblocks; b0 += kSliceBlocks) {
            const int64_t b1 = std::min(nblocks, b0 + kSliceBlocks);
            pack_groups<G>(wb + g * kRows * w_stride, w_stride, rows, n, b0, b1, wbuf);
            const int64_t sb0 = b0 * G::kSubs;
            for (int t = 0; t < ntiles; ++t) {
                with_cols<kCols>(std::min(kCols, nc - t * kCols), [&](auto cc) {
                    constexpr int C = decltype(cc)::value;
                    micro<G, C, A::kSuper>((b1 - b0) * G::kSubs, wbuf, xbuf + t * tile_bytes + sb0 * x_record<S, C, kSpread>,
                                           dst + t * kCols * dst_stride + g * kRows, dst_stride, rows, b0 > 0);
                });
            }
        }
    }
}

// The registrations, the same in both folders (each instantiates its own panel).
inline void register_r8_gemms(ggml_cpu_isa isa) {
    ggml_cpu_register_gemm(GGML_TYPE_Q4_0_R8, isa, GGML_TYPE_Q8_0, gemm_r8<grp_q4_0_r8, act_q8_32<false>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_0_R8, isa, GGML_TYPE_Q8_0, gemm_r8<grp_q8_0_r8<kSignedLevels>, act_q8_32<false>>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_XS_R8, isa, GGML_TYPE_Q8_K, gemm_r8<grp_iq4_xs_r8<kSignedLevels>, act_q8_K<32>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q4_K_R4, isa, GGML_TYPE_Q8_K, gemm_r8<grp_q4_k_r4, act_q8_K<32>>);
    ggml_cpu_register_gemm(GGML_TYPE_Q6_K_R4, isa, GGML_TYPE_Q8_K, gemm_r8<grp_q6_k_r4, act_q8_K<16>>);
}

} // namespace kiln_panel
} // namespace
