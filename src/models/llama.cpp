// llama (LLaMA 1/2/3, Mistral, TinyStories, ...): RMS norm, normal RoPE, GQA, SwiGLU FFN.
#include "llama-block.h"

namespace {

const llm_attn_options k_attn = {};

const int registered = (llm_arch_register(llm_dense_llama_arch<k_attn, GGML_ROPE_TYPE_NORMAL>::impl("llama")), 0);

} // namespace
