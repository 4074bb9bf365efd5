// Quantizers of the ik_llama.cpp non-linear types. All follow one recipe (the reference's):
//   1. per sub-block (16 or 32 values), search the scale that best fits the block to the grid
//      and to the shifted grid, for both signs, over a few candidate scalings of the largest
//      value; importance weights are imatrix * sqrt(sigma^2 + x^2) (or a type's default);
//   2. quantize the sub-block scales against one super-block (or row) scale;
//   3. re-pick every level with the final scales, then refit the super-block (or row) scale by
//      weighted least squares (times a small type-specific boost where the reference uses one).
#include "quants-ik.h"
#include "quants-rows.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace {

inline int nearest_int(float v) {
    // round to nearest, ties to even, for |v| < 2^22 (what the reference's quantizers use)
    float t = v + 12582912.f;
    int32_t i;
    std::memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

// Index of the grid value nearest to x in a sorted table of n values (ties go up).
template <typename V>
inline int best_index(const V * values, int n, float x) {
    if (x <= values[0]) return 0;
    if (x >= values[n - 1]) return n - 1;
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < values[mid]) hi = mid; else lo = mid;
    }
    return x - values[lo] < values[hi] - x ? lo : hi;
}

// Importance weights of a row: the imatrix, except that blocks where it (or the data) is
// degenerate get a tiny uniform weight so the fit stays defined.
const float * row_importance(const float * imatrix, const float * x, int64_t n, int block, std::vector<float> & buf) {
    if (!imatrix) return nullptr;
    buf.resize(n);
    const float eps = 1e-9f, eps2 = eps * eps;
    for (int64_t ib = 0; ib < n / block; ++ib) {
        const float * w = imatrix + ib * block;
        const float * xb = x + ib * block;
        float sw2 = 0, sx2 = 0, swx = 0;
        for (int j = 0; j < block; ++j) {
            sw2 += w[j] * w[j];
            sx2 += xb[j] * xb[j];
            swx += w[j] * std::fabs(xb[j]);
        }
        const bool ok = sw2 > block * eps2 && sx2 > block * eps2 && swx > block * eps2;
        for (int j = 0; j < block; ++j) buf[ib * block + j] = ok ? w[j] : eps;
    }
    return buf.data();
}

