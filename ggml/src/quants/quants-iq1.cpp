// IQ1_S (1.56 bpw) and IQ1_M (1.75 bpw): groups of 8 weights are points of a 2048-entry ternary
// grid (-1/0/+1) shifted by +-1/8 (IQ1_DELTA), scaled by (2s+1)*d per 32 (IQ1_S) or 16 (IQ1_M)
// weights. IQ1_S keeps one shift sign per 32 weights; IQ1_M one per 8 and splits its fp16 d
// across the top nibbles of the four scale words.
//
// The decoders (to_float) are quants-blocks-iq.h's, shared with the CUDA kernels. The quantizers
// solve the ternary split exactly (sorted prefix sums, every pair of boundaries) as llama.cpp
// does, then move off-grid groups to the best neighbouring grid point. For the dot products a
// weight is taken as 8*grid + shift sign (exact small integers), times d*(2s+1)/8.
#include "quants-iq.h"
#include "quants-iq-scalar.h"
#include "quants-interleaved.h"
#include "cpu-traits.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <vector>

namespace {

using namespace ggml_iq;

// ---- quantizers -------------------------------------------------------------------------------

constexpr float kPlus[3]  = { -1 + IQ1_DELTA, IQ1_DELTA, 1 + IQ1_DELTA };
constexpr float kMinus[3] = { -1 - IQ1_DELTA, -IQ1_DELTA, 1 - IQ1_DELTA };

// The grid point nearest (weighted) to xb/scale among the precomputed neighbours of the
// off-grid level vector u, with values taken from xx (shifted ternary levels). Writes levels.
int iq1_best_neighbour(const search_grid & g, int u, const float * xb, const float * weight, float scale,
                       const float * xx, int8_t * L) {
    const uint16_t * nb = g.neighbours_of(u);
    float best_d2 = FLT_MAX;
    int best = -1;
    auto try_entry = [&](int k) {
        const int8_t * p = g.point(k);
        float d2 = 0;
        for (int i = 0; i < 8; ++i) {
            const float diff = scale * xx[(p[i] - 1) / 2] - xb[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_d2) { best_d2 = d2; best = k; }
    };
    if (nb[0] > 0) {
        for (int j = 1; j <= nb[0]; ++j) try_entry(nb[j]);
    } else {
        for (int k = 0; k < g.n; ++k) try_entry(k);
    }
    if (best < 0) best = 0;
    const int8_t * p = g.point(best);
    for (int i = 0; i < 8; ++i) L[i] = (int8_t) ((p[i] - 1) / 2);
    return best;
}

// Indices 0..n-1 ordered by ascending x (ties by index, so results are deterministic).
void sort_by_value(const float * x, int n, int * order) {
    std::iota(order, order + n, 0);
    std::stable_sort(order, order + n, [x](int a, int b) { return x[a] < x[b]; });
}

float sum_squares(const float * x, int n) {
    float s = 0;
    for (int i = 0; i < n; ++i) s += x[i] * x[i];
    return s;
}

void importance(const float * xb, const float * qw, int n, float sigma2, float * weight) {
    for (int i = 0; i < n; ++i) weight[i] = qw ? qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
}

// Grid entries for the groups of 8 in L (levels 0..2), moving off-grid groups to neighbours.
// Returns false when some group was moved.
bool place_on_grid(const search_grid & g, const float * xb, const float * weight, float scale,
                   const float * const * xx, int groups, int8_t * L, int * idx) {
    bool all_on = true;
    for (int k = 0; k < groups; ++k) {
        int u = 0;
        for (int j = 0; j < 8; ++j) u |= L[8 * k + j] << 2 * j;
        idx[k] = g.map[u];
        if (idx[k] < 0) {
            all_on = false;
            idx[k] = iq1_best_neighbour(g, u, xb + 8 * k, weight + 8 * k, scale, xx[k], L + 8 * k);
        }
    }
    return all_on;
}

// After place_on_grid moved some groups, the scale is refitted (weighted least squares) to the
// levels actually stored; xx[k] are the shifted values of group k of 8. Shared by iq1_s (one
// shift per block: the same table for every group) and iq1_m (one per half). Keeps `scale` when
// the fit is degenerate.
float refit_scale(const float * xb, const float * weight, const float * const * xx, const int8_t * L, int n,
                  float scale) {
    float sumqx = 0, sumq2 = 0;
    for (int i = 0; i < n; ++i) {
        const float q = xx[i / 8][L[i]];
        sumqx += weight[i] * q * xb[i];
        sumq2 += weight[i] * q * q;
    }
    return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

// One 32-weight IQ1_S block: the exact ternary split (sorted prefix sums, every pair of
// boundaries, both shift signs), then the off-grid groups moved to grid neighbours. Writes the
// four grid indices and the shift (+1 / -1); returns the block scale (0: nothing to fit).
float iq1_s_block(const search_grid & g, const float * xb, const float * weight, int * idx, int & shift) {
    constexpr int bs = 32;
    shift = 1;
    float max = 0;
    for (int i = 0; i < bs; ++i) max = std::max(max, std::fabs(xb[i]));
    if (max < 1e-12f) return 0;
    int order[bs];
    sort_by_value(xb, bs, order);
    float sumx[bs + 1], sumw[bs + 1];
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < bs; ++j) {
        sumx[j + 1] = sumx[j] + weight[order[j]] * xb[order[j]];
        sumw[j + 1] = sumw[j] + weight[order[j]];
    }
    float best_score = -FLT_MAX, scale = max;
    int besti1 = -1, besti2 = -1, best_shift = 0;
    for (int i1 = 0; i1 <= bs; ++i1) {
        for (int i2 = i1; i2 <= bs; ++i2) {
            for (int sh = 0; sh < 2; ++sh) {
                const float * v = sh == 0 ? kPlus : kMinus;
                const float sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[bs] - sumx[i2]) * v[2];
                const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                                    (sumw[bs] - sumw[i2]) * v[2] * v[2];
                if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                    scale = sumqx / sumq2;
                    best_score = scale * sumqx;
                    besti1 = i1; besti2 = i2; best_shift = sh == 0 ? 1 : -1;
                }
            }
        }
    }
    if (besti1 < 0 || besti2 < 0 || best_shift == 0) return 0;
    int8_t L[bs];
    for (int j = 0; j < bs; ++j) L[order[j]] = (int8_t) (j < besti1 ? 0 : j < besti2 ? 1 : 2);
    if (scale < 0) {
        for (int j = 0; j < bs; ++j) L[j] = (int8_t) (2 - L[j]);
        scale = -scale;
        best_shift = -best_shift;
    }
    const float * xx = best_shift == 1 ? kPlus : kMinus;
    const float * xxs[4] = { xx, xx, xx, xx };
    if (!place_on_grid(g, xb, weight, scale, xxs, bs / 8, L, idx)) scale = refit_scale(xb, weight, xxs, L, bs, scale);
    shift = best_shift;
    return scale;
}

