// Row-interleaved layouts of the grid i-quants (iq2_xxs_r4, iq2_xs_r4, iq2_s_r4, iq3_xxs_r4,
// iq3_s_r4): decoders and the weavers from the plain types, after the reference's repack_* index
// arithmetic and dequantize_row_*_r4 float expressions (layouts in quants-interleaved.h). Within a
// 32-value sub-block the grid indices of each row follow each other; iq2_xxs_r4 / iq2_xs_r4 /
// iq3_xxs_r4 store the 7 sign bits of a group "scrambled" (scrambled_sign) so that one shift and
// xor restores all eight. The decoders share one loop (decode_r4), the weavers another
// (weave_blocks); each type supplies only its per-sub-block arithmetic.
#include "quants-interleaved.h"
#include "quants-iq.h"

#include <cstring>

using namespace ggml_iq;

namespace {

// One 8-value grid group: y[j] = dl * grid[j] * (sign bit j ? -1 : 1).
inline void put_group8(float * y, float dl, const uint8_t * grid, uint8_t signs) {
    for (int j = 0; j < 8; ++j) y[j] = dl * (int8_t) grid[j] * (signs & (1 << j) ? -1 : 1);
}

inline uint32_t load_u32(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// The sas word of iq2_xxs_r4 / iq3_xxs_r4 (r4_sas_scale) built from the plain types' word: 4 x 7
// sign bits, then the scale in bits 28..31.
inline uint32_t make_sas(uint32_t plain) {
    const uint32_t scale = plain >> 28;
    uint32_t out = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t s = (uint32_t) (scrambled_sign((uint8_t) ((plain >> 7 * i) & 127)) << 1) | ((scale >> i) & 1);
        out |= s << 8 * i;
    }
    return out;
}

// The decoders' shared loop: for every 256-value block of the group, row k (0..3) and 32-value
// sub-block ib, decode(b, k, ib, d, out) writes row k's 32 values of sub-block ib, with d the
// row's fp16 scale times the type's constant factor.
template <typename RBlock, typename Decode>
void decode_r4(const void * vx, float * y, int64_t n, float d_factor, Decode decode) {
    const int64_t npr = n / 4;
    const auto * x = (const RBlock *) vx;
    for (int64_t ibl = 0; ibl < npr / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const float d = d_factor * GGML_FP16_TO_FP32(x[ibl].d[k]);
            for (int ib = 0; ib < 8; ++ib) decode(x[ibl], k, ib, d, y + k * npr + ibl * QK_K + 32 * ib);
        }
    }
}

void iq2_xxs_r4_to_float(const void * vx, float * y, int64_t n) {
    decode_r4<iq2_xxs_r4_block>(vx, y, n, 0.125f, [](const iq2_xxs_r4_block & b, int k, int ib, float d, float * out) {
        const uint32_t sas = load_u32(b.sas + 4 * (4 * ib + k));
        const float dl = d * (2 * r4_sas_scale(sas) + 1);
        for (int i = 0; i < 4; ++i) {
            const uint8_t signs = unscramble_signs((uint8_t) ((sas >> (8 * i + 1)) & 127));
            put_group8(out + 8 * i, dl, grid_bytes(iq2xxs_grid, b.qs[16 * ib + 4 * k + i]), signs);
        }
    });
}

void iq2_xs_r4_to_float(const void * vx, float * y, int64_t n) {
    decode_r4<iq2_xs_r4_block>(vx, y, n, 0.125f, [](const iq2_xs_r4_block & b, int k, int ib, float d, float * out) {
        const uint8_t sc = b.scales[4 * ib + k];
        const float dl1 = d * (2 * (sc & 0xF) + 1), dl2 = d * (2 * (sc >> 4) + 1);
        for (int i = 0; i < 4; ++i) {
            const uint16_t q = b.qs[16 * ib + 4 * k + i];
            put_group8(out + 8 * i, i < 2 ? dl1 : dl2, grid_bytes(iq2xs_grid, q & 511), unscramble_signs((uint8_t) (q >> 9)));
        }
    });
}

