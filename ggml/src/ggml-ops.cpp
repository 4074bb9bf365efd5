// Op constructors: each checks its operands' shapes and records the op in a new node.
// The computation itself is in the backends (ggml/src/cpu/ops-*.cpp for the CPU).
#include "ggml-impl.h"

#include <cstdio>
#include <initializer_list>

namespace {

ggml_tensor * new_node(ggml_context * ctx, ggml_op op, ggml_type type, const int64_t * ne, ggml_tensor * a,
                       ggml_tensor * b = nullptr, ggml_tensor * c = nullptr) {
    ggml_tensor * r = ggml_new_tensor(ctx, type, GGML_MAX_DIMS, ne);
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return r;
}

ggml_tensor * same_shape_node(ggml_context * ctx, ggml_op op, ggml_tensor * a, ggml_tensor * b = nullptr) {
    return new_node(ctx, op, GGML_TYPE_F32, a->ne, a, b);
}

// in-place ops: the result is a view of a that the op writes
ggml_tensor * inplace_node(ggml_context * ctx, ggml_op op, ggml_tensor * a, ggml_tensor * b) {
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

ggml_tensor * binary(ggml_context * ctx, ggml_op op, ggml_tensor * a, ggml_tensor * b, bool inplace) {
    GGML_ASSERT(ggml_can_repeat(b, a) && "binary op: b must broadcast to a");
    GGML_ASSERT(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_BF16);
    return inplace ? inplace_node(ctx, op, a, b) : same_shape_node(ctx, op, a, b);
}

ggml_tensor * unary_impl(ggml_context * ctx, ggml_tensor * a, ggml_unary_op op) {
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_UNARY, a);
    ggml_set_op_params_i32(r, 0, (int32_t) op);
    return r;
}

// the RoPE node shared by the single- and multi-position forms (op params 0..10; sections 11..14)
ggml_tensor * rope_node(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * freq_factors, int n_dims,
                        int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                        float beta_fast, float beta_slow) {
    GGML_ASSERT(b->type == GGML_TYPE_I32);
    GGML_ASSERT(n_dims <= a->ne[0] && n_dims % 2 == 0);
    if (freq_factors) GGML_ASSERT(freq_factors->type == GGML_TYPE_F32 && freq_factors->ne[0] >= n_dims / 2);
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_ROPE, a, b);
    r->src[2] = freq_factors;
    ggml_set_op_params_i32(r, 0, 0);
    ggml_set_op_params_i32(r, 1, n_dims);
    ggml_set_op_params_i32(r, 2, mode);
    ggml_set_op_params_i32(r, 3, 0);
    ggml_set_op_params_i32(r, 4, n_ctx_orig);
    ggml_set_op_params_f32(r, 5, freq_base);
    ggml_set_op_params_f32(r, 6, freq_scale);
    ggml_set_op_params_f32(r, 7, ext_factor);
    ggml_set_op_params_f32(r, 8, attn_factor);
    ggml_set_op_params_f32(r, 9, beta_fast);
    ggml_set_op_params_f32(r, 10, beta_slow);
    return r;
}

} // namespace

extern "C" {

ggml_tensor * ggml_add(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary(ctx, GGML_OP_ADD, a, b, false); }
ggml_tensor * ggml_sub(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary(ctx, GGML_OP_SUB, a, b, false); }
ggml_tensor * ggml_mul(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary(ctx, GGML_OP_MUL, a, b, false); }
ggml_tensor * ggml_div(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary(ctx, GGML_OP_DIV, a, b, false); }
ggml_tensor * ggml_add_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary(ctx, GGML_OP_ADD, a, b, true); }
ggml_tensor * ggml_mul_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary(ctx, GGML_OP_MUL, a, b, true); }

ggml_tensor * ggml_scale_bias(ggml_context * ctx, ggml_tensor * a, float s, float b) {
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_SCALE, a);
    ggml_set_op_params_f32(r, 0, s);
    ggml_set_op_params_f32(r, 1, b);
    return r;
}
ggml_tensor * ggml_scale(ggml_context * ctx, ggml_tensor * a, float s) { return ggml_scale_bias(ctx, a, s, 0.0f); }

ggml_tensor * ggml_clamp(ggml_context * ctx, ggml_tensor * a, float min, float max) {
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_CLAMP, a);
    ggml_set_op_params_f32(r, 0, min);
    ggml_set_op_params_f32(r, 1, max);
    return r;
}

