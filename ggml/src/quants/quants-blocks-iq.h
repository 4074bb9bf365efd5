// The llama.cpp lattice i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) as the CPU
// and the CUDA kernels share them: block layouts, grid lookups that read the host or the device
// copy of a grid, and the 32-value chunk decoders. Included by quants-blocks.h (which provides
// KILN_HD, the fp16 conversion and KILN_VALUE); the CPU's to_float of these types is the chunk
// decoders run over a row (quants-iq{1,2,3}.cpp), so there is one definition of each.
//
// Every type stores groups of 8 (IQ1/IQ2) or 4 (IQ3) weights as an index into a grid of lattice
// points plus signs; a 32-value chunk is one scale block. The float expressions are those of the
// reference dequantizers (the golden dq.T data checks them bit for bit).
#pragma once

#include "quants-iq-grid-data.h"

// ---- block layouts (sizes as llama.cpp writes them) -------------------------------------------

struct block_iq2_xxs {           // 2.0625 bpw
    ggml_fp16_t d;
    uint16_t    qs[QK_K / 8];    // per 32 weights: 4 grid bytes, then 4x7 sign bits + 4-bit scale
};
static_assert(sizeof(block_iq2_xxs) == 66, "iq2_xxs block size");

struct block_iq2_xs {            // 2.3125 bpw
    ggml_fp16_t d;
    uint16_t    qs[QK_K / 8];    // 9-bit grid index | 7 sign bits << 9, per 8 weights
    uint8_t     scales[QK_K / 32];
};
static_assert(sizeof(block_iq2_xs) == 74, "iq2_xs block size");

struct block_iq2_s {             // 2.5625 bpw
    ggml_fp16_t d;
    uint8_t     qs[QK_K / 4];    // 32 low grid-index bytes, then 32 sign bytes
    uint8_t     qh[QK_K / 32];   // 2 high index bits per 8 weights
    uint8_t     scales[QK_K / 32];
};
static_assert(sizeof(block_iq2_s) == 82, "iq2_s block size");

struct block_iq3_xxs {           // 3.0625 bpw
    ggml_fp16_t d;
    uint8_t     qs[3 * QK_K / 8];  // 64 grid bytes, then per 32 weights 4x7 sign bits + 4-bit scale
};
static_assert(sizeof(block_iq3_xxs) == 98, "iq3_xxs block size");

struct block_iq3_s {             // 3.4375 bpw
    ggml_fp16_t d;
    uint8_t     qs[QK_K / 4];
    uint8_t     qh[QK_K / 32];
    uint8_t     signs[QK_K / 8];
    uint8_t     scales[QK_K / 64];
};
static_assert(sizeof(block_iq3_s) == 110, "iq3_s block size");

struct block_iq1_s {             // 1.5625 bpw
    ggml_fp16_t d;
    uint8_t     qs[QK_K / 8];
    uint16_t    qh[QK_K / 32];   // 3 high index bits per 8 weights, 3-bit scale, delta sign
};
static_assert(sizeof(block_iq1_s) == 50, "iq1_s block size");

struct block_iq1_m {             // 1.75 bpw; the fp16 super-scale is spread over the scale nibbles
    uint8_t qs[QK_K / 8];
    uint8_t qh[QK_K / 16];
    uint8_t scales[QK_K / 32];
};
static_assert(sizeof(block_iq1_m) == 56, "iq1_m block size");

// ---- grids: the host tables (quants-iq-grids.cpp) and the device's own copies ------------------

namespace ggml_iq {
extern const uint64_t iq2xxs_grid[256];
extern const uint64_t iq2xs_grid[512];
extern const uint64_t iq2s_grid[1024];
extern const uint32_t iq3xxs_grid[256];
extern const uint32_t iq3s_grid[512];
extern const uint64_t iq1s_grid[2048];
} // namespace ggml_iq

#if defined(__CUDACC__)
// Global (not constant) memory: the lanes of a warp look up different entries, which constant
// memory would serialize; 33 KB in all, cached in L1 after the first rows.
static __device__ const uint64_t kiln_iq2xxs_grid_dev[256] = KILN_IQ2XXS_GRID;
static __device__ const uint64_t kiln_iq2xs_grid_dev[512] = KILN_IQ2XS_GRID;
static __device__ const uint64_t kiln_iq2s_grid_dev[1024] = KILN_IQ2S_GRID;
static __device__ const uint32_t kiln_iq3xxs_grid_dev[256] = KILN_IQ3XXS_GRID;
static __device__ const uint32_t kiln_iq3s_grid_dev[512] = KILN_IQ3S_GRID;
static __device__ const uint64_t kiln_iq1s_grid_dev[2048] = KILN_IQ1S_GRID;
#endif

