// Trellis types against a few q8_K columns (token generation, small batches), AVX512 VNNI. Two
// kernels: run order (iq1_kt, iq2_kt, iq4_kt; one or two columns) and packed order (below; iq3_kt
// at every batch size, the others from three columns). Included by quants-ik.cpp only.
//
// A value is v = s - 126, s the byte sum of (seed * K^(m+1)) & 0x3f3f3f3f (quants-kt.cpp). Its
// product with an activation a is a * s - 126 a, and a * s is one vpdpbusd lane of the masked
// hash against a copied into all four bytes of the lane. So the levels are never formed:
//   - lanes are runs: a vector holds the seeds of 16 runs, and step m of the generator is one
//     vpmulld by K^(m+1) and one vpand for the m-th value of all 16 runs;
//   - the activations are expanded once per call into that order (value m of run r in lane r of
//     vector m, each byte four times), 1 KB per 256 values and column, with -126 * the 16-value
//     sums of the q8_K block;
//   - one vpdpbusd per 16 values and column then does the byte sum and the product; the lane's
//     run scale multiplies the run sums once per 16 runs, the -126 a term is the scaled bsums.
// Per 16 values and column 3 instructions (vpmulld, vpand, vpdpbusd; the first two shared by the
// columns), against 6 for forming levels (seed broadcast, vpmulld, vpand, vpdpbusd by ones, the
// narrowing packs) and the product. All integer sums are exact, as in the scalar kernel.
//
// iq3_kt's values are |v| with a sign bit, not linear in s: it takes the packed-order kernel.
#pragma once

#include "cpu-traits.h"
#include "quants/quants-ik.h"
#include "trellis-seeds-x86.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace {

// Vectors per 256 values in the expanded activations, and the bsum vector after them.
constexpr int kKtActVecs = 16;
constexpr size_t kKtActBlockBytes = (kKtActVecs + 1) * 64;

using kt_facc = __m512;
inline __m512 kt_facc_zero() { return _mm512_setzero_ps(); }
inline float kt_facc_sum(__m512 v) { return _mm512_reduce_add_ps(v); }

#include "gemv-kt-columns.inc"

// iq2_kt: 32 runs of 8, 16-bit seeds; scales index the iq4_k grid; the reference's 1.05.
struct kt_gemv_iq2 {
    static constexpr int kRun = 8;
    static constexpr size_t kBytes = sizeof(block_iq2_kt);
    static constexpr float kFactor = kIq2KtGemmFactor;
    static __m512i seeds(const uint8_t * b, int h) {
        const __m256i w = _mm256_loadu_si256((const __m256i *) (b + 4 + 32 * h));
        return _mm512_add_epi32(_mm512_cvtepu16_epi32(w), _mm512_set1_epi32(kKtSeedOffset));
    }
    static void seeds2(const uint8_t * b, int h, __m512i * out) { out[0] = seeds(b, h), out[1] = seeds(b, h + 1); }
    // 32-block j's scale in int32 lane j (lanes 0..7)
    static __m512i scales8(const uint8_t * b, const __m128i & grid) {
        return _mm512_cvtepi8_epi32(_mm_shuffle_epi8(grid, _mm_cvtsi64_si128((long long) kt_scale_nibbles(b))));
    }
};

// iq1_kt: 32 runs of 8, 13-bit seeds from ql, a qh nibble and a bit of the 32-block's sh byte.
struct kt_gemv_iq1 {
    static constexpr int kRun = 8;
    static constexpr size_t kBytes = sizeof(block_iq1_kt);
    static constexpr float kFactor = 1.0f;
    static __m512i seeds(const uint8_t * p, int h) {
        const auto & b = *(const block_iq1_kt *) p;
        const __m512i ql = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) (b.ql + 16 * h)));
        const __m512i qh = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) b.qh));
        const __m512i sh = _mm512_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) b.sh));
        // lane r: run 16h + r; seed bit 12 is bit 4 + r % 4 of sh[4h + r / 4], shifted left by 8 - r % 4
        const __m512i pick = _mm512_add_epi32(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0), _mm512_set1_epi32(4 * h));
        const __m512i up = _mm512_set_epi32(5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8);
        // a | (b & c), three inputs in one vpternlogd
        __m512i s = _mm512_ternarylogic_epi32(ql, _mm512_slli_epi32(qh, 8 - 4 * h), _mm512_set1_epi32(0xF00), 0xF8);
        s = _mm512_ternarylogic_epi32(s, _mm512_sllv_epi32(_mm512_permutexvar_epi32(pick, sh), up), _mm512_set1_epi32(0x1000), 0xF8);
        return _mm512_add_epi32(s, _mm512_set1_epi32(kKtSeedOffset));
    }
    static void seeds2(const uint8_t * b, int h, __m512i * out) { out[0] = seeds(b, h), out[1] = seeds(b, h + 1); }
    static __m512i scales8(const uint8_t * p, const __m128i & grid) {
        const __m128i sh = _mm_loadl_epi64((const __m128i *) p);
        return _mm512_cvtepi8_epi32(_mm_shuffle_epi8(grid, _mm_and_si128(sh, _mm_set1_epi8(0xF))));
    }
};