ggml_tensor * ggml_sqr(ggml_context * ctx, ggml_tensor * a)  { return same_shape_node(ctx, GGML_OP_SQR, a); }
ggml_tensor * ggml_sqrt(ggml_context * ctx, ggml_tensor * a) { return same_shape_node(ctx, GGML_OP_SQRT, a); }

ggml_tensor * ggml_sum_rows(ggml_context * ctx, ggml_tensor * a) {
    const int64_t ne[4] = { 1, a->ne[1], a->ne[2], a->ne[3] };
    return new_node(ctx, GGML_OP_SUM_ROWS, GGML_TYPE_F32, ne, a);
}

ggml_tensor * ggml_mean(ggml_context * ctx, ggml_tensor * a) {
    const int64_t ne[4] = { 1, a->ne[1], a->ne[2], a->ne[3] };
    return new_node(ctx, GGML_OP_MEAN, GGML_TYPE_F32, ne, a);
}

ggml_tensor * ggml_argmax(ggml_context * ctx, ggml_tensor * a) {
    GGML_ASSERT(ggml_n_dims(a) <= 2);
    const int64_t ne[4] = { a->ne[1], 1, 1, 1 };
    return new_node(ctx, GGML_OP_ARGMAX, GGML_TYPE_I32, ne, a);
}

ggml_tensor * ggml_unary(ggml_context * ctx, ggml_tensor * a, ggml_unary_op op) { return unary_impl(ctx, a, op); }
ggml_tensor * ggml_silu(ggml_context * ctx, ggml_tensor * a)     { return unary_impl(ctx, a, GGML_UNARY_OP_SILU); }
ggml_tensor * ggml_gelu(ggml_context * ctx, ggml_tensor * a)     { return unary_impl(ctx, a, GGML_UNARY_OP_GELU); }
ggml_tensor * ggml_sigmoid(ggml_context * ctx, ggml_tensor * a)  { return unary_impl(ctx, a, GGML_UNARY_OP_SIGMOID); }
ggml_tensor * ggml_softplus(ggml_context * ctx, ggml_tensor * a) { return unary_impl(ctx, a, GGML_UNARY_OP_SOFTPLUS); }
ggml_tensor * ggml_relu(ggml_context * ctx, ggml_tensor * a)     { return unary_impl(ctx, a, GGML_UNARY_OP_RELU); }
ggml_tensor * ggml_tanh(ggml_context * ctx, ggml_tensor * a)     { return unary_impl(ctx, a, GGML_UNARY_OP_TANH); }
ggml_tensor * ggml_neg(ggml_context * ctx, ggml_tensor * a)      { return unary_impl(ctx, a, GGML_UNARY_OP_NEG); }
ggml_tensor * ggml_exp(ggml_context * ctx, ggml_tensor * a)      { return unary_impl(ctx, a, GGML_UNARY_OP_EXP); }

ggml_tensor * ggml_glu_split(ggml_context * ctx, ggml_tensor * gate, ggml_tensor * up, ggml_glu_op op) {
    GGML_ASSERT(ggml_are_same_shape(gate, up));
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_GLU, gate, up);
    ggml_set_op_params_i32(r, 0, (int32_t) op);
    return r;
}
ggml_tensor * ggml_swiglu_split(ggml_context * ctx, ggml_tensor * gate, ggml_tensor * up) {
    return ggml_glu_split(ctx, gate, up, GGML_GLU_OP_SWIGLU);
}

ggml_tensor * ggml_norm(ggml_context * ctx, ggml_tensor * a, float eps) {
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_NORM, a);
    ggml_set_op_params_f32(r, 0, eps);
    return r;
}

ggml_tensor * ggml_rms_norm(ggml_context * ctx, ggml_tensor * a, float eps) {
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_RMS_NORM, a);
    ggml_set_op_params_f32(r, 0, eps);
    return r;
}

ggml_tensor * ggml_l2_norm(ggml_context * ctx, ggml_tensor * a, float eps) {
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_L2_NORM, a);
    ggml_set_op_params_f32(r, 0, eps);
    return r;
}

// ---- copies and layout

