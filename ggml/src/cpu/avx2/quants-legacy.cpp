// AVX2 gemm kernels of the 32-value block formats against q8_0 / q8_1 activations:
// q4_0, q4_1, q5_0, q5_1, q6_0, q8_0, iq4_nl, mxfp4; and iq4_xs against q8_K.
//
// Tiles of up to 2 weight rows x 4 activation columns (16 ymm registers). Each block is decoded
// to 32 signed bytes once per tile step and multiplied with every column of the tile using the
// sign trick (maddubs needs unsigned x signed: |w| times x carrying w's sign), then pairs are
// summed to int32 and the block is scaled once in float.
#include "avx2/register.h"
#include "cpu-traits.h"
#include "quants/quants-legacy.h"

#include <immintrin.h>

#include <cstring>

namespace {

inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

inline uint32_t load_u32(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// 16 bytes of nibbles -> 32 bytes in element order (low nibbles, then high nibbles)
inline __m256i nibbles(const uint8_t * qs) {
    const __m128i t = _mm_loadu_si128((const __m128i *) qs);
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// bit j of a 32-bit mask -> 0x10 in byte j
inline __m256i fifth_bits(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int) bits), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long) 0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

inline __m256i table_lookup(const int8_t * kv, __m256i idx) {
    const __m128i t = _mm_loadu_si128((const __m128i *) kv);
    return _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(t), t, 1), idx);
}