void iq2_s_r4_to_float(const void * vx, float * y, int64_t n) {
    decode_r4<iq2_s_r4_block>(vx, y, n, 0.125f, [](const iq2_s_r4_block & b, int k, int ib, float d, float * out) {
        const uint8_t sc = b.scales[4 * ib + k];
        const float dl1 = d * (2 * (sc & 0xF) + 1), dl2 = d * (2 * (sc >> 4) + 1);
        for (int i = 0; i < 4; ++i) {
            const int idx = b.qs[16 * ib + 4 * k + i] | ((b.qh[4 * ib + k] << (8 - 2 * i)) & 0x300);
            put_group8(out + 8 * i, i < 2 ? dl1 : dl2, grid_bytes(iq2s_grid, idx), b.signs[16 * ib + 4 * k + i]);
        }
    });
}

void iq3_xxs_r4_to_float(const void * vx, float * y, int64_t n) {
    decode_r4<iq3_xxs_r4_block>(vx, y, n, 0.25f, [](const iq3_xxs_r4_block & b, int k, int ib, float d, float * out) {
        const uint32_t sas = load_u32(b.sas + 4 * (4 * ib + k));
        const float dl = d * (2 * r4_sas_scale(sas) + 1);
        for (int i = 0; i < 8; ++i) {
            // 4-value groups: two per sign byte
            const uint8_t signs = unscramble_signs((uint8_t) ((sas >> (8 * (i / 2) + 1)) & 127)) >> 4 * (i % 2);
            const uint8_t * g = grid_bytes(iq3xxs_grid, b.qs[32 * ib + 8 * k + i]);
            for (int j = 0; j < 4; ++j) out[4 * i + j] = dl * (int8_t) g[j] * (signs & (1 << j) ? -1 : 1);
        }
    });
}

