// k-quant quantizers. Two flavours per type, as llama.cpp writes them:
//  - the reference encoder (no importance weights): per-sub-block scale (and min) searches
//    weighted by the values themselves, then the sub-block scales quantized against the block max;
//  - the importance-weighted quantizer (imatrix given): the same searches weighted by
//    imatrix * sqrt(sigma^2 + x^2), and the sub-block scales themselves fitted by a weighted
//    search instead of plain rounding.
// The searches are the published llama.cpp algorithms (make_qx_quants, make_qkx2/3_quants,
// make_qp_quants); files quantized here decode like llama.cpp's and score the same.
#include "quants-k.h"
#include "quants-rows.h"
#include "quants-search.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

constexpr float k_group_max_eps = 1e-15f;

// Round to nearest, ties to even, via the 1.5*2^23 trick the reference uses (|v| < 2^22).
inline int nearest_int(float v) {
    const float shifted = v + 12582912.f;
    int32_t bits;
    std::memcpy(&bits, &shifted, sizeof(bits));
    return (bits & 0x007fffff) - 0x00400000;
}

// Symmetric fit of n values to levels -nmax..nmax-1 (stored +nmax in L). Scale candidates
// (nmax + step*is)/max, |is| <= nsteps, are tried; the one maximising (sum w x l)^2 / sum w l^2 (least squares) wins.
// Weights: qw if given, else x^2.
float fit_symmetric(int n, int nmax, const float * x, int8_t * L, const float * qw, int nsteps = 9, float step = 0.1f) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < k_group_max_eps) {
        std::memset(L, 0, n);
        return 0.f;
    }
    auto level = [&](float iscale, int i) { return std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i]))); };
    auto weight = [&](int i) { return qw ? qw[i] : x[i] * x[i]; };

    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = level(iscale, i);
        L[i] = (int8_t) (l + nmax);
        const float w = weight(i);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -nsteps; is <= nsteps; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + step * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = level(iscale, i);
            const float w = weight(i);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) L[i] = (int8_t) (level(iscale, i) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// q3_K's reference sub-block fit: round at nmax/max, then coordinate descent moving single
// levels while the x^2-weighted least-squares score improves.
float fit_q3_levels(int n, int nmax, const float * x, int8_t * L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < k_group_max_eps) {
        std::memset(L, 0, n);
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t) l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx <= 0) continue;
            float sl2 = suml2 - w * L[i] * L[i];
            int nl = nearest_int(x[i] * sl2 / slx);
            nl = std::max(-nmax, std::min(nmax - 1, nl));
            if (nl == L[i]) continue;
            slx += w * x[i] * nl;
            sl2 += w * nl * nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t) nl;
                sumlx = slx;
                suml2 = sl2;
                ++changed;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t) (L[i] + nmax);
    return sumlx / suml2;
}

// Asymmetric fit x ~ scale * l - min_out, l in 0..nmax, min_out >= 0: start from the range,
// then try nstep+1 scales (rmin + rdelta*is + nmax)/range and keep the weighted least-squares
// (scale, min) pair with the lowest weighted error (|d| if use_mad, else d^2).
float fit_scale_min(int n, int nmax, const float * x, const float * w, uint8_t * L, float * min_out,
                    uint8_t * Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        min = std::min(min, x[i]);
        max = std::max(max, x[i]);
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max <= min) {
        std::memset(L, 0, n);
        *min_out = -min;
        return 0.f;
    }
    auto err = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = (uint8_t) std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
        best += w[i] * err(scale * L[i] + min - x[i]);
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t) l;
            sum_l  += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D <= 0) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min   = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float e = 0;
        for (int i = 0; i < n; ++i) e += w[i] * err(this_scale * Laux[i] + this_min - x[i]);
        if (e < best) {
            std::memcpy(L, Laux, n);
            best = e;
            scale = this_scale;
            min = this_min;
        }
    }
    *min_out = -min;
    return scale;
}

