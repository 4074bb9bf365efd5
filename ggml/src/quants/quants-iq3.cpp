// IQ3_XXS (3.06 bpw) and IQ3_S (3.44 bpw): groups of 4 weights are points of a D4-like lattice
// grid with separate signs, scaled per 32 weights. IQ3_XXS: 256-point grid, 7 stored sign bits
// per 8 weights (even parity), scale (2s+1)/4 * d. IQ3_S: 512-point grid, all 8 sign bits,
// scale (2s+1) * d.
//
// The decoders (to_float) are quants-blocks-iq.h's, shared with the CUDA kernels; the quantizers
// use the lattice search of quants-iq2.cpp with llama.cpp's parameters; the scalar gemm is the
// SIMD kernels' reference.
#include "quants-iq.h"
#include "quants-iq-scalar.h"
#include "cpu-traits.h"

#include <algorithm>
#include <cmath>

namespace {

using namespace ggml_iq;

// ---- quantizers -------------------------------------------------------------------------------

// Magnitudes and sign bits of 8 weights; with even_parity the least important weight keeps a
// "wrong" sign when the count of negatives is odd (only 7 bits are stored).
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

// One 32-weight scale block of either type: weights, signs, lattice search. Returns the scale
// (0 for an all-zero block) and fills 8 grid indices and 4 sign bytes.
template <bool is_s>
float quantize_block32(const search_grid & g, const float * xb, const float * qw, float sigma2, int * idx, uint8_t * signs) {
    static constexpr lattice_search p_xxs = { 8, -15, 15, 0.2f, false, true, false, false };
    static constexpr lattice_search p_s   = { 8, -9, 9, 0.2f, false, false, false, true };
    float weight[32], waux[32], xval[32];
    for (int i = 0; i < 32; ++i) weight[i] = qw ? qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
    for (int i = 0; i < 32; ++i) waux[i] = std::sqrt(weight[i]);
    for (int k = 0; k < 4; ++k) {
        const uint8_t s = split_signs(xb + 8 * k, weight + 8 * k, !is_s, xval + 8 * k);
        signs[k] = is_s ? s : (uint8_t) (s & 127);
    }
    float max = xval[0];
    for (int i = 1; i < 32; ++i) max = std::max(max, xval[i]);
    if (is_s ? max == 0.0f : max < 1e-8f) {
        for (int k = 0; k < 8; ++k) idx[k] = 0;
        for (int k = 0; k < 4; ++k) signs[k] = 0;
        return 0.0f;
    }
    float scale = lattice_quantize(g, is_s ? p_s : p_xxs, 32, xval, weight, waux, idx);
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 4; ++k) signs[k] = (uint8_t) (is_s ? ~signs[k] : ~signs[k] & 127);
    }
    return scale;
}

float sum_squares(const float * x, int n) {
    float s = 0;
    for (int i = 0; i < n; ++i) s += x[i] * x[i];
    return s;
}

void quantize_row_iq3_xxs(const float * x, block_iq3_xxs * y, int64_t n, const float * imatrix) {
    const search_grid & g = get_search_grid(GGML_TYPE_IQ3_XXS);
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + QK_K * ibl;
        const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
        float scales[QK_K / 32];
        uint32_t sas[QK_K / 32];
        float max_scale = 0;
        auto & b = y[ibl];
        std::memset(&b, 0, sizeof(b));
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            int idx[8];
            uint8_t signs[4];
            scales[ib] = quantize_block32<false>(g, xbl + 32 * ib, imatrix ? imatrix + QK_K * ibl + 32 * ib : nullptr,
                                                 sigma2, idx, signs);
            for (int k = 0; k < 8; ++k) b.qs[8 * ib + k] = (uint8_t) idx[k];
            sas[ib] = signs[0] | signs[1] << 7 | signs[2] << 14 | (uint32_t) signs[3] << 21;
            max_scale = std::max(max_scale, scales[ib]);
        }
        if (max_scale == 0) {
            std::memset(&b, 0, sizeof(b));
            continue;
        }
        const float d = max_scale / 31;
        b.d = GGML_FP32_TO_FP16(d * 1.0125f);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int l = std::max(0, std::min(15, nearest_int(0.5f * (id * scales[ib] - 1))));
            sas[ib] |= (uint32_t) l << 28;
        }
        std::memcpy(b.qs + QK_K / 4, sas, sizeof(sas));
    }
}

