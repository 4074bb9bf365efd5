// Prompt attention with AVX512-BF16 products (vdpbf16ps: 32 bf16 multiply-adds into 16 f32 lanes
// per instruction, twice the f32 FMA rate on Zen 4). Used by ops-attention.cpp when many query
// rows share a KV tile, so each tile is packed once and read by every row:
//  - keys as pairs along the head dimension, transposed: kt[d/2][32] holds (k[t][d], k[t][d+1])
//    for the 32 keys t of the tile, so one vector holds a pair for 16 keys and a query pair
//    broadcast to all lanes gives 16 scores' partial sums;
//  - values as pairs along the keys: vt[t/2][Dv] holds (v[t][i], v[t+1][i]), so a broadcast pair
//    of probabilities (p[t], p[t+1]) multiplies 16 output values at once.
// Products are of bf16 values (8-bit mantissas) accumulated in f32; the softmax itself, its
// running max and sums, and the output rows stay f32.
//
// The functions carry target("avx512bf16") and are registered only when cpuid reports the set
// (the folder itself is built without it; see ggml/CMakeLists.txt).
#include "avx512/register.h"
#include "avx512/simd.h"
#include "ops-common.h"

#include <algorithm>
#include <cmath>
#include <immintrin.h>

namespace {

constexpr int k_keys = 32;   // keys per packed tile (ops-attention.cpp's k_tile)

inline __mmask16 first_lanes(int64_t n) { return n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << (n < 0 ? 0 : n)) - 1); }

// 16 f32 -> 16 bf16 (round to nearest even), as the low halves of 16 32-bit lanes
__attribute__((target("avx512bf16"))) inline __m512i bf16_lanes(__m512 x) {
    return _mm512_cvtepu16_epi32((__m256i) _mm512_cvtneps_pbh(x));
}

// f32 rows (n values each, n % 16 == 0) -> bf16, one row after another
__attribute__((target("avx512bf16"))) void rows_bf16(int64_t n, const float * const * x, int64_t nr, uint16_t * y) {
    for (int64_t r = 0; r < nr; ++r, y += n) {
        for (int64_t i = 0; i < n; i += 16) {
            _mm256_storeu_si256((__m256i *) (y + i), (__m256i) _mm512_cvtneps_pbh(_mm512_loadu_ps(x[r] + i)));
        }
    }
}

// 16 values of a row of the cache's float type from value i, as f32
template <ggml_type T> inline __m512 load16(const void * row, int64_t i) {
    if constexpr (T == GGML_TYPE_F16) {
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) ((const uint16_t *) row + i)));
    } else if constexpr (T == GGML_TYPE_BF16) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) ((const uint16_t *) row + i)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    } else {
        return _mm512_loadu_ps((const float *) row + i);
    }
}

// nk <= 32 key rows of n values -> kt[n/2][32] pairs; keys past nk are zero
template <ggml_type T>
__attribute__((target("avx512bf16"))) void pack_k_t(int64_t n, const void * const * k, int64_t nk, uint32_t * kt) {
    alignas(64) uint16_t row[2 * 16];
    for (int64_t t = 0; t < k_keys; ++t) {
        if (t >= nk) {
            for (int64_t dp = 0; dp < n / 2; ++dp) kt[dp * k_keys + t] = 0;
            continue;
        }
        // 16 values at a time: 8 pairs, scattered to their pair rows
        for (int64_t i = 0; i < n; i += 16) {
            _mm256_store_si256((__m256i *) row, (__m256i) _mm512_cvtneps_pbh(load16<T>(k[t], i)));
            const uint32_t * pr = (const uint32_t *) row;
            uint32_t * dst = kt + (i / 2) * k_keys + t;
            for (int j = 0; j < 8; ++j) dst[j * k_keys] = pr[j];
        }
    }
}

