// Quantizers of the trellis types iq1_kt .. iq4_kt (layouts in quants-ik.h, decoders in
// quants-kt.cpp). Every run of 8 (iq4_kt: 4) values is one seed of the integer hash, so a type's
// codebook is the set of runs its seed width can name: 2^16 runs of 8 (iq2_kt; iq3_kt as
// magnitudes with separate sign bits), 2^13 of 8 (iq1_kt), two halves of 2^15 runs of 4 (iq4_kt,
// one half per 32 values). Every seed is the best run of its codebook for the scale it was chosen
// under (the exact nearest run, first seed of equal ones), found one of two ways that give the
// same seeds:
//   - the grid search (default): the runs sorted into cells by per-position value bins; the
//     cells are visited nearest first and a cell whose distance bound exceeds the best run found
//     so far is skipped, so a search reads a few hundred runs instead of all 2^15..2^16;
//   - the exhaustive search (ik_kt_set_exhaustive, for tests and timing): every run, its
//     distance computed by a SIMD kernel (cpu/*/quants-kt-search.cpp) and the plain expression
//     deciding among the near-best.
// Either way the seeds do not depend on the instruction set.
//
// Per row:
//   1. per 32 values a free scale: alternate "best seed per run at scale dl" and the weighted
//      least-squares dl of those seeds, a few rounds, keeping the best fit (iq4_kt: per half);
//   2. the row scale and each block's scale code on the type's grid;
//   3. the seeds again at the coded scales, then the row scale refit by weighted least squares.
// Importance weights: imatrix * sqrt(sigma^2 + x^2), else x^2 + sigma^2 (sigma^2: the mean
// square of the 256 values). The inference-time factors of iq2_kt / iq3_kt (quants-kt.cpp) are
// not folded into the stored scale: the stored values are the least-squares fit, as the
// reference's files are.
#include "quants-ik.h"
#include "cpu-traits.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

constexpr uint32_t kMul = 0xCBAC1FEDu;

// Every run a seed range names: as floats seed major (v, for the plain loop and the re-checks)
// and as int8 run-position major (by_pos, for the SIMD kernels; the values are in -126..126).
struct kt_codebook {
    int                 n = 0;
    int                 count = 0;
    std::vector<float>  v;        // count * n
    std::vector<int8_t> q;        // the same as int8 (4 times less cache for the grid search)
    std::vector<int8_t> by_pos;   // n * count

    kt_codebook(uint32_t offset, int count_, int n_, bool magnitudes)
        : n(n_), count(count_), v((size_t) count_ * n_), q((size_t) count_ * n_), by_pos((size_t) count_ * n_) {
        for (int s = 0; s < count; ++s) {
            uint32_t x = (uint32_t) s + offset;
            for (int m = 0; m < n; ++m) {
                x *= kMul;   // seed * K^(m+1)
                const uint32_t y = x & 0x3f3f3f3fu;
                const int val = (int) (y & 0xFF) + (int) ((y >> 8) & 0xFF) + (int) ((y >> 16) & 0xFF) + (int) (y >> 24) - 126;
                const int q = magnitudes ? std::abs(val) : val;
                v[(size_t) s * n + m] = (float) q;
                this->q[(size_t) s * n + m] = (int8_t) q;
                by_pos[(size_t) m * count + s] = (int8_t) q;
            }
        }
    }
    const float * at(int s) const { return v.data() + (size_t) s * n; }
    const int8_t * q_at(int s) const { return q.data() + (size_t) s * n; }
};

// The weighted squared distance of run c (position m at c[m * stride], float or int8: the values
// are small integers, exact either way) to the target t: the one expression every search path
// decides by.
template <int N, typename C>
inline float run_error(const C * c, size_t stride, const float * t, const float * w) {
    float e = 0;
    for (int m = 0; m < N; ++m) {
        const float d = t[m] - (float) c[m * stride];
        e += w[m] * d * d;
    }
    return e;
}