// iq4_kt: 64 runs of 4, 15-bit seeds from ql, a qh nibble and 3 bits of the 32-block's shb word,
// whose bit 0 picks the seed offset and bits 1-7 hold the scale + 64.
struct kt_gemv_iq4 {
    static constexpr int kRun = 4;
    static constexpr size_t kBytes = sizeof(block_iq4_kt);
    static constexpr float kFactor = 1.0f;
    // runs 16h .. 16h+31 (h even; 32-blocks 2h .. 2h+3) as two vectors of 16 seeds. The seed's
    // low 16 bits (ql | qh nibble << 8 | 3 bits of the shb word << 12 | its bit 0 << 15) are
    // assembled 32 runs per vector in int16 lanes, 128-bit lane L holding 32-block 2h + L, then
    // widened and offset (trellis-seeds-x86.h's iq4_kt_seeds16 in 16 lanes): a third fewer
    // instructions per run than assembling in int32 lanes.
    static void seeds2(const uint8_t * p, int h, __m512i * out) {
        const auto & b = *(const block_iq4_kt *) p;
        // word i of lane L: bytes k, k+1 of its block's word (k = 1 + 3i / 8, zero past byte 3),
        // in which run i's 3 bits start at bit 3i + 8 - 8k; shifted left by 12 - that
        alignas(64) static const int8_t kWindow[64] = {
            1, 2, 1, 2, 1, 2, 2, 3, 2, 3, 2, 3, 3, -128, 3, -128, 5, 6, 5, 6, 5, 6, 6, 7, 6, 7, 6, 7, 7, -128, 7, -128,
            9, 10, 9, 10, 9, 10, 10, 11, 10, 11, 10, 11, 11, -128, 11, -128, 13, 14, 13, 14, 13, 14, 14, 15, 14, 15, 14, 15, 15, -128, 15, -128 };
        // byte 0 of lane L's block word into the high byte of each word (its bit 0 -> bit 15 by << 7)
        alignas(64) static const int8_t kBit0[64] = {
            -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 4, -128, 4, -128, 4, -128, 4, -128, 4, -128, 4, -128, 4, -128, 4,
            -128, 8, -128, 8, -128, 8, -128, 8, -128, 8, -128, 8, -128, 8, -128, 8, -128, 12, -128, 12, -128, 12, -128, 12, -128, 12, -128, 12, -128, 12, -128, 12 };
        const int u = h / 2;
        const __m512i ql = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *) (b.ql + 32 * u)));
        const __m512i qh = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *) b.qh));
        const __m512i w = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) (b.shb + 16 * u)));
        const __m512i up = _mm512_broadcast_i32x4(_mm_setr_epi16(12, 9, 6, 11, 8, 5, 10, 7));
        const __m512i top = _mm512_sllv_epi16(_mm512_shuffle_epi8(w, _mm512_load_si512((const void *) kWindow)), up);
        const __m512i bit15 = _mm512_slli_epi16(_mm512_shuffle_epi8(w, _mm512_load_si512((const void *) kBit0)), 7);
        // a | (b & c), three inputs in one vpternlogd
        __m512i s = _mm512_ternarylogic_epi32(ql, _mm512_slli_epi16(qh, 8 - 4 * u), _mm512_set1_epi16(0x0F00), 0xF8);
        s = _mm512_ternarylogic_epi32(_mm512_or_si512(s, bit15), top, _mm512_set1_epi16(0x7000), 0xF8);
        out[0] = _mm512_add_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(s)), _mm512_set1_epi32(kKtSeedOffset));
        out[1] = _mm512_add_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(s, 1)), _mm512_set1_epi32(kKtSeedOffset));
    }
    static __m512i scales8(const uint8_t * p, const __m128i &) {
        const __m512i w = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) p));
        return _mm512_sub_epi32(_mm512_srli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0xFF)), 1), _mm512_set1_epi32(64));
    }
};

