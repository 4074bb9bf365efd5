// IQ2_XXS (2.06 bpw), IQ2_XS (2.31 bpw) and IQ2_S (2.56 bpw): groups of 8 weights are points of
// an E8-like lattice grid (magnitudes 0x08/0x19/0x2b) with separate sign bits, scaled per 32
// (XXS) or 16 (XS, S) weights by (2s+1)/8 times the block's fp16 d.
//
// The decoders (to_float) are quants-blocks-iq.h's, shared with the CUDA kernels; the quantizers
// follow llama.cpp's importance-weighted lattice search (same trials, same tie-breaking), and the
// scalar gemm against q8_K is the reference the SIMD kernels are tested against. The lattice
// search shared with IQ3 lives here.
#include "quants-iq.h"
#include "quants-iq-scalar.h"
#include "cpu-traits.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

namespace ggml_iq {

// ---- shared lattice search (IQ2 and IQ3) ------------------------------------------------------

namespace {

// Among the precomputed neighbours of an off-grid point, the one nearest to xval/scale under the
// (square-root) weights; writes its levels to L. Falls back to the whole grid if the list is empty.
int best_neighbour(const search_grid & g, int u, const float * xval, const float * waux, float scale, int8_t * L) {
    const uint16_t * nb = g.neighbours_of(u);
    const int count = nb[0];
    float best_d2 = FLT_MAX;
    int best = -1;
    auto try_entry = [&](int k) {
        const int8_t * p = g.point(k);
        float d2 = 0;
        for (int i = 0; i < g.dim; ++i) {
            const float diff = scale * p[i] - xval[i];
            d2 += waux[i] * diff * diff;
        }
        if (d2 < best_d2) { best_d2 = d2; best = k; }
    };
    if (count > 0) {
        for (int j = 1; j <= count; ++j) try_entry(nb[j]);
    } else {
        for (int k = 0; k < g.n; ++k) try_entry(k);
    }
    if (best < 0) best = 0;   // only with non-finite input, which callers reject
    const int8_t * p = g.point(best);
    for (int i = 0; i < g.dim; ++i) L[i] = (int8_t) ((p[i] - 1) / 2);
    return best;
}

inline int pack_levels(const int8_t * L, int dim, int bits) {
    int u = 0;
    for (int i = 0; i < dim; ++i) u |= L[i] << (bits * i);
    return u;
}

} // namespace

float lattice_quantize(const search_grid & g, const lattice_search & p, int n, const float * xval,
                       const float * weight, const float * waux, int * grid_index);

} // namespace ggml_iq

namespace {

using namespace ggml_iq;

// llama.cpp's make_qp_quants: a non-negative scale for levels 0..nmax under weights, improved by
// a few rounds of coordinate descent. IQ2_XXS only uses it to seed the scale search.
float make_qp_quants(int n, int nmax, const float * x, uint8_t * L, const float * w) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
    if (max < 1e-15f) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t) nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::min(nmax, nearest_int(iscale_is * x[i]));
            const float diff = x[i] - scale_is * l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) { best_mse = mse; iscale = iscale_is; }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = std::min(nmax, nearest_int(iscale * x[i]));
        L[i] = (uint8_t) l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float slx = sumlx - w[i] * x[i] * L[i];
            float sl2 = suml2 - w[i] * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w[i] * x[i] * new_l;
                    sl2 += w[i] * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t) new_l; sumlx = slx; suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

} // namespace

