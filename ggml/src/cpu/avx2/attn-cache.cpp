// AVX2 instance of the attention kernels that read f16 / bf16 / q8_0 / q4_0 / q8_KV cache
// rows directly (attn-cache-kernels.h): 8 lanes, 4 key rows x 2 query rows per score pass and 2
// vectors x 4 output rows per value pass, so accumulators and operands fit in 16 ymm registers
// (too few for 8-row passes); and of the transposed-key prompt kernels (attn-f32-kernels.h:
// score passes of 6 query rows x 16 keys, 12 accumulators and 8 loads per 12 FMAs; 2 rows x 32
// keys took 6 loads per 8 and the op 12% longer), and the one-pass softmax step of both.
#include "attn-f32-kernels.h"
#include "avx2/register.h"
#include "avx2/simd.h"

namespace {

struct isa_avx2 {
    using vf = __m256;
    static constexpr int W = 8, KR = 4, QR = 2, CV = 2, KT_R = 6, KT_C = 2;
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
    // the 8 sums of 8 accumulators: pairs interleaved and added, then quads, then the two
    // 128-bit lanes
    static constexpr int NACC = 8;
    static void reduce_all(const vf (&a)[NACC], float * out) {
        vf b[4], c[2];
        for (int i = 0; i < 4; ++i) b[i] = _mm256_add_ps(_mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]));
        for (int i = 0; i < 2; ++i) {
            const __m256d x = _mm256_castps_pd(b[2 * i]), y = _mm256_castps_pd(b[2 * i + 1]);
            c[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)), _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
        }
        _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(c[0], c[1], 0x20), _mm256_permute2f128_ps(c[0], c[1], 0x31)));
    }
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

// The online-softmax step of nr rows of 32 scores (nt valid) in one pass each (the table's
// softmax_tile; the generic step makes four passes over a row): scale, mask, the tile's max,
// the rescale of the row's state (acc[dv], M, S) when the max grows, then the weights
// exp(x - M) in place of the scores and their sum added to S. Lanes past nt are -inf (weight 0).
void softmax_rows(int64_t nr, int64_t nt, float * s, float * const * state, int64_t dv, const float * const * mask,
                  const float * slope, float scale) {
    constexpr int NV = 32 / 8;
    __m256i live[NV];
    for (int c = 0; c < NV; ++c) {
        live[c] = _mm256_cmpgt_epi32(_mm256_set1_epi32((int) nt - 8 * c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    for (int64_t r = 0; r < nr; ++r, s += 32) {
        __m256 x[NV];
        for (int c = 0; c < NV; ++c) {
            x[c] = _mm256_blendv_ps(ninf, _mm256_mul_ps(_mm256_loadu_ps(s + 8 * c), vs), _mm256_castsi256_ps(live[c]));
        }
        if (mask[r]) {   // slopes are positive: a -inf mask value keeps its key at -inf
            const __m256 sl = _mm256_set1_ps(slope[r]);
            for (int c = 0; c < NV; ++c) x[c] = _mm256_fmadd_ps(sl, _mm256_maskload_ps(mask[r] + 8 * c, live[c]), x[c]);
        }
        const __m256 mx8 = _mm256_max_ps(_mm256_max_ps(x[0], x[1]), _mm256_max_ps(x[2], x[3]));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx8), _mm256_extractf128_ps(mx8, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const float tile_max = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        float * st = state[r];
        if (tile_max == -INFINITY) {   // nothing visible: zero weights
            for (int c = 0; c < NV; ++c) _mm256_storeu_ps(s + 8 * c, _mm256_setzero_ps());
            continue;
        }
        const float M = ggml_cpu_softmax_raise_max(st, dv, tile_max, [&](float f) {
            const __m256 vf = _mm256_set1_ps(f);
            for (int64_t i = 0; i < dv; i += 8) _mm256_storeu_ps(st + i, _mm256_mul_ps(vf, _mm256_loadu_ps(st + i)));
        });
        const __m256 vm = _mm256_set1_ps(M);
        __m256 sum = _mm256_setzero_ps();
        for (int c = 0; c < NV; ++c) {
            const __m256 e = exp8(_mm256_sub_ps(x[c], vm));
            _mm256_storeu_ps(s + 8 * c, e);
            sum = _mm256_add_ps(sum, e);
        }
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        st[dv + 1] += _mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
    }
}

} // namespace

void ggml_cpu_register_attn_cache_avx2() {
    ggml_cpu_vec_fns f = {};
    f.qk_cache = qk_cache<isa_avx2>;
    f.pv_cache = pv_cache<isa_avx2>;
    f.qk_cells = qk_cells<isa_avx2>;
    f.qk_cells_rows = qk_cells_rows;
    f.cache_reads_more = cache_reads_more;
    f.pack_kt = pack_kt<isa_avx2>;
    f.qk_kt = qk_kt<isa_avx2>;
    f.pv_tile = pv_tile<isa_avx2>;
    f.softmax_tile = softmax_rows;
    ggml_cpu_register_vec(GGML_CPU_ISA_AVX2, f);
}
