// The AVX512 ISA description of the token-generation loop (gemv-interleaved-loop.h) and the
// reader of an earlier registration, shared by
// avx512/quants-interleaved.cpp and avx512/quants-interleaved-vbmi.cpp (each its own copy).
#pragma once

#include "cpu-traits.h"

#include <immintrin.h>

namespace {

// gemv-interleaved-loop.h's ISA: 64-byte vectors, four lane groups.
struct r4k_isa {
    using vi = __m512i;
    using vf = __m512;
    static constexpr int kBytes = 64;
    static vi load(const void * p) { return _mm512_loadu_si512(p); }
    static void store(void * p, vi v) { _mm512_storeu_si512(p, v); }
    static vi bcast16(const void * p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) p)); }
    static vi bcast32(const void * p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) p)); }
    static vi zero() { return _mm512_setzero_si512(); }
    static vi set8(char c) { return _mm512_set1_epi8(c); }
    static vi and_(vi a, vi b) { return _mm512_and_si512(a, b); }
    static vi or_(vi a, vi b) { return _mm512_or_si512(a, b); }
    static vi add16(vi a, vi b) { return _mm512_add_epi16(a, b); }
    static vi add8(vi a, vi b) { return _mm512_add_epi8(a, b); }
    static vi sub8(vi a, vi b) { return _mm512_sub_epi8(a, b); }
    static vi set16(short v) { return _mm512_set1_epi16(v); }
    static vi add32(vi a, vi b) { return _mm512_add_epi32(a, b); }
    static vi srli16_4(vi v) { return _mm512_srli_epi16(v, 4); }
    static vi slli16_4(vi v) { return _mm512_slli_epi16(v, 4); }
    static vi slli16_2(vi v) { return _mm512_slli_epi16(v, 2); }
    static vi rolv32(vi v, vi n) { return _mm512_rolv_epi32(v, n); }
    static vi abs8(vi v) { return _mm512_abs_epi8(v); }
    static vi sign8(vi x, vi s) { return _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(s), _mm512_setzero_si512(), x); }
    static vi select_bit0(vi a, vi b, vi v) { return _mm512_mask_mov_epi8(a, _mm512_test_epi8_mask(v, _mm512_set1_epi8(1)), b); }
    // -1 in the bytes where x & m is not 0, else 0 (sign8 reads the top bit)
    static vi negative_where(vi x, vi m) { return _mm512_movm_epi8(_mm512_test_epi8_mask(x, m)); }
    static vi join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
    // (a & 0x0F) | b in one vpternlogd (0xEA: A & B | C)
    static vi nibble_or(vi a, vi b) { return _mm512_ternarylogic_epi32(a, _mm512_set1_epi8(0x0F), b, 0xEA); }
    static vi srlv32(vi v, vi n) { return _mm512_srlv_epi32(v, n); }
    static vi shuffle(vi v, vi c) { return _mm512_shuffle_epi8(v, c); }
    static vi maddubs(vi u, vi s) { return _mm512_maddubs_epi16(u, s); }
    static vi dot16(vi acc, vi a, vi b) { return _mm512_dpwssd_epi32(acc, a, b); }
    static vi spread(__m256i x, vi idx) { return _mm512_permutexvar_epi32(idx, _mm512_zextsi256_si512(x)); }
    static void widen_u8(__m256i b, vi * out) { out[0] = _mm512_cvtepu8_epi16(b); }
    static void widen_i8(__m256i b, vi * out) { out[0] = _mm512_cvtepi8_epi16(b); }
    static vf zero_ps() { return _mm512_setzero_ps(); }
    static vf set1_ps(float f) { return _mm512_set1_ps(f); }
    static vf cvt(vi v) { return _mm512_cvtepi32_ps(v); }
    static vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
    static vf fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
    static vf fnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
    static vf rows4(__m128 r) { return _mm512_broadcast_f32x4(r); }
    static vf rows8(__m256 r) { return _mm512_broadcast_f32x8(r); }
    static vi bcast256(__m256i v) { return _mm512_broadcast_i64x4(v); }
    static __m256 sum_rows8(vf f) {
        return _mm256_add_ps(_mm512_castps512_ps256(f), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
    }
    static __m128 sum_lanes(vf f) {
        const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(f), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
        return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    }
};

// The kernel of a layout registered before (quants-interleaved-vbmi.cpp finds the panel), kept as
// the many-column path under the lane-shaped loop.
template <ggml_type T>
struct earlier_gemm {
    static inline ggml_gemm_t fn = nullptr;
    static void call(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                     size_t dst_stride, int nr, int nc) {
        fn(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    }
};

} // namespace
