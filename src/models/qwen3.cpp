// qwen3: llama's block with per-head RMS norms on q and k before RoPE, NEOX RoPE, often tied output.
#include "llama-graph.h"
#include "llama-model-loader.h"

#include <cmath>

namespace {

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    hp.rope_type = GGML_ROPE_TYPE_NEOX;
}

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    const auto & hp = m.hparams;
    const int64_t n_embd = hp.n_embd, n_vocab = hp.n_vocab;
    m.tok_embd = ml.create(ctx, "token_embd.weight", { n_embd, n_vocab });
    m.output_norm = ml.create(ctx, "output_norm.weight", { n_embd });
    m.output = ml.create(ctx, "output.weight", { n_embd, n_vocab }, true);
    for (uint32_t i = 0; i < hp.n_layer; ++i) {
        auto & l = m.layers[i];
        auto name = [i](const char * t) { return llama_format("blk.%u.%s", i, t); };
        l.attn_norm = ml.create(ctx, name("attn_norm.weight"), { n_embd });
        l.wq = ml.create(ctx, name("attn_q.weight"), { n_embd, (int64_t) hp.n_embd_head_k * hp.n_head });
        l.wk = ml.create(ctx, name("attn_k.weight"), { n_embd, (int64_t) hp.n_embd_k_gqa() });
        l.wv = ml.create(ctx, name("attn_v.weight"), { n_embd, (int64_t) hp.n_embd_v_gqa() });
        l.wo = ml.create(ctx, name("attn_output.weight"), { (int64_t) hp.n_embd_head_v * hp.n_head, n_embd });
        l.attn_q_norm = ml.create(ctx, name("attn_q_norm.weight"), { hp.n_embd_head_k });
        l.attn_k_norm = ml.create(ctx, name("attn_k_norm.weight"), { hp.n_embd_head_k });
        l.ffn_norm = ml.create(ctx, name("ffn_norm.weight"), { n_embd });
        l.ffn_gate = ml.create(ctx, name("ffn_gate.weight"), { n_embd, hp.n_ff });
        l.ffn_up = ml.create(ctx, name("ffn_up.weight"), { n_embd, hp.n_ff });
        l.ffn_down = ml.create(ctx, name("ffn_down.weight"), { hp.n_ff, n_embd });
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
        ggml_tensor * q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.wq, x), hp.n_embd_head_k, hp.n_head, g.n_tokens);
        ggml_tensor * k = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.wk, x), hp.n_embd_head_k, hp.n_head_kv, g.n_tokens);
        ggml_tensor * v = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.wv, x), hp.n_embd_head_v, hp.n_head_kv, g.n_tokens);
        q = g.build_rope(g.build_norm(q, l.attn_q_norm, nullptr, true, il), hp.n_rot);
        k = g.build_rope(g.build_norm(k, l.attn_k_norm, nullptr, true, il), hp.n_rot);
        ggml_tensor * attn = g.build_attn(il, q, k, v, kq_scale);
        cur = ggml_add(ctx, cur, ggml_mul_mat(ctx, l.wo, attn));
        x = g.build_norm(cur, l.ffn_norm, nullptr, true, il);
        cur = ggml_add(ctx, cur, g.build_ffn_swiglu(x, l.ffn_up, l.ffn_gate, l.ffn_down));
    }
    return g.build_output(cur);
}

void register_arch() { llm_arch_register({ "qwen3", load_hparams, create_tensors, build_graph }); }
const int registered = (register_arch(), 0);

} // namespace