float ggml_iq::lattice_quantize(const search_grid & g, const lattice_search & p, int n, const float * xval,
                                const float * weight, const float * waux, int * grid_index) {
    const int dim = g.dim, groups = n / dim;
    int8_t L[32] = {0}, Laux[32];
    bool on_grid[8], on_grid_aux[8];

    float base = xval[0];
    for (int i = 1; i < n; ++i) base = std::max(base, xval[i]);
    float scale;
    if (p.qp_start) {
        uint8_t Lqp[32];
        scale = make_qp_quants(n, p.kmax + 1, xval, Lqp, weight);
        base = scale * p.kmax;
        if (base <= 0) {
            for (int k = 0; k < groups; ++k) grid_index[k] = 0;
            return 0.0f;
        }
    } else {
        scale = base / (2 * p.kmax - 1);
    }
    for (int k = 0; k < groups; ++k) on_grid[k] = p.init_on_grid;

    float best = 0;
    for (int is = p.is_min; is <= p.is_max; ++is) {
        const float id = (2 * p.kmax - 1 + is * p.is_step) / base;
        const float this_scale = 1 / id;
        for (int k = 0; k < groups; ++k) {
            int8_t * Lk = Laux + dim * k;
            for (int i = 0; i < dim; ++i) {
                const int l = nearest_int(0.5f * (id * xval[dim * k + i] - 1));
                Lk[i] = (int8_t) std::max(0, std::min(p.kmax - 1, l));
            }
            const int u = pack_levels(Lk, dim, g.bits);
            on_grid_aux[k] = g.map[u] >= 0;
            if (!on_grid_aux[k]) best_neighbour(g, u, xval + dim * k, waux + dim * k, this_scale, Lk);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < n; ++i) {
            const float q = 2 * Laux[i] + 1;
            sumqx += weight[i] * xval[i] * q;
            sumq2 += weight[i] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            std::copy(Laux, Laux + n, L);
            std::copy(on_grid_aux, on_grid_aux + groups, on_grid);
        }
    }

    int n_off_grid = 0;
    for (int k = 0; k < groups; ++k) n_off_grid += !on_grid[k];
    if ((p.requant_always || n_off_grid > 0) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < groups; ++k) {
            if (on_grid[k] && !p.requant_every_group) continue;
            int8_t * Lk = L + dim * k;
            for (int i = 0; i < dim; ++i) {
                const int l = nearest_int(0.5f * (id * xval[dim * k + i] - 1));
                Lk[i] = (int8_t) std::max(0, std::min(p.kmax - 1, l));
            }
            const int u = pack_levels(Lk, dim, g.bits);
            if (g.map[u] < 0) best_neighbour(g, u, xval + dim * k, waux + dim * k, scale, Lk);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < n; ++i) {
            const float q = 2 * L[i] + 1;
            sumqx += weight[i] * xval[i] * q;
            sumq2 += weight[i] * q * q;
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    for (int k = 0; k < groups; ++k) {
        const int e = g.map[pack_levels(L + dim * k, dim, g.bits)];
        GGML_ASSERT(e >= 0 && "lattice search left a point off the grid");
        grid_index[k] = e;
    }
    return scale;
}

namespace {

// ---- quantizers -------------------------------------------------------------------------------

// Per-weight importance: the imatrix scaled by the local magnitude, or a magnitude-only guess.
void importance(const float * xb, const float * qw, int n, float sigma2, float fallback_bias, float * weight) {
    for (int i = 0; i < n; ++i) {
        weight[i] = qw ? qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]) : fallback_bias * sigma2 + xb[i] * xb[i];
    }
}

// Magnitudes and sign bits of 8 weights. With even_parity the count of negative signs must be
// even (only 7 bits are stored): the least important weight then keeps its "wrong" sign.
uint8_t split_signs(const float * xb, const float * weight, bool even_parity, float * xval) {
    uint8_t s = 0;
    int nflip = 0;
    for (int i = 0; i < 8; ++i) {
        xval[i] = std::fabs(xb[i]);
        if (xb[i] < 0) { s |= (uint8_t) (1 << i); ++nflip; }
    }
    if (even_parity && nflip % 2) {
        int imin = 0;
        float min = weight[0] * xb[0] * xb[0];
        for (int i = 1; i < 8; ++i) {
            const float ax = weight[i] * xb[i] * xb[i];
            if (ax < min) { min = ax; imin = i; }
        }
        xval[imin] = -xval[imin];
        s ^= (uint8_t) (1 << imin);
    }
    return s;
}

