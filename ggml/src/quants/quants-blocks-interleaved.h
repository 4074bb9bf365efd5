// The row-interleaved layouts of ik_llama.cpp (_r4 / _r8 / _r16) as the CPU and the CUDA kernels
// both read them: the woven block structs, the index arithmetic of the weave, and a KILN_HD
// decoder per layout that turns 32 values of one row of a group into floats. Included by
// quants-blocks.h (after the plain decoders and the grids it reuses); nvcc compiles it as it is.
//
// Why decoders of the woven bytes, not an unweave at upload. A GPU could be handed the plain
// twin's bytes instead (the CPU can unweave most layouts), but then a tensor would have one type
// on the host and another on the device: the scheduler's copies, get_rows, views and the -rtr
// accounting would all have to know, and the layouts that are not a bit permutation of their twin
// (iq2_xxs_r4's scrambled signs, iq1_s_r4 quantized on its own) could not be unwoven at all. A
// decoder per layout keeps the device copy byte-identical to the file: a kernel that decodes
// chunk ch of logical row r finds its group at row r - r % R (groups are R * row_size contiguous
// bytes: R row scales, if the type has them, then the woven blocks) and decodes row r % R of it
// (kiln_decode_row_chunk below). The GPU kernels do not gain from the weave; they just read it.
//
// Each decoder follows the CPU's to_float of its layout (quants-interleaved*.cpp, quants-iq1.cpp)
// expression for expression, with the plain types' value tables and grids (iq4k_value,
// iq2xxs_grid_at, kiln_decode_iq1_group, ...); tests/test-quants-blocks-interleaved.cpp checks them
// bit for bit against that to_float and against the plain twin's to_float of the unwoven rows.
#pragma once

// (included from quants-blocks.h, which declares everything used here)

// ---------------------------------------------------------------------------------------------
// Index arithmetic of the weaves (shared with the CPU's weavers and SIMD kernels).

// Byte of position p (0..31) of row k in a 64-byte 4-row nibble group, and whether the level is
// its high nibble: the eight 4-position quarters sit at offsets 0/32/0/32/16/48/16/48, low
// nibbles for quarters 0, 1, 4, 5.
KILN_HD constexpr int r4_nibble_byte(int k, int p) { return 32 * ((p / 4) & 1) + 16 * (p / 16) + 4 * k + (p % 4); }
KILN_HD constexpr bool r4_nibble_high(int p) { return (p / 4) % 4 >= 2; }

KILN_HD int r4_nibble(const uint8_t * q, int k, int p) {
    const uint8_t b = q[r4_nibble_byte(k, p)];
    return r4_nibble_high(p) ? b >> 4 : b & 0xF;
}
// Inverse of r4_nibble on a zeroed group: store level v (0..15).
KILN_HD void r4_put_nibble(uint8_t * q, int k, int p, int v) {
    q[r4_nibble_byte(k, p)] |= (uint8_t) (r4_nibble_high(p) ? v << 4 : v);
}

// 6-bit scale of slot `is` (0..63) in split scale arrays (low nibbles in sl[32], high 2 bits in sh[16]).
KILN_HD int split_scale6(const uint8_t * sl, const uint8_t * sh, int is) {
    return ((sl[is % 32] >> 4 * (is / 32)) & 0xF) | (((sh[is % 16] >> 2 * (is / 16)) & 3) << 4);
}
KILN_HD void put_split_scale6(uint8_t * sl, uint8_t * sh, int is, int v) {
    sl[is % 32] |= (uint8_t) ((v & 0xF) << 4 * (is / 32));
    sh[is % 16] |= (uint8_t) (((v >> 4) & 3) << 2 * (is / 16));
}

// Bit of the fifth (iq5_k_r4) level bit of position p in its qh byte: the reference orders the
// quarters i, i+8, i+16, i+24, i+4, i+12, i+20, i+28 (bits 0 4 1 5 2 6 3 7).
KILN_HD constexpr int iq5_k_r4_hbit(int p) { return (p / 8) + 4 * ((p / 4) & 1); }
// q5_k_r4 orders them i, i+8, i+4, i+12, i+16, i+24, i+20, i+28 (bits 0 2 1 3 4 6 5 7).
KILN_HD constexpr int q5_k_r4_hbit(int p) { return (p / 16) * 4 + 2 * ((p / 4) & 1) + ((p / 8) & 1); }
// q6_k_r4: the two high bits of position p are in qh[32 ib + q6_k_r4_hoff(p) + 4 k + p % 4] at
// q6_k_r4_hshift(p) (0 4 2 6 per quarter, twice).
KILN_HD constexpr int q6_k_r4_hoff(int p) { return p / 4 < 4 ? 0 : 16; }
KILN_HD constexpr int q6_k_r4_hshift(int p) { return 4 * ((p / 4) & 1) + 2 * ((p / 8) & 1); }

// 2-bit level of position p (0..31) of row k in a 32-byte iq2_k_r4 / iq3_k_r4 sub-block group:
// byte 4 k + p % 4 (+ 16 for the second half), bits 2 ((p / 4) % 4).
KILN_HD constexpr int r4_crumb_byte(int k, int p) { return 4 * k + p % 4 + (p >= 16 ? 16 : 0); }
KILN_HD constexpr int r4_crumb_shift(int p) { return 2 * ((p / 4) % 4); }
KILN_HD int r4_crumb(const uint8_t * q, int k, int p) { return (q[r4_crumb_byte(k, p)] >> r4_crumb_shift(p)) & 3; }
// iq3_k_r4 / q3_k_r4: the third bit of position p is bit p / 4 of qh[16 ib + 4 k + p % 4].

