// Flash attention: softmax(q·kᵀ * scale [softcapped] + slope*mask) · v without materialising
// the score matrix.
//
// Work is organised around KV tiles of T key/value rows, used by every query row that shares
// their KV head (all heads of the group and a block of queries), so each cache row is read once
// per unit. How a tile is read depends on how many rows share it:
//  - few (token generation: the G heads of one query): f16/bf16/q8_0/q4_0 rows are read in place
//    by the qk_cache / pv_cache kernels, which widen them in registers; nothing is written. A
//    unit then takes every kv head, and the scores are computed cell by cell in address order
//    (qk_cells, the cells ahead prefetched), the value pass head by head (attend_cells);
//  - many (prompt processing): the tile is packed once and all rows of the unit that see it are
//    computed in one pass: for bf16 and quantized caches on CPUs with AVX512-BF16, as bf16 tiles
//    for the vdpbf16ps kernels (avx512/attn-tile.cpp); otherwise (f16 and f32 caches always: see
//    make_plan) the keys transposed to f32 for the reduction-free score kernel
//    (attn-f32-kernels.h) and the values read in place (f16 / bf16, widened in registers) or
//    decoded to f32 rows. Each row's visible keys are found from its mask first, so only the
//    tiles some row sees are visited and the mask is read only where it is not plain 0;
//  - otherwise (no such kernels, or head sizes they do not take) the tile is decoded to f32 and
//    the blocked f32 kernels run on it, k_group rows at a time.
// A decode unit read in place spans every kv head, so a thread streams whole cache cells, and
// threads share out the cells (a split over the KV length), never the heads of a cell.
// Each query row keeps an online-softmax state (running max M, running sum S, unnormalised
// output acc).
//
// Threads: the (sequence, kv head group, query block) units are dealt out to the threads when they
// share out evenly; otherwise (fewer units than threads, e.g. MLA's single KV head, or a decode
// step whose units do not divide evenly) the KV length is split instead, every thread producing
// partial states that are merged after a barrier (max-rescaled sums, as in split-K softmax).
//
// Attention sinks (src[4], one logit per head) join the softmax denominator only: they are
// folded into the finished state, S + exp(sink - M), when the output row is written.
#include "ops-common.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace {

constexpr int64_t k_tile = 32;          // KV rows per tile
// query rows (heads x queries) sharing a tile (one tile conversion each): 256 rows' queries and
// states (256 KB at 128 values) stay in L2 beside the tiles; from 128, the packing's share
// halved (the bf16 products' prompt op took 7% less time, the f32 ones' 0-3%). Heads of more
// than 256 values and values together (MLA's 576 + 512) keep 128: 256 rows would fill L2.
constexpr int64_t k_rows_target = 256;
constexpr int64_t k_rows_wide_heads = 256;   // D + Dv above which the target halves
constexpr int64_t k_group = 4;          // query rows computed together (register tile)
// ... when the cache is read in place: the G heads of a decode step's kv group (8 in GQA-8
// models) in one pass, so each cache row is widened once for all of them, not once per 4 rows
constexpr int64_t k_group_direct = 8;
constexpr int64_t k_prefetch = 2;      // decode: tiles between the one requested and the one computed
constexpr int64_t k_direct_rows = 8;    // read the cache in place when at most this many rows share a tile
constexpr int64_t k_packed_rows = 16;   // a packed tile (bf16 or transposed f32) when at least this many rows share it
constexpr int64_t k_bf16_max_head = 256;   // ... and heads have at most this many values

// The keys [lo, hi) a query row sees (from the first to the last key its mask leaves above
// -inf) and whether its mask is 0 on all of them (causal and sliding-window masks): the tiles
// wholly inside then need no mask, only the tiles across the edges read it.
struct fa_span {
    int64_t lo, hi;
    bool    plain;
};

struct fa_plan {
    int64_t D, Dv, n_q, n_kv, n_head, n_head_kv, n_seq;
    int64_t G;        // query heads per kv head
    int64_t QB;       // queries per unit
    int64_t HU;       // kv heads per unit (consecutive; > 1 only when the cache is read in place)
    int64_t RH;       // query rows per kv head of a unit (G * QB)
    int64_t R;        // query rows per unit (RH * HU)
    int64_t n_hg;     // kv head groups (n_head_kv / HU)
    int64_t n_qb, n_units;
    bool    split_kv;
    bool    direct_k, direct_v;   // K / V rows read in place (qk_cache / pv_cache)
    bool    bf16;                 // decoded tiles packed to bf16 for the bf16 products (qk_bf16 / pv_bf16)
    bool    f32t;                 // keys packed transposed in f32 for qk_kt, values read in place or decoded
    bool    cells;                // read in place and scored cell by cell (qk_cells): see attend_cells
    int64_t SR;                   // score rows of the scratch (rows computed together)
    size_t  per_thread;   // bytes of each thread's private scratch
    size_t  partial;      // bytes of the shared partial states (split_kv)
};

size_t floats(int64_t n) { return ggml_pad(n * sizeof(float), 64); }

// the scratch of the packed paths: the pass's row pointers (q, state, mask) and slopes, the tiles
size_t packed_bytes(const fa_plan & p) {
    size_t b = 3 * ggml_pad(p.R * sizeof(void *), 64) + floats(p.R) + ggml_pad(p.R * sizeof(fa_span), 64) +
               ggml_pad(p.n_q * sizeof(fa_span), 64);
    if (p.bf16) {
        b += ggml_pad(p.R * p.D * sizeof(uint16_t), 64) + ggml_pad(p.D / 2 * k_tile * sizeof(uint32_t), 64) +
             ggml_pad(k_tile / 2 * p.Dv * sizeof(uint32_t), 64);
    }
    if (p.f32t) b += floats(p.D * k_tile);
    return b;
}