// Weighted least-squares scale search over integer levels in [-nmax, nmax - 1] (returned in L
// as level + nmax); used for the 4/5-bit scales of iq2_k / iq2_ks.
float make_qx_quants(int n, int nmax, const float * x, int8_t * L, const float * w) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (!amax) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    auto fit = [&](float iscale, float & sumlx, float & suml2) {
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            sumlx += w[i] * x[i] * l;
            suml2 += w[i] * l * l;
        }
    };
    auto store = [&](float iscale) {
        for (int i = 0; i < n; ++i) L[i] = (int8_t) (nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
    };
    float sumlx, suml2;
    float iscale = -nmax / max;
    fit(iscale, sumlx, suml2);
    store(iscale);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        fit(iscale, sumlx, suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            store(iscale);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// The grid of a type for the search: n values, the shifted grid right after them.
struct grid {
    const float * values;   // 2n floats: grid then shifted grid
    int           n;
};

template <int N>
struct grid_store {
    float v[2 * N];
    template <typename T>
    explicit grid_store(const T * src, float shift_for_second_half = NAN) {
        for (int i = 0; i < N; ++i) v[i] = (float) src[i];
        for (int i = 0; i < N; ++i) v[N + i] = std::isnan(shift_for_second_half) ? (float) src[N + i] : v[i] + shift_for_second_half;
    }
    grid g() const { return { v, N }; }
};

// Step 1 for the grid types: the best scale of one sub-block and whether the shifted grid won.
struct scale_fit {
    float d;
    bool  shifted;
};

scale_fit search_block_scale(const float * xb, const float * w, int bs, const grid & gr, int ntry, float step,
                             bool refine, float zero_threshold) {
    float amax = 0, max = 0;
    for (int j = 0; j < bs; ++j) {
        const float ax = std::fabs(xb[j]);
        if (ax > amax) { amax = ax; max = xb[j]; }
    }
    if (amax <= zero_threshold) return { 0.f, false };
    const float * vals = gr.values;
    const float * svals = gr.values + gr.n;
    auto sums = [&](const float * v, float id, float & qx_p, float & q2_p, float & qx_m, float & q2_m) {
        qx_p = q2_p = qx_m = q2_m = 0;
        for (int j = 0; j < bs; ++j) {
            const float al = id * xb[j];
            float q = v[best_index(v, gr.n, al)];
            qx_p += w[j] * q * xb[j];
            q2_p += w[j] * q * q;
            q = v[best_index(v, gr.n, -al)];
            qx_m += w[j] * q * xb[j];
            q2_m += w[j] * q * q;
        }
    };
    float d = -max / vals[0];
    float qx_p, q2_p, qx_m, q2_m;
    sums(vals, 1 / d, qx_p, q2_p, qx_m, q2_m);
    float best = 0;
    d = 0;
    if (q2_p > 0) { d = qx_p / q2_p; best = d * qx_p; }
    if (q2_m > 0 && qx_m * qx_m > best * q2_m) { d = qx_m / q2_m; best = d * qx_m; }
    bool shifted = false;
    for (int itry = -ntry; itry <= ntry; ++itry) {
        for (int s = 0; s < 2; ++s) {
            const float * v = s ? svals : vals;
            sums(v, (itry * step + v[0]) / max, qx_p, q2_p, qx_m, q2_m);
            if (q2_p > 0 && qx_p * qx_p > best * q2_p) { d = qx_p / q2_p; best = d * qx_p; shifted = s; }
            if (q2_m > 0 && qx_m * qx_m > best * q2_m) { d = qx_m / q2_m; best = d * qx_m; shifted = s; }
        }
    }
    if (refine && d) {
        const float * v = shifted ? svals : vals;
        float qx = 0, q2 = 0;
        for (int j = 0; j < bs; ++j) {
            const float q = v[best_index(v, gr.n, xb[j] / d)];
            qx += w[j] * q * xb[j];
            q2 += w[j] * q * q;
        }
        if (q2 > 0) d = qx / q2;
    }
    return { d, shifted };
}

// iq2 grids (4 levels): exhaustive search over the sorted order of the block, as the reference.
scale_fit search_block_scale_iq2(const float * xb, const float * w, int bs, int max_i1, int min_i3) {
    std::array<std::pair<float, int>, 32> pairs;
    float sumx[33], sumw[33];
    for (int j = 0; j < bs; ++j) pairs[j] = { xb[j], j };
    std::sort(pairs.begin(), pairs.begin() + bs);
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < bs; ++j) {
        const int jj = pairs[j].second;
        sumw[j + 1] = sumw[j] + w[jj];
        sumx[j + 1] = sumx[j] + w[jj] * xb[jj];
    }
    float val[2][4];
    for (int k = 0; k < 4; ++k) {
        val[0][k] = ik_iq2nl_values[k];
        val[1][k] = ik_iq2nl_values[4 + k];
    }
    float best = 0, d = 0;
    bool shifted = false;
    for (int i1 = 0; i1 < max_i1; ++i1) {
        for (int i2 = i1; i2 < bs; ++i2) {
            for (int i3 = std::max(i2, min_i3); i3 < bs; ++i3) {
                const float cx[4] = { sumx[i1] - sumx[0], sumx[i2] - sumx[i1], sumx[i3] - sumx[i2], sumx[bs] - sumx[i3] };
                const float cw[4] = { sumw[i1] - sumw[0], sumw[i2] - sumw[i1], sumw[i3] - sumw[i2], sumw[bs] - sumw[i3] };
                for (int s = 0; s < 2; ++s) {
                    for (int dir = 0; dir < 2; ++dir) {
                        float qx = 0, q2 = 0;
                        for (int k = 0; k < 4; ++k) {
                            const float v = val[s][dir ? 3 - k : k];
                            qx += cx[k] * v;
                            q2 += cw[k] * v * v;
                        }
                        if (q2 > 0 && qx * qx > best * q2) { d = qx / q2; best = d * qx; shifted = s; }
                    }
                }
            }
        }
    }
    return { d, shifted };
}

// Importance weights of one sub-block.
enum weight_mode { W_SQUARE, W_SIGMA_QUARTER };

void block_weights(const float * xb, const float * qw, int bs, float sigma2, weight_mode mode, float * w) {
    for (int j = 0; j < bs; ++j) {
        if (qw) w[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
        else    w[j] = mode == W_SQUARE ? xb[j] * xb[j] : 0.25f * sigma2 + xb[j] * xb[j];
    }
}

float sum_squares(const float * x, int n) {
    float s = 0;
    for (int j = 0; j < n; ++j) s += x[j] * x[j];
    return s;
}

// Step 3: levels of one sub-block for the final scale dl (grid v of n values); accumulates the
// least-squares terms of the refit with level scale ls.
void pick_levels(const float * xb, const float * w, int bs, const float * v, int n, float dl, float ls, uint8_t * idx,
                 float & sumqx, float & sumq2) {
    const float idl = dl ? 1 / dl : 0.f;
    for (int j = 0; j < bs; ++j) {
        const int i = best_index(v, n, idl * xb[j]);
        idx[j] = (uint8_t) i;
        const float q = v[i] * ls;
        sumqx += w[j] * q * xb[j];
        sumq2 += w[j] * q * q;
    }
}

// Per-row driver: checks input, derives importance weights and calls the row quantizer.
template <typename F>
size_t quantize_rows(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix, ggml_type t,
                     int weight_block, F && row_fn) {
    if (n_per_row % QK_K != 0) return 0;
    const size_t row_size = ggml_row_size(t, n_per_row);
    std::vector<float> wbuf;
    for (int64_t r = 0; r < nrows; ++r) {
        const float * x = src + r * n_per_row;
        if (!rows_finite(x, n_per_row)) return 0;
        const float * qw = row_importance(imatrix, x, n_per_row, weight_block, wbuf);
        char * out = (char *) dst + r * row_size;
        std::memset(out, 0, row_size);
        row_fn(x, out, n_per_row, qw);
    }
    return nrows * row_size;
}

// ---------------------------------------------------------------------------------------------
// Types with an fp16 scale per 256 values and 16 sub-block scales

const grid_store<4>  g_iq2(ik_iq2nl_values);
const grid_store<8>  g_iq3(ik_iq3nl_values);
const grid_store<16> g_iq4(ik_iq4k_values);
const grid_store<32> g_iq5(ik_iq5nl_values);
const grid_store<64> g_iq6(ik_iq6nl_values, 1.0f);

void iq2_k_row(const float * x, char * out, int64_t n, const float * qw) {
    auto * y = (block_iq2_k *) out;
    float scales[16], w[16], sw[16];
    int8_t Ls[16];
    uint8_t idx[16];
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + ibl * QK_K;
        const float sigma2 = 1.5f * sum_squares(xbl, QK_K) / QK_K;
        uint16_t extra = 0;
        float max_abs = 0;
        for (int ib = 0; ib < 16; ++ib) {
            const float * xb = xbl + 16 * ib;
            block_weights(xb, qw ? qw + ibl * QK_K + 16 * ib : nullptr, 16, sigma2, W_SIGMA_QUARTER, w);
            sw[ib] = 0;
            for (int j = 0; j < 16; ++j) sw[ib] += w[j];
            const scale_fit f = search_block_scale_iq2(xb, w, 16, 16, 0);
            scales[ib] = f.d;
            if (f.shifted) extra |= 1 << ib;
            max_abs = std::max(max_abs, std::fabs(f.d));
        }
        if (!max_abs) continue;
        const float d = make_qx_quants(16, 8, scales, Ls, sw);
        if (!d) continue;
        y[ibl].extra = extra;
        float sumqx = 0, sumq2 = 0;
        for (int ib = 0; ib < 16; ++ib) {
            const int ls = std::clamp(nearest_int(scales[ib] / d), -8, 7);
            y[ibl].scales[ib / 2] |= (uint8_t) ((ls + 8) << 4 * (ib % 2));
            if (!ls) continue;
            const float * xb = xbl + 16 * ib;
            block_weights(xb, qw ? qw + ibl * QK_K + 16 * ib : nullptr, 16, sigma2, W_SIGMA_QUARTER, w);
            const float * v = g_iq2.v + ((extra >> ib) & 1) * 4;
            pick_levels(xb, w, 16, v, 4, d * ls, (float) ls, idx, sumqx, sumq2);
            const int ib32 = ib / 2;
            uint8_t * qs = y[ibl].qs + 32 * (ib32 / 4) + 16 * (ib % 2);
            for (int j = 0; j < 16; ++j) qs[j] |= (uint8_t) (idx[j] << 2 * (ib32 % 4));
        }
        y[ibl].d = GGML_FP32_TO_FP16(1.030f * (sumq2 > 0 ? sumqx / sumq2 : d));
    }
}

// iq3_k .. iq6_k share steps 1 and 3; they differ in the grid, the search and how the 16 scales
// are coded.
struct k16_params {
    const grid * gr;
    int          ntry;
    float        step;
    bool         refine;
    float        sigma_factor;
    weight_mode  wmode;
};

void k16_block_scales(const float * xbl, const float * qw, const k16_params & p, float * scales, uint16_t & extra,
                      float & sigma2) {
    float w[16];
    sigma2 = p.sigma_factor * sum_squares(xbl, QK_K) / QK_K;
    extra = 0;
    for (int ib = 0; ib < 16; ++ib) {
        const float * xb = xbl + 16 * ib;
        block_weights(xb, qw ? qw + 16 * ib : nullptr, 16, sigma2, p.wmode, w);
        const scale_fit f = search_block_scale(xb, w, 16, *p.gr, p.ntry, p.step, p.refine, 1e-9f);
        scales[ib] = f.d;
        if (f.shifted) extra |= 1 << ib;
    }
}

void iq3_k_row(const float * x, char * out, int64_t n, const float * qw) {
    auto * y = (block_iq3_k *) out;
    const grid gr = g_iq3.g();
    const k16_params p = { &gr, 3, 2.f, false, 1.5f, W_SIGMA_QUARTER };
    float scales[16], w[16], sigma2;
    uint8_t idx[16];
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + ibl * QK_K;
        const float * qwb = qw ? qw + ibl * QK_K : nullptr;
        uint16_t extra;
        k16_block_scales(xbl, qwb, p, scales, extra, sigma2);
        float max_abs = 0;
        for (float s : scales) max_abs = std::max(max_abs, std::fabs(s));
        if (!max_abs) continue;
        const float d = max_abs / 31;
        y[ibl].extra = extra;
        float sumqx = 0, sumq2 = 0;
        for (int ib = 0; ib < 16; ++ib) {
            int ls = std::clamp(nearest_int(0.5f * (std::fabs(scales[ib]) / d - 1)), 0, 15);
            y[ibl].scales_l[ib / 2] |= (uint8_t) (ls << 4 * (ib % 2));
            if (scales[ib] < 0) y[ibl].scales_h |= 1 << ib;
            ls = (2 * ls + 1) * (scales[ib] < 0 ? -1 : 1);
            const float * xb = xbl + 16 * ib;
            block_weights(xb, qwb ? qwb + 16 * ib : nullptr, 16, sigma2, W_SIGMA_QUARTER, w);
            pick_levels(xb, w, 16, g_iq3.v + ((extra >> ib) & 1) * 8, 8, d * ls, (float) ls, idx, sumqx, sumq2);
            const int ib32 = ib / 2, off = 16 * (ib % 2);
            uint8_t * qs = y[ibl].qs + 32 * (ib32 / 4) + off;
            uint8_t * qh = y[ibl].qh + off;
            for (int j = 0; j < 16; ++j) {
                qs[j] |= (uint8_t) ((idx[j] & 3) << 2 * (ib32 % 4));
                qh[j] |= (uint8_t) ((idx[j] >> 2) << ib32);
            }
        }
        y[ibl].d = GGML_FP32_TO_FP16(1.01f * (sumq2 > 0 ? sumqx / sumq2 : d));
    }
}