// nv <= 32 value rows of n values (n % 16 == 0) -> vt[16][n] pairs; rows past nv are zero
template <ggml_type T>
__attribute__((target("avx512bf16"))) void pack_v_t(int64_t n, const void * const * v, int64_t nv, uint32_t * vt) {
    for (int64_t tp = 0; tp < k_keys / 2; ++tp, vt += n) {
        const int64_t t = 2 * tp;
        for (int64_t i = 0; i < n; i += 16) {
            const __m512i lo = t < nv ? bf16_lanes(load16<T>(v[t], i)) : _mm512_setzero_si512();
            const __m512i hi = t + 1 < nv ? bf16_lanes(load16<T>(v[t + 1], i)) : _mm512_setzero_si512();
            _mm512_storeu_si512(vt + i, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    }
}

void pack_k(ggml_type type, int64_t n, const void * const * k, int64_t nk, uint32_t * kt) {
    switch (type) {
        case GGML_TYPE_F16: pack_k_t<GGML_TYPE_F16>(n, k, nk, kt); break;
        case GGML_TYPE_BF16: pack_k_t<GGML_TYPE_BF16>(n, k, nk, kt); break;
        default: pack_k_t<GGML_TYPE_F32>(n, k, nk, kt); break;
    }
}

void pack_v(ggml_type type, int64_t n, const void * const * v, int64_t nv, uint32_t * vt) {
    switch (type) {
        case GGML_TYPE_F16: pack_v_t<GGML_TYPE_F16>(n, v, nv, vt); break;
        case GGML_TYPE_BF16: pack_v_t<GGML_TYPE_BF16>(n, v, nv, vt); break;
        default: pack_v_t<GGML_TYPE_F32>(n, v, nv, vt); break;
    }
}

// The 16 lanes of each of v[0..15] combined by op into one vector, lane r that of v[r]: a tree
// of lane shuffles (45 operations where 16 separate reductions take 128, and no chain of
// dependent scalar steps per row).
template <typename Op> inline __m512 reduce_rows16(__m512 (&v)[16], Op op) {
    __m512 w[8], u[4], z[2];
    for (int i = 0; i < 8; ++i) {   // rows 2i, 2i+1: 8 partials each
        w[i] = op(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44), _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xee));
    }
    for (int i = 0; i < 4; ++i) {   // 128-bit quarter k: row 4i + k, 4 partials
        u[i] = op(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88), _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xdd));
    }
    for (int i = 0; i < 2; ++i) {   // quarter k: rows 8i + k (lanes 0, 1) and 8i + 4 + k (lanes 2, 3)
        z[i] = op(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44), _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xee));
    }
    // quarter k: rows k, 4 + k, 8 + k, 12 + k; then lane r <- row r
    const __m512 t = op(_mm512_shuffle_ps(z[0], z[1], 0x88), _mm512_shuffle_ps(z[0], z[1], 0xdd));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), t);
}