// The runs of a codebook in cells: position m's values split into kt_grid::nbins bins of
// consecutive integers (equal shares of the runs), a cell is one bin per position, and the runs
// are stored cell by cell (cell index: position 0's bin most significant, so the cells that
// differ only in the last position's bin are adjacent). A run in bin b of position m is at least
// w_m * (distance of t_m to the bin's range)^2 from the target there, so the sum over positions
// bounds a whole cell from below.
struct kt_grid {
    static constexpr int kMaxBins = 12;
    int                   n = 0, nb[8] = {};                   // bins per position
    float                 lo[8][kMaxBins], hi[8][kMaxBins];   // each bin's range of values
    int8_t                bin_of[8][256];                      // value + 128 -> bin
    std::vector<uint32_t> start;                               // nbins^n + 1 cell offsets
    std::vector<int32_t>  seed;                                // their seeds, ascending in a cell
    static constexpr int  kPad = 64;                           // the range kernels read past the end
    size_t                stride = 0;                          // of a row of by_pos
    std::vector<int8_t>   by_pos;                              // the runs position major, cell by cell

    kt_grid(const kt_codebook & cb, std::initializer_list<int> bins) : n(cb.n) {
        std::copy(bins.begin(), bins.end(), nb);
        std::vector<int> cell(cb.count, 0);
        int ncell = 1;
        for (int m = 0; m < n; ++m) {
            const int nbins = nb[m];
            ncell *= nbins;
            int hist[256] = {};
            for (int s = 0; s < cb.count; ++s) ++hist[(int) cb.at(s)[m] + 128];
            // bin of value u: the share of the runs below it, so that every bin is a range of
            // consecutive values and all values are covered (lo/hi are the range's ends, not
            // the values present: the bound stays valid either way)
            int below = 0;
            for (int b = 0; b < nbins; ++b) { lo[m][b] = INFINITY; hi[m][b] = -INFINITY; }
            for (int u = 0; u < 256; ++u) {
                const int b = std::min(nbins - 1, (int) ((int64_t) (below + hist[u] / 2) * nbins / cb.count));
                bin_of[m][u] = (int8_t) b;
                lo[m][b] = std::min(lo[m][b], (float) (u - 128));
                hi[m][b] = std::max(hi[m][b], (float) (u - 128));
                below += hist[u];
            }
            for (int b = 0; b < nbins; ++b) {
                // a bin no value maps to is an empty point between its neighbours
                if (lo[m][b] > hi[m][b]) lo[m][b] = hi[m][b] = b ? hi[m][b - 1] : -128.f;
            }
            for (int s = 0; s < cb.count; ++s) cell[s] = cell[s] * nbins + bin_of[m][(int) cb.at(s)[m] + 128];
        }
        start.assign(ncell + 1, 0);
        for (int s = 0; s < cb.count; ++s) ++start[cell[s] + 1];
        for (int c = 0; c < ncell; ++c) start[c + 1] += start[c];
        std::vector<uint32_t> fill(start.begin(), start.end() - 1);
        seed.resize(cb.count);
        stride = (size_t) cb.count + kPad;
        by_pos.assign(stride * n, 0);
        for (int s = 0; s < cb.count; ++s) {   // ascending seeds: ascending within each cell
            const uint32_t i = fill[cell[s]]++;
            seed[i] = s;
            for (int m = 0; m < n; ++m) by_pos[m * stride + i] = (int8_t) cb.at(s)[m];
        }
    }
};

// The grid search of one target. Per position the bins' bounds f and their order by bound
// (the target's own bin first, then outwards: the bound grows away from it); positions 0..N-2
// are walked depth first in that order, each stopping at the first bin whose partial bound
// exceeds the threshold, and the last position's bins within the threshold form one range of
// adjacent cells, read in one pass. The partial bounds add the positions in run_error's order,
// each term no more than run_error's, and the threshold keeps a relative 1e-5 above the best
// error for the rounding, so no run that could win (or tie the winner) is skipped.
template <int N>
struct kt_grid_search {
    const kt_grid & g;
    const float *   t;
    const float *   w;
    const ggml_kt_range_errors_t errors;   // NULL: plain distances only
    float *         err;                   // the kernel's output, count + 32 floats
    float           f[N][kt_grid::kMaxBins];
    int8_t          order[N][kt_grid::kMaxBins];
    float           best = INFINITY, thr = INFINITY;
    int             best_seed = INT_MAX;

