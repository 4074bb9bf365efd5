// Building blocks for architecture graphs: the inputs of a micro-batch, norms, attention over the
// KV cache (flash or plain), feed-forward, experts, and the output head. An architecture file
// composes these in its build_graph.
#pragma once

#include "llama-kv-cache.h"
#include "llama-model.h"

#include <vector>

struct llama_cparams {
    uint32_t n_ctx = 0;
    uint32_t n_batch = 0;
    uint32_t n_ubatch = 0;
    uint32_t n_seq_max = 1;
    int32_t  n_threads = 1;
    int32_t  n_threads_batch = 1;
    bool     flash_attn = true;
    bool     fused_moe = true;
    int32_t  mla = 3;
    int32_t  attn_max_batch = 0;
    int32_t  ser_n_min = 0;
    float    ser_threshold = 0.0f;
    float    rope_freq_base = 0.0f;
    float    rope_freq_scale = 0.0f;
};

// One micro-batch as the graph sees it.
struct llama_ubatch {
    uint32_t n_tokens = 0;
    const llama_token * token = nullptr;
    const llama_pos * pos = nullptr;
    std::vector<std::vector<llama_seq_id>> seq;    // per token
    std::vector<int32_t> out_rows;                 // token indices whose logits are wanted
    std::vector<uint32_t> cells;                   // KV cell per token
};

struct llm_graph_context {
    const llama_model & model;
    const llama_hparams & hp;
    const llama_cparams & cp;
    const llama_ubatch & ub;
    llama_kv_cache & kv;
    ggml_context * ctx0;
    ggml_cgraph * gf;

    int64_t n_tokens;
    int64_t n_kv;
    int64_t n_outputs;
    float   freq_base;
    float   freq_scale;

    // graph inputs (filled by the context after allocation)
    ggml_tensor * inp_tokens = nullptr;   // I32 [n_tokens]
    ggml_tensor * inp_pos = nullptr;      // I32 [n_tokens]
    ggml_tensor * inp_mask = nullptr;     // F32 [n_kv, n_tokens]
    ggml_tensor * inp_kv_idx = nullptr;   // I64 [n_tokens]
    ggml_tensor * inp_out_ids = nullptr;  // I32 [n_outputs]

    llm_graph_context(const llama_model & m, const llama_cparams & c, const llama_ubatch & u, llama_kv_cache & k,
                      ggml_context * ctx, ggml_cgraph * g);

    ggml_tensor * build_inp_embd();
    ggml_tensor * build_inp_pos();
    ggml_tensor * build_norm(ggml_tensor * cur, ggml_tensor * w, ggml_tensor * b, bool rms, int il = -1);
    ggml_tensor * build_rope(ggml_tensor * x, int n_rot);   // x [head_dim, n_head, n_tokens]
    // Store k/v of this micro-batch in the cache and attend. q [hd, n_head, n_tokens],
    // k [hd, n_head_kv, n_tokens], v [hdv, n_head_kv, n_tokens]. Returns [hdv * n_head, n_tokens].
    ggml_tensor * build_attn(int il, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float kq_scale);
    ggml_tensor * build_ffn_swiglu(ggml_tensor * cur, ggml_tensor * up, ggml_tensor * gate, ggml_tensor * down);
    // Selects the wanted output rows, applies the final norm and the LM head.
    ggml_tensor * build_output(ggml_tensor * cur);
    // Linear layer with optional bias
    ggml_tensor * build_lin(ggml_tensor * w, ggml_tensor * b, ggml_tensor * x);
};