fa_plan make_plan(const ggml_tensor * dst, int nth) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    fa_plan p;
    p.D = q->ne[0];
    p.Dv = v->ne[0];
    p.n_q = q->ne[1];
    p.n_kv = k->ne[1];
    p.n_head = q->ne[2];
    p.n_head_kv = k->ne[2];
    p.n_seq = q->ne[3];
    p.G = p.n_head / p.n_head_kv;
    const int64_t rows_target = p.D + p.Dv > k_rows_wide_heads ? k_rows_target / 2 : k_rows_target;
    p.QB = std::min(p.n_q, std::max<int64_t>(1, rows_target / p.G));
    p.RH = p.G * p.QB;
    p.n_qb = (p.n_q + p.QB - 1) / p.QB;
    const auto & vec = ggml_cpu_vec();
    auto in_place = [&](const ggml_tensor * t, int64_t n) {
        return vec.qk_cache && p.RH <= k_direct_rows && ggml_cpu_attn_cache_type(vec, t->type, n) &&
               t->nb[0] == ggml_type_size(t->type);
    };
    p.direct_k = in_place(k, p.D);
    p.direct_v = in_place(v, p.Dv);
    // A decode step read in place is a stream of the cache: a unit takes every kv head and
    // walks their tiles together, so a thread reads whole cells (one contiguous run per cell in
    // llama's cache), and threads share the cells out, not the heads. Reading a share of every
    // cell costs a thread as much as reading all of it: kiln-bench-ops' "read/h" rows (half of
    // each 2 KB cell per thread, two threads) took 4.4x the CPU time of "read" (contiguous
    // halves of the cells) on a Zen 4, and one thread reading 1 KB of every 2 KB took as long as
    // reading all of them.
    p.HU = p.direct_k && p.direct_v ? p.n_head_kv : 1;
    p.R = p.RH * p.HU;
    // Many rows per decoded tile (prompt processing) of a bf16 or quantized cache: bf16 products
    // where the CPU has them, at twice the f32 rate. Their rounding (8-bit mantissas for q and
    // the weights p) is within what such a cache already loses, but not within an f16 cache's:
    // on f16 caches the golden models moved by mean KLD 2.5e-5 (synth-qwen3) to 1.4e-3
    // (synth-gpt-oss, over the 1e-3 bound), so f16 and f32 caches keep f32 products. Nor for
    // heads over k_bf16_max_head values: MLA's 576/512-value latent heads lost the most (5.3e-3).
    auto bf16_cache = [](ggml_type t) { return t != GGML_TYPE_F32 && t != GGML_TYPE_F16; };
    const bool packed = !p.direct_k && !p.direct_v && p.R >= k_packed_rows && p.D % 16 == 0;
    p.bf16 = packed && vec.qk_bf16 && p.Dv % 16 == 0 && p.D <= k_bf16_max_head && p.Dv <= k_bf16_max_head &&
             bf16_cache(k->type) && bf16_cache(v->type);
    // Everything else with many rows per tile: f32 products, exact for f16 caches, on keys
    // transposed once per tile (no horizontal sums), all rows of the unit in one pass.
    p.f32t = packed && !p.bf16 && vec.qk_kt && vec.pack_kt && vec.pv_block;
    p.SR = p.bf16 || p.f32t ? p.R : p.direct_k && p.direct_v ? k_group_direct : k_group;
    // Read in place, with query rows per head that qk_cells takes: scores cell after cell, every
    // head of a cell together (attend_cells).
    p.cells = p.HU > 1 && vec.qk_cells && vec.qk_cells_rows(p.RH);
    if (p.cells) p.SR = p.R;
    p.n_hg = p.n_head_kv / p.HU;
    p.n_units = p.n_seq * p.n_hg * p.n_qb;
    // One query, or a cache read in place: every unit costs the same, so whole units dealt out
    // evenly need no merge and no second barrier (each barrier can cost a time slice on a busy
    // machine); the KV length is split only when the units cannot be shared out evenly.
    const bool uneven = (p.n_q == 1 || p.HU > 1) && p.n_units % nth != 0 && p.n_units < 8 * nth;
    p.split_kv = nth > 1 && (p.n_units < nth || uneven);
    p.per_thread = floats(p.R * p.D) + floats(k_tile * p.D) + floats(k_tile * p.Dv) + 2 * floats(p.SR * k_tile) +
                   floats(p.R * (p.Dv + 2)) + ggml_pad(2 * k_tile * sizeof(void *), 64) +
                   ggml_pad(p.R * 2 * sizeof(void *), 64) + floats(p.R);
    if (p.bf16 || p.f32t) p.per_thread += packed_bytes(p);
    if (p.cells) p.per_thread += floats(p.R * p.D) + ggml_pad(3 * p.R * sizeof(void *), 64);
    p.partial = p.split_kv ? floats((int64_t) nth * p.n_seq * p.n_q * p.n_head * (p.Dv + 2)) : 0;
    return p;
}

