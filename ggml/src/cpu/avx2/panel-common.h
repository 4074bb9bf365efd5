// What the AVX2 (avx2/panel.h) and AVX512 (avx512/panel.h) panel gemms share: the per-thread
// scratch, the activation readers and the packing of a tile of activation columns, and the
// per-sub-block coefficients (value = scale * u + bias) of the k-quants.
//
// Both panels repack weights so that vector lanes are rows and broadcast activation bytes from a
// small packed tile of columns; only the lane count and the integer product differ. This code
// uses AVX2 + F16C at most, so it is valid in both folders; each folder's files include it into
// their own anonymous namespace (internal linkage, see cpu-isa.h).
#pragma once

#include <immintrin.h>

#include "cpu-traits.h"
#include "ggml-impl.h"
#include "quants/quants-k.h"

#include <cstdint>
#include <cstring>

namespace {
namespace kiln_panel {

// Packed activation record of one sub-block of S values for C columns: C x S signed bytes
// ([c][S]), or with kSpread every 4-byte group broadcast to a 32-byte vector ([k][c] vectors, for
// AVX2, whose products then read them as a memory operand); then C float scales and C float
// sums. Spread records are rounded up to whole vectors.
template <int S, int C, bool kSpread = false>
constexpr size_t x_record = kSpread ? ((S / 4) * C * 32 + 8 * C + 31) / 32 * 32 : C * S + 8 * C;

// The level offset a weight decoder declares (kLevelOffset: its bias is -kLevelOffset * scale,
// which avx512/panel.h folds away), or 0.
template <typename D> constexpr int level_offset() {
    if constexpr (requires { D::kLevelOffset; }) return D::kLevelOffset;
    else return 0;
}

// Decoders whose per-16 scales stay integers inside the AVX2 products (kScales16: q6_K and
// q6_k_r4 against q8_0 activations; the scheme and the record are avx2/panel.h's). Here because
// the interleaved group decoders (avx2/panel-r8*.h) are compiled in both ISA folders.
template <typename D> constexpr bool scales16() {
    if constexpr (requires { D::kScales16; }) return D::kScales16;
    else return false;
}

// The 128-byte record tail of a kScales16 sub-block of 32 values, from the 8 rows' int16 scale
// pairs (lane r: row r's scale of values 0-15, then of values 16-31) and their float scales d:
// each half's scale duplicated to both int16 of a lane (the multipliers of vpmaddubsw's pair
// sums), then offset * both scales (the multiplier of the activations' sums per 16), then d.
// One writer for the plain and the interleaved packers, so their products are the same bits.
inline void store_scales16_tail(uint8_t * o, __m256i pairs, __m256 d, int offset) {
    const __m256i first = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                           0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i second = _mm256_add_epi8(first, _mm256_set1_epi8(2));
    _mm256_store_si256((__m256i *) o, _mm256_shuffle_epi8(pairs, first));
    _mm256_store_si256((__m256i *) (o + 32), _mm256_shuffle_epi8(pairs, second));
    _mm256_store_si256((__m256i *) (o + 64), _mm256_mullo_epi16(pairs, _mm256_set1_epi16((int16_t) offset)));
    _mm256_store_ps((float *) (o + 96), d);
}

// 64-byte aligned per-thread scratch (slot 0: weights, slot 1: activations), grown on demand.
static inline uint8_t * scratch(int slot, size_t bytes) {
    return (uint8_t *) ggml_cpu_kernel_scratch(slot == 0 ? GGML_CPU_SCRATCH_PANEL_W : GGML_CPU_SCRATCH_PANEL_X, bytes);
}

inline int32_t load_i32(const uint8_t * p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

inline float fp16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

inline int32_t sum_bytes32(const int8_t * q) {
    const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) q));
    const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (q + 16)));
    const __m256i s = _mm256_madd_epi16(_mm256_add_epi16(v, w), _mm256_set1_epi16(1));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
    return _mm_cvtsi128_si32(t);
}

// Weight rows are short (K values: a few cache lines to a few KB) and a packer reads several at a
// time, so the hardware prefetcher hardly starts on a row before the packer has moved on, and the
// packs wait on memory (most of their time, measured). So each step of a pack fetches the
// matching slice (chunk i of nchunks) of rows [r0, r1) it will read later.
inline void prefetch_row_slice(const uint8_t * w, size_t w_stride, int r0, int r1, int64_t i, int64_t nchunks) {
    const size_t b0 = w_stride * i / nchunks / 64 * 64, b1 = w_stride * (i + 1) / nchunks;
    for (int r = r0; r < r1; ++r) {
        for (size_t b = b0; b < b1; b += 64) _mm_prefetch((const char *) (w + r * w_stride + b), _MM_HINT_T0);
    }
}