// Signed 6-bit (iq4_k, iq5_k) or 8-bit (iq6_k) sub-block scales against d = -max_scale / nmax.
template <typename Block, int NV>
void k16_signed_row(const float * x, char * out, int64_t n, const float * qw, const k16_params & p, int nmax,
                    int lmin, int lmax, const float * values, void (*pack)(Block &, int ib, int ls, const uint8_t * idx)) {
    auto * y = (Block *) out;
    float scales[16], w[16], sigma2;
    uint8_t idx[16];
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + ibl * QK_K;
        const float * qwb = qw ? qw + ibl * QK_K : nullptr;
        uint16_t extra;
        k16_block_scales(xbl, qwb, p, scales, extra, sigma2);
        float max_abs = 0, max_scale = 0;
        for (float s : scales) {
            if (std::fabs(s) > max_abs) { max_abs = std::fabs(s); max_scale = s; }
        }
        if (!max_abs) continue;
        const float d = -max_scale / nmax;
        y[ibl].extra = extra;
        float sumqx = 0, sumq2 = 0;
        for (int ib = 0; ib < 16; ++ib) {
            const int ls = std::clamp(nearest_int(scales[ib] / d), lmin, lmax);
            const float * xb = xbl + 16 * ib;
            block_weights(xb, qwb ? qwb + 16 * ib : nullptr, 16, sigma2, p.wmode, w);
            std::memset(idx, 0, sizeof(idx));
            if (ls) pick_levels(xb, w, 16, values + ((extra >> ib) & 1) * NV, NV, d * ls, (float) ls, idx, sumqx, sumq2);
            pack(y[ibl], ib, ls, idx);
        }
        y[ibl].d = GGML_FP32_TO_FP16(sumq2 > 0 ? sumqx / sumq2 : d);
    }
}

