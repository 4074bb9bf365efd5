// Op dispatch for the CPU backend: which kernel runs a node, what scratch it needs, and
// which op/type combinations are supported.
#include "cpu-ops.h"
#include "cpu-traits.h"

#include <algorithm>
#include <cstdio>

namespace {
bool is_float_type(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }
bool can_decode(ggml_type t) { return ggml_get_type_traits(t)->to_float != nullptr; }
} // namespace

// Chunked ops: about k_chunk_elems elements per chunk (a few microseconds of element-wise work,
// so the counter is never the cost), and up to k_chunks_per_thread per thread, so that a thread
// the OS delays leaves a small share behind. Token-generation sized ops (one row of a few
// thousand values) are one chunk: splitting them costs more than it saves.
constexpr int64_t k_chunk_elems = 16384;
constexpr int k_chunks_per_thread = 4;

ggml_cpu_op_sched ggml_cpu_op_schedule(const ggml_tensor * node, int nth) {
    switch (node->op) {
        case GGML_OP_MUL_MAT:
            if (const int n = ggml_cpu_mul_mat_self_chunks(node, nth)) return { GGML_CPU_OP_SELF, n };
            return { GGML_CPU_OP_TEAM, nth };
        case GGML_OP_MUL_MAT_ID:
        case GGML_OP_MOE_FUSED_UP_GATE:
            if (const int n = ggml_cpu_mul_mat_id_self_chunks(node, nth)) return { GGML_CPU_OP_SELF, n };
            return { GGML_CPU_OP_TEAM, nth };
        case GGML_OP_FLASH_ATTN_EXT:   // merges per-thread partial states after a barrier
            return { GGML_CPU_OP_TEAM, nth };
        default: {
            if (nth == 1) return { GGML_CPU_OP_CHUNKED, 1 };
            // the larger of what is written and what is read; set_rows writes into a view of a
            // whole cache but touches only its source's rows
            int64_t work = node->op == GGML_OP_SET_ROWS ? 0 : ggml_nelements(node);
            if (node->src[0]) work = std::max(work, ggml_nelements(node->src[0]));
            const int64_t n = std::clamp<int64_t>(work / k_chunk_elems, 1, (int64_t) k_chunks_per_thread * nth);
            return { GGML_CPU_OP_CHUNKED, (int) n };
        }
    }
}

size_t ggml_cpu_op_work_size(const ggml_tensor * node, int nth) {
    switch (node->op) {
        case GGML_OP_MUL_MAT:            return ggml_cpu_mul_mat_work_size(node, nth);
        case GGML_OP_MUL_MAT_ID:
        case GGML_OP_MOE_FUSED_UP_GATE:  return ggml_cpu_mul_mat_id_work_size(node, nth);
        case GGML_OP_FLASH_ATTN_EXT:     return ggml_cpu_flash_attn_work_size(node, nth);
        case GGML_OP_SOFT_MAX:           return ggml_cpu_soft_max_work_size(node, nth);
        case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K:              return ggml_cpu_argsort_work_size(node, nth);
        default:                         return 0;
    }
}