// A byte record of a sub-block of S values (per 4-value step the 8 rows' levels, then 64 bytes
// of scales and biases) in the row order of the AVX2 panel's wide_x products (avx2/panel.h): per
// step rows 0, 2, 4, 6, then 1, 3, 5, 7.
template <int S>
inline void wide_order_record(const uint8_t * rec8, uint8_t * out) {
    const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (int k = 0; k < S / 4; ++k) {
        const __m256i v = _mm256_load_si256((const __m256i *) (rec8 + 32 * k));
        _mm256_store_si256((__m256i *) (out + 32 * k), _mm256_permutevar8x32_epi32(v, order));
    }
    std::memcpy(out + 8 * S, rec8 + 8 * S, 64);
}

// Activation concept A: sub(xrow, sb, &qs, &d, &sum): sub-block sb (S values) of a row:
// pointer to its S signed bytes, its scale and d * sum(qs) (kSuper == 1) or sum(qs) (kSuper > 1:
// kSuper consecutive sub-blocks share the scale d); kBlock bytes per block of kBlockValues.
// kUnsignedX: the bytes are packed as q + 128 (unsigned; the sums stay those of q).
// kWide (kSpread only): each group of 4 bytes widened to int16, the 8 bytes spread instead.
template <typename A, int S, int C, bool kSpread = false, bool kUnsignedX = false, bool kWide = false>
void pack_columns(const uint8_t * x, size_t x_stride, int64_t nsb, uint8_t * out) {
    constexpr size_t rec = x_record<S, C, kSpread>;
    constexpr size_t floats_at = kSpread ? (S / 4) * C * 32 : C * S;
    for (int c = 0; c < C; ++c) {
        const uint8_t * xr = x + c * x_stride;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            uint8_t * o = out + sb * rec;
            const int8_t * qs;
            float d, sum;
            A::sub(xr, sb, qs, d, sum);
            const int32_t flip = kUnsignedX ? (int32_t) 0x80808080u : 0;
            if constexpr (kSpread) {
                for (int k = 0; k < S / 4; ++k) {
                    const int32_t q4 = load_i32((const uint8_t *) qs + 4 * k) ^ flip;
                    const __m256i v = kWide ? _mm256_broadcastq_epi64(_mm_cvtepi8_epi16(_mm_cvtsi32_si128(q4)))
                                            : _mm256_set1_epi32(q4);
                    _mm256_store_si256((__m256i *) (o + (k * C + c) * 32), v);
                }
            } else if constexpr (kUnsignedX) {
                for (int k = 0; k < S; k += 16) {
                    const __m128i v = _mm_loadu_si128((const __m128i *) (qs + k));
                    _mm_storeu_si128((__m128i *) (o + c * S + k), _mm_xor_si128(v, _mm_set1_epi8((char) 0x80)));
                }
            } else {
                std::memcpy(o + c * S, qs, S);
            }
            ((float *) (o + floats_at))[c] = d;
            if constexpr (requires { A::kHalfSums; }) {
                const int32_t pair = A::half_sums(qs);   // stored as it is, in the sum's place
                std::memcpy(o + floats_at + 4 * (C + c), &pair, 4);
            } else {
                ((float *) (o + floats_at))[C + c] = sum;
            }
        }
    }
}

// 32-value blocks [fp16 d][32 q] (q8_0) or [fp16 d][fp16 s][32 q] (q8_1, whose s = d * sum(q)
// rounded to fp16 is what the reference kernels use, so use it too).
template <bool kHasSum>
struct act_q8_32 {
    static constexpr int kSuper = 1;
    static constexpr int kBlockValues = 32;
    static constexpr size_t kBlock = kHasSum ? 36 : 34;
    static void sub(const uint8_t * row, int64_t sb, const int8_t *& qs, float & d, float & sum) {
        const uint8_t * b = row + sb * kBlock;
        uint16_t h;
        std::memcpy(&h, b, 2);
        d = fp16_to_f32(h);
        qs = (const int8_t *) (b + (kHasSum ? 4 : 2));
        if constexpr (kHasSum) {
            std::memcpy(&h, b + 2, 2);
            sum = fp16_to_f32(h);
        } else {
            sum = d * (float) sum_bytes32(qs);
        }
    }
};

// q8_0 blocks seen as pairs of 16-value sub-blocks (the k-quants with 16-value sub-scales, whose
// batch activations are q8_0). kShared: the pair shares the block's scale, so the sums are
// returned unscaled and the scale applies once per pair (kSuper = 2); else each half carries
// the scale (kSuper = 1), which costs a multiply per half but no sum registers (AVX2).
template <bool kShared>
struct act_q8_0_halves {
    static constexpr int kSuper = kShared ? 2 : 1;
    static constexpr int kBlockValues = 32;
    static constexpr size_t kBlock = 34;
    static void sub(const uint8_t * row, int64_t sb, const int8_t *& qs, float & d, float & sum) {
        const uint8_t * b = row + (sb / 2) * kBlock;
        uint16_t h;
        std::memcpy(&h, b, 2);
        d = fp16_to_f32(h);
        qs = (const int8_t *) (b + 2 + 16 * (sb % 2));
        const __m128i v = _mm_loadu_si128((const __m128i *) qs);
        // |q| <= 127: the unsigned sums of (q + 128) less 16 * 128
        const __m128i s = _mm_sad_epu8(_mm_xor_si128(v, _mm_set1_epi8((char) 0x80)), _mm_setzero_si128());
        sum = (float) (_mm_cvtsi128_si32(s) + _mm_extract_epi16(s, 4) - 16 * 128);
        if constexpr (!kShared) sum *= d;
    }
};

