// Attention kernels that read the KV cache in its own type (f16, bf16, q8_0, q4_0, q8_KV): the rows are
// widened to f32 in registers as they are used, so a decode step streams the cache once and
// writes nothing back (no f32 copy of a tile). Used by ops-attention.cpp when few query rows
// share a tile (token generation): with many rows a tile decoded once to f32 is cheaper.
//
// Written once over an ISA description; included only by avx2/attn-cache.cpp and
// avx512/attn-cache.cpp, each of which compiles its own copy (internal linkage) with its flags.
// An ISA struct I provides:
//   vf, W (lanes), KR (key rows, always 4) and QR (query rows, <= 4) per score pass, CV (vectors
//   per value chunk), WIDE (whether 8 query rows fit in a pass: 8 x 2 score and 8 x CV/2 value
//   accumulators, for the 8 heads of a GQA-8 group);
//   zero, set1, load (f32), load_f16, load_bf16, load_i8 (W int8), load_nib (W bytes, nibble
//   0 or 1), fma, mul, store, reduce(acc[KR], out[KR]) (horizontal sums), NACC (accumulators of
//   a cell-major score pass) and reduce_all(acc[NACC], out) (their NACC sums, by transposition).
// Row lengths are multiples of 16 (checked by the caller), so no tails: every lane is a value.
#pragma once

#include "ops-common.h"
#include "quants/quants-blocks.h"

#include <immintrin.h>