    kt_grid_search(const kt_grid & g_, const float * t_, const float * w_, ggml_kt_range_errors_t errors_, float * err_)
        : g(g_), t(t_), w(w_), errors(errors_), err(err_) {
        for (int m = 0; m < N; ++m) {
            const int nb = g.nb[m];
            for (int b = 0; b < nb; ++b) {
                const float d = t[m] < g.lo[m][b] ? g.lo[m][b] - t[m] : t[m] > g.hi[m][b] ? t[m] - g.hi[m][b] : 0.f;
                f[m][b] = w[m] * d * d;
            }
            const float tc = std::clamp(t[m], -128.f, 127.f);
            const int home = g.bin_of[m][(int) std::lround(tc) + 128];
            int k = 0, l = home - 1, r = home + 1;
            order[m][k++] = (int8_t) home;
            while (l >= 0 || r < nb) order[m][k++] = (int8_t) (r >= nb || (l >= 0 && f[m][l] <= f[m][r]) ? l-- : r++);
        }
    }

    void take(uint32_t i) {
        const float e = run_error<N>(g.by_pos.data() + i, g.stride, t, w);
        if (e < best || (e == best && g.seed[i] < best_seed)) {
            best = e;
            best_seed = g.seed[i];
            thr = best * (1 + 1e-5f);
        }
    }

    // With a kernel, only the runs whose kernel distance is within the threshold are taken: both
    // distances are within (N + 1) 2^-24 of the exact one (relative), so a run that could win
    // is never left out.
    void scan(uint32_t i0, uint32_t i1) {
        if (!errors) {
            for (uint32_t i = i0; i < i1; ++i) take(i);
            return;
        }
        if (!errors(g.by_pos.data() + i0, g.stride, N, (int) (i1 - i0), t, w, thr, err)) return;
        for (uint32_t i = i0; i < i1; ++i) {
            if (err[i - i0] <= thr) take(i);
        }
    }

    template <int M>
    void visit(float partial, int cell) {
        const int nb = g.nb[M];
        if constexpr (M == N - 1) {
            int bl = order[M][0], br = bl;
            if (partial + f[M][bl] > thr) return;
            while (bl > 0 && partial + f[M][bl - 1] <= thr) --bl;
            while (br < nb - 1 && partial + f[M][br + 1] <= thr) ++br;
            scan(g.start[cell * nb + bl], g.start[cell * nb + br + 1]);
        } else {
            for (int k = 0; k < nb; ++k) {
                const int b = order[M][k];
                const float p = partial + f[M][b];
                if (p > thr) break;
                visit<M + 1>(p, cell * nb + b);
            }
        }
    }

    // hint: a seed that is probably near (the same run's at a nearby scale) or -1; it only sets
    // the first threshold, so that fewer cells are walked
    int run(const kt_codebook & cb, int hint) {
        if (hint >= 0) {
            best = run_error<N>(cb.q_at(hint), 1, t, w);
            best_seed = hint;
            thr = best * (1 + 1e-5f);
        }
        visit<0>(0.f, 0);
        return best_seed;
    }
};

std::atomic<bool> g_kt_exhaustive{ false };

