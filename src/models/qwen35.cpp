// qwen35 (Qwen3.5 dense): three gated delta-net layers to one full-attention layer
// (full_attention_interval), each followed by a SwiGLU feed-forward. The attention layers have
// a sigmoid output gate (attn_q holds per head the query, then its gate), per-head q/k RMS
// norms and interleaved multi-section RoPE (IMROPE) over part of the head. The pieces are in
// llama-delta-net.cpp; the norm before the feed-forward is stored as post_attention_norm.
#include "llama-delta-net.h"

namespace {

const llm_delta_net_layout k_layout = llm_delta_net_layout::qwen35;

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    llm_load_delta_net_hparams(ml, hp);
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    const auto & hp = m.hparams;
    llm_create_embd_output(ml, m, ctx);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        llm_create_hybrid_mixer(ml, m, ctx, il, k_layout);
        llm_create_ffn(ml, m, ctx, il, hp.n_ff, "post_attention_norm.weight");
    }
}

ggml_tensor * build_graph(llm_graph_context & g) {
    return llm_build_delta_net_hybrid(g, k_layout, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
        const auto & l = g.layer(il);
        return g.build_ffn_swiglu(x, l.ffn_up, l.ffn_gate, l.ffn_down);
    });
}

llm_arch_impl arch_impl() {
    llm_arch_impl impl{ "qwen35", load_hparams, create_tensors, build_graph, llm_delta_net_kv_shapes, nullptr,
                        llm_delta_net_recurrent_shapes };
    impl.tensor_parallel = true;
    return impl;
}
const int registered = (llm_arch_register(arch_impl()), 0);

} // namespace