// One q8_K block's activations in run order for runs of Run (8 or 4) values: vector 16 / Run * h
// + m holds value m of runs 16h .. 16h+15, each byte in all four bytes of its int32 lane; then
// -126 * bsum of every 16 values as int32.
template <int Run>
void kt_expand_block(const block_q8_K & a, uint8_t * out) {
    if constexpr (Run == 8) {
        const __mmask64 upper = 0xFF00FF00FF00FF00ull;   // lane dwords 2, 3: runs 4L+2, 4L+3
        for (int h = 0; h < 2; ++h) {
            const __m512i z0 = _mm512_loadu_si512((const void *) (a.qs + 128 * h));
            const __m512i z1 = _mm512_loadu_si512((const void *) (a.qs + 128 * h + 64));
            // output lane L is runs 4L .. 4L+3: 128-bit lanes 2L (runs 4L, 4L+1) and 2L+1 of the input
            const __m512i lo = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(2, 0, 2, 0));
            const __m512i hi = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(3, 1, 3, 1));
            for (int m = 0; m < 8; ++m) {
                // byte p of a lane: dword j = p / 4 is run 4L + j, byte m of its 8 at 8 (j % 2) + m
                const __m512i pat = _mm512_add_epi8(_mm512_set4_epi32(0x08080808, 0, 0x08080808, 0), _mm512_set1_epi8((char) m));
                const __m512i v = _mm512_mask_shuffle_epi8(_mm512_shuffle_epi8(lo, pat), upper, hi, pat);
                _mm512_storeu_si512((void *) (out + 64 * (8 * h + m)), v);
            }
        }
    } else {
        for (int h = 0; h < 4; ++h) {
            const __m512i z = _mm512_loadu_si512((const void *) (a.qs + 64 * h));
            for (int m = 0; m < 4; ++m) {
                // byte p of a lane: run 4L + p / 4 is lane bytes 4 (p / 4) .. + 3
                const __m512i pat = _mm512_add_epi8(_mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0), _mm512_set1_epi8((char) m));
                _mm512_storeu_si512((void *) (out + 64 * (4 * h + m)), _mm512_shuffle_epi8(z, pat));
            }
        }
    }
    const __m512i bs = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *) a.bsums));
    _mm512_storeu_si512((void *) (out + 64 * kKtActVecs), _mm512_mullo_epi32(bs, _mm512_set1_epi32(-126)));
}

// Rows of a trellis type against C expanded columns (act[c]: nb blocks of kKtActBlockBytes).
template <typename T, int C>
void kt_gemv_rows(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * const * act, const block_q8_K * const * xq,
                  float * dst, size_t dst_stride, int nr) {
    constexpr int kHalves = 16 / T::kRun;   // vectors of 16 runs per block
    __m512i pw[T::kRun];
    kt_powers<T::kRun>(pw, [](int v) { return _mm512_set1_epi32(v); });
    const __m512i mask = _mm512_set1_epi32(0x3f3f3f3f);
    const __m128i grid = _mm_loadu_si128((const __m128i *) ik_iq4k_values);
    // lane r of run vector h belongs to 32-block (16h + r) Run / 32; lane g of the bsums to g / 2
    __m512i run_scale_idx[kHalves];
    for (int h = 0; h < kHalves; ++h) {
        alignas(64) int32_t idx[16];
        for (int r = 0; r < 16; ++r) idx[r] = (16 * h + r) * T::kRun / 32;
        run_scale_idx[h] = _mm512_load_si512((const void *) idx);
    }
    const __m512i bsum_idx = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    kt_rows<T, C>(nb, w, w_stride, dst, dst_stride, nr, [&](const uint8_t * b, int64_t i, float row_d, __m512 * acc) {
        const __m512i sc8 = T::scales8(b, grid);
        const __m512i sc16 = _mm512_permutexvar_epi32(bsum_idx, sc8);
        __m512i t[C];
        for (int c = 0; c < C; ++c) {
            t[c] = _mm512_mullo_epi32(_mm512_loadu_si512((const void *) (act[c] + i * kKtActBlockBytes + 64 * kKtActVecs)), sc16);
        }
        __m512i sd[2];
#pragma GCC unroll 4
        for (int h = 0; h < kHalves; ++h) {
            if (h % 2 == 0) T::seeds2(b, h, sd);
            const __m512i seeds = sd[h % 2];
            __m512i s[C];
            for (int c = 0; c < C; ++c) s[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int m = 0; m < T::kRun; ++m) {
                const __m512i x = _mm512_and_si512(_mm512_mullo_epi32(seeds, pw[m]), mask);
                for (int c = 0; c < C; ++c) {
                    const uint8_t * a = act[c] + i * kKtActBlockBytes + 64 * (T::kRun * h + m);
                    s[c] = _mm512_dpbusd_epi32(s[c], x, _mm512_loadu_si512((const void *) a));
                }
            }
            const __m512i rs = _mm512_permutexvar_epi32(run_scale_idx[h], sc8);
            for (int c = 0; c < C; ++c) t[c] = _mm512_add_epi32(t[c], _mm512_mullo_epi32(s[c], rs));
        }
        for (int c = 0; c < C; ++c) acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[c]), _mm512_set1_ps(row_d * xq[c][i].d), acc[c]);
    });
}

