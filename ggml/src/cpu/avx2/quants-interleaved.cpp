// AVX2 gemm kernels of the row-interleaved layouts read straight from their woven groups by
// the panel gemm (avx2/panel-r8*.h; the list is register_r8_gemms in panel-r8-types.h; the
// batches of iq2_k_r4 .. iq5_ks_r4 and iq4_xs_r8 in their twins' folded records, panel-r8-fold.h), for
// batches and token generation alike, but q2_k_r4 .. q6_k_r4 token generation (and the rest
// listed below, the lattice r4 types with gemv-interleaved-lattice.h's decoders), which
// takes the lane-shaped loop of gemv-interleaved-loop.h. bf16_r16 is in gemm-float.cpp; q8_KV_r8, whose
// activations are f32, has a float product of its own (gemm-q8-kv-r8.h).
#include "avx2/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "avx2/panel-r8-types.h"
#include "avx2/panel-r8-fold.h"
#include "avx2/gemm-q8-kv-r8.h"
#include "gemv-interleaved-loop.h"
#include "gemv-interleaved-lattice.h"

namespace {

// gemv-interleaved-loop.h's ISA: 32-byte vectors, two lane groups; no VNNI, so the int16 pair products
// are vpmaddwd + vpaddd.
struct r4k_isa {
    using vi = __m256i;
    using vf = __m256;
    static constexpr int kBytes = 32;
    static vi load(const void * p) { return _mm256_loadu_si256((const __m256i *) p); }
    static void store(void * p, vi v) { _mm256_storeu_si256((__m256i *) p, v); }
    static vi bcast16(const void * p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) p)); }
    static vi bcast32(const void * p) { return load(p); }
    static vi zero() { return _mm256_setzero_si256(); }
    static vi set8(char c) { return _mm256_set1_epi8(c); }
    static vi and_(vi a, vi b) { return _mm256_and_si256(a, b); }
    static vi or_(vi a, vi b) { return _mm256_or_si256(a, b); }
    static vi add16(vi a, vi b) { return _mm256_add_epi16(a, b); }
    static vi add8(vi a, vi b) { return _mm256_add_epi8(a, b); }
    static vi sub8(vi a, vi b) { return _mm256_sub_epi8(a, b); }
    static vi set16(short v) { return _mm256_set1_epi16(v); }
    static vi add32(vi a, vi b) { return _mm256_add_epi32(a, b); }
    static vi srli16_4(vi v) { return _mm256_srli_epi16(v, 4); }
    static vi slli16_4(vi v) { return _mm256_slli_epi16(v, 4); }
    static vi slli16_2(vi v) { return _mm256_slli_epi16(v, 2); }
    template <int N> static vi slli16(vi v) { return _mm256_slli_epi16(v, N); }
    template <int N> static vi srli16(vi v) { return _mm256_srli_epi16(v, N); }
    static vi abs8(vi v) { return _mm256_abs_epi8(v); }
    static vi sign8(vi x, vi s) { return _mm256_sign_epi8(x, s); }
    static vi select_bit0(vi a, vi b, vi v) { return _mm256_blendv_epi8(a, b, _mm256_slli_epi16(v, 7)); }
    // -1 in the bytes where x & m is not 0, else 1 (vpsignb zeroes where its sign byte is 0)
    static vi negative_where(vi x, vi m) { return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(x, m), m), _mm256_set1_epi8(1)); }
    static vi nibble_or(vi a, vi b) { return _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi8(0x0F)), b); }
    static vi srlv32(vi v, vi n) { return _mm256_srlv_epi32(v, n); }
    static vi shuffle(vi v, vi c) { return _mm256_shuffle_epi8(v, c); }
    static vi maddubs(vi u, vi s) { return _mm256_maddubs_epi16(u, s); }
    static vi dot16(vi acc, vi a, vi b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
    static vi spread(__m256i x, vi idx) { return _mm256_permutevar8x32_epi32(x, idx); }
    static void widen_u8(__m256i b, vi * out) {
        out[0] = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(b));
        out[1] = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(b, 1));
    }
    static void widen_i8(__m256i b, vi * out) {
        out[0] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(b));
        out[1] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(b, 1));
    }
    static vf zero_ps() { return _mm256_setzero_ps(); }
    static vf set1_ps(float f) { return _mm256_set1_ps(f); }
    static vf cvt(vi v) { return _mm256_cvtepi32_ps(v); }
    static vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
    static vf fmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
    static vf fnmadd(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
    static vf rows4(__m128 r) { return _mm256_set_m128(r, r); }
    static vf rows8(__m256 r) { return r; }
    static vi bcast256(__m256i v) { return v; }
    static __m256 sum_rows8(vf f) { return f; }
    static __m128 sum_lanes(vf f) { return _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1)); }
};

} // namespace