// q8_0 blocks for decoders whose records carry integer scales per 16 values (kScales16,
// avx2/panel.h): a block is one sub-block of 32, and its packed sum is not d * sum(q) but the
// int16 pair (-sum of values 0-15, -sum of values 16-31) (|sum| <= 16 * 127), which vpmaddwd
// multiplies with the weights' pair (offset * scale of each half) in the product's integers.
struct act_q8_0_half_sums : act_q8_32<false> {
    static constexpr bool kHalfSums = true;
    static int32_t half_sums(const int8_t * qs) {
        // |q| <= 127: the unsigned sums of (q + 128) less 16 * 128 per 8-byte half of each 16
        const __m128i bias = _mm_set1_epi8((char) 0x80);
        const __m128i a = _mm_sad_epu8(_mm_xor_si128(_mm_loadu_si128((const __m128i *) qs), bias), _mm_setzero_si128());
        const __m128i b = _mm_sad_epu8(_mm_xor_si128(_mm_loadu_si128((const __m128i *) (qs + 16)), bias), _mm_setzero_si128());
        const int32_t s0 = _mm_cvtsi128_si32(a) + _mm_extract_epi16(a, 4) - 16 * 128;
        const int32_t s1 = _mm_cvtsi128_si32(b) + _mm_extract_epi16(b, 4) - 16 * 128;
        return (int32_t) ((uint32_t) (uint16_t) (int16_t) -s0 | ((uint32_t) (uint16_t) (int16_t) -s1 << 16));
    }
};

// q8_K super-blocks [float d][256 q][16 int16 sums of 16], seen as sub-blocks of S = 16, 32 or 256;
// one scale per super-block, so the sum is returned unscaled (see the panels' kSuper).
template <int S>
struct act_q8_K {
    static constexpr int kSuper = 256 / S;
    static constexpr int kBlockValues = 256;
    static constexpr size_t kBlock = 4 + 256 + 32;
    static void sub(const uint8_t * row, int64_t sb, const int8_t *& qs, float & d, float & sum) {
        constexpr int per = 256 / S;
        const uint8_t * b = row + (sb / per) * kBlock;
        const int j = (int) (sb % per);
        std::memcpy(&d, b, 4);
        qs = (const int8_t *) (b + 4 + S * j);
        int16_t bs[S / 16];
        std::memcpy(bs, b + 4 + 256 + 2 * (S / 16) * j, sizeof(bs));
        int32_t total = 0;
        for (int16_t v : bs) total += v;
        sum = (float) total;
    }
};

// ---------------------------------------------------------------------------------------------
// k-quant coefficients: a weight value is scale * u + bias per sub-block of 16 (q2_K, q3_K,
// q6_K) or 32 (q4_K, q5_K) values, u the unsigned level the SIMD decoders produce.

inline void coef_q2_K(const void * vb, float * scale, float * bias) {
    const auto * x = (const block_q2_K *) vb;
    const float d = fp16_to_f32(x->d), dm = fp16_to_f32(x->dmin);
    for (int j = 0; j < 16; ++j) {
        scale[j] = d * (x->scales[j] & 0xF);
        bias[j] = -dm * (x->scales[j] >> 4);
    }
}

inline void coef_q3_K(const void * vb, float * scale, float * bias) {
    const auto * x = (const block_q3_K *) vb;
    const float d = fp16_to_f32(x->d);
    int8_t sc[16];
    q3_K_scales(x->scales, sc);
    for (int j = 0; j < 16; ++j) {
        scale[j] = d * sc[j];
        bias[j] = -4.0f * scale[j];   // levels u = q + 4
    }
}

template <typename B>
inline void coef_k4(const void * vb, float * scale, float * bias) {
    const auto * x = (const B *) vb;
    const float d = fp16_to_f32(x->d), dm = fp16_to_f32(x->dmin);
    uint8_t sc[8], mn[8];
    k4_scales_mins(x->scales, sc, mn);
    for (int j = 0; j < 8; ++j) {
        scale[j] = d * sc[j];
        bias[j] = -dm * mn[j];
    }
}

inline void coef_q6_K(const void * vb, float * scale, float * bias) {
    const auto * x = (const block_q6_K *) vb;
    const float d = fp16_to_f32(x->d);
    for (int j = 0; j < 16; ++j) {
        scale[j] = d * x->scales[j];
        bias[j] = -32.0f * scale[j];
    }
}

} // namespace kiln_panel
} // namespace
