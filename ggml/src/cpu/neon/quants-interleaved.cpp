// NEON gemm kernels of the 8-row interleaved legacy layouts q4_0_r8 and q8_0_r8 against q8_0, at
// the dotprod level (the i8mm level picks them too; plain NEON keeps the scalar path, which
// unweaves the group and runs the twin type's NEON kernel).
//
// Layout (quants-interleaved.h): per 32-value block position, the 8 rows' fp16 scales, then for
// each 4-value quarter l of the first 16 values (q8_0_r8: of each 16), 4 bytes of each of the 8
// rows, row k at 4 k. One 16-byte load is "4 values of rows 0-3" (or 4-7), so SDOT by lane with
// those 4 activation values (lane l of the activation vector) adds one int32 per row: 8 rows in
// two accumulators, no horizontal sums, and the weights are read once per tile of columns.
#include "neon/register.h"
#include "neon/simd.h"
#include "cpu-traits.h"
#include "quants/quants-interleaved.h"
#include "quants/quants-legacy.h"

namespace {

KILN_NEON_DOTPROD_BEGIN
namespace sdot {

// The levels of quarter l of half h (values 16 h + 4 l ..): rows 0-3 and rows 4-7.
struct r8_q8_0 {
    using block = q8_0_r8_block;
    static void load(const block & b, int h, int l, int8x16_t & r03, int8x16_t & r47) {
        const int8_t * p = b.qs + 128 * h + 32 * l;
        r03 = vld1q_s8(p);
        r47 = vld1q_s8(p + 16);
    }
};

// q4_0_r8: the low nibbles of a quarter's bytes are values 4 l .., the high ones 16 + 4 l ..
struct r8_q4_0 {
    using block = q4_0_r8_block;
    static void load(const block & b, int h, int l, int8x16_t & r03, int8x16_t & r47) {
        const uint8x16_t a = vld1q_u8(b.qs + 32 * l), c = vld1q_u8(b.qs + 32 * l + 16);
        const uint8x16_t m = vdupq_n_u8(0xF);
        const uint8x16_t la = h ? vshrq_n_u8(a, 4) : vandq_u8(a, m), lc = h ? vshrq_n_u8(c, 4) : vandq_u8(c, m);
        r03 = vsubq_s8(vreinterpretq_s8_u8(la), vdupq_n_s8(8));
        r47 = vsubq_s8(vreinterpretq_s8_u8(lc), vdupq_n_s8(8));
    }
};

inline float32x4_t scales4(const ggml_fp16_t * d) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(d))); }