void ggml_cpu_register_interleaved_avx2() {
    using namespace kiln_panel;
    register_r8_gemms(GGML_CPU_ISA_AVX2);
    // token generation of q2_k_r4 .. q6_k_r4 by the lane-shaped loop, batches by the panel
    auto reg = [](ggml_type t, ggml_gemm_t fn) { ggml_cpu_register_gemm(t, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_K, fn); };
    auto reg0 = [](ggml_type t, ggml_gemm_t fn) { ggml_cpu_register_gemm(t, GGML_CPU_ISA_AVX2, GGML_TYPE_Q8_0, fn); };
    using q8_0 = act_q8_32<false>;
    reg0(GGML_TYPE_Q4_0_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::q4_0_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_q4_0_r8, q8_0>>);
    reg0(GGML_TYPE_Q8_0_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::q8_0_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_q8_0_r8<true>, q8_0>>);
    reg0(GGML_TYPE_MXFP4_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::mxfp4_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_mxfp4_r8<true>, q8_0>>);
    reg0(GGML_TYPE_IQ4_NL_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_nl_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq4_nl_r4<true>, q8_0>>);
    reg0(GGML_TYPE_Q5_0_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q5_0_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q5_0_r4, q8_0>>);
    reg0(GGML_TYPE_Q6_0_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q6_0_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q6_0_r4, q8_0>>);
    reg0(GGML_TYPE_IQ1_S_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq1_s_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq1_s_r4<true>, q8_0>>);
    // iq1_m_r4 batches: the two 16-value halves of a q8_0 block share its scale (kSuper 2), so
    // that the float step per half saves a multiply per column (K = M = 4096, 512 columns, one
    // thread: 140 -> 133 CPU ms, iq1_m 131); its unsigned levels leave the registers for it
    reg0(GGML_TYPE_IQ1_M_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq1_m_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq1_m_r4<true>, act_q8_0_halves<true>>>);
    reg(GGML_TYPE_IQ4_XS_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_xs_r8_dec<r4k_isa>, kMinCols, gemm_r8<folded_groups<grp_iq4_xs_r8<true>>, act_q8_K<QK_K>>>);
    reg(GGML_TYPE_Q2_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q2_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q2_k_r4, act_q8_K<16>>>);
    reg(GGML_TYPE_Q3_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q3_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q3_k_r4, act_q8_K<16>>>);
    reg(GGML_TYPE_Q4_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q4_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q4_k_r4, act_q8_K<32>>>);
    reg(GGML_TYPE_Q5_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q5_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q5_k_r4, act_q8_K<32>>>);
    reg(GGML_TYPE_Q6_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q6_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q6_k_r4, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ2_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<folded_groups<grp_iq2_k_r4<true>>, act_q8_K<QK_K>>>);
    reg(GGML_TYPE_IQ3_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq3_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<folded_groups<grp_iq3_k_r4<true>>, act_q8_K<QK_K>>>);
    reg(GGML_TYPE_IQ4_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<folded_groups<grp_iq4_k_r4<true>>, act_q8_K<QK_K>>>);
    reg(GGML_TYPE_IQ5_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq5_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<folded_groups<grp_iq5_k_r4<true>>, act_q8_K<QK_K>>>);
    reg(GGML_TYPE_IQ5_KS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq5_ks_r4_dec<r4k_isa>, kMinCols, gemm_r8<folded_groups<grp_iq5_ks_r4<true>>, act_q8_K<QK_K>>>);
    reg(GGML_TYPE_IQ4_KS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_ks_r4_dec<r4k_isa>, kMinCols, gemm_r8<folded_groups<grp_iq4_ks_r4<true>>, act_q8_K<QK_K>>>);
    reg(GGML_TYPE_IQ2_XXS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_xxs_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_xxs_r4<true>, act_q8_K<32>>>);
    reg(GGML_TYPE_IQ2_XS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_xs_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_xs_r4<true>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ2_S_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_s_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_s_r4<true>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ3_XXS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq3_xxs_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq3_xxs_r4<true>, act_q8_K<32>>>);
    reg(GGML_TYPE_IQ3_S_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq3_s_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq3_s_r4<true>, act_q8_K<32>>>);
    // q6_K's AVX2 batch kernel keeps the per-16 scales as integers (kScales16), so q6_k_r4's does
    register_k_r4_batch_gemms<grp_q4_k_r4, grp_q5_k_r4, grp_q6_k_r4_scaled, act_q8_0_half_sums>(GGML_CPU_ISA_AVX2);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_KV_R8, GGML_CPU_ISA_AVX2, GGML_TYPE_F32, q8_kv_r8::gemm<2>);
}
