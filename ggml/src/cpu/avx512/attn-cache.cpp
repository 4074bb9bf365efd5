// AVX512 instance of the attention kernels that read f16 / bf16 / q8_0 / q4_0 / q8_KV cache
// rows directly (attn-cache-kernels.h): 16 lanes, 4 key rows x 4 query rows per score pass (16
// accumulators), 4 vectors x 4 output rows per value pass, and 8-row passes (2 key rows, 2
// vectors) for GQA-8 groups; and of the transposed-key prompt kernels (attn-f32-kernels.h).
#include "attn-f32-kernels.h"
#include "avx512/register.h"
#include "avx512/simd.h"

namespace {

struct isa_avx512 {
    using vf = __m512;
    static constexpr int W = 16, KR = 4, QR = 4, CV = 4, KT_R = 8, KT_C = 2;
    static constexpr int PV_R = 6, PV_C = 4;
    static constexpr bool WIDE = true;
    static vf zero() { return _mm512_setzero_ps(); }
    static vf set1(float x) { return _mm512_set1_ps(x); }
    static vf load(const float * p) { return _mm512_loadu_ps(p); }
    static void store(float * p, vf x) { _mm512_storeu_ps(p, x); }
    static vf fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
    static vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
    static vf load_f16(const uint16_t * p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p)); }
    static vf load_bf16(const uint16_t * p) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) p));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
    static vf load_i8(const int8_t * p) {
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) p)));
    }
    static vf load_nib(const uint8_t * p, int hi) {
        __m128i b = _mm_srl_epi16(_mm_loadu_si128((const __m128i *) p), _mm_cvtsi32_si128(4 * hi));
        b = _mm_and_si128(b, _mm_set1_epi8(0x0F));
        return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b));
    }
    static void reduce(const vf (&a)[KR], float * out) { reduce4_ps(a, out); }
    // the 16 sums of 16 accumulators: pairs interleaved and added, then quads, then the four
    // 128-bit lanes of each (45 shuffles and adds, against 80 for four reduce4_ps)
    static constexpr int NACC = 16;
    static void reduce_all(const vf (&a)[NACC], float * out) {
        vf b[8], c[4];
        for (int i = 0; i < 8; ++i) b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
        // c[i], 128-bit lane L, value j: lane L's part of the sum of a[4i + j]
        for (int i = 0; i < 4; ++i) {
            const __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
            c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
        }
        const vf d0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
        const vf d1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x88), _mm512_shuffle_f32x4(c[2], c[3], 0xdd));
        _mm512_storeu_ps(out, _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xdd)));
    }
    // 16 x 16: pairs, then quads within 128-bit lanes, then the lanes themselves
    static void transpose(vf (&r)[W]) {
        vf t[W], u[W];
        for (int i = 0; i < W; i += 2) {
            t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
        }
        // u[4j + c], lane L: value 4L + c of rows 4j..4j+3
        for (int j = 0; j < W; j += 4) {
            for (int h = 0; h < 2; ++h) {
                const __m512d a = _mm512_castps_pd(t[j + h]), b = _mm512_castps_pd(t[j + h + 2]);
                u[j + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
                u[j + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
            }
        }
        for (int c = 0; c < 4; ++c) {
            const vf v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
            const vf w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88), w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
            r[c] = _mm512_shuffle_f32x4(v0, w0, 0x88);
            r[8 + c] = _mm512_shuffle_f32x4(v0, w0, 0xdd);
            r[4 + c] = _mm512_shuffle_f32x4(v1, w1, 0x88);
            r[12 + c] = _mm512_shuffle_f32x4(v1, w1, 0xdd);
        }
    }
};

} // namespace

void ggml_cpu_register_attn_cache_avx512() {
    ggml_cpu_vec_fns f = {};
    f.qk_cache = qk_cache<isa_avx512>;
    f.pv_cache = pv_cache<isa_avx512>;
    f.qk_cells = qk_cells<isa_avx512>;
    f.qk_cells_rows = qk_cells_rows;
    f.cache_reads_more = cache_reads_more;
    f.pack_kt = pack_kt<isa_avx512>;
    f.qk_kt = qk_kt<isa_avx512>;
    f.pv_tile = pv_tile<isa_avx512>;
    ggml_cpu_register_vec(GGML_CPU_ISA_AVX512, f);
}