// The seed whose run is nearest to t under weights w (the first of equal ones). With a SIMD
// kernel: its errors (own rounding) for every seed, then run_error on the seeds within a relative
// 1e-5 of its minimum. Both sums hold N + 1 non-negative terms, so each is within (N + 1) 2^-24
// of the exact sum (relative): the plain minimum's seed is always among those re-checked, and the
// result is the exhaustive plain search's.
template <int N>
int best_seed(const kt_codebook & cb, const kt_grid & grid, const float * t, const float * w, int hint) {
    if (!g_kt_exhaustive.load(std::memory_order_relaxed)) {
        thread_local std::vector<float> err;
        err.resize(grid.seed.size() + 64);
        return kt_grid_search<N>(grid, t, w, ggml_cpu_kt_range_errors(), err.data()).run(cb, hint);
    }
    float best = INFINITY;
    int bs = 0;
    if (const ggml_kt_errors_t errors = ggml_cpu_kt_errors()) {
        // only the groups of 32 seeds whose minimum is near the best are read again: a scalar
        // pass over every err cost as much as the SIMD search itself
        thread_local std::vector<float> err, group_min;
        err.resize(cb.count);
        group_min.resize(cb.count / 32);
        const float mn = errors(cb.by_pos.data(), cb.count, N, t, w, err.data(), group_min.data());
        const float thr = mn * (1 + 1e-5f) + 1e-30f;
        for (int g = 0; g < cb.count / 32; ++g) {
            if (group_min[g] > thr) continue;
            for (int s = 32 * g; s < 32 * g + 32; ++s) {
                if (err[s] > thr) continue;
                const float e = run_error<N>(cb.at(s), 1, t, w);
                if (e < best) { best = e; bs = s; }
            }
        }
        return bs;
    }
    const float * c = cb.v.data();
    for (int s = 0; s < cb.count; ++s, c += N) {
        const float e = run_error<N>(c, 1, t, w);
        if (e < best) { best = e; bs = s; }
    }
    return bs;
}

// How a type codes its per-32 scale.
enum kt_scale_kind { KT_IQ4K_GRID, KT_UNSIGNED4, KT_SIGNED7 };

struct kt_type {
    int                 run;          // values per seed
    int                 nbooks;       // iq4_kt: two seed offsets
    const kt_codebook * books[2];
    const kt_grid *     grids[2];
    bool                sign_bits;    // iq3_kt: magnitudes in the runs, signs apart
    kt_scale_kind       scale_kind;
    size_t              block_bytes;
    // store block ib's scale code, codebook choice and seeds (and, for sign_bits, the signs of x)
    void (*pack)(uint8_t * block, int ib, int code, int book, const int * seeds, const float * x);
};

float scale_value(kt_scale_kind k, int code) {
    switch (k) {
        case KT_IQ4K_GRID: return ik_iq4k_values[code];
        case KT_UNSIGNED4: return (float) code;
        default:           return (float) code;
    }
}

// Nearest code of the block scale s for row scale d.
int scale_code(kt_scale_kind k, float s, float d) {
    const float r = d ? s / d : 0.f;
    if (k == KT_IQ4K_GRID) {
        int best = 0;
        for (int i = 1; i < 16; ++i) {
            if (std::fabs(ik_iq4k_values[i] - r) < std::fabs(ik_iq4k_values[best] - r)) best = i;
        }
        return best;
    }
    if (k == KT_UNSIGNED4) return std::clamp((int) std::lround(r), 0, 15);
    return std::clamp((int) std::lround(r), -64, 63);
}

// The seeds of one 32-block at scale dl and the least-squares terms of its fit (targets are |x|
// for sign-bit types, whose scales are positive).
struct block_fit {
    int   seeds[8];
    float sumqx = 0, sumq2 = 0;
    float err(float dl) const { return dl * dl * sumq2 - 2 * dl * sumqx; }   // + sum w x^2
};

// hint: the seeds of a fit of the same block and codebook at a nearby scale, or null.
block_fit fit_block(const kt_type & kt, int book, const float * x, const float * w, float dl, const int * hint) {
    const kt_codebook & cb = *kt.books[book];
    const kt_grid & grid = *kt.grids[book];
    block_fit f;
    const float id = dl ? 1 / dl : 0.f;
    float t[8];
    for (int r = 0; r < 32 / kt.run; ++r) {
        const float * xr = x + r * kt.run;
        const float * wr = w + r * kt.run;
        for (int m = 0; m < kt.run; ++m) t[m] = id * (kt.sign_bits ? std::fabs(xr[m]) : xr[m]);
        const int s = kt.run == 8 ? best_seed<8>(cb, grid, t, wr, hint ? hint[r] : -1)
                                    : best_seed<4>(cb, grid, t, wr, hint ? hint[r] : -1);
        f.seeds[r] = s;
        const int8_t * c = cb.q_at(s);
        for (int m = 0; m < kt.run; ++m) {
            const float xv = kt.sign_bits ? std::fabs(xr[m]) : xr[m];
            f.sumqx += wr[m] * c[m] * xv;
            f.sumq2 += wr[m] * c[m] * c[m];
        }
    }
    return f;
}

