// q6_K token generation on AVX512 with GFNI: the small-batch kernel of avx512/gemv-k.h with the
// 2-bit high fields of the levels moved into place by vgf2p8affineqb. This file alone is compiled
// with -mgfni and registers only where cpuid reports GFNI (ggml_cpu_has_avx512_gfni, which
// KILN_CPU_VBMI=0 turns off), after avx512/quants-k.cpp; batches (kiln_panel::kMinCols columns
// and more) stay with the kernel registered there.
//
// A qh byte holds the fields of four values 32 apart (bits 0-1, 2-3, 4-5, 6-7). The plain decoder
// copies the 32 bytes of a half into both halves of a vector, one shifted (two instructions), then
// shifts and masks each level vector's field to bits 4-5 (two more). An affine transform takes a
// bit matrix per 64-bit lane, so one instruction on qh broadcast by the load picks field 0 in the
// lower 32 bytes and field 1 in the upper, at bits 4-5, the other bits zero: per block 10 vector
// instructions of the decode instead of 16. The levels are the same bits, so are the products
// (test-quants-simd compares both with the scalar reference; KILN_CPU_VBMI=0 runs the plain one).
#include "avx512/register.h"
#include "avx512/gemv-k.h"
#include "cpu-traits.h"
#include "panel.h"

#include <immintrin.h>

namespace {

// vgf2p8affineqb: result bit i of a byte is the parity of (matrix byte 7 - i) & (source byte), so
// matrix byte 3 selects the source bit for result bit 4 and byte 2 for bit 5; the rest are zero.
constexpr long long field_to_bits_4_5(int field) {
    return (long long) ((1ull << (2 * field)) << 24 | (2ull << (2 * field)) << 16);
}

inline void decode_q6_K_gfni(const void * vb, decoded & out) {
    const auto * x = (const block_q6_K *) vb;
    const __m512i f = _mm512_set1_epi8(0x0F);
    // lanes 0-3 (values 0-31 of a level vector) take field 0 or 2, lanes 4-7 (32-63) field 1 or 3
    const __m512i m0 = _mm512_set_epi64(field_to_bits_4_5(1), field_to_bits_4_5(1), field_to_bits_4_5(1), field_to_bits_4_5(1),
                                        field_to_bits_4_5(0), field_to_bits_4_5(0), field_to_bits_4_5(0), field_to_bits_4_5(0));
    const __m512i m1 = _mm512_set_epi64(field_to_bits_4_5(3), field_to_bits_4_5(3), field_to_bits_4_5(3), field_to_bits_4_5(3),
                                        field_to_bits_4_5(2), field_to_bits_4_5(2), field_to_bits_4_5(2), field_to_bits_4_5(2));
    for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(x->ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(load256(x->qh + 32 * h));
        // (a & 0x0F) | b is one vpternlogd (0xEA: A & B | C)
        out.w[2 * h]     = _mm512_ternarylogic_epi32(ql, f, _mm512_gf2p8affine_epi64_epi8(qh, m0, 0), 0xEA);
        out.w[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), f, _mm512_gf2p8affine_epi64_epi8(qh, m1, 0), 0xEA);
    }
    scales_q6_K(x, out);
}

using q6_K_gfni = tg_decoder<decode_q6_K_gfni, sizeof(block_q6_K), false, true>;

ggml_gemm_t q6_K_batches = nullptr;   // avx512/quants-k.cpp's kernel, for the batches

void gemm_q6_K_gfni(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                    size_t dst_stride, int nr, int nc) {
    if (nc >= kiln_panel::kMinCols) {
        q6_K_batches(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    gemv_k_columns<q6_K_gfni>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
}

} // namespace

void ggml_cpu_register_k_gfni_avx512() {
    // the registration accessor: the readers would start the registration under way again
    q6_K_batches = ggml_cpu_type_traits_mut(GGML_TYPE_Q6_K)->gemm[GGML_CPU_ISA_AVX512];
    if (!q6_K_batches) return;   // (quants-k.cpp registers first: register.cpp)
    ggml_cpu_register_gemm(GGML_TYPE_Q6_K, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_K, gemm_q6_K_gfni);
}