void quantize_row_iq1_s(const float * x, block_iq1_s * y, int64_t n, const float * imatrix) {
    const search_grid & g = get_search_grid(GGML_TYPE_IQ1_S);
    constexpr int bs = 32;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        auto & b = y[ibl];
        std::memset(&b, 0, sizeof(b));
        const float * xbl = x + QK_K * ibl;
        const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
        float scales[QK_K / bs];
        int shifts[QK_K / bs];
        float max_scale = 0;
        for (int ib = 0; ib < QK_K / bs; ++ib) {
            const float * xb = xbl + bs * ib;
            float weight[bs];
            importance(xb, imatrix ? imatrix + QK_K * ibl + bs * ib : nullptr, bs, sigma2, weight);
            int idx[bs / 8];
            scales[ib] = iq1_s_block(g, xb, weight, idx, shifts[ib]);
            if (scales[ib] == 0) continue;
            uint16_t h = 0;
            for (int k = 0; k < bs / 8; ++k) {
                b.qs[(bs / 8) * ib + k] = (uint8_t) (idx[k] & 255);
                h |= (uint16_t) ((idx[k] >> 8) << 3 * k);
            }
            b.qh[ib] = h;
            max_scale = std::max(max_scale, scales[ib]);
        }
        if (max_scale == 0) continue;
        const float d = max_scale / 15;
        b.d = GGML_FP32_TO_FP16(d * 1.125f);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / bs; ++ib) {
            int l = std::max(0, std::min(7, nearest_int(0.5f * (id * scales[ib] - 1))));
            if (shifts[ib] == -1) l |= 8;
            b.qh[ib] |= (uint16_t) (l << 12);
        }
    }
}