float sum_squares(const float * x, int n) {
    float s = 0;
    for (int i = 0; i < n; ++i) s += x[i] * x[i];
    return s;
}

void quantize_row_iq2_xxs(const float * x, block_iq2_xxs * y, int64_t n, const float * imatrix) {
    const search_grid & g = get_search_grid(GGML_TYPE_IQ2_XXS);
    const lattice_search p = { 3, -6, 6, 0.1f, true, true, true, true };
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + QK_K * ibl;
        const float sigma2 = sum_squares(xbl, QK_K) / QK_K;
        uint32_t q2[2 * (QK_K / 32)] = {0};
        float scales[QK_K / 32];
        float max_scale = 0;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const float * xb = xbl + 32 * ib;
            float weight[32], waux[32], xval[32];
            uint8_t signs[4];
            importance(xb, imatrix ? imatrix + QK_K * ibl + 32 * ib : nullptr, 32, sigma2, 0.25f, weight);
            for (int i = 0; i < 32; ++i) waux[i] = std::sqrt(weight[i]);
            for (int k = 0; k < 4; ++k) signs[k] = split_signs(xb + 8 * k, weight + 8 * k, true, xval + 8 * k) & 127;
            float max = xval[0];
            for (int i = 1; i < 32; ++i) max = std::max(max, xval[i]);
            scales[ib] = 0;
            if (max < 1e-15f) continue;
            int idx[4];
            float scale = lattice_quantize(g, p, 32, xval, weight, waux, idx);
            if (scale == 0.0f && p.qp_start) continue;   // nothing representable: group stays zero
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < 4; ++k) signs[k] = (uint8_t) (~signs[k] & 127);
            }
            for (int k = 0; k < 4; ++k) {
                q2[2 * ib] |= (uint32_t) idx[k] << 8 * k;
                q2[2 * ib + 1] |= (uint32_t) signs[k] << 7 * k;
            }
            scales[ib] = scale;
            max_scale = std::max(max_scale, scale);
        }
        y[ibl].d = GGML_FP32_TO_FP16(0.f);
        if (max_scale == 0) {
            std::memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
            continue;
        }
        const float d = max_scale / 31;
        y[ibl].d = GGML_FP32_TO_FP16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int l = std::max(0, std::min(15, nearest_int(0.5f * (id * scales[ib] - 1))));
            q2[2 * ib + 1] |= (uint32_t) l << 28;
        }
        std::memcpy(y[ibl].qs, q2, sizeof(q2));
    }
}