// Step 1: the free scale of a 32-block (and its codebook for iq4_kt).
float free_block_scale(const kt_type & kt, const float * x, const float * w, int & book) {
    float s2 = 0, sw = 0;
    for (int j = 0; j < 32; ++j) {
        s2 += w[j] * x[j] * x[j];
        sw += w[j];
    }
    if (s2 <= 0 || sw <= 0) { book = 0; return 0.f; }
    // a codebook value's rms is about 37 (four uniform 6-bit bytes): match the block's rms
    const float dl0 = std::sqrt(s2 / sw) / 37.f;
    // the fit has local minima in the scale: scan a range of starting scales (one pass each),
    // then refine the best by alternating seeds and least squares
    float best_err = INFINITY, best_d = 0;
    block_fit best_f;
    book = 0;
    for (int b = 0; b < kt.nbooks; ++b) {
        block_fit prev;
        bool have_prev = false;
        for (float mul : { 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f, 1.15f, 1.3f, 1.6f, 2.0f }) {
            const float dl = dl0 * mul;
            const block_fit f = fit_block(kt, b, x, w, dl, have_prev ? prev.seeds : nullptr);
            prev = f;
            have_prev = true;
            const float dn = f.sumq2 > 0 ? f.sumqx / f.sumq2 : dl;
            if (f.err(dn) < best_err) { best_err = f.err(dn); best_d = dn; book = b; best_f = f; }
        }
    }
    float dl = best_d;
    for (int it = 0; it < 2 && dl != 0; ++it) {
        const block_fit f = fit_block(kt, book, x, w, dl, best_f.seeds);
        best_f = f;
        if (f.sumq2 <= 0) break;
        dl = f.sumqx / f.sumq2;
        if (f.err(dl) < best_err) { best_err = f.err(dl); best_d = dl; }
    }
    return best_d;
}

void kt_weights(const float * xbl, const float * qw, float * w) {
    float s = 0;
    for (int j = 0; j < QK_K; ++j) s += xbl[j] * xbl[j];
    const float sigma2 = s / QK_K;
    for (int j = 0; j < QK_K; ++j) {
        w[j] = qw ? qw[j] * std::sqrt(sigma2 + xbl[j] * xbl[j]) : xbl[j] * xbl[j] + sigma2;
    }
}

// Steps 2-3 for row scale d: each block's code (the nearest and its two neighbours, by the error
// of a full seed search), its seeds, and the least-squares terms of the row refit.
struct kt_assignment {
    std::vector<int> codes, seeds;
    float sumqx = 0, sumq2 = 0;
};

kt_assignment assign_codes(const kt_type & kt, const float * x, const float * w, int64_t nblk, const std::vector<float> & scales,
                           const std::vector<int> & books, float d) {
    kt_assignment a;
    a.codes.assign(nblk, 0);
    a.seeds.assign(8 * nblk, 0);
    const int lo = kt.scale_kind == KT_SIGNED7 ? -64 : 0, hi = kt.scale_kind == KT_SIGNED7 ? 63 : 15;
    for (int64_t ib = 0; ib < nblk; ++ib) {
        const int c0 = scale_code(kt.scale_kind, scales[ib], d);
        float best = INFINITY;
        block_fit bf;
        block_fit prev;
        bool have_prev = false;
        for (int c = std::max(lo, c0 - 1); c <= std::min(hi, c0 + 1); ++c) {
            const float g = scale_value(kt.scale_kind, c);
            if (g == 0) continue;
            const block_fit f = fit_block(kt, books[ib], x + 32 * ib, w + 32 * ib, d * g, have_prev ? prev.seeds : nullptr);
            prev = f;
            have_prev = true;
            if (f.err(d * g) < best) { best = f.err(d * g); bf = f; a.codes[ib] = c; }
        }
        if (best == INFINITY) continue;   // an all-zero block: code 0 (iq3_kt) has no seeds to fit
        const float g = scale_value(kt.scale_kind, a.codes[ib]);
        std::copy(bf.seeds, bf.seeds + 8, a.seeds.begin() + 8 * ib);
        a.sumqx += g * bf.sumqx;
        a.sumq2 += g * g * bf.sumq2;
    }
    return a;
}