// iq1_m's shift choice k of a 16-weight block: bit 1 = first 8 use kMinus, bit 0 = second 8.
constexpr uint8_t kIq1mShiftMask[4] = { 0x00, 0x80, 0x08, 0x88 };
inline const float * iq1m_shift_values(int k, int half) { return (half == 0 ? k >> 1 : k & 1) ? kMinus : kPlus; }

// One 16-weight IQ1_M block (two groups of 8, each with its own shift sign): the exact ternary
// split, then grid placement. Writes the two grid indices and the shift choice; returns the
// block scale (0: nothing to fit).
float iq1_m_block(const search_grid & g, const float * xb, const float * weight, int * idx, int & shift_k) {
    constexpr int bs = 16;
    shift_k = 0;
    float max = 0;
    for (int i = 0; i < bs; ++i) max = std::max(max, std::fabs(xb[i]));
    if (max < 1e-7f) return 0;
    int order[bs];
    sort_by_value(xb, bs, order);
    // prefix sums per half (each half of 8 may take its own shift sign)
    float px[2][bs + 1], pw[2][bs + 1];
    px[0][0] = px[1][0] = pw[0][0] = pw[1][0] = 0;
    for (int j = 0; j < bs; ++j) {
        const int i = order[j], h = i < bs / 2 ? 0 : 1;
        px[h][j + 1] = px[h][j] + weight[i] * xb[i];
        pw[h][j + 1] = pw[h][j] + weight[i];
        px[1 - h][j + 1] = px[1 - h][j];
        pw[1 - h][j + 1] = pw[1 - h][j];
    }
    float best_score = -FLT_MAX, scale = max;
    int besti1 = -1, besti2 = -1, best_k = -1;
    for (int i1 = 0; i1 <= bs; ++i1) {
        for (int i2 = i1; i2 <= bs; ++i2) {
            float qx[2][2], q2[2][2];   // [half][plus/minus]
            for (int h = 0; h < 2; ++h) {
                for (int s = 0; s < 2; ++s) {
                    const float * v = s == 0 ? kPlus : kMinus;
                    qx[h][s] = px[h][i1] * v[0] + (px[h][i2] - px[h][i1]) * v[1] + (px[h][bs] - px[h][i2]) * v[2];
                    q2[h][s] = pw[h][i1] * v[0] * v[0] + (pw[h][i2] - pw[h][i1]) * v[1] * v[1] +
                               (pw[h][bs] - pw[h][i2]) * v[2] * v[2];
                }
            }
            for (int k = 0; k < 4; ++k) {
                const float sumqx = qx[0][k >> 1] + qx[1][k & 1];
                const float sumq2 = q2[0][k >> 1] + q2[1][k & 1];
                if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                    scale = sumqx / sumq2;
                    best_score = scale * sumqx;
                    besti1 = i1; besti2 = i2; best_k = k;
                }
            }
        }
    }
    if (besti1 < 0 || besti2 < 0 || best_k < 0) return 0;
    int8_t L[bs];
    for (int j = 0; j < bs; ++j) L[order[j]] = (int8_t) (j < besti1 ? 0 : j < besti2 ? 1 : 2);
    if (scale < 0) {
        for (int j = 0; j < bs; ++j) L[j] = (int8_t) (2 - L[j]);
        scale = -scale;
        best_k = 3 - best_k;   // both halves flip their shift sign
    }
    const float * xxs[2] = { iq1m_shift_values(best_k, 0), iq1m_shift_values(best_k, 1) };
    if (!place_on_grid(g, xb, weight, scale, xxs, 2, L, idx)) scale = refit_scale(xb, weight, xxs, L, bs, scale);
    shift_k = best_k;
    return scale;
}