struct w_q4_0 {
    using block = block_q4_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static __m256i decode(const block & b) { return _mm256_sub_epi8(nibbles(b.qs), _mm256_set1_epi8(8)); }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_q4_1 {
    using block = block_q4_1;
    using xblock = block_q8_1;
    static constexpr bool kMin = true;
    static __m256i decode(const block & b) { return nibbles(b.qs); }
    static float scale(const block & b) { return h2f(b.d); }
    static float min(const block & b) { return h2f(b.m); }
};

struct w_q5_0 {
    using block = block_q5_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static __m256i decode(const block & b) {
        return _mm256_sub_epi8(_mm256_or_si256(nibbles(b.qs), fifth_bits(load_u32(b.qh))), _mm256_set1_epi8(16));
    }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_q5_1 {
    using block = block_q5_1;
    using xblock = block_q8_1;
    static constexpr bool kMin = true;
    static __m256i decode(const block & b) { return _mm256_or_si256(nibbles(b.qs), fifth_bits(load_u32(b.qh))); }
    static float scale(const block & b) { return h2f(b.d); }
    static float min(const block & b) { return h2f(b.m); }
};

struct w_q6_0 {
    using block = block_q6_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static __m256i decode(const block & b) {
        uint64_t h;
        std::memcpy(&h, b.qh, 8);
        // elements 0-7: bits 0-1 of qh[0..7], 8-15: bits 4-5, 16-23: bits 2-3, 24-31: bits 6-7
        const __m256i hv = _mm256_srlv_epi64(_mm256_set1_epi64x((long long) h), _mm256_setr_epi64x(0, 4, 2, 6));
        const __m256i high = _mm256_slli_epi16(_mm256_and_si256(hv, _mm256_set1_epi8(3)), 4);
        return _mm256_sub_epi8(_mm256_or_si256(nibbles(b.qs), high), _mm256_set1_epi8(32));
    }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_q8_0 {
    using block = block_q8_0;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static __m256i decode(const block & b) { return _mm256_loadu_si256((const __m256i *) b.qs); }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_iq4_nl {
    using block = block_iq4_nl;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static __m256i decode(const block & b) { return table_lookup(kvalues_iq4nl, nibbles(b.qs)); }
    static float scale(const block & b) { return h2f(b.d); }
};

struct w_mxfp4 {
    using block = block_mxfp4;
    using xblock = block_q8_0;
    static constexpr bool kMin = false;
    static __m256i decode(const block & b) { return table_lookup(kvalues_mxfp4, nibbles(b.qs)); }
    static float scale(const block & b) { return e8m0_to_fp32_half(b.e); }
};

// signed w . signed x over 32 bytes -> 8 int32 lanes
inline __m256i dot_i8(__m256i w, __m256i x) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// q8_K activations (and iq4_xs weights) seen as 32-value sub-blocks: sub-block ib of a row
// lives in super-block ib / 8.
struct w_iq4_xs {
    using block = block_iq4_xs;
    using xblock = block_q8_K;
    static constexpr bool kMin = false;
    static constexpr bool kSubBlocks = true;
    static __m256i decode_at(const uint8_t * row, int64_t ib) {
        const block & b = ((const block *) row)[ib / 8];
        return table_lookup(kvalues_iq4nl, nibbles(b.qs + 16 * (ib % 8)));
    }
    static float scale_at(const uint8_t * row, int64_t ib) {
        const block & b = ((const block *) row)[ib / 8];
        return h2f(b.d) * iq4_xs_scale(b, (int) (ib % 8));
    }
};

template <typename W>
inline void load_x(const uint8_t * row, int64_t ib, __m256i & v, float & d) {
    if constexpr (requires { W::kSubBlocks; }) {
        const block_q8_K & b = ((const block_q8_K *) row)[ib / 8];
        v = _mm256_loadu_si256((const __m256i *) (b.qs + 32 * (ib % 8)));
        d = b.d;
    } else {
        const auto & b = ((const typename W::xblock *) row)[ib];
        v = _mm256_loadu_si256((const __m256i *) b.qs);
        d = h2f(b.d);
    }
}

template <typename W>
inline void load_w(const uint8_t * row, int64_t ib, __m256i & v, float & d) {
    if constexpr (requires { W::kSubBlocks; }) {
        v = W::decode_at(row, ib);
        d = W::scale_at(row, ib);
    } else {
        const auto & b = ((const typename W::block *) row)[ib];
        v = W::decode(b);
        d = W::scale(b);
    }
}

template <typename W, int R, int C>
void tile(int64_t nb, const uint8_t * w, size_t w_stride, const uint8_t * x, size_t x_stride, float * dst,
          size_t dst_stride) {
    using WB = typename W::block;
    __m256 acc[R][C];
    float mins[R][C] = {};
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        __m256i xv[C];
        float xd[C];
        for (int c = 0; c < C; ++c) load_x<W>(x + c * x_stride, ib, xv[c], xd[c]);
        for (int r = 0; r < R; ++r) {
            __m256i wv;
            float wd;
            load_w<W>(w + r * w_stride, ib, wv, wd);
            for (int c = 0; c < C; ++c) {
                const __m256 s = _mm256_cvtepi32_ps(dot_i8(wv, xv[c]));
                acc[r][c] = _mm256_fmadd_ps(s, _mm256_set1_ps(wd * xd[c]), acc[r][c]);
            }
            if constexpr (W::kMin) {
                const float m = W::min(((const WB *) (w + r * w_stride))[ib]);
                for (int c = 0; c < C; ++c) mins[r][c] += m * h2f(((const block_q8_1 *) (x + c * x_stride))[ib].s);
            }
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) dst[c * dst_stride + r] = hsum(acc[r][c]) + mins[r][c];
}

template <typename W>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
          int nr, int nc) {
    using tile_fn = void (*)(int64_t, const uint8_t *, size_t, const uint8_t *, size_t, float *, size_t);
    static constexpr tile_fn tiles[2][4] = {
        { tile<W, 1, 1>, tile<W, 1, 2>, tile<W, 1, 3>, tile<W, 1, 4> },
        { tile<W, 2, 1>, tile<W, 2, 2>, tile<W, 2, 3>, tile<W, 2, 4> },
    };
    const int64_t nb = n / 32;
    const auto * wb = (const uint8_t *) w;
    const auto * xb = (const uint8_t *) x;
    for (int r0 = 0; r0 < nr; r0 += 2) {
        const int R = nr - r0 < 2 ? nr - r0 : 2;
        for (int c0 = 0; c0 < nc; c0 += 4) {
            const int C = nc - c0 < 4 ? nc - c0 : 4;
            tiles[R - 1][C - 1](nb, wb + r0 * w_stride, w_stride, xb + c0 * x_stride, x_stride, dst + c0 * dst_stride + r0,
                                dst_stride);
        }
    }
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_legacy_avx2() {
    ggml_cpu_register_gemm(GGML_TYPE_Q4_0, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_q4_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q4_1, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_1, gemm<w_q4_1>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_0, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_q5_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q5_1, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_1, gemm<w_q5_1>);
    ggml_cpu_register_gemm(GGML_TYPE_Q6_0, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_q6_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_0, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_q8_0>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_NL, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_iq4_nl>);
    ggml_cpu_register_gemm(GGML_TYPE_MXFP4, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, gemm<w_mxfp4>);
    ggml_cpu_register_gemm(GGML_TYPE_IQ4_XS, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, gemm<w_iq4_xs>);
}