// The per-thread scratch carved out of wdata.
struct fa_scratch {
    float * q;              // R rows of D (decoded queries)
    float * ktile;          // T rows of D
    float * vtile;          // T rows of Dv
    float * scores;         // SR rows of T
    float * mvals;          // SR rows of T (mask values)
    float * state;          // R rows of (acc[Dv], M, S)
    const void ** krow;     // T (f32 rows, or cache rows when read in place)
    const void ** vrow;     // T
    const float ** qrow;    // R
    const char ** mrow;     // R (mask rows, NULL without mask)
    float * slope;          // R
    // packed paths (p.bf16, p.f32t): the rows of a tile's pass
    const void ** qp;       // R: query rows (bf16 rows of qb, or f32 rows)
    float ** accp;          // R
    const float ** mvp;     // R
    float * slp;            // R
    fa_span * span;         // R: the keys each row sees
    fa_span * qspan;        // n_q: the spans of a mask shared by all heads, by query (lo < 0: not yet found)
    // bf16 path only
    uint16_t * qb;          // R rows of D, bf16
    uint32_t * kt;          // packed key tile [D/2][k_tile]
    uint32_t * vt;          // packed value tile [k_tile/2][Dv]
    // f32t path only
    float * ktf;            // transposed key tile [D][k_tile]
    // cells path only
    float * q16;            // the unit's query rows packed by 16-value chunks (qk_cells)
    float ** accc;          // R: the rows' states
    const float ** mvc;     // R: the rows' mask values on the tile
    const char ** mlast;    // R: ... and the mask rows they came from
};

fa_scratch carve(const fa_plan & p, char * base) {
    fa_scratch s = {};
    auto take = [&](size_t bytes) { char * r = base; base += bytes; return r; };
    s.q = (float *) take(floats(p.R * p.D));
    s.ktile = (float *) take(floats(k_tile * p.D));
    s.vtile = (float *) take(floats(k_tile * p.Dv));
    s.scores = (float *) take(floats(p.SR * k_tile));
    s.mvals = (float *) take(floats(p.SR * k_tile));
    s.state = (float *) take(floats(p.R * (p.Dv + 2)));
    s.krow = (const void **) take(ggml_pad(2 * k_tile * sizeof(void *), 64));
    s.vrow = s.krow + k_tile;
    s.qrow = (const float **) take(ggml_pad(p.R * 2 * sizeof(void *), 64));
    s.mrow = (const char **) (s.qrow + p.R);
    s.slope = (float *) take(floats(p.R));
    if (p.bf16 || p.f32t) {
        s.qp = (const void **) take(ggml_pad(p.R * sizeof(void *), 64));
        s.accp = (float **) take(ggml_pad(p.R * sizeof(void *), 64));
        s.mvp = (const float **) take(ggml_pad(p.R * sizeof(void *), 64));
        s.slp = (float *) take(floats(p.R));
        s.span = (fa_span *) take(ggml_pad(p.R * sizeof(fa_span), 64));
        s.qspan = (fa_span *) take(ggml_pad(p.n_q * sizeof(fa_span), 64));
    }
    if (p.bf16) {
        s.qb = (uint16_t *) take(ggml_pad(p.R * p.D * sizeof(uint16_t), 64));
        s.kt = (uint32_t *) take(ggml_pad(p.D / 2 * k_tile * sizeof(uint32_t), 64));
        s.vt = (uint32_t *) take(ggml_pad(k_tile / 2 * p.Dv * sizeof(uint32_t), 64));
    }
    if (p.f32t) s.ktf = (float *) take(floats(p.D * k_tile));
    if (p.cells) {
        s.q16 = (float *) take(floats(p.R * p.D));
        s.accc = (float **) take(ggml_pad(3 * p.R * sizeof(void *), 64));
        s.mvc = (const float **) (s.accc + p.R);
        s.mlast = (const char **) (s.accc + 2 * p.R);
    }
    return s;
}

struct fa_args {
    const ggml_tensor *q, *k, *v, *mask;
    float scale, max_bias, softcap;
};

// Query row ri of a unit (head group hg, queries from iq0, nq of them): rows are kv-head-major,
// then query-major, the G heads of one query adjacent (they share its mask row).
struct fa_row {
    int64_t h, iq;
};
fa_row unit_row(const fa_plan & p, int64_t hg, int64_t iq0, int64_t nq, int64_t ri) {
    const int64_t per_head = nq * p.G;
    const int64_t hk = hg * p.HU + ri / per_head;
    const int64_t r = ri % per_head;
    return { hk * p.G + r % p.G, iq0 + r / p.G };
}

// Online softmax update of ng rows on their scores of one tile (rows of k_tile, nt valid):
// the scores become the rows' weights exp(x - M) and each row's (acc, M, S) is rescaled to a
// new max. Rows with nothing visible get zero weights.
void softmax_update(const fa_plan & p, const fa_args & a, int64_t ng, int64_t nt, float * scores, float * const * acc,
                    const float * const * mv, const float * slope) {
    const auto & vec = ggml_cpu_vec();
    for (int64_t g = 0; g < ng; ++g) {
        float * sg = scores + g * k_tile;
        if (a.softcap > 0.0f) {
            for (int64_t t = 0; t < nt; ++t) sg[t] = a.softcap * std::tanh(sg[t] * a.scale / a.softcap);
        } else {
            vec.scale_bias(nt, sg, sg, a.scale, 0.0f);
        }
        // slopes are positive, so a -inf mask value keeps its key at -inf
        if (mv[g]) vec.axpy(nt, sg, slope[g], mv[g]);
        const float tile_max = vec.max(nt, sg);
        float * st = acc[g];
        if (tile_max == -INFINITY) {
            std::memset(sg, 0, nt * sizeof(float));
            continue;
        }
        const float M = ggml_cpu_softmax_raise_max(st, p.Dv, tile_max, [&](float f) { vec.scale_bias(p.Dv, st, st, f, 0.0f); });
        st[p.Dv + 1] += vec.exp_sum(nt, sg, sg, M);
    }
}

// Position i of a sequence of n dealt round-robin to nth threads, every other round of nth
// reversed (a round cut short by n stays in order).
int64_t snake(int64_t i, int64_t nth, int64_t n) {
    const int64_t round = i / nth, first = round * nth;
    return round % 2 == 1 && first + nth <= n ? first + nth - 1 - (i - first) : i;
}

