// Placeholders for kernels that are being written; each real definition replaces its weak one.
// (Temporary: removed once every op has its kernel.)
#include "cpu-ops.h"

#define KILN_STUB_OP(fn) \
    __attribute__((weak)) void fn(const ggml_compute_params *, ggml_tensor * dst) { \
        GGML_ABORT("%s: not implemented yet (%s)", #fn, dst->name); }
#define KILN_STUB_WS(name) \
    __attribute__((weak)) size_t name(const ggml_tensor *, int) { return 0; }

KILN_STUB_OP(ggml_cpu_op_binary)
KILN_STUB_OP(ggml_cpu_op_scale)
KILN_STUB_OP(ggml_cpu_op_clamp)
KILN_STUB_OP(ggml_cpu_op_sqr)
KILN_STUB_OP(ggml_cpu_op_sqrt)
KILN_STUB_OP(ggml_cpu_op_unary)
KILN_STUB_OP(ggml_cpu_op_glu)
KILN_STUB_OP(ggml_cpu_op_sum_rows)
KILN_STUB_OP(ggml_cpu_op_mean)
KILN_STUB_OP(ggml_cpu_op_argmax)
KILN_STUB_OP(ggml_cpu_op_norm)
KILN_STUB_OP(ggml_cpu_op_rms_norm)
KILN_STUB_OP(ggml_cpu_op_rope)
KILN_STUB_OP(ggml_cpu_op_soft_max)
KILN_STUB_OP(ggml_cpu_op_diag_mask_inf)
KILN_STUB_OP(ggml_cpu_op_cpy)
KILN_STUB_OP(ggml_cpu_op_get_rows)
KILN_STUB_OP(ggml_cpu_op_set_rows)
KILN_STUB_OP(ggml_cpu_op_concat)
KILN_STUB_OP(ggml_cpu_op_argsort)
KILN_STUB_OP(ggml_cpu_op_top_k)
KILN_STUB_OP(ggml_cpu_op_flash_attn_ext)
KILN_STUB_WS(ggml_cpu_flash_attn_work_size)
KILN_STUB_WS(ggml_cpu_soft_max_work_size)
KILN_STUB_WS(ggml_cpu_argsort_work_size)