ggml_tensor * ggml_cpy(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(ggml_nelements(a) == ggml_nelements(b));
    ggml_tensor * r = ggml_view_tensor(ctx, b);
    ggml_format_name(r, "%s (copy of %s)", b->name, a->name);
    r->op = GGML_OP_CPY;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

ggml_tensor * ggml_cast(ggml_context * ctx, ggml_tensor * a, ggml_type type) {
    ggml_tensor * r = ggml_new_tensor(ctx, type, GGML_MAX_DIMS, a->ne);
    ggml_format_name(r, "%s (copy)", a->name);
    r->op = GGML_OP_CPY;
    r->src[0] = a;   // no src[1]: the node itself is the destination
    return r;
}

ggml_tensor * ggml_cont_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    GGML_ASSERT(ne0 * ne1 * ne2 * ne3 == ggml_nelements(a));
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    ggml_tensor * r = new_node(ctx, GGML_OP_CONT, a->type, ne, a);
    ggml_format_name(r, "%s (cont)", a->name);
    return r;
}
ggml_tensor * ggml_cont(ggml_context * ctx, ggml_tensor * a) { return ggml_cont_4d(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]); }
ggml_tensor * ggml_cont_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1) { return ggml_cont_4d(ctx, a, ne0, ne1, 1, 1); }
ggml_tensor * ggml_cont_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) { return ggml_cont_4d(ctx, a, ne0, ne1, ne2, 1); }

ggml_tensor * ggml_get_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(a->ne[2] == b->ne[1] && a->ne[3] == b->ne[2]);
    GGML_ASSERT(b->ne[3] == 1 && b->type == GGML_TYPE_I32);
    const int64_t ne[4] = { a->ne[0], b->ne[0], b->ne[1], b->ne[2] };
    return new_node(ctx, GGML_OP_GET_ROWS, GGML_TYPE_F32, ne, a, b);
}

ggml_tensor * ggml_set_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c) {
    GGML_ASSERT(a->ne[0] == b->ne[0]);
    GGML_ASSERT(b->ne[1] == c->ne[0]);
    GGML_ASSERT(b->ne[2] % c->ne[1] == 0 && b->ne[3] % c->ne[2] == 0);
    GGML_ASSERT(c->type == GGML_TYPE_I64 || c->type == GGML_TYPE_I32);
    GGML_ASSERT(b->type == GGML_TYPE_F32);
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op = GGML_OP_SET_ROWS;
    r->src[0] = b;
    r->src[1] = c;
    r->src[2] = a;   // the destination, so the graph orders writes after a's producers
    return r;
}

ggml_tensor * ggml_concat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int dim) {
    GGML_ASSERT(dim >= 0 && dim < GGML_MAX_DIMS && a->type == b->type);
    int64_t ne[4];
    for (int i = 0; i < 4; ++i) {
        if (i == dim) {
            ne[i] = a->ne[i] + b->ne[i];
        } else {
            GGML_ASSERT(a->ne[i] == b->ne[i]);
            ne[i] = a->ne[i];
        }
    }
    ggml_tensor * r = new_node(ctx, GGML_OP_CONCAT, a->type, ne, a, b);
    ggml_set_op_params_i32(r, 0, dim);
    return r;
}

// ---- matrix products

ggml_tensor * ggml_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(a->ne[0] == b->ne[0] && "mul_mat: row lengths differ");
    GGML_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 && "mul_mat: a must broadcast over b");
    GGML_ASSERT(!ggml_is_transposed(a));
    const int64_t ne[4] = { a->ne[1], b->ne[1], b->ne[2], b->ne[3] };
    return new_node(ctx, GGML_OP_MUL_MAT, GGML_TYPE_F32, ne, a, b);
}

void ggml_mul_mat_set_prec(ggml_tensor * a, ggml_prec prec) { ggml_set_op_params_i32(a, 0, (int32_t) prec); }

ggml_tensor * ggml_mul_mat_id(ggml_context * ctx, ggml_tensor * as, ggml_tensor * b, ggml_tensor * ids) {
    GGML_ASSERT(ids->type == GGML_TYPE_I32);
    GGML_ASSERT(as->ne[3] == 1 && b->ne[3] == 1);
    GGML_ASSERT(ids->ne[1] == b->ne[2] && "mul_mat_id: one ids column per token");
    GGML_ASSERT(as->ne[0] == b->ne[0]);
    GGML_ASSERT(ids->ne[0] % b->ne[1] == 0);
    const int64_t ne[4] = { as->ne[1], ids->ne[0], b->ne[2], 1 };
    return new_node(ctx, GGML_OP_MUL_MAT_ID, GGML_TYPE_F32, ne, as, b, ids);
}

