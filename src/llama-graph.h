// Building blocks for architecture graphs: the inputs of a micro-batch, norms, attention over the
// KV cache (flash or plain), feed-forward, experts, and the output head. An architecture file
// composes these in its build_graph.
#pragma once

#include "llama-kv-cache.h"
#include "llama-model.h"
#include "llama-recurrent-state.h"

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
    uint32_t n_ctx_checkpoints = 0;   // recurrent-state checkpoints kept per sequence
    int32_t  attn_max_batch = 0;
    int32_t  ser_n_min = 0;
    float    ser_threshold = 0.0f;
    float    rope_freq_base = 0.0f;
    float    rope_freq_scale = 0.0f;
    bool     swa_full = false;   // sliding-window layers keep every cell (--swa-full)
    bool     embeddings = false; // outputs are the final normalized hidden states, not logits
    bool     warmup = false;     // llama_set_warmup: the MoE routers choose every expert (the
                                 // warm-up decode touches all expert weights; its output is discarded)
    ggml_type reduce_type = GGML_TYPE_F32;   // -grt: partial sums of -sm graph cross devices in this type
    llama_graph_reduce_form reduce_form = LLAMA_GRAPH_REDUCE_GATHER;   // and how they are added up
};

// One micro-batch as the graph sees it.
struct llama_ubatch {
    uint32_t n_tokens = 0;
    const llama_token * token = nullptr;
    const llama_pos * pos = nullptr;
    const int32_t * n_seq_id = nullptr;              // per token: its sequences
    const llama_seq_id * const * seq_id = nullptr;
    std::vector<int32_t> out_rows;                 // token indices whose logits are wanted
    std::vector<uint32_t> cells;                   // KV cell per token
    std::vector<uint32_t> cells_swa;               // cell per token in the sliding-window layers' cache
};

struct llm_graph_context {
    const llama_model & model;
    const llama_hparams & hp;
    const llama_cparams & cp;
    const llama_ubatch & ub;
    llama_kv_cache & kv;
    llama_kv_cache * kv_swa;   // the sliding-window layers' own cache (NULL: they use kv)
    llama_recurrent_state * rs;   // NULL for models without recurrent layers
    ggml_context * ctx0;
    ggml_cgraph * gf;

    int64_t n_tokens;
    int64_t n_kv;
    int64_t n_kv_swa;   // cells of kv_swa the graph attends over
    int64_t n_outputs;
    float   freq_base;
    float   freq_scale;

    // graph inputs (filled by the context after allocation)
    ggml_tensor * inp_tokens = nullptr;   // I32 [n_tokens]
    ggml_tensor * inp_pos = nullptr;      // I32 [n_tokens]
    ggml_tensor * inp_pos_multi = nullptr;   // I32 [4 * n_tokens] (multi-section RoPE: t, h, w, extra)
    ggml_tensor * inp_rs_slots = nullptr;    // I32 [n_tokens]: each token's row in the recurrent state
    ggml_tensor * inp_mask = nullptr;     // F32 [n_kv, n_tokens]
    ggml_tensor * inp_mask_swa = nullptr; // F32 [n_kv or n_kv_swa, n_tokens]: only the sliding window
    ggml_tensor * inp_kv_idx_swa = nullptr;   // I64 [n_tokens]: cells in kv_swa
    ggml_tensor * inp_kv_idx = nullptr;   // I64 [n_tokens]
    ggml_tensor * inp_out_ids = nullptr;  // I32 [n_outputs]
    // constant inputs built by the graph (masks, index helpers), set after allocation
    std::vector<std::pair<ggml_tensor *, std::vector<float>>> const_inputs;

    // -sm graph: the device part of a cut layer being built (NULL: whole layers)
    const llama_layer_shard * shard = nullptr;
    // nodes that must run on a given device (index in model.devices), set on the scheduler by
    // the context: a reduced sum on -mg, a partial's conversion to the reduce type on its device
    std::vector<std::pair<ggml_tensor *, int>> pinned;
    // Layer il's tensors as the graph sees them: the shard's while one is being built.
    const llama_layer & layer(int il) const { return shard ? shard->w : model.layers[il]; }
    // The all-reduce of tensor parallelism: the sum of partial results [n_embd, n_tokens], one per
    // device, on the main device (llama-all-reduce.h: gathered there or reduced around the ring,
    // crossing devices in cp.reduce_type); the scheduler's copies bring the sum to the devices
    // that read it next.
    ggml_tensor * build_all_reduce(const std::vector<std::pair<ggml_tensor *, int>> & partials);
    // f() (a layer's attention or FFN sub-block, reading g.layer(il)) built once per shard of layer
    // il that holds that part, the partial results reduced; f() as it is for a whole layer, or
    // for a part no shard holds (kept whole by an -ot rule).
    template <typename F> ggml_tensor * build_split(int il, bool attn, F && f) {
        if (model.shards.empty() || model.shards[il].empty()) return f();
        std::vector<std::pair<ggml_tensor *, int>> parts;
        for (const llama_layer_shard & s : model.shards[il]) {
            if (attn ? s.n_head == 0 : !s.has_ffn) continue;
            shard = &s;
            parts.emplace_back(f(), s.device);
            shard = nullptr;
        }
        return parts.empty() ? f() : build_all_reduce(parts);
    }