void iq3_s_r4_to_float(const void * vx, float * y, int64_t n) {
    decode_r4<iq3_s_r4_block>(vx, y, n, 1.0f, [](const iq3_s_r4_block & b, int k, int ib, float d, float * out) {
        const int l = 4 * ib + k;
        const float dl = d * (1 + 2 * ((b.scales[l % 16] >> 4 * (l / 16)) & 0xF));
        const uint8_t qh = b.qh[4 * ib + k];
        // group g (4 values at 4 g): index byte at k + 8 (g % 4) + 4 (g / 4), high bit g of qh,
        // sign of value j in bit g of signs[16 ib + 4 k + j]
        for (int g = 0; g < 8; ++g) {
            const int idx = b.qs[32 * ib + k + 8 * (g % 4) + 4 * (g / 4)] | (((qh >> g) & 1) << 8);
            const uint8_t * grid = grid_bytes(iq3s_grid, idx);
            for (int j = 0; j < 4; ++j) out[4 * g + j] = dl * grid[j] * (b.signs[16 * ib + 4 * k + j] & (1 << g) ? -1 : 1);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// weavers

// put(b, y, k) for every 256-value block b of the four twin rows (k: the row), y the group's block
// at the same index; the fp16 scales are the same in both layouts.
template <typename Block, typename RBlock, typename Put>
void weave_blocks(const char * const * rows, int64_t n, char * group, Put put) {
    auto * y = (RBlock *) group;
    for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
        for (int k = 0; k < 4; ++k) {
            const Block & b = ((const Block *) rows[k])[ibl];
            y[ibl].d[k] = b.d;
            put(b, y[ibl], k);
        }
    }
}

void weave_iq2_xxs_r4(const char * const * rows, int64_t n, char * group) {
    weave_blocks<block_iq2_xxs, iq2_xxs_r4_block>(rows, n, group, [](const block_iq2_xxs & b, iq2_xxs_r4_block & y, int k) {
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t aux[2];
            std::memcpy(aux, b.qs + 4 * ib, 8);
            std::memcpy(y.qs + 16 * ib + 4 * k, &aux[0], 4);
            const uint32_t sas = make_sas(aux[1]);
            std::memcpy(y.sas + 4 * (4 * ib + k), &sas, 4);
        }
    });
}

void weave_iq2_xs_r4(const char * const * rows, int64_t n, char * group) {
    weave_blocks<block_iq2_xs, iq2_xs_r4_block>(rows, n, group, [](const block_iq2_xs & b, iq2_xs_r4_block & y, int k) {
        for (int ib = 0; ib < 8; ++ib) {
            y.scales[4 * ib + k] = b.scales[ib];
            for (int i = 0; i < 4; ++i) {
                const uint16_t v = b.qs[4 * ib + i];
                y.qs[16 * ib + 4 * k + i] = (uint16_t) ((v & 511) | (scrambled_sign((uint8_t) (v >> 9)) << 9));
            }
        }
    });
}

void weave_iq2_s_r4(const char * const * rows, int64_t n, char * group) {
    weave_blocks<block_iq2_s, iq2_s_r4_block>(rows, n, group, [](const block_iq2_s & b, iq2_s_r4_block & y, int k) {
        const uint8_t * signs = b.qs + QK_K / 8;
        for (int ib = 0; ib < 8; ++ib) {
            y.scales[4 * ib + k] = b.scales[ib];
            y.qh[4 * ib + k] = b.qh[ib];
            std::memcpy(y.qs + 16 * ib + 4 * k, b.qs + 4 * ib, 4);
            std::memcpy(y.signs + 16 * ib + 4 * k, signs + 4 * ib, 4);
        }
    });
}

void weave_iq3_xxs_r4(const char * const * rows, int64_t n, char * group) {
    weave_blocks<block_iq3_xxs, iq3_xxs_r4_block>(rows, n, group, [](const block_iq3_xxs & b, iq3_xxs_r4_block & y, int k) {
        for (int ib = 0; ib < 8; ++ib) {
            std::memcpy(y.qs + 32 * ib + 8 * k, b.qs + 8 * ib, 8);
            const uint32_t sas = make_sas(load_u32(b.qs + QK_K / 4 + 4 * ib));
            std::memcpy(y.sas + 4 * (4 * ib + k), &sas, 4);
        }
    });
}

void weave_iq3_s_r4(const char * const * rows, int64_t n, char * group) {
    weave_blocks<block_iq3_s, iq3_s_r4_block>(rows, n, group, [](const block_iq3_s & b, iq3_s_r4_block & y, int k) {
        for (int ib = 0; ib < 8; ++ib) {
            const int l = 4 * ib + k;
            y.scales[l % 16] |= (uint8_t) (((b.scales[ib / 2] >> 4 * (ib % 2)) & 0xF) << 4 * (l / 16));
            y.qh[4 * ib + k] = b.qh[ib];
            // plain group g: index qs[8 ib + g], signs in nibble g % 2 of signs[4 ib + g / 2]
            for (int g = 0; g < 8; ++g) {
                y.qs[32 * ib + k + 8 * (g % 4) + 4 * (g / 4)] = b.qs[8 * ib + g];
                const int s4 = (b.signs[4 * ib + g / 2] >> 4 * (g % 2)) & 0xF;
                for (int j = 0; j < 4; ++j) y.signs[16 * ib + 4 * k + j] |= (uint8_t) (((s4 >> j) & 1) << g);
            }
        }
    });
}

void register_interleaved_iq_types() {
    register_float_path<GGML_TYPE_IQ2_XXS_R4>(iq2_xxs_r4_to_float);
    register_float_path<GGML_TYPE_IQ2_XS_R4>(iq2_xs_r4_to_float);
    register_float_path<GGML_TYPE_IQ2_S_R4>(iq2_s_r4_to_float);
    register_float_path<GGML_TYPE_IQ3_XXS_R4>(iq3_xxs_r4_to_float);
    register_float_path<GGML_TYPE_IQ3_S_R4>(iq3_s_r4_to_float);
    register_weave<GGML_TYPE_IQ2_XXS_R4, weave_iq2_xxs_r4>();
    register_weave<GGML_TYPE_IQ2_XS_R4, weave_iq2_xs_r4>();
    register_weave<GGML_TYPE_IQ2_S_R4, weave_iq2_s_r4>();
    register_weave<GGML_TYPE_IQ3_XXS_R4, weave_iq3_xxs_r4>();
    register_weave<GGML_TYPE_IQ3_S_R4, weave_iq3_s_r4>();
}
GGML_REGISTER(register_interleaved_iq_types);

} // namespace