namespace {

// One W-lane chunk of a cache row, starting at value i (a multiple of W), as f32. A row pointer
// is where the row starts, its header (q8_KV's scale) included.
template <typename I> struct cache_f16 {
    static typename I::vf load(const void * row, int64_t i) { return I::load_f16((const uint16_t *) row + i); }
};
template <typename I> struct cache_bf16 {
    static typename I::vf load(const void * row, int64_t i) { return I::load_bf16((const uint16_t *) row + i); }
};
template <typename I> struct cache_q8_0 {   // value = d * q
    static typename I::vf load(const void * row, int64_t i) {
        const block_q8_0 * b = (const block_q8_0 *) row + i / QK8_0;
        return I::mul(I::set1(_cvtsh_ss(b->d)), I::load_i8(b->qs + i % QK8_0));
    }
};
template <typename I> struct cache_q8_KV {   // row = f32 d, i32 sum of q, int8 q[n]; value = d * q
    static typename I::vf load(const void * row, int64_t i) {
        return I::mul(I::set1(*(const float *) row), I::load_i8((const int8_t *) row + 8 + i));
    }
};
template <typename I> struct cache_q4_0 {   // value = d * (q - 8); values 0..15 low nibbles, 16..31 high
    static typename I::vf load(const void * row, int64_t i) {
        const block_q4_0 * b = (const block_q4_0 *) row + i / QK4_0;
        const int j = (int) (i % QK4_0);
        const float d = _cvtsh_ss(b->d);
        return I::fma(I::set1(d), I::load_nib(b->qs + j % 16, j / 16), I::set1(-8.0f * d));
    }
};

// out[r*os + t] = dot(q[r], k[t]) for r < NQ, t < nk: each chunk of KR key rows is widened once
// and multiplied by all NQ query rows. The NQ x KR sums are reduced four at a time (NQ * KR a
// multiple of 4).
template <typename I, typename L, int NQ, int KR = I::KR>
void qk_cache_t(int64_t n, const float * const * q, const void * const * k, int64_t nk, float * out, int64_t os) {
    using vf = typename I::vf;
    static_assert(NQ * KR % 4 == 0, "sums reduced in fours");
    for (int64_t t = 0; t < nk; t += KR) {
        const int64_t kk = nk - t < KR ? nk - t : KR;
        const void * kr[KR];
        for (int j = 0; j < KR; ++j) kr[j] = k[t + (j < kk ? j : 0)];
        vf acc[NQ * KR];
        for (int a = 0; a < NQ * KR; ++a) acc[a] = I::zero();
        for (int64_t i = 0; i < n; i += I::W) {
            vf kv[KR];
            for (int j = 0; j < KR; ++j) kv[j] = L::load(kr[j], i);
            for (int r = 0; r < NQ; ++r) {
                const vf qv = I::load(q[r] + i);
                for (int j = 0; j < KR; ++j) acc[r * KR + j] = I::fma(qv, kv[j], acc[r * KR + j]);
            }
        }
        float s[NQ * KR];
        for (int a = 0; a < NQ * KR; a += 4) {
            const vf four[4] = { acc[a], acc[a + 1], acc[a + 2], acc[a + 3] };
            I::reduce(four, s + a);
        }
        for (int r = 0; r < NQ; ++r)
            for (int64_t j = 0; j < kk; ++j) out[r * os + t + j] = s[r * KR + j];
    }
}

// y[r] += sum over t < nt of p[r*ps + t] * v[t] for r < NY: CV vectors of every output row stay
// in registers while the value rows stream past.
template <typename I, typename L, int NY, int CV>
void pv_cache_t(int64_t n, float * const * y, const float * p, int64_t ps, const void * const * v, int64_t nt) {
    using vf = typename I::vf;
    for (int64_t i = 0; i < n; i += CV * I::W) {
        vf acc[NY][CV];
        for (int r = 0; r < NY; ++r)
            for (int c = 0; c < CV; ++c) acc[r][c] = I::load(y[r] + i + c * I::W);
        for (int64_t t = 0; t < nt; ++t) {
            vf vv[CV];
            for (int c = 0; c < CV; ++c) vv[c] = L::load(v[t], i + c * I::W);
            for (int r = 0; r < NY; ++r) {
                const vf pr = I::set1(p[r * ps + t]);
                for (int c = 0; c < CV; ++c) acc[r][c] = I::fma(pr, vv[c], acc[r][c]);
            }
        }
        for (int r = 0; r < NY; ++r)
            for (int c = 0; c < CV; ++c) I::store(y[r] + i + c * I::W, acc[r][c]);
    }
}

template <typename I, typename L>
void qk_cache_rows(int64_t n, const float * const * q, int64_t nq, const void * const * k, int64_t nk, float * out,
                   int64_t os) {
    if constexpr (I::WIDE) {
        for (; nq >= 8; nq -= 8, q += 8, out += 8 * os) qk_cache_t<I, L, 8, 2>(n, q, k, nk, out, os);
    }
    for (int64_t r = 0; r < nq; r += I::QR, q += I::QR, out += I::QR * os) {
        switch (nq - r < I::QR ? nq - r : I::QR) {
            case 1: qk_cache_t<I, L, 1>(n, q, k, nk, out, os); break;
            case 2: qk_cache_t<I, L, 2>(n, q, k, nk, out, os); break;
            case 3: qk_cache_t<I, L, 3>(n, q, k, nk, out, os); break;
            default: qk_cache_t<I, L, 4>(n, q, k, nk, out, os); break;
        }
    }
}

template <typename I, typename L, int CV>
void pv_cache_cv(int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny, const void * const * v,
                 int64_t nt) {
    for (int64_t r = 0; r < ny; r += 4, y += 4, p += 4 * ps) {
        switch (ny - r) {
            case 1: pv_cache_t<I, L, 1, CV>(n, y, p, ps, v, nt); break;
            case 2: pv_cache_t<I, L, 2, CV>(n, y, p, ps, v, nt); break;
            case 3: pv_cache_t<I, L, 3, CV>(n, y, p, ps, v, nt); break;
            default: pv_cache_t<I, L, 4, CV>(n, y, p, ps, v, nt); break;
        }
    }
}

template <typename I, typename L>
void pv_cache_rows(int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny, const void * const * v,
                   int64_t nt) {
    if constexpr (I::WIDE) {
        constexpr int CV8 = I::CV / 2;   // 8 rows x CV/2 vectors: the accumulators of 4 x CV
        for (; ny >= 8; ny -= 8, y += 8, p += 8 * ps) {
            if (n % (CV8 * I::W) == 0) {
                pv_cache_t<I, L, 8, CV8>(n, y, p, ps, v, nt);
            } else {
                pv_cache_t<I, L, 8, 1>(n, y, p, ps, v, nt);
            }
        }
        if (ny == 0) return;
    }
    if (n % (I::CV * I::W) == 0) {
        pv_cache_cv<I, L, I::CV>(n, y, p, ps, ny, v, nt);
    } else {
        pv_cache_cv<I, L, 1>(n, y, p, ps, ny, v, nt);
    }
}

// The types beyond ggml_cpu_attn_cache_type's base four that these kernels read (the table's
// cache_reads_more).
bool cache_reads_more(ggml_type type) { return type == GGML_TYPE_Q8_KV; }

// Calls f with the row reader of the cache type. Other types never reach here
// (ggml_cpu_attn_cache_type decides in ops-attention.cpp).
template <typename I, typename F>
void with_cache_reader(ggml_type type, F f) {
    switch (type) {
        case GGML_TYPE_F16: f(cache_f16<I>()); break;
        case GGML_TYPE_BF16: f(cache_bf16<I>()); break;
        case GGML_TYPE_Q8_0: f(cache_q8_0<I>()); break;
        case GGML_TYPE_Q4_0: f(cache_q4_0<I>()); break;
        case GGML_TYPE_Q8_KV: f(cache_q8_KV<I>()); break;
        default: break;
    }
}

template <typename I>
void qk_cache(ggml_type type, int64_t n, const float * const * q, int64_t nq, const void * const * k, int64_t nk,
              float * out, int64_t os) {
    with_cache_reader<I>(type, [&](auto reader) { qk_cache_rows<I, decltype(reader)>(n, q, nq, k, nk, out, os); });
}

template <typename I>
void pv_cache(ggml_type type, int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny,
              const void * const * v, int64_t nt) {
    with_cache_reader<I>(type, [&](auto reader) { pv_cache_rows<I, decltype(reader)>(n, y, p, ps, ny, v, nt); });
}

// ---- decode over whole cells (qk_cells)
//
// A decode step reads each cache cell (the rows of every kv head, side by side in llama's cache)
// once. Read in address order, cell after cell, the cache streams at the speed of a plain read:
// the hardware prefetchers follow an ascending stream, while the head-by-head walk of a tile
// (one head's row every 2 KB, then the next head's) ran at a third of it on a Zen 4 whether or
// not the rows were prefetched in software. So the scores are computed cell-major: for each cell,
// the heads in blocks of HB, each against its RPH query rows, NACC = HB * RPH accumulators reduced
// together; and the cell k_cells_ahead further on, keys and values, is prefetched meanwhile, so
// that the value pass, head by head over the tile, finds its rows in the L2 cache. (Kiln-bench-ops,
// Qwen3-0.6B shape, 28 layers of 1600 f16 cells, one thread on a loaded Zen 4: 25 ms with neither,
// 20 ms with the values only loaded alongside their keys, 14-15 ms with both prefetched 16 cells
// ahead; 8, 32 or 64 cells ahead no better, two threads.)
//
// Query rows are packed by 16-value chunks (qp[(c * nr + r) * 16 + l] = q[r][16c + l], nr rows in
// all), so the NACC rows of a block are adjacent: one pointer, constant offsets.

constexpr int64_t k_cells_ahead = 16;

template <typename I, int NA>
void reduce_n(const typename I::vf (&acc)[NA], float * out) {
    if constexpr (NA == I::NACC) {
        I::reduce_all(acc, out);
    } else {
        for (int a = 0; a < NA; a += 4) {
            const typename I::vf four[4] = { acc[a], a + 1 < NA ? acc[a + 1] : I::zero(), a + 2 < NA ? acc[a + 2] : I::zero(),
                                             a + 3 < NA ? acc[a + 3] : I::zero() };
            float s[4];
            I::reduce(four, s);
            for (int j = 0; j < 4 && a + j < NA; ++j) out[a + j] = s[j];
        }
    }
}

template <typename I, typename L, int HB, int RPH>
void qk_cells_t(int64_t n, const float * qp, int64_t nr, int64_t nh, const char * k, size_t k_cell, size_t k_head,
                int64_t nt, float * out, int64_t os, const char * v, size_t v_cell, size_t k_bytes, size_t v_bytes, int64_t pf_cells) {
    using vf = typename I::vf;
    constexpr int NA = HB * RPH;
    for (int64_t t = 0; t < nt; ++t) {
        const char * cell = k + t * k_cell;
        for (int64_t h0 = 0; h0 < nh; h0 += HB) {
            vf acc[NA];
            for (int a = 0; a < NA; ++a) acc[a] = I::zero();
            // chunk by chunk across the block's heads: NA independent sums in flight (a head at a
            // time, two sums per head for GQA 2, chained their FMAs; the cell's lines are in L2 by
            // now either way: the MoE rows took 12% longer head by head)
            const float * q0 = qp + h0 * RPH * 16;
            for (int64_t i = 0; i < n; i += I::W) {
                const float * qc = q0 + (i >> 4) * nr * 16 + (i & 15);
                for (int hb = 0; hb < HB; ++hb) {
                    const vf kv = L::load(cell + (h0 + hb) * k_head, i);
                    for (int g = 0; g < RPH; ++g) acc[hb * RPH + g] = I::fma(I::load(qc + (hb * RPH + g) * 16), kv, acc[hb * RPH + g]);
                }
            }
            float s[NA];
            reduce_n<I, NA>(acc, s);
            for (int a = 0; a < NA; ++a) out[(h0 * RPH + a) * os + t] = s[a];
        }
        // the cells k_cells_ahead further on, keys and values, are requested into the L2 cache
        // (prefetcht1; into L1 they evicted the lines in use and ran 20% slower)
        if (t + k_cells_ahead < pf_cells) {
            const char * kl = k + (t + k_cells_ahead) * k_cell;
            const char * vl = v + (t + k_cells_ahead) * v_cell;
            for (size_t b = 0; b < k_bytes; b += 64) _mm_prefetch(kl + b, _MM_HINT_T1);
            for (size_t b = 0; b < v_bytes; b += 64) _mm_prefetch(vl + b, _MM_HINT_T1);
        }
    }
}

template <typename I, typename L, int RPH>
void qk_cells_rph(int64_t n, const float * qp, int64_t nr, int64_t nh, const char * k, size_t k_cell, size_t k_head,
                  int64_t nt, float * out, int64_t os, const char * v, size_t v_cell, size_t k_bytes, size_t v_bytes, int64_t pf_cells) {
    constexpr int HB = I::NACC / RPH;
    if (nh % HB == 0) {
        qk_cells_t<I, L, HB, RPH>(n, qp, nr, nh, k, k_cell, k_head, nt, out, os, v, v_cell, k_bytes, v_bytes, pf_cells);
    } else if constexpr (HB > 1) {
        qk_cells_t<I, L, 1, RPH>(n, qp, nr, nh, k, k_cell, k_head, nt, out, os, v, v_cell, k_bytes, v_bytes, pf_cells);
    }
}

// The table's qk_cells: rows per head rph of 1, 2, 4 or 8 (qk_cells_rows says which).
template <typename I>
void qk_cells(ggml_type type, int64_t n, const float * qp, int64_t rph, int64_t nh, const char * k, size_t k_cell,
              size_t k_head, int64_t nt, float * out, int64_t os, const char * v, size_t v_cell, size_t k_bytes, size_t v_bytes, int64_t pf_cells) {
    const int64_t nr = rph * nh;
    with_cache_reader<I>(type, [&](auto reader) {
        using L = decltype(reader);
        switch (rph) {
            case 1: qk_cells_rph<I, L, 1>(n, qp, nr, nh, k, k_cell, k_head, nt, out, os, v, v_cell, k_bytes, v_bytes, pf_cells); break;
            case 2: qk_cells_rph<I, L, 2>(n, qp, nr, nh, k, k_cell, k_head, nt, out, os, v, v_cell, k_bytes, v_bytes, pf_cells); break;
            case 4: qk_cells_rph<I, L, 4>(n, qp, nr, nh, k, k_cell, k_head, nt, out, os, v, v_cell, k_bytes, v_bytes, pf_cells); break;
            case 8: qk_cells_rph<I, L, 8>(n, qp, nr, nh, k, k_cell, k_head, nt, out, os, v, v_cell, k_bytes, v_bytes, pf_cells); break;
            default: break;
        }
    });
}

bool qk_cells_rows(int64_t rph) { return rph == 1 || rph == 2 || rph == 4 || rph == 8; }

} // namespace
