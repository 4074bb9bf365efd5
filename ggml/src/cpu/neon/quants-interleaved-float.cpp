// NEON gemm kernels of the row-interleaved layouts whose products take float activations:
// q8_KV_r8 against f32 (its activation type, decoded_gemm_activation_type: the plain q8_KV twin
// has no product of its own to match) and bf16_r16 against bf16. q8_k_r8's products take q8_K
// activations (the scalar and x86 kernels read its groups against q8_K rows), so its f32 form
// here is not registered: it would give the type a second activation type; it runs the scalar
// kernel until it has a q8_K form. Plain Advanced
// SIMD at every level; bf16_r16 in a BFDOT form at the dotprod and i8mm levels where the CPU has
// FEAT_BF16 (HWCAP2_BF16).
//
// Layouts (quants-interleaved.h, quants-interleaved.cpp):
//  - q8_k_r8: per 256 values the 8 rows' fp16 scales, then 4-value runs of the 8 rows (row k's
//    values 4 j .. 4 j + 3 at 32 j + 4 k); q8_KV_r8: the 8 rows' f32 scales lead the group, then
//    the same runs per 16 values. A 16-byte half of a run (rows 0-3 or 4-7) is transposed by one
//    table lookup to "value i of 4 rows", widened to floats, scaled by the rows' scales and
//    multiplied by lane i of the activations: the rows of a group sit in two accumulators per
//    column and need no horizontal sums;
//  - bf16_r16: per column pair (2 i, 2 i + 1) the 16 rows' pairs side by side, 8 bf16 values =
//    one pair of 4 rows. Shifting each 32-bit lane left by 16 gives the even column of the 4 rows
//    as floats, masking the low half the odd one; BFDOT takes the pairs as they are.
#include "neon/register.h"
#include "neon/simd.h"
#include "cpu-traits.h"
#include "ggml-cpu.h"
#include "quants/quants-interleaved.h"

namespace {

// The 8-row int8 run layouts: block, values per block, header bytes in front of the group, and
// the rows' scales of a block (rows 0-3, rows 4-7).
struct q8_k_r8_layout {
    struct block { ggml_fp16_t d[8]; int8_t qs[8 * QK_K]; };
    static constexpr int QK = QK_K, header = 0;
    static void row_scales(const block & b, const float *, float32x4_t & d03, float32x4_t & d47) {
        d03 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(b.d)));
        d47 = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(b.d + 4)));
    }
};
struct q8_KV_r8_layout {
    struct block { int8_t qs[128]; };
    static constexpr int QK = 16, header = 8 * sizeof(float);
    static void row_scales(const block &, const float * rd, float32x4_t & d03, float32x4_t & d47) {
        d03 = vld1q_f32(rd);
        d47 = vld1q_f32(rd + 4);
    }
};

namespace plain {

// The four values of a 16-byte half run (4 rows x 4 values), value i of the 4 rows in w[i], times
// the rows' scales.
inline void run_values(const int8_t * q, uint8x16_t to_value_major, float32x4_t d, float32x4_t (&w)[4]) {
    const int8x16_t t = vqtbl1q_s8(vld1q_s8(q), to_value_major);
    const int16x8_t lo = vmovl_s8(vget_low_s8(t)), hi = vmovl_high_s8(t);
    w[0] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d);
    w[1] = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d);
    w[2] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d);
    w[3] = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d);
}

inline float32x4_t fma4(float32x4_t acc, const float32x4_t (&w)[4], float32x4_t x) {
    acc = vfmaq_laneq_f32(acc, w[0], x, 0);
    acc = vfmaq_laneq_f32(acc, w[1], x, 1);
    acc = vfmaq_laneq_f32(acc, w[2], x, 2);
    return vfmaq_laneq_f32(acc, w[3], x, 3);
}