void quantize_row_iq1_m(const float * x, block_iq1_m * y, int64_t n, const float * imatrix) {
    const search_grid & g = get_search_grid(GGML_TYPE_IQ1_M);
    constexpr int bs = 16;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        auto & b = y[ibl];
        std::memset(&b, 0, sizeof(b));
        const float * xbl = x + QK_K * ibl;
        const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
        const float * qwbl = imatrix ? imatrix + QK_K * ibl : nullptr;
        float scales[QK_K / bs];
        int shifts[QK_K / bs];
        float max_scale = 0;
        for (int ib = 0; ib < QK_K / bs; ++ib) {
            const float * xb = xbl + bs * ib;
            float weight[bs];
            importance(xb, qwbl ? qwbl + bs * ib : nullptr, bs, sigma2, weight);
            int idx[2];
            scales[ib] = iq1_m_block(g, xb, weight, idx, shifts[ib]);
            if (scales[ib] == 0) continue;
            b.qs[2 * ib] = (uint8_t) (idx[0] & 255);
            b.qs[2 * ib + 1] = (uint8_t) (idx[1] & 255);
            b.qh[ib] = (uint8_t) ((idx[0] >> 8) | ((idx[1] >> 8) << 4));
            max_scale = std::max(max_scale, scales[ib]);
        }
        if (max_scale == 0) continue;

        // 3-bit scales, then the super-scale refitted to the quantized block (weighted LSQ)
        uint16_t sc[4] = {0, 0, 0, 0};
        float d = max_scale / 15;
        const float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int ib = 0; ib < QK_K / bs; ++ib) {
            const int l = std::max(0, std::min(7, nearest_int(0.5f * (id * scales[ib] - 1))));
            sc[ib / 4] |= (uint16_t) (l << 3 * (ib % 4));
            b.qh[ib] |= kIq1mShiftMask[shifts[ib]];
            const float * xb = xbl + bs * ib;
            float weight[bs];
            importance(xb, qwbl ? qwbl + bs * ib : nullptr, bs, sigma2, weight);
            for (int k = 0; k < 2; ++k) {
                const float * xx = iq1m_shift_values(shifts[ib], k);
                const int e = b.qs[2 * ib + k] | ((b.qh[ib] >> 4 * k) & 7) << 8;
                const int8_t * p = g.point(e);
                for (int j = 0; j < 8; ++j) {
                    const float q = xx[(p[j] - 1) / 2] * (2 * l + 1);
                    sumqx += weight[8 * k + j] * q * xb[8 * k + j];
                    sumq2 += weight[8 * k + j] * q * q;
                }
            }
        }
        if (sumq2 > 0) d = sumqx / sumq2;
        // Empirical over-scale of the fitted d (llama.cpp uses 1.1125; 1.085 matches the reference
        // implementation's output and its error on the golden rows).
        const uint16_t h = GGML_FP32_TO_FP16(d * 1.085f);
        sc[0] |= (uint16_t) ((h & 0x000f) << 12);
        sc[1] |= (uint16_t) ((h & 0x00f0) << 8);
        sc[2] |= (uint16_t) ((h & 0x0f00) << 4);
        sc[3] |= (uint16_t) (h & 0xf000);
        std::memcpy(b.scales, sc, sizeof(sc));
    }
}