void pack_iq4_k(block_iq4_k & b, int ib, int ls, const uint8_t * idx) {
    const int u = ls + 32;
    b.scales_l[ib / 2] |= (uint8_t) ((u & 0xF) << 4 * (ib % 2));
    b.scales_h[ib / 4] |= (uint8_t) ((u >> 4) << 2 * (ib % 4));
    uint8_t * qs = b.qs + 16 * (ib / 2);
    for (int j = 0; j < 16; ++j) qs[j] |= (uint8_t) (idx[j] << 4 * (ib % 2));
}

void pack_iq5_k(block_iq5_k & b, int ib, int ls, const uint8_t * idx) {
    const int u = ls + 32;
    b.scales_l[ib / 2] |= (uint8_t) ((u & 0xF) << 4 * (ib % 2));
    b.scales_h[ib / 4] |= (uint8_t) ((u >> 4) << 2 * (ib % 4));
    const int ib32 = ib / 2, off = 16 * (ib % 2);
    uint8_t * qs = b.qs + 32 * (ib32 / 2) + off;
    uint8_t * qh = b.qh + off;
    for (int j = 0; j < 16; ++j) {
        qs[j] |= (uint8_t) ((idx[j] & 0xF) << 4 * (ib32 % 2));
        qh[j] |= (uint8_t) ((idx[j] >> 4) << (ib32 % 8));
    }
}

void pack_iq6_k(block_iq6_k & b, int ib, int ls, const uint8_t * idx) {
    b.scales[ib] = (int8_t) ls;
    const int ib32 = ib / 2, off = 16 * (ib % 2);
    uint8_t * qs = b.qs + 32 * (ib32 / 2) + off;
    uint8_t * qh = b.qh + 32 * (ib32 / 4) + off;
    for (int j = 0; j < 16; ++j) {
        qs[j] |= (uint8_t) ((idx[j] & 0xF) << 4 * (ib32 % 2));
        qh[j] |= (uint8_t) ((idx[j] >> 4) << 2 * (ib32 % 4));
    }
}

void iq4_k_row(const float * x, char * out, int64_t n, const float * qw) {
    const grid gr = g_iq4.g();
    const k16_params p = { &gr, 7, 1.f, false, 2.f, W_SQUARE };
    k16_signed_row<block_iq4_k, 16>(x, out, n, qw, p, 32, -32, 31, g_iq4.v, pack_iq4_k);
}

void iq5_k_row(const float * x, char * out, int64_t n, const float * qw) {
    const grid gr = g_iq5.g();
    const k16_params p = { &gr, 5, 1.f, true, 2.f, W_SIGMA_QUARTER };
    k16_signed_row<block_iq5_k, 32>(x, out, n, qw, p, 32, -32, 31, g_iq5.v, pack_iq5_k);
}

void iq6_k_row(const float * x, char * out, int64_t n, const float * qw) {
    const grid gr = g_iq6.g();
    const k16_params p = { &gr, 5, 1.f, true, 2.f, W_SIGMA_QUARTER };
    k16_signed_row<block_iq6_k, 64>(x, out, n, qw, p, 127, -127, 127, g_iq6.v, pack_iq6_k);
}

