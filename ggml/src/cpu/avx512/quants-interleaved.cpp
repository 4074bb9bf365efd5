// AVX512 (VNNI) gemm kernels of the row-interleaved layouts read straight from their woven groups by
// the panel gemm (avx2/panel-r8*.h; the list is register_r8_gemms in panel-r8-types.h), for
// batches and token generation alike; the k-quant r4 layouts with 16-lane decoders
// (avx512/panel-r16-k.h), and q2_k_r4 .. q6_k_r4 token generation by the lane-shaped
// loop of gemv-interleaved-loop.h. bf16_r16 is in gemm-float.cpp; q8_KV_r8, whose activations are f32,
// has a float product of its own (gemm-q8-kv-r8.h).
#include "avx512/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "avx2/panel-r8-types.h"
#include "avx512/panel-r16-k.h"
#include "avx2/gemm-q8-kv-r8.h"
#include "gemv-interleaved-loop.h"
#include "gemv-interleaved-lattice.h"

namespace {

// gemv-interleaved-loop.h's ISA: 64-byte vectors, four lane groups.
struct r4k_isa {
    using vi = __m512i;
    using vf = __m512;
    static constexpr int kBytes = 64;
    static vi load(const void * p) { return _mm512_loadu_si512(p); }
    static void store(void * p, vi v) { _mm512_storeu_si512(p, v); }
    static vi bcast16(const void * p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) p)); }
    static vi bcast32(const void * p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) p)); }
    static vi zero() { return _mm512_setzero_si512(); }
    static vi set8(char c) { return _mm512_set1_epi8(c); }
    static vi and_(vi a, vi b) { return _mm512_and_si512(a, b); }
    static vi or_(vi a, vi b) { return _mm512_or_si512(a, b); }
    static vi add16(vi a, vi b) { return _mm512_add_epi16(a, b); }
    static vi sub8(vi a, vi b) { return _mm512_sub_epi8(a, b); }
    static vi set16(short v) { return _mm512_set1_epi16(v); }
    static vi add32(vi a, vi b) { return _mm512_add_epi32(a, b); }
    static vi srli16_4(vi v) { return _mm512_srli_epi16(v, 4); }
    static vi slli16_4(vi v) { return _mm512_slli_epi16(v, 4); }
    static vi slli16_2(vi v) { return _mm512_slli_epi16(v, 2); }
    static vi rolv32(vi v, vi n) { return _mm512_rolv_epi32(v, n); }
    static vi abs8(vi v) { return _mm512_abs_epi8(v); }
    static vi sign8(vi x, vi s) { return _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(s), _mm512_setzero_si512(), x); }
    static vi select_bit0(vi a, vi b, vi v) { return _mm512_mask_mov_epi8(a, _mm512_test_epi8_mask(v, _mm512_set1_epi8(1)), b); }
    // -1 in the bytes where x & m is not 0, else 0 (sign8 reads the top bit)
    static vi negative_where(vi x, vi m) { return _mm512_movm_epi8(_mm512_test_epi8_mask(x, m)); }
    static vi join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
    // (a & 0x0F) | b in one vpternlogd (0xEA: A & B | C)
    static vi nibble_or(vi a, vi b) { return _mm512_ternarylogic_epi32(a, _mm512_set1_epi8(0x0F), b, 0xEA); }
    static vi srlv32(vi v, vi n) { return _mm512_srlv_epi32(v, n); }
    static vi shuffle(vi v, vi c) { return _mm512_shuffle_epi8(v, c); }
    static vi maddubs(vi u, vi s) { return _mm512_maddubs_epi16(u, s); }
    static vi dot16(vi acc, vi a, vi b) { return _mm512_dpwssd_epi32(acc, a, b); }
    static vi spread(__m256i x, vi idx) { return _mm512_permutexvar_epi32(idx, _mm512_zextsi256_si512(x)); }
    static void widen_u8(__m256i b, vi * out) { out[0] = _mm512_cvtepu8_epi16(b); }
    static void widen_i8(__m256i b, vi * out) { out[0] = _mm512_cvtepi8_epi16(b); }
    static vf zero_ps() { return _mm512_setzero_ps(); }
    static vf set1_ps(float f) { return _mm512_set1_ps(f); }
    static vf cvt(vi v) { return _mm512_cvtepi32_ps(v); }
    static vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
    static vf fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
    static vf fnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
    static vf rows4(__m128 r) { return _mm512_broadcast_f32x4(r); }
    static vf rows8(__m256 r) { return _mm512_broadcast_f32x8(r); }
    static vi bcast256(__m256i v) { return _mm512_broadcast_i64x4(v); }
    static __m256 sum_rows8(vf f) {
        return _mm256_add_ps(_mm512_castps512_ps256(f), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
    }
    static __m128 sum_lanes(vf f) {
        const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(f), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
        return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    }
};

