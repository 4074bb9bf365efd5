// qwen2: the llama block with biases on q, k and v, and NEOX RoPE.
#include "llama-block.h"

namespace {

const llm_attn_options k_attn = { /*qkv_bias=*/ true, /*qk_norm=*/ false };

const int registered = (llm_arch_register(llm_dense_llama_arch<k_attn, GGML_ROPE_TYPE_NEOX>::impl("qwen2")), 0);

} // namespace