// q5_0_r4 keeps the fifth bits of row k in qh[4 k + p % 4] (bit q5_0_r4_hbit(p): 0 2 4 6 1 3 5 7),
// q6_0_r4 the two top bits in qh[q6_0_r4_hoff(p) + 4 k + p % 4] at q6_0_r4_hshift(p).
KILN_HD constexpr int q5_0_r4_hbit(int p) { return 2 * ((p / 4) % 4) + p / 16; }
KILN_HD constexpr int q6_0_r4_hoff(int p) { return p / 4 < 4 ? 0 : 16; }
KILN_HD constexpr int q6_0_r4_hshift(int p) { return 2 * ((p / 4) % 4); }

// The 4-bit scale of an iq2_xxs_r4 / iq3_xxs_r4 sas word (bit 0 of each byte).
KILN_HD int r4_sas_scale(uint32_t sas) {
    return (int) ((sas & 1) | ((sas >> 7) & 2) | ((sas >> 14) & 4) | ((sas >> 21) & 8));
}
// The eight signs (bit j set: negative) of a scrambled 7-bit pattern (the running xor of the
// plain bits, quants-interleaved.h scrambled_sign): t ^ (t << 1).
KILN_HD uint8_t unscramble_signs(uint8_t t) { return (uint8_t) (t ^ (t << 1)); }

// ---------------------------------------------------------------------------------------------
// The woven blocks: one block position of the R rows of a group. Field order as in the
// reference's files (its repack_* functions).

struct iq4_nl_r4_block { ggml_fp16_t d[4]; uint8_t qs[64]; };
struct q4_0_r8_block   { ggml_fp16_t d[8]; uint8_t qs[128]; };
struct q8_0_r8_block   { ggml_fp16_t d[8]; int8_t qs[256]; };
// mxfp4_r8: q4_0_r8's nibble layout under eight e8m0 row exponents (the reference's block_mxfp4_r8)
struct mxfp4_r8_block  { uint8_t e[8]; uint8_t qs[128]; };
struct iq5_k_r4_block  { ggml_fp16_t d[4]; uint8_t extra[8]; uint8_t scales_h[16]; uint8_t scales_l[32]; uint8_t qs[512]; uint8_t qh[128]; };
struct iq4_xs_r8_block { ggml_fp16_t d[8]; uint8_t scales_h[16]; uint8_t scales_l[32]; uint8_t qs[1024]; };
// d[k] the scale of row k, d[k + 4] its min factor
struct q4_k_r4_block   { ggml_fp16_t d[8]; uint8_t scales_h[16]; uint8_t scales_l[32]; uint8_t qs[512]; };
struct q5_k_r4_block   { ggml_fp16_t d[8]; uint8_t scales_h[16]; uint8_t scales_l[32]; uint8_t qh[128]; uint8_t qs[512]; };
struct q6_k_r4_block   { ggml_fp16_t d[4]; int8_t scales[64]; uint8_t qh[256]; uint8_t ql[512]; };
// iq2_k_r4 / iq3_k_r4 (layout of the reference's repack_iq2_k / repack_iq3_k): per 32-value
// sub-block ib, 32 bytes of 2-bit levels (row k at 4 k and 16 + 4 k, four positions 4 apart per
// byte) and, for iq3_k, 16 bytes of third bits (row k at 4 k, eight positions per byte).
struct iq2_k_r4_block  { ggml_fp16_t d[4]; uint8_t extra[8]; uint8_t scales[32]; uint8_t qs[256]; };
struct iq3_k_r4_block  { ggml_fp16_t d[4]; uint8_t extra[8]; uint8_t scales_h[8]; uint8_t scales_l[32]; uint8_t qs[256]; uint8_t qh[128]; };
// iq4_k_r4: within a 32-value sub-block ib the 64 bytes qs[64 ib ..] hold row k's nibbles as
// r4_nibble reads them.
struct iq4_k_r4_block {
    ggml_fp16_t d[4];
    uint8_t     extra[8];      // bit ib of extra[k] / extra[k + 4]: shifted grid, first / second 16
    uint8_t     scales_h[16];
    uint8_t     scales_l[32];  // 6-bit scales of slot 8 ib + k (+ 4 for the second 16)
    uint8_t     qs[512];
};
// row: 4 x f32 d (one per row of the group)
struct iq4_ks_r4_block {
    uint8_t scales[32];        // scales[4 ib + k], coded as in iq4_ks
    uint8_t qs[512];
};
static_assert(sizeof(iq4_k_r4_block) == 576 && sizeof(iq4_ks_r4_block) == 544, "r layouts");
static_assert(sizeof(iq2_k_r4_block) == 4 * 76 && sizeof(iq3_k_r4_block) == 4 * 110, "r layouts");
static_assert(sizeof(iq4_nl_r4_block) == 72 && sizeof(q4_0_r8_block) == 144 && sizeof(q8_0_r8_block) == 272, "r layouts");
static_assert(sizeof(mxfp4_r8_block) == 8 * sizeof(block_mxfp4), "r layouts");
static_assert(sizeof(iq5_k_r4_block) == 704 && sizeof(iq4_xs_r8_block) == 1088, "r layouts");
static_assert(sizeof(q4_k_r4_block) == 576 && sizeof(q5_k_r4_block) == 704 && sizeof(q6_k_r4_block) == 840, "r layouts");

