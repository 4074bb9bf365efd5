// The ik_llama.cpp trellis types iq1_kt .. iq4_kt as the CPU and the CUDA kernels share them:
// block layouts and the 32-value chunk decoders. Included by quants-blocks.h (KILN_HD, KILN_VALUE,
// the iq4_k grid). The CPU decodes these types through quants-kt.cpp's integer form (the gemm's);
// tests/test-quants-blocks.cpp checks that both give the same floats, bit for bit.
//
// Every value is generated from a seed by an integer hash: seed * K^(m+1) mod 2^32, masked to
// four 6-bit bytes whose sum minus 126 is the value (an approximately gaussian integer in
// [-126, 126]); value = (row_d * scale) * v, row_d the f32 each row starts with. Integer
// arithmetic throughout, so the device computes it exactly as the host does.
//
// The reference scales iq2_kt and iq3_kt products (not their dequantized values) by 1.05 and 1.01
// at inference time: kiln_matmul_row_factor gives the factor the matrix kernels apply to row_d.
#pragma once

// Row: f32 d. A 15/16-bit seed s gives a run of values.
struct block_iq1_kt {
    uint8_t sh[8];    // per 32 values: low nibble iq4_k-grid scale index, high nibble seed bit 12 of its 4 runs
    uint8_t ql[32];   // seed bits 0..7 of each run of 8 values
    uint8_t qh[16];   // seed bits 8..11: low nibble runs 0..15, high nibble runs 16..31
};
static_assert(sizeof(block_iq1_kt) == 56, "iq1_kt block size");

struct block_iq2_kt {
    uint8_t scales[4];   // per 32 values: iq4_k-grid scale index (low nibbles blocks 0-3, high 4-7)
    uint8_t ql[64];      // 32 little-endian 16-bit seeds, one per 8 values
};
static_assert(sizeof(block_iq2_kt) == 68, "iq2_kt block size");

struct block_iq3_kt {
    uint8_t scales[4];   // per 32 values: unsigned 4-bit scale (low nibbles blocks 0-3, high 4-7)
    uint8_t ql[64];      // 32 16-bit seeds (magnitudes |v|)
    uint8_t qh[32];      // bit b of qh[p]: value p of 32-block b is negative
};
static_assert(sizeof(block_iq3_kt) == 100, "iq3_kt block size");

struct block_iq4_kt {
    uint8_t shb[32];   // 8 u32: bit 0 seed offset, bits 1-7 scale + 64, bits 8+3g.. seed bits 12-14 of run g
    uint8_t ql[64];    // seed bits 0..7 of each run of 4 values
    uint8_t qh[32];    // seed bits 8..11: low nibble runs 0..31, high nibble runs 32..63
};
static_assert(sizeof(block_iq4_kt) == 128, "iq4_kt block size");

#define KILN_TRELLIS_MUL 0xCBAC1FEDu
// Seeds are stored without this offset; iq4_kt's second offset selects the upper half of the
// 16-bit seed space.
#define KILN_TRELLIS_SEED_OFFSET 4096u
#define KILN_TRELLIS_SEED_OFFSET_IQ4B (4096u + 32768u)

// The next value of a run: x holds seed * K^m and becomes seed * K^(m+1).
KILN_HD int kiln_trellis_next(uint32_t & x) {
    x *= KILN_TRELLIS_MUL;
    const uint32_t b = x & 0x3f3f3f3fu;
    return (int) (b & 0xFF) + (int) ((b >> 8) & 0xFF) + (int) ((b >> 16) & 0xFF) + (int) (b >> 24) - 126;
}

// y[m] = dl * v_m for the n values (4 or 8) of a seed.
KILN_HD void kiln_trellis_run(uint32_t seed, int n, float dl, float * y) {
    uint32_t x = seed;
    for (int m = 0; m < n; ++m) y[m] = dl * (float) kiln_trellis_next(x);
}

