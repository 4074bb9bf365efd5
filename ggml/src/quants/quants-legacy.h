// Block layouts of the 32-value "legacy" formats (q4_0, q4_1, q5_0, q5_1, q6_0) and the
// non-linear 4-bit formats (iq4_nl, iq4_xs, mxfp4), shared by the reference code in
// quants/ and the SIMD kernels in cpu/avx2 and cpu/avx512.
#pragma once

#include "quants-common.h"

// The blocks (block_q4_0 .. block_q6_0, block_iq4_nl, block_iq4_xs, block_mxfp4), iq4_xs_scale,
// e8m0_to_fp32_half and the value tables kvalues_iq4nl / kvalues_mxfp4 are declared in
// quants-blocks.h (included through quants-common.h), which the CUDA kernels share.