// q5_0_r4 / q6_0_r4: 4-bit low parts as iq4_nl_r4 (r4_nibble), high bits as described above.
struct q5_0_r4_block   { ggml_fp16_t d[4]; uint8_t qh[16]; uint8_t qs[64]; };
struct q6_0_r4_block   { ggml_fp16_t d[4]; uint8_t qh[32]; uint8_t qs[64]; };
// q2_k_r4: d[k] scale, d[k + 4] min factor of row k; the q2_K scale/min byte of 16-value
// sub-block j sits at scales[4 j + k]; levels as the iq2_k_r4 crumbs.
struct q2_k_r4_block   { ggml_fp16_t d[8]; uint8_t scales[64]; uint8_t qs[256]; };
// q3_k_r4: the 6-bit scales (stored + 32) in split_scale6 slots 8 ib + k (first 16 values of
// sub-block ib) and 8 ib + k + 4; low bits as crumbs, the third bit as iq3_k_r4's.
struct q3_k_r4_block   { ggml_fp16_t d[4]; uint8_t scales_h[16]; uint8_t scales_l[32]; uint8_t qh[128]; uint8_t qs[256]; };
// iq5_ks_r4: 4 f32 row scales lead the group; per block the iq5_ks scale byte of sub-block ib
// at scales[4 ib + k], levels and fifth bits as iq5_k_r4.
struct iq5_ks_r4_block { uint8_t scales[32]; uint8_t qs[512]; uint8_t qh[128]; };
static_assert(sizeof(q5_0_r4_block) == 4 * 22 && sizeof(q6_0_r4_block) == 4 * 26, "r layouts");
static_assert(sizeof(q2_k_r4_block) == 4 * 84 && sizeof(q3_k_r4_block) == 4 * 110, "r layouts");
static_assert(sizeof(iq5_ks_r4_block) == 4 * 168, "r layouts");

// The i-quant grid layouts: per 32-value sub-block ib and row k, the grid indices of row k
// follow each other (4 k ... for 8-value groups, 8 k ... for iq3_xxs's 4-value groups).
// iq2_xxs_r4 / iq3_xxs_r4 pack signs and scale of row k's sub-block in one u32 sas[4 ib + k]:
// byte i = (scrambled_sign(7 sign bits of group i) << 1) | bit i of the 4-bit scale.
struct iq2_xxs_r4_block { ggml_fp16_t d[4]; uint8_t sas[128]; uint8_t qs[128]; };
struct iq2_xs_r4_block  { ggml_fp16_t d[4]; uint16_t qs[128]; uint8_t scales[32]; };
struct iq2_s_r4_block   { ggml_fp16_t d[4]; uint8_t qs[128]; uint8_t qh[32]; uint8_t signs[128]; uint8_t scales[32]; };
struct iq3_xxs_r4_block { ggml_fp16_t d[4]; uint8_t sas[128]; uint8_t qs[256]; };
struct iq3_s_r4_block   { ggml_fp16_t d[4]; uint8_t qs[256]; uint8_t qh[32]; uint8_t signs[128]; uint8_t scales[16]; };
static_assert(sizeof(iq2_xxs_r4_block) == 4 * 66 && sizeof(iq2_xs_r4_block) == 4 * 74, "r layouts");
static_assert(sizeof(iq2_s_r4_block) == 4 * 82 && sizeof(iq3_xxs_r4_block) == 4 * 98, "r layouts");
static_assert(sizeof(iq3_s_r4_block) == 4 * 110, "r layouts");

// iq1_s_r4 / iq1_m_r4: not woven from iq1_s / iq1_m but quantized on their own (32-value blocks,
// one fp16 scale per row in front of the group: 4 x fp16, then the blocks).
//   iq1_s_r4 block: grid index low bytes qs[4 i + k] (group i of row k); qh[k]: high index bits
//     3 i .. 3 i + 2, the block scale in bits 12..14, the delta sign in bit 15.
//   iq1_m_r4 block: qs[8 h + k] and qs[8 h + 4 + k] the two groups of half h; qh[4 h + k] their
//     high bits (nibbles, bit 3 / 7 the delta signs); scales[k] the two 4-bit half scales.
struct iq1_s_r4_block { uint8_t qs[16]; uint16_t qh[4]; };
struct iq1_m_r4_block { uint8_t qs[16]; uint8_t qh[8]; uint8_t scales[4]; };
static_assert(sizeof(iq1_s_r4_block) == 24 && sizeof(iq1_m_r4_block) == 28, "r layouts");

// q8_k_r8 / q8_k_r16: per 256 values an fp16 scale per row, then 4-value runs of the R rows
// (row k's values 4 j .. 4 j + 3 at R * 4 j + 4 k); q8_k_r16 stores each int8 plus 128.
struct q8_k_r8_block { ggml_fp16_t d[8]; int8_t qs[8 * QK_K]; };
static_assert(sizeof(q8_k_r8_block) == 8 * 258, "r layouts");
struct q8_k_r16_block { ggml_fp16_t d[16]; uint8_t qs[16 * QK_K]; };
static_assert(sizeof(q8_k_r16_block) == 16 * 258, "r layouts");

// Layouts whose woven unit is not a whole 32 values of each row get one here, so that every entry
// of the list decodes chunk c of row k from one struct:
// q8_KV_r8: 8 f32 row scales lead the group, then per 16 values 4-value runs of the 8 rows
// (two runs of 128 bytes per 32 values).
struct q8_KV_r8_chunk { int8_t qs[256]; };
// bf16_r16: 16 rows woven two columns at a time, the pair (2 i, 2 i + 1) of row k at 32 i + 2 k
// (the operand of a bf16 pair dot product over 16 rows); 32 values of the 16 rows.
struct bf16_r16_chunk { ggml_bf16_t v[16 * 32]; };

// ---------------------------------------------------------------------------------------------
// Decoders: chunk c (32 values: sub-block c of a 256-value block, or the whole 32-value block) of
// row k of woven block b; row_d is row k's scale for the layouts with row scales.

