// Token generation of iq2_xxs_r4, iq3_xxs_r4 and iq3_s_r4 on AVX512 with VBMI: the decoders of
// gemv-interleaved-lattice.h with the grid entries looked up in code planes (avx512/grid-planes.h,
// as the plain types' VBMI kernels do) instead of one scalar load each. This file alone among the
// interleaved ones is compiled with -mavx512vbmi and registers only where cpuid reports VBMI (and
// KILN_CPU_VBMI is not 0), after avx512/quants-interleaved.cpp, whose kernels stay elsewhere and
// take the batches here too.
//
// Per sub-block the 16 (iq2) or 32 (iq3) index bytes of its 4 rows are looked up in both planes
// (two vpermi2b and a blend each; iq3_s_r4's 512-entry grid: both 256-entry halves, blended on
// each index's ninth bit); then per part one vpermi2b brings the code bytes of each
// int32 lane's entry into its qword (lane 2 d + e of a qword: its code at bits 16 d ..),
// vpmultishiftqb moves each value's code to its byte and vpermb maps code to level. Levels,
// signs and scales are those of the plain-load decoders, so the products are the same bits
// (test-quants-interleaved runs both: KILN_CPU_VBMI=0).
#include "avx512/register.h"
#include "cpu-traits.h"
#include "panel.h"
#include "avx2/panel-r8-types.h"
#include "gemv-interleaved-loop.h"
#include "gemv-interleaved-lattice.h"
#include "avx512/gemv-interleaved-isa.h"

#include <immintrin.h>

#include <cstring>

#include "avx512/grid-planes.h"

namespace {

using namespace r4k_gemv;

// Where lane (row k, quarter q) finds its entry among a sub-block's index bytes, and value v of
// the quarter its code bits within the entry's 16-bit code.
//   iq2_xxs_r4: row k's group i at 4 k + i, 8 values of 2 bits (quarter q: values 4 (q % 2) ..)
//   iq3_xxs_r4: row k's quarter q at 8 k + q, 4 values of 4 bits
constexpr int iq2_entry(int k, int q) { return 4 * k + q / 2; }
constexpr int iq2_code_bit(int q, int v) { return 2 * (4 * (q % 2) + v); }
constexpr int iq3_entry(int k, int q) { return 8 * k + q; }
constexpr int iq3_code_bit(int, int v) { return 4 * v; }
//   iq3_s_r4: row k's quarter q at k + 8 (q % 4) + 4 (q / 4) (gemv-interleaved-lattice.h), its
//   ninth index bit bit q of qh[4 ib + k]
constexpr int iq3_s_entry(int k, int q) { return k + 8 * (q % 4) + 4 * (q / 4); }

template <int (*Entry)(int, int), int (*CodeBit)(int, int)>
struct plane_tables {
    // part j: the vpermi2b control (plane 0 codes the first source, plane 1 the second) and the
    // vpmultishiftqb one
    alignas(64) uint8_t codes[2][64] = {}, bits[2][64] = {};
    constexpr plane_tables() {
        for (int j = 0; j < 2; ++j) {
            for (int p = 0; p < 64; ++p) {
                const int Q = p / 8, e = p % 8;
                if (e < 4) {
                    const int l = 2 * Q + e / 2;
                    codes[j][p] = (uint8_t) (Entry(l % 4, nibble_quarter(64, j, l)) + 64 * (e % 2));
                }
                const int l = p / 4;
                bits[j][p] = (uint8_t) (16 * (l % 2) + CodeBit(nibble_quarter(64, j, l), p % 4));
            }
        }
    }
};

// iq3_s_r4: per index byte p of a sub-block (row p % 4), the byte of qh[4 ib ..] holding its ninth
// bit (vpshufb control) and that bit
struct ninth_bit_table {
    alignas(64) uint8_t row[64] = {}, bit[64] = {};
    constexpr ninth_bit_table() {
        for (int k = 0; k < 4; ++k) {
            for (int q = 0; q < 8; ++q) {
                row[iq3_s_entry(k, q)] = (uint8_t) k;
                bit[iq3_s_entry(k, q)] = (uint8_t) (1 << q);
            }
        }
    }
};
constexpr ninth_bit_table kNinthBits{};
inline __mmask64 iq3_s_ninth_bits(const iq3_s_r4_block & b, int ib) {
    uint32_t h;
    std::memcpy(&h, b.qh + 4 * ib, 4);
    const __m512i rows = _mm512_shuffle_epi8(_mm512_set1_epi32((int) h), _mm512_load_si512(kNinthBits.row));
    return _mm512_test_epi8_mask(rows, _mm512_load_si512(kNinthBits.bit));
}

// kIdx index bytes per sub-block into a grid of N entries (512: Ninth gives each index's ninth
// bit, which picks the upper 256-entry half of both planes)
template <typename Base, typename B, int kIdx, int (*Entry)(int, int), int (*CodeBit)(int, int), int N = 256,
          __mmask64 (*Ninth)(const B &, int) = nullptr>
struct vbmi_dec : Base {
    static constexpr plane_tables<Entry, CodeBit> kTables{};
    static grid_planes<N> & planes() { return planes_of<B, N>(); }
    static __m512i plane(const uint8_t * t, __m512i q, [[maybe_unused]] __mmask64 high) {
        if constexpr (N == 256) return plane_bytes(t, q);
        else return _mm512_mask_blend_epi8(high, plane_bytes(t, q), plane_bytes(t + 256, q));
    }
    static void levels(const B & b, int ib, __m512i * lv) {
        const grid_planes<N> & gp = planes();
        const __m512i q = _mm512_maskz_loadu_epi8((1ull << kIdx) - 1, b.qs + kIdx * ib);
        __mmask64 high = 0;
        if constexpr (N == 512) high = Ninth(b, ib);
        const __m512i c0 = plane(gp.plane[0], q, high), c1 = plane(gp.plane[1], q, high);
        const __m512i level = _mm512_load_si512(gp.level);
        for (int j = 0; j < 2; ++j) {
            const __m512i code = _mm512_permutex2var_epi8(c0, _mm512_load_si512(kTables.codes[j]), c1);
            lv[j] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(_mm512_load_si512(kTables.bits[j]), code), level);
        }
    }
};