// The span of a mask row (f32 or f16) over keys [kv0, kv1): a scan from each end for the
// first key not at -inf, and a bitwise test that everything between is +-0 (exact, and a loop
// the compiler vectorises). Read once per row and unit instead of once per row and tile, where
// rows a few KB apart missed the caches (a tenth of the prompt op's time at depth 1024).
template <typename T> fa_span mask_span_t(const T * m, int64_t kv0, int64_t kv1, T neg_inf, T magnitude) {
    int64_t lo = kv0, hi = kv1;
    while (lo < hi && m[lo] == neg_inf) ++lo;
    while (hi > lo && m[hi - 1] == neg_inf) --hi;
    T any = 0;
    for (int64_t j = lo; j < hi; ++j) any |= m[j] & magnitude;
    return { lo, hi, any == 0 };
}

fa_span mask_span(const ggml_tensor * mask, const char * row, int64_t kv0, int64_t kv1) {
    if (!row) return { kv0, kv1, true };
    if (mask->type == GGML_TYPE_F16) {
        return mask_span_t<uint16_t>((const uint16_t *) row, kv0, kv1, 0xfc00, 0x7fff);
    }
    return mask_span_t<uint32_t>((const uint32_t *) row, kv0, kv1, 0xff800000u, 0x7fffffffu);
}

// Rows [j0, j1) of kv head hk of K or V requested into L2 (the packed paths: their tiles are one
// head's share of each cell, too far apart for the hardware prefetchers; into L1 they would be
// evicted by the query rows and states streamed through it before they are read).
void prefetch_rows_l2(const ggml_tensor * t, int64_t sq, int64_t hk, int64_t j0, int64_t j1) {
    const size_t bytes = ggml_row_size(t->type, t->ne[0]);
    for (int64_t j = j0; j < j1; ++j) {
        const char * row = ggml_cpu_row_ptr(t, j, hk, sq);
        for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
    }
}

// The tile for the packed paths: every row of [r0, r1) that sees a key of it is computed in one
// pass (one packing of K and V, shared by all of them).
void attend_tile_packed(const fa_plan & p, const fa_args & a, fa_scratch & sc, int64_t sq, int64_t hk, int64_t r0,
                        int64_t r1, int64_t j0, int64_t nt, int64_t next0, int64_t next1) {
    const auto & vec = ggml_cpu_vec();
    const int64_t stride = p.Dv + 2;
    int64_t na = 0;
    // consecutive rows of one query share its mask row: its conversion and verdict are reused
    const char * last = nullptr;
    const float * last_m = nullptr;
    for (int64_t ri = r0; ri < r1; ++ri) {
        const fa_span & sp = sc.span[ri];
        if (sp.hi <= j0 || sp.lo >= j0 + nt) continue;   // no key of the tile visible
        const float * m = nullptr;
        if (!sp.plain || sp.lo > j0 || sp.hi < j0 + nt) {   // the mask has something to say here
            if (sc.mrow[ri] != last) {
                last = sc.mrow[ri];
                if (a.mask->type == GGML_TYPE_F16) {
                    float * dst = sc.mvals + na * k_tile;
                    vec.f16_to_f32(nt, dst, (const uint16_t *) last + j0);
                    last_m = dst;
                } else {
                    last_m = (const float *) last + j0;
                }
                // a mask with holes (other sequences' cells in a batch of several) may hide the
                // whole tile inside the span; a plain one shows a key of every tile it crosses
                if (!sp.plain && vec.max(nt, last_m) == -INFINITY) last_m = nullptr;
            }
            if (!last_m) continue;
            m = last_m;
        }
        sc.qp[na] = p.bf16 ? (const void *) (sc.qb + ri * p.D) : (const void *) sc.qrow[ri];
        sc.accp[na] = sc.state + ri * stride;
        sc.mvp[na] = m;
        sc.slp[na] = sc.slope[ri];
        ++na;
    }
    if (na == 0) return;   // the tile is never read
    // Rows the packers read in place (half floats for the bf16 packers; f32 and the types the
    // in-place kernels read for pack_kt) are handed over as they are; others are decoded to f32.
    auto rows = [&](const ggml_tensor * t, float * tile, int64_t n, const void ** out, bool in_place) {
        for (int64_t i = 0; i < nt; ++i) {
            out[i] = in_place ? (const void *) ggml_cpu_row_ptr(t, j0 + i, hk, sq)
                              : (const void *) ggml_cpu_load_row(t, j0 + i, hk, sq, tile + i * n);
        }
        return in_place ? t->type : GGML_TYPE_F32;
    };
    auto dense = [](const ggml_tensor * t) { return t->nb[0] == ggml_type_size(t->type); };
    if (p.bf16) {
        auto half = [&](const ggml_tensor * t) {
            return (t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_BF16) && dense(t);
        };
        vec.pack_k_bf16(rows(a.k, sc.ktile, p.D, sc.krow, half(a.k)), p.D, sc.krow, nt, sc.kt);
        vec.pack_v_bf16(rows(a.v, sc.vtile, p.Dv, sc.vrow, half(a.v)), p.Dv, sc.vrow, nt, sc.vt);
        prefetch_rows_l2(a.k, sq, hk, next0, next1);
        vec.qk_bf16(p.D, (const uint16_t * const *) sc.qp, na, sc.kt, sc.scores, k_tile);
    } else {
        const bool k_in_place =
            dense(a.k) && (a.k->type == GGML_TYPE_F32 || ggml_cpu_attn_cache_type(vec, a.k->type, p.D));
        vec.pack_kt(rows(a.k, sc.ktile, p.D, sc.krow, k_in_place), p.D, sc.krow, nt, sc.ktf);
        // the next tile's keys are requested during this one's score pass, its values during the
        // value pass (in one burst, the requests waited for free miss buffers: 3% of the op)
        prefetch_rows_l2(a.k, sq, hk, next0, next1);
        vec.qk_kt(p.D, (const float * const *) sc.qp, na, sc.ktf, sc.scores, k_tile);
    }
    if (a.softcap > 0.0f || !vec.softmax_tile || p.Dv % 16 != 0) {   // (softmax_tile rescales 16 values at a time)
        softmax_update(p, a, na, nt, sc.scores, sc.accp, sc.mvp, sc.slp);
    } else {
        vec.softmax_tile(na, nt, sc.scores, sc.accp, p.Dv, sc.mvp, sc.slp, a.scale);
    }
    if (p.bf16) {
        prefetch_rows_l2(a.v, sq, hk, next0, next1);
        vec.pv_bf16(p.Dv, sc.accp, sc.scores, k_tile, na, sc.vt, nt);
        return;
    }
    // f16 / bf16 value rows are widened in the value pass's registers, others decoded first
    const bool widen = vec.pv_tile && p.Dv % 16 == 0 && dense(a.v) &&
                       (a.v->type == GGML_TYPE_F16 || a.v->type == GGML_TYPE_BF16);
    const ggml_type vt = rows(a.v, sc.vtile, p.Dv, sc.vrow, widen);
    prefetch_rows_l2(a.v, sq, hk, next0, next1);
    if (vec.pv_tile && p.Dv % 16 == 0) {
        vec.pv_tile(vt, p.Dv, sc.accp, sc.scores, k_tile, na, sc.vrow, nt);
        return;
    }
    const float * const * vf = (const float * const *) sc.vrow;
    for (int64_t r = 0; r < na; r += k_group) {
        vec.pv_block(p.Dv, sc.accp + r, sc.scores + r * k_tile, k_tile, std::min(k_group, na - r), vf, nt);
    }
}