ggml_tensor * ggml_moe_up_gate(ggml_context * ctx, ggml_tensor * as_up, ggml_tensor * as_gate, ggml_tensor * b,
                               ggml_tensor * ids, ggml_glu_op op) {
    GGML_ASSERT(ggml_are_same_shape(as_up, as_gate) && as_up->type == as_gate->type);
    GGML_ASSERT(ids->type == GGML_TYPE_I32 && ids->ne[1] == b->ne[2] && as_up->ne[0] == b->ne[0]);
    const int64_t ne[4] = { as_up->ne[1], ids->ne[0], b->ne[2], 1 };
    ggml_tensor * r = new_node(ctx, GGML_OP_MOE_FUSED_UP_GATE, GGML_TYPE_F32, ne, as_up, as_gate, b);
    r->src[3] = ids;
    ggml_set_op_params_i32(r, 0, (int32_t) op);
    return r;
}

void ggml_mul_mat_id_set_keep(ggml_tensor * t, ggml_tensor * keep) {
    GGML_ASSERT(t->op == GGML_OP_MUL_MAT_ID || t->op == GGML_OP_MOE_FUSED_UP_GATE);
    const ggml_tensor * ids = t->op == GGML_OP_MUL_MAT_ID ? t->src[2] : t->src[3];
    GGML_ASSERT(keep->type == GGML_TYPE_F32 && keep->ne[0] == ids->ne[0] && keep->ne[1] == ids->ne[1] &&
                keep->ne[2] == 1 && keep->ne[3] == 1 && "mul_mat_id keep: F32 [n_used, n_tokens]");
    t->src[t->op == GGML_OP_MUL_MAT_ID ? 3 : 4] = keep;
}

// ---- attention pieces

ggml_tensor * ggml_soft_max_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias) {
    if (mask) {
        GGML_ASSERT(mask->type == GGML_TYPE_F32 || mask->type == GGML_TYPE_F16);
        GGML_ASSERT(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1]);
        GGML_ASSERT(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0);
    }
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_SOFT_MAX, a, mask);
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_f32(r, 1, max_bias);
    return r;
}
void ggml_soft_max_add_sinks(ggml_tensor * a, ggml_tensor * sinks) {
    GGML_ASSERT(a->op == GGML_OP_SOFT_MAX);
    GGML_ASSERT(!sinks || (sinks->type == GGML_TYPE_F32 && ggml_is_contiguous(sinks) && sinks->ne[0] == a->ne[2]));
    a->src[2] = sinks;
}

ggml_tensor * ggml_soft_max(ggml_context * ctx, ggml_tensor * a) { return ggml_soft_max_ext(ctx, a, nullptr, 1.0f, 0.0f); }

ggml_tensor * ggml_rope_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * freq_factors, int n_dims,
                            int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                            float attn_factor, float beta_fast, float beta_slow) {
    GGML_ASSERT(b->ne[0] == a->ne[2] && "rope: one position per token (dim 2)");
    GGML_ASSERT(!(mode & GGML_ROPE_TYPE_MROPE) && "rope: multi-section modes go through ggml_rope_multi");
    return rope_node(ctx, a, b, freq_factors, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow);
}

ggml_tensor * ggml_rope_multi(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * freq_factors, int n_dims,
                              const int sections[4], int mode, int n_ctx_orig, float freq_base, float freq_scale,
                              float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    GGML_ASSERT(b->ne[0] == 4 * a->ne[2] && "rope_multi: four positions per token");
    GGML_ASSERT((mode == GGML_ROPE_TYPE_MROPE || mode == GGML_ROPE_TYPE_IMROPE) && "rope_multi: MROPE or IMROPE mode");
    GGML_ASSERT(sections[0] >= 0 && sections[1] >= 0 && sections[2] >= 0 && sections[3] >= 0);
    GGML_ASSERT(sections[0] + sections[1] + sections[2] + sections[3] > 0);
    ggml_tensor * r = rope_node(ctx, a, b, freq_factors, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                                attn_factor, beta_fast, beta_slow);
    for (int i = 0; i < 4; ++i) ggml_set_op_params_i32(r, 11 + i, sections[i]);
    return r;
}

ggml_tensor * ggml_rope(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int n_dims, int mode) {
    return ggml_rope_ext(ctx, a, b, nullptr, n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
}

// YaRN: the dimension at which the rotation count over n_ctx_orig positions equals n_rot.
static float rope_yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2.0f * (float) M_PI)) / (2.0f * std::log(base));
}

