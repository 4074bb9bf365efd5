// qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B): qwen2's attention (q/k/v biases, NEOX RoPE) with routed
// experts (softmax router, top-k, weights not renormalized) plus a shared expert whose output is
// scaled per token by a sigmoid gate.
#include "llama-graph.h"
#include "llama-model-loader.h"

#include <cmath>

namespace {

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    hp.rope_type = GGML_ROPE_TYPE_NEOX;
    hp.n_expert = (uint32_t) ml.get_i64(ml.key("%s.expert_count"));
    hp.n_expert_used = (uint32_t) ml.get_i64(ml.key("%s.expert_used_count"));
    if (hp.n_expert == 0 || hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert) {
        throw llama_error(llama_format("%s: %s (%u) must be in [1, %s (%u)]", ml.path.c_str(),
                                       ml.key("%s.expert_used_count").c_str(), hp.n_expert_used,
                                       ml.key("%s.expert_count").c_str(), hp.n_expert));
    }
    hp.n_ff_exp = (uint32_t) ml.get_i64(ml.key("%s.expert_feed_forward_length"), hp.n_ff / hp.n_expert_used);
    hp.n_ff_shexp = (uint32_t) ml.get_i64(ml.key("%s.expert_shared_feed_forward_length"), hp.n_ff);
    hp.n_expert_shared = 1;
    hp.expert_weights_norm = false;
    hp.expert_gating_func = llm_graph_context::MOE_GATING_SOFTMAX;
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    const auto & hp = m.hparams;
    const int64_t n_embd = hp.n_embd, n_vocab = hp.n_vocab, n_expert = hp.n_expert;
    const int64_t n_ff_exp = hp.n_ff_exp, n_ff_sh = hp.n_ff_shexp;
    const int64_t n_q = (int64_t) hp.n_embd_head_k * hp.n_head;
    m.tok_embd = ml.create(ctx, "token_embd.weight", { n_embd, n_vocab });
    m.output_norm = ml.create(ctx, "output_norm.weight", { n_embd });
    m.output = ml.create(ctx, "output.weight", { n_embd, n_vocab }, true);
    for (uint32_t i = 0; i < hp.n_layer; ++i) {
        auto & l = m.layers[i];
        auto name = [i](const char * t) { return llama_format("blk.%u.%s", i, t); };
        l.attn_norm = ml.create(ctx, name("attn_norm.weight"), { n_embd });
        l.wq = ml.create(ctx, name("attn_q.weight"), { n_embd, n_q });
        l.wk = ml.create(ctx, name("attn_k.weight"), { n_embd, (int64_t) hp.n_embd_k_gqa() });
        l.wv = ml.create(ctx, name("attn_v.weight"), { n_embd, (int64_t) hp.n_embd_v_gqa() });
        l.bq = ml.create(ctx, name("attn_q.bias"), { n_q });
        l.bk = ml.create(ctx, name("attn_k.bias"), { (int64_t) hp.n_embd_k_gqa() });
        l.bv = ml.create(ctx, name("attn_v.bias"), { (int64_t) hp.n_embd_v_gqa() });
        l.wo = ml.create(ctx, name("attn_output.weight"), { (int64_t) hp.n_embd_head_v * hp.n_head, n_embd });
        l.ffn_norm = ml.create(ctx, name("ffn_norm.weight"), { n_embd });
        l.ffn_gate_inp = ml.create(ctx, name("ffn_gate_inp.weight"), { n_embd, n_expert });
        l.ffn_gate_exps = ml.create(ctx, name("ffn_gate_exps.weight"), { n_embd, n_ff_exp, n_expert });
        l.ffn_up_exps = ml.create(ctx, name("ffn_up_exps.weight"), { n_embd, n_ff_exp, n_expert });
        l.ffn_down_exps = ml.create(ctx, name("ffn_down_exps.weight"), { n_ff_exp, n_embd, n_expert });
        l.ffn_gate_inp_shexp = ml.create(ctx, name("ffn_gate_inp_shexp.weight"), { n_embd });
        l.ffn_gate_shexp = ml.create(ctx, name("ffn_gate_shexp.weight"), { n_embd, n_ff_sh });
        l.ffn_up_shexp = ml.create(ctx, name("ffn_up_shexp.weight"), { n_embd, n_ff_sh });
        l.ffn_down_shexp = ml.create(ctx, name("ffn_down_shexp.weight"), { n_ff_sh, n_embd });
    }
}

ggml_tensor * build_graph(llm_graph_context & g) {
    const auto & hp = g.hp;
    const auto & m = g.model;
    ggml_context * ctx = g.ctx0;
    const float kq_scale = 1.0f / std::sqrt((float) hp.n_embd_head_k);
    ggml_tensor * cur = g.build_inp_embd();
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const auto & l = m.layers[il];
        ggml_tensor * x = g.build_norm(cur, l.attn_norm, nullptr, true, il);
        ggml_tensor * q = ggml_reshape_3d(ctx, g.build_lin(l.wq, l.bq, x), hp.n_embd_head_k, hp.n_head, g.n_tokens);
        ggml_tensor * k = ggml_reshape_3d(ctx, g.build_lin(l.wk, l.bk, x), hp.n_embd_head_k, hp.n_head_kv, g.n_tokens);
        ggml_tensor * v = ggml_reshape_3d(ctx, g.build_lin(l.wv, l.bv, x), hp.n_embd_head_v, hp.n_head_kv, g.n_tokens);
        q = g.build_rope(q, hp.n_rot);
        k = g.build_rope(k, hp.n_rot);
        ggml_tensor * attn = g.build_attn(il, q, k, v, kq_scale);
        cur = ggml_add(ctx, cur, ggml_mul_mat(ctx, l.wo, attn));
        x = g.build_norm(cur, l.ffn_norm, nullptr, true, il);
        ggml_tensor * moe = g.build_moe_ffn(x, l.ffn_gate_inp, l.ffn_up_exps, l.ffn_gate_exps, l.ffn_down_exps, nullptr,
                                            hp.n_expert, hp.n_expert_used, llm_graph_context::MOE_GATING_SOFTMAX, false, 1.0f);
        ggml_tensor * shared = g.build_ffn_swiglu(x, l.ffn_up_shexp, l.ffn_gate_shexp, l.ffn_down_shexp);
        ggml_tensor * gate = ggml_sigmoid(ctx, ggml_mul_mat(ctx, l.ffn_gate_inp_shexp, x));   // [1, n_tokens]
        cur = ggml_add(ctx, cur, ggml_add(ctx, moe, ggml_mul(ctx, shared, gate)));
    }
    return g.build_output(cur);
}

void register_arch() { llm_arch_register({ "qwen2moe", load_hparams, create_tensors, build_graph }); }
const int registered = (register_arch(), 0);

} // namespace