// ---------------------------------------------------------------------------------------------
// Row-scaled types: 8 sub-blocks of 32 per 256, one scale per row

struct ks_params {
    const grid * gr;
    int          ntry;
    float        zero_threshold;
};

// Step 1 over the whole row: per-32 scales, shifted flags; returns the weights' sigma^2 per 256.
void ks_block_scales(const float * x, int64_t n, const float * qw, const ks_params & p, std::vector<float> & scales,
                     std::vector<uint8_t> & shifted) {
    float w[32];
    scales.assign(n / 32, 0.f);
    shifted.assign(n / 32, 0);
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + ibl * QK_K;
        const float sigma2 = 2.f * sum_squares(xbl, QK_K) / QK_K;
        for (int ib = 0; ib < 8; ++ib) {
            const float * xb = xbl + 32 * ib;
            block_weights(xb, qw ? qw + ibl * QK_K + 32 * ib : nullptr, 32, sigma2, W_SQUARE, w);
            const scale_fit f = search_block_scale(xb, w, 32, *p.gr, p.ntry, 1.f, false, p.zero_threshold);
            scales[ibl * 8 + ib] = f.d;
            shifted[ibl * 8 + ib] = f.shifted;
        }
    }
}

// iq4_ks / iq5_ks: even scale codes 0..254 (scale + 127) against d = max|scale| / 127.
// `fix` (optional) may change levels after the pick (iq4_kss: a parity constraint); the refit
// then uses the changed levels. It gets the importance weights, or none without an imatrix: the
// default x^2 weights steer the scale search, but a forced level change is best judged by its
// plain squared error. `pack` stores a sub-block's scale code and levels.
using level_fix_fn = void (*)(const float * xb, const float * w, const float * v, float dl, uint8_t * idx);

template <typename Block, int NV>
void ks_even_row(const float * x, char * out, int64_t n, const float * qw, const ks_params & p, const float * values,
                 void (*pack)(Block &, int ib, int code, const uint8_t * idx), level_fix_fn fix = nullptr) {
    float * dptr = (float *) out;
    auto * y = (Block *) (out + 4);
    std::vector<float> scales;
    std::vector<uint8_t> shifted;
    ks_block_scales(x, n, qw, p, scales, shifted);
    float amax = 0;
    for (float s : scales) amax = std::max(amax, std::fabs(s));
    const float d = amax / 127;
    *dptr = d;
    if (!d) return;
    float w[32];
    uint8_t idx[32];
    float sumqx = 0, sumq2 = 0;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + ibl * QK_K;
        const float sigma2 = 2.f * sum_squares(xbl, QK_K) / QK_K;
        for (int ib = 0; ib < 8; ++ib) {
            const int l = std::clamp(nearest_int(0.5f * (scales[ibl * 8 + ib] / d + 127.f)), 0, 127) << 1;
            const int ls = l - 127;
            const float * xb = xbl + 32 * ib;
            const float * v = values + shifted[ibl * 8 + ib] * NV;
            block_weights(xb, qw ? qw + ibl * QK_K + 32 * ib : nullptr, 32, sigma2, W_SQUARE, w);
            float bqx = 0, bq2 = 0;
            pick_levels(xb, w, 32, v, NV, d * ls, (float) ls, idx, bqx, bq2);
            if (fix) {
                fix(xb, qw ? w : nullptr, v, d * ls, idx);
                bqx = bq2 = 0;
                for (int j = 0; j < 32; ++j) {
                    const float q = v[idx[j]] * ls;
                    bqx += w[j] * q * xb[j];
                    bq2 += w[j] * q * q;
                }
            }
            sumqx += bqx;
            sumq2 += bq2;
            pack(y[ibl], ib, l | shifted[ibl * 8 + ib], idx);
        }
    }
    if (sumq2 > 0) *dptr = sumqx / sumq2;
}

void pack_iq4_ks(block_iq4_ks & b, int ib, int code, const uint8_t * idx) {
    b.scales[ib] = (uint8_t) code;
    for (int j = 0; j < 16; ++j) b.qs[16 * ib + j] = (uint8_t) (idx[j] | (idx[j + 16] << 4));
}

void pack_iq5_ks(block_iq5_ks & b, int ib, int code, const uint8_t * idx) {
    b.scales[ib] = (uint8_t) code;
    uint8_t * qs = b.qs + 32 * (ib / 2);
    for (int j = 0; j < 32; ++j) {
        qs[j] |= (uint8_t) ((idx[j] & 0xF) << 4 * (ib % 2));
        b.qh[j] |= (uint8_t) ((idx[j] >> 4) << ib);
    }
}

void iq4_ks_row(const float * x, char * out, int64_t n, const float * qw) {
    const grid gr = g_iq4.g();
    ks_even_row<block_iq4_ks, 16>(x, out, n, qw, { &gr, 7, 0.f }, g_iq4.v, pack_iq4_ks);
}

// iq4_kss: iq4_ks levels packed 4 to a 16-bit word g (positions 2k, 2k+16, 2k+1, 2k+17 as its
// nibbles) stored as its Gray-code preimage, whose lowest bit carries one bit of the scale code:
// only words of even bit parity survive. An odd group gives up the one level change (any of its
// four values, any level of the other parity) that costs the least (weighted) squared error.
inline int parity4(int q) { return __builtin_popcount((unsigned) q) & 1; }