// ---------------------------------------------------------------------------------------------
// Packed order (iq3_kt at every batch size; iq1/iq2/iq4_kt from three columns on). The run-order
// product above spends one vpdpbusd per 16 values and column (the activation four times in a
// lane); from three columns that outweighs forming the levels. Here the levels are formed in
// registers without moving the seeds: for each step m of 4, v = dpbusd(-126, hash & mask, ones)
// holds value m of 16 runs, and two packs narrow the 4 steps to one vector in which byte
// (128-bit lane L, 4d + i) is step d of run 16h + 4L + i, so a dword's four bytes are four runs
// of one 32-block and lane L's dwords share it. The activations are permuted once per call into
// that order (a dword gather and a 4x4 byte transpose per vector), so each vpdpbusd does 64
// products, and the block's scale is one vpmulld per 16 runs and column. Weights go in as
// u = level + 128 (unsigned operand); -128 * the activation's sums per lane start the
// accumulators, taken when the activations are laid out. iq3_kt's magnitude and sign:
// vpabsb and a masked subtract, 128 +- |v|, with its sign bits transposed the same way.
// All block sums are exact int32, as in the scalar kernel.

// Bytes per 256 values of a column in packed order: 4 vectors of values, then one vector of
// -128 * lane sums per 16 runs.
template <int Run>
constexpr size_t kt_packed_block_bytes() { return 64 * (4 + 16 / Run); }

// iq3_kt: as iq2_kt's seeds; unsigned 4-bit scales; magnitudes with a sign bit per value.
struct kt_gemv_iq3 {
    static constexpr int kRun = 8;
    static constexpr size_t kBytes = sizeof(block_iq3_kt);
    static constexpr float kFactor = kIq3KtGemmFactor;
    static constexpr bool kSigned = true;
    static void seeds2(const uint8_t * b, int h, __m512i * out) { kt_gemv_iq2::seeds2(b, h, out); }
    static __m512i scales8(const uint8_t * b, const __m128i &) {
        return _mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long) kt_scale_nibbles(b)));
    }
};

inline __m512i kt_transpose4x4(__m512i v) { return _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(kt_transpose4x4_pattern())); }

// One q8_K block in packed order: pack p of seed vector h at 64 (Run / 4 * h + p), as
// kt_packed_rows reads it, then -128 * the lane sums of each seed vector's packs.
template <int Run>
void kt_pack_block(const block_q8_K & a, uint8_t * out) {
    const __m512i ones = _mm512_set1_epi8(1);
    constexpr int kSeedVecs = 16 / Run, kPacks = Run / 4;
    for (int h = 0; h < kSeedVecs; ++h) {
        __m512i sum = _mm512_setzero_si512();
        for (int p = 0; p < kPacks; ++p) {
            __m512i v;
            if constexpr (Run == 8) {
                // dword (L, i) is step 4p .. 4p+3 of run 16h + 4L + i: dword 8L + 2i + p of the 128 bytes at 128h
                const __m512i idx = _mm512_add_epi32(_mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0),
                                                     _mm512_set1_epi32(p));
                const __m512i z0 = _mm512_loadu_si512((const void *) (a.qs + 128 * h));
                const __m512i z1 = _mm512_loadu_si512((const void *) (a.qs + 128 * h + 64));
                v = kt_transpose4x4(_mm512_permutex2var_epi32(z0, idx, z1));
            } else {
                v = kt_transpose4x4(_mm512_loadu_si512((const void *) (a.qs + 64 * h)));   // runs of 4: in place
            }
            _mm512_storeu_si512((void *) (out + 64 * (kPacks * h + p)), v);
            sum = _mm512_dpbusd_epi32(sum, ones, v);
        }
        _mm512_storeu_si512((void *) (out + 64 * (4 + h)), _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7)));
    }
}

