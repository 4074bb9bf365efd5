// qwen35moe (Qwen3.5 MoE, e.g. Qwen3.5-35B-A3B): qwen35's layers (gated delta-net and gated
// attention, see qwen35.cpp) with routed experts (softmax router, top-k, renormalized) plus a
// shared expert scaled per token by sigmoid(ffn_gate_inp_shexp . x). Files carry no
// feed_forward_length: the expert widths come from expert_(shared_)feed_forward_length.
#include "llama-delta-net.h"

namespace {

const llm_delta_net_layout k_layout = llm_delta_net_layout::qwen35;

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    llm_load_delta_net_hparams(ml, hp);
    llm_load_moe_hparams(ml, hp, 0);
    hp.n_ff_shexp = (uint32_t) ml.get_i64(ml.key("%s.expert_shared_feed_forward_length"), hp.n_ff_exp);
    hp.n_expert_shared = 1;
    hp.expert_weights_norm = true;
    hp.expert_gating_func = llm_graph_context::MOE_GATING_SOFTMAX;
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    const auto & hp = m.hparams;
    llm_create_embd_output(ml, m, ctx);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        llm_create_hybrid_mixer(ml, m, ctx, il, k_layout);
        llm_create_moe(ml, m, ctx, il, "post_attention_norm.weight");
        llm_create_gated_shexp(ml, m, ctx, il);
    }
}

ggml_tensor * build_graph(llm_graph_context & g) {
    return llm_build_delta_net_hybrid(g, k_layout, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
        return llm_build_moe_gated_shexp(g, (int) il, x, true);
    });
}

const int registered = (llm_arch_register({ "qwen35moe", load_hparams, create_tensors, build_graph, llm_delta_net_kv_shapes,
                                            nullptr, llm_delta_net_recurrent_shapes }),
                        0);

} // namespace
