// qwen3: the llama block with per-head RMS norms on q and k before RoPE, NEOX RoPE, often tied output.
#include "llama-block.h"

namespace {

const llm_attn_options k_attn = { /*qkv_bias=*/ false, /*qk_norm=*/ true };

const int registered = (llm_arch_register(llm_dense_llama_arch<k_attn, GGML_ROPE_TYPE_NEOX>::impl("qwen3")), 0);

} // namespace