void kss_fix_parity(const float * xb, const float * w, const float * v, float dl, uint8_t * idx) {
    for (int k = 0; k < 8; ++k) {
        const int pos[4] = { 2 * k, 2 * k + 1, 2 * k + 16, 2 * k + 17 };
        if (!((parity4(idx[pos[0]]) + parity4(idx[pos[1]]) + parity4(idx[pos[2]]) + parity4(idx[pos[3]])) & 1)) continue;
        float best = INFINITY;
        int bp = pos[0], bq = idx[pos[0]];
        for (int p : pos) {
            const float e0 = xb[p] - dl * v[idx[p]];
            for (int q = 0; q < 16; ++q) {
                if (parity4(q) == parity4(idx[p])) continue;
                const float e = xb[p] - dl * v[q];
                const float cost = (w ? w[p] : 1.f) * (e * e - e0 * e0);
                if (cost < best) { best = cost; bp = p; bq = q; }
            }
        }
        idx[bp] = (uint8_t) bq;
    }
}

void pack_iq4_kss(block_iq4_kss & b, int ib, int code, const uint8_t * idx) {
    uint16_t words[8];
    for (int k = 0; k < 8; ++k) {
        uint16_t g = (uint16_t) (idx[2 * k] | (idx[2 * k + 16] << 4) | (idx[2 * k + 1] << 8) | (idx[2 * k + 17] << 12));
        // inverse Gray code: bit i of the preimage is the XOR of bits i.. of g (bit 0: the parity, 0)
        g ^= (uint16_t) (g >> 1);
        g ^= (uint16_t) (g >> 2);
        g ^= (uint16_t) (g >> 4);
        g ^= (uint16_t) (g >> 8);
        words[k] = (uint16_t) (g | ((code >> k) & 1));
    }
    std::memcpy((char *) b.qs + 16 * ib, words, sizeof(words));
}

void iq4_kss_row(const float * x, char * out, int64_t n, const float * qw) {
    const grid gr = g_iq4.g();
    ks_even_row<block_iq4_kss, 16>(x, out, n, qw, { &gr, 7, 0.f }, g_iq4.v, pack_iq4_kss, kss_fix_parity);
}

void iq5_ks_row(const float * x, char * out, int64_t n, const float * qw) {
    const grid gr = g_iq5.g();
    ks_even_row<block_iq5_ks, 32>(x, out, n, qw, { &gr, 5, 1e-15f }, g_iq5.v, pack_iq5_ks);
}

void iq3_ks_row(const float * x, char * out, int64_t n, const float * qw) {
    auto * dptr = (ggml_fp16_t *) out;
    auto * y = (block_iq3_ks *) (out + 2);
    const grid gr = g_iq3.g();
    std::vector<float> scales;
    std::vector<uint8_t> shifted;
    ks_block_scales(x, n, qw, { &gr, 5, 1e-9f }, scales, shifted);
    float amax = 0, max_scale = 0;
    for (float s : scales) {
        if (std::fabs(s) > amax) { amax = std::fabs(s); max_scale = s; }
    }
    const float d = -max_scale / 16;
    *dptr = GGML_FP32_TO_FP16(d);
    if (!d) return;
    float w[32];
    uint8_t idx[32];
    float sumqx = 0, sumq2 = 0;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + ibl * QK_K;
        const float sigma2 = 2.f * sum_squares(xbl, QK_K) / QK_K;
        for (int ib = 0; ib < 8; ++ib) {
            const int l = std::clamp(nearest_int(scales[ibl * 8 + ib] / d), -16, 15);
            const int ul = l + 16;
            y[ibl].scales[ib % 4] |= (uint8_t) ((ul & 0xF) << 4 * (ib / 4));
            y[ibl].extra |= (uint16_t) (((ul >> 4) << ib) | (shifted[ibl * 8 + ib] << (8 + ib)));
            const float * xb = xbl + 32 * ib;
            block_weights(xb, qw ? qw + ibl * QK_K + 32 * ib : nullptr, 32, sigma2, W_SQUARE, w);
            pick_levels(xb, w, 32, g_iq3.v + shifted[ibl * 8 + ib] * 8, 8, d * l, (float) l, idx, sumqx, sumq2);
            uint8_t * qs = y[ibl].qs + 32 * (ib / 4);
            for (int j = 0; j < 32; ++j) {
                qs[j] |= (uint8_t) ((idx[j] & 3) << 2 * (ib % 4));
                y[ibl].qh[j] |= (uint8_t) ((idx[j] >> 2) << ib);
            }
        }
    }
    if (sumq2 > 0) *dptr = GGML_FP32_TO_FP16(sumqx / sumq2);
}

