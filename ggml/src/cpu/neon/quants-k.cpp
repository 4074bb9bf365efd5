// NEON gemm kernels of q2_K .. q6_K against q8_K activations: plain Advanced SIMD, SDOT and SMMLA
// (the shared block loop of gemm-q8k.h).
//
// A weight block is decoded once per tile into the common form of quants-k.h (unsigned levels
// u <= 63, 16 group scales, 16 minimum terms) by the scalar decoders; u fits in int8, so the
// group dot products are signed 16-byte products, and |sum| <= 16 groups * 16 * 63 * 127 * 128
// < 2^31. The minimum term comes from the activation's bsums.
#include "neon/register.h"
#include "neon/gemm-q8k.h"
#include "quants/quants-k.h"

namespace {

template <void (*Decode)(const void *, k_block_decoded &), size_t BlockBytes>
struct dec_k {
    using block = k_block_decoded;
    static constexpr bool kMins = true;
    static q8k_row row(const char * r) { return { r, BlockBytes, 0.0f }; }
    static void decode(const q8k_row & r, int64_t i, block & out) { Decode(r.blocks + i * BlockBytes, out); }
    static q8k_view view(const block & b) { return { (const int8_t *) b.u, b.s, b.mi, b.d, b.dm }; }
};

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_k_neon() {
    add_q8k_kernels<dec_k<k_decode_q2_K, sizeof(block_q2_K)>>(GGML_TYPE_Q2_K);
    add_q8k_kernels<dec_k<k_decode_q3_K, sizeof(block_q3_K)>>(GGML_TYPE_Q3_K);
    add_q8k_kernels<dec_k<k_decode_q4_K, sizeof(block_q4_K)>>(GGML_TYPE_Q4_K);
    add_q8k_kernels<dec_k<k_decode_q5_K, sizeof(block_q5_K)>>(GGML_TYPE_Q5_K);
    add_q8k_kernels<dec_k<k_decode_q6_K, sizeof(block_q6_K)>>(GGML_TYPE_Q6_K);
}
