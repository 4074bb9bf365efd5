// qwen3: the llama block with per-head RMS norms on q and k before RoPE, NEOX RoPE, often tied output.
#include "llama-block.h"

namespace {

const llm_attn_options k_attn = { /*qkv_bias=*/ false, /*qk_norm=*/ true };

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    hp.rope_type = GGML_ROPE_TYPE_NEOX;
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    llm_create_embd_output(ml, m, ctx);
    for (uint32_t il = 0; il < m.hparams.n_layer; ++il) {
        llm_create_attn(ml, m, ctx, il, k_attn);
        llm_create_ffn(ml, m, ctx, il, m.hparams.n_ff);
    }
}

ggml_tensor * build_graph(llm_graph_context & g) {
    return llm_build_llama_family(g, k_attn, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
        const auto & l = g.layer(il);
        return g.build_ffn_swiglu(x, l.ffn_up, l.ffn_gate, l.ffn_down);
    });
}

llm_arch_impl arch_impl() {
    llm_arch_impl impl{ "qwen3", load_hparams, create_tensors, build_graph };
    impl.tensor_parallel = true;
    return impl;
}
const int registered = (llm_arch_register(arch_impl()), 0);

} // namespace