// The online-softmax step of nr rows, 16 at a time (two vectors of scores each): scale, mask,
// the tiles' maxes, the rescale of a row's state (acc[dv], M, S) when its max grows, then the
// weights exp(x - M) in place of the scores and their sums added to S.
void softmax_rows(int64_t nr, int64_t nt, float * s, float * const * state, int64_t dv, const float * const * mask,
                  const float * slope, float scale) {
    const __mmask16 m0 = first_lanes(nt), m1 = first_lanes(nt - 16);
    const __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t r0 = 0; r0 < nr; r0 += 16, s += 16 * k_keys) {
        const int n = (int) std::min<int64_t>(16, nr - r0);
        __m512 v[16];
        for (int r = 0; r < 16; ++r) {
            if (r >= n) {
                v[r] = ninf;
                continue;
            }
            float * sr = s + r * k_keys;
            __m512 x0 = _mm512_mask_mul_ps(ninf, m0, _mm512_loadu_ps(sr), vs);
            __m512 x1 = _mm512_mask_mul_ps(ninf, m1, _mm512_loadu_ps(sr + 16), vs);
            if (const float * mr = mask[r0 + r]) {
                // slopes are positive, so a -inf mask value keeps its key at -inf
                // (lanes past nt stay -inf: their mask reads as 0)
                const __m512 sl = _mm512_set1_ps(slope[r0 + r]);
                x0 = _mm512_fmadd_ps(sl, _mm512_maskz_loadu_ps(m0, mr), x0);
                x1 = _mm512_fmadd_ps(sl, _mm512_maskz_loadu_ps(m1, mr + 16), x1);
            }
            _mm512_storeu_ps(sr, x0);
            _mm512_storeu_ps(sr + 16, x1);
            v[r] = _mm512_max_ps(x0, x1);
        }
        alignas(64) float tile_max[16];
        _mm512_store_ps(tile_max, reduce_rows16(v, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); }));
        // The rows' running maxes first (their states rescaled where the max grows), then the
        // weights of four rows at a time with no branch between them: an exp16 is a chain of
        // dependent FMAs, and row after row, behind each row's branches, the chains hardly
        // overlapped (the softmax was a tenth of the prompt attention's time).
        alignas(64) float row_max[16];
        for (int r = 0; r < 16; ++r) {
            // nothing visible (or no row): +inf takes every weight to exp(-inf) = 0
            row_max[r] = INFINITY;
            if (r >= n || tile_max[r] == -INFINITY) continue;
            float * st = state[r0 + r];
            row_max[r] = ggml_cpu_softmax_raise_max(st, dv, tile_max[r], [&](float f) {
                const __m512 vf = _mm512_set1_ps(f);
                for (int64_t i = 0; i < dv; i += 16) _mm512_storeu_ps(st + i, _mm512_mul_ps(vf, _mm512_loadu_ps(st + i)));
            });
        }
        for (int q = 0; q < n; q += 4) {
            __m512 e[4][2];
            for (int j = 0; j < 4; ++j) {
                // rows past n: row n - 1 again, its result not stored (s holds only n rows)
                const float * sr = s + std::min(q + j, n - 1) * k_keys;
                const __m512 vm = _mm512_set1_ps(row_max[std::min(q + j, n - 1)]);
                e[j][0] = exp16(_mm512_sub_ps(_mm512_loadu_ps(sr), vm));
                e[j][1] = exp16(_mm512_sub_ps(_mm512_loadu_ps(sr + 16), vm));
            }
            for (int j = 0; j < 4 && q + j < n; ++j) {
                float * sr = s + (q + j) * k_keys;
                _mm512_storeu_ps(sr, e[j][0]);
                _mm512_storeu_ps(sr + 16, e[j][1]);
                v[q + j] = _mm512_add_ps(e[j][0], e[j][1]);
            }
        }
        for (int r = n; r < 16; ++r) v[r] = _mm512_setzero_ps();
        alignas(64) float sums[16];
        _mm512_store_ps(sums, reduce_rows16(v, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); }));
        for (int r = 0; r < n; ++r) state[r0 + r][dv + 1] += sums[r];
    }
}

// out[r*os + t] = dot(q[r], k[t]) for NR rows and the 32 keys of kt: 2 x NR accumulators, each
// key vector reused by every row, each query pair broadcast from memory.
template <int NR>
__attribute__((target("avx512bf16"))) inline void qk_rows(int64_t n, const uint16_t * const * q, const uint32_t * kt,
                                                          float * out, int64_t os) {
    __m512 acc[NR][2];
    for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t dp = 0; dp < n / 2; ++dp, kt += k_keys) {
        const __m512bh k0 = (__m512bh) _mm512_loadu_si512(kt);
        const __m512bh k1 = (__m512bh) _mm512_loadu_si512(kt + 16);
        for (int r = 0; r < NR; ++r) {
            const __m512bh qp = (__m512bh) _mm512_set1_epi32(((const int32_t *) q[r])[dp]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], qp, k0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], qp, k1);
        }
    }
    for (int r = 0; r < NR; ++r) {
        _mm512_storeu_ps(out + r * os, acc[r][0]);
        _mm512_storeu_ps(out + r * os + 16, acc[r][1]);
    }
}