void iq2_ks_row(const float * x, char * out, int64_t n, const float * qw) {
    auto * dptr = (ggml_fp16_t *) out;
    auto * y = (block_iq2_ks *) (out + 2);
    const int64_t nblk = n / 32;
    std::vector<float> scales(nblk), sw(nblk);
    std::vector<int8_t> Ls(nblk);
    std::vector<uint8_t> shifted(nblk);
    float w[32];
    uint8_t idx[32];
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + ibl * QK_K;
        const float sigma2 = 1.5f * sum_squares(xbl, QK_K) / QK_K;
        for (int ib = 0; ib < 8; ++ib) {
            const float * xb = xbl + 32 * ib;
            block_weights(xb, qw ? qw + ibl * QK_K + 32 * ib : nullptr, 32, sigma2, W_SIGMA_QUARTER, w);
            float s = 0;
            for (int j = 0; j < 32; ++j) s += w[j];
            sw[ibl * 8 + ib] = s;
            const scale_fit f = search_block_scale_iq2(xb, w, 32, 24, 8);
            scales[ibl * 8 + ib] = f.d;
            shifted[ibl * 8 + ib] = f.shifted;
        }
    }
    const float d = make_qx_quants((int) nblk, 16, scales.data(), Ls.data(), sw.data());
    *dptr = GGML_FP32_TO_FP16(d);
    if (!d) return;
    float sumqx = 0, sumq2 = 0;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + ibl * QK_K;
        const float sigma2 = 1.5f * sum_squares(xbl, QK_K) / QK_K;
        for (int ib = 0; ib < 8; ++ib) {
            const int u = Ls[ibl * 8 + ib];
            y[ibl].scales[ib / 2] |= (uint8_t) ((u & 0xF) << 4 * (ib % 2));
            y[ibl].extra |= (uint16_t) (((u >> 4) << (8 + ib)) | (shifted[ibl * 8 + ib] << ib));
            const int ls = u - 16;
            if (!ls) continue;
            const float * xb = xbl + 32 * ib;
            block_weights(xb, qw ? qw + ibl * QK_K + 32 * ib : nullptr, 32, sigma2, W_SIGMA_QUARTER, w);
            pick_levels(xb, w, 32, g_iq2.v + shifted[ibl * 8 + ib] * 4, 4, d * ls, (float) ls, idx, sumqx, sumq2);
            uint8_t * qs = y[ibl].qs + 32 * (ib / 4);
            for (int j = 0; j < 32; ++j) qs[j] |= (uint8_t) (idx[j] << 2 * (ib % 4));
        }
    }
    *dptr = GGML_FP32_TO_FP16(1.030f * (sumq2 > 0 ? sumqx / sumq2 : d));
}

// ---------------------------------------------------------------------------------------------
// iq2_kl: per 32 values, 16 pairs each taken from a 32-entry grid of iq3nl level pairs, a signed
// 6-bit scale, one fp16 scale per row. The pair search is exhaustive (32 candidates weighted by
// the importance of both values), so every step below sees the best pair for its scale.

struct kl_pairs {
    float a[32], b[32];
    kl_pairs() {
        for (int i = 0; i < 32; ++i) {
            a[i] = (float) (int8_t) (ik_iq2kl_values[i] & 0xFF);
            b[i] = (float) (int8_t) (ik_iq2kl_values[i] >> 8);
        }
    }
    // best pair for the scaled values (s1, s2) under weights (w1, w2)
    int best(float s1, float s2, float w1, float w2) const {
        int ib = 0;
        float e = INFINITY;
        for (int i = 0; i < 32; ++i) {
            const float e1 = a[i] - s1, e2 = b[i] - s2;
            const float ei = w1 * e1 * e1 + w2 * e2 * e2;
            if (ei < e) { e = ei; ib = i; }
        }
        return ib;
    }
};
const kl_pairs g_kl;

// Least-squares terms of one 32-block quantized with inverse scale id (pairs in idx if given).
void kl_fit(const float * xb, const float * w, float id, float & sumqx, float & sumq2, uint8_t * idx = nullptr) {
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; j += 2) {
        const int i = g_kl.best(id * xb[j], id * xb[j + 1], w[j], w[j + 1]);
        if (idx) idx[j / 2] = (uint8_t) i;
        sumqx += w[j] * g_kl.a[i] * xb[j] + w[j + 1] * g_kl.b[i] * xb[j + 1];
        sumq2 += w[j] * g_kl.a[i] * g_kl.a[i] + w[j + 1] * g_kl.b[i] * g_kl.b[i];
    }
}

// Step 1: the best free scale of a 32-block over scalings of its largest value, both signs.
float kl_block_scale(const float * xb, const float * w) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        if (std::fabs(xb[j]) > amax) { amax = std::fabs(xb[j]); max = xb[j]; }
    }
    if (amax == 0) return 0.f;
    float d = 0, best = 0;
    for (int itry = -8; itry <= 8; ++itry) {
        for (float sign : { 1.f, -1.f }) {
            float qx, q2;
            kl_fit(xb, w, sign * (itry + ik_iq3nl_values[0]) / max, qx, q2);
            if (q2 > 0 && qx * qx > best * q2) { d = qx / q2; best = d * qx; }
        }
    }
    return d;
}

void kl_weights(const float * xbl, const float * qw, int ib, float * w) {
    const float sigma2 = 2.f * sum_squares(xbl, QK_K) / QK_K;
    const float * xb = xbl + 32 * ib;
    for (int j = 0; j < 32; ++j) w[j] = qw ? qw[32 * ib + j] * std::sqrt(sigma2 + xb[j] * xb[j]) : std::fabs(xb[j]);
}

