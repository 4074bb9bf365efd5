// Row-interleaved layouts of ik_llama.cpp (_r4 / _r8 / _r16): the blocks of R consecutive rows
// of a plain "base" type woven together so that one vector load holds the same block position of
// several rows. Shared by the decoders (quants-interleaved.cpp) and the weavers that build these
// layouts from the base type (quants-interleaved-weave.cpp).
//
// Layout facts (the reference's index arithmetic), per group of R rows and per block position:
//   - fp16 scales first, one per row (k = row in the group), then for the k-quants the mins;
//   - 6-bit sub-block scales split into a low-nibble array and a high-2-bit array, indexed by a
//     slot that mixes the sub-block and the row (split_scale6);
//   - 4-bit levels in 64-byte groups of 32 positions x 4 rows (r4_nibble).
#pragma once

#include "quants-ik.h"
#include "quants-k.h"

#include <cstdint>

struct iq4_nl_r4_block { ggml_fp16_t d[4]; uint8_t qs[64]; };
struct q4_0_r8_block   { ggml_fp16_t d[8]; uint8_t qs[128]; };
struct q8_0_r8_block   { ggml_fp16_t d[8]; int8_t qs[256]; };
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
static_assert(sizeof(iq2_k_r4_block) == 4 * 76 && sizeof(iq3_k_r4_block) == 4 * 110, "r layouts");
static_assert(sizeof(iq4_nl_r4_block) == 72 && sizeof(q4_0_r8_block) == 144 && sizeof(q8_0_r8_block) == 272, "r layouts");
static_assert(sizeof(iq5_k_r4_block) == 704 && sizeof(iq4_xs_r8_block) == 1088, "r layouts");
static_assert(sizeof(q4_k_r4_block) == 576 && sizeof(q5_k_r4_block) == 704 && sizeof(q6_k_r4_block) == 840, "r layouts");

// Byte of position p (0..31) of row k in a 64-byte 4-row nibble group, and whether the level is
// its high nibble: the eight 4-position quarters sit at offsets 0/32/0/32/16/48/16/48, low
// nibbles for quarters 0, 1, 4, 5.
static inline int r4_nibble_byte(int k, int p) {
    static const uint8_t base[8] = { 0, 32, 0, 32, 16, 48, 16, 48 };
    return base[p / 4] + 4 * k + (p % 4);
}
static inline bool r4_nibble_high(int p) { return (p / 4) % 4 >= 2; }

static inline int r4_nibble(const uint8_t * q, int k, int p) {
    const uint8_t b = q[r4_nibble_byte(k, p)];
    return r4_nibble_high(p) ? b >> 4 : b & 0xF;
}
// Inverse of r4_nibble on a zeroed group: store level v (0..15).
static inline void r4_put_nibble(uint8_t * q, int k, int p, int v) {
    q[r4_nibble_byte(k, p)] |= (uint8_t) (r4_nibble_high(p) ? v << 4 : v);
}

// 6-bit scale of slot `is` (0..63) in split scale arrays (low nibbles in sl[32], high 2 bits in sh[16]).
static inline int split_scale6(const uint8_t * sl, const uint8_t * sh, int is) {
    return ((sl[is % 32] >> 4 * (is / 32)) & 0xF) | (((sh[is % 16] >> 2 * (is / 16)) & 3) << 4);
}
static inline void put_split_scale6(uint8_t * sl, uint8_t * sh, int is, int v) {
    sl[is % 32] |= (uint8_t) ((v & 0xF) << 4 * (is / 32));
    sh[is % 16] |= (uint8_t) (((v >> 4) & 3) << 2 * (is / 16));
}

// Bit of the fifth (iq5_k_r4) level bit of position p in its qh byte: the reference orders the
// quarters i, i+8, i+16, i+24, i+4, i+12, i+20, i+28.
static inline int iq5_k_r4_hbit(int p) {
    static const uint8_t hbit[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };
    return hbit[p / 4];
}
// q5_k_r4 orders them i, i+8, i+4, i+12, i+16, i+24, i+20, i+28.
static inline int q5_k_r4_hbit(int p) {
    static const uint8_t hbit[8] = { 0, 2, 1, 3, 4, 6, 5, 7 };
    return hbit[p / 4];
}
// q6_k_r4: the two high bits of position p are in qh[32 ib + q6_k_r4_hoff(p) + 4 k + p % 4] at q6_k_r4_hshift(p).
static inline int q6_k_r4_hoff(int p) { return p / 4 < 4 ? 0 : 16; }
static inline int q6_k_r4_hshift(int p) {
    static const uint8_t shift[8] = { 0, 4, 2, 6, 0, 4, 2, 6 };
    return shift[p / 4];
}

// 2-bit level of position p (0..31) of row k in a 32-byte iq2_k_r4 / iq3_k_r4 sub-block group:
// byte 4 k + p % 4 (+ 16 for the second half), bits 2 ((p / 4) % 4).
static inline int r4_crumb_byte(int k, int p) { return 4 * k + p % 4 + (p >= 16 ? 16 : 0); }
static inline int r4_crumb_shift(int p) { return 2 * ((p / 4) % 4); }
// iq3_k_r4: the third bit of position p is bit p / 4 of qh[16 ib + 4 k + p % 4].
