// gemma3 (Gemma 3): the llama block with per-head q/k RMS norms, NEOX RoPE, GeGLU (tanh GELU) in
// the feed-forward, an RMS norm on each branch's output before its residual add, token
// embeddings scaled by sqrt(n_embd) and a tied output head. Five sliding-window layers (RoPE base
// 10000, no scaling) alternate with one global layer (the file's base and linear scaling). The
// norm weights already carry Gemma's "1 +" (the converter adds it), so they multiply as usual.
#include "llama-block.h"

#include <cmath>

namespace {

const llm_attn_options k_attn = { /*qkv_bias=*/ false, /*qk_norm=*/ true };

// Gemma 3 places a global layer every 6th layer; the file does not say so (llama.cpp hard-codes it too)
constexpr uint32_t k_swa_period = 6;

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    hp.rope_type = GGML_ROPE_TYPE_NEOX;
    hp.n_swa = (uint32_t) ml.get_i64(ml.key("%s.attention.sliding_window"));
    hp.set_swa_pattern(k_swa_period);
    hp.rope_freq_base_swa = 10000.0f;
    hp.rope_freq_scale_swa = 1.0f;
    hp.f_embedding_scale = std::sqrt((float) hp.n_embd);
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    const int64_t n_embd = m.hparams.n_embd;
    llm_create_embd_output(ml, m, ctx);
    for (uint32_t il = 0; il < m.hparams.n_layer; ++il) {
        auto & l = m.layers[il];
        auto name = [il](const char * t) { return llama_format("blk.%u.%s", il, t); };
        llm_create_attn(ml, m, ctx, il, k_attn);
        l.attn_post_norm = ml.create(ctx, name("post_attention_norm.weight"), { n_embd });
        llm_create_ffn(ml, m, ctx, il, m.hparams.n_ff);
        l.ffn_post_norm = ml.create(ctx, name("post_ffw_norm.weight"), { n_embd });
    }
}

ggml_tensor * build_graph(llm_graph_context & g) {
    return llm_build_llama_family(g, k_attn, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
        const auto & l = g.layer(il);
        return g.build_ffn_glu(x, l.ffn_up, l.ffn_gate, l.ffn_down, GGML_GLU_OP_GEGLU);
    });
}

llm_arch_impl arch_impl() {
    llm_arch_impl impl{ "gemma3", load_hparams, create_tensors, build_graph };
    impl.tensor_parallel = true;
    return impl;
}
const int registered = (llm_arch_register(arch_impl()), 0);

} // namespace
