// qwen35moe (Qwen3.5 MoE, e.g. Qwen3.5-35B-A3B): qwen35's layers (gated delta-net and gated
// attention, see qwen35.cpp) with routed experts plus a gated shared expert in place of the
// dense feed-forward (llm_build_delta_net_moe).
#include "llama-delta-net.h"

namespace {

const llm_delta_net_layout k_layout = llm_delta_net_layout::qwen35;

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) { llm_create_delta_net_moe(ml, m, ctx, k_layout); }

ggml_tensor * build_graph(llm_graph_context & g) { return llm_build_delta_net_moe(g, k_layout); }

llm_arch_impl arch_impl() {
    llm_arch_impl impl{ "qwen35moe", llm_load_delta_net_moe_hparams, create_tensors, build_graph, llm_delta_net_kv_shapes,
                        nullptr, llm_delta_net_recurrent_shapes };
    impl.tensor_parallel = true;
    return impl;
}
const int registered = (llm_arch_register(arch_impl()), 0);

} // namespace
