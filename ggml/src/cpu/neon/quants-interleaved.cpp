// NEON gemm kernels of the row-interleaved layouts with integer activations, at the dotprod level
// (SDOT by lane) and the i8mm level (column pairs through SMMLA; the kernels themselves are in
// quants-interleaved-kernels.inc, compiled once per level). Plain NEON keeps the scalar path, which
// unweaves the group and runs the twin type's NEON kernel, or decodes it. q4_0_r8 / q8_0_r8 /
// iq4_nl_r4 / q5_0_r4 / q6_0_r4 against q8_0; iq4_xs_r8 (8 rows), q2_k_r4 .. q6_k_r4, iq2_k_r4 ..
// iq5_k_r4, iq4_ks_r4, iq5_ks_r4 (4 rows) against q8_K. (The float-activated layouts q8_k_r8,
// q8_KV_r8 and bf16_r16 are in quants-interleaved-float.cpp.)
//
// Layouts (quants-interleaved.h): the rows' fp16 scales first, then the levels woven so that one
// 16-byte load (after nibble extraction) is "4 consecutive values of rows 0-3" (or 4-7): a run.
// SDOT by lane with the 4 activation values of the run (lane j % 4 of the activation's 16-byte
// half) adds one int32 per row, so the rows of a group sit in one or two accumulators, need no
// horizontal sums, and the weights are read once per tile of columns.
//  - q4_0_r8 / q8_0_r8: per quarter l of 16 values, rows 0-3 then 4-7 (q4_0_r8: low nibbles
//    values 4 l .., high nibbles 16 + 4 l ..);
//  - iq4_xs_r8: per 32-value sub-block ib, 128 bytes; quarter l (32 bytes) holds values 8 l ..
//    in the low nibbles and 8 l + 4 .. in the high ones (iq4_nl grid by table lookup); 6-bit
//    sub-block scales in split arrays, slot 8 ib + row;
//  - q4_k_r4: per sub-block 64 bytes, runs 0/2, 4/6, 1/3, 5/7 (low/high nibbles) of the 16-byte
//    quarters (r4_nibble_byte); 6-bit scales and mins, slot 4 ib + row; the mins multiply q8_K's
//    per-16 sums; q5_k_r4 adds 16 bytes of fifth bits per sub-block, one bit per run; q6_k_r4
//    two high bits per value in 32 bytes per sub-block and an int8 scale per 16 values; iq4_k_r4
//    / iq5_k_r4 a 6-bit scale per 16 values and a grid (plain or shifted) per row and 16 values;
//  - q2_k_r4: 2-bit crumbs, 32 bytes per sub-block, a scale and a min nibble per 16 values;
//    q3_k_r4 the same crumbs, 16 bytes of third bits and a 6-bit scale per 16 values;
//  - iq2_k_r4 / iq3_k_r4: q2_k_r4's crumbs (+ q3_k_r4's third bits), signed 4-bit scales per 16
//    values, the iq2_k / iq3_k grid (plain or shifted) per row and 16 values; iq4_ks_r4 /
//    iq5_ks_r4: iq4_k_r4's / iq5_k_r4's levels, one scale byte per row and 32 values (its bit 0
//    the shifted grid), the rows' f32 scales in front of the group;
//  - iq4_nl_r4 / q5_0_r4 / q6_0_r4: the same nibble group per 32-value block (+ 16 / 32 bytes of
//    high bits).
#include "neon/register.h"
#include "neon/simd.h"
#include "cpu-traits.h"
#include "quants/quants-interleaved.h"
#include "quants/quants-legacy.h"

