// NEON gemm kernels of q2_K .. q6_K against q8_K activations, plain Advanced SIMD and SDOT.
//
// A weight block is decoded once per tile of up to 4 activation columns into the common form of
// quants-k.h (unsigned levels u <= 63, 16 group scales, 16 minimum terms) by the scalar decoders.
// Per column and group of 16: a 16-byte signed dot product (u fits in int8), times the group's
// scale, in int32 (|sum| <= 16 groups * 16 * 63 * 127 * 128 < 2^31); the minimum term from
// the activation's bsums. Floats once per block and column.
#include "neon/register.h"
#include "neon/simd.h"
#include "cpu-traits.h"
#include "quants/quants-k.h"

namespace {

using decode_fn = void (*)(const void *, k_block_decoded &);

namespace plain {
using Dot = neon_dot_plain;
#include "neon/gemm-k-loop.inc"
} // namespace plain

KILN_NEON_DOTPROD_BEGIN
namespace sdot {
using Dot = neon_dot_sdot;
#include "neon/gemm-k-loop.inc"
} // namespace sdot
KILN_NEON_DOTPROD_END

// The registered entry points, one per level (see simd.h for the two copies of the loops).
template <decode_fn Decode, size_t BlockBytes>
void gemm_neon(int64_t n, const void * w, size_t ws, const void * x, size_t xs, float * dst, size_t ds, int nr, int nc) {
    plain::gemm_k<Decode, BlockBytes>(n, w, ws, x, xs, dst, ds, nr, nc);
}

template <decode_fn Decode, size_t BlockBytes>
__attribute__((target(KILN_NEON_DOTPROD_TARGET))) void gemm_dotprod(int64_t n, const void * w, size_t ws, const void * x,
                                                                     size_t xs, float * dst, size_t ds, int nr, int nc) {
    sdot::gemm_k<Decode, BlockBytes>(n, w, ws, x, xs, dst, ds, nr, nc);
}

template <decode_fn Decode, size_t BlockBytes>
void add(ggml_type type) {
    ggml_cpu_register_gemm(type, GGML_CPU_ISA_NEON, GGML_TYPE_Q8_K, gemm_neon<Decode, BlockBytes>);
    if (ggml_cpu_isa_runs_here(GGML_CPU_ISA_NEON_DOTPROD)) {
        ggml_cpu_register_gemm(type, GGML_CPU_ISA_NEON_DOTPROD, GGML_TYPE_Q8_K, gemm_dotprod<Decode, BlockBytes>);
    }
}

} // namespace

// Called by ggml_cpu_register_neon() (register.cpp).
void ggml_cpu_register_k_neon() {
    add<k_decode_q2_K, sizeof(block_q2_K)>(GGML_TYPE_Q2_K);
    add<k_decode_q3_K, sizeof(block_q3_K)>(GGML_TYPE_Q3_K);
    add<k_decode_q4_K, sizeof(block_q4_K)>(GGML_TYPE_Q4_K);
    add<k_decode_q5_K, sizeof(block_q5_K)>(GGML_TYPE_Q5_K);
    add<k_decode_q6_K, sizeof(block_q6_K)>(GGML_TYPE_Q6_K);
}
