// AVX512 gemm kernels for f32, f16, bf16 and bf16_r16 weights: register tiles of up to 4 weight
// rows x 4 activation columns, 16 accumulators, each weight and activation vector loaded once per
// tile (bf16_r16: 16 woven rows x 8 columns).
#include "avx512/register.h"
#include "cpu-traits.h"
#include "ggml-impl.h"

#include <immintrin.h>

#include <cstring>

namespace {

// Loaders: 16 values (or the first `rem` with a mask) as f32.
struct load_f32 {
    static constexpr size_t elem = 4;
    static __m512 full(const void * p) { return _mm512_loadu_ps(p); }
    static __m512 part(const void * p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct load_f16 {
    static constexpr size_t elem = 2;
    static __m512 full(const void * p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p)); }
    static __m512 part(const void * p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct load_bf16 {
    static constexpr size_t elem = 2;
    static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
    static __m512 full(const void * p) { return widen(_mm256_loadu_si256((const __m256i *) p)); }
    static __m512 part(const void * p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

template <typename L, typename LX, int RR, int CC>
inline void tile(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * dst, size_t ds) {
    __m512 acc[RR][CC];
    for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c) acc[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 xv[CC];
        for (int c = 0; c < CC; ++c) xv[c] = LX::full(x + c * xs + i * LX::elem);
        for (int r = 0; r < RR; ++r) {
            const __m512 wv = L::full(w + r * ws + i * L::elem);
            for (int c = 0; c < CC; ++c) acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
        }
    }
    if (i < n) {
        const __mmask16 m = (__mmask16) ((1u << (n - i)) - 1);
        __m512 xv[CC];
        for (int c = 0; c < CC; ++c) xv[c] = LX::part(x + c * xs + i * LX::elem, m);
        for (int r = 0; r < RR; ++r) {
            const __m512 wv = L::part(w + r * ws + i * L::elem, m);
            for (int c = 0; c < CC; ++c) acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c) dst[c * ds + r] = _mm512_reduce_add_ps(acc[r][c]);
}

template <typename L, typename LX, int RR>
inline void row_block(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * dst, size_t ds, int nc) {
    int c = 0;
    for (; c + 4 <= nc; c += 4) tile<L, LX, RR, 4>(n, w, ws, x + c * xs, xs, dst + c * ds, ds);
    switch (nc - c) {
        case 3: tile<L, LX, RR, 3>(n, w, ws, x + c * xs, xs, dst + c * ds, ds); break;
        case 2: tile<L, LX, RR, 2>(n, w, ws, x + c * xs, xs, dst + c * ds, ds); break;
        case 1: tile<L, LX, RR, 1>(n, w, ws, x + c * xs, xs, dst + c * ds, ds); break;
        default: break;
    }
}

template <typename L, typename LX = L>
void gemm(int64_t n, const void * wv, size_t ws, const void * xv, size_t xs, float * dst, size_t ds, int nr, int nc) {
    const char * w = (const char *) wv;
    const char * x = (const char *) xv;
    int r = 0;
    for (; r + 4 <= nr; r += 4) row_block<L, LX, 4>(n, w + r * ws, ws, x, xs, dst + r, ds, nc);
    switch (nr - r) {
        case 3: row_block<L, LX, 3>(n, w + r * ws, ws, x, xs, dst + r, ds, nc); break;
        case 2: row_block<L, LX, 2>(n, w + r * ws, ws, x, xs, dst + r, ds, nc); break;
        case 1: row_block<L, LX, 1>(n, w + r * ws, ws, x, xs, dst + r, ds, nc); break;
        default: break;
    }
}

// bf16 x bf16 with the AVX512-BF16 dot product: 32 products per instruction.
template <int RR, int CC>
__attribute__((target("avx512bf16")))
inline void tile_bf16dp(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * dst, size_t ds) {
    __m512 acc[RR][CC];
    for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c) acc[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i < n; i += 32) {
        const int64_t left = n - i;
        const __mmask32 m = left >= 32 ? (__mmask32) 0xffffffffu : (__mmask32) ((1u << left) - 1);
        __m512i xv[CC];
        for (int c = 0; c < CC; ++c) xv[c] = _mm512_maskz_loadu_epi16(m, x + c * xs + i * 2);
        for (int r = 0; r < RR; ++r) {
            const __m512i wv = _mm512_maskz_loadu_epi16(m, w + r * ws + i * 2);
            for (int c = 0; c < CC; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh) wv, (__m512bh) xv[c]);
        }
    }
    for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c) dst[c * ds + r] = _mm512_reduce_add_ps(acc[r][c]);
}

template <int RR>
__attribute__((target("avx512bf16")))
inline void row_block_bf16dp(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * dst, size_t ds, int nc) {
    int c = 0;
    for (; c + 4 <= nc; c += 4) tile_bf16dp<RR, 4>(n, w, ws, x + c * xs, xs, dst + c * ds, ds);
    for (; c < nc; ++c) tile_bf16dp<RR, 1>(n, w, ws, x + c * xs, xs, dst + c * ds, ds);
}

__attribute__((target("avx512bf16")))
void gemm_bf16dp(int64_t n, const void * wv, size_t ws, const void * xv, size_t xs, float * dst, size_t ds, int nr, int nc) {
    const char * w = (const char *) wv;
    const char * x = (const char *) xv;
    int r = 0;
    for (; r + 4 <= nr; r += 4) row_block_bf16dp<4>(n, w + r * ws, ws, x, xs, dst + r, ds, nc);
    for (; r < nr; ++r) row_block_bf16dp<1>(n, w + r * ws, ws, x, xs, dst + r, ds, nc);
}

// bf16_r16 weights: 16 rows woven by column pairs (pair i of row k at bf16 32 i + 2 k), which
// is exactly a 16-row operand of vdpbf16ps: one 64-byte load per pair of columns serves every
// activation column (its pair broadcast as one 32-bit element), lane k accumulates row k, and no
// horizontal sum is needed. Without AVX512-BF16 the pair is widened to two f32 vectors (even
// and odd columns) and multiplied with FMA. A tile is the 16 rows of one group times C columns.
inline __m512i bcast_pair(const char * x, int64_t i) {
    int32_t v;
    std::memcpy(&v, x + 4 * i, 4);
    return _mm512_set1_epi32(v);
}

template <int C>
__attribute__((target("avx512bf16")))
void r16_tile_dp(int64_t npairs, const char * g, const char * x, size_t xs, __m512 * acc) {
    for (int64_t i = 0; i < npairs; ++i) {
        const __m512bh wv = (__m512bh) _mm512_loadu_si512(g + 64 * i);
        for (int c = 0; c < C; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], wv, (__m512bh) bcast_pair(x + c * xs, i));
    }
}

template <int C>
void r16_tile_fma(int64_t npairs, const char * g, const char * x, size_t xs, __m512 * acc) {
    const __m512i hi = _mm512_set1_epi32((int) 0xFFFF0000u);
    for (int64_t i = 0; i < npairs; ++i) {
        const __m512i wv = _mm512_loadu_si512(g + 64 * i);
        const __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(wv, 16)), wo = _mm512_castsi512_ps(_mm512_and_si512(wv, hi));
        for (int c = 0; c < C; ++c) {
            const __m512i xp = bcast_pair(x + c * xs, i);
            acc[c] = _mm512_fmadd_ps(we, _mm512_castsi512_ps(_mm512_slli_epi32(xp, 16)), acc[c]);
            acc[c] = _mm512_fmadd_ps(wo, _mm512_castsi512_ps(_mm512_and_si512(xp, hi)), acc[c]);
        }
    }
}