__attribute__((target("avx512bf16"))) void qk_bf16(int64_t n, const uint16_t * const * q, int64_t nq,
                                                   const uint32_t * kt, float * out, int64_t os) {
    int64_t r = 0;
    for (; r + 8 <= nq; r += 8) qk_rows<8>(n, q + r, kt, out + r * os, os);
    switch (nq - r) {
        case 7: qk_rows<7>(n, q + r, kt, out + r * os, os); break;
        case 6: qk_rows<6>(n, q + r, kt, out + r * os, os); break;
        case 5: qk_rows<5>(n, q + r, kt, out + r * os, os); break;
        case 4: qk_rows<4>(n, q + r, kt, out + r * os, os); break;
        case 3: qk_rows<3>(n, q + r, kt, out + r * os, os); break;
        case 2: qk_rows<2>(n, q + r, kt, out + r * os, os); break;
        case 1: qk_rows<1>(n, q + r, kt, out + r * os, os); break;
        default: break;
    }
}

// y[r][i..] += sum over t of p[r][t] * v[t][i..] for NY rows, CV vectors of values at a time;
// pp[r] holds row r's probabilities as bf16 pairs (t, t+1).
template <int NY, int CV>
__attribute__((target("avx512bf16"))) inline void pv_rows(int64_t n, float * const * y, const uint32_t (*pp)[k_keys / 2],
                                                          int64_t ntp, const uint32_t * vt, int64_t i) {
    __m512 acc[NY][CV];
    for (int r = 0; r < NY; ++r)
        for (int c = 0; c < CV; ++c) acc[r][c] = _mm512_loadu_ps(y[r] + i + 16 * c);
    for (int64_t tp = 0; tp < ntp; ++tp) {
        const uint32_t * vr = vt + tp * n + i;
        __m512bh vv[CV];
        for (int c = 0; c < CV; ++c) vv[c] = (__m512bh) _mm512_loadu_si512(vr + 16 * c);
        for (int r = 0; r < NY; ++r) {
            const __m512bh pr = (__m512bh) _mm512_set1_epi32((int32_t) pp[r][tp]);
            for (int c = 0; c < CV; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], pr, vv[c]);
        }
    }
    for (int r = 0; r < NY; ++r)
        for (int c = 0; c < CV; ++c) _mm512_storeu_ps(y[r] + i + 16 * c, acc[r][c]);
}

template <int NY>
__attribute__((target("avx512bf16"))) inline void pv_block(int64_t n, float * const * y, const float * p, int64_t ps,
                                                           const uint32_t * vt, int64_t nt) {
    // the probabilities as bf16 pairs; those past nt are zero (their value rows are zero too,
    // but a stale score there could be inf or NaN)
    alignas(64) uint32_t pp[NY][k_keys / 2];
    for (int r = 0; r < NY; ++r) {
        const __m512i lo = (__m512i) _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(first_lanes(nt - 16), p + r * ps + 16),
                                                          _mm512_maskz_loadu_ps(first_lanes(nt), p + r * ps));
        _mm512_store_si512(pp[r], lo);
    }
    const int64_t ntp = (nt + 1) / 2;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) pv_rows<NY, 4>(n, y, pp, ntp, vt, i);
    for (; i < n; i += 16) pv_rows<NY, 1>(n, y, pp, ntp, vt, i);
}

__attribute__((target("avx512bf16"))) void pv_bf16(int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny,
                                                   const uint32_t * vt, int64_t nt) {
    for (int64_t r = 0; r < ny; r += 4, y += 4, p += 4 * ps) {
        switch (ny - r) {
            case 1: pv_block<1>(n, y, p, ps, vt, nt); break;
            case 2: pv_block<2>(n, y, p, ps, vt, nt); break;
            case 3: pv_block<3>(n, y, p, ps, vt, nt); break;
            default: pv_block<4>(n, y, p, ps, vt, nt); break;
        }
    }
}

} // namespace

void ggml_cpu_register_attn_tile_avx512() {
    ggml_cpu_vec_fns f = {};
    f.softmax_tile = softmax_rows;   // plain AVX512: the f32 tiles use it too
    if (!ggml_cpu_has_avx512_bf16()) {
        ggml_cpu_register_vec(GGML_CPU_ISA_AVX512, f);
        return;
    }
    f.rows_bf16 = rows_bf16;
    f.pack_k_bf16 = pack_k;
    f.pack_v_bf16 = pack_v;
    f.qk_bf16 = qk_bf16;
    f.pv_bf16 = pv_bf16;
    ggml_cpu_register_vec(GGML_CPU_ISA_AVX512, f);
}
