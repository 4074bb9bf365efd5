// Trellis types against a few q8_K columns (token generation, small batches), AVX2. Two
// kernels: run order (iq1_kt, iq2_kt, iq4_kt; one or two columns) and packed order (below; iq3_kt
// at every batch size, the others from three columns). Included by quants-ik.cpp only.
//
// The AVX512 kernel's scheme (avx512/gemv-kt.h) in 8 lanes: lanes are runs, step m of the
// generator is one vpmulld by K^(m+1) and one vpand for value m of 8 runs, and the activations
// are expanded once per call into that order, each byte in all four bytes of its int32 lane. One
// vpmaddubsw of the masked hash (u8, bytes <= 63) by that vector gives per int16 the sum of two
// bytes times a (|.| <= 126 * 127, so two steps add in int16 without saturation), and one
// vpmaddwd by the run's scale (in both int16 halves) sums the pair into int32 with the scale
// applied. The -126 a term is the q8_K bsums by -126 * the scales (one vpmaddwd per block).
// Per 8 values and column: vpmaddubsw, half a vpaddw, vpmaddwd and vpaddd; vpmulld and vpand are
// shared by the columns. Forming int8 levels cost a seed permute, vpmulld, vpand, vpmaddubsw,
// vpmaddwd and the narrowing packs per 8 values before the product.
#pragma once

#include "cpu-traits.h"
#include "quants/quants-ik.h"
#include "trellis-seeds-x86.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace {

// 32 vectors of 32 bytes per 256 values in the expanded activations.
constexpr size_t kKtActBlockBytes = 32 * 32;

using kt_facc = __m256;
inline __m256 kt_facc_zero() { return _mm256_setzero_ps(); }
inline float kt_facc_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

#include "gemv-kt-columns.inc"

// 32-block j's scale in int32 lane j from 8 bytes of iq4_k-grid indices (low nibbles).
inline __m256i kt_grid_scales8(uint64_t nibbles) {
    const __m128i grid = _mm_loadu_si128((const __m128i *) ik_iq4k_values);
    return _mm256_cvtepi8_epi32(_mm_shuffle_epi8(grid, _mm_cvtsi64_si128((long long) nibbles)));
}

// iq2_kt: 32 runs of 8, 16-bit seeds; scales index the iq4_k grid; the reference's 1.05.
struct kt_gemv_iq2 {
    static constexpr int kRun = 8;
    static constexpr size_t kBytes = sizeof(block_iq2_kt);
    static constexpr float kFactor = kIq2KtGemmFactor;
    // runs 8q .. 8q+15: seed vectors q, q+1
    static void seeds2(const uint8_t * b, int q, __m256i * out) {
        out[0] = kt_word_seeds(b + 4, 8 * q, 8);
        out[1] = kt_word_seeds(b + 4, 8 * q + 8, 8);
    }
    static __m256i scales8(const uint8_t * b) { return kt_grid_scales8(kt_scale_nibbles(b)); }
};

// iq1_kt: 32 runs of 8 (seeds: trellis-seeds-x86.h).
struct kt_gemv_iq1 {
    static constexpr int kRun = 8;
    static constexpr size_t kBytes = sizeof(block_iq1_kt);
    static constexpr float kFactor = 1.0f;
    static void seeds2(const uint8_t * b, int q, __m256i * out) {
        out[0] = iq1_kt_seeds8(*(const block_iq1_kt *) b, q);
        out[1] = iq1_kt_seeds8(*(const block_iq1_kt *) b, q + 1);
    }
    static __m256i scales8(const uint8_t * b) {
        uint64_t sh;
        std::memcpy(&sh, b, 8);
        return kt_grid_scales8(sh & 0x0F0F0F0F0F0F0F0Full);
    }
};

// iq4_kt: 64 runs of 4, 8 per 32-block; scale + 64 in bits 1-7 of the block's shb word.
struct kt_gemv_iq4 {
    static constexpr int kRun = 4;
    static constexpr size_t kBytes = sizeof(block_iq4_kt);
    static constexpr float kFactor = 1.0f;
    static void seeds2(const uint8_t * b, int q, __m256i * out) { iq4_kt_seeds16(*(const block_iq4_kt *) b, q / 2, out); }
    static __m256i scales8(const uint8_t * b) {
        const __m256i w = _mm256_loadu_si256((const __m256i *) b);
        return _mm256_sub_epi32(_mm256_srli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0xFF)), 1), _mm256_set1_epi32(64));
    }
};