// One KV tile [j0, j0 + nt) of kv head hk for the unit's rows [r0, r1) (all of that kv head).
void attend_tile(const fa_plan & p, const fa_args & a, fa_scratch & sc, int64_t sq, int64_t hk, int64_t r0,
                 int64_t r1, int64_t j0, int64_t nt) {
    const auto & vec = ggml_cpu_vec();
    const int64_t stride = p.Dv + 2;
    // the tile is decoded when the first row needs it: tiles that every row masks out
    // entirely (causal prefill, padding) are never read
    bool decoded = false;
    int64_t ri = r0;
    // the heads of one query share its mask row (rows ri are query-major): a row whose mask
    // is the one just seen reuses its conversion, or its verdict that all keys are masked
    const char * masked_row = nullptr;
    while (ri < r1) {
        // gather up to SR rows that see at least one key of this tile
        int64_t grp[k_group_direct];
        const float * mv[k_group_direct];
        int64_t ng = 0;
        for (; ri < r1 && ng < p.SR; ++ri) {
            const float * m = nullptr;
            if (sc.mrow[ri] && sc.mrow[ri] == masked_row) continue;
            if (sc.mrow[ri] && ng > 0 && sc.mrow[ri] == sc.mrow[grp[ng - 1]]) {
                m = mv[ng - 1];
            } else if (sc.mrow[ri]) {
                if (a.mask->type == GGML_TYPE_F16) {
                    float * dst = sc.mvals + ng * k_tile;
                    vec.f16_to_f32(nt, dst, (const uint16_t *) sc.mrow[ri] + j0);
                    m = dst;
                } else {
                    m = (const float *) sc.mrow[ri] + j0;
                }
                if (vec.max(nt, m) == -INFINITY) {
                    masked_row = sc.mrow[ri];
                    continue;
                }
            }
            grp[ng] = ri;
            mv[ng] = m;
            ++ng;
        }
        if (ng == 0) break;
        if (!decoded) {
            for (int64_t t = 0; t < nt; ++t) {
                sc.krow[t] = p.direct_k ? (const void *) ggml_cpu_row_ptr(a.k, j0 + t, hk, sq)
                                        : ggml_cpu_load_row(a.k, j0 + t, hk, sq, sc.ktile + t * p.D);
                sc.vrow[t] = p.direct_v ? (const void *) ggml_cpu_row_ptr(a.v, j0 + t, hk, sq)
                                        : ggml_cpu_load_row(a.v, j0 + t, hk, sq, sc.vtile + t * p.Dv);
            }
            decoded = true;
        }
        const float * qs[k_group_direct];
        float * acc[k_group_direct];
        for (int64_t g = 0; g < ng; ++g) {
            qs[g] = sc.qrow[grp[g]];
            acc[g] = sc.state + grp[g] * stride;
        }
        const float * const * kf = (const float * const *) sc.krow;
        if (p.direct_k) {
            vec.qk_cache(a.k->type, p.D, qs, ng, sc.krow, nt, sc.scores, k_tile);
        } else if (vec.qk_block) {
            vec.qk_block(p.D, qs, ng, kf, nt, sc.scores, k_tile);
        } else {
            for (int64_t g = 0; g < ng; ++g) vec.dot_rows(p.D, qs[g], kf, nt, sc.scores + g * k_tile);
        }
        float sl[k_group_direct];
        for (int64_t g = 0; g < ng; ++g) sl[g] = sc.slope[grp[g]];
        if (vec.softmax_tile && a.softcap == 0.0f && p.Dv % 16 == 0) {   // (it rescales acc 16 values at a time)
            vec.softmax_tile(ng, nt, sc.scores, acc, p.Dv, mv, sl, a.scale);
        } else {
            softmax_update(p, a, ng, nt, sc.scores, acc, mv, sl);
        }
        const float * const * vf = (const float * const *) sc.vrow;
        if (p.direct_v) {
            vec.pv_cache(a.v->type, p.Dv, acc, sc.scores, k_tile, ng, sc.vrow, nt);
        } else if (vec.pv_block) {
            vec.pv_block(p.Dv, acc, sc.scores, k_tile, ng, vf, nt);
        } else {
            for (int64_t g = 0; g < ng; ++g) vec.axpy_rows(p.Dv, acc[g], sc.scores + g * k_tile, vf, nt);
        }
    }
}

