// AVX512 (BW + VNNI) gemm kernels of the lattice i-quants (IQ1_S/M, IQ2_XXS/XS/S, IQ3_XXS/S)
// against q8_K. Fewer than kiln_panel::kMinCols columns (token generation): each weight block is
// decoded once in vectors (avx2/panel-iq-index.h: per 64 values one grid gather, the signs as a
// mask register) into |w| (u8), the sign mask of w and 16-bit scales laid out to match
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

    struct prepared {
        __m512i   abs_w[QK_K / 64];
        __mmask64 neg[QK_K / 64];
        __m512i   scales[QK_K / 64];   // int16 lane i: scale of weights 64k + 2i, 64k + 2i + 1
    };

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
            const __m512i g = kiln_panel::gather_grid<X>(idx);
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

    static int32_t block_dot(const prepared & pb, const int8_t * q8) {
        __m512i acc = _mm512_setzero_si512();
        for (int k = 0; k < QK_K / 64; ++k) {
            const __m512i a = _mm512_loadu_si512((const void *) (q8 + 64 * k));
            const __m512i sa = _mm512_mask_sub_epi8(a, pb.neg[k], _mm512_setzero_si512(), a);
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(pb.abs_w[k], sa), pb.scales[k]);
        }
        // (own reduction: GCC 12 warns about the undefined upper halves in _mm512_reduce_add_epi32)
        const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
        return _mm_cvtsi128_si32(s);
    }
};

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_iq_avx512() { register_iq_gemms<iq_avx512>(GGML_CPU_ISA_AVX512); }