template <bool kDp, int C>
void r16_tile(int64_t n, const char * g, const char * x, size_t xs, float * dst, size_t ds) {
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    if constexpr (kDp) r16_tile_dp<C>(n / 2, g, x, xs, acc);
    else r16_tile_fma<C>(n / 2, g, x, xs, acc);
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(dst + c * ds, acc[c]);
}

template <bool kDp, int C>
inline void r16_columns_tail(int rem, int64_t n, const char * g, const char * x, size_t xs, float * dst, size_t ds) {
    if constexpr (C > 0) {
        if (rem == C) r16_tile<kDp, C>(n, g, x, xs, dst, ds);
        else r16_columns_tail<kDp, C - 1>(rem, n, g, x, xs, dst, ds);
    }
}

// nr a multiple of 16 (whole groups), n even (the weaver pairs columns).
template <bool kDp>
void gemm_bf16_r16(int64_t n, const void * wv, size_t ws, const void * xv, size_t xs, float * dst, size_t ds, int nr, int nc) {
    constexpr int kCols = 8;
    GGML_ASSERT(nr % 16 == 0 && n % 2 == 0 && "bf16_r16 gemm: whole row groups and column pairs");
    const size_t row_size = (size_t) n * 2;
    const char * x = (const char *) xv;
    for (int r0 = 0; r0 < nr; r0 += 16) {
        const char * g = ggml_cpu_contiguous_group((const char *) wv + r0 * ws, ws, row_size, 16);
        int c = 0;
        for (; c + kCols <= nc; c += kCols) r16_tile<kDp, kCols>(n, g, x + c * xs, xs, dst + c * ds + r0, ds);
        r16_columns_tail<kDp, kCols - 1>(nc - c, n, g, x + c * xs, xs, dst + c * ds + r0, ds);
    }
}

// activation encoders
void f32_to_f16_row(const float * x, void * yv, int64_t n) {
    uint16_t * y = (uint16_t *) yv;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_si256((__m256i *) (y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; ++i) y[i] = ggml_compute_fp32_to_fp16(x[i]);
}

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_float_gemm_avx512() {
    ggml_cpu_register_gemm(GGML_TYPE_F32, GGML_CPU_ISA_AVX512, GGML_TYPE_F32, gemm<load_f32>);
    ggml_cpu_register_gemm(GGML_TYPE_F16, GGML_CPU_ISA_AVX512, GGML_TYPE_F32, gemm<load_f16, load_f32>);
    ggml_cpu_register_from_float(GGML_TYPE_F16, GGML_CPU_ISA_AVX512, f32_to_f16_row);
    if (ggml_cpu_has_avx512_bf16()) {
        ggml_cpu_register_gemm(GGML_TYPE_BF16, GGML_CPU_ISA_AVX512, GGML_TYPE_BF16, gemm_bf16dp);
        ggml_cpu_register_gemm(GGML_TYPE_BF16_R16, GGML_CPU_ISA_AVX512, GGML_TYPE_BF16, gemm_bf16_r16<true>);
    } else {
        ggml_cpu_register_gemm(GGML_TYPE_BF16_R16, GGML_CPU_ISA_AVX512, GGML_TYPE_BF16, gemm_bf16_r16<false>);
        ggml_cpu_register_gemm(GGML_TYPE_BF16, GGML_CPU_ISA_AVX512, GGML_TYPE_BF16, gemm<load_bf16>);
    }
}
