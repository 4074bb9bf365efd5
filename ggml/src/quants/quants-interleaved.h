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

#include "cpu-traits.h"

#include <cstdint>
#include <cstring>
#include <vector>

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
static_assert(sizeof(iq2_k_r4_block) == 4 * 76 && sizeof(iq3_k_r4_block) == 4 * 110, "r layouts");
static_assert(sizeof(iq4_nl_r4_block) == 72 && sizeof(q4_0_r8_block) == 144 && sizeof(q8_0_r8_block) == 272, "r layouts");
static_assert(sizeof(mxfp4_r8_block) == 8 * sizeof(block_mxfp4), "r layouts");
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
static constexpr int q5_k_r4_hbit(int p) {
    constexpr uint8_t hbit[8] = { 0, 2, 1, 3, 4, 6, 5, 7 };
    return hbit[p / 4];
}
// q6_k_r4: the two high bits of position p are in qh[32 ib + q6_k_r4_hoff(p) + 4 k + p % 4] at q6_k_r4_hshift(p).
static inline int q6_k_r4_hoff(int p) { return p / 4 < 4 ? 0 : 16; }
static constexpr int q6_k_r4_hshift(int p) {
    constexpr uint8_t shift[8] = { 0, 4, 2, 6, 0, 4, 2, 6 };
    return shift[p / 4];
}

// 2-bit level of position p (0..31) of row k in a 32-byte iq2_k_r4 / iq3_k_r4 sub-block group:
// byte 4 k + p % 4 (+ 16 for the second half), bits 2 ((p / 4) % 4).
static inline int r4_crumb_byte(int k, int p) { return 4 * k + p % 4 + (p >= 16 ? 16 : 0); }
static inline int r4_crumb_shift(int p) { return 2 * ((p / 4) % 4); }
// iq3_k_r4: the third bit of position p is bit p / 4 of qh[16 ib + 4 k + p % 4].

// ---------------------------------------------------------------------------------------------
// The remaining layouts of the reference's table (its repack_* functions), field order as in
// its files.

// q5_0_r4 / q6_0_r4: 4-bit low parts as iq4_nl_r4 (r4_nibble); q5_0_r4 keeps the fifth bits of
// row k in qh[4 k + p % 4] (bit q5_0_r4_hbit(p)), q6_0_r4 the two top bits in
// qh[q6_0_r4_hoff(p) + 4 k + p % 4] at q6_0_r4_hshift(p).
struct q5_0_r4_block   { ggml_fp16_t d[4]; uint8_t qh[16]; uint8_t qs[64]; };
struct q6_0_r4_block   { ggml_fp16_t d[4]; uint8_t qh[32]; uint8_t qs[64]; };
static inline int q5_0_r4_hbit(int p) {
    static const uint8_t hbit[8] = { 0, 2, 4, 6, 1, 3, 5, 7 };
    return hbit[p / 4];
}
static inline int q6_0_r4_hoff(int p) { return p / 4 < 4 ? 0 : 16; }
static inline int q6_0_r4_hshift(int p) { return 2 * ((p / 4) % 4); }

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

// The 4-bit scale of an iq2_xxs_r4 / iq3_xxs_r4 sas word (bit 0 of each byte).
static inline int r4_sas_scale(uint32_t sas) {
    return (int) ((sas & 1) | ((sas >> 7) & 2) | ((sas >> 14) & 4) | ((sas >> 21) & 8));
}

// The 7 sign bits of an 8-value group (the eighth is their parity) stored so that t ^ (t << 1)
// gives all eight: t is the running xor of the bits (bit j = s_0 ^ ... ^ s_j).
static inline uint8_t scrambled_sign(uint8_t s) {
    uint8_t t = 0, run = 0;
    for (int j = 0; j < 7; ++j) {
        run ^= (s >> j) & 1;
        t |= (uint8_t) (run << j);
    }
    return t;
}
// The eight signs (bit j set: negative) of a scrambled 7-bit pattern.
static inline uint8_t unscramble_signs(uint8_t t) { return (uint8_t) (t ^ (t << 1)); }

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
// q8_k_r16: the same with 16 rows (runs of 64 bytes), each int8 stored plus 128.
struct q8_k_r16_block { ggml_fp16_t d[16]; uint8_t qs[16 * QK_K]; };
static_assert(sizeof(q8_k_r16_block) == 16 * 258, "r layouts");
// q8_KV_r8: 8 f32 row scales lead the group, then per 16 values 4-value runs of the 8 rows.

// ---------------------------------------------------------------------------------------------
// Registration helpers shared by the interleaved files.

// The group of R rows starting at w: the k-th row_size bytes of the woven group are at
// w + k * w_stride (contiguous when w_stride == row_size, as in tensors; gathered otherwise).
inline const char * group_bytes(const void * w, size_t w_stride, size_t row_size, int R, std::vector<char> & buf) {
    if (w_stride == row_size) return (const char *) w;
    buf.resize((size_t) R * row_size);
    for (int k = 0; k < R; ++k) std::memcpy(buf.data() + k * row_size, (const char *) w + k * w_stride, row_size);
    return buf.data();
}