// One KV tile [j0, j0 + nt) of the unit's cells [.., kv1) for every row of a decode unit (all kv
// heads, p.cells): the scores of all heads cell after cell (qk_cells, which prefetches the cells
// ahead, keys and values), one softmax step over all rows, then the value pass head by head on
// rows now in the L2 cache.
// A row whose mask hides the whole tile gets zero weights; a tile hidden from every row is not
// read at all.
void attend_cells(const fa_plan & p, const fa_args & a, fa_scratch & sc, int64_t sq, int64_t j0, int64_t nt,
                  int64_t kv1) {
    const auto & vec = ggml_cpu_vec();
    const int64_t stride = p.Dv + 2;
    bool any = false;
    // rows of one query share its mask row (unless the mask has one per head): one conversion
    // and one verdict per distinct row, the last one remembered
    int64_t n_conv = 0;
    const char * last = nullptr;
    const float * last_m = nullptr;
    bool last_live = false;
    for (int64_t r = 0; r < p.R; ++r) {
        sc.accc[r] = sc.state + r * stride;
        if (!sc.mrow[r]) {
            sc.mvc[r] = nullptr;
            any = true;
            continue;
        }
        if (sc.mrow[r] != last) {
            last = sc.mrow[r];
            if (a.mask->type == GGML_TYPE_F16) {
                float * dst = sc.mvals + n_conv++ * k_tile;
                vec.f16_to_f32(nt, dst, (const uint16_t *) last + j0);
                last_m = dst;
            } else {
                last_m = (const float *) last + j0;
            }
            last_live = vec.max(nt, last_m) != -INFINITY;
        }
        sc.mvc[r] = last_m;
        any = any || last_live;
    }
    if (!any) return;
    const ggml_tensor * k = a.k;
    const ggml_tensor * v = a.v;
    const char * kb = ggml_cpu_row_ptr(k, j0, 0, sq);
    const char * vb = ggml_cpu_row_ptr(v, j0, 0, sq);
    // the cells ahead are prefetched when the heads of a cell lie side by side (llama's cache)
    auto cell_run = [&](const ggml_tensor * t, int64_t n) -> size_t {
        const size_t row = ggml_row_size(t->type, n);
        return (size_t) t->nb[2] == row && (size_t) t->nb[1] >= p.n_head_kv * row ? p.n_head_kv * row : 0;
    };
    const size_t k_run = cell_run(k, p.D), v_run = cell_run(v, p.Dv);
    vec.qk_cells(k->type, p.D, sc.q16, p.RH, p.n_head_kv, kb, k->nb[1], k->nb[2], nt, sc.scores, k_tile, vb, v->nb[1],
                 k_run && v_run ? k_run : 0, k_run && v_run ? v_run : 0, kv1 - j0);
    if (vec.softmax_tile && a.softcap == 0.0f && p.Dv % 16 == 0) {   // (it rescales acc 16 values at a time)
        vec.softmax_tile(p.R, nt, sc.scores, sc.accc, p.Dv, sc.mvc, sc.slope, a.scale);
    } else {
        softmax_update(p, a, p.R, nt, sc.scores, sc.accc, sc.mvc, sc.slope);
    }
    for (int64_t h = 0; h < p.n_head_kv; ++h) {
        for (int64_t t = 0; t < nt; ++t) sc.vrow[t] = vb + t * v->nb[1] + h * v->nb[2];
        vec.pv_cache(v->type, p.Dv, sc.accc + h * p.RH, sc.scores + h * p.RH * k_tile, k_tile, p.RH, sc.vrow, nt);
    }
}

// A decode step streams the cache from memory with little arithmetic per byte (G rows per cache
// row): the rows of a tile k_prefetch tiles ahead are requested while this one is computed, so
// the loads of a tile find its rows on the way instead of each row's first line stalling. (A
// unit's rows of a cell are one short run per cell with other heads' runs between them, which
// the hardware prefetchers followed poorly: the 28-layer decode rows of kiln-bench-ops, one
// thread, took 13-35% longer without this.)
void prefetch_tile(const fa_plan & p, const fa_args & a, int64_t sq, int64_t hg, int64_t j0, int64_t kv1) {
    const int64_t j1 = std::min(j0 + k_tile, kv1);
    for (const ggml_tensor * t : { a.k, a.v }) {
        const size_t bytes = ggml_row_size(t->type, t->ne[0]);
        for (int64_t j = j0; j < j1; ++j) {
            for (int64_t hl = 0; hl < p.HU; ++hl) {
                const char * row = ggml_cpu_row_ptr(t, j, hg * p.HU + hl, sq);
                for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 3);
            }
        }
    }
}

