// AVX2 instance of the attention kernels that read f16 / bf16 / q8_0 / q4_0 / q8_KV cache
// rows directly (attn-cache-kernels.h): 8 lanes, 4 key rows x 2 query rows per score pass and 2
// vectors x 4 output rows per value pass, so accumulators and operands fit in 16 ymm registers
// (too few for 8-row passes); and of the transposed-key prompt kernels (attn-f32-kernels.h).
#include "attn-f32-kernels.h"
#include "avx2/register.h"
#include "avx2/simd.h"

namespace {

struct isa_avx2 {
    using vf = __m256;
    static constexpr int W = 8, KR = 4, QR = 2, CV = 2, KT_R = 2;
    static constexpr int PV_R = 6, PV_C = 2;
    static constexpr bool WIDE = false;
    static vf zero() { return _mm256_setzero_ps(); }
    static vf set1(float x) { return _mm256_set1_ps(x); }
    static vf load(const float * p) { return _mm256_loadu_ps(p); }
    static void store(float * p, vf x) { _mm256_storeu_ps(p, x); }
    static vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
    static vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
    static vf load_f16(const uint16_t * p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) p)); }
    static vf load_bf16(const uint16_t * p) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    static vf load_i8(const int8_t * p) {
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *) p)));
    }
    static vf load_nib(const uint8_t * p, int hi) {
        __m128i b = _mm_srl_epi16(_mm_loadl_epi64((const __m128i *) p), _mm_cvtsi32_si128(4 * hi));
        b = _mm_and_si128(b, _mm_set1_epi8(0x0F));
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
    }
    static void reduce(const vf (&a)[KR], float * out) { reduce4_ps(a, out); }
    // 8 x 8: pairs, then quads within 128-bit lanes, then the lanes
    static void transpose(vf (&r)[W]) {
        vf t[W], u[W];
        for (int i = 0; i < W; i += 2) {
            t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        // u[4j + c], lane L: value 4L + c of rows 4j..4j+3
        for (int j = 0; j < W; j += 4) {
            for (int h = 0; h < 2; ++h) {
                const __m256d a = _mm256_castps_pd(t[j + h]), b = _mm256_castps_pd(t[j + h + 2]);
                u[j + 2 * h] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, b));
                u[j + 2 * h + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, b));
            }
        }
        for (int c = 0; c < 4; ++c) {
            r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
            r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
        }
    }
};

} // namespace

void ggml_cpu_register_attn_cache_avx2() {
    ggml_cpu_vec_fns f = {};
    f.qk_cache = qk_cache<isa_avx2>;
    f.pv_cache = pv_cache<isa_avx2>;
    f.cache_reads_more = cache_reads_more;
    f.pack_kt = pack_kt<isa_avx2>;
    f.qk_kt = qk_kt<isa_avx2>;
    f.pv_f32 = pv_f32<isa_avx2>;
    ggml_cpu_register_vec(GGML_CPU_ISA_AVX2, f);
}
