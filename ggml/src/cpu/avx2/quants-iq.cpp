// AVX2 gemm kernels of the lattice i-quants (IQ1_S/M, IQ2_XXS/XS/S, IQ3_XXS/S) against q8_K.
// Fewer than kiln_panel::kMinCols columns (token generation): each weight block is decoded once
// in vectors (the index layer of avx2/panel-iq-index.h: per 32 values one grid gather and a sign
// mask) into |w|, a sign source and int16 scales, then reused for every activation column:
// |w| x sign(a, w) with maddubs, scales with madd, int32 accumulation. The per-block integer sums
// equal the scalar kernels' exactly, and the float accumulation is the same fma chain
// (gemm-iq-loop.h), so results match the scalar path bit for bit.
// Batches (kiln_panel::kMinCols columns or more) go to the panel gemm (panel.h) with the
// decoders of panel-iq.h: signed levels repacked 8 rows to a vector, exact in int32 per
// sub-block; only the float sums of the sub-blocks' scaled products differ from the scalar
// kernel's order.
#include "avx2/register.h"
#include "gemm-iq-loop.h"
#include "panel-iq.h"
#include "quants/quants-iq.h"
#include "cpu-traits.h"

#include <immintrin.h>

namespace {

using namespace ggml_iq;

// The ISA description for the shared block loop (gemm-iq-loop.h).
struct iq_avx2 {
    static constexpr int kPanelMinCols = kiln_panel::kMinCols;
    template <typename Block>
    static void panel(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                      size_t dst_stride, int nr, int nc) {
        using D = kiln_panel::lattice_panel<Block>;
        kiln_panel::gemm<D, kiln_panel::act_q8_K<D::kSub>>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    }

    struct prepared {
        __m256i abs_w[QK_K / 32];
        __m256i sign_w[QK_K / 32];
        __m256i scales[QK_K / 32];   // int16: lanes 0-7 scale of the first 16 weights, 8-15 the next
    };

    template <typename X, typename Block>
    static void prepare(const Block & b, prepared & pb) {
        alignas(32) int16_t sc16[QK_K / 16];
        kiln_panel::lattice_scales16<X>(b, sc16);
        for (int k = 0; k < QK_K / 64; ++k) {
            __m256i idx[2];
            uint64_t bits;
            X::chunk(b, k, idx, bits);
            for (int h = 0; h < 2; ++h) {
                const __m256i g = kiln_panel::gather_grid<X>(idx, h);
                const int j = 2 * k + h;
                if constexpr (X::kDelta) {
                    // 8 g + delta: delta -1 in the groups whose bit is set, else +1
                    const __m256i delta = _mm256_or_si256(kiln_panel::group_mask4(bits >> 4 * h), _mm256_set1_epi8(1));
                    const __m256i w = _mm256_add_epi8(kiln_panel::times8(g), delta);
                    pb.sign_w[j] = w;
                    pb.abs_w[j] = _mm256_abs_epi8(w);
                } else {
                    // sign source -1 where the value is negative, +1 elsewhere (never 0)
                    pb.sign_w[j] = _mm256_or_si256(kiln_panel::byte_mask32((uint32_t) (bits >> 32 * h)), _mm256_set1_epi8(1));
                    pb.abs_w[j] = g;
                }
                pb.scales[j] = _mm256_set_m128i(_mm_set1_epi16(sc16[2 * j + 1]), _mm_set1_epi16(sc16[2 * j]));
            }
        }
    }

    static int32_t block_dot(const prepared & pb, const int8_t * q8) {
        __m256i acc = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; ++k) {
            const __m256i a = _mm256_loadu_si256((const __m256i *) (q8 + 32 * k));
            const __m256i p = _mm256_maddubs_epi16(pb.abs_w[k], _mm256_sign_epi8(a, pb.sign_w[k]));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pb.scales[k]));
        }
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
        s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
        return _mm_cvtsi128_si32(s);
    }
};

} // namespace

// Called by ggml_cpu_register_avx2() (register.cpp) once the CPU is known to have the set.
void ggml_cpu_register_iq_avx2() { register_iq_gemms<iq_avx2>(GGML_CPU_ISA_AVX2); }