size_t quantize_iq1_s(const float * s, void * d, int64_t nr, int64_t np, const float * im) {
    return quantize_iq_rows<block_iq1_s, quantize_row_iq1_s>("iq1_s", s, d, nr, np, im);
}
size_t quantize_iq1_m(const float * s, void * d, int64_t nr, int64_t np, const float * im) {
    return quantize_iq_rows<block_iq1_m, quantize_row_iq1_m>("iq1_m", s, d, nr, np, im);
}
void iq1_s_from_float(const float * x, void * y, int64_t n) { quantize_row_iq1_s(x, (block_iq1_s *) y, n, nullptr); }
void iq1_m_from_float(const float * x, void * y, int64_t n) { quantize_row_iq1_m(x, (block_iq1_m *) y, n, nullptr); }

// ---- iq1_s_r4 / iq1_m_r4 (layouts in quants-interleaved.h) -----------------------------------
// Quantized on their own, as the reference does: 32-weight blocks searched like IQ1_S / IQ1_M
// blocks, one fp16 scale per row (1.0625 max / 15) instead of one per 256, weights
// sqrt(1.5 <x^2> + x^2) per block (times the imatrix when given).

constexpr int kIq1ZeroIndex = 1029;   // the all-zero grid point, for blocks with nothing to fit

// The shared frame of both: groups of 4 rows, per 32-block and row fit(block, k, xb, weight,
// scales) stores the grid part and the S free scales of that block-row; then each row's fp16 scale
// and code(block, k, scales, 15 / max) its scale codes.
template <typename Block, int S, typename Fit, typename Code>
size_t quantize_iq1_r4(ggml_type type, const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                       const float * imatrix, Fit fit, Code code) {
    if (nrows % 4 != 0 || n_per_row % 32 != 0 || !check_rows(ggml_type_name(type), src, nrows, n_per_row, 32)) return 0;
    const int64_t nblock = n_per_row / 32;
    const size_t row_size = ggml_row_size(type, n_per_row);
    std::vector<float> scales(4 * S * nblock);
    for (int64_t r = 0; r < nrows; r += 4) {
        auto * dptr = (ggml_fp16_t *) ((char *) dst + r * row_size);
        auto * y = (Block *) (dptr + 4);
        float max[4] = { 0, 0, 0, 0 };
        for (int64_t ib = 0; ib < nblock; ++ib) {
            for (int k = 0; k < 4; ++k) {
                const float * xb = src + (r + k) * n_per_row + 32 * ib;
                const float * qw = imatrix ? imatrix + 32 * ib : nullptr;
                const float sigma2 = 1.5f * sum_squares(xb, 32) / 32;
                float weight[32];
                for (int j = 0; j < 32; ++j) weight[j] = (qw ? qw[j] : 1.f) * std::sqrt(sigma2 + xb[j] * xb[j]);
                float * sc = scales.data() + S * (4 * ib + k);
                fit(y[ib], k, xb, weight, sc);
                for (int i = 0; i < S; ++i) max[k] = std::max(max[k], sc[i]);
            }
        }
        for (int k = 0; k < 4; ++k) {
            dptr[k] = GGML_FP32_TO_FP16(1.0625f * max[k] / 15);
            const float id = max[k] > 0 ? 15 / max[k] : 0.f;
            for (int64_t ib = 0; ib < nblock; ++ib) code(y[ib], k, scales.data() + S * (4 * ib + k), id);
        }
    }
    return nrows * row_size;
}