template <typename L>
struct q8_r8_kernel {
    using block = typename L::block;
    static constexpr int R = 8, QK = L::QK, header = L::header;
    template <int C>
    static void tile(int64_t nb, const float * rd, const block * wb, const char * x, size_t xs, float * dst, size_t ds) {
        static const uint8_t value_major[16] = { 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15 };
        const uint8x16_t vm = vld1q_u8(value_major);
        float32x4_t acc[C][2];
        for (int c = 0; c < C; ++c) acc[c][0] = acc[c][1] = vdupq_n_f32(0.0f);
        for (int64_t ib = 0; ib < nb; ++ib) {
            float32x4_t d03, d47;
            L::row_scales(wb[ib], rd, d03, d47);
            for (int j = 0; j < QK / 4; ++j) {
                float32x4_t w03[4], w47[4];
                run_values(wb[ib].qs + 32 * j, vm, d03, w03);
                run_values(wb[ib].qs + 32 * j + 16, vm, d47, w47);
                for (int c = 0; c < C; ++c) {
                    const float32x4_t xv = vld1q_f32((const float *) (x + c * xs) + ib * QK + 4 * j);
                    acc[c][0] = fma4(acc[c][0], w03, xv);
                    acc[c][1] = fma4(acc[c][1], w47, xv);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            vst1q_f32(dst + c * ds, acc[c][0]);
            vst1q_f32(dst + c * ds + 4, acc[c][1]);
        }
    }
};

// bf16_r16 with shifts: 4 activation pairs as floats in two vectors, pair P at lanes 2 (P % 2)
// and 2 (P % 2) + 1 of lo (P < 2) or hi.
struct bf16_pairs { uint16_t v[32]; };   // column pair i of the 16 rows, row k's pair at 2 k
struct xpairs { float32x4_t lo, hi; };

inline xpairs load_pairs4(const uint16_t * x) {
    const uint16x8_t v = vld1q_u16(x);
    return { vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16)), vreinterpretq_f32_u32(vshll_high_n_u16(v, 16)) };
}
inline xpairs load_pair1(const uint16_t * x) {   // the pair in lanes 0 and 1 of lo
    uint32_t u;
    std::memcpy(&u, x, 4);
    const float32x4_t v = vreinterpretq_f32_u32(vshll_n_u16(vreinterpret_u16_u32(vdup_n_u32(u)), 16));
    return { v, v };
}
template <int P, int C>
inline void pair_step(float32x4_t (&acc)[C][4], const bf16_pairs & p, const xpairs (&x)[C]) {
    constexpr int L = 2 * (P % 2);
    for (int q = 0; q < 4; ++q) {   // rows 4 q .. 4 q + 3
        const uint32x4_t v = vreinterpretq_u32_u16(vld1q_u16(p.v + 8 * q));
        const float32x4_t even = vreinterpretq_f32_u32(vshlq_n_u32(v, 16));
        const float32x4_t odd = vreinterpretq_f32_u32(vandq_u32(v, vdupq_n_u32(0xFFFF0000u)));
        for (int c = 0; c < C; ++c) {
            const float32x4_t xv = P < 2 ? x[c].lo : x[c].hi;
            acc[c][q] = vfmaq_laneq_f32(vfmaq_laneq_f32(acc[c][q], even, xv, L), odd, xv, L + 1);
        }
    }
}

#include "neon/gemm-bf16-r16.inc"
#include "neon/gemm-interleaved-loop.inc"

} // namespace plain

// bf16_r16 with BFDOT (FEAT_BF16): lane P of the activations' 4 pairs against a pair of 4 rows.
KILN_NEON_BF16_BEGIN
namespace bfdot {

using plain::bf16_pairs;
struct xpairs { bfloat16x8_t v; };   // 4 activation pairs, pair P in lane P

inline xpairs load_pairs4(const uint16_t * x) { return { vreinterpretq_bf16_u16(vld1q_u16(x)) }; }
inline xpairs load_pair1(const uint16_t * x) {
    uint32_t u;
    std::memcpy(&u, x, 4);
    return { vreinterpretq_bf16_u32(vdupq_n_u32(u)) };
}
template <int P, int C>
inline void pair_step(float32x4_t (&acc)[C][4], const bf16_pairs & p, const xpairs (&x)[C]) {
    for (int q = 0; q < 4; ++q) {
        const bfloat16x8_t w = vreinterpretq_bf16_u16(vld1q_u16(p.v + 8 * q));
        for (int c = 0; c < C; ++c) acc[c][q] = vbfdotq_laneq_f32(acc[c][q], w, x[c].v, P);
    }
}

#include "neon/gemm-bf16-r16.inc"
#include "neon/gemm-interleaved-loop.inc"

} // namespace bfdot
KILN_NEON_BF16_END

template <typename K>
void gemm_neon(int64_t n, const void * w, size_t ws, const void * x, size_t xs, float * dst, size_t ds, int nr, int nc) {
    plain::gemm<K>(n, w, ws, x, xs, dst, ds, nr, nc);
}

__attribute__((target(KILN_NEON_BF16_TARGET))) void gemm_bf16_r16_bfdot(int64_t n, const void * w, size_t ws, const void * x,
                                                                         size_t xs, float * dst, size_t ds, int nr, int nc) {
    bfdot::gemm<bfdot::bf16_r16_kernel>(n, w, ws, x, xs, dst, ds, nr, nc);
}

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp). Registered at every level the CPU runs (the
// same code above neon, BFDOT for bf16_r16 where the CPU has it), so that each level names its
// kernel (the -rtr policy lists these layouts at every Arm level).
void ggml_cpu_register_interleaved_float_neon() {
    const bool bfdot = ggml_cpu_has_arm_bf16() && ggml_cpu_isa_runs_here(GGML_CPU_ISA_NEON_DOTPROD);   // FEAT_BF16 implies dotprod
    for (ggml_cpu_isa isa : { GGML_CPU_ISA_NEON, GGML_CPU_ISA_NEON_DOTPROD, GGML_CPU_ISA_NEON_I8MM }) {
        if (!ggml_cpu_isa_runs_here(isa)) continue;
        ggml_cpu_register_gemm(GGML_TYPE_Q8_KV_R8, isa, GGML_TYPE_F32, gemm_neon<plain::q8_r8_kernel<q8_KV_r8_layout>>);
        ggml_cpu_register_gemm(GGML_TYPE_BF16_R16, isa, GGML_TYPE_BF16,
                               bfdot && isa != GGML_CPU_ISA_NEON ? gemm_bf16_r16_bfdot : gemm_neon<plain::bf16_r16_kernel>);
    }
}