// IQ2_XS and IQ2_S share the 16-weight scale blocks; they differ in grid, sign storage and the
// weight model.
template <bool is_s>
void quantize_row_iq2_16(const float * x, void * vy, int64_t n, const float * imatrix) {
    const search_grid & g = get_search_grid(is_s ? GGML_TYPE_IQ2_S : GGML_TYPE_IQ2_XS);
    const lattice_search p = { 3, -9, 9, 0.1f, false, true, false, false };
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + QK_K * ibl;
        // llama.cpp uses sum(x^2)/QK_K for IQ2_XS; twice that (as for IQ2_S) measures ~2% better
        // against the reference's importance-weighted error.
        const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
        float scales[QK_K / 16];
        int indices[QK_K / 8];
        uint8_t signs[QK_K / 8];
        float max_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float * xb = xbl + 16 * ib;
            float weight[16], waux[16], xval[16];
            importance(xb, imatrix ? imatrix + QK_K * ibl + 16 * ib : nullptr, 16, sigma2, 0.25f, weight);
            for (int i = 0; i < 16; ++i) waux[i] = std::sqrt(weight[i]);
            for (int k = 0; k < 2; ++k) {
                const uint8_t s = split_signs(xb + 8 * k, weight + 8 * k, !is_s, xval + 8 * k);
                signs[2 * ib + k] = is_s ? s : (uint8_t) (s & 127);
            }
            float max = xval[0];
            for (int i = 1; i < 16; ++i) max = std::max(max, xval[i]);
            scales[ib] = 0;
            indices[2 * ib] = indices[2 * ib + 1] = 0;
            if (max < (is_s ? 1e-8f : 1e-15f)) {
                signs[2 * ib] = signs[2 * ib + 1] = 0;
                continue;
            }
            float scale = lattice_quantize(g, p, 16, xval, weight, waux, indices + 2 * ib);
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < 2; ++k) signs[2 * ib + k] = (uint8_t) (is_s ? ~signs[2 * ib + k] : ~signs[2 * ib + k] & 127);
            }
            scales[ib] = scale;
            max_scale = std::max(max_scale, scale);
        }
        if constexpr (is_s) {
            auto & b = ((block_iq2_s *) vy)[ibl];
            std::memset(&b, 0, sizeof(b));
            if (max_scale == 0) continue;
            for (int k = 0; k < QK_K / 8; ++k) {
                b.qs[k] = (uint8_t) (indices[k] & 255);
                b.qh[k / 4] |= (uint8_t) ((indices[k] >> 8) << 2 * (k % 4));
                b.qs[QK_K / 8 + k] = signs[k];
            }
            const float d = max_scale / 31;
            b.d = GGML_FP32_TO_FP16(d * 0.9875f);
            const float id = 1 / d;
            for (int ib = 0; ib < QK_K / 16; ++ib) {
                const int l = std::max(0, std::min(15, nearest_int(0.5f * (id * scales[ib] - 1))));
                b.scales[ib / 2] |= (uint8_t) (l << 4 * (ib % 2));
            }
        } else {
            auto & b = ((block_iq2_xs *) vy)[ibl];
            std::memset(&b, 0, sizeof(b));
            if (max_scale == 0) continue;
            const float d = max_scale / 31;
            const float id = 1 / d;
            int ls[QK_K / 16];
            for (int ib = 0; ib < QK_K / 16; ++ib) {
                ls[ib] = std::max(0, std::min(15, nearest_int(0.5f * (id * scales[ib] - 1))));
            }
            b.d = GGML_FP32_TO_FP16(d);
            for (int k = 0; k < QK_K / 8; ++k) b.qs[k] = (uint16_t) (indices[k] | signs[k] << 9);
            for (int ib = 0; ib < QK_K / 16; ++ib) b.scales[ib / 2] |= (uint8_t) (ls[ib] << 4 * (ib % 2));
        }
    }
}

void row_iq2_xs(const float * x, block_iq2_xs * y, int64_t n, const float * im) { quantize_row_iq2_16<false>(x, y, n, im); }
void row_iq2_s(const float * x, block_iq2_s * y, int64_t n, const float * im) { quantize_row_iq2_16<true>(x, y, n, im); }

size_t quantize_iq2_xxs(const float * s, void * d, int64_t nr, int64_t np, const float * im) {
    return quantize_iq_rows<block_iq2_xxs, quantize_row_iq2_xxs>("iq2_xxs", s, d, nr, np, im);
}
size_t quantize_iq2_xs(const float * s, void * d, int64_t nr, int64_t np, const float * im) {
    return quantize_iq_rows<block_iq2_xs, row_iq2_xs>("iq2_xs", s, d, nr, np, im);
}
size_t quantize_iq2_s(const float * s, void * d, int64_t nr, int64_t np, const float * im) {
    return quantize_iq_rows<block_iq2_s, row_iq2_s>("iq2_s", s, d, nr, np, im);
}
void iq2_xxs_from_float(const float * x, void * y, int64_t n) { quantize_row_iq2_xxs(x, (block_iq2_xxs *) y, n, nullptr); }
void iq2_xs_from_float(const float * x, void * y, int64_t n) { row_iq2_xs(x, (block_iq2_xs *) y, n, nullptr); }
void iq2_s_from_float(const float * x, void * y, int64_t n) { row_iq2_s(x, (block_iq2_s *) y, n, nullptr); }

// ---- scalar gemm against q8_K (the reference for the SIMD kernels) ----------------------------