void kt_row(const kt_type & kt, const float * x, char * out, int64_t n, const float * qw) {
    const int64_t nblk = n / 32;
    std::vector<float> w(n), scales(nblk);
    std::vector<int> books(nblk);
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) kt_weights(x + ibl * QK_K, qw ? qw + ibl * QK_K : nullptr, w.data() + ibl * QK_K);
    float smax = 0;
    for (int64_t ib = 0; ib < nblk; ++ib) {
        scales[ib] = free_block_scale(kt, x + 32 * ib, w.data() + 32 * ib, books[ib]);
        if (std::fabs(scales[ib]) > std::fabs(smax)) smax = scales[ib];
    }
    float * dptr = (float *) out;
    uint8_t * blocks = (uint8_t *) out + 4;
    *dptr = 0.f;
    if (smax == 0) return;
    // the largest block scale takes the end of the grid; one more round with the refit row scale
    // (kept if it fits better) lets the codes use the range the refit frees
    float d = kt.scale_kind == KT_IQ4K_GRID ? smax / ik_iq4k_values[0]
            : kt.scale_kind == KT_UNSIGNED4 ? smax / 15 : smax / 63;
    kt_assignment best = assign_codes(kt, x, w.data(), nblk, scales, books, d);
    for (int iter = 0; iter < 1 && best.sumq2 > 0; ++iter) {
        kt_assignment t = assign_codes(kt, x, w.data(), nblk, scales, books, best.sumqx / best.sumq2);
        if (t.sumq2 <= 0 || t.sumqx * t.sumqx * best.sumq2 <= best.sumqx * best.sumqx * t.sumq2) break;
        best = std::move(t);
    }
    for (int64_t ib = 0; ib < nblk; ++ib) {
        kt.pack(blocks + (ib / 8) * kt.block_bytes, (int) (ib % 8), best.codes[ib], books[ib], best.seeds.data() + 8 * ib, x + 32 * ib);
    }
    *dptr = best.sumq2 > 0 ? best.sumqx / best.sumq2 : d;
}

// ---------------------------------------------------------------------------------------------
// Packing (the inverse of each decoder)

void pack_iq2_kt(uint8_t * blk, int ib, int code, int, const int * seeds, const float *) {
    auto & b = *(block_iq2_kt *) blk;
    b.scales[ib % 4] |= (uint8_t) (code << 4 * (ib / 4));
    for (int j = 0; j < 4; ++j) {
        const uint16_t s = (uint16_t) seeds[j];
        std::memcpy(b.ql + 2 * (4 * ib + j), &s, 2);
    }
}

void pack_iq3_kt(uint8_t * blk, int ib, int code, int, const int * seeds, const float * x) {
    auto & b = *(block_iq3_kt *) blk;
    b.scales[ib % 4] |= (uint8_t) (code << 4 * (ib / 4));
    for (int j = 0; j < 4; ++j) {
        const uint16_t s = (uint16_t) seeds[j];
        std::memcpy(b.ql + 2 * (4 * ib + j), &s, 2);
    }
    for (int p = 0; p < 32; ++p) {
        if (x[p] < 0) b.qh[p] |= (uint8_t) (1 << ib);
    }
}

void pack_iq1_kt(uint8_t * blk, int ib, int code, int, const int * seeds, const float *) {
    auto & b = *(block_iq1_kt *) blk;
    b.sh[ib] = (uint8_t) code;
    for (int g = 0; g < 4; ++g) {
        const int run = 4 * ib + g, s = seeds[g];
        b.ql[run] = (uint8_t) (s & 0xFF);
        b.qh[run % 16] |= (uint8_t) (((s >> 8) & 0xF) << 4 * (run / 16));
        b.sh[ib] |= (uint8_t) (((s >> 12) & 1) << (4 + g));
    }
}