// One q8_K block's activations in run order for runs of Run (8 or 4) values: vector Run * q + m
// holds value m of runs 8q .. 8q+7, each byte in all four bytes of its int32 lane.
template <int Run>
void kt_expand_block(const block_q8_K & a, uint8_t * out) {
    if constexpr (Run == 8) {
        for (int q = 0; q < 4; ++q) {
            const __m256i y0 = _mm256_loadu_si256((const __m256i *) (a.qs + 64 * q));        // runs 0-3 of the 8
            const __m256i y1 = _mm256_loadu_si256((const __m256i *) (a.qs + 64 * q + 32));   // runs 4-7
            // 128-bit lane L of the output is runs 4L .. 4L+3: the first two from lo, the last two from hi
            const __m256i lo = _mm256_permute2x128_si256(y0, y1, 0x20);
            const __m256i hi = _mm256_permute2x128_si256(y0, y1, 0x31);
            for (int m = 0; m < 8; ++m) {
                // byte p of a lane: dword j = p / 4, byte m of its run at 8 (j % 2) + m
                const __m256i pat = _mm256_add_epi8(_mm256_setr_epi32(0, 0x08080808, 0, 0x08080808, 0, 0x08080808, 0, 0x08080808),
                                                    _mm256_set1_epi8((char) m));
                const __m256i v = _mm256_blend_epi32(_mm256_shuffle_epi8(lo, pat), _mm256_shuffle_epi8(hi, pat), 0xCC);
                _mm256_storeu_si256((__m256i *) (out + 32 * (8 * q + m)), v);
            }
        }
    } else {
        for (int q = 0; q < 8; ++q) {
            const __m256i y = _mm256_loadu_si256((const __m256i *) (a.qs + 32 * q));
            for (int m = 0; m < 4; ++m) {
                const __m256i pat = _mm256_add_epi8(_mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C),
                                                    _mm256_set1_epi8((char) m));
                _mm256_storeu_si256((__m256i *) (out + 32 * (4 * q + m)), _mm256_shuffle_epi8(y, pat));
            }
        }
    }
}

// Rows of a trellis type against C expanded columns (act[c]: nb blocks of kKtActBlockBytes).
template <typename T, int C>
void kt_gemv_rows(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * const * act, const block_q8_K * const * xq,
                  float * dst, size_t dst_stride, int nr) {
    constexpr int kVecs = 32 / T::kRun;   // vectors of 8 runs per block
    uint32_t pw[8];
    kt_powers<8>(pw, [](int v) { return (uint32_t) v; });
    const __m256i mask = _mm256_set1_epi32(0x3f3f3f3f);
    kt_rows<T, C>(nb, w, w_stride, dst, dst_stride, nr, [&](const uint8_t * b, int64_t i, float row_d, __m256 * acc) {
        // int32 lane j: scale of 32-block j in both int16 halves
        const __m256i sc = T::scales8(b);
        const __m256i sc2 = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));
        // bsums 2j, 2j+1 belong to 32-block j: one vpmaddwd by -126 * scale
        const __m256i sc2_bias = _mm256_mullo_epi16(sc2, _mm256_set1_epi16(-126));
        __m256i t[C];
        for (int c = 0; c < C; ++c) t[c] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) xq[c][i].bsums), sc2_bias);
        __m256i sd[2];
