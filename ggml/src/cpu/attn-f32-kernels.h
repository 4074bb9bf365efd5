// Prompt attention in f32 over transposed key tiles: the 32 keys of a tile are packed once as
// kt[d][32] (value d of every key side by side), so a score pass broadcasts one query value and
// multiplies it into whole vectors of keys. Each row's 32 scores come out as complete sums in
// 32/W vectors: no horizontal reductions (the dot-product form, qk_block, ends every 4 x 4 block
// of scores with 16 of them: a third of its work at D = 64, a fifth at D = 128), and the pack is
// a W x W register transpose per block, amortised over every query row that shares the tile.
// f32 products keep f16 caches exact (bf16 products move the golden models past their bounds:
// see make_plan in ops-attention.cpp).
//
// Written once over the ISA description of attn-cache-kernels.h (whose row readers it uses),
// plus from I:
//   transpose(vf (&r)[W]) (r[j] value j of W rows -> r[j] those rows' value j), KT_R query rows
//   x KT_C vectors of keys per score pass, PV_R output rows x PV_C vectors per value pass.
// Included only by avx2/attn-cache.cpp and avx512/attn-cache.cpp.
#pragma once

#include "attn-cache-kernels.h"

namespace {

constexpr int k_kt_keys = 32;   // keys per packed tile (ops-attention.cpp's k_tile)

template <typename I> struct cache_f32 {
    static typename I::vf load(const void * row, int64_t i) { return I::load((const float *) row + i); }
};

// nk <= 32 key rows of n values (n % W == 0) -> kt[n][32]; keys past nk are zero
template <typename I, typename L> void pack_kt_t(int64_t n, const void * const * k, int64_t nk, float * kt) {
    using vf = typename I::vf;
    for (int t0 = 0; t0 < k_kt_keys; t0 += I::W) {
        for (int64_t i = 0; i < n; i += I::W) {
            vf r[I::W];
            for (int j = 0; j < I::W; ++j) r[j] = t0 + j < nk ? L::load(k[t0 + j], i) : I::zero();
            I::transpose(r);
            for (int j = 0; j < I::W; ++j) I::store(kt + (i + j) * k_kt_keys + t0, r[j]);
        }
    }
}

template <typename I>
void pack_kt(ggml_type type, int64_t n, const void * const * k, int64_t nk, float * kt) {
    if (type == GGML_TYPE_F32) {
        pack_kt_t<I, cache_f32<I>>(n, k, nk, kt);
    } else {
        with_cache_reader<I>(type, [&](auto reader) { pack_kt_t<I, decltype(reader)>(n, k, nk, kt); });
    }
}

// out[r*os + t] = dot(q[r], k[t]) for NR rows and KC vectors of keys of kt (from key c0):
// NR x KC accumulators, KC loads and NR broadcasts per query value
template <typename I, int NR, int KC>
void qk_kt_t(int64_t n, const float * const * q, const float * kt, float * out, int64_t os) {
    using vf = typename I::vf;
    vf acc[NR][KC];
    for (int r = 0; r < NR; ++r)
        for (int c = 0; c < KC; ++c) acc[r][c] = I::zero();
    for (int64_t d = 0; d < n; ++d, kt += k_kt_keys) {
        vf kv[KC];
        for (int c = 0; c < KC; ++c) kv[c] = I::load(kt + c * I::W);
        for (int r = 0; r < NR; ++r) {
            const vf qd = I::set1(q[r][d]);
            for (int c = 0; c < KC; ++c) acc[r][c] = I::fma(qd, kv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < NR; ++r)
        for (int c = 0; c < KC; ++c) I::store(out + r * os + c * I::W, acc[r][c]);
}

// NR rows against all 32 keys: 32 / (KC * W) passes
template <typename I, int NR>
void qk_kt_rows(int64_t n, const float * const * q, const float * kt, float * out, int64_t os) {
    for (int c0 = 0; c0 < k_kt_keys; c0 += I::KT_C * I::W) qk_kt_t<I, NR, I::KT_C>(n, q, kt + c0, out + c0, os);
}

// the last nq < NR rows in one pass
template <typename I, int NR>
void qk_kt_tail(int64_t n, const float * const * q, int64_t nq, const float * kt, float * out, int64_t os) {
    if constexpr (NR > 0) {
        if (nq == NR) {
            qk_kt_rows<I, NR>(n, q, kt, out, os);
        } else {
            qk_kt_tail<I, NR - 1>(n, q, nq, kt, out, os);
        }
    }
}

template <typename I>
void qk_kt(int64_t n, const float * const * q, int64_t nq, const float * kt, float * out, int64_t os) {
    static_assert(k_kt_keys % (I::KT_C * I::W) == 0, "passes of whole vectors of keys");
    int64_t r = 0;
    for (; r + I::KT_R <= nq; r += I::KT_R) qk_kt_rows<I, I::KT_R>(n, q + r, kt, out + r * os, os);
    qk_kt_tail<I, I::KT_R - 1>(n, q + r, nq - r, kt, out + r * os, os);
}

// The value pass: pv_cache_t's register tile (PV_R rows x PV_C vectors: fewer reloads of the
// output rows per tile than pv_block's 4) on f32 rows, or on f16 / bf16 cache rows widened in
// registers (the conversions issue beside the FMAs: cheaper than decoding the tile to f32 once
// per unit, whose stores missed L1), any number of rows.
template <typename I, typename L, int CV, int NY>
void pv_tile_tail(int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny, const void * const * v,
                  int64_t nt) {
    if constexpr (NY > 0) {
        if (ny == NY) {
            pv_cache_t<I, L, NY, CV>(n, y, p, ps, v, nt);
        } else {
            pv_tile_tail<I, L, CV, NY - 1>(n, y, p, ps, ny, v, nt);
        }
    }
}

template <typename I, typename L, int CV>
void pv_tile_cv(int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny, const void * const * v,
                int64_t nt) {
    for (; ny >= I::PV_R; ny -= I::PV_R, y += I::PV_R, p += I::PV_R * ps) {
        pv_cache_t<I, L, I::PV_R, CV>(n, y, p, ps, v, nt);
    }
    pv_tile_tail<I, L, CV, I::PV_R - 1>(n, y, p, ps, ny, v, nt);
}

template <typename I, typename L>
void pv_tile_t(int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny, const void * const * v,
               int64_t nt) {
    if (n % (I::PV_C * I::W) == 0) {
        pv_tile_cv<I, L, I::PV_C>(n, y, p, ps, ny, v, nt);
    } else {
        pv_tile_cv<I, L, 1>(n, y, p, ps, ny, v, nt);
    }
}

// y[r] += sum over t < nt of p[r*ps + t] * v[t] for r < ny; v rows f32, f16 or bf16, n % W == 0
template <typename I>
void pv_tile(ggml_type type, int64_t n, float * const * y, const float * p, int64_t ps, int64_t ny,
             const void * const * v, int64_t nt) {
    switch (type) {
        case GGML_TYPE_F16: pv_tile_t<I, cache_f16<I>>(n, y, p, ps, ny, v, nt); break;
        case GGML_TYPE_BF16: pv_tile_t<I, cache_bf16<I>>(n, y, p, ps, ny, v, nt); break;
        default: pv_tile_t<I, cache_f32<I>>(n, y, p, ps, ny, v, nt); break;
    }
}

} // namespace