    llm_graph_context(const llama_model & m, const llama_cparams & c, const llama_ubatch & u, llama_kv_cache & k,
                      ggml_context * ctx, ggml_cgraph * g, llama_kv_cache * k_swa = nullptr,
                      llama_recurrent_state * r = nullptr);

    ggml_tensor * build_inp_embd();
    ggml_tensor * build_inp_pos();
    ggml_tensor * build_norm(ggml_tensor * cur, ggml_tensor * w, ggml_tensor * b, bool rms, int il = -1);
    // x [head_dim, n_head, n_tokens]; with il, a sliding-window layer uses its own base/scale;
    // multi-section modes (hp.rope_sections) take text positions (p, p, p, 0)
    ggml_tensor * build_rope(ggml_tensor * x, int n_rot, int il = -1);
    ggml_tensor * build_inp_rs_slots();
    // Store k/v of this micro-batch in the cache and attend. q [hd, n_head, n_tokens],
    // k [hd, n_head_kv, n_tokens], v [hdv, n_head_kv, n_tokens]. Returns [hdv * n_head, n_tokens].
    // A sliding-window layer (hp.is_swa) sees only its window; sinks: f32 [n_head] or NULL.
    ggml_tensor * build_attn(int il, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float kq_scale,
                             ggml_tensor * sinks = nullptr);
    // The pieces of build_attn, for architectures with their own cache rows (MLA):
    // write rows [n, n_tokens] of this micro-batch into a cache tensor; returns the cache as
    // written (views of it are read after the write).
    ggml_tensor * build_kv_store(ggml_tensor * cache, ggml_tensor * rows, bool swa_cache = false);
    // Attention of q [hd, n_tokens, n_head] over k [hd, n_kv, n_head_kv], v [hdv, n_kv, n_head_kv]
    // (views of the cache), flash or explicit per cparams. With q2/k2 the scores are q·k + q2·k2
    // (explicit path only: split keys, e.g. MLA's no-RoPE and RoPE parts). The explicit path caps
    // its score buffer at -amb MiB by attending in groups of heads. Returns [hdv, n_head, n_tokens].
    // mask: NULL for inp_mask; sinks as for build_attn.
    ggml_tensor * build_attn_core(ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float kq_scale,
                                  ggml_tensor * q2 = nullptr, ggml_tensor * k2 = nullptr, bool force_explicit = false,
                                  ggml_tensor * mask = nullptr, ggml_tensor * sinks = nullptr);
    ggml_tensor * build_ffn_swiglu(ggml_tensor * cur, ggml_tensor * up, ggml_tensor * gate, ggml_tensor * down);
    // op(gate·cur) * (up·cur), projected down (GeGLU for Gemma)
    ggml_tensor * build_ffn_glu(ggml_tensor * cur, ggml_tensor * up, ggml_tensor * gate, ggml_tensor * down, ggml_glu_op op);
    // Routed experts. cur [n_embd, n_tokens] -> [n_embd, n_tokens], the weighted sum of the
    // n_expert_used experts the router picks per token. The router's probabilities (softmax or
    // sigmoid of gate_inp·cur) weight the experts; probs_bias (DeepSeek-V3's exp_probs_b) is added
    // only for choosing them. norm_w renormalizes the chosen weights to sum 1, w_scale scales them.
    // cparams: fused_moe picks the fused gate/up op; ser_n_min/ser_threshold drop weak experts.
    // MOE_GATING_SOFTMAX_WEIGHT (gpt-oss): choose by the logits, weight by a softmax over the
    // chosen logits only.
    enum moe_gating { MOE_GATING_SOFTMAX = 1, MOE_GATING_SIGMOID = 2, MOE_GATING_SOFTMAX_WEIGHT = 3 };
    // gpt-oss's additions: a router bias, per-expert biases after each projection ([n, n_expert]),
    // and the clamped SwiGLU min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, ±limit) + 1).
    struct moe_extras {
        ggml_tensor * gate_inp_b = nullptr;
        ggml_tensor * up_b = nullptr, * gate_b = nullptr, * down_b = nullptr;
        float swiglu_alpha = 0.0f;   // 0: plain SwiGLU
        float swiglu_limit = 0.0f;
    };
    ggml_tensor * build_moe_ffn(ggml_tensor * cur, ggml_tensor * gate_inp, ggml_tensor * up_exps, ggml_tensor * gate_exps,
                                ggml_tensor * down_exps, ggml_tensor * probs_bias, int64_t n_expert, int64_t n_used,
                                moe_gating gating, bool norm_w, float w_scale, const moe_extras * ex = nullptr);
    // A graph constant (f32), filled after allocation.
    ggml_tensor * build_const(std::vector<float> data, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1);
    // Selects the wanted output rows, applies the final norm and the LM head.
    ggml_tensor * build_output(ggml_tensor * cur);
    // Linear layer with optional bias
    ggml_tensor * build_lin(ggml_tensor * w, ggml_tensor * b, ggml_tensor * x);
};