inline int dot8(const uint8_t * grid, uint8_t signs, const int8_t * q8) {
    int s = 0;
    for (int j = 0; j < 8; ++j) s += (signs >> j) & 1 ? -grid[j] * q8[j] : grid[j] * q8[j];
    return s;
}

int32_t block_dot_iq2_xxs(const block_iq2_xxs & b, const block_q8_K & a) {
    int32_t sum = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        uint32_t aux[2];
        std::memcpy(aux, b.qs + 4 * ib, sizeof(aux));
        const auto * idx = (const uint8_t *) &aux[0];
        int s = 0;
        for (int l = 0; l < 4; ++l) s += dot8(grid_bytes(iq2xxs_grid, idx[l]), expand_signs7(aux[1] >> 7 * l), a.qs + 32 * ib + 8 * l);
        sum += (int32_t) (2 * (aux[1] >> 28) + 1) * s;
    }
    return sum;
}

int32_t block_dot_iq2_xs(const block_iq2_xs & b, const block_q8_K & a) {
    int32_t sum = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        for (int h = 0; h < 2; ++h) {
            int s = 0;
            for (int l = 2 * h; l < 2 * h + 2; ++l) {
                const uint16_t q = b.qs[4 * ib + l];
                s += dot8(grid_bytes(iq2xs_grid, q & 511), expand_signs7(q >> 9), a.qs + 32 * ib + 8 * l);
            }
            sum += (2 * ((b.scales[ib] >> 4 * h) & 0xf) + 1) * s;
        }
    }
    return sum;
}

int32_t block_dot_iq2_s(const block_iq2_s & b, const block_q8_K & a) {
    const uint8_t * signs = b.qs + QK_K / 8;
    int32_t sum = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        for (int h = 0; h < 2; ++h) {
            int s = 0;
            for (int l = 2 * h; l < 2 * h + 2; ++l) {
                const int k = 4 * ib + l;
                const int idx = b.qs[k] | ((b.qh[ib] >> 2 * l) & 3) << 8;
                s += dot8(grid_bytes(iq2s_grid, idx), signs[k], a.qs + 8 * k);
            }
            sum += (2 * ((b.scales[ib] >> 4 * h) & 0xf) + 1) * s;
        }
    }
    return sum;
}

void register_iq2_types() {
    struct entry { ggml_type t; ggml_to_float_t dq; ggml_from_float_t ref; ggml_quantize_rows_t q; bool need_im; ggml_gemm_t gemm; };
    const entry entries[] = {
        { GGML_TYPE_IQ2_XXS, kiln_row_to_float<GGML_TYPE_IQ2_XXS>, iq2_xxs_from_float, quantize_iq2_xxs, true,
          gemm_iq_scalar<block_iq2_xxs, block_dot_iq2_xxs, fp16_block_d<block_iq2_xxs>, IQ2_DOT_FACTOR> },
        { GGML_TYPE_IQ2_XS, kiln_row_to_float<GGML_TYPE_IQ2_XS>, iq2_xs_from_float, quantize_iq2_xs, true,
          gemm_iq_scalar<block_iq2_xs, block_dot_iq2_xs, fp16_block_d<block_iq2_xs>, IQ2_DOT_FACTOR> },
        { GGML_TYPE_IQ2_S, kiln_row_to_float<GGML_TYPE_IQ2_S>, iq2_s_from_float, quantize_iq2_s, false,
          gemm_iq_scalar<block_iq2_s, block_dot_iq2_s, fp16_block_d<block_iq2_s>, IQ2_DOT_FACTOR> },
    };
    for (const auto & e : entries) {
        auto * tt = ggml_type_traits_mut(e.t);
        tt->to_float = e.dq;
        tt->from_float_ref = e.ref;
        tt->quantize = e.q;
        tt->requires_imatrix = e.need_im;
        ggml_cpu_register_gemm(e.t, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K, e.gemm);
    }
}
GGML_REGISTER(register_iq2_types);

} // namespace