#pragma GCC unroll 8
        for (int q = 0; q < kVecs; ++q) {
            if (q % 2 == 0) T::seeds2(b, q, sd);
            const __m256i seeds = sd[q % 2];
            // lane r: run 8q + r of 32-block (8q + r) Run / 32
            const __m256i rs = T::kRun == 8 ? _mm256_permutevar8x32_epi32(sc2, _mm256_setr_epi32(2 * q, 2 * q, 2 * q, 2 * q, 2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q + 1))
                                            : _mm256_permutevar8x32_epi32(sc2, _mm256_set1_epi32(q));
#pragma GCC unroll 4
            for (int m = 0; m < T::kRun; m += 2) {
                const __m256i x0 = _mm256_and_si256(_mm256_mullo_epi32(seeds, _mm256_set1_epi32((int) pw[m])), mask);
                const __m256i x1 = _mm256_and_si256(_mm256_mullo_epi32(seeds, _mm256_set1_epi32((int) pw[m + 1])), mask);
                for (int c = 0; c < C; ++c) {
                    const uint8_t * a = act[c] + i * kKtActBlockBytes + 32 * (T::kRun * q + m);
                    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(x0, _mm256_loadu_si256((const __m256i *) a)),
                                                       _mm256_maddubs_epi16(x1, _mm256_loadu_si256((const __m256i *) (a + 32))));
                    t[c] = _mm256_add_epi32(t[c], _mm256_madd_epi16(p, rs));
                }
            }
        }
        for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t[c]), _mm256_set1_ps(row_d * xq[c][i].d), acc[c]);
    });
}

// ---------------------------------------------------------------------------------------------
// Packed order (iq3_kt at every batch size; iq1/iq2/iq4_kt from three columns on): the AVX512
// scheme (avx512/gemv-kt.h) in 8 lanes. Step d of 4 gives the hash of 8 runs per int32 lane, one
// vpmaddubsw by ones its byte-pair sums; two vphaddw and a vpackuswb narrow the 4 steps' byte sums
// to 32 bytes (then - 126: the signed levels) in which byte (128-bit lane L, 4d + i) is step d of
// run 8q + 4L + i, so lane L is one 32-block. (That narrowing is 4 instructions per 4 steps; with
// vpmaddwd by ones, vpackssdw, vpsubw and vpacksswb it was 9, vphaddw being 3 uops on Intel.)
// The activations are permuted once per call into that order (256 bytes per block, a dword
// permute and a 4x4 byte transpose per vector), and the product is the AVX2 kernels' |w| x
// sign(a, w) with vpmaddubsw and vpmaddwd by the lane's scale: per 32 values and column one
// vpsignb, vpmaddubsw, vpmaddwd and vpaddd. iq3_kt: |v| is the magnitude, and the sign comes from
// its qh bits, transposed as the activations are.

template <int Run>
constexpr size_t kt_packed_block_bytes() { return QK_K; }

// iq3_kt: as iq2_kt's seeds; unsigned 4-bit scales; magnitudes with a sign bit per value.
struct kt_gemv_iq3 {
    static constexpr int kRun = 8;
    static constexpr size_t kBytes = sizeof(block_iq3_kt);
    static constexpr float kFactor = kIq3KtGemmFactor;
    static constexpr bool kSigned = true;
    static void seeds2(const uint8_t * b, int q, __m256i * out) { kt_gemv_iq2::seeds2(b, q, out); }
    static __m256i scales8(const uint8_t * b) { return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long) kt_scale_nibbles(b))); }
};

inline __m256i kt_transpose4x4(__m256i v) { return _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(kt_transpose4x4_pattern())); }

// One q8_K block in packed order: pack p of seed vector q at 32 (Run / 4 * q + p).
template <int Run>
void kt_pack_block(const block_q8_K & a, uint8_t * out) {
    if constexpr (Run == 8) {
        for (int q = 0; q < 4; ++q) {
            const __m256i y0 = _mm256_loadu_si256((const __m256i *) (a.qs + 64 * q));        // runs 8q .. 8q+3
            const __m256i y1 = _mm256_loadu_si256((const __m256i *) (a.qs + 64 * q + 32));   // runs 8q+4 .. 8q+7
            for (int p = 0; p < 2; ++p) {
                // dword (L, i): steps 4p .. 4p+3 of run 8q + 4L + i, dword 2i + p of y_L
                const __m256i idx = _mm256_add_epi32(_mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6), _mm256_set1_epi32(p));
                const __m256i v = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(y0, idx), _mm256_permutevar8x32_epi32(y1, idx), 0xF0);
                _mm256_storeu_si256((__m256i *) (out + 32 * (2 * q + p)), kt_transpose4x4(v));
            }
        }
    } else {
        for (int q = 0; q < 8; ++q) {   // runs of 4: in place
            _mm256_storeu_si256((__m256i *) (out + 32 * q), kt_transpose4x4(_mm256_loadu_si256((const __m256i *) (a.qs + 32 * q))));
        }
    }
}

