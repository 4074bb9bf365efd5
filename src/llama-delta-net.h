// The pieces of the hybrid models that interleave gated delta-net layers with attention
// (qwen35, qwen35moe, qwen3next): their hyper-parameters, the recurrent layer (input
// projections, short causal convolution, L2-normalised q/k, the gated delta rule over the
// per-sequence state, gated RMS norm, output projection), the attention layer with a sigmoid
// output gate, and the memory each layer keeps. Every full_attn_interval-th layer is attention.
//
// The two families store the recurrent layer's input projections differently:
//   qwen35:    attn_qkv [n_embd, q|k|v channels] and attn_gate (z), ssm_beta and ssm_alpha apart
//   qwen3next: ssm_in [n_embd, per key head (q, k, v group, z group)] and ssm_ba [n_embd, per key
//              head (betas, alphas)], the value heads of one key head kept together
#pragma once

#include "llama-block.h"

enum class llm_delta_net_layout { qwen35, qwen3next };

// ssm.* keys, full_attention_interval and rope.dimension_sections, checked
void llm_load_delta_net_hparams(llama_model_loader & ml, llama_hparams & hp);
// attn_norm + the recurrent layer's tensors
void llm_create_delta_net(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il, llm_delta_net_layout lay);
// attn_norm + q (with its per-head gate), k, v, output, q/k norms
void llm_create_gated_attn(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il);
// whichever of the two layer il is
void llm_create_hybrid_mixer(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il, llm_delta_net_layout lay);

// Memory hooks (llm_arch_impl::kv_shapes / recurrent_shapes): attention layers keep K/V rows,
// recurrent layers a convolution window and the delta-rule state per sequence.
void llm_delta_net_kv_shapes(const llama_model & m, const llama_cparams & cp, std::vector<llama_kv_layer_shape> & out);
void llm_delta_net_recurrent_shapes(const llama_model & m, std::vector<llama_recurrent_layer_shape> & out);

// Normalized input x [n_embd, n_tokens] -> the layer's output before the residual add.
ggml_tensor * llm_build_delta_net(llm_graph_context & g, int il, ggml_tensor * x, llm_delta_net_layout lay);
ggml_tensor * llm_build_gated_attn(llm_graph_context & g, int il, ggml_tensor * x);

// The whole hybrid forward pass; ffn(g, il, x) returns layer il's feed-forward output.
template <typename Ffn>
ggml_tensor * llm_build_delta_net_hybrid(llm_graph_context & g, llm_delta_net_layout lay, Ffn ffn) {
    return llm_build_prenorm_stack(
        g,
        [lay](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
            return g.hp.is_recurrent(il) ? llm_build_delta_net(g, (int) il, x, lay) : llm_build_gated_attn(g, (int) il, x);
        },
        ffn);
}

// The MoE variants (qwen35moe, qwen3next): routed experts (softmax router, top-k, weights
// renormalized) plus a shared expert scaled per token by sigmoid(ffn_gate_inp_shexp . x) after
// every mixer. Their files carry no feed_forward_length: expert_(shared_)feed_forward_length.
void llm_load_delta_net_moe_hparams(llama_model_loader & ml, llama_hparams & hp);
void llm_create_delta_net_moe(llama_model_loader & ml, llama_model & m, ggml_context * ctx, llm_delta_net_layout lay);
ggml_tensor * llm_build_delta_net_moe(llm_graph_context & g, llm_delta_net_layout lay);
