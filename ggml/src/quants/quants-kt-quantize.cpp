// Quantizers of the trellis types iq1_kt .. iq4_kt (layouts in quants-ik.h, decoders in
// quants-kt.cpp). Every run of 8 (iq4_kt: 4) values is one seed of the integer hash, so a type's
// codebook is the set of runs its seed width can name: 2^16 runs of 8 (iq2_kt; iq3_kt as
// magnitudes with separate sign bits), 2^13 of 8 (iq1_kt), two halves of 2^15 runs of 4 (iq4_kt,
// one half per 32 values). The search over a codebook is exhaustive, so every seed is the best
// run for the scale it was chosen under; a SIMD kernel (cpu/*/quants-kt-search.cpp) computes the
// distances, and the plain expression decides among the near-best (best_seed), so the seeds do
// not depend on the instruction set.
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
    std::vector<int8_t> by_pos;   // n * count

    kt_codebook(uint32_t offset, int count_, int n_, bool magnitudes)
        : n(n_), count(count_), v((size_t) count_ * n_), by_pos((size_t) count_ * n_) {
        for (int s = 0; s < count; ++s) {
            uint32_t x = (uint32_t) s + offset;
            for (int m = 0; m < n; ++m) {
                x *= kMul;   // seed * K^(m+1)
                const uint32_t y = x & 0x3f3f3f3fu;
                const int val = (int) (y & 0xFF) + (int) ((y >> 8) & 0xFF) + (int) ((y >> 16) & 0xFF) + (int) (y >> 24) - 126;
                const int q = magnitudes ? std::abs(val) : val;
                v[(size_t) s * n + m] = (float) q;
                by_pos[(size_t) m * count + s] = (int8_t) q;
            }
        }
    }
    const float * at(int s) const { return v.data() + (size_t) s * n; }
};

// The weighted squared distance of run c to the target t: the one expression every search path
// decides by.
template <int N>
inline float run_error(const float * c, const float * t, const float * w) {
    float e = 0;
    for (int m = 0; m < N; ++m) {
        const float d = t[m] - c[m];
        e += w[m] * d * d;
    }
    return e;
}

// The seed whose run is nearest to t under weights w (the first of equal ones). With a SIMD
// kernel: its errors (own rounding) for every seed, then run_error on the seeds within a relative
// 1e-5 of its minimum. Both sums hold N + 1 non-negative terms, so each is within (N + 1) 2^-24
// of the exact sum (relative): the plain minimum's seed is always among those re-checked, and the
// result is the exhaustive plain search's.
template <int N>
int best_seed(const kt_codebook & cb, const float * t, const float * w) {
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
                const float e = run_error<N>(cb.at(s), t, w);
                if (e < best) { best = e; bs = s; }
            }
        }
        return bs;
    }
    const float * c = cb.v.data();
    for (int s = 0; s < cb.count; ++s, c += N) {
        const float e = run_error<N>(c, t, w);
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

block_fit fit_block(const kt_type & kt, const kt_codebook & cb, const float * x, const float * w, float dl) {
    block_fit f;
    const float id = dl ? 1 / dl : 0.f;
    float t[8];
    for (int r = 0; r < 32 / kt.run; ++r) {
        const float * xr = x + r * kt.run;
        const float * wr = w + r * kt.run;
        for (int m = 0; m < kt.run; ++m) t[m] = id * (kt.sign_bits ? std::fabs(xr[m]) : xr[m]);
        const int s = kt.run == 8 ? best_seed<8>(cb, t, wr) : best_seed<4>(cb, t, wr);
        f.seeds[r] = s;
        const float * c = cb.at(s);
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
    book = 0;
    for (int b = 0; b < kt.nbooks; ++b) {
        for (float mul : { 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f, 1.15f, 1.3f, 1.6f, 2.0f }) {
            const float dl = dl0 * mul;
            const block_fit f = fit_block(kt, *kt.books[b], x, w, dl);
            const float dn = f.sumq2 > 0 ? f.sumqx / f.sumq2 : dl;
            if (f.err(dn) < best_err) { best_err = f.err(dn); best_d = dn; book = b; }
        }
    }
    float dl = best_d;
    for (int it = 0; it < 2 && dl != 0; ++it) {
        const block_fit f = fit_block(kt, *kt.books[book], x, w, dl);
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
        for (int c = std::max(lo, c0 - 1); c <= std::min(hi, c0 + 1); ++c) {
            const float g = scale_value(kt.scale_kind, c);
            if (g == 0) continue;
            const block_fit f = fit_block(kt, *kt.books[books[ib]], x + 32 * ib, w + 32 * ib, d * g);
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

// Codebooks are built on first use (a few MB, a few ms).
const kt_type & kt_of(ggml_type t) {
    static const kt_codebook cb16(4096, 65536, 8, false), cb16_abs(4096, 65536, 8, true), cb13(4096, 8192, 8, false);
    static const kt_codebook cb15a(4096, 32768, 4, false), cb15b(4096 + 32768, 32768, 4, false);
    static const kt_type iq1 = { 8, 1, { &cb13, nullptr }, false, KT_IQ4K_GRID, sizeof(block_iq1_kt), pack_iq1_kt };
    static const kt_type iq2 = { 8, 1, { &cb16, nullptr }, false, KT_IQ4K_GRID, sizeof(block_iq2_kt), pack_iq2_kt };
    static const kt_type iq3 = { 8, 1, { &cb16_abs, nullptr }, true, KT_UNSIGNED4, sizeof(block_iq3_kt), pack_iq3_kt };
    static const kt_type iq4 = { 4, 2, { &cb15a, &cb15b }, false, KT_SIGNED7, sizeof(block_iq4_kt), pack_iq4_kt };
    switch (t) {
        case GGML_TYPE_IQ1_KT: return iq1;
        case GGML_TYPE_IQ2_KT: return iq2;
        case GGML_TYPE_IQ3_KT: return iq3;
        default:               return iq4;
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

size_t ik_quantize_iq1_kt(const float * s, void * d, int64_t nr, int64_t n, const float * im) { return quantize_kt<GGML_TYPE_IQ1_KT>(s, d, nr, n, im); }
size_t ik_quantize_iq2_kt(const float * s, void * d, int64_t nr, int64_t n, const float * im) { return quantize_kt<GGML_TYPE_IQ2_KT>(s, d, nr, n, im); }
size_t ik_quantize_iq3_kt(const float * s, void * d, int64_t nr, int64_t n, const float * im) { return quantize_kt<GGML_TYPE_IQ3_KT>(s, d, nr, n, im); }
size_t ik_quantize_iq4_kt(const float * s, void * d, int64_t nr, int64_t n, const float * im) { return quantize_kt<GGML_TYPE_IQ4_KT>(s, d, nr, n, im); }