// q4_0_r8 / mxfp4_r8 / q8_0_r8: four quarters of 32 bytes, row k's four bytes at 4 k; byte i of
// quarter l holds values 4 l + i and 16 + 4 l + i (nibbles; q8_0_r8: the second in the second 128).
KILN_HD void decode32_q4_0_r8(const q4_0_r8_block & b, int k, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    for (int l = 0; l < 4; ++l) {
        for (int i = 0; i < 4; ++i) {
            const uint8_t q = b.qs[32 * l + 4 * k + i];
            y[4 * l + i]      = d * (float) ((q & 0xF) - 8);
            y[4 * l + i + 16] = d * (float) ((q >> 4) - 8);
        }
    }
}

KILN_HD void decode32_mxfp4_r8(const mxfp4_r8_block & b, int k, int, float, float * y) {
    const float d = e8m0_to_fp32_half(b.e[k]);
    for (int l = 0; l < 4; ++l) {
        for (int i = 0; i < 4; ++i) {
            const uint8_t q = b.qs[32 * l + 4 * k + i];
            y[4 * l + i]      = d * (float) mxfp4_value(q & 0xF);
            y[4 * l + i + 16] = d * (float) mxfp4_value(q >> 4);
        }
    }
}

KILN_HD void decode32_q8_0_r8(const q8_0_r8_block & b, int k, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    for (int l = 0; l < 4; ++l) {
        for (int i = 0; i < 4; ++i) {
            y[4 * l + i]      = d * (float) b.qs[32 * l + 4 * k + i];
            y[4 * l + i + 16] = d * (float) b.qs[32 * l + 4 * k + i + 128];
        }
    }
}

KILN_HD void decode32_iq4_nl_r4(const iq4_nl_r4_block & b, int k, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    for (int p = 0; p < 32; ++p) y[p] = d * (float) iq4nl_value(r4_nibble(b.qs, k, p));
}

// q5_0_r4 / q6_0_r4: the reference writes d * q + m with m = -16 d (-32 d); both products are
// exact in float, so this equals the plain types' (q - 16) * d but for the sign of a zero (+0
// here, -0 there for a negative d).
KILN_HD void decode32_q5_0_r4(const q5_0_r4_block & b, int k, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]), m = -16 * d;
    for (int p = 0; p < 32; ++p) {
        const int h = (b.qh[4 * k + p % 4] >> q5_0_r4_hbit(p)) & 1;
        y[p] = d * (float) (r4_nibble(b.qs, k, p) | (h << 4)) + m;
    }
}

KILN_HD void decode32_q6_0_r4(const q6_0_r4_block & b, int k, int, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]), m = -32 * d;
    for (int p = 0; p < 32; ++p) {
        const int h = (b.qh[q6_0_r4_hoff(p) + 4 * k + p % 4] >> q6_0_r4_hshift(p)) & 3;
        y[p] = d * (float) (r4_nibble(b.qs, k, p) | (h << 4)) + m;
    }
}

KILN_HD void decode32_iq4_xs_r8(const iq4_xs_r8_block & b, int k, int c, float, float * y) {
    const float dl = kiln_fp16_to_f32(b.d[k]) * (float) (split_scale6(b.scales_l, b.scales_h, 8 * c + k) - 32);
    for (int l = 0; l < 4; ++l) {
        for (int i = 0; i < 4; ++i) {
            const uint8_t q = b.qs[128 * c + 4 * k + i + 32 * l];
            y[8 * l + i]     = dl * (float) iq4nl_value(q & 0xF);
            y[8 * l + i + 4] = dl * (float) iq4nl_value(q >> 4);
        }
    }
}

// q4_k_r4 / q5_k_r4: the 6-bit scale and min of slot 4 c + k, times the super-block's d / dmin.
template <typename Block>
KILN_HD void k_r4_scale_min(const Block & b, int k, int c, float & dl, float & ml) {
    const int is = 4 * c + k;
    const int h = b.scales_h[is % 16] >> 4 * (is / 16);
    dl = kiln_fp16_to_f32(b.d[k]) * (float) ((b.scales_l[is] & 0xF) | ((h & 3) << 4));
    ml = kiln_fp16_to_f32(b.d[k + 4]) * (float) ((b.scales_l[is] >> 4) | ((h & 0xC) << 2));
}

KILN_HD void decode32_q4_k_r4(const q4_k_r4_block & b, int k, int c, float, float * y) {
    float dl, ml;
    k_r4_scale_min(b, k, c, dl, ml);
    for (int p = 0; p < 32; ++p) y[p] = dl * (float) r4_nibble(b.qs + 64 * c, k, p) - ml;
}

KILN_HD void decode32_q5_k_r4(const q5_k_r4_block & b, int k, int c, float, float * y) {
    float dl, ml;
    k_r4_scale_min(b, k, c, dl, ml);
    for (int p = 0; p < 32; ++p) {
        const int hb = (b.qh[16 * c + 4 * k + p % 4] >> q5_k_r4_hbit(p)) & 1;
        y[p] = dl * (float) (r4_nibble(b.qs + 64 * c, k, p) | (hb << 4)) - ml;
    }
}

KILN_HD void decode32_q6_k_r4(const q6_k_r4_block & b, int k, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    const float dl1 = d * (float) b.scales[8 * c + k], dl2 = d * (float) b.scales[8 * c + k + 4];
    for (int p = 0; p < 32; ++p) {
        const int h = (b.qh[32 * c + q6_k_r4_hoff(p) + 4 * k + p % 4] >> q6_k_r4_hshift(p)) & 3;
        const int l = (r4_nibble(b.ql + 64 * c, k, p) | (h << 4)) - 32;
        y[p] = (p < 16 ? dl1 : dl2) * (float) l;
    }
}