// The packed paths' walk of a unit (one kv head, HU == 1): the keys each row sees, then the
// tiles any row sees (the corner of the causal triangle and a sliding window's far past are
// never visited).
void attend_packed(const fa_plan & p, const fa_args & a, fa_scratch & sc, int64_t sq, int64_t hk, int64_t iq0,
                   int64_t nq, int64_t kv0, int64_t kv1) {
    const int64_t rows = nq * p.G;
    // A mask shared by all heads and sequences (llama's) has one span per query for the whole
    // op: a thread keeps those it has found (its units of a query block meet the same queries
    // in every kv head).
    const bool shared = a.mask && a.mask->ne[2] == 1 && a.mask->ne[3] == 1;
    int64_t lo = kv1, hi = kv0;
    for (int64_t ri = 0; ri < rows; ++ri) {
        fa_span & sp = sc.span[ri];
        if (ri > 0 && sc.mrow[ri] == sc.mrow[ri - 1]) {
            sp = sc.span[ri - 1];
        } else if (shared) {
            fa_span & known = sc.qspan[unit_row(p, hk, iq0, nq, ri).iq];
            if (known.lo < 0) known = mask_span(a.mask, sc.mrow[ri], kv0, kv1);
            sp = known;
        } else {
            sp = mask_span(a.mask, sc.mrow[ri], kv0, kv1);
        }
        if (sp.lo < sp.hi) {
            lo = std::min(lo, sp.lo);
            hi = std::max(hi, sp.hi);
        }
    }
    for (int64_t j0 = kv0 + (lo - kv0) / k_tile * k_tile; j0 < hi; j0 += k_tile) {
        // the next tile's rows are requested while this one is computed (the op took 5% longer
        // without, at depth 1024)
        attend_tile_packed(p, a, sc, sq, hk, 0, rows, j0, std::min(k_tile, kv1 - j0), j0 + k_tile,
                           std::min(j0 + 2 * k_tile, hi));
    }
}

// Online softmax over kv rows [kv0, kv1) for the query rows of one unit: queries [iq0, iq1)
// of every head of kv head group hg in sequence sq. Leaves (acc, M, S) per row in sc.state.
void attend_unit(const fa_plan & p, const fa_args & a, fa_scratch & sc, int64_t sq, int64_t hg, int64_t iq0,
                 int64_t iq1, int64_t kv0, int64_t kv1) {
    const int64_t nq = iq1 - iq0;
    const int64_t per_head = nq * p.G;
    const int64_t stride = p.Dv + 2;

    const int64_t rows = per_head * p.HU;
    for (int64_t ri = 0; ri < rows; ++ri) {
        const fa_row r = unit_row(p, hg, iq0, nq, ri);
        sc.qrow[ri] = ggml_cpu_load_row(a.q, r.iq, r.h, sq, sc.q + ri * p.D);
        sc.mrow[ri] = a.mask ? ggml_cpu_row_ptr(a.mask, r.iq, r.h % a.mask->ne[2], sq % a.mask->ne[3]) : nullptr;
        // kept above zero so that slope * -inf stays -inf (a masked key) in the vector update
        sc.slope[ri] = a.mask ? std::max(ggml_cpu_alibi_slope(a.max_bias, p.n_head, r.h), FLT_MIN) : 1.0f;
        float * st = sc.state + ri * stride;
        std::memset(st, 0, p.Dv * sizeof(float));
        st[p.Dv] = -INFINITY;
        st[p.Dv + 1] = 0.0f;
    }

    if (p.bf16) ggml_cpu_vec().rows_bf16(p.D, sc.qrow, rows, sc.qb);
    if (p.cells) {
        // packed by 16-value chunks for qk_cells
        for (int64_t ri = 0; ri < rows; ++ri) {
            for (int64_t c = 0; c < p.D / 16; ++c) std::memcpy(sc.q16 + (c * rows + ri) * 16, sc.qrow[ri] + c * 16, 16 * sizeof(float));
        }
        for (int64_t j0 = kv0; j0 < kv1; j0 += k_tile) attend_cells(p, a, sc, sq, j0, std::min(k_tile, kv1 - j0), kv1);
        return;
    }

    if (p.bf16 || p.f32t) {
        attend_packed(p, a, sc, sq, hg, iq0, nq, kv0, kv1);
        return;
    }

    // tile-major over the unit's kv heads: the cells of a tile are read once, all heads together
    for (int64_t j0 = kv0; j0 < kv1; j0 += k_tile) {
        const int64_t nt = std::min(k_tile, kv1 - j0);
        if (p.direct_k && p.direct_v) prefetch_tile(p, a, sq, hg, j0 + k_prefetch * k_tile, kv1);
        for (int64_t hl = 0; hl < p.HU; ++hl) {
            attend_tile(p, a, sc, sq, hg * p.HU + hl, hl * per_head, (hl + 1) * per_head, j0, nt);
        }
    }
}

void write_output(const fa_plan & p, ggml_tensor * dst, const float * st, int64_t h, int64_t iq, int64_t sq) {
    float * out = (float *) ggml_cpu_row_ptr(dst, h, iq, sq);
    const float M = st[p.Dv];
    float S = st[p.Dv + 1];
    const ggml_tensor * sinks = dst->src[4];
    float rescale = 1.0f;
    if (sinks && S > 0.0f) {
        // the sink may exceed every score: take the larger as the reference so nothing overflows
        const float sink = ((const float *) sinks->data)[h];
        const float M2 = std::max(M, sink);
        rescale = std::exp(M - M2);
        S = S * rescale + std::exp(sink - M2);
    }
    // a row with every key masked has no weights: zeros, not NaN
    const float inv = S > 0.0f ? rescale / S : 0.0f;
    ggml_cpu_vec().scale_bias(p.Dv, out, st, inv, 0.0f);
}

} // namespace

size_t ggml_cpu_flash_attn_work_size(const ggml_tensor * dst, int nth) {
    const fa_plan p = make_plan(dst, nth);
    return p.per_thread * nth + p.partial + 128;
}