// Rows of a trellis type against C columns in packed order (act: nb blocks per column, columns
// col_bytes apart).
template <typename T, int C>
void kt_packed_rows(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * act, size_t col_bytes,
                    const block_q8_K * const * xq, float * dst, size_t dst_stride, int nr) {
    constexpr int kSeedVecs = 32 / T::kRun, kPacks = T::kRun / 4;
    __m256i pw[T::kRun];
    kt_powers<T::kRun>(pw, [](int v) { return _mm256_set1_epi32(v); });
    const __m256i mask = _mm256_set1_epi32(0x3f3f3f3f);
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i off = _mm256_set1_epi8(126);
    kt_rows<T, C>(nb, w, w_stride, dst, dst_stride, nr, [&](const uint8_t * b, int64_t i, float row_d, __m256 * acc) {
        const uint8_t * a = act + i * QK_K;
        // int32 lane j: scale of 32-block j in both int16 halves
        const __m256i sc = T::scales8(b);
        const __m256i sc2 = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));
        __m256i qh_t[2];
        if constexpr (kt_signed<T>::value) {
            for (int p = 0; p < 2; ++p) qh_t[p] = _mm256_broadcastsi128_si256(iq3_kt_packed_signs(*(const block_iq3_kt *) b, p));
        }
        __m256i t[C];
        for (int c = 0; c < C; ++c) t[c] = _mm256_setzero_si256();
        __m256i sd[2];
#pragma GCC unroll 8
        for (int q = 0; q < kSeedVecs; ++q) {
            if (q % 2 == 0) T::seeds2(b, q, sd);
            const __m256i seeds = sd[q % 2];
            // lane L: runs 8q + 4L .. of 32-block (8q + 4L) Run / 32
            const __m256i rs = T::kRun == 8 ? _mm256_permutevar8x32_epi32(sc2, _mm256_setr_epi32(2 * q, 2 * q, 2 * q, 2 * q, 2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q + 1))
                                            : _mm256_permutevar8x32_epi32(sc2, _mm256_set1_epi32(q));
            __m256i bit;
            if constexpr (kt_signed<T>::value) bit = _mm256_set_m128i(_mm_set1_epi8((char) (2u << 2 * q)), _mm_set1_epi8((char) (1u << 2 * q)));
            for (int p = 0; p < kPacks; ++p) {
                // v[d]: the two byte-pair sums of each masked hash (<= 126 per int16)
                __m256i v[4];
                for (int d = 0; d < 4; ++d) {
                    const __m256i x = _mm256_and_si256(_mm256_mullo_epi32(seeds, pw[4 * p + d]), mask);
                    v[d] = _mm256_maddubs_epi16(x, ones8);
                }
                // vphaddw completes each hash's byte sum s (<= 252) in the dword order of a
                // vpackssdw; s fits u8, and s - 126 wraps to the exact int8 level
                const __m256i s = _mm256_packus_epi16(_mm256_hadd_epi16(v[0], v[1]), _mm256_hadd_epi16(v[2], v[3]));
                const __m256i lv = _mm256_sub_epi8(s, off);
                const __m256i u = _mm256_abs_epi8(lv);
                __m256i sgn;
                if constexpr (kt_signed<T>::value) {
                    sgn = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh_t[p], bit), bit), ones8);
                } else {
                    sgn = lv;
                }
                for (int c = 0; c < C; ++c) {
                    const __m256i av = _mm256_loadu_si256((const __m256i *) (a + c * col_bytes + 32 * (kPacks * q + p)));
                    t[c] = _mm256_add_epi32(t[c], _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(av, sgn)), rs));
                }
            }
        }
        for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t[c]), _mm256_set1_ps(row_d * xq[c][i].d), acc[c]);
    });
}

} // namespace