KILN_HD void decode32_q2_k_r4(const q2_k_r4_block & b, int k, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]), m = kiln_fp16_to_f32(b.d[k + 4]);
    for (int half = 0; half < 2; ++half) {
        const uint8_t s = b.scales[8 * c + k + 4 * half];
        const float dl = d * (float) (s & 0xF), ml = m * (float) (s >> 4);
        for (int p = 16 * half; p < 16 * half + 16; ++p) y[p] = dl * (float) r4_crumb(b.qs + 32 * c, k, p) - ml;
    }
}

KILN_HD void decode32_q3_k_r4(const q3_k_r4_block & b, int k, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    const uint8_t * qh = b.qh + 16 * c + 4 * k;
    for (int half = 0; half < 2; ++half) {
        const float dl = d * (float) (split_scale6(b.scales_l, b.scales_h, 8 * c + k + 4 * half) - 32);
        for (int p = 16 * half; p < 16 * half + 16; ++p) {
            const int l = r4_crumb(b.qs + 32 * c, k, p) | (((qh[p % 4] >> (p / 4)) & 1) << 2);
            y[p] = dl * (float) (l - 4);
        }
    }
}

// The ik types decode as the CPU's common form does: (d * sub-block scale) * level.
KILN_HD void decode32_iq2_k_r4(const iq2_k_r4_block & b, int k, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    for (int half = 0; half < 2; ++half) {
        const int is = 8 * c + k + 4 * half;
        const float dl = d * (float) (((b.scales[is % 32] >> 4 * (is / 32)) & 0xF) - 8);
        const int shifted = ((b.extra[k + 4 * half] >> c) & 1) * 4;
        for (int p = 16 * half; p < 16 * half + 16; ++p) y[p] = dl * (float) iq2nl_value(shifted + r4_crumb(b.qs + 32 * c, k, p));
    }
}

KILN_HD void decode32_iq3_k_r4(const iq3_k_r4_block & b, int k, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    const uint8_t * qh = b.qh + 16 * c + 4 * k;
    for (int half = 0; half < 2; ++half) {
        const int is = 8 * c + k + 4 * half;
        const int m = 2 * ((b.scales_l[is % 32] >> 4 * (is / 32)) & 0xF) + 1;
        const float dl = d * (float) ((b.scales_h[is % 8] >> (is / 8)) & 1 ? -m : m);
        const int shifted = ((b.extra[k + 4 * half] >> c) & 1) * 8;
        for (int p = 16 * half; p < 16 * half + 16; ++p) {
            const int l = r4_crumb(b.qs + 32 * c, k, p) | (((qh[p % 4] >> (p / 4)) & 1) << 2);
            y[p] = dl * (float) iq3nl_value(shifted + l);
        }
    }
}

KILN_HD void decode32_iq4_k_r4(const iq4_k_r4_block & b, int k, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    for (int half = 0; half < 2; ++half) {
        const float dl = d * (float) (split_scale6(b.scales_l, b.scales_h, 8 * c + k + 4 * half) - 32);
        const int shifted = ((b.extra[k + 4 * half] >> c) & 1) * 16;
        for (int p = 16 * half; p < 16 * half + 16; ++p) y[p] = dl * (float) iq4k_value(shifted + r4_nibble(b.qs + 64 * c, k, p));
    }
}

KILN_HD void decode32_iq5_k_r4(const iq5_k_r4_block & b, int k, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    for (int half = 0; half < 2; ++half) {
        const float dl = d * (float) (split_scale6(b.scales_l, b.scales_h, 8 * c + k + 4 * half) - 32);
        const int shifted = ((b.extra[k + 4 * half] >> c) & 1) * 32;
        for (int p = 16 * half; p < 16 * half + 16; ++p) {
            const int h = (b.qh[16 * c + 4 * k + p % 4] >> iq5_k_r4_hbit(p)) & 1;
            y[p] = dl * (float) iq5nl_value(shifted + (r4_nibble(b.qs + 64 * c, k, p) | (h << 4)));
        }
    }
}

// iq4_ks_r4 / iq5_ks_r4: the iq4_ks / iq5_ks scale byte of sub-block c of row k at scales[4 c + k].
KILN_HD void decode32_iq4_ks_r4(const iq4_ks_r4_block & b, int k, int c, float row_d, float * y) {
    const uint8_t s = b.scales[4 * c + k];
    const float dl = row_d * (float) ((s & 254) - 127);
    const int shifted = (s & 1) * 16;
    for (int p = 0; p < 32; ++p) y[p] = dl * (float) iq4k_value(shifted + r4_nibble(b.qs + 64 * c, k, p));
}

KILN_HD void decode32_iq5_ks_r4(const iq5_ks_r4_block & b, int k, int c, float row_d, float * y) {
    const uint8_t s = b.scales[4 * c + k];
    const float dl = row_d * (float) ((s & 254) - 127);
    const int shifted = (s & 1) * 32;
    for (int p = 0; p < 32; ++p) {
        const int h = (b.qh[16 * c + 4 * k + p % 4] >> iq5_k_r4_hbit(p)) & 1;
        y[p] = dl * (float) iq5nl_value(shifted + (r4_nibble(b.qs + 64 * c, k, p) | (h << 4)));
    }
}