// The activation type a layout's products take: its plain twin's (q8_0 for 32-value blocks, q8_K
// for 256-value ones, bf16 for bf16), so that a repacked model sees the activations rounded as
// the original does and gives its logits. The q8 twins have no kernel of their own: q8_k_r8 /
// q8_k_r16 take q8_K (the int8 x int8 product their SIMD kernels make), q8_KV_r8 f32.
// Per interleaved type T (not its twin): iq1_s_r4 / iq1_m_r4 have 32-value blocks over twins of
// 256, so their rows need not be whole q8_K blocks.
inline ggml_type decoded_gemm_activation_type(ggml_type type) {
    const ggml_type base = ggml_get_type_traits(type)->interleaved_base;
    if (base == GGML_TYPE_BF16) return GGML_TYPE_BF16;
    if (base == GGML_TYPE_Q8_KV) return GGML_TYPE_F32;
    return ggml_blck_size(base) == QK_K && ggml_blck_size(type) % QK_K == 0 ? GGML_TYPE_Q8_K : GGML_TYPE_Q8_0;
}

// The R plain-twin rows of one group (quants-interleaved-unweave.cpp): false for layouts whose
// weaver is not a bit permutation of the twin's rows.
bool ggml_interleaved_unweave(ggml_type type, const void * group, void * rows, int64_t n_per_row);

// Gemm of an interleaved layout until it has kernels of its own. Groups are turned back into the
// twin's rows and run through the twin's best kernel, so the products are exactly the original
// model's; layouts that cannot be unwoven (scrambled signs, re-encoded scales) are decoded to
// floats together with their activations (the twin's rounding of them, float summation order).
template <ggml_type T>
void r_gemm_decoded(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                    size_t dst_stride, int nr, int nc) {
    const ggml_type_traits * tt = ggml_get_type_traits(T);
    const ggml_type base = tt->interleaved_base;
    const ggml_type vdt = decoded_gemm_activation_type(T);
    const int R = tt->nrows_interleaved;
    GGML_ASSERT(nr % R == 0);
    const size_t row_size = ggml_row_size(T, n);
    const ggml_gemm_t base_gemm =
        base != T && ggml_cpu_get_type_traits(base)->vec_dot_type == vdt ? ggml_cpu_gemm(base) : nullptr;
    if (base_gemm) {
        thread_local std::vector<char> plain, gather_rows;
        const size_t base_row = ggml_row_size(base, n);
        plain.resize((size_t) nr * base_row);
        bool ok = true;
        for (int r0 = 0; r0 < nr && ok; r0 += R) {
            const char * group = group_bytes((const char *) w + r0 * w_stride, w_stride, row_size, R, gather_rows);
            ok = ggml_interleaved_unweave(T, group, plain.data() + r0 * base_row, n);
        }
        if (ok) {
            base_gemm(n, plain.data(), base_row, x, x_stride, dst, dst_stride, nr, nc);
            return;
        }
    }
    thread_local std::vector<float> buf, act;
    thread_local std::vector<char> gather;
    buf.resize((size_t) R * n);
    act.resize((size_t) nc * n);
    for (int c = 0; c < nc; ++c) {
        const char * xc = (const char *) x + c * x_stride;
        if (vdt == GGML_TYPE_F32) std::memcpy(act.data() + (size_t) c * n, xc, n * sizeof(float));
        else ggml_get_type_traits(vdt)->to_float(xc, act.data() + (size_t) c * n, n);
    }
    for (int r0 = 0; r0 < nr; r0 += R) {
        tt->to_float(group_bytes((const char *) w + r0 * w_stride, w_stride, row_size, R, gather), buf.data(), R * n);
        for (int k = 0; k < R; ++k) {
            const float * wr = buf.data() + (size_t) k * n;
            for (int c = 0; c < nc; ++c) {
                const float * a = act.data() + (size_t) c * n;
                float s = 0;
                for (int64_t i = 0; i < n; ++i) s += wr[i] * a[i];
                dst[c * dst_stride + r0 + k] = s;
            }
        }
    }
}

template <ggml_type T>
void register_float_path(ggml_to_float_t to_float) {
    const ggml_type_traits * tt = ggml_get_type_traits(T);
    ggml_type_traits_mut(T)->to_float = to_float;
    ggml_cpu_register_gemm(T, GGML_CPU_ISA_SCALAR, decoded_gemm_activation_type(T), r_gemm_decoded<T>);
    ggml_cpu_type_traits_mut(T)->rows_per_call = tt->nrows_interleaved;
}

// rows[k]: row k of the twin type (its per-row metadata first); group: the woven output
// (zeroed by the caller). The same function serves quantizing and repacking (ggml_weave_t).
using weave_fn = ggml_weave_t;

template <ggml_type T, weave_fn Weave>
size_t quantize_woven(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    const ggml_type_traits * tt = ggml_get_type_traits(T);
    const ggml_type base = tt->interleaved_base;
    const int R = tt->nrows_interleaved;
    if (nrows % R != 0 || n_per_row % ggml_blck_size(base) != 0 || n_per_row % tt->blck_size != 0) return 0;
    const size_t base_row = ggml_row_size(base, n_per_row), row = ggml_row_size(T, n_per_row);
    std::vector<char> tmp(R * base_row);
    std::vector<const char *> rows(R);
    for (int k = 0; k < R; ++k) rows[k] = tmp.data() + k * base_row;
    for (int64_t r = 0; r < nrows; r += R) {
        if (ggml_quantize_chunk(base, src + r * n_per_row, tmp.data(), 0, R, n_per_row, imatrix) == 0) return 0;
        char * group = (char *) dst + r * row;
        std::memset(group, 0, R * row);
        Weave(rows.data(), n_per_row, group);
    }
    return nrows * row;
}

template <ggml_type T, weave_fn Weave>
void register_weave() {
    ggml_type_traits_mut(T)->quantize = quantize_woven<T, Weave>;
    ggml_type_traits_mut(T)->weave = Weave;
}