// Fit non-negative values (sub-block scales or mins) to levels 0..nmax with weights qw: a few
// scales around nmax/max by weighted error, then coordinate descent on single levels.
float fit_positive(int n, int nmax, const float * x, uint8_t * L, const float * qw) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
    if (!max) {
        std::memset(L, 0, n);
        return 0.f;
    }
    auto level = [&](float is, int i) { return std::max(0, std::min(nmax, nearest_int(is * x[i]))); };
    float iscale = nmax / max;
    float best_mse = 0;
    {
        const float scale = 1 / iscale;
        for (int i = 0; i < n; ++i) {
            const float diff = x[i] - scale * nearest_int(iscale * x[i]);
            best_mse += qw[i] * diff * diff;
        }
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            const float diff = x[i] - scale_is * level(iscale_is, i);
            mse += qw[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = level(iscale, i);
        L[i] = (uint8_t) l;
        sumlx += qw[i] * x[i] * l;
        suml2 += qw[i] * l * l;
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            float slx = sumlx - qw[i] * x[i] * L[i];
            float sl2 = suml2 - qw[i] * L[i] * L[i];
            if (slx <= 0 || sl2 <= 0) continue;
            const int nl = std::max(0, std::min(nmax, nearest_int(x[i] * sl2 / slx)));
            if (nl == L[i]) continue;
            slx += qw[i] * x[i] * nl;
            sl2 += qw[i] * nl * nl;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t) nl;
                sumlx = slx;
                suml2 = sl2;
                ++changed;
            }
        }
        if (!changed) break;
    }
    return suml2 > 0 ? sumlx / suml2 : 0.f;
}

// Two-bit levels of q2_K / q3_K: four 32-byte rows of 2-bit fields per 128 values.
void pack_2bit(const uint8_t * L, uint8_t * qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] = L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6);
        }
    }
}

// q4_K / q5_K: 6-bit scale and min of sub-block j into the 12-byte scales array.
void pack_k4_scale_min(int j, uint8_t ls, uint8_t lm, uint8_t * scales) {
    if (j < 4) {
        scales[j]     = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
        scales[j - 4] |= (ls >> 4) << 6;
        scales[j]     |= (lm >> 4) << 6;
    }
}

// q3_K: 6-bit scale level l (0..63) of sub-block j into the 12-byte scales array (zeroed first).
void pack_q3_scale(int j, int l, uint8_t * scales) {
    if (j < 8) {
        scales[j] = l & 0xF;
    } else {
        scales[j - 8] |= (l & 0xF) << 4;
    }
    scales[8 + j % 4] |= (l >> 4) << (2 * (j / 4));
}

// q2_K final levels given the stored scales.
void requantize_q2_K(const float * x, block_q2_K & y, uint8_t * L) {
    const float d = GGML_FP16_TO_FP32(y.d), dmin = GGML_FP16_TO_FP32(y.dmin);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float dl = d * (y.scales[j] & 0xF);
        if (!dl) continue;
        const float ml = dmin * (y.scales[j] >> 4);
        for (int i = 0; i < 16; ++i) {
            L[16 * j + i] = (uint8_t) std::max(0, std::min(3, nearest_int((x[16 * j + i] + ml) / dl)));
        }
    }
    pack_2bit(L, y.qs);
}

// A q3_K value's level (-4 .. 3) for sub-block step d (0 for a zero step).
int q3_level(float d, float x) { return d != 0.0f ? std::max(-4, std::min(3, nearest_int(x / d))) : 0; }

// q3_K final scales and levels given the stored scales (qw: importance, or nullptr), then the
// high-bit mask and the 2-bit fields.

void requantize_q3_K(const float * x, block_q3_K & y, int8_t * L, const float * qw) {
    int8_t sc[16];
    q3_K_scales(y.scales, sc);
    const float d_all = GGML_FP16_TO_FP32(y.d);
    std::memset(y.scales, 0, 12);
    for (int j = 0; j < QK_K / 16; ++j) {
        // each 6-bit scale the best of the nearest few on d_all's grid (refine_sub_scale)
        sc[j] = (int8_t) legacy_search::refine_sub_scale(sc[j], -32, 31, 2, d_all, x + 16 * j, qw ? qw + 16 * j : nullptr, 16,
                                                         [](float step, float v) { return step * q3_level(step, v); });
        pack_q3_scale(j, sc[j] + 32, y.scales);
        const float d = d_all * sc[j];
        if (!d) continue;
        for (int i = 0; i < 16; ++i) L[16 * j + i] = (int8_t) (q3_level(d, x[16 * j + i]) + 4);
    }
    // value j's high bit goes to hmask[j % 32], bit j / 32
    std::memset(y.hmask, 0, sizeof(y.hmask));
    uint8_t low[QK_K];
    for (int j = 0; j < QK_K; ++j) {
        int l = L[j];
        if (l > 3) {
            y.hmask[j % 32] |= (uint8_t) (1 << (j / 32));
            l -= 4;
        }
        low[j] = (uint8_t) l;
    }
    pack_2bit(low, y.qs);
}

