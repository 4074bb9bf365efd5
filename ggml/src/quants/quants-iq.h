// Private header of the lattice i-quant families (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S): the block layouts and grids (quants-blocks-iq.h, shared with the CUDA kernels, whose
// float decoders are the CPU's to_float too), and the "decoded block" form that the SIMD gemm
// kernels (cpu/avx2, cpu/avx512) work on.
//
// Every type stores groups of 8 (IQ1/IQ2) or 4 (IQ3) weights as an index into a grid of lattice
// points plus signs; all of them decode to  value = d * (small odd integer scale) * grid * sign.
// For the dot products with q8_K activations each block is first decoded into 256 signed int8
// values and 16 int16 scales (one per 16 weights) so that
//     dot(block, q8) = d_block * d_q8 * factor * sum_g scale[g] * sum_{j in g} q[j] * q8[j]
// with exact int32 arithmetic; the scalar reference gemm computes the same integer sums straight
// from the bits, so every kernel agrees with it bit for bit.
#pragma once

#include "quants-common.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ggml_iq {

// ---- block layouts and grids: quants-blocks-iq.h (shared with the CUDA kernels) ---------------

using ::block_iq1_m;
using ::block_iq1_s;
using ::block_iq2_s;
using ::block_iq2_xs;
using ::block_iq2_xxs;
using ::block_iq3_s;
using ::block_iq3_xxs;

constexpr float IQ1_DELTA = 0.125f;   // IQ1 values are grid (-1/0/+1) shifted by +-1/8

// IQ2_XXS/IQ2_XS/IQ3_XXS store 7 sign bits per 8 weights; the 8th makes the count of negative
// signs even. Returns the 8 sign bits for a 7-bit code.
static constexpr uint8_t expand_signs7(uint32_t code) {
    const uint32_t c = code & 127;
    return (uint8_t) (c | ((uint32_t) __builtin_popcount(c) & 1) << 7);
}

static inline const uint8_t * grid_bytes(const uint64_t * grid, int idx) { return (const uint8_t *) (grid + idx); }
static inline const uint8_t * grid_bytes(const uint32_t * grid, int idx) { return (const uint8_t *) (grid + idx); }

// ---- decoded blocks for the SIMD kernels ----------------------------------------------------

struct decoded_block {
    alignas(64) int8_t q[QK_K];   // signed weights (IQ1: 8*grid + delta sign, exact)
    alignas(32) int16_t sc[QK_K / 16];
    float d;                      // fp16 super-scale of the block (times nothing else)
};

// The constant each type's integer dot is multiplied by (besides d_block * d_q8).
constexpr float IQ2_DOT_FACTOR  = 0.125f;   // (2s+1)/8 scale steps
constexpr float IQ3XXS_DOT_FACTOR = 0.25f;  // (2s+1)/4
constexpr float IQ3S_DOT_FACTOR = 1.0f;     // (2s+1)
constexpr float IQ1_DOT_FACTOR  = 0.125f;   // weights decoded as 8*(grid + delta)

// Byte j of kSignMasks[s] is 0xff when bit j of s is set. Negating the selected bytes of a
// grid entry is then one xor and one add (magnitudes <= 62: no carry crosses a byte).
static constexpr std::array<uint64_t, 256> make_sign_masks() {
    std::array<uint64_t, 256> t{};
    for (int s = 0; s < 256; ++s) {
        for (int j = 0; j < 8; ++j) {
            if ((s >> j) & 1) t[s] |= 0xffull << 8 * j;
        }
    }
    return t;
}
// static: a per-file copy, never merged between baseline and ISA files (see cpu/cpu-isa.h)
static constexpr std::array<uint64_t, 256> kSignMasks = make_sign_masks();

static inline void store_signed8(int8_t * out, uint64_t magnitudes, uint8_t signs) {
    const uint64_t m = kSignMasks[signs];
    const uint64_t v = (magnitudes ^ m) + (m & 0x0101010101010101ull);
    std::memcpy(out, &v, sizeof(v));
}
static inline uint64_t pair32(uint32_t lo, uint32_t hi) { return lo | (uint64_t) hi << 32; }

