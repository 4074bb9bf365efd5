// Batch-1 kernels of the lattice i-quants on AVX512 with VBMI: no gathers for the grids of 256
// or 512 entries (iq2_xxs, iq3_xxs, iq2_xs, iq3_s), plain loads for the larger ones (iq2_s,
// iq1_s, iq1_m), and no scalar field work for signs and scales. This file alone is compiled with
// -mavx512vbmi and registers only where cpuid reports VBMI (and KILN_CPU_VBMI is not 0);
// elsewhere avx512/quants-iq.cpp's kernels stay.
//
// Each grid byte takes one of a few levels (iq2: 3, iq3: 8), so an entry is a 16-bit code (2 or
// 4 bits a value) whose two bytes are two planes of 256 or 512 bytes, 4 or 8 registers each.
// Byte indices (iq2_xxs, iq3_xxs) look up both planes in place, 64 at once (two vpermi2b and a
// blend per plane); 9-bit ones (iq2_xs, iq3_s) first go to 16-bit lanes (vpermb + vpsrlvw) and
// take four vpermi2b and three blends per plane. Per 64 values: one vpermi2b brings each value's
// code bytes into its qword, vpmultishiftqb moves each value's code to its byte and vpermb maps
// code to level. The signs of all 32 groups come from one vpermb + vpsrlvw (fields to 16-bit
// lanes) and, for 7-bit codes, a 128-entry parity table (vpermi2b); the scales likewise. Every
// position is read from the type's row (avx2/panel-iq-index.h) at compile time. The levels,
// signs and scales are those of the other decoders, so the block sums are the same exact
// integers and the results match the scalar kernel bit for bit (test-quants-iq). Batches go to
// the AVX512 panel as before.
#include "avx512/register.h"
#include "cpu-traits.h"
#include "gemm-iq-loop.h"
#include "panel-iq.h"
#include "quants/quants-iq.h"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "avx512/grid-planes.h"

namespace {

using namespace ggml_iq;

// The sign byte of each 7-bit code (its eighth bit makes the count of set bits even).
constexpr auto kSigns7 = [] {
    struct { alignas(64) uint8_t s[128]; } t{};
    for (int c = 0; c < 128; ++c) t.s[c] = expand_signs7((uint32_t) c);
    return t;
}();

// Constant byte tables of a row, computed at compile time.
template <int N>
struct byte_table {
    alignas(64) int8_t b[N] = {};
};

// The fields F of entries j0 .. j0 + n - 1 in 16-bit lanes: bytes of lane j are the two bytes from the
// window's byte rel(j) / 8 (vpermb), shifted right by rel(j) % 8 (vpsrlvw). The window: kSpan
// bytes from byte F.byte of the block, loaded with a mask so nothing past the block is read.
template <typename Block, kiln_panel::lattice_field Which, int n, int j0 = 0>
struct word_fields {
    static constexpr kiln_panel::bit_field F = kiln_panel::field_of<Block, Which>();
    static constexpr int rel(int j) { return F.bit(j0 + j) - 8 * F.byte; }
    static constexpr int span() {
        int m = 0;
        for (int j = 0; j < n; ++j) m = (rel(j) + 16) / 8 > m ? (rel(j) + 16) / 8 : m;
        m = m > 64 ? 64 : m;
        return m > (int) sizeof(Block) - F.byte ? (int) sizeof(Block) - F.byte : m;
    }
    static constexpr int kSpan = span();
    static constexpr bool valid() {
        for (int j = 0; j < n; ++j) {
            if (rel(j) < 0 || rel(j) % 8 + F.width > 16 || rel(j) / 8 + (rel(j) % 8 + F.width > 8) >= kSpan) return false;
        }
        return n <= 32 && kSpan <= 64;
    }
    static_assert(valid(), "each field within two bytes of a 64-byte window");
    static constexpr byte_table<64> make_pick() {
        byte_table<64> t;
        for (int j = 0; j < n; ++j) t.b[2 * j] = (int8_t) (rel(j) / 8), t.b[2 * j + 1] = (int8_t) (rel(j) / 8 + 1 < kSpan ? rel(j) / 8 + 1 : rel(j) / 8);
        return t;
    }
    static constexpr byte_table<64> make_shift() {
        byte_table<64> t;
        for (int j = 0; j < n; ++j) t.b[2 * j] = (int8_t) (rel(j) % 8);
        return t;
    }
    static constexpr byte_table<64> kPick = make_pick(), kShift = make_shift();