// The grid i-quants: y = dl * grid byte * sign, as the plain types (kiln_sign_of); the fp16 row
// scale carries the type's constant factor (1/8 for iq2, 1/4 for iq3_xxs) as the CPU applies it.
KILN_HD void decode32_iq2_xxs_r4(const iq2_xxs_r4_block & b, int k, int c, float, float * y) {
    const uint32_t sas = kiln_load_u32(b.sas + 4 * (4 * c + k));
    const float dl = 0.125f * kiln_fp16_to_f32(b.d[k]) * (float) (2 * r4_sas_scale(sas) + 1);
    for (int i = 0; i < 4; ++i) {
        const uint8_t signs = unscramble_signs((uint8_t) ((sas >> (8 * i + 1)) & 127));
        const uint64_t g = iq2xxs_grid_at(b.qs[16 * c + 4 * k + i]);
        for (int j = 0; j < 8; ++j) y[8 * i + j] = dl * (float) (int8_t) kiln_grid_byte(g, j) * kiln_sign_of(signs, j);
    }
}

KILN_HD void decode32_iq2_xs_r4(const iq2_xs_r4_block & b, int k, int c, float, float * y) {
    const float d = 0.125f * kiln_fp16_to_f32(b.d[k]);
    const uint8_t sc = b.scales[4 * c + k];
    const float dl1 = d * (float) (2 * (sc & 0xF) + 1), dl2 = d * (float) (2 * (sc >> 4) + 1);
    for (int i = 0; i < 4; ++i) {
        const uint16_t q = b.qs[16 * c + 4 * k + i];
        const uint8_t signs = unscramble_signs((uint8_t) (q >> 9));
        const uint64_t g = iq2xs_grid_at(q & 511);
        for (int j = 0; j < 8; ++j) y[8 * i + j] = (i < 2 ? dl1 : dl2) * (float) (int8_t) kiln_grid_byte(g, j) * kiln_sign_of(signs, j);
    }
}

KILN_HD void decode32_iq2_s_r4(const iq2_s_r4_block & b, int k, int c, float, float * y) {
    const float d = 0.125f * kiln_fp16_to_f32(b.d[k]);
    const uint8_t sc = b.scales[4 * c + k];
    const float dl1 = d * (float) (2 * (sc & 0xF) + 1), dl2 = d * (float) (2 * (sc >> 4) + 1);
    for (int i = 0; i < 4; ++i) {
        const int idx = b.qs[16 * c + 4 * k + i] | ((b.qh[4 * c + k] << (8 - 2 * i)) & 0x300);
        const uint32_t signs = b.signs[16 * c + 4 * k + i];
        const uint64_t g = iq2s_grid_at(idx);
        for (int j = 0; j < 8; ++j) y[8 * i + j] = (i < 2 ? dl1 : dl2) * (float) (int8_t) kiln_grid_byte(g, j) * kiln_sign_of(signs, j);
    }
}

KILN_HD void decode32_iq3_xxs_r4(const iq3_xxs_r4_block & b, int k, int c, float, float * y) {
    const uint32_t sas = kiln_load_u32(b.sas + 4 * (4 * c + k));
    const float dl = 0.25f * kiln_fp16_to_f32(b.d[k]) * (float) (2 * r4_sas_scale(sas) + 1);
    for (int i = 0; i < 8; ++i) {
        // 4-value groups: two per sign byte
        const uint32_t signs = unscramble_signs((uint8_t) ((sas >> (8 * (i / 2) + 1)) & 127)) >> 4 * (i % 2);
        const uint32_t g = iq3xxs_grid_at(b.qs[32 * c + 8 * k + i]);
        for (int j = 0; j < 4; ++j) y[4 * i + j] = dl * (float) (int8_t) kiln_grid_byte(g, j) * kiln_sign_of(signs, j);
    }
}

// iq3_s_r4: group g (4 values at 4 g) has its index byte at k + 8 (g % 4) + 4 (g / 4), its high
// bit at bit g of qh, the sign of value j at bit g of signs[16 c + 4 k + j].
KILN_HD void decode32_iq3_s_r4(const iq3_s_r4_block & b, int k, int c, float, float * y) {
    const int l = 4 * c + k;
    const float dl = kiln_fp16_to_f32(b.d[k]) * (float) (1 + 2 * ((b.scales[l % 16] >> 4 * (l / 16)) & 0xF));
    const uint8_t qh = b.qh[4 * c + k];
    for (int g = 0; g < 8; ++g) {
        const int idx = b.qs[32 * c + k + 8 * (g % 4) + 4 * (g / 4)] | (((qh >> g) & 1) << 8);
        const uint32_t grid = iq3s_grid_at(idx);
        for (int j = 0; j < 4; ++j) y[4 * g + j] = dl * (float) kiln_grid_byte(grid, j) * kiln_sign_of(b.signs[16 * c + 4 * k + j] >> g, 0);
    }
}

KILN_HD void decode32_iq1_s_r4(const iq1_s_r4_block & b, int k, int, float row_d, float * y) {
    const uint16_t h = b.qh[k];
    const float delta = h & 0x8000 ? -KILN_IQ1_DELTA : KILN_IQ1_DELTA;
    const float dl = row_d * (float) (2 * ((h >> 12) & 7) + 1);
    for (int i = 0; i < 4; ++i) kiln_decode_iq1_group(y + 8 * i, iq1s_grid_at(b.qs[4 * i + k] | ((h >> 3 * i) & 7) << 8), dl, delta);
}