using iq2_xxs_r4_vbmi = vbmi_dec<iq2_xxs_r4_dec<r4k_isa>, iq2_xxs_r4_block, 16, iq2_entry, iq2_code_bit>;
using iq3_xxs_r4_vbmi = vbmi_dec<iq3_xxs_r4_dec<r4k_isa>, iq3_xxs_r4_block, 32, iq3_entry, iq3_code_bit>;
using iq3_s_r4_vbmi = vbmi_dec<iq3_s_r4_dec<r4k_isa>, iq3_s_r4_block, 32, iq3_s_entry, iq3_code_bit, 512, iq3_s_ninth_bits>;

template <typename D, ggml_type T, typename Grid>
void register_vbmi(const Grid * grid) {
    earlier_gemm<T>::fn = ggml_cpu_type_traits_mut(T)->gemm[GGML_CPU_ISA_AVX512];
    if (!earlier_gemm<T>::fn || !make_planes(grid, D::planes())) return;
    ggml_cpu_register_gemm(T, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_K, r4k_gemv::gemm<r4k_isa, D, kiln_panel::kMinCols, earlier_gemm<T>::call>);
}

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) after the interleaved AVX512 kernels, only
// where cpuid reports VBMI.
void ggml_cpu_register_interleaved_vbmi_avx512() {
    register_vbmi<iq2_xxs_r4_vbmi, GGML_TYPE_IQ2_XXS_R4>(ggml_iq::iq2xxs_grid);
    register_vbmi<iq3_xxs_r4_vbmi, GGML_TYPE_IQ3_XXS_R4>(ggml_iq::iq3xxs_grid);
    register_vbmi<iq3_s_r4_vbmi, GGML_TYPE_IQ3_S_R4>(ggml_iq::iq3s_grid);
}