// One group of 8 rows times C columns; dst[c * dst_stride + k], k < 8.
template <typename L, int C>
void group_tile(int64_t nb, const typename L::block * wb, const char * x, size_t x_stride, float * dst, size_t dst_stride) {
    float32x4_t acc[C][2];
    for (int c = 0; c < C; ++c) acc[c][0] = acc[c][1] = vdupq_n_f32(0.0f);
    for (int64_t ib = 0; ib < nb; ++ib) {
        int8x16_t w[2][4][2];
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 4; ++l) L::load(wb[ib], h, l, w[h][l][0], w[h][l][1]);
        const float32x4_t d03 = scales4(wb[ib].d), d47 = scales4(wb[ib].d + 4);
        for (int c = 0; c < C; ++c) {
            const block_q8_0 & a = ((const block_q8_0 *) (x + c * x_stride))[ib];
            const int8x16_t x0 = vld1q_s8(a.qs), x1 = vld1q_s8(a.qs + 16);
            int32x4_t s03 = vdupq_n_s32(0), s47 = vdupq_n_s32(0);
            s03 = vdotq_laneq_s32(s03, w[0][0][0], x0, 0);
            s47 = vdotq_laneq_s32(s47, w[0][0][1], x0, 0);
            s03 = vdotq_laneq_s32(s03, w[0][1][0], x0, 1);
            s47 = vdotq_laneq_s32(s47, w[0][1][1], x0, 1);
            s03 = vdotq_laneq_s32(s03, w[0][2][0], x0, 2);
            s47 = vdotq_laneq_s32(s47, w[0][2][1], x0, 2);
            s03 = vdotq_laneq_s32(s03, w[0][3][0], x0, 3);
            s47 = vdotq_laneq_s32(s47, w[0][3][1], x0, 3);
            s03 = vdotq_laneq_s32(s03, w[1][0][0], x1, 0);
            s47 = vdotq_laneq_s32(s47, w[1][0][1], x1, 0);
            s03 = vdotq_laneq_s32(s03, w[1][1][0], x1, 1);
            s47 = vdotq_laneq_s32(s47, w[1][1][1], x1, 1);
            s03 = vdotq_laneq_s32(s03, w[1][2][0], x1, 2);
            s47 = vdotq_laneq_s32(s47, w[1][2][1], x1, 2);
            s03 = vdotq_laneq_s32(s03, w[1][3][0], x1, 3);
            s47 = vdotq_laneq_s32(s47, w[1][3][1], x1, 3);
            const float xd = ggml_compute_fp16_to_fp32(a.d);
            acc[c][0] = vfmaq_f32(acc[c][0], vcvtq_f32_s32(s03), vmulq_n_f32(d03, xd));
            acc[c][1] = vfmaq_f32(acc[c][1], vcvtq_f32_s32(s47), vmulq_n_f32(d47, xd));
        }
    }
    for (int c = 0; c < C; ++c) {
        vst1q_f32(dst + c * dst_stride, acc[c][0]);
        vst1q_f32(dst + c * dst_stride + 4, acc[c][1]);
    }
}

// nr is a multiple of 8 (rows_per_call); a group whose rows are not contiguous (w_stride larger
// than a row) is gathered first.
template <typename L>
void gemm(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
          int nr, int nc) {
    using block = typename L::block;
    const int64_t nb = n / 32;
    const size_t row_size = nb * sizeof(block) / 8;
    const char * xb = (const char *) x;
    for (int r0 = 0; r0 < nr; r0 += 8) {
        const char * group = (const char *) w + r0 * w_stride;
        if (w_stride != row_size) {
            char * gather = (char *) ggml_cpu_kernel_scratch(GGML_CPU_SCRATCH_GATHER, 8 * row_size);
            for (int k = 0; k < 8; ++k) std::memcpy(gather + k * row_size, group + k * w_stride, row_size);
            group = gather;
        }
        const auto * wb = (const block *) group;
        float * d = dst + r0;
        int c = 0;
        for (; c + 4 <= nc; c += 4) group_tile<L, 4>(nb, wb, xb + c * x_stride, x_stride, d + c * dst_stride, dst_stride);
        switch (nc - c) {
            case 3: group_tile<L, 3>(nb, wb, xb + c * x_stride, x_stride, d + c * dst_stride, dst_stride); break;
            case 2: group_tile<L, 2>(nb, wb, xb + c * x_stride, x_stride, d + c * dst_stride, dst_stride); break;
            case 1: group_tile<L, 1>(nb, wb, xb + c * x_stride, x_stride, d + c * dst_stride, dst_stride); break;
            default: break;
        }
    }
}

} // namespace sdot
KILN_NEON_DOTPROD_END

template <typename L>
__attribute__((target(KILN_NEON_DOTPROD_TARGET))) void gemm_dotprod(int64_t n, const void * w, size_t ws, const void * x,
                                                                     size_t xs, float * dst, size_t ds, int nr, int nc) {
    sdot::gemm<L>(n, w, ws, x, xs, dst, ds, nr, nc);
}

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_interleaved_neon() {
    if (!ggml_cpu_isa_runs_here(GGML_CPU_ISA_NEON_DOTPROD)) return;
    ggml_cpu_register_gemm(GGML_TYPE_Q4_0_R8, GGML_CPU_ISA_NEON_DOTPROD, GGML_TYPE_Q8_0, gemm_dotprod<sdot::r8_q4_0>);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_0_R8, GGML_CPU_ISA_NEON_DOTPROD, GGML_TYPE_Q8_0, gemm_dotprod<sdot::r8_q8_0>);
}