size_t quantize_iq1_s_r4(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    const search_grid & g = get_search_grid(GGML_TYPE_IQ1_S);
    auto fit = [&g](iq1_s_r4_block & b, int k, const float * xb, const float * weight, float * scale) {
        int idx[4] = { kIq1ZeroIndex, kIq1ZeroIndex, kIq1ZeroIndex, kIq1ZeroIndex }, shift = 1;
        *scale = sum_squares(xb, 32) < 1e-14f ? 0.f : iq1_s_block(g, xb, weight, idx, shift);
        if (*scale == 0) std::fill(idx, idx + 4, kIq1ZeroIndex);
        uint16_t h = shift < 0 ? 0x8000 : 0;
        for (int i = 0; i < 4; ++i) {
            b.qs[4 * i + k] = (uint8_t) (idx[i] & 255);
            h |= (uint16_t) ((idx[i] >> 8) << 3 * i);
        }
        b.qh[k] = h;
    };
    auto code = [](iq1_s_r4_block & b, int k, const float * scale, float id) {
        const int ls = std::max(0, std::min(7, nearest_int(0.5f * (*scale * id - 1))));
        b.qh[k] |= (uint16_t) (ls << 12);
    };
    return quantize_iq1_r4<iq1_s_r4_block, 1>(GGML_TYPE_IQ1_S_R4, src, dst, nrows, n_per_row, imatrix, fit, code);
}

size_t quantize_iq1_m_r4(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    const search_grid & g = get_search_grid(GGML_TYPE_IQ1_M);
    auto fit = [&g](iq1_m_r4_block & b, int k, const float * xb, const float * weight, float * scales) {
        for (int h = 0; h < 2; ++h) {
            int idx[2] = { kIq1ZeroIndex, kIq1ZeroIndex }, shift_k = 0;
            scales[h] = sum_squares(xb + 16 * h, 16) > 1e-14f ? iq1_m_block(g, xb + 16 * h, weight + 16 * h, idx, shift_k) : 0.f;
            if (scales[h] == 0) idx[0] = idx[1] = kIq1ZeroIndex;
            b.qs[8 * h + k] = (uint8_t) (idx[0] & 255);
            b.qs[8 * h + 4 + k] = (uint8_t) (idx[1] & 255);
            b.qh[4 * h + k] = (uint8_t) ((idx[0] >> 8) | ((idx[1] >> 8) << 4) | kIq1mShiftMask[shift_k]);
        }
    };
    auto code = [](iq1_m_r4_block & b, int k, const float * scales, float id) {
        const int ls1 = std::max(0, std::min(15, nearest_int(scales[0] * id)));
        const int ls2 = std::max(0, std::min(15, nearest_int(scales[1] * id)));
        b.scales[k] = (uint8_t) (ls1 | (ls2 << 4));
    };
    return quantize_iq1_r4<iq1_m_r4_block, 2>(GGML_TYPE_IQ1_M_R4, src, dst, nrows, n_per_row, imatrix, fit, code);
}

void iq1_s_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * dptr = (const ggml_fp16_t *) vx;
    const auto * x = (const iq1_s_r4_block *) (dptr + 4);
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        for (int k = 0; k < 4; ++k) {
            const uint16_t h = x[ib].qh[k];
            const float shift = h & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
            const float dl = GGML_FP16_TO_FP32(dptr[k]) * (2 * ((h >> 12) & 7) + 1);
            for (int i = 0; i < 4; ++i) {
                const auto * grid = (const int8_t *) (iq1s_grid + (x[ib].qs[4 * i + k] | ((h >> 3 * i) & 7) << 8));
                for (int j = 0; j < 8; ++j) y[k * npr + 32 * ib + 8 * i + j] = dl * (grid[j] + shift);
            }
        }
    }
}

void iq1_m_r4_to_float(const void * vx, float * y, int64_t n) {
    const int64_t npr = n / 4;
    const auto * dptr = (const ggml_fp16_t *) vx;
    const auto * x = (const iq1_m_r4_block *) (dptr + 4);
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        for (int k = 0; k < 4; ++k) {
            const float d = GGML_FP16_TO_FP32(dptr[k]);
            for (int h = 0; h < 2; ++h) {
                const float dl = d * ((x[ib].scales[k] >> 4 * h) & 0xF);
                const uint8_t qh = x[ib].qh[4 * h + k];
                for (int half = 0; half < 2; ++half) {
                    const int idx = x[ib].qs[8 * h + 4 * half + k] | (((qh >> 4 * half) & 7) << 8);
                    const float delta = (qh >> 4 * half) & 8 ? -IQ1_DELTA : IQ1_DELTA;
                    const auto * grid = (const int8_t *) (iq1s_grid + idx);
                    for (int j = 0; j < 8; ++j) y[k * npr + 32 * ib + 16 * h + 8 * half + j] = dl * (grid[j] + delta);
                }
            }
        }
    }
}