void ggml_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]) {
    const float start = std::floor(rope_yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
    const float end   = std::ceil(rope_yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
    dims[0] = std::max(0.0f, start);
    dims[1] = std::min((float) (n_dims - 1), end);
}

ggml_tensor * ggml_flash_attn_ext(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * mask,
                                  float scale, float max_bias, float logit_softcap) {
    GGML_ASSERT(q->ne[0] == k->ne[0] && "flash_attn: q and k head sizes differ");
    GGML_ASSERT(k->ne[1] == v->ne[1] && "flash_attn: k and v lengths differ");
    GGML_ASSERT(q->ne[2] % k->ne[2] == 0 && k->ne[2] == v->ne[2] && "flash_attn: heads must be a multiple of kv heads");
    GGML_ASSERT(q->ne[3] == k->ne[3] && k->ne[3] == v->ne[3]);
    if (mask) {
        GGML_ASSERT(mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1]);
        GGML_ASSERT(mask->type == GGML_TYPE_F16 || mask->type == GGML_TYPE_F32);
    }
    const int64_t ne[4] = { v->ne[0], q->ne[2], q->ne[1], q->ne[3] };
    ggml_tensor * r = new_node(ctx, GGML_OP_FLASH_ATTN_EXT, GGML_TYPE_F32, ne, q, k, v);
    r->src[3] = mask;
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_f32(r, 1, max_bias);
    ggml_set_op_params_f32(r, 2, logit_softcap);
    return r;
}

void ggml_flash_attn_ext_set_prec(ggml_tensor * a, ggml_prec prec) { ggml_set_op_params_i32(a, 3, (int32_t) prec); }

void ggml_flash_attn_ext_add_sinks(ggml_tensor * a, ggml_tensor * sinks) {
    GGML_ASSERT(a->op == GGML_OP_FLASH_ATTN_EXT);
    GGML_ASSERT(!sinks || (sinks->type == GGML_TYPE_F32 && ggml_is_contiguous(sinks) && sinks->ne[0] == a->ne[1]));
    a->src[4] = sinks;
}

ggml_tensor * ggml_diag_mask_inf(ggml_context * ctx, ggml_tensor * a, int n_past) {
    ggml_tensor * r = same_shape_node(ctx, GGML_OP_DIAG_MASK_INF, a);
    ggml_set_op_params_i32(r, 0, n_past);
    return r;
}

ggml_tensor * ggml_argsort(ggml_context * ctx, ggml_tensor * a, ggml_sort_order order) {
    ggml_tensor * r = new_node(ctx, GGML_OP_ARGSORT, GGML_TYPE_I32, a->ne, a);
    ggml_set_op_params_i32(r, 0, (int32_t) order);
    return r;
}

ggml_tensor * ggml_top_k(ggml_context * ctx, ggml_tensor * a, int k) {
    GGML_ASSERT(k > 0 && k <= a->ne[0]);
    const int64_t ne[4] = { k, a->ne[1], a->ne[2], a->ne[3] };
    ggml_tensor * r = new_node(ctx, GGML_OP_TOP_K, GGML_TYPE_I32, ne, a);
    ggml_set_op_params_i32(r, 0, k);
    return r;
}

// ---- recurrent layers

ggml_tensor * ggml_ssm_conv(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * state, ggml_tensor * slots) {
    const int64_t n_ch = x->ne[0], n_tokens = x->ne[1], d_conv = w->ne[0];
    GGML_ASSERT(x->type == GGML_TYPE_F32 && w->type == GGML_TYPE_F32 && state->type == GGML_TYPE_F32);
    GGML_ASSERT(x->ne[2] == 1 && x->ne[3] == 1 && x->nb[0] == sizeof(float));
    GGML_ASSERT(d_conv >= 1 && w->ne[1] == n_ch && ggml_is_contiguous(w) && "ssm_conv: w is [d_conv, n_ch]");
    GGML_ASSERT(state->ne[0] == (d_conv - 1) * n_ch && state->ne[2] == 1 && state->ne[3] == 1 && state->nb[0] == sizeof(float));
    GGML_ASSERT(slots->type == GGML_TYPE_I32 && slots->ne[0] == n_tokens && ggml_is_contiguous(slots));
    const int64_t ne[4] = { n_ch, n_tokens, 1, 1 };
    ggml_tensor * r = new_node(ctx, GGML_OP_SSM_CONV, GGML_TYPE_F32, ne, x, w, state);
    r->src[3] = slots;
    return r;
}

ggml_tensor * ggml_gated_delta_net(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * g,
                                   ggml_tensor * beta, ggml_tensor * state, ggml_tensor * slots, float scale, int chunk) {
    const int64_t d_k = q->ne[0], n_kh = q->ne[1], n_tokens = q->ne[2];
    const int64_t d_v = v->ne[0], n_vh = v->ne[1];
    for (const ggml_tensor * t : { q, k, v, g, beta, state }) {
        GGML_ASSERT(t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float) && t->ne[3] == 1);
    }
    GGML_ASSERT(ggml_are_same_shape(q, k) && "gated_delta_net: q and k shapes differ");
    GGML_ASSERT(v->ne[2] == n_tokens && n_vh % n_kh == 0 && "gated_delta_net: value heads must be a multiple of key heads");
    GGML_ASSERT(g->ne[0] == n_vh && g->ne[1] == n_tokens && g->ne[2] == 1);
    GGML_ASSERT(beta->ne[0] == n_vh && beta->ne[1] == n_tokens && beta->ne[2] == 1);
    GGML_ASSERT(state->ne[0] == d_k * d_v * n_vh && state->ne[2] == 1);
    GGML_ASSERT(slots->type == GGML_TYPE_I32 && slots->ne[0] == n_tokens && ggml_is_contiguous(slots));
    const int64_t ne[4] = { d_v, n_vh, n_tokens, 1 };
    ggml_tensor * r = new_node(ctx, GGML_OP_GATED_DELTA_NET, GGML_TYPE_F32, ne, q, k, v);
    r->src[3] = g;
    r->src[4] = beta;
    r->src[5] = state;
    r->src[6] = slots;
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_i32(r, 1, chunk);
    return r;
}