// q4_K (nmax 15) / q5_K (nmax 31) final scales, mins and levels given d and dmin. Each
// sub-block's 6-bit scale and min are the best pair within +-1 of the rounded fit (least squared
// error after re-rounding, weighted by the importance qw, or plain without one): the fit weighted
// the values differently, and the 6-bit grids are coarse. Q4_K_M KLD with exact products
// (ggml-cpu.h), no search / +-1 / +-2: synth-qwen3moe 0.1161 / 0.1014 / 0.1008, synth-qwen3
// 0.1287 / 0.1271 / 0.1274, synth-deepseek2 0.4348 / 0.4389 / 0.4474 (the reference's file:
// 0.4340). Weighting the search's error by the fit's av + |x| instead: 0.1081, 0.1280, 0.4632.
// synth-deepseek2 is too sensitive to tune on: in the no-search file, one tensor class taken from
// the weighted search's file moves its KLD by -1.2% to +5.4%. +-1 stays: best on the three together.
void requantize_k4(const float * x, uint8_t * scales, float d, float dmin, int nmax, const float * qw, uint8_t * L) {
    uint8_t ls[QK_K / 32], lm[QK_K / 32];
    for (int j = 0; j < QK_K / 32; ++j) k4_scale_min(j, scales, ls[j], lm[j]);
    auto level = [nmax](float v, float ml, float idl) { return std::max(0, std::min(nmax, nearest_int((v + ml) * idl))); };
    for (int j = 0; j < QK_K / 32; ++j) {
        const float * xb = x + 32 * j;
        const float * wb = qw ? qw + 32 * j : nullptr;
        float best_err = INFINITY;
        int best_s = ls[j], best_m = lm[j];
        for (int sc = std::max(0, ls[j] - 1); sc <= std::min(63, ls[j] + 1); ++sc) {
            const float dl = d * sc, idl = dl != 0.0f ? 1 / dl : 0.0f;
            for (int m = std::max(0, lm[j] - 1); m <= std::min(63, lm[j] + 1); ++m) {
                const float ml = dmin * m;
                float err = 0;
                for (int i = 0; i < 32; ++i) {
                    const float diff = xb[i] - (dl * level(xb[i], ml, idl) - ml);
                    err += (wb ? wb[i] : 1.0f) * diff * diff;
                }
                if (err < best_err) {
                    best_err = err;
                    best_s = sc;
                    best_m = m;
                }
            }
        }
        ls[j] = (uint8_t) best_s;
        lm[j] = (uint8_t) best_m;
        const float dl = d * ls[j], idl = dl != 0.0f ? 1 / dl : 0.0f;
        for (int i = 0; i < 32; ++i) L[32 * j + i] = (uint8_t) (dl != 0.0f ? level(xb[i], dmin * lm[j], idl) : 0);
    }
    std::memset(scales, 0, 12);
    for (int j = 0; j < QK_K / 32; ++j) pack_k4_scale_min(j, ls[j], lm[j], scales);
}

void pack_q4_K(const uint8_t * L, uint8_t * qs) {
    for (int j = 0; j < QK_K; j += 64, qs += 32) {
        for (int l = 0; l < 32; ++l) qs[l] = L[j + l] | (L[j + l + 32] << 4);
    }
}

void pack_q5_K(const uint8_t * L, uint8_t * qs, uint8_t * qh) {
    std::memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < QK_K; n += 64, qs += 32, m1 <<= 2, m2 <<= 2) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
            if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
            qs[j] = (uint8_t) (l1 | (l2 << 4));
        }
    }
}