// Rows of a trellis type against C columns in packed order (act: nb blocks per column, columns
// col_bytes apart).
template <typename T, int C>
void kt_packed_rows(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * act, size_t col_bytes,
                    const block_q8_K * const * xq, float * dst, size_t dst_stride, int nr) {
    constexpr int kSeedVecs = 16 / T::kRun, kPacks = T::kRun / 4;
    constexpr size_t kBlock = kt_packed_block_bytes<T::kRun>();
    __m512i pw[T::kRun];
    kt_powers<T::kRun>(pw, [](int v) { return _mm512_set1_epi32(v); });
    const __m512i mask = _mm512_set1_epi32(0x3f3f3f3f);
    const __m512i bias = _mm512_set1_epi32(-126);
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i off = _mm512_set1_epi8((char) 0x80);
    const __m128i grid = _mm_loadu_si128((const __m128i *) ik_iq4k_values);
    // lane (L, d) of seed vector h: runs 16h + 4L .. + 3, all of 32-block (16h + 4L) Run / 32
    __m512i block_idx[kSeedVecs];
    __m512i sign_bit[kSeedVecs];   // iq3_kt: byte of lane L = bit 4h + L (the 32-block) of the qh bytes
    for (int h = 0; h < kSeedVecs; ++h) {
        alignas(64) int32_t idx[16];
        alignas(64) uint8_t bit[64];
        for (int j = 0; j < 16; ++j) idx[j] = (16 * h + 4 * (j / 4)) * T::kRun / 32;
        for (int j = 0; j < 64; ++j) bit[j] = (uint8_t) (1u << ((4 * h + j / 16) & 7));
        block_idx[h] = _mm512_load_si512((const void *) idx);
        sign_bit[h] = _mm512_load_si512((const void *) bit);
    }
    kt_rows<T, C>(nb, w, w_stride, dst, dst_stride, nr, [&](const uint8_t * b, int64_t i, float row_d, __m512 * acc) {
        const uint8_t * a = act + i * kBlock;
        const __m512i sc8 = T::scales8(b, grid);
        __m512i qh_t[2];
        if constexpr (kt_signed<T>::value) {
            for (int p = 0; p < 2; ++p) qh_t[p] = _mm512_broadcast_i32x4(iq3_kt_packed_signs(*(const block_iq3_kt *) b, p));
        }
        __m512i t[C];
        for (int c = 0; c < C; ++c) t[c] = _mm512_setzero_si512();
        __m512i sd[2];
#pragma GCC unroll 4
        for (int h = 0; h < kSeedVecs; ++h) {
            if (h % 2 == 0) T::seeds2(b, h, sd);
            const __m512i seeds = sd[h % 2];
            __m512i s[C];
            for (int c = 0; c < C; ++c) s[c] = _mm512_loadu_si512((const void *) (a + c * col_bytes + 64 * (4 + h)));
            for (int p = 0; p < kPacks; ++p) {
                __m512i v[4];
                for (int d = 0; d < 4; ++d) {
                    const __m512i x = _mm512_and_si512(_mm512_mullo_epi32(seeds, pw[4 * p + d]), mask);
                    v[d] = _mm512_dpbusd_epi32(bias, x, ones);
                }
                const __m512i lv = _mm512_packs_epi16(_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3]));
                __m512i u;
                if constexpr (kt_signed<T>::value) {
                    const __m512i m = _mm512_abs_epi8(lv);
                    u = _mm512_mask_sub_epi8(_mm512_add_epi8(off, m), _mm512_test_epi8_mask(qh_t[p], sign_bit[h]), off, m);
                } else {
                    u = _mm512_xor_si512(lv, off);
                }
                for (int c = 0; c < C; ++c) {
                    s[c] = _mm512_dpbusd_epi32(s[c], u, _mm512_loadu_si512((const void *) (a + c * col_bytes + 64 * (kPacks * h + p))));
                }
            }
            const __m512i rs = _mm512_permutexvar_epi32(block_idx[h], sc8);
            for (int c = 0; c < C; ++c) t[c] = _mm512_add_epi32(t[c], _mm512_mullo_epi32(s[c], rs));
        }
        for (int c = 0; c < C; ++c) acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[c]), _mm512_set1_ps(row_d * xq[c][i].d), acc[c]);
    });
}

} // namespace
