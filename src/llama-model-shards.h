// -sm graph (tensor parallel): each device's part of a layer. A layer is cut by attention heads
// (whole KV-head groups, with the query heads that read them; for MLA query heads, each part
// keeping its own copy of the shared latent cache) and by FFN columns (per expert for MoE): a
// device holds the rows of wq/wk/wv (and their biases, sinks) for its heads (MLA: of attn_q_b,
// attn_kv_b, and its heads' attn_k_b / attn_v_b) and the matching columns of wo, the rows of ffn_gate/ffn_up and the matching columns of ffn_down, and
// copies of what every part needs whole (q/k norms, the router). Its attention output and FFN
// output are then partial sums of the layer's, and the graph adds them up (an all-reduce,
// llm_graph_context::build_all_reduce). Biases added after a projection (attn_output.bias, the
// experts' down biases) belong to the first shard only, so that the sum counts them once.
//
// A gated delta-net mixer is cut by value heads (qwen35's layout; qwen3next's by whole key heads
// with their value heads), each part with its share of the recurrent state. With by_expert
// (--moe-split experts) the routed experts go whole to the devices instead of by columns.
//
// Shares come from -ts; a device may get no heads or no columns of a layer. A layer whose shapes
// cannot be cut on block boundaries of its weight types, or whose architecture builds its graph
// without shards (llm_arch_impl::tensor_parallel false), goes whole to one device instead.
#pragma once

#include "llama-model.h"

#include <functional>
#include <vector>

// Per layer: the units each device gets (empty: the layer is not cut). Computed from the weights'
// shapes and types before their data is read. The attention (mixer) and the FFN are cut or kept
// whole each on its own: a part with a tensor an -ot rule places stays whole, where the rule and
// the layer plan put its tensors, and the other part is still cut.
struct llama_shard_plan {
    std::vector<std::vector<uint32_t>> heads_kv;   // [layer][device]: KV heads (empty: attention whole)
    std::vector<std::vector<uint32_t>> ff;         // [layer][device]: FFN columns, per expert (empty: FFN whole)
    std::vector<bool> by_expert;                   // [layer]: ff counts whole routed experts instead
    bool attn_cut(uint32_t il) const { return il < heads_kv.size() && !heads_kv[il].empty(); }
    bool ffn_cut(uint32_t il) const { return il < ff.size() && !ff[il].empty(); }
    bool split(uint32_t il) const { return attn_cut(il) || ffn_cut(il); }
    // whether t, a tensor of layer il, belongs to a part of that layer which is kept whole
    bool in_whole_part(const llama_layer & l, uint32_t il, const ggml_tensor * t) const;
};

// The tensors of a layer's attention (or delta-net mixer) part, or of its FFN part, that its
// shards are cut or copied from.
std::vector<const ggml_tensor *> llama_shard_part(const llama_layer & l, bool attn);

// pinned(t): an -ot rule places t, so the part holding it is not cut. by_expert: routed experts
// go whole to the devices (where the layer's router allows it: no per-expert biases, gating
// other than gpt-oss's softmax over the chosen), the shared expert still by columns.
llama_shard_plan llama_plan_shards(const llama_model & m, const std::vector<double> & shares, bool by_expert,
                                   const std::function<bool(const ggml_tensor *)> & pinned);

// Create the shards of the planned layers in the devices' buffers and copy their slices from the
// full weights (host memory). Appends buffers to m.buffers.
void llama_make_shards(llama_model & m, const llama_shard_plan & plan);

// Whether a layer tensor of a cut layer stays whole (norms applied to the full residual stream).
bool llama_shard_keeps_whole(const llama_layer & l, const ggml_tensor * t);
