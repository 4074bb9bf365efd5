// NEON gemm kernels of the lattice i-quants (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs,
// iq3_s) against q8_K, at the neon, dotprod and i8mm levels of the shared block loop
// (gemm-q8k.h). Blocks are decoded by the scalar decoders of quants-iq.h (grid lookups with sign
// masks, 8 bytes at a time) into signed levels and a scale per 16 values; the integer sums equal
// the scalar kernel's.
#include "neon/register.h"
#include "neon/gemm-q8k.h"
#include "quants/quants-iq.h"

namespace {

using namespace ggml_iq;

// The type's dot factor is a power of two (1/8, 1/4, 1): folded into d it is exact, so
// (d * factor) * a.d equals the scalar kernel's factor applied to (d * a.d) at the end.
template <typename Block, void (*Decode)(const Block &, decoded_block &), float Factor>
struct dec_iq {
    using block = decoded_block;
    static constexpr bool kMins = false;
    static q8k_row row(const char * r) { return { r, sizeof(Block), 0.0f }; }
    static void decode(const q8k_row & r, int64_t i, block & out) {
        Decode(((const Block *) r.blocks)[i], out);
        out.d *= Factor;
    }
    static q8k_view view(const block & b) { return { b.q, b.sc, nullptr, b.d, 0.0f }; }
};

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_iq_neon() {
    add_q8k_kernels<dec_iq<block_iq2_xxs, decode_iq2_xxs, IQ2_DOT_FACTOR>>(GGML_TYPE_IQ2_XXS);
    add_q8k_kernels<dec_iq<block_iq2_xs, decode_iq2_xs, IQ2_DOT_FACTOR>>(GGML_TYPE_IQ2_XS);
    add_q8k_kernels<dec_iq<block_iq2_s, decode_iq2_s, IQ2_DOT_FACTOR>>(GGML_TYPE_IQ2_S);
    add_q8k_kernels<dec_iq<block_iq3_xxs, decode_iq3_xxs, IQ3XXS_DOT_FACTOR>>(GGML_TYPE_IQ3_XXS);
    add_q8k_kernels<dec_iq<block_iq3_s, decode_iq3_s, IQ3S_DOT_FACTOR>>(GGML_TYPE_IQ3_S);
    add_q8k_kernels<dec_iq<block_iq1_s, decode_iq1_s, IQ1_DOT_FACTOR>>(GGML_TYPE_IQ1_S);
    add_q8k_kernels<dec_iq<block_iq1_m, decode_iq1_m, IQ1_DOT_FACTOR>>(GGML_TYPE_IQ1_M);
}