// q6_K: levels (0..63) into 4-bit ql and 2-bit qh fields.
void pack_q6_K(const int8_t * L, block_q6_K & y) {
    uint8_t * ql = y.ql;
    uint8_t * qh = y.qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
            const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
            ql[l]      = q1 | (q3 << 4);
            ql[l + 32] = q2 | (q4 << 4);
            qh[l] = (L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                    ((L[j + l + 96] >> 4) << 6);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Per-block encoders. qw: importance weights of this block's 256 columns, or null.

void q2_K_block_ref(const float * x, block_q2_K & y) {
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[16], scales[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
        for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
        scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
        max_scale = std::max(max_scale, scales[j]);
        max_min   = std::max(max_min, mins[j]);
    }
    const float q4scale = 15.f;
    if (max_scale > 0) {
        const float iscale = q4scale / max_scale;
        for (int j = 0; j < 16; ++j) y.scales[j] = (uint8_t) nearest_int(iscale * scales[j]);
        y.d = GGML_FP32_TO_FP16(max_scale / q4scale);
    } else {
        std::memset(y.scales, 0, 16);
        y.d = GGML_FP32_TO_FP16(0.f);
    }
    if (max_min > 0) {
        const float iscale = q4scale / max_min;
        for (int j = 0; j < 16; ++j) y.scales[j] |= (uint8_t) (nearest_int(iscale * mins[j]) << 4);
        y.dmin = GGML_FP32_TO_FP16(max_min / q4scale);
    } else {
        y.dmin = GGML_FP32_TO_FP16(0.f);
    }
    requantize_q2_K(x, y, L);
}

// The imatrix-weighted fits of q2_K .. q5_K weigh each value of a scale group by
// qw * sqrt(sigma2 + x^2) (sigma2 from the superblock's mean square, whose factor differs per
// type) and weigh the group's scale by the sum: one loop so the types cannot drift apart.
float group_weights(const float * x, const float * qw, float sigma2, int n, float * weight) {
    float sumw = 0;
    for (int l = 0; l < n; ++l) {
        weight[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
        sumw += weight[l];
    }
    return sumw;
}

void q2_K_block_weighted(const float * x, block_q2_K & y, const float * qw) {
    uint8_t L[QK_K], Laux[16], Ls[16], Lm[16];
    float weight[16], mins[16], scales[16], sw[16];
    float sumx2 = 0;
    for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
    const float sigma2 = sumx2 / QK_K;
    for (int j = 0; j < 16; ++j) {
        sw[j] = group_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
        scales[j] = fit_scale_min(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    const float dm = fit_positive(16, 15, scales, Ls, sw);
    const float mm = fit_positive(16, 15, mins, Lm, sw);
    y.d    = GGML_FP32_TO_FP16(dm);
    y.dmin = GGML_FP32_TO_FP16(mm);
    for (int j = 0; j < 16; ++j) y.scales[j] = (uint8_t) (Ls[j] | (Lm[j] << 4));
    requantize_q2_K(x, y, L);
}

void q3_K_block_ref(const float * x, block_q3_K & y) {
    int8_t L[QK_K];
    float scales[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
        scales[j] = fit_q3_levels(16, 4, x + 16 * j, L + 16 * j);
        if (std::fabs(scales[j]) > amax) {
            amax = std::fabs(scales[j]);
            max_scale = scales[j];
        }
    }
    std::memset(y.scales, 0, 12);
    if (max_scale) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < 16; ++j) {
            const int l = std::max(-32, std::min(31, (int) (int8_t) nearest_int(iscale * scales[j]))) + 32;
            pack_q3_scale(j, l, y.scales);
        }
        y.d = GGML_FP32_TO_FP16(1 / iscale);
    } else {
        y.d = GGML_FP32_TO_FP16(0.f);
    }
    requantize_q3_K(x, y, L, nullptr);
}

void q3_K_block_weighted(const float * x, block_q3_K & y, const float * qw) {
    int8_t L[QK_K], Ls[16];
    float scales[16], weight[16], sw[16];
    float sumx2 = 0;
    for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
    const float sigma2 = 2 * sumx2 / QK_K;
    for (int j = 0; j < 16; ++j) {
        sw[j] = group_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
        scales[j] = fit_symmetric(16, 4, x + 16 * j, L + 16 * j, weight);
    }
    std::memset(y.scales, 0, 12);
    const float d_block = fit_symmetric(16, 32, scales, Ls, sw);
    for (int j = 0; j < 16; ++j) pack_q3_scale(j, Ls[j], y.scales);
    y.d = GGML_FP32_TO_FP16(d_block);
    requantize_q3_K(x, y, L, qw);
}

// q4_K and q5_K share everything but the level count and the reference search parameters.
template <typename Block, int Nmax>
void k4_block_ref(const float * x, Block & y, uint8_t * L) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    const float rmin = Nmax == 15 ? -1.f : -0.5f;
    const int nstep  = Nmax == 15 ? 20 : 15;
    for (int j = 0; j < 8; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
        scales[j] = fit_scale_min(32, Nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        max_scale = std::max(max_scale, scales[j]);
        max_min   = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min   = max_min > 0 ? 63.f / max_min : 0.f;
    std::memset(y.scales, 0, 12);
    for (int j = 0; j < 8; ++j) {
        const uint8_t ls = (uint8_t) std::min(63, nearest_int(inv_scale * scales[j]));
        const uint8_t lm = (uint8_t) std::min(63, nearest_int(inv_min * mins[j]));
        pack_k4_scale_min(j, ls, lm, y.scales);
    }
    y.d    = GGML_FP32_TO_FP16(max_scale / 63.f);
    y.dmin = GGML_FP32_TO_FP16(max_min / 63.f);
    requantize_k4(x, y.scales, GGML_FP16_TO_FP32(y.d), GGML_FP16_TO_FP32(y.dmin), Nmax, nullptr, L);
}

template <typename Block, int Nmax>
void k4_block_weighted(const float * x, Block & y, const float * qw, uint8_t * L) {
    uint8_t Laux[32], Ls[8], Lm[8];
    float weights[32], sw[8], mins[8], scales[8];
    float sum_x2 = 0;
    for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
    const float sigma2 = 2 * sum_x2 / QK_K;
    for (int j = 0; j < 8; ++j) {
        sw[j] = group_weights(x + 32 * j, qw + 32 * j, sigma2, 32, weights);
        scales[j] = fit_scale_min(32, Nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    const float d_block = fit_positive(8, 63, scales, Ls, sw);
    const float m_block = fit_positive(8, 63, mins, Lm, sw);
    std::memset(y.scales, 0, 12);
    for (int j = 0; j < 8; ++j) pack_k4_scale_min(j, Ls[j], Lm[j], y.scales);
    y.d    = GGML_FP32_TO_FP16(d_block);
    y.dmin = GGML_FP32_TO_FP16(m_block);
    requantize_k4(x, y.scales, GGML_FP16_TO_FP32(y.d), GGML_FP16_TO_FP32(y.dmin), Nmax, qw, L);
}

void q4_K_block(const float * x, block_q4_K & y, const float * qw) {
    uint8_t L[QK_K];
    if (qw) k4_block_weighted<block_q4_K, 15>(x, y, qw, L);
    else    k4_block_ref<block_q4_K, 15>(x, y, L);
    pack_q4_K(L, y.qs);
}

void q5_K_block(const float * x, block_q5_K & y, const float * qw) {
    uint8_t L[QK_K];
    if (qw) k4_block_weighted<block_q5_K, 31>(x, y, qw, L);
    else    k4_block_ref<block_q5_K, 31>(x, y, L);
    pack_q5_K(L, y.qs, y.qh);
}

// A q6_K value's level (-32 .. 31) for sub-block step d (0 for a zero step).
int q6_level(float d, float x) { return d != 0.0f ? std::max(-32, std::min(31, nearest_int(x / d))) : 0; }

// q6_K: sub-block fits weighted by the imatrix directly (or x^2), scales to int8 against the
// largest-magnitude one. With an imatrix the scale search is wider and finer than the
// reference's (+-1.8 levels in steps of 0.05): it lowers the weighted error by about 2.5%.
void q6_K_block(const float * x, block_q6_K & y, const float * qw) {
    int8_t L[QK_K];
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < 16; ++j) {
        scales[j] = qw ? fit_symmetric(16, 32, x + 16 * j, L + 16 * j, qw + 16 * j, 36, 0.05f)
                       : fit_symmetric(16, 32, x + 16 * j, L + 16 * j, nullptr);
        if (std::fabs(scales[j]) > max_abs_scale) {
            max_abs_scale = std::fabs(scales[j]);
            max_scale = scales[j];
        }
    }
    if (max_abs_scale < k_group_max_eps) {
        std::memset(&y, 0, sizeof(y));
        return;
    }
    const float iscale = -128.f / max_scale;
    y.d = GGML_FP32_TO_FP16(1 / iscale);
    for (int j = 0; j < 16; ++j) y.scales[j] = (int8_t) std::min(127, nearest_int(iscale * scales[j]));
    const float d_all = GGML_FP16_TO_FP32(y.d);
    for (int j = 0; j < 16; ++j) {
        // the int8 scales are a fine grid: searching +-8 steps around the rounded fit lowers the
        // error by 3-4% (golden src, and the synth models' tensors against the reference's files)
        y.scales[j] = (int8_t) legacy_search::refine_sub_scale(y.scales[j], -128, 127, 8, d_all, x + 16 * j, qw ? qw + 16 * j : nullptr, 16,
                                                               [](float step, float v) { return step * q6_level(step, v); });
        const float d = d_all * y.scales[j];
        if (!d) continue;
        for (int i = 0; i < 16; ++i) L[16 * j + i] = (int8_t) (q6_level(d, x[16 * j + i]) + 32);
    }
    pack_q6_K(L, y);
}

// Drive a per-block encoder over rows; 0 if any value is not finite.
template <typename Block, typename Encode>
size_t quantize_rows(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix,
                     Encode encode) {
    GGML_ASSERT(n_per_row % QK_K == 0 && "k-quants need rows that are a multiple of 256 values");
    if (!rows_finite(src, nrows * n_per_row)) return 0;
    const int64_t nb = n_per_row / QK_K;
    auto * y = (Block *) dst;
    for (int64_t r = 0; r < nrows; ++r) {
        for (int64_t b = 0; b < nb; ++b) {
            encode(src + r * n_per_row + b * QK_K, y[r * nb + b], imatrix ? imatrix + b * QK_K : nullptr);
        }
    }
    return (size_t) (nrows * nb) * sizeof(Block);
}

template <typename Block, typename Encode>
void encode_ref_row(const float * x, void * vy, int64_t n, Encode encode) {
    GGML_ASSERT(n % QK_K == 0 && "k-quants need rows that are a multiple of 256 values");
    auto * y = (Block *) vy;
    for (int64_t b = 0; b < n / QK_K; ++b) encode(x + b * QK_K, y[b]);
}

} // namespace

void quantize_row_q2_K_ref(const float * x, void * y, int64_t n) { encode_ref_row<block_q2_K>(x, y, n, q2_K_block_ref); }
void quantize_row_q3_K_ref(const float * x, void * y, int64_t n) { encode_ref_row<block_q3_K>(x, y, n, q3_K_block_ref); }
void quantize_row_q4_K_ref(const float * x, void * y, int64_t n) {
    encode_ref_row<block_q4_K>(x, y, n, [](const float * b, block_q4_K & o) { q4_K_block(b, o, nullptr); });
}
void quantize_row_q5_K_ref(const float * x, void * y, int64_t n) {
    encode_ref_row<block_q5_K>(x, y, n, [](const float * b, block_q5_K & o) { q5_K_block(b, o, nullptr); });
}
void quantize_row_q6_K_ref(const float * x, void * y, int64_t n) {
    encode_ref_row<block_q6_K>(x, y, n, [](const float * b, block_q6_K & o) { q6_K_block(b, o, nullptr); });
}

size_t quantize_q2_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    return quantize_rows<block_q2_K>(src, dst, nrows, n_per_row, imatrix,
        [](const float * x, block_q2_K & y, const float * qw) { qw ? q2_K_block_weighted(x, y, qw) : q2_K_block_ref(x, y); });
}
size_t quantize_q3_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    return quantize_rows<block_q3_K>(src, dst, nrows, n_per_row, imatrix,
        [](const float * x, block_q3_K & y, const float * qw) { qw ? q3_K_block_weighted(x, y, qw) : q3_K_block_ref(x, y); });
}
size_t quantize_q4_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    return quantize_rows<block_q4_K>(src, dst, nrows, n_per_row, imatrix, q4_K_block);
}
size_t quantize_q5_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    return quantize_rows<block_q5_K>(src, dst, nrows, n_per_row, imatrix, q5_K_block);
}
size_t quantize_q6_K(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    return quantize_rows<block_q6_K>(src, dst, nrows, n_per_row, imatrix, q6_K_block);
}