void pack_iq4_kt(uint8_t * blk, int ib, int code, int book, const int * seeds, const float *) {
    auto & b = *(block_iq4_kt *) blk;
    uint32_t shb = (uint32_t) book | ((uint32_t) (code + 64) << 1);
    for (int g = 0; g < 8; ++g) {
        const int run = 8 * ib + g, s = seeds[g];
        b.ql[run] = (uint8_t) (s & 0xFF);
        b.qh[run % 32] |= (uint8_t) (((s >> 8) & 0xF) << 4 * (run / 32));
        shb |= (uint32_t) ((s >> 12) & 7) << (8 + 3 * g);
    }
    std::memcpy(b.shb + 4 * ib, &shb, 4);
}

// Codebooks and grids are built on first use of a type (a few MB, a few ms). Bins per position,
// measured (kiln-bench-quantize): 25-45 runs per cell; fewer cells read more runs per search,
// more cells cost more walking than they save.
const kt_type & kt_of(ggml_type t) {
    switch (t) {
        case GGML_TYPE_IQ1_KT: {
            static const kt_codebook cb(4096, 8192, 8, false);
            static const kt_grid g(cb, { 2, 2, 2, 2, 2, 2, 2, 2 });
            static const kt_type iq1 = { 8, 1, { &cb, nullptr }, { &g, nullptr }, false, KT_IQ4K_GRID, sizeof(block_iq1_kt), pack_iq1_kt };
            return iq1;
        }
        case GGML_TYPE_IQ2_KT: {
            static const kt_codebook cb(4096, 65536, 8, false);
            static const kt_grid g(cb, { 3, 3, 3, 3, 3, 3, 2, 2 });
            static const kt_type iq2 = { 8, 1, { &cb, nullptr }, { &g, nullptr }, false, KT_IQ4K_GRID, sizeof(block_iq2_kt), pack_iq2_kt };
            return iq2;
        }
        case GGML_TYPE_IQ3_KT: {
            static const kt_codebook cb(4096, 65536, 8, true);
            static const kt_grid g(cb, { 3, 3, 3, 3, 3, 3, 2, 2 });
            static const kt_type iq3 = { 8, 1, { &cb, nullptr }, { &g, nullptr }, true, KT_UNSIGNED4, sizeof(block_iq3_kt), pack_iq3_kt };
            return iq3;
        }
        default: {
            static const kt_codebook cba(4096, 32768, 4, false), cbb(4096 + 32768, 32768, 4, false);
            static const kt_grid ga(cba, { 6, 6, 6, 6 }), gb(cbb, { 6, 6, 6, 6 });
            static const kt_type iq4 = { 4, 2, { &cba, &cbb }, { &ga, &gb }, false, KT_SIGNED7, sizeof(block_iq4_kt), pack_iq4_kt };
            return iq4;
        }
    }
}

template <ggml_type T>
size_t quantize_kt(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    if (n_per_row % QK_K != 0) return 0;
    const kt_type & kt = kt_of(T);
    const size_t row_size = ggml_row_size(T, n_per_row);
    for (int64_t r = 0; r < nrows; ++r) {
        const float * x = src + r * n_per_row;
        for (int64_t i = 0; i < n_per_row; ++i) {
            if (!std::isfinite(x[i])) return 0;
        }
        char * out = (char *) dst + r * row_size;
        std::memset(out, 0, row_size);
        kt_row(kt, x, out, n_per_row, imatrix);
    }
    return nrows * row_size;
}

} // namespace

void ik_kt_set_exhaustive(bool on) { g_kt_exhaustive.store(on); }

size_t ik_quantize_iq1_kt(const float * s, void * d, int64_t nr, int64_t n, const float * im) { return quantize_kt<GGML_TYPE_IQ1_KT>(s, d, nr, n, im); }
size_t ik_quantize_iq2_kt(const float * s, void * d, int64_t nr, int64_t n, const float * im) { return quantize_kt<GGML_TYPE_IQ2_KT>(s, d, nr, n, im); }
size_t ik_quantize_iq3_kt(const float * s, void * d, int64_t nr, int64_t n, const float * im) { return quantize_kt<GGML_TYPE_IQ3_KT>(s, d, nr, n, im); }
size_t ik_quantize_iq4_kt(const float * s, void * d, int64_t nr, int64_t n, const float * im) { return quantize_kt<GGML_TYPE_IQ4_KT>(s, d, nr, n, im); }
