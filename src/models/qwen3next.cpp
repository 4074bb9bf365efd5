// qwen3next (Qwen3-Next-80B-A3B): qwen35moe's stack (three gated delta-net layers to one gated
// attention layer, routed experts plus a gated shared expert) with Qwen3-Next's arrangement of
// the delta-net input projections (ssm_in and ssm_ba, grouped per key head, see
// llama-delta-net.h) and plain NEOX RoPE over part of each attention head (no sections).
#include "llama-delta-net.h"

namespace {

const llm_delta_net_layout k_layout = llm_delta_net_layout::qwen3next;

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) { llm_create_delta_net_moe(ml, m, ctx, k_layout); }

ggml_tensor * build_graph(llm_graph_context & g) { return llm_build_delta_net_moe(g, k_layout); }

llm_arch_impl arch_impl() {
    llm_arch_impl impl{ "qwen3next", llm_load_delta_net_moe_hparams, create_tensors, build_graph, llm_delta_net_kv_shapes, nullptr,
                        llm_delta_net_recurrent_shapes };
    impl.tensor_parallel = true;
    return impl;
}
const int registered = (llm_arch_register(arch_impl()), 0);

} // namespace