void quantize_row_iq3_s(const float * x, block_iq3_s * y, int64_t n, const float * imatrix) {
    const search_grid & g = get_search_grid(GGML_TYPE_IQ3_S);
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        const float * xbl = x + QK_K * ibl;
        const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
        float scales[QK_K / 32];
        float max_scale = 0;
        auto & b = y[ibl];
        std::memset(&b, 0, sizeof(b));
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            int idx[8];
            scales[ib] = quantize_block32<true>(g, xbl + 32 * ib, imatrix ? imatrix + QK_K * ibl + 32 * ib : nullptr,
                                                sigma2, idx, b.signs + 4 * ib);
            for (int k = 0; k < 8; ++k) {
                b.qs[8 * ib + k] = (uint8_t) (idx[k] & 255);
                b.qh[ib] |= (uint8_t) ((idx[k] >> 8) << k);
            }
            max_scale = std::max(max_scale, scales[ib]);
        }
        if (max_scale == 0) {
            std::memset(&b, 0, sizeof(b));
            continue;
        }
        const float d = max_scale / 31;
        b.d = GGML_FP32_TO_FP16(d * 1.033f);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int l = std::max(0, std::min(15, nearest_int(0.5f * (id * scales[ib] - 1))));
            b.scales[ib / 2] |= (uint8_t) (l << 4 * (ib % 2));
        }
    }
}

size_t quantize_iq3_xxs(const float * s, void * d, int64_t nr, int64_t np, const float * im) {
    return quantize_iq_rows<block_iq3_xxs, quantize_row_iq3_xxs>("iq3_xxs", s, d, nr, np, im);
}
size_t quantize_iq3_s(const float * s, void * d, int64_t nr, int64_t np, const float * im) {
    return quantize_iq_rows<block_iq3_s, quantize_row_iq3_s>("iq3_s", s, d, nr, np, im);
}
void iq3_xxs_from_float(const float * x, void * y, int64_t n) { quantize_row_iq3_xxs(x, (block_iq3_xxs *) y, n, nullptr); }
void iq3_s_from_float(const float * x, void * y, int64_t n) { quantize_row_iq3_s(x, (block_iq3_s *) y, n, nullptr); }

// ---- scalar gemm against q8_K -----------------------------------------------------------------

inline int dot4(const uint8_t * grid, uint8_t signs, const int8_t * q8) {
    int s = 0;
    for (int j = 0; j < 4; ++j) s += (signs >> j) & 1 ? -grid[j] * q8[j] : grid[j] * q8[j];
    return s;
}

int32_t block_dot_iq3_xxs(const block_iq3_xxs & b, const block_q8_K & a) {
    const uint8_t * sas = b.qs + QK_K / 4;
    int32_t sum = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        uint32_t aux;
        std::memcpy(&aux, sas + 4 * ib, sizeof(aux));
        int s = 0;
        for (int l = 0; l < 4; ++l) {
            const uint8_t signs = expand_signs7(aux >> 7 * l);
            const int8_t * q8 = a.qs + 32 * ib + 8 * l;
            s += dot4(grid_bytes(iq3xxs_grid, b.qs[8 * ib + 2 * l]), signs & 0xf, q8);
            s += dot4(grid_bytes(iq3xxs_grid, b.qs[8 * ib + 2 * l + 1]), signs >> 4, q8 + 4);
        }
        sum += (int32_t) (2 * (aux >> 28) + 1) * s;
    }
    return sum;
}

int32_t block_dot_iq3_s(const block_iq3_s & b, const block_q8_K & a) {
    int32_t sum = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        int s = 0;
        for (int k = 0; k < 8; ++k) {
            const int idx = b.qs[8 * ib + k] | ((b.qh[ib] >> k) & 1) << 8;
            const uint8_t signs = b.signs[4 * ib + k / 2] >> 4 * (k % 2);
            s += dot4(grid_bytes(iq3s_grid, idx), signs & 0xf, a.qs + 32 * ib + 4 * k);
        }
        sum += (2 * ((b.scales[ib / 2] >> 4 * (ib % 2)) & 0xf) + 1) * s;
    }
    return sum;
}

void register_iq3_types() {
    auto * xxs = ggml_type_traits_mut(GGML_TYPE_IQ3_XXS);
    xxs->to_float = kiln_row_to_float<GGML_TYPE_IQ3_XXS>;   // quants-blocks-iq.h, shared with the GPU
    xxs->from_float_ref = iq3_xxs_from_float;
    xxs->quantize = quantize_iq3_xxs;
    xxs->requires_imatrix = false;
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_XXS, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K,
                           gemm_iq_scalar<block_iq3_xxs, block_dot_iq3_xxs, fp16_block_d<block_iq3_xxs>, IQ3XXS_DOT_FACTOR>);
    auto * s = ggml_type_traits_mut(GGML_TYPE_IQ3_S);
    s->to_float = kiln_row_to_float<GGML_TYPE_IQ3_S>;
    s->from_float_ref = iq3_s_from_float;
    s->quantize = quantize_iq3_s;
    s->requires_imatrix = false;
    ggml_cpu_register_gemm(GGML_TYPE_IQ3_S, GGML_CPU_ISA_SCALAR, GGML_TYPE_Q8_K,
                           gemm_iq_scalar<block_iq3_s, block_dot_iq3_s, fp16_block_d<block_iq3_s>, IQ3S_DOT_FACTOR>);
}
GGML_REGISTER(register_iq3_types);

} // namespace