    // lane j: field j in its low F.width bits, the bits above it unspecified
    static __m512i get(const Block & b) {
        const __mmask64 m = kSpan == 64 ? ~0ull : (1ull << kSpan) - 1;
        const __m512i w = _mm512_maskz_loadu_epi8(m, (const uint8_t *) &b + F.byte);
        const __m512i x = _mm512_permutexvar_epi8(_mm512_load_si512(kPick.b), w);
        return _mm512_srlv_epi16(x, _mm512_load_si512(kShift.b));
    }
};

// Where a type's values come from in this file's decode, all positions from its row.
template <typename Block>
struct vbmi_layout {
    using X = kiln_panel::lattice_index<Block>;
    static constexpr auto T = X::T;
    static constexpr int V = (int) sizeof(typename X::Grid), kPerQ = 8 / V, c = 16 / V;
    static constexpr int kEntries = QK_K / V;                                   // per block
    static constexpr int kGrid = 1 << (T.index_lo.width + T.index_hi.width);  // grid entries
    // byte indices of a 256-entry grid, all in one 64-byte load: looked up there in place
    static constexpr bool kBytes = T.index_hi.width == 0 && T.index_lo.width == 8 && T.index_lo.first % 8 == 0;
    // grids of 256 or 512 entries in planes; larger ones (iq2_s, iq1) by plain loads
    static constexpr bool kPlanes = kBytes || kGrid == 512;
    static constexpr int pos(int j) { return (T.index_lo.bit(j) - 8 * T.index_lo.byte) / 8; }
    static_assert(!kBytes || (pos(kEntries - 1) < 64 && T.index_lo.byte + 64 <= (int) sizeof(Block)), "the index bytes in one 64-byte load");
    // chunk k: qword q takes the code bytes (plane 0 at byte 2e, plane 1 at 2e + 1) of its
    // entries; in place (kBytes: the planes are the two sources) or from the 16-bit codes of
    // entries 0..31 and 32..63 (the two sources)
    static constexpr byte_table<64> make_codes(int k) {
        byte_table<64> t;
        for (int q = 0; q < 8; ++q) {
            for (int e = 0; e < kPerQ; ++e) {
                const int j = X::kEntries * k + kPerQ * q + e;
                t.b[8 * q + 2 * e] = (int8_t) (kBytes ? pos(j) : 2 * (j % 32) + 64 * (j / 32));
                t.b[8 * q + 2 * e + 1] = (int8_t) (kBytes ? pos(j) + 64 : 2 * (j % 32) + 1 + 64 * (j / 32));
            }
        }
        return t;
    }
    static constexpr byte_table<64> kCodes[4] = {make_codes(0), make_codes(1), make_codes(2), make_codes(3)};
    // byte i of a qword: value i's code at bit 16 e + c v of its qword (entry e, value v)
    static constexpr byte_table<64> make_bit_of_value() {
        byte_table<64> t;
        for (int i = 0; i < 64; ++i) t.b[i] = (int8_t) (16 * ((i % 8) / V) + c * ((i % 8) % V));
        return t;
    }
    static constexpr byte_table<64> kBitOfValue = make_bit_of_value();
    // chunk k: the sign byte of group 8 k + q (lane 8 k + q's low byte) in every byte of qword q
    static constexpr byte_table<64> make_spread(int k) {
        byte_table<64> t;
        for (int i = 0; i < 64; ++i) t.b[i] = (int8_t) (2 * (8 * k + i / 8));
        return t;
    }
    static constexpr byte_table<64> kSpread[4] = {make_spread(0), make_spread(1), make_spread(2), make_spread(3)};
    // chunk k: int16 lane l (values 64 k + 2 l, + 1) takes the scale of sub-block (64 k + 2 l) / sub
    static constexpr auto make_scale_lanes(int k) {
        struct { alignas(64) int16_t w[32]; } t{};
        for (int l = 0; l < 32; ++l) t.w[l] = (int16_t) ((64 * k + 2 * l) / T.sub);
        return t;
    }
    static constexpr decltype(make_scale_lanes(0)) kScaleLanes[4] = {make_scale_lanes(0), make_scale_lanes(1), make_scale_lanes(2), make_scale_lanes(3)};