KILN_HD void decode32_iq1_m_r4(const iq1_m_r4_block & b, int k, int, float row_d, float * y) {
    for (int h = 0; h < 2; ++h) {
        const float dl = row_d * (float) ((b.scales[k] >> 4 * h) & 0xF);
        const uint8_t qh = b.qh[4 * h + k];
        for (int half = 0; half < 2; ++half) {
            const int idx = b.qs[8 * h + 4 * half + k] | (((qh >> 4 * half) & 7) << 8);
            const float delta = (qh >> 4 * half) & 8 ? -KILN_IQ1_DELTA : KILN_IQ1_DELTA;
            kiln_decode_iq1_group(y + 16 * h + 8 * half, iq1s_grid_at(idx), dl, delta);
        }
    }
}

// iq2_bn_r4 (ik_llama.cpp's repack_iq2_bn): the four rows' f32 scales, then per 64 values one
// 64-byte block in which value 16 l + 4 m + i (l, m, i < 4) of row k is bits 2 m of byte
// 16 l + 4 k + i, as level + 1.
struct iq2_bn_r4_block { uint8_t qs[64]; };
static_assert(sizeof(iq2_bn_r4_block) == 64, "r layouts");

KILN_HD constexpr int iq2_bn_r4_byte(int k, int v) { return 16 * (v / 16) + 4 * k + v % 4; }
KILN_HD constexpr int iq2_bn_r4_shift(int v) { return 2 * ((v % 16) / 4); }

KILN_HD void decode32_iq2_bn_r4(const iq2_bn_r4_block & b, int k, int c, float row_d, float * y) {
    for (int j = 0; j < 32; ++j) {
        const int v = 32 * c + j;
        y[j] = row_d * (float) (((b.qs[iq2_bn_r4_byte(k, v)] >> iq2_bn_r4_shift(v)) & 3) - 1);
    }
}

// q8_k_r8 / q8_k_r16: value j of row k at R * 4 (j / 4) + 4 k + j % 4; the r16 form stores
// value + 128 as unsigned (the reference decodes it as d * u - 128 d).
KILN_HD void decode32_q8_k_r8(const q8_k_r8_block & b, int k, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    for (int j = 32 * c; j < 32 * c + 32; ++j) y[j - 32 * c] = d * (float) b.qs[8 * 4 * (j / 4) + 4 * k + j % 4];
}

KILN_HD void decode32_q8_k_r16(const q8_k_r16_block & b, int k, int c, float, float * y) {
    const float d = kiln_fp16_to_f32(b.d[k]);
    for (int j = 32 * c; j < 32 * c + 32; ++j) y[j - 32 * c] = d * (float) b.qs[16 * 4 * (j / 4) + 4 * k + j % 4] + (-128.f * d);
}

KILN_HD void decode32_q8_KV_r8(const q8_KV_r8_chunk & b, int k, int, float row_d, float * y) {
    for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 4; ++l) {
            for (int i = 0; i < 4; ++i) y[16 * h + 4 * l + i] = row_d * (float) b.qs[128 * h + 32 * l + 4 * k + i];
        }
    }
}

KILN_HD void decode32_bf16_r16(const bf16_r16_chunk & b, int k, int, float, float * y) {
    for (int i = 0; i < 16; ++i) {
        y[2 * i]     = kiln_bf16_to_f32(b.v[32 * i + 2 * k]);
        y[2 * i + 1] = kiln_bf16_to_f32(b.v[32 * i + 2 * k + 1]);
    }
}

// ---------------------------------------------------------------------------------------------
// The list: one entry per interleaved layout the kernels decode, X(type, woven block, R, values
// per row per block, row-scale bytes per row, decoder). All of Kiln's interleaved types are here
// (test-quants-blocks-interleaved checks that none is missing).

