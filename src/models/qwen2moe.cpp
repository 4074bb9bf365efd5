// qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B): qwen2's attention (q/k/v biases, NEOX RoPE) with routed
// experts (softmax router, top-k, weights not renormalized) plus a shared expert whose output is
// scaled per token by a sigmoid gate.
#include "llama-block.h"

#include <algorithm>

namespace {

const llm_attn_options k_attn = { /*qkv_bias=*/ true, /*qk_norm=*/ false };

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    hp.rope_type = GGML_ROPE_TYPE_NEOX;
    const uint32_t n_used = (uint32_t) ml.get_i64(ml.key("%s.expert_used_count"), 1);
    llm_load_moe_hparams(ml, hp, hp.n_ff / std::max<uint32_t>(1, n_used));
    hp.n_ff_shexp = (uint32_t) ml.get_i64(ml.key("%s.expert_shared_feed_forward_length"), hp.n_ff);
    hp.n_expert_shared = 1;
    hp.expert_weights_norm = false;
    hp.expert_gating_func = llm_graph_context::MOE_GATING_SOFTMAX;
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    llm_create_embd_output(ml, m, ctx);
    for (uint32_t il = 0; il < m.hparams.n_layer; ++il) {
        llm_create_attn(ml, m, ctx, il, k_attn);
        llm_create_moe(ml, m, ctx, il);
        llm_create_gated_shexp(ml, m, ctx, il);
    }
}

ggml_tensor * build_graph(llm_graph_context & g) {
    return llm_build_llama_family(g, k_attn, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
        return llm_build_moe_gated_shexp(g, (int) il, x, false);
    });
}

llm_arch_impl arch_impl() {
    llm_arch_impl impl{ "qwen2moe", load_hparams, create_tensors, build_graph };
    impl.tensor_parallel = true;
    return impl;
}
const int registered = (llm_arch_register(arch_impl()), 0);

} // namespace
