// qwen3moe (Qwen3-30B-A3B, 235B-A22B): qwen3's attention (per-head q/k RMS norms, NEOX RoPE) with
// a routed mixture of experts in place of the dense feed-forward: softmax router, top-k experts,
// chosen weights renormalized to sum 1. No shared expert.
#include "llama-block.h"

namespace {

const llm_attn_options k_attn = { /*qkv_bias=*/ false, /*qk_norm=*/ true };

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    hp.rope_type = GGML_ROPE_TYPE_NEOX;
    llm_load_moe_hparams(ml, hp, hp.n_ff);
    hp.expert_weights_norm = true;
    hp.expert_gating_func = llm_graph_context::MOE_GATING_SOFTMAX;
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    llm_create_embd_output(ml, m, ctx);
    for (uint32_t il = 0; il < m.hparams.n_layer; ++il) {
        llm_create_attn(ml, m, ctx, il, k_attn);
        llm_create_moe(ml, m, ctx, il);
    }
}

ggml_tensor * build_graph(llm_graph_context & g) {
    return llm_build_llama_family(g, k_attn, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
        const auto & hp = g.hp;
        const auto & l = g.layer(il);
        return g.build_moe_ffn(x, l.ffn_gate_inp, l.ffn_up_exps, l.ffn_gate_exps, l.ffn_down_exps, nullptr,
                               hp.n_expert, hp.n_expert_used, llm_graph_context::MOE_GATING_SOFTMAX, true, 1.0f);
    });
}

llm_arch_impl arch_impl() {
    llm_arch_impl impl{ "qwen3moe", load_hparams, create_tensors, build_graph };
    impl.tensor_parallel = true;
    return impl;
}
const int registered = (llm_arch_register(arch_impl()), 0);

} // namespace