#define KILN_INTERLEAVED_TYPES(X)                                                    \
    X(GGML_TYPE_Q4_0_R8, q4_0_r8_block, 8, 32, 0, decode32_q4_0_r8)                   \
    X(GGML_TYPE_Q5_0_R4, q5_0_r4_block, 4, 32, 0, decode32_q5_0_r4)                   \
    X(GGML_TYPE_Q6_0_R4, q6_0_r4_block, 4, 32, 0, decode32_q6_0_r4)                   \
    X(GGML_TYPE_Q8_0_R8, q8_0_r8_block, 8, 32, 0, decode32_q8_0_r8)                   \
    X(GGML_TYPE_IQ4_NL_R4, iq4_nl_r4_block, 4, 32, 0, decode32_iq4_nl_r4)             \
    X(GGML_TYPE_MXFP4_R8, mxfp4_r8_block, 8, 32, 0, decode32_mxfp4_r8)                \
    X(GGML_TYPE_IQ4_XS_R8, iq4_xs_r8_block, 8, QK_K, 0, decode32_iq4_xs_r8)           \
    X(GGML_TYPE_Q2_K_R4, q2_k_r4_block, 4, QK_K, 0, decode32_q2_k_r4)                 \
    X(GGML_TYPE_Q3_K_R4, q3_k_r4_block, 4, QK_K, 0, decode32_q3_k_r4)                 \
    X(GGML_TYPE_Q4_K_R4, q4_k_r4_block, 4, QK_K, 0, decode32_q4_k_r4)                 \
    X(GGML_TYPE_Q5_K_R4, q5_k_r4_block, 4, QK_K, 0, decode32_q5_k_r4)                 \
    X(GGML_TYPE_Q6_K_R4, q6_k_r4_block, 4, QK_K, 0, decode32_q6_k_r4)                 \
    X(GGML_TYPE_IQ2_K_R4, iq2_k_r4_block, 4, QK_K, 0, decode32_iq2_k_r4)              \
    X(GGML_TYPE_IQ3_K_R4, iq3_k_r4_block, 4, QK_K, 0, decode32_iq3_k_r4)              \
    X(GGML_TYPE_IQ4_K_R4, iq4_k_r4_block, 4, QK_K, 0, decode32_iq4_k_r4)              \
    X(GGML_TYPE_IQ5_K_R4, iq5_k_r4_block, 4, QK_K, 0, decode32_iq5_k_r4)              \
    X(GGML_TYPE_IQ4_KS_R4, iq4_ks_r4_block, 4, QK_K, 4, decode32_iq4_ks_r4)           \
    X(GGML_TYPE_IQ5_KS_R4, iq5_ks_r4_block, 4, QK_K, 4, decode32_iq5_ks_r4)           \
    X(GGML_TYPE_IQ2_XXS_R4, iq2_xxs_r4_block, 4, QK_K, 0, decode32_iq2_xxs_r4)        \
    X(GGML_TYPE_IQ2_XS_R4, iq2_xs_r4_block, 4, QK_K, 0, decode32_iq2_xs_r4)           \
    X(GGML_TYPE_IQ2_S_R4, iq2_s_r4_block, 4, QK_K, 0, decode32_iq2_s_r4)              \
    X(GGML_TYPE_IQ3_XXS_R4, iq3_xxs_r4_block, 4, QK_K, 0, decode32_iq3_xxs_r4)        \
    X(GGML_TYPE_IQ3_S_R4, iq3_s_r4_block, 4, QK_K, 0, decode32_iq3_s_r4)              \
    X(GGML_TYPE_IQ1_S_R4, iq1_s_r4_block, 4, 32, 2, decode32_iq1_s_r4)                \
    X(GGML_TYPE_IQ1_M_R4, iq1_m_r4_block, 4, 32, 2, decode32_iq1_m_r4)                \
    X(GGML_TYPE_IQ2_BN_R4, iq2_bn_r4_block, 4, 64, 4, decode32_iq2_bn_r4)             \
    X(GGML_TYPE_Q8_K_R8, q8_k_r8_block, 8, QK_K, 0, decode32_q8_k_r8)                 \
    X(GGML_TYPE_Q8_K_R16, q8_k_r16_block, 16, QK_K, 0, decode32_q8_k_r16)             \
    X(GGML_TYPE_Q8_KV_R8, q8_KV_r8_chunk, 8, 32, 4, decode32_q8_KV_r8)                \
    X(GGML_TYPE_BF16_R16, bf16_r16_chunk, 16, 32, 0, decode32_bf16_r16)

namespace {
template <ggml_type T> struct kiln_interleaved_traits;
#define KILN_INTERLEAVED_TRAITS(type, block, R, qk, meta, fn)                                               \
    template <> struct kiln_interleaved_traits<type> {                                                      \
        using block_t = block;                                                                              \
        static constexpr int rows = (R);                                                                    \
        static constexpr int chunks = (qk) / 32;                                                            \
        static constexpr int row_meta = (meta);                                                             \
        /* chunk ch (32 values) of row k of the group at `group`: R row scales, then the woven blocks */   \
        static KILN_HD_MEMBER void decode_row(const char * group, int k, int64_t ch, float * y) {           \
            const block_t & b = *(const block_t *) (group + (R) * row_meta + (ch / chunks) * sizeof(block_t)); \
            fn(b, k, (int) (ch % chunks), kiln_row_scale(group + k * row_meta, row_meta), y);               \
        }                                                                                                   \
    };
KILN_INTERLEAVED_TYPES(KILN_INTERLEAVED_TRAITS)
#undef KILN_INTERLEAVED_TRAITS
} // namespace

// Rows per group of a type the kernels decode: R for the interleaved layouts, 1 for the plain
// types of KILN_BLOCK_TYPES, 0 for a type neither list holds.
KILN_HD int kiln_decoded_rows_per_group(int type) {
    switch (type) {
#define KILN_ROWS_CASE(T, B, R, QK, META, FN) case T: return R;
        KILN_INTERLEAVED_TYPES(KILN_ROWS_CASE)
#undef KILN_ROWS_CASE
#define KILN_PLAIN_CASE(T, B, QK, META, FN) case T: return 1;
        KILN_BLOCK_TYPES(KILN_PLAIN_CASE)
#undef KILN_PLAIN_CASE
        default: return 0;
    }
}

// Chunk ch (values 32 ch .. 32 ch + 31) of a weight row: `row` is where row i1 (its index along
// dimension 1) starts, row_bytes the row stride. A plain type decodes from `row`; an interleaved
// one from row i1 % R of the group that starts (i1 % R) rows earlier (the tensor's rows counted
// from a group boundary, R * row_bytes contiguous: the placement checks ensure it). matmul: the
// values a matrix product uses (the trellis types' inference-time factor, quants-blocks-kt.h).
// The one switch every decoding kernel and the host tests go through.
KILN_HD void kiln_decode_row_chunk(int type, const char * row, int64_t i1, int64_t row_bytes, int64_t ch, float * y, bool matmul) {
    switch (type) {
#define KILN_DECODE_PLAIN(T, B, QK, META, FN) \
    case T: kiln_block_traits<T>::decode_row(row, ch, y, matmul ? kiln_block_traits<T>::matmul_factor : 1.0f); break;
        KILN_BLOCK_TYPES(KILN_DECODE_PLAIN)
#undef KILN_DECODE_PLAIN
#define KILN_DECODE_WOVEN(T, B, R, QK, META, FN)                                                     \
    case T: {                                                                                         \
        const int k = (int) (i1 % (R));                                                               \
        kiln_interleaved_traits<T>::decode_row(row - k * row_bytes, k, ch, y);                        \
        break;                                                                                        \
    }
        KILN_INTERLEAVED_TYPES(KILN_DECODE_WOVEN)
#undef KILN_DECODE_WOVEN
        default: break;
    }
}