static inline void decode_iq2_xxs(const block_iq2_xxs & b, decoded_block & out) {
    out.d = GGML_FP16_TO_FP32(b.d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        uint32_t aux[2];
        std::memcpy(aux, b.qs + 4 * ib, sizeof(aux));
        const auto * idx = (const uint8_t *) &aux[0];
        const int16_t ls = (int16_t) (2 * (aux[1] >> 28) + 1);
        out.sc[2 * ib] = out.sc[2 * ib + 1] = ls;
        for (int l = 0; l < 4; ++l) {
            store_signed8(out.q + 32 * ib + 8 * l, iq2xxs_grid[idx[l]], expand_signs7(aux[1] >> 7 * l));
        }
    }
}

static inline void decode_iq2_xs(const block_iq2_xs & b, decoded_block & out) {
    out.d = GGML_FP16_TO_FP32(b.d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        out.sc[2 * ib]     = (int16_t) (2 * (b.scales[ib] & 0xf) + 1);
        out.sc[2 * ib + 1] = (int16_t) (2 * (b.scales[ib] >> 4) + 1);
    }
    for (int k = 0; k < QK_K / 8; ++k) {
        store_signed8(out.q + 8 * k, iq2xs_grid[b.qs[k] & 511], expand_signs7(b.qs[k] >> 9));
    }
}

static inline void decode_iq2_s(const block_iq2_s & b, decoded_block & out) {
    out.d = GGML_FP16_TO_FP32(b.d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        out.sc[2 * ib]     = (int16_t) (2 * (b.scales[ib] & 0xf) + 1);
        out.sc[2 * ib + 1] = (int16_t) (2 * (b.scales[ib] >> 4) + 1);
    }
    const uint8_t * signs = b.qs + QK_K / 8;
    for (int k = 0; k < QK_K / 8; ++k) {
        const int idx = b.qs[k] | ((b.qh[k / 4] >> (2 * (k % 4))) & 3) << 8;
        store_signed8(out.q + 8 * k, iq2s_grid[idx], signs[k]);
    }
}

static inline void decode_iq3_xxs(const block_iq3_xxs & b, decoded_block & out) {
    out.d = GGML_FP16_TO_FP32(b.d);
    const uint8_t * sas = b.qs + QK_K / 4;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        uint32_t aux;
        std::memcpy(&aux, sas + 4 * ib, sizeof(aux));
        out.sc[2 * ib] = out.sc[2 * ib + 1] = (int16_t) (2 * (aux >> 28) + 1);
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = pair32(iq3xxs_grid[b.qs[8 * ib + 2 * l]], iq3xxs_grid[b.qs[8 * ib + 2 * l + 1]]);
            store_signed8(out.q + 32 * ib + 8 * l, g, expand_signs7(aux >> 7 * l));
        }
    }
}

static inline void decode_iq3_s(const block_iq3_s & b, decoded_block & out) {
    out.d = GGML_FP16_TO_FP32(b.d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const int16_t ls = (int16_t) (2 * ((b.scales[ib / 2] >> 4 * (ib % 2)) & 0xf) + 1);
        out.sc[2 * ib] = out.sc[2 * ib + 1] = ls;
        for (int l = 0; l < 4; ++l) {
            const int k = 8 * ib + 2 * l;   // first of two groups of 4 weights
            const uint64_t g = pair32(iq3s_grid[b.qs[k] | ((b.qh[ib] >> (2 * l)) & 1) << 8],
                                      iq3s_grid[b.qs[k + 1] | ((b.qh[ib] >> (2 * l + 1)) & 1) << 8]);
            store_signed8(out.q + 32 * ib + 8 * l, g, b.signs[4 * ib + l]);
        }
    }
}

static inline void decode_iq1_group(int8_t * out, int idx, int delta) {
    const auto * g = (const int8_t *) (iq1s_grid + idx);
    for (int j = 0; j < 8; ++j) out[j] = (int8_t) (8 * g[j] + delta);
}