// ---- scalar gemm against q8_K -----------------------------------------------------------------

inline int dot8_shifted(int idx, int delta, const int8_t * q8) {
    const auto * grid = (const int8_t *) (iq1s_grid + idx);
    int s = 0;
    for (int j = 0; j < 8; ++j) s += (8 * grid[j] + delta) * q8[j];
    return s;
}

int32_t block_dot_iq1_s(const block_iq1_s & b, const block_q8_K & a) {
    int32_t sum = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const uint16_t h = b.qh[ib];
        const int delta = h & 0x8000 ? -1 : 1;
        int s = 0;
        for (int l = 0; l < 4; ++l) s += dot8_shifted(b.qs[4 * ib + l] | ((h >> 3 * l) & 7) << 8, delta, a.qs + 32 * ib + 8 * l);
        sum += (2 * ((h >> 12) & 7) + 1) * s;
    }
    return sum;
}

int32_t block_dot_iq1_m(const block_iq1_m & b, const block_q8_K & a) {
    uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof(sc));
    int32_t sum = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
        int s = 0;
        for (int k = 2 * g; k < 2 * g + 2; ++k) {
            const uint8_t h = b.qh[k / 2] >> 4 * (k % 2);
            s += dot8_shifted(b.qs[k] | (h & 7) << 8, h & 8 ? -1 : 1, a.qs + 8 * k);
        }
        sum += (2 * ((sc[g / 4] >> 3 * (g % 4)) & 7) + 1) * s;
    }
    return sum;
}

float iq1_m_block_d(const block_iq1_m & b) { return iq1_m_super_scale(b); }

void register_iq1_types() {
    auto * s = ggml_type_traits_mut(GGML_TYPE_IQ1_S);
    s->to_float = kiln_row_to_float<GGML_TYPE_IQ1_S>;   // quants-blocks-iq.h, shared with the GPU
    s->from_float_ref = iq1_s_from_float;
    s->quantize = quantize_iq1_s;
    s->requires_imatrix = true;
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_S, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K, gemm_iq_scalar<block_iq1_s, block_dot_iq1_s, fp16_block_d<block_iq1_s>, IQ1_DOT_FACTOR>);
    auto * m = ggml_type_traits_mut(GGML_TYPE_IQ1_M);
    m->to_float = kiln_row_to_float<GGML_TYPE_IQ1_M>;
    m->from_float_ref = iq1_m_from_float;
    m->quantize = quantize_iq1_m;
    m->requires_imatrix = false;
    ggml_cpu_register_gemm(GGML_TYPE_IQ1_M, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K, gemm_iq_scalar<block_iq1_m, block_dot_iq1_m, iq1_m_block_d, IQ1_DOT_FACTOR>);
}
GGML_REGISTER(register_iq1_types);

void register_iq1_r4_types() {
    register_float_path<GGML_TYPE_IQ1_S_R4>(iq1_s_r4_to_float);
    register_float_path<GGML_TYPE_IQ1_M_R4>(iq1_m_r4_to_float);
    ggml_type_traits_mut(GGML_TYPE_IQ1_S_R4)->quantize = quantize_iq1_s_r4;
    ggml_type_traits_mut(GGML_TYPE_IQ1_M_R4)->quantize = quantize_iq1_m_r4;
    ggml_type_traits_mut(GGML_TYPE_IQ1_S_R4)->requires_imatrix = true;
}
GGML_REGISTER(register_iq1_r4_types);

} // namespace
