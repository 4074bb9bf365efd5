// The pieces shared by the architectures built on the llama block (llama, qwen2, qwen3 and their
// MoE variants): embeddings and output head, the attention sub-block, the dense and the routed
// feed-forward tensors. An architecture file states which variant it uses (biases, q/k norms,
// experts) instead of repeating the tensor list and the graph.
#pragma once

#include "llama-graph.h"
#include "llama-model-loader.h"

struct llm_attn_options {
    bool qkv_bias = false;   // qwen2: biases on q, k and v
    bool qk_norm = false;    // qwen3: per-head RMS norms of q and k before RoPE
    bool o_bias = false;     // gpt-oss: bias on the output projection
    bool sinks = false;      // gpt-oss: per-head attention sink logits
    bool qk_norm_optional = false;   // with qk_norm: files may lack them (GLM-4.5); applied when present
};

// token_embd, output_norm, and output (absent = tied to token_embd)
void llm_create_embd_output(llama_model_loader & ml, llama_model & m, ggml_context * ctx);
// attn_norm, q/k/v/output projections (+ biases / q-k norms)
void llm_create_attn(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il, const llm_attn_options & o);
// ffn_norm + gate/up/down of width n_ff; norm: the pre-FFN norm's tensor name (GLM, gpt-oss and
// Qwen3.5 call it post_attention_norm)
void llm_create_ffn(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il, int64_t n_ff,
                    const char * norm = "ffn_norm.weight");
// ffn_norm + router + stacked expert gate/up/down of width n_ff_exp
void llm_create_moe(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il,
                    const char * norm = "ffn_norm.weight");
// a shared expert of width n_ff_shexp with its per-token gate (ffn_gate_inp_shexp)
void llm_create_gated_shexp(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il);
// the expert count keys, checked
void llm_load_moe_hparams(llama_model_loader & ml, llama_hparams & hp, uint32_t n_ff_exp_default);

// Normalized input x -> attention output projected back to n_embd (before the residual add).
ggml_tensor * llm_build_attn_block(llm_graph_context & g, int il, ggml_tensor * x, const llm_attn_options & o);
// Routed experts (softmax router, top-k, weights renormalized when norm_w) plus the shared
// expert scaled per token by sigmoid(ffn_gate_inp_shexp . x).
ggml_tensor * llm_build_moe_gated_shexp(llm_graph_context & g, int il, ggml_tensor * x, bool norm_w);
// The pre-norm residual stack: per layer, mix(g, il, x) (what mixes the tokens: attention, a
// recurrent layer) and ffn(g, il, x), each on the RMS-normed stream (attn_norm, ffn_norm) and
// added back; then the output head. Layers with attn_post_norm / ffn_post_norm (Gemma)
// normalize each branch before its residual add.
template <typename Mix, typename Ffn>
ggml_tensor * llm_build_prenorm_stack(llm_graph_context & g, Mix mix, Ffn ffn) {
    const auto & m = g.model;
    ggml_tensor * cur = g.build_inp_embd();
    for (uint32_t il = 0; il < g.hp.n_layer; ++il) {
        const auto & l = m.layers[il];
        ggml_tensor * x = g.build_norm(cur, l.attn_norm, nullptr, true, il);
        ggml_tensor * y = g.build_split((int) il, true, [&] { return mix(g, il, x); });
        if (l.attn_post_norm) y = g.build_norm(y, l.attn_post_norm, nullptr, true, il);
        cur = ggml_add(g.ctx0, cur, y);
        x = g.build_norm(cur, l.ffn_norm, nullptr, true, il);
        y = g.build_split((int) il, false, [&] { return ffn(g, il, x); });
        if (l.ffn_post_norm) y = g.build_norm(y, l.ffn_post_norm, nullptr, true, il);
        cur = ggml_add(g.ctx0, cur, y);
    }
    return g.build_output(cur);
}

// The whole llama-family forward pass; ffn(g, il, x) returns the feed-forward output of layer il.
template <typename Ffn>
ggml_tensor * llm_build_llama_family(llm_graph_context & g, const llm_attn_options & o, Ffn ffn) {
    return llm_build_prenorm_stack(
        g, [&o](llm_graph_context & g, uint32_t il, ggml_tensor * x) { return llm_build_attn_block(g, (int) il, x, o); }, ffn);
}

// The dense llama-family architectures (llama, qwen2, qwen3): common hyperparameters, the llama
// block with the attention variant Attn and RoPE type Rope, a SwiGLU feed-forward of width n_ff.
// An architecture file registers llm_dense_llama_arch<its options, its RoPE>::impl("name").
template <const llm_attn_options & Attn, int Rope>
struct llm_dense_llama_arch {
    static void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
        llm_load_common_hparams(ml, hp);
        hp.rope_type = Rope;
    }
    static void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
        llm_create_embd_output(ml, m, ctx);
        for (uint32_t il = 0; il < m.hparams.n_layer; ++il) {
            llm_create_attn(ml, m, ctx, il, Attn);
            llm_create_ffn(ml, m, ctx, il, m.hparams.n_ff);
        }
    }
    static ggml_tensor * build_graph(llm_graph_context & g) {
        return llm_build_llama_family(g, Attn, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
            const auto & l = g.layer(il);
            return g.build_ffn_swiglu(x, l.ffn_up, l.ffn_gate, l.ffn_down);
        });
    }
    static llm_arch_impl impl(const char * name) {
        llm_arch_impl a{ name, load_hparams, create_tensors, build_graph };
        a.tensor_parallel = true;
        return a;
    }
};