    // The 16-bit codes of entries 32 h .. 32 h + 31 of a 512-entry grid: their 9-bit indices in
    // 16-bit lanes, each plane looked up in its four 128-byte quarters (index bits 7 and 8 pick)
    template <int h>
    static __m512i codes512(const Block & b, const grid_planes<512> & gp) {
        const __m512i lo = word_fields<Block, kiln_panel::lattice_field::index_lo, 32, 32 * h>::get(b);
        __m512i ix = _mm512_and_si512(lo, _mm512_set1_epi16((1 << T.index_lo.width) - 1));
        if constexpr (T.index_hi.width != 0) {
            const __m512i hi = _mm512_and_si512(word_fields<Block, kiln_panel::lattice_field::index_hi, 32, 32 * h>::get(b), _mm512_set1_epi16((1 << T.index_hi.width) - 1));
            ix = _mm512_or_si512(ix, _mm512_slli_epi16(hi, T.index_lo.width));
        }
        const __mmask64 b7 = _mm512_movepi8_mask(ix);
        const __mmask64 b8 = _kshiftri_mask64(_mm512_test_epi8_mask(ix, _mm512_set1_epi16(0x0100)), 1);
        __m512i r[2];
        for (int p = 0; p < 2; ++p) {
            const uint8_t * t = gp.plane[p];
            auto half = [&](int o) {
                const __m512i a = _mm512_permutex2var_epi8(_mm512_load_si512(t + o), ix, _mm512_load_si512(t + o + 64));
                const __m512i z = _mm512_permutex2var_epi8(_mm512_load_si512(t + o + 128), ix, _mm512_load_si512(t + o + 192));
                return _mm512_mask_blend_epi8(b7, a, z);
            };
            r[p] = _mm512_mask_blend_epi8(b8, half(0), half(256));
        }
        // plane 0 in the low byte of each lane, plane 1 in the high one
        return _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, r[0], _mm512_slli_epi16(r[1], 8));
    }

    // The grid levels (magnitudes) of the block's 256 values, 64 to a vector.
    static void levels(const Block & b, __m512i * g) {
        if constexpr (!kPlanes) {
            for (int k = 0; k < QK_K / 64; ++k) {
                __m256i idx[2];
                uint64_t unused;
                X::chunk(b, k, idx, unused);
                g[k] = kiln_panel::load_grid<X>(idx);
            }
        } else {
            planes_levels(b, planes_of<Block, kGrid>(), g);
        }
    }
    template <int N>
    static void planes_levels(const Block & b, const grid_planes<N> & gp, __m512i * g) {
        __m512i src0, src1;
        if constexpr (kBytes) {
            // the codes of every entry, plane by plane, in their index bytes' places
            const __m512i q = _mm512_loadu_si512((const uint8_t *) &b + T.index_lo.byte);
            src0 = plane_bytes(gp.plane[0], q), src1 = plane_bytes(gp.plane[1], q);
        } else {
            src0 = src1 = codes512<0>(b, gp);
            if constexpr (kEntries > 32) src1 = codes512<1>(b, gp);
        }
        const __m512i level = _mm512_load_si512(gp.level);
        for (int k = 0; k < QK_K / 64; ++k) {
            const __m512i code = _mm512_permutex2var_epi8(src0, _mm512_load_si512(kCodes[k].b), src1);
            g[k] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(_mm512_load_si512(kBitOfValue.b), code), level);
        }
    }
};

// The ISA description for the shared block loop (gemm-iq-loop.h); batches never reach it.
struct iq_avx512_vbmi {
    static constexpr int kPanelMinCols = kiln_panel::kMinCols;
    using prepared = kiln_panel::lattice_prepared;