ggml_tensor * ggml_all_reduce(ggml_context * ctx, ggml_tensor ** parts, int n, int rank) {
    GGML_ASSERT(parts && n >= 2 && n <= GGML_MAX_SRC && "all_reduce: 2 to GGML_MAX_SRC parts");
    GGML_ASSERT(rank >= 0 && rank < n);
    const ggml_tensor * a = parts[0];
    GGML_ASSERT(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_BF16);
    for (int i = 0; i < n; ++i) {
        GGML_ASSERT(parts[i]->type == a->type && ggml_are_same_shape(parts[i], a) && ggml_is_contiguous(parts[i]) &&
                    "all_reduce: the parts must be contiguous tensors of one type and shape");
        for (int j = 0; j < i; ++j) GGML_ASSERT(parts[j] != parts[i] && "all_reduce: a part given twice");
    }
    // written in place: the result is a view of its own device's part, every part a source (so
    // each is computed before, and kept until, the reduce)
    ggml_tensor * r = ggml_view_tensor(ctx, parts[rank]);
    r->op = GGML_OP_ALL_REDUCE;
    for (int i = 0; i < n; ++i) r->src[i] = parts[i];
    ggml_set_op_params_i32(r, 0, rank);
    ggml_set_op_params_i32(r, 1, n);
    return r;
}

// ---- names

const char * ggml_op_name(ggml_op op) {
    static const char * names[GGML_OP_COUNT] = {
        "NONE", "DUP", "ADD", "SUB", "MUL", "DIV", "SCALE", "SQR", "SQRT", "SUM_ROWS", "MEAN", "ARGMAX",
        "CONCAT", "NORM", "RMS_NORM", "MUL_MAT", "MUL_MAT_ID", "CPY", "CONT", "RESHAPE", "VIEW", "PERMUTE",
        "TRANSPOSE", "GET_ROWS", "SET_ROWS", "DIAG_MASK_INF", "SOFT_MAX", "ROPE", "CLAMP", "ARGSORT", "TOP_K",
        "FLASH_ATTN_EXT", "UNARY", "GLU", "MOE_FUSED_UP_GATE", "L2_NORM", "SSM_CONV", "GATED_DELTA_NET",
        "ALL_REDUCE",
    };
    static_assert(GGML_OP_COUNT == 39, "update op names");
    return (op >= 0 && op < GGML_OP_COUNT) ? names[op] : "?";
}

const char * ggml_unary_op_name(ggml_unary_op op) {
    static const char * names[GGML_UNARY_OP_COUNT] = { "SILU", "GELU", "SIGMOID", "SOFTPLUS", "RELU", "TANH", "NEG", "EXP" };
    return (op >= 0 && op < GGML_UNARY_OP_COUNT) ? names[op] : "?";
}

const char * ggml_op_desc(const ggml_tensor * t) {
    if (t->op == GGML_OP_UNARY) return ggml_unary_op_name((ggml_unary_op) t->op_params[0]);
    return ggml_op_name(t->op);
}

} // extern "C"