// The batch kernel of a layout registered before this folder's (quants-ik.cpp unweaves iq4_k_r4 /
// iq4_ks_r4 into the plain kernels), kept as the many-column path under the lane-shaped loop.
template <ggml_type T>
struct earlier_gemm {
    static inline ggml_gemm_t fn = nullptr;
    static void call(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst,
                     size_t dst_stride, int nr, int nc) {
        fn(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
    }
};

} // namespace

void ggml_cpu_register_interleaved_avx512() {
    using namespace kiln_panel;
    register_r8_gemms(GGML_CPU_ISA_AVX512);
    register_r16_k_gemms(GGML_CPU_ISA_AVX512);
    // token generation of q2_k_r4 .. q6_k_r4 by the lane-shaped loop, batches by the panel
    auto reg = [](ggml_type t, ggml_gemm_t fn) { ggml_cpu_register_gemm(t, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_K, fn); };
    auto reg0 = [](ggml_type t, ggml_gemm_t fn) { ggml_cpu_register_gemm(t, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_0, fn); };
    using q8_0 = act_q8_32<false>;
    reg0(GGML_TYPE_Q4_0_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::q4_0_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_q4_0_r8, q8_0>>);
    reg0(GGML_TYPE_Q8_0_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::q8_0_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_q8_0_r8<kSignedLevels>, q8_0>>);
    reg0(GGML_TYPE_MXFP4_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::mxfp4_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_mxfp4_r8<kSignedLevels>, q8_0>>);
    reg0(GGML_TYPE_IQ4_NL_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_nl_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq4_nl_r4<kSignedLevels>, q8_0>>);
    reg0(GGML_TYPE_Q5_0_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q5_0_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q5_0_r4, q8_0>>);
    reg0(GGML_TYPE_Q6_0_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q6_0_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q6_0_r4, q8_0>>);
    reg(GGML_TYPE_IQ4_XS_R8, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_xs_r8_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq4_xs_r8<kSignedLevels>, act_q8_K<32>>>);
    reg(GGML_TYPE_Q2_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q2_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp16_q2_k_r4, act_q8_K<16>>>);
    reg(GGML_TYPE_Q3_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q3_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_q3_k_r4, act_q8_K<16>>>);
    reg(GGML_TYPE_Q4_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q4_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp16_q4_k_r4, act_q8_K<32>>>);
    reg(GGML_TYPE_Q5_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q5_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp16_q5_k_r4, act_q8_K<32>>>);
    reg(GGML_TYPE_Q6_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::q6_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp16_q6_k_r4, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ2_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_k_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ3_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq3_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq3_k_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ5_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq5_k_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq5_k_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ5_KS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq5_ks_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq5_ks_r4<kSignedLevels>, act_q8_K<32>>>);
    reg(GGML_TYPE_IQ2_XXS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_xxs_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_xxs_r4<kSignedLevels>, act_q8_K<32>>>);
    reg(GGML_TYPE_IQ2_XS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_xs_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_xs_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ2_S_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq2_s_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq2_s_r4<kSignedLevels>, act_q8_K<16>>>);
    reg(GGML_TYPE_IQ3_XXS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq3_xxs_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq3_xxs_r4<kSignedLevels>, act_q8_K<32>>>);
    reg(GGML_TYPE_IQ3_S_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq3_s_r4_dec<r4k_isa>, kMinCols, gemm_r8<grp_iq3_s_r4<kSignedLevels>, act_q8_K<32>>>);
    using iq4_k_r4_batch = earlier_gemm<GGML_TYPE_IQ4_K_R4>;
    iq4_k_r4_batch::fn = ggml_cpu_type_traits_mut(GGML_TYPE_IQ4_K_R4)->gemm[GGML_CPU_ISA_AVX512];
    GGML_ASSERT(iq4_k_r4_batch::fn && "quants-ik.cpp registers iq4_k_r4 first");
    reg(GGML_TYPE_IQ4_K_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_k_r4_dec<r4k_isa>, kMinCols, iq4_k_r4_batch::call>);
    using iq4_ks_r4_batch = earlier_gemm<GGML_TYPE_IQ4_KS_R4>;
    iq4_ks_r4_batch::fn = ggml_cpu_type_traits_mut(GGML_TYPE_IQ4_KS_R4)->gemm[GGML_CPU_ISA_AVX512];
    GGML_ASSERT(iq4_ks_r4_batch::fn && "quants-ik.cpp registers iq4_ks_r4 first");
    reg(GGML_TYPE_IQ4_KS_R4, r4k_gemv::gemm<r4k_isa, r4k_gemv::iq4_ks_r4_dec<r4k_isa>, kMinCols, iq4_ks_r4_batch::call>);
    ggml_cpu_register_gemm(GGML_TYPE_Q8_KV_R8, GGML_CPU_ISA_AVX512, GGML_TYPE_F32, q8_kv_r8::gemm<4>);
}