KILN_HD uint64_t iq2xxs_grid_at(int i) { return KILN_VALUE(ggml_iq::iq2xxs_grid, kiln_iq2xxs_grid_dev, i); }
KILN_HD uint64_t iq2xs_grid_at(int i) { return KILN_VALUE(ggml_iq::iq2xs_grid, kiln_iq2xs_grid_dev, i); }
KILN_HD uint64_t iq2s_grid_at(int i) { return KILN_VALUE(ggml_iq::iq2s_grid, kiln_iq2s_grid_dev, i); }
KILN_HD uint32_t iq3xxs_grid_at(int i) { return KILN_VALUE(ggml_iq::iq3xxs_grid, kiln_iq3xxs_grid_dev, i); }
KILN_HD uint32_t iq3s_grid_at(int i) { return KILN_VALUE(ggml_iq::iq3s_grid, kiln_iq3s_grid_dev, i); }
KILN_HD uint64_t iq1s_grid_at(int i) { return KILN_VALUE(ggml_iq::iq1s_grid, kiln_iq1s_grid_dev, i); }

// Byte j of a grid entry (the grids are stored little endian: element j in byte j).
KILN_HD int kiln_grid_byte(uint64_t entry, int j) { return (int) ((entry >> (8 * j)) & 0xFF); }

// IQ2_XXS/IQ2_XS/IQ3_XXS store 7 sign bits per 8 weights; the 8th makes the count of negative
// signs even. The 8 sign bits of a 7-bit code.
KILN_HD uint32_t kiln_expand_signs7(uint32_t code) {
    uint32_t c = code & 127, parity = c;
    parity ^= parity >> 4;
    parity ^= parity >> 2;
    parity ^= parity >> 1;
    return c | (parity & 1) << 7;
}

KILN_HD float kiln_sign_of(uint32_t signs, int j) { return (signs >> j) & 1 ? -1.f : 1.f; }

// ---- decoders: chunk c = scale block c (32 values) --------------------------------------------

// Four groups of 8 from a 64-bit grid: y[8 l + j] = db(l) * grid byte j * sign.
template <typename Entry, typename Signs, typename Scale>
KILN_HD void kiln_decode_grid8x4(float * y, Entry entry, Signs signs, Scale db) {
    for (int l = 0; l < 4; ++l) {
        const uint64_t g = entry(l);
        const uint32_t s = signs(l);
        const float dl = db(l);
        for (int j = 0; j < 8; ++j) y[8 * l + j] = dl * kiln_grid_byte(g, j) * kiln_sign_of(s, j);
    }
}