void ggml_cpu_op_flash_attn_ext(const ggml_compute_params * params, ggml_tensor * dst) {
    fa_args a;
    a.q = dst->src[0];
    a.k = dst->src[1];
    a.v = dst->src[2];
    a.mask = dst->src[3];
    a.scale = ggml_get_op_params_f32(dst, 0);
    a.max_bias = ggml_get_op_params_f32(dst, 1);
    a.softcap = ggml_get_op_params_f32(dst, 2);
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && ggml_cpu_is_f32_dense_rows(dst));
    GGML_ASSERT(a.q->ne[2] % a.k->ne[2] == 0 && a.k->ne[2] == a.v->ne[2] && a.k->ne[1] == a.v->ne[1]);
    GGML_ASSERT(!a.mask || (a.mask->ne[0] == a.k->ne[1] && a.mask->ne[1] >= a.q->ne[1]));
    GGML_ASSERT(!a.mask || a.mask->nb[0] == ggml_type_size(a.mask->type));
    GGML_ASSERT(!dst->src[4] || (dst->src[4]->type == GGML_TYPE_F32 && dst->src[4]->ne[0] == a.q->ne[2]));

    const int ith = params->ith, nth = params->nth;
    const fa_plan p = make_plan(dst, nth);
    GGML_ASSERT(params->wdata && params->wsize >= p.per_thread * nth + p.partial + 64 && "flash_attn: scratch too small");
    char * base = (char *) ggml_pad((uintptr_t) params->wdata, 64);
    fa_scratch sc = carve(p, base + p.per_thread * ith);
    const int64_t stride = p.Dv + 2;
    if (p.bf16 || p.f32t) {
        for (int64_t iq = 0; iq < p.n_q; ++iq) sc.qspan[iq].lo = -1;
    }

    if (!p.split_kv) {
        // Units dealt round-robin, the query blocks of a kv head group in boustrophedon order:
        // later blocks of a causal mask cost more, and straight round-robin gave the last thread
        // the later block of every round (2 threads, 8 blocks of a 512-token batch: the busier
        // thread 12.5% over the mean at depth 0, 1.8% at depth 1536); reversing every other
        // round pairs early blocks with late ones (equal shares when rounds pair up).
        for (int64_t u = ith; u < p.n_units; u += nth) {
            const int64_t qb = snake(u % p.n_qb, nth, p.n_qb);
            const int64_t hg = (u / p.n_qb) % p.n_hg;
            const int64_t sq = u / (p.n_qb * p.n_hg);
            const int64_t iq0 = qb * p.QB, iq1 = std::min(p.n_q, iq0 + p.QB);
            attend_unit(p, a, sc, sq, hg, iq0, iq1, 0, p.n_kv);
            for (int64_t ri = 0; ri < (iq1 - iq0) * p.G * p.HU; ++ri) {
                const fa_row r = unit_row(p, hg, iq0, iq1 - iq0, ri);
                write_output(p, dst, sc.state + ri * stride, r.h, r.iq, sq);
            }
        }
        return;
    }

    // split the KV length: partial states per thread, then merge
    float * partial = (float *) (base + p.per_thread * nth);
    const int64_t rows_total = p.n_seq * p.n_q * p.n_head;
    auto global_row = [&](int64_t sq, int64_t iq, int64_t h) { return (sq * p.n_q + iq) * p.n_head + h; };
    int64_t kv0, kv1;
    ggml_cpu_split_rows(p.n_kv, ith, nth, kv0, kv1);
    for (int64_t u = 0; u < p.n_units; ++u) {
        const int64_t qb = u % p.n_qb;
        const int64_t hg = (u / p.n_qb) % p.n_hg;
        const int64_t sq = u / (p.n_qb * p.n_hg);
        const int64_t iq0 = qb * p.QB, iq1 = std::min(p.n_q, iq0 + p.QB);
        attend_unit(p, a, sc, sq, hg, iq0, iq1, kv0, kv1);
        for (int64_t ri = 0; ri < (iq1 - iq0) * p.G * p.HU; ++ri) {
            const fa_row r = unit_row(p, hg, iq0, iq1 - iq0, ri);
            const int64_t g = global_row(sq, r.iq, r.h);
            std::memcpy(partial + (ith * rows_total + g) * stride, sc.state + ri * stride, stride * sizeof(float));
        }
    }
    ggml_cpu_barrier(params);

    const auto & vec = ggml_cpu_vec();
    float * merged = sc.state;   // one row of (acc, M, S)
    int64_t g0, g1;
    ggml_cpu_split_rows(rows_total, ith, nth, g0, g1);
    for (int64_t g = g0; g < g1; ++g) {
        float M = -INFINITY;
        for (int t = 0; t < nth; ++t) M = std::max(M, partial[(t * rows_total + g) * stride + p.Dv]);
        std::memset(merged, 0, stride * sizeof(float));
        float S = 0.0f;
        if (M != -INFINITY) {
            for (int t = 0; t < nth; ++t) {
                const float * st = partial + (t * rows_total + g) * stride;
                if (st[p.Dv] == -INFINITY) continue;
                const float w = std::exp(st[p.Dv] - M);
                S += w * st[p.Dv + 1];
                vec.axpy(p.Dv, merged, w, st);
            }
        }
        merged[p.Dv] = M;   // the reference of S and acc, which a sink is scaled against
        merged[p.Dv + 1] = S;
        const int64_t h = g % p.n_head;
        const int64_t iq = (g / p.n_head) % p.n_q;
        const int64_t sq = g / (p.n_head * p.n_q);
        write_output(p, dst, merged, h, iq, sq);
    }
}
