// AVX512 (BW + VNNI) gemm kernels of the lattice i-quants (IQ1_S/M, IQ2_XXS/XS/S, IQ3_XXS/S)
// against q8_K, where the CPU lacks VBMI (with VBMI, quants-iq-vbmi.cpp takes token generation).
// Fewer than kiln_panel::kMinCols columns (token generation): each weight block is decoded once in
// vectors (avx2/panel-iq-index.h: per 64 values the grid entries by plain loads or a gather, the
// signs as a mask register) into |w| (u8), the sign mask of w and 16-bit scales laid out to match
// vpmaddubsw's pair sums; then per activation column and
// 64 weights: negate a where w < 0 (masked subtract), vpmaddubsw |w| x a (|w| <= 62, |a| <= 127:
// no saturation), vpdpwssd with the scales into an int32 accumulator. The per-block integer sums
// equal the scalar kernels' exactly and the float accumulation is the same fma chain, so results
// match the scalar path bit for bit.
// Batches (kiln_panel::kMinCols columns or more) go to the panel gemm (panel.h) with the
// decoders of panel-iq.h: the levels repacked 16 rows to a vector and multiplied by vpdpbusd
// with the level offset folded away, exact in int32 per sub-block; only the float sums of the
// sub-blocks' scaled products differ from the scalar kernel's order.
#include "avx512/register.h"
#include "cpu-traits.h"
#include "gemm-iq-loop.h"
#include "panel-iq.h"
#include "quants/quants-iq.h"

// GCC 12 reports its own AVX512 extract/insert intrinsics (undefined upper lanes) as
// "maybe uninitialized"; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace {

using namespace ggml_iq;

// The ISA description for the shared block loop (gemm-iq-loop.h).
struct iq_avx512 {
    static constexpr int kPanelMinCols = kiln_panel::kMinCols;
    template <typename Block>
    static void panel(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                      size_t dst_stride, int nr, int nc) {
        using D = kiln_panel::lattice_panel<Block>;
        kiln_panel::gemm<D, kiln_panel::act_q8_K<D::kSub>>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    }

    using prepared = kiln_panel::lattice_prepared;

    template <typename X, typename Block>
    static void prepare(const Block & b, prepared & pb) {
        const __m512i group_of_lane = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                                       1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
        alignas(32) int16_t sc16[QK_K / 16];
        kiln_panel::lattice_scales16<X>(b, sc16);
        const __m512i sc = _mm512_castsi256_si512(_mm256_load_si256((const __m256i *) sc16));
        for (int k = 0; k < QK_K / 64; ++k) {
            __m256i idx[2];
            uint64_t bits;
            X::chunk(b, k, idx, bits);
            // 8-value grids by plain loads (iq2_xxs 1.53 -> 1.41 CPU ms at 4096 x 4096), the 4-value
            // ones by gathers (16 loads and their inserts cost more: iq3_xxs 2.11 -> 2.43)
            const __m512i g = sizeof(typename X::Grid) == 8 ? kiln_panel::load_grid<X>(idx) : kiln_panel::gather_grid<X>(idx);
            if constexpr (X::kDelta) {
                // signed 8 g + delta: the panel's offset level 128 + w with its top bit flipped
                const __m512i w = _mm512_xor_si512(kiln_panel::iq1_offset_levels(g, (__mmask8) bits), _mm512_set1_epi8((char) 0x80));
                pb.neg[k] = _mm512_movepi8_mask(w);
                pb.abs_w[k] = _mm512_abs_epi8(w);
            } else {
                pb.neg[k] = _cvtu64_mask64(bits);
                pb.abs_w[k] = g;
            }
            const __m512i idx16 = _mm512_add_epi16(group_of_lane, _mm512_set1_epi16((short) (4 * k)));
            pb.scales[k] = _mm512_permutexvar_epi16(idx16, sc);
        }
    }

    static int32_t block_dot(const prepared & pb, const int8_t * q8) { return kiln_panel::lattice_block_dot(pb, q8); }
};

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_iq_avx512() { register_iq_gemms<iq_avx512>(GGML_CPU_ISA_AVX512); }
