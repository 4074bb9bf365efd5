// AVX2 gemm kernels of the lattice i-quants (IQ1_S/M, IQ2_XXS/XS/S, IQ3_XXS/S) against q8_K.
// Each weight block is decoded once into signed int8 weights and int16 scales (quants-iq.h),
// then reused for every activation column: |w| x sign(a, w) with maddubs, scales with madd,
// int32 accumulation. The per-block integer sums equal the scalar kernels' exactly, and the
// float accumulation is the same fma chain, so results match the scalar path bit for bit.
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

#include <cstring>

namespace {

using namespace ggml_iq;

// 32 decoded weights, built from 64-bit lanes: decode wrote 8 bytes at a time, and a 32-byte
// load of those fresh stores would miss store forwarding.
inline __m256i load_decoded(const int8_t * p) {
    uint64_t q[4];
    std::memcpy(q, p, sizeof(q));
    return _mm256_set_epi64x((long long) q[3], (long long) q[2], (long long) q[1], (long long) q[0]);
}

// The ISA description for the shared block loop (gemm-iq-loop.h).
struct iq_avx2 {
    static constexpr int kPanelMinCols = kiln_panel::kMinCols;
    template <typename T>
    static void panel(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                      size_t dst_stride, int nr, int nc) {
        using D = kiln_panel::lattice_panel<typename T::Block>;
        kiln_panel::gemm<D, kiln_panel::act_q8_K<D::kSub>>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    }

    struct prepared {
        __m256i abs_w[QK_K / 32];
        __m256i sign_w[QK_K / 32];
        __m256i scales[QK_K / 32];   // int16: lanes 0-7 scale of the first 16 weights, 8-15 the next
    };

    static void prepare(const decoded_block & db, prepared & pb) {
        for (int k = 0; k < QK_K / 32; ++k) {
            const __m256i w = load_decoded(db.q + 32 * k);
            pb.sign_w[k] = w;
            pb.abs_w[k]  = _mm256_sign_epi8(w, w);
            pb.scales[k] = _mm256_set_m128i(_mm_set1_epi16(db.sc[2 * k + 1]), _mm_set1_epi16(db.sc[2 * k]));
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
