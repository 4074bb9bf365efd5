// AVX2 gemm kernels for f32, f16 and bf16 weights: tiles of up to 4 weight rows x 2 columns
// (8 accumulators; AVX2 has 16 vector registers); bf16_r16: 16 woven rows x 3 columns.
#include "avx2/register.h"
#include "cpu-traits.h"
#include "ggml-impl.h"
#include "simd.h"

#include <immintrin.h>

#include <cstring>

namespace {

struct load_f32 {
    static constexpr size_t elem = 4;
    static __m256 full(const void * p) { return _mm256_loadu_ps((const float *) p); }
    static float one(const void * p, int64_t i) { return ((const float *) p)[i]; }
};
struct load_f16 {
    static constexpr size_t elem = 2;
    static __m256 full(const void * p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) p)); }
    static float one(const void * p, int64_t i) { return ggml_compute_fp16_to_fp32(((const uint16_t *) p)[i]); }
};
struct load_bf16 {
    static constexpr size_t elem = 2;
    static __m256 full(const void * p) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) p)), 16));
    }
    static float one(const void * p, int64_t i) { return ggml_compute_bf16_to_fp32(((const uint16_t *) p)[i]); }
};

template <typename L, typename LX, int RR, int CC>
inline void tile(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * dst, size_t ds) {
    __m256 acc[RR][CC];
    for (int r = 0; r < RR; ++r)
        for (int c = 0; c < CC; ++c) acc[r][c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv[CC];
        for (int c = 0; c < CC; ++c) xv[c] = LX::full(x + c * xs + i * LX::elem);
        for (int r = 0; r < RR; ++r) {
            const __m256 wv = L::full(w + r * ws + i * L::elem);
            for (int c = 0; c < CC; ++c) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < RR; ++r) {
        for (int c = 0; c < CC; ++c) {
            float s = hsum8_ps(acc[r][c]);
            for (int64_t k = i; k < n; ++k) s += L::one(w + r * ws, k) * LX::one(x + c * xs, k);
            dst[c * ds + r] = s;
        }
    }
}

template <typename L, typename LX, int RR>
inline void row_block(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * dst, size_t ds, int nc) {
    int c = 0;
    for (; c + 2 <= nc; c += 2) tile<L, LX, RR, 2>(n, w, ws, x + c * xs, xs, dst + c * ds, ds);
    if (c < nc) tile<L, LX, RR, 1>(n, w, ws, x + c * xs, xs, dst + c * ds, ds);
}

template <typename L, typename LX = L>
void gemm(int64_t n, const void * wv, size_t ws, const void * xv, size_t xs, float * dst, size_t ds, int nr, int nc) {
    const char * w = (const char *) wv;
    const char * x = (const char *) xv;
    int r = 0;
    for (; r + 4 <= nr; r += 4) row_block<L, LX, 4>(n, w + r * ws, ws, x, xs, dst + r, ds, nc);
    for (; r < nr; ++r) row_block<L, LX, 1>(n, w + r * ws, ws, x, xs, dst + r, ds, nc);
}

// bf16_r16 weights: 16 rows woven by column pairs (pair i of row k at bf16 32 i + 2 k). Per pair
// of columns the group holds two vectors of 8 rows x (even, odd) bf16; widened to f32 (even: the
// low half of each lane shifted up, odd: the high half masked) they multiply broadcast activation
// values with lane k accumulating row k, so one weight load serves a tile of C columns and no
// horizontal sum is needed.
template <int C>
void r16_tile(int64_t n, const char * g, const char * x, size_t xs, float * dst, size_t ds) {
    const __m256i hi = _mm256_set1_epi32((int) 0xFFFF0000u);
    __m256 acc[2][C];
    for (int h = 0; h < 2; ++h)
        for (int c = 0; c < C; ++c) acc[h][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 2; ++i) {
        __m256 we[2], wo[2];
        for (int h = 0; h < 2; ++h) {
            const __m256i wv = _mm256_loadu_si256((const __m256i *) (g + 64 * i + 32 * h));
            we[h] = _mm256_castsi256_ps(_mm256_slli_epi32(wv, 16));
            wo[h] = _mm256_castsi256_ps(_mm256_and_si256(wv, hi));
        }
        for (int c = 0; c < C; ++c) {
            uint32_t p;
            std::memcpy(&p, x + c * xs + 4 * i, 4);
            const __m256 xe = _mm256_castsi256_ps(_mm256_set1_epi32((int) (p << 16)));
            const __m256 xo = _mm256_castsi256_ps(_mm256_set1_epi32((int) (p & 0xFFFF0000u)));
            for (int h = 0; h < 2; ++h) {
                acc[h][c] = _mm256_fmadd_ps(we[h], xe, acc[h][c]);
                acc[h][c] = _mm256_fmadd_ps(wo[h], xo, acc[h][c]);
            }
        }
    }
    for (int c = 0; c < C; ++c)
        for (int h = 0; h < 2; ++h) _mm256_storeu_ps(dst + c * ds + 8 * h, acc[h][c]);
}

// nr a multiple of 16 (whole groups), n even (the weaver pairs columns).
void gemm_bf16_r16(int64_t n, const void * wv, size_t ws, const void * xv, size_t xs, float * dst, size_t ds, int nr, int nc) {
    GGML_ASSERT(nr % 16 == 0 && n % 2 == 0 && "bf16_r16 gemm: whole row groups and column pairs");
    const size_t row_size = (size_t) n * 2;
    const char * x = (const char *) xv;
    for (int r0 = 0; r0 < nr; r0 += 16) {
        const char * g = ggml_cpu_contiguous_group((const char *) wv + r0 * ws, ws, row_size, 16);
        int c = 0;
        for (; c + 3 <= nc; c += 3) r16_tile<3>(n, g, x + c * xs, xs, dst + c * ds + r0, ds);
        if (nc - c == 2) r16_tile<2>(n, g, x + c * xs, xs, dst + c * ds + r0, ds);
        if (nc - c == 1) r16_tile<1>(n, g, x + c * xs, xs, dst + c * ds + r0, ds);
    }
}

void f32_to_f16_row(const float * x, void * yv, int64_t n) {
    uint16_t * y = (uint16_t *) yv;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128((__m128i *) (y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; ++i) y[i] = ggml_compute_fp32_to_fp16(x[i]);
}

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_float_gemm_avx2() {
    ggml_cpu_register_gemm(GGML_TYPE_F32, GGML_CPU_ISA_AVX2, GGML_TYPE_F32, gemm<load_f32>);
    ggml_cpu_register_gemm(GGML_TYPE_F16, GGML_CPU_ISA_AVX2, GGML_TYPE_F32, gemm<load_f16, load_f32>);
    ggml_cpu_register_gemm(GGML_TYPE_BF16, GGML_CPU_ISA_AVX2, GGML_TYPE_BF16, gemm<load_bf16>);
    ggml_cpu_register_gemm(GGML_TYPE_BF16_R16, GGML_CPU_ISA_AVX2, GGML_TYPE_BF16, gemm_bf16_r16);
    ggml_cpu_register_from_float(GGML_TYPE_F16, GGML_CPU_ISA_AVX2, f32_to_f16_row);
}
