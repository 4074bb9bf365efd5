// glm4moe (GLM-4.5 / 4.6 / 4.7): the llama block with q/k/v biases, optional per-head q/k RMS
// norms and NEOX RoPE on the first rope.dimension_count values of each head (half of them in the
// released models); leading dense layers, then routed experts chosen by sigmoid scores plus the
// exp_probs_b selection bias, weights renormalized and scaled, plus shared experts. The pre-FFN
// norm is called post_attention_norm. The last nextn_predict_layers blocks are the NextN
// (multi-token prediction) layers: their tensors load, for speculative decoding later, but the
// forward pass and the KV cache stop before them.
#include "llama-block.h"

namespace {

llm_attn_options attn_options() {
    llm_attn_options o;
    o.qkv_bias = true;
    o.qk_norm = true;
    o.qk_norm_optional = true;   // absent in some GLM-4.5 files
    return o;
}
const llm_attn_options k_attn = attn_options();

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    hp.rope_type = GGML_ROPE_TYPE_NEOX;
    llm_load_moe_hparams(ml, hp, hp.n_ff);
    hp.n_expert_shared = (uint32_t) ml.get_i64(ml.key("%s.expert_shared_count"), 0);
    hp.n_ff_shexp = hp.n_ff_exp * hp.n_expert_shared;
    hp.n_layer_dense_lead = (uint32_t) ml.get_i64(ml.key("%s.leading_dense_block_count"), 0);
    hp.expert_weights_scale = (float) ml.get_f64(ml.key("%s.expert_weights_scale"), 1.0);
    hp.expert_weights_norm = ml.get_bool(ml.key("%s.expert_weights_norm"), false);
    const int64_t gating = ml.get_i64(ml.key("%s.expert_gating_func"), llm_graph_context::MOE_GATING_SIGMOID);
    if (gating != llm_graph_context::MOE_GATING_SOFTMAX && gating != llm_graph_context::MOE_GATING_SIGMOID) {
        throw llama_error(llama_format("%s: %s (%lld) must be 1 (softmax) or 2 (sigmoid)", ml.path.c_str(),
                                       ml.key("%s.expert_gating_func").c_str(), (long long) gating));
    }
    hp.expert_gating_func = (int) gating;
    hp.n_layer_nextn = (uint32_t) ml.get_i64(ml.key("%s.nextn_predict_layers"), 0);
    if (hp.n_layer_nextn >= hp.n_layer) {
        throw llama_error(llama_format("%s: %s (%u) must be below %s (%u)", ml.path.c_str(),
                                       ml.key("%s.nextn_predict_layers").c_str(), hp.n_layer_nextn,
                                       ml.key("%s.block_count").c_str(), hp.n_layer));
    }
    hp.n_layer -= hp.n_layer_nextn;   // the layers that run; the NextN ones follow them
}

void create_layer(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il) {
    const auto & hp = m.hparams;
    auto & l = m.layers[il];
    const int64_t n_embd = hp.n_embd, n_ff_sh = hp.n_ff_shexp;
    auto name = [il](const char * t) { return llama_format("blk.%u.%s", il, t); };
    llm_create_attn(ml, m, ctx, il, k_attn);
    if (il < hp.n_layer_dense_lead) {
        llm_create_ffn(ml, m, ctx, il, hp.n_ff, "post_attention_norm.weight");
        return;
    }
    llm_create_moe(ml, m, ctx, il, "post_attention_norm.weight");
    l.ffn_exp_probs_b = ml.create(ctx, name("exp_probs_b.bias"), { (int64_t) hp.n_expert });
    if (hp.n_expert_shared > 0) {
        l.ffn_gate_shexp = ml.create(ctx, name("ffn_gate_shexp.weight"), { n_embd, n_ff_sh });
        l.ffn_up_shexp = ml.create(ctx, name("ffn_up_shexp.weight"), { n_embd, n_ff_sh });
        l.ffn_down_shexp = ml.create(ctx, name("ffn_down_shexp.weight"), { n_ff_sh, n_embd });
    }
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    const auto & hp = m.hparams;
    const int64_t n_embd = hp.n_embd;
    llm_create_embd_output(ml, m, ctx);
    m.layers.resize(hp.n_layer + hp.n_layer_nextn);
    for (uint32_t il = 0; il < hp.n_layer + hp.n_layer_nextn; ++il) create_layer(ml, m, ctx, il);
    for (uint32_t il = hp.n_layer; il < hp.n_layer + hp.n_layer_nextn; ++il) {
        auto & l = m.layers[il];
        auto name = [il](const char * t) { return llama_format("blk.%u.%s", il, t); };
        l.nextn_eh_proj = ml.create(ctx, name("nextn.eh_proj.weight"), { 2 * n_embd, n_embd });
        l.nextn_enorm = ml.create(ctx, name("nextn.enorm.weight"), { n_embd });
        l.nextn_hnorm = ml.create(ctx, name("nextn.hnorm.weight"), { n_embd });
        l.nextn_shared_head_norm = ml.create(ctx, name("nextn.shared_head_norm.weight"), { n_embd }, true);
        // optional per-layer heads of some conversions (the shared ones are used otherwise)
        ml.create(ctx, name("nextn.embed_tokens.weight"), { n_embd, (int64_t) hp.n_vocab }, true);
        ml.create(ctx, name("nextn.shared_head_head.weight"), { n_embd, (int64_t) hp.n_vocab }, true);
    }
}

ggml_tensor * build_graph(llm_graph_context & g) {
    return llm_build_llama_family(g, k_attn, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
        const auto & hp = g.hp;
        const auto & l = g.layer(il);
        if (il < hp.n_layer_dense_lead) return g.build_ffn_swiglu(x, l.ffn_up, l.ffn_gate, l.ffn_down);
        ggml_tensor * moe = g.build_moe_ffn(x, l.ffn_gate_inp, l.ffn_up_exps, l.ffn_gate_exps, l.ffn_down_exps, l.ffn_exp_probs_b,
                                            hp.n_expert, hp.n_expert_used, (llm_graph_context::moe_gating) hp.expert_gating_func,
                                            hp.expert_weights_norm, hp.expert_weights_scale);
        if (!l.ffn_up_shexp) return moe;
        return ggml_add(g.ctx0, moe, g.build_ffn_swiglu(x, l.ffn_up_shexp, l.ffn_gate_shexp, l.ffn_down_shexp));
    });
}

llm_arch_impl arch_impl() {
    llm_arch_impl impl{ "glm4moe", load_hparams, create_tensors, build_graph };
    impl.tensor_parallel = true;
    return impl;
}
const int registered = (llm_arch_register(arch_impl()), 0);

} // namespace