namespace {

KILN_NEON_DOTPROD_BEGIN
namespace sdot {
struct col_pairs {   // SDOT only: the SMMLA helpers are never instantiated
    static constexpr bool on = false;
    template <int V> static void zip_runs(const int8x16_t (&w)[8][V], int8x16_t (&z)[4][V][2]);
    template <int V>
    static void pair_sums(const int8x16_t (&z)[4][V][2], const int8_t * x0, const int8_t * x1, int o0, int o1,
                          int32x4_t (&s0)[V], int32x4_t (&s1)[V]);
};
#include "neon/quants-interleaved-kernels.inc"
} // namespace sdot
KILN_NEON_DOTPROD_END

KILN_NEON_I8MM_BEGIN
namespace mm {
// SMMLA multiplies a 2 x 8 int8 matrix by the transpose of another into a 2 x 2 int32 block. Runs j
// and j + 1 of 4 rows (values 4 j .. 4 j + 7) zipped by 32-bit lanes are rows 0-1 and rows 2-3 over
// 8 values; 8 values of two activation columns side by side are the other operand. One SMMLA then
// does the work of four SDOTs by lane (2 rows x 2 columns x 8 values), and the zips are made once
// per block for every column pair.
struct col_pairs {
    static constexpr bool on = true;
    // z[o][v]: octet o (values 8 o .. 8 o + 7) of row vector v: rows 0-1, rows 2-3
    template <int V> static void zip_runs(const int8x16_t (&w)[8][V], int8x16_t (&z)[4][V][2]) {
        for (int o = 0; o < 4; ++o) {
            for (int v = 0; v < V; ++v) {
                const int32x4_t a = vreinterpretq_s32_s8(w[2 * o][v]), b = vreinterpretq_s32_s8(w[2 * o + 1][v]);
                z[o][v][0] = vreinterpretq_s8_s32(vzip1q_s32(a, b));
                z[o][v][1] = vreinterpretq_s8_s32(vzip2q_s32(a, b));
            }
        }
    }
    // octets o0 .. o1 - 1 (an even count) against columns x0 and x1 (pointers at value 0 of the
    // 32): one int32 per row of each row vector, for each column
    template <int V>
    static void pair_sums(const int8x16_t (&z)[4][V][2], const int8_t * x0, const int8_t * x1, int o0, int o1,
                          int32x4_t (&s0)[V], int32x4_t (&s1)[V]) {
        int32x4_t s01[V], s23[V];   // (row, column): 00 01 10 11 and 20 21 30 31 of row vector v
        for (int v = 0; v < V; ++v) s01[v] = s23[v] = vdupq_n_s32(0);
        for (int o = o0; o < o1; o += 2) {   // 16 values of each column: two octets of both
            const int64x2_t a = vreinterpretq_s64_s8(vld1q_s8(x0 + 8 * o)), b = vreinterpretq_s64_s8(vld1q_s8(x1 + 8 * o));
            const int8x16_t lo = vreinterpretq_s8_s64(vzip1q_s64(a, b)), hi = vreinterpretq_s8_s64(vzip2q_s64(a, b));
            for (int v = 0; v < V; ++v) {
                s01[v] = vmmlaq_s32(vmmlaq_s32(s01[v], z[o][v][0], lo), z[o + 1][v][0], hi);
                s23[v] = vmmlaq_s32(vmmlaq_s32(s23[v], z[o][v][1], lo), z[o + 1][v][1], hi);
            }
        }
        for (int v = 0; v < V; ++v) {
            s0[v] = vuzp1q_s32(s01[v], s23[v]);
            s1[v] = vuzp2q_s32(s01[v], s23[v]);
        }
    }
};
#include "neon/quants-interleaved-kernels.inc"
} // namespace mm
KILN_NEON_I8MM_END

template <typename K>
__attribute__((target(KILN_NEON_DOTPROD_TARGET))) void gemm_dotprod(int64_t n, const void * w, size_t ws, const void * x,
                                                                     size_t xs, float * dst, size_t ds, int nr, int nc) {
    sdot::gemm<K>(n, w, ws, x, xs, dst, ds, nr, nc);
}

template <typename K>
__attribute__((target(KILN_NEON_I8MM_TARGET))) void gemm_i8mm(int64_t n, const void * w, size_t ws, const void * x,
                                                              size_t xs, float * dst, size_t ds, int nr, int nc) {
    mm::gemm<K>(n, w, ws, x, xs, dst, ds, nr, nc);
}

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp): every kernel at the dotprod level (SDOT by
// lane) and at the i8mm level (column pairs through SMMLA).
void ggml_cpu_register_interleaved_neon() {
    if (ggml_cpu_isa_runs_here(GGML_CPU_ISA_NEON_DOTPROD)) {
        sdot::each_kernel([](ggml_type type, ggml_type vec_dot_type, auto kernel) {
            ggml_cpu_register_gemm(type, GGML_CPU_ISA_NEON_DOTPROD, vec_dot_type, gemm_dotprod<typename decltype(kernel)::type>);
        });
    }
    if (ggml_cpu_isa_runs_here(GGML_CPU_ISA_NEON_I8MM)) {
        mm::each_kernel([](ggml_type type, ggml_type vec_dot_type, auto kernel) {
            ggml_cpu_register_gemm(type, GGML_CPU_ISA_NEON_I8MM, vec_dot_type, gemm_i8mm<typename decltype(kernel)::type>);
        });
    }
}