    template <typename X, typename Block>
    static void prepare(const Block & b, prepared & pb) {
        using L = vbmi_layout<Block>;
        if constexpr (X::kDelta) {
            // iq1: signed 8 g + delta, the panel's offset level 128 + w with its top bit flipped
            for (int k = 0; k < QK_K / 64; ++k) {
                __m256i idx[2];
                uint64_t neg;
                X::chunk(b, k, idx, neg);
                const __m512i w = _mm512_xor_si512(kiln_panel::iq1_offset_levels(kiln_panel::load_grid<X>(idx), (__mmask8) neg),
                                                   _mm512_set1_epi8((char) 0x80));
                pb.neg[k] = _mm512_movepi8_mask(w);
                pb.abs_w[k] = _mm512_abs_epi8(w);
            }
        } else {
            L::levels(b, pb.abs_w);
            // the 32 groups' sign bytes (lane g's low byte)
            __m512i signs = word_fields<Block, kiln_panel::lattice_field::signs, QK_K / 8>::get(b);
            if constexpr (L::T.signs.width == 7) {
                signs = _mm512_permutex2var_epi8(_mm512_load_si512(kSigns7.s), signs, _mm512_load_si512(kSigns7.s + 64));
            }
            const __m512i bit_of = _mm512_set1_epi64((long long) 0x8040201008040201ull);
            for (int k = 0; k < QK_K / 64; ++k) {
                pb.neg[k] = _mm512_test_epi8_mask(_mm512_permutexvar_epi8(_mm512_load_si512(L::kSpread[k].b), signs), bit_of);
            }
        }
        // the sub-blocks' scales 2 s + 1
        const __m512i s = _mm512_and_si512(word_fields<Block, kiln_panel::lattice_field::scale, QK_K / L::T.sub>::get(b), _mm512_set1_epi16((1 << L::T.scale.width) - 1));
        const __m512i scales = _mm512_or_si512(_mm512_add_epi16(s, s), _mm512_set1_epi16(1));
        for (int k = 0; k < QK_K / 64; ++k) pb.scales[k] = _mm512_permutexvar_epi16(_mm512_load_si512(L::kScaleLanes[k].w), scales);
    }

    static int32_t block_dot(const prepared & pb, const int8_t * q8) { return kiln_panel::lattice_block_dot(pb, q8); }
};

// The AVX512 kernels registered before this file's (batches go on to them).
template <typename Block> ggml_gemm_t & avx512_of() {
    static ggml_gemm_t f;   // (constant-initialized: no guard, no constructor)
    return f;
}

template <typename Block>
void gemm_vbmi(int64_t n, const void * w, size_t w_stride, const void * x, size_t x_stride, float * dst, size_t dst_stride,
               int nr, int nc) {
    if (nc >= kiln_panel::kMinCols) {
        avx512_of<Block>()(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
        return;
    }
    gemm_iq<iq_avx512_vbmi, Block>(n, w, w_stride, x, x_stride, dst, dst_stride, nr, nc);
}

template <typename Block>
void register_vbmi(ggml_type type) {
    avx512_of<Block>() = ggml_cpu_type_traits_mut(type)->gemm[GGML_CPU_ISA_AVX512];   // (not the reader: it would re-enter registration)
    bool ok = avx512_of<Block>() != nullptr;
    if constexpr (vbmi_layout<Block>::kPlanes) ok = ok && make_planes(kiln_panel::lattice_index<Block>::grid, planes_of<Block, vbmi_layout<Block>::kGrid>());
    if (ok) ggml_cpu_register_gemm(type, GGML_CPU_ISA_AVX512, GGML_TYPE_Q8_K, gemm_vbmi<Block>);
}

} // namespace

// Called by ggml_cpu_register_avx512() (register.cpp) after the plain AVX512 lattice kernels,
// only where cpuid reports VBMI.
void ggml_cpu_register_iq_vbmi_avx512() {
    register_vbmi<block_iq2_xxs>(GGML_TYPE_IQ2_XXS);
    register_vbmi<block_iq2_xs>(GGML_TYPE_IQ2_XS);
    register_vbmi<block_iq2_s>(GGML_TYPE_IQ2_S);
    register_vbmi<block_iq3_xxs>(GGML_TYPE_IQ3_XXS);
    register_vbmi<block_iq3_s>(GGML_TYPE_IQ3_S);
    register_vbmi<block_iq1_s>(GGML_TYPE_IQ1_S);
    register_vbmi<block_iq1_m>(GGML_TYPE_IQ1_M);
}