KILN_HD uint32_t kiln_load_u16(const uint8_t * p) { return (uint32_t) p[0] | (uint32_t) p[1] << 8; }

// iq1_kt: 4 runs of 8 per 32 values; 13-bit seeds (ql, a nibble of qh, a bit of sh's high nibble).
KILN_HD void decode32_iq1_kt(const block_iq1_kt & b, int c, float row_d, float * y) {
    const float dl = row_d * (float) iq4k_value(b.sh[c] & 0xF);
    for (int g = 0; g < 4; ++g) {
        const int run = 4 * c + g;
        const uint32_t seed = b.ql[run] | (((uint32_t) (b.qh[run % 16] >> 4 * (run / 16)) & 0xF) << 8) |
                              (((uint32_t) (b.sh[c] >> (4 + g)) & 1) << 12);
        kiln_trellis_run(seed + KILN_TRELLIS_SEED_OFFSET, 8, dl, y + 8 * g);
    }
}

// iq2_kt: 4 runs of 8 per 32 values, 16-bit seeds; scale from the iq4_k grid.
KILN_HD void decode32_iq2_kt(const block_iq2_kt & b, int c, float row_d, float * y) {
    const float dl = row_d * (float) iq4k_value((b.scales[c % 4] >> 4 * (c / 4)) & 0xF);
    for (int j = 0; j < 4; ++j) kiln_trellis_run(kiln_load_u16(b.ql + 2 * (4 * c + j)) + KILN_TRELLIS_SEED_OFFSET, 8, dl, y + 8 * j);
}

// iq3_kt: as iq2_kt with a plain 4-bit scale, the runs giving magnitudes and qh the signs.
KILN_HD void decode32_iq3_kt(const block_iq3_kt & b, int c, float row_d, float * y) {
    const float dl = row_d * (float) ((b.scales[c % 4] >> 4 * (c / 4)) & 0xF);
    for (int j = 0; j < 4; ++j) {
        uint32_t x = kiln_load_u16(b.ql + 2 * (4 * c + j)) + KILN_TRELLIS_SEED_OFFSET;
        for (int m = 0; m < 8; ++m) {
            const int v = kiln_trellis_next(x);
            const float a = dl * (float) (v < 0 ? -v : v);
            // the sign flips the scaled magnitude, as the reference does: a zero with its sign bit
            // set decodes to -0 (the CPU's integer form, shared with its gemm, cannot say -0)
            y[8 * j + m] = (b.qh[8 * j + m] >> c) & 1 ? -a : a;
        }
    }
}

// iq4_kt: 8 runs of 4 per 32 values; 15-bit seeds (ql, a nibble of qh, 3 bits of the block word),
// one of two seed offsets and a 7-bit scale per 32.
KILN_HD void decode32_iq4_kt(const block_iq4_kt & b, int c, float row_d, float * y) {
    const uint32_t shb = kiln_load_u32(b.shb + 4 * c);
    const float dl = row_d * (float) ((int) ((shb & 0xFF) >> 1) - 64);
    const uint32_t offset = shb & 1 ? KILN_TRELLIS_SEED_OFFSET_IQ4B : KILN_TRELLIS_SEED_OFFSET;
    for (int g = 0; g < 8; ++g) {
        const int run = 8 * c + g;
        const uint32_t seed = b.ql[run] | (((uint32_t) (b.qh[run % 32] >> 4 * (run / 32)) & 0xF) << 8) | (((shb >> (8 + 3 * g)) & 7) << 12);
        kiln_trellis_run(seed + offset, 4, dl, y + 4 * g);
    }
}

// The factor the reference's matrix products apply to a row's scale: iq2_kt 1.05, iq3_kt 1.01,
// 1 for every other type (a type's dequantized values never carry it).
static constexpr float kiln_matmul_row_factor(ggml_type t) {
    return t == GGML_TYPE_IQ2_KT ? 1.05f : t == GGML_TYPE_IQ3_KT ? 1.01f : 1.0f;
}
