#include "llama-block.h"

#include <cmath>

namespace {
std::string blk(uint32_t il, const char * t) { return llama_format("blk.%u.%s", il, t); }
} // namespace

void llm_create_embd_output(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    const int64_t n_embd = m.hparams.n_embd, n_vocab = m.hparams.n_vocab;
    m.tok_embd = ml.create(ctx, "token_embd.weight", { n_embd, n_vocab });
    m.output_norm = ml.create(ctx, "output_norm.weight", { n_embd });
    m.output = ml.create(ctx, "output.weight", { n_embd, n_vocab }, true);
}

void llm_create_attn(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il, const llm_attn_options & o) {
    const auto & hp = m.hparams;
    auto & l = m.layers[il];
    const int64_t n_embd = hp.n_embd;
    const int64_t n_q = (int64_t) hp.n_embd_head_k * hp.n_head;
    const int64_t n_k = hp.n_embd_k_gqa(), n_v = hp.n_embd_v_gqa();
    l.attn_norm = ml.create(ctx, blk(il, "attn_norm.weight"), { n_embd });
    l.wq = ml.create(ctx, blk(il, "attn_q.weight"), { n_embd, n_q });
    l.wk = ml.create(ctx, blk(il, "attn_k.weight"), { n_embd, n_k });
    l.wv = ml.create(ctx, blk(il, "attn_v.weight"), { n_embd, n_v });
    l.wo = ml.create(ctx, blk(il, "attn_output.weight"), { (int64_t) hp.n_embd_head_v * hp.n_head, n_embd });
    if (o.qkv_bias) {
        l.bq = ml.create(ctx, blk(il, "attn_q.bias"), { n_q });
        l.bk = ml.create(ctx, blk(il, "attn_k.bias"), { n_k });
        l.bv = ml.create(ctx, blk(il, "attn_v.bias"), { n_v });
    }
    if (o.o_bias) l.bo = ml.create(ctx, blk(il, "attn_output.bias"), { n_embd });
    if (o.sinks) l.attn_sinks = ml.create(ctx, blk(il, "attn_sinks.weight"), { (int64_t) hp.n_head });
    if (o.qk_norm) {
        l.attn_q_norm = ml.create(ctx, blk(il, "attn_q_norm.weight"), { hp.n_embd_head_k }, o.qk_norm_optional);
        l.attn_k_norm = ml.create(ctx, blk(il, "attn_k_norm.weight"), { hp.n_embd_head_k }, o.qk_norm_optional);
    }
}

void llm_create_ffn(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il, int64_t n_ff, const char * norm) {
    auto & l = m.layers[il];
    const int64_t n_embd = m.hparams.n_embd;
    l.ffn_norm = ml.create(ctx, blk(il, norm), { n_embd });
    l.ffn_gate = ml.create(ctx, blk(il, "ffn_gate.weight"), { n_embd, n_ff });
    l.ffn_up = ml.create(ctx, blk(il, "ffn_up.weight"), { n_embd, n_ff });
    l.ffn_down = ml.create(ctx, blk(il, "ffn_down.weight"), { n_ff, n_embd });
}

void llm_create_moe(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il, const char * norm) {
    const auto & hp = m.hparams;
    auto & l = m.layers[il];
    const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff_exp, n_expert = hp.n_expert;
    l.ffn_norm = ml.create(ctx, blk(il, norm), { n_embd });
    l.ffn_gate_inp = ml.create(ctx, blk(il, "ffn_gate_inp.weight"), { n_embd, n_expert });
    l.ffn_gate_exps = ml.create(ctx, blk(il, "ffn_gate_exps.weight"), { n_embd, n_ff, n_expert });
    l.ffn_up_exps = ml.create(ctx, blk(il, "ffn_up_exps.weight"), { n_embd, n_ff, n_expert });
    l.ffn_down_exps = ml.create(ctx, blk(il, "ffn_down_exps.weight"), { n_ff, n_embd, n_expert });
}

