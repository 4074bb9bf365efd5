// gpt-oss (OpenAI gpt-oss-20b / 120b): the llama block with biases on q, k, v and the output
// projection, a learned sink logit per head in every attention softmax, NEOX RoPE with YaRN, and
// sliding-window (even layers) and global (odd layers) attention alternating. The feed-forward is
// routed experts only: a biased router, the top-k chosen by logit and weighted by a softmax over
// the chosen logits, each expert's projections with biases and a clamped SwiGLU. The pre-FFN norm
// is called post_attention_norm. Released files store the experts as MXFP4.
#include "llama-block.h"

namespace {

llm_attn_options attn_options() {
    llm_attn_options o;
    o.qkv_bias = true;
    o.o_bias = true;
    o.sinks = true;
    return o;
}
const llm_attn_options k_attn = attn_options();

// fixed by the model (not in the files): every other layer slides; the SwiGLU's clamp and slope
constexpr uint32_t k_swa_period = 2;
constexpr float k_swiglu_alpha = 1.702f;
constexpr float k_swiglu_limit = 7.0f;

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    hp.rope_type = GGML_ROPE_TYPE_NEOX;
    llm_load_moe_hparams(ml, hp, hp.n_ff);
    hp.n_swa = (uint32_t) ml.get_i64(ml.key("%s.attention.sliding_window"));
    hp.set_swa_pattern(k_swa_period);
    hp.rope_freq_base_swa = hp.rope_freq_base;   // both kinds of layer rotate alike
    hp.rope_freq_scale_swa = hp.rope_freq_scale;
    hp.expert_gating_func = llm_graph_context::MOE_GATING_SOFTMAX_WEIGHT;
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    const auto & hp = m.hparams;
    const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff_exp, n_expert = hp.n_expert;
    llm_create_embd_output(ml, m, ctx);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        auto & l = m.layers[il];
        auto name = [il](const char * t) { return llama_format("blk.%u.%s", il, t); };
        llm_create_attn(ml, m, ctx, il, k_attn);
        llm_create_moe(ml, m, ctx, il, "post_attention_norm.weight");
        l.ffn_gate_inp_b = ml.create(ctx, name("ffn_gate_inp.bias"), { n_expert });
        l.ffn_gate_exps_b = ml.create(ctx, name("ffn_gate_exps.bias"), { n_ff, n_expert });
        l.ffn_up_exps_b = ml.create(ctx, name("ffn_up_exps.bias"), { n_ff, n_expert });
        l.ffn_down_exps_b = ml.create(ctx, name("ffn_down_exps.bias"), { n_embd, n_expert });
    }
}

ggml_tensor * build_graph(llm_graph_context & g) {
    return llm_build_llama_family(g, k_attn, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
        const auto & hp = g.hp;
        const auto & l = g.layer(il);
        llm_graph_context::moe_extras ex;
        ex.gate_inp_b = l.ffn_gate_inp_b;
        ex.up_b = l.ffn_up_exps_b;
        ex.gate_b = l.ffn_gate_exps_b;
        ex.down_b = l.ffn_down_exps_b;
        ex.swiglu_alpha = k_swiglu_alpha;
        ex.swiglu_limit = k_swiglu_limit;
        return g.build_moe_ffn(x, l.ffn_gate_inp, l.ffn_up_exps, l.ffn_gate_exps, l.ffn_down_exps, nullptr, hp.n_expert,
                               hp.n_expert_used, llm_graph_context::MOE_GATING_SOFTMAX_WEIGHT, false, 1.0f, &ex);
    });
}

llm_arch_impl arch_impl() {
    llm_arch_impl impl{ "gpt-oss", load_hparams, create_tensors, build_graph };
    impl.tensor_parallel = true;
    return impl;
}
const int registered = (llm_arch_register(arch_impl()), 0);

} // namespace