static inline void decode_iq1_s(const block_iq1_s & b, decoded_block & out) {
    out.d = GGML_FP16_TO_FP32(b.d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const uint16_t h = b.qh[ib];
        out.sc[2 * ib] = out.sc[2 * ib + 1] = (int16_t) (2 * ((h >> 12) & 7) + 1);
        const int delta = h & 0x8000 ? -1 : 1;
        for (int l = 0; l < 4; ++l) {
            decode_iq1_group(out.q + 32 * ib + 8 * l, b.qs[4 * ib + l] | ((h >> 3 * l) & 7) << 8, delta);
        }
    }
}

static inline float iq1_m_super_scale(const block_iq1_m & b) {
    uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof(sc));
    const uint16_t h = (uint16_t) ((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    return GGML_FP16_TO_FP32(h);
}

static inline void decode_iq1_m(const block_iq1_m & b, decoded_block & out) {
    out.d = iq1_m_super_scale(b);
    uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof(sc));
    for (int g = 0; g < QK_K / 16; ++g) out.sc[g] = (int16_t) (2 * ((sc[g / 4] >> 3 * (g % 4)) & 7) + 1);
    for (int k = 0; k < QK_K / 8; ++k) {
        const uint8_t h = b.qh[k / 2] >> 4 * (k % 2);
        decode_iq1_group(out.q + 8 * k, b.qs[k] | (h & 7) << 8, h & 8 ? -1 : 1);
    }
}

// ---- lattice search tables for the quantizers (built in quants-iq-grids.cpp) ----------------

// A quantizer grid: the lattice points as small odd integers 2l+1 (l = level), an index map
// from every packed level vector to its grid entry, and for points not on the grid the list of
// nearest grid entries. Built lazily, once, thread-safe.
struct search_grid {
    int              n      = 0;  // grid entries
    int              dim    = 0;  // 8 (IQ1/IQ2) or 4 (IQ3)
    int              bits   = 0;  // bits per level in the packed index: 2 or 3
    const int8_t *   points = nullptr;      // n * dim values 2l+1
    const int32_t *  map    = nullptr;      // index -> entry, or -(offset into neighbours + 1)
    const uint16_t * neighbours = nullptr;  // [count, entry...] per off-grid index

    const int8_t * point(int i) const { return points + (size_t) i * dim; }
    // neighbour list of an off-grid packed index (map[u] < 0): count followed by entries
    const uint16_t * neighbours_of(int u) const { return neighbours - map[u] - 1; }
};

// grid_type: GGML_TYPE_IQ2_XXS / IQ2_XS / IQ2_S / IQ1_S (IQ1_M shares IQ1_S) / IQ3_XXS / IQ3_S
const search_grid & get_search_grid(ggml_type grid_type);

// The shared search of IQ2/IQ3 quantizers (quants-iq2.cpp): pick lattice points and a scale for
// one scale block of n = groups * dim non-negative magnitudes xval (at most one may have been
// negated to fix the sign parity) under importance weights.
struct lattice_search {
    int   kmax;                 // levels 0..kmax-1 stand for the odd values 2l+1
    int   is_min, is_max;       // scale trials: id = (2*kmax-1 + is*is_step) / base
    float is_step;
    bool  qp_start;             // IQ2_XXS: start from a qp fit (base = its max), not from max(xval)
    bool  init_on_grid;         // what "on grid" is assumed when no trial improves the fit
    bool  requant_always;       // requantize with the final scale even if every group was on grid
    bool  requant_every_group;  // ... and then every group, not only the off-grid ones
};
float lattice_quantize(const search_grid & g, const lattice_search & p, int n, const float * xval,
                       const float * weight, const float * waux, int * grid_index);

// llama.cpp's rounding: half to even via the 1.5*2^23 trick.
static inline int nearest_int(float v) {
    float t = v + 12582912.f;
    int32_t i;
    std::memcpy(&i, &t, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

// Rows must hold finite values and be a multiple of QK_K long; prints why not.
bool check_rows(const char * type_name, const float * src, int64_t nrows, int64_t n_per_row, int64_t block = QK_K);

} // namespace ggml_iq
