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

// The woven block structs and the index arithmetic of the weaves (r4_nibble, split_scale6, ...)
// are in quants-blocks-interleaved.h (through quants-blocks.h), shared with the CUDA kernels.

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