void ggml_cpu_compute_op(const ggml_compute_params * p, ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:               ggml_cpu_op_binary(p, node); break;
        case GGML_OP_SCALE:             ggml_cpu_op_scale(p, node); break;
        case GGML_OP_CLAMP:             ggml_cpu_op_clamp(p, node); break;
        case GGML_OP_SQR:               ggml_cpu_op_sqr(p, node); break;
        case GGML_OP_SQRT:              ggml_cpu_op_sqrt(p, node); break;
        case GGML_OP_UNARY:             ggml_cpu_op_unary(p, node); break;
        case GGML_OP_GLU:               ggml_cpu_op_glu(p, node); break;
        case GGML_OP_SUM_ROWS:          ggml_cpu_op_sum_rows(p, node); break;
        case GGML_OP_MEAN:              ggml_cpu_op_mean(p, node); break;
        case GGML_OP_ARGMAX:            ggml_cpu_op_argmax(p, node); break;
        case GGML_OP_NORM:              ggml_cpu_op_norm(p, node); break;
        case GGML_OP_RMS_NORM:          ggml_cpu_op_rms_norm(p, node); break;
        case GGML_OP_L2_NORM:           ggml_cpu_op_l2_norm(p, node); break;
        case GGML_OP_ROPE:              ggml_cpu_op_rope(p, node); break;
        case GGML_OP_SOFT_MAX:          ggml_cpu_op_soft_max(p, node); break;
        case GGML_OP_DIAG_MASK_INF:     ggml_cpu_op_diag_mask_inf(p, node); break;
        case GGML_OP_DUP:
        case GGML_OP_CPY:
        case GGML_OP_CONT:              ggml_cpu_op_cpy(p, node); break;
        case GGML_OP_GET_ROWS:          ggml_cpu_op_get_rows(p, node); break;
        case GGML_OP_SET_ROWS:          ggml_cpu_op_set_rows(p, node); break;
        case GGML_OP_CONCAT:            ggml_cpu_op_concat(p, node); break;
        case GGML_OP_ARGSORT:           ggml_cpu_op_argsort(p, node); break;
        case GGML_OP_TOP_K:             ggml_cpu_op_top_k(p, node); break;
        case GGML_OP_MUL_MAT:           ggml_cpu_op_mul_mat(p, node); break;
        case GGML_OP_MUL_MAT_ID:        ggml_cpu_op_mul_mat_id(p, node); break;
        case GGML_OP_MOE_FUSED_UP_GATE: ggml_cpu_op_moe_up_gate(p, node); break;
        case GGML_OP_FLASH_ATTN_EXT:    ggml_cpu_op_flash_attn_ext(p, node); break;
        case GGML_OP_SSM_CONV:          ggml_cpu_op_ssm_conv(p, node); break;
        case GGML_OP_GATED_DELTA_NET:   ggml_cpu_op_gated_delta_net(p, node); break;
        default: GGML_ABORT("CPU backend: op %s not implemented", ggml_op_name(node->op));
    }
}

bool ggml_cpu_supports_op(const ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    switch (node->op) {
        case GGML_OP_NONE:
        case GGML_OP_VIEW:
        case GGML_OP_RESHAPE:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return true;
        case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID:
        case GGML_OP_MOE_FUSED_UP_GATE:
            return ggml_cpu_gemm(a->type) != nullptr;
        case GGML_OP_GET_ROWS:
            return can_decode(a->type);
        case GGML_OP_CPY:
        case GGML_OP_CONT:
        case GGML_OP_DUP:
            return can_decode(a->type) && (is_float_type(node->type) || ggml_get_type_traits(node->type)->from_float_ref ||
                                           node->type == a->type);
        case GGML_OP_SET_ROWS:
            return is_float_type(node->type) || ggml_get_type_traits(node->type)->from_float_ref;
        case GGML_OP_FLASH_ATTN_EXT:
            return can_decode(node->src[1]->type) && can_decode(node->src[2]->type);
        default:
            return node->op < GGML_OP_COUNT;
    }
}

void ggml_cpu_row_to_f32(ggml_type type, const void * src, float * dst, int64_t n) {
    if (type == GGML_TYPE_F32) {
        std::memcpy(dst, src, n * sizeof(float));
        return;
    }
    auto fn = ggml_get_type_traits(type)->to_float;
    GGML_ASSERT(fn && "type cannot be decoded");
    fn(src, dst, n);
}

void ggml_cpu_row_from_f32(ggml_type type, const float * src, void * dst, int64_t n) {
    if (type == GGML_TYPE_F32) {
        std::memcpy(dst, src, n * sizeof(float));
        return;
    }
    ggml_from_float_t fn = ggml_cpu_from_float(type);
    GGML_ASSERT(fn && "type cannot be encoded");
    fn(src, dst, n);
}