KILN_HD uint32_t kiln_load_u32_of(const uint16_t * p) {
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

// iq2_xxs: per 32 weights two words: 4 grid indices, then 4x7 sign bits and the scale (top 4).
KILN_HD void decode32_iq2_xxs(const block_iq2_xxs & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const uint32_t idx = kiln_load_u32_of(b.qs + 4 * c), aux = kiln_load_u32_of(b.qs + 4 * c + 2);
    const float db = d * (0.5f + (aux >> 28)) * 0.25f;
    kiln_decode_grid8x4(
        y, [&](int l) { return iq2xxs_grid_at((idx >> (8 * l)) & 0xFF); },
        [&](int l) { return kiln_expand_signs7(aux >> (7 * l)); }, [&](int) { return db; });
}

// iq2_xs: a 9-bit grid index and 7 sign bits per 8 weights, a 4-bit scale per 16.
KILN_HD void decode32_iq2_xs(const block_iq2_xs & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const float db[2] = { d * (0.5f + (b.scales[c] & 0xf)) * 0.25f, d * (0.5f + (b.scales[c] >> 4)) * 0.25f };
    const uint16_t * qs = b.qs + 4 * c;
    kiln_decode_grid8x4(
        y, [&](int l) { return iq2xs_grid_at(qs[l] & 511); }, [&](int l) { return kiln_expand_signs7(qs[l] >> 9); },
        [&](int l) { return db[l / 2]; });
}

// iq2_s: 8 low index bits in qs, 2 high ones in qh, all 8 sign bits in the second half of qs.
KILN_HD void decode32_iq2_s(const block_iq2_s & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const float db[2] = { d * (0.5f + (b.scales[c] & 0xf)) * 0.25f, d * (0.5f + (b.scales[c] >> 4)) * 0.25f };
    const uint8_t * qs = b.qs + 4 * c;
    const uint8_t * signs = b.qs + QK_K / 8 + 4 * c;
    kiln_decode_grid8x4(
        y, [&](int l) { return iq2s_grid_at(qs[l] | ((b.qh[c] >> (2 * l)) & 3) << 8); },
        [&](int l) { return (uint32_t) signs[l]; }, [&](int l) { return db[l / 2]; });
}

// The IQ3 grids hold 4 weights per entry: two entries make a group of 8.
KILN_HD uint64_t kiln_grid_pair(uint32_t lo, uint32_t hi) { return lo | (uint64_t) hi << 32; }

// iq3_xxs: 64 grid-index bytes, then per 32 weights one word of 4x7 sign bits and a 4-bit scale.
KILN_HD void decode32_iq3_xxs(const block_iq3_xxs & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const uint8_t * qs = b.qs + 8 * c;
    const uint32_t aux = kiln_load_u32(b.qs + QK_K / 4 + 4 * c);
    const float db = d * (0.5f + (aux >> 28)) * 0.5f;
    kiln_decode_grid8x4(
        y, [&](int l) { return kiln_grid_pair(iq3xxs_grid_at(qs[2 * l]), iq3xxs_grid_at(qs[2 * l + 1])); },
        [&](int l) { return kiln_expand_signs7(aux >> (7 * l)); }, [&](int) { return db; });
}

// iq3_s: 9-bit indices (high bits in qh), 8 sign bits per 8 weights, a 4-bit scale per 32.
KILN_HD void decode32_iq3_s(const block_iq3_s & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const float db = d * (1 + 2 * ((b.scales[c / 2] >> 4 * (c % 2)) & 0xf));
    const uint8_t * qs = b.qs + 8 * c;
    const int qh = b.qh[c];
    kiln_decode_grid8x4(
        y,
        [&](int l) {
            return kiln_grid_pair(iq3s_grid_at(qs[2 * l] | ((qh >> (2 * l)) & 1) << 8),
                                  iq3s_grid_at(qs[2 * l + 1] | ((qh >> (2 * l + 1)) & 1) << 8));
        },
        [&](int l) { return (uint32_t) b.signs[4 * c + l]; }, [&](int) { return db; });
}

// The IQ1 values are grid (-1/0/+1) shifted by +-1/8.
#define KILN_IQ1_DELTA 0.125f

// 8 weights of an IQ1 group: dl * (grid + delta), the grid bytes read as int8.
KILN_HD void kiln_decode_iq1_group(float * y, uint64_t entry, float dl, float delta) {
    for (int j = 0; j < 8; ++j) y[j] = dl * ((int8_t) kiln_grid_byte(entry, j) + delta);
}

// iq1_s: 11-bit indices (3 high bits per group in qh), one 3-bit scale and shift sign per 32.
KILN_HD void decode32_iq1_s(const block_iq1_s & b, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d);
    const uint16_t h = b.qh[c];
    const float dl = d * (2 * ((h >> 12) & 7) + 1);
    const float delta = h & 0x8000 ? -KILN_IQ1_DELTA : KILN_IQ1_DELTA;
    for (int l = 0; l < 4; ++l) kiln_decode_iq1_group(y + 8 * l, iq1s_grid_at(b.qs[4 * c + l] | ((h >> 3 * l) & 7) << 8), dl, delta);
}

// iq1_m: the fp16 super-scale is the top nibbles of the four scale words.
KILN_HD float kiln_iq1_m_scale(const block_iq1_m & b) {
    uint16_t sc[4];
    memcpy(sc, b.scales, sizeof(sc));
    return kiln_fp16_to_f32((ggml_fp16_t) ((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
}

// iq1_m: a 3-bit scale per 16 weights, an index nibble (3 high bits, shift sign) per 8.
KILN_HD void decode32_iq1_m(const block_iq1_m & b, int c, float, float * y) {
    const float d = kiln_iq1_m_scale(b);
    uint16_t sc[4];
    memcpy(sc, b.scales, sizeof(sc));
    for (int l = 0; l < 4; ++l) {
        const int k = 4 * c + l, g = k / 2;   // group of 8, scale group of 16
        const float dl = d * (2 * ((sc[g / 4] >> 3 * (g % 4)) & 7) + 1);
        const int h = b.qh[k / 2] >> 4 * (k % 2);
        kiln_decode_iq1_group(y + 8 * l, iq1s_grid_at(b.qs[k] | (h & 7) << 8), dl, h & 8 ? -KILN_IQ1_DELTA : KILN_IQ1_DELTA);
    }
}