void llm_create_gated_shexp(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il) {
    auto & l = m.layers[il];
    const int64_t n_embd = m.hparams.n_embd, n_ff_sh = m.hparams.n_ff_shexp;
    l.ffn_gate_inp_shexp = ml.create(ctx, blk(il, "ffn_gate_inp_shexp.weight"), { n_embd });
    l.ffn_gate_shexp = ml.create(ctx, blk(il, "ffn_gate_shexp.weight"), { n_embd, n_ff_sh });
    l.ffn_up_shexp = ml.create(ctx, blk(il, "ffn_up_shexp.weight"), { n_embd, n_ff_sh });
    l.ffn_down_shexp = ml.create(ctx, blk(il, "ffn_down_shexp.weight"), { n_ff_sh, n_embd });
}

void llm_load_moe_hparams(llama_model_loader & ml, llama_hparams & hp, uint32_t n_ff_exp_default) {
    hp.n_expert = (uint32_t) ml.get_i64(ml.key("%s.expert_count"));
    hp.n_expert_used = (uint32_t) ml.get_i64(ml.key("%s.expert_used_count"));
    if (hp.n_expert == 0 || hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert) {
        throw llama_error(llama_format("%s: %s (%u) must be in [1, %s (%u)]", ml.path.c_str(),
                                       ml.key("%s.expert_used_count").c_str(), hp.n_expert_used,
                                       ml.key("%s.expert_count").c_str(), hp.n_expert));
    }
    hp.n_ff_exp = (uint32_t) ml.get_i64(ml.key("%s.expert_feed_forward_length"), n_ff_exp_default);
}

// The options took effect when the tensors were created: the graph follows the tensors the layer has.
ggml_tensor * llm_build_attn_block(llm_graph_context & g, int il, ggml_tensor * x, const llm_attn_options &) {
    const auto & hp = g.hp;
    const auto & l = g.layer(il);
    ggml_context * ctx = g.ctx0;
    // head counts from the weights: a -sm graph shard holds some of the heads
    const int64_t n_head = l.wq->ne[1] / hp.n_embd_head_k, n_head_kv = l.wk->ne[1] / hp.n_embd_head_k;
    ggml_tensor * q = ggml_reshape_3d(ctx, g.build_lin(l.wq, l.bq, x), hp.n_embd_head_k, n_head, g.n_tokens);
    ggml_tensor * k = ggml_reshape_3d(ctx, g.build_lin(l.wk, l.bk, x), hp.n_embd_head_k, n_head_kv, g.n_tokens);
    ggml_tensor * v = ggml_reshape_3d(ctx, g.build_lin(l.wv, l.bv, x), hp.n_embd_head_v, n_head_kv, g.n_tokens);
    if (l.attn_q_norm) q = g.build_norm(q, l.attn_q_norm, nullptr, true, il);
    if (l.attn_k_norm) k = g.build_norm(k, l.attn_k_norm, nullptr, true, il);
    q = g.build_rope(q, hp.n_rot, il);
    k = g.build_rope(k, hp.n_rot, il);
    const float kq_scale = 1.0f / std::sqrt((float) hp.n_embd_head_k);
    return g.build_lin(l.wo, l.bo, g.build_attn(il, q, k, v, kq_scale, l.attn_sinks));
}

ggml_tensor * llm_build_moe_gated_shexp(llm_graph_context & g, int il, ggml_tensor * x, bool norm_w) {
    const auto & hp = g.hp;
    const auto & l = g.layer(il);
    ggml_context * ctx = g.ctx0;
    ggml_tensor * moe = g.build_moe_ffn(x, l.ffn_gate_inp, l.ffn_up_exps, l.ffn_gate_exps, l.ffn_down_exps, nullptr,
                                        hp.n_expert, hp.n_expert_used, llm_graph_context::MOE_GATING_SOFTMAX, norm_w, 1.0f);
    if (!l.ffn_up_shexp) return moe;   // a -sm graph shard without columns of the shared expert
    ggml_tensor * shared = g.build_ffn_swiglu(x, l.ffn_up_shexp, l.ffn_gate_shexp, l.ffn_down_shexp);
    ggml_tensor * gate = ggml_sigmoid(ctx, ggml_mul_mat(ctx, l.ffn_gate_inp_shexp, x));   // [1, n_tokens]
    return ggml_add(ctx, moe, ggml_mul(ctx, shared, gate));
}