// Steps 2-3 for a row scale d: each block's 6-bit scale (the nearest and its neighbours, by the
// error they give), its pairs, and the least-squares terms of the refit.
struct kl_row {
    std::vector<int8_t>  ls;
    std::vector<uint8_t> idx;
    float sumqx = 0, sumq2 = 0;
};

kl_row kl_assign(const float * x, int64_t n, const float * qw, const std::vector<float> & scales, float d) {
    kl_row r;
    r.ls.assign(n / 32, 0);
    r.idx.assign(n / 2, 0);
    float w[32];
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float * xb = x + 32 * ib;
        kl_weights(x + (ib / 8) * QK_K, qw ? qw + (ib / 8) * QK_K : nullptr, (int) (ib % 8), w);
        const int l0 = std::clamp(nearest_int(scales[ib] / d), -32, 31);
        float best = INFINITY;
        for (int l = std::max(-32, l0 - 1); l <= std::min(31, l0 + 1); ++l) {
            if (l == 0) continue;
            uint8_t idx[16];
            float qx, q2;
            kl_fit(xb, w, 1 / (d * l), qx, q2, idx);
            // weighted error of the block at scale d * l: sum w x^2 - 2 d l qx + (d l)^2 q2
            const float dl = d * l, err = dl * dl * q2 - 2 * dl * qx;
            if (err < best) {
                best = err;
                r.ls[ib] = (int8_t) l;
                std::memcpy(r.idx.data() + 16 * ib, idx, 16);
            }
        }
        if (!r.ls[ib]) continue;
        const uint8_t * idx = r.idx.data() + 16 * ib;
        for (int j = 0; j < 16; ++j) {
            const float q1 = r.ls[ib] * g_kl.a[idx[j]], q2 = r.ls[ib] * g_kl.b[idx[j]];
            r.sumqx += w[2 * j] * q1 * xb[2 * j] + w[2 * j + 1] * q2 * xb[2 * j + 1];
            r.sumq2 += w[2 * j] * q1 * q1 + w[2 * j + 1] * q2 * q2;
        }
    }
    return r;
}

void iq2_kl_row(const float * x, char * out, int64_t n, const float * qw) {
    auto * dptr = (ggml_fp16_t *) out;
    auto * y = (block_iq2_kl *) (out + 2);
    std::vector<float> scales(n / 32);
    float w[32], max_scale = 0;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        kl_weights(x + (ib / 8) * QK_K, qw ? qw + (ib / 8) * QK_K : nullptr, (int) (ib % 8), w);
        scales[ib] = kl_block_scale(x + 32 * ib, w);
        if (std::fabs(scales[ib]) > std::fabs(max_scale)) max_scale = scales[ib];
    }
    *dptr = GGML_FP32_TO_FP16(0.f);
    if (max_scale == 0) return;
    // the row scale maps the largest block scale to -32; re-assigning once with the refit row
    // scale lets the block scales use the range the refit freed (kept only if it fits better)
    float d = -max_scale / 32;
    kl_row r = kl_assign(x, n, qw, scales, d);
    for (int iter = 0; iter < 2 && r.sumq2 > 0; ++iter) {
        const float dn = r.sumqx / r.sumq2;
        kl_row t = kl_assign(x, n, qw, scales, dn);
        if (t.sumq2 <= 0 || t.sumqx * t.sumqx * r.sumq2 <= r.sumqx * r.sumqx * t.sumq2) break;
        r = std::move(t);
    }
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        block_iq2_kl & b = y[ib / 8];
        const int k = (int) (ib % 8), u = r.ls[ib] + 32;
        b.scales_l[k % 4] |= (uint8_t) ((u & 0xF) << 4 * (k / 4));
        b.scales_h |= (uint16_t) ((u >> 4) << 2 * k);
        for (int j = 0; j < 16; ++j) {
            const int i = r.idx[16 * ib + j];
            b.qs[16 * (k / 2) + j] |= (uint8_t) ((i & 0xF) << 4 * (k % 2));
            b.qh[j] |= (uint8_t) ((i >> 4) << k);
        }
    }
    // the reference stores its least-squares row scale times 1.025: files match it
    *dptr = GGML_FP32_TO_FP16(1.025f * (r.sumq2 > 0 ? r.sumqx / r.sumq2 : d));
}

} // namespace

size_t ik_quantize_iq2_k(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ2_K, 16, iq2_k_row);
}
size_t ik_quantize_iq3_k(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ3_K, 16, iq3_k_row);
}
size_t ik_quantize_iq4_k(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ4_K, 16, iq4_k_row);
}
size_t ik_quantize_iq5_k(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ5_K, 16, iq5_k_row);
}
size_t ik_quantize_iq6_k(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ6_K, 16, iq6_k_row);
}
size_t ik_quantize_iq4_ks(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ4_KS, 32, iq4_ks_row);
}
size_t ik_quantize_iq5_ks(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ5_KS, 32, iq5_ks_row);
}
size_t ik_quantize_iq3_ks(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ3_KS, 32, iq3_ks_row);
}
size_t ik_quantize_iq4_kss(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ4_KSS, 32, iq4_kss_row);
}
size_t ik_quantize_iq2_kl(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ2_KL, 32, iq2_kl_row);
}
size_t ik_quantize_iq2_ks(const float * s, void * d, int64_t nr, int64_t n, const float * im) {
    return quantize_rows(s, d, nr, n, im, GGML_TYPE_IQ2_KS, 32, iq2_ks_row);
}
