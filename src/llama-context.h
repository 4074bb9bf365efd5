// The inference context (see llama-context.cpp).
#pragma once

#include "llama-graph.h"
#include "llama-kv-cache.h"
#include "llama-model.h"
#include "llama-recurrent-state.h"

#include <vector>

struct llama_context {
    explicit llama_context(llama_model & m) : model(m) {}
    ~llama_context();

    llama_model & model;
    llama_cparams cparams;
    llama_kv_cache kv;
    // the sliding-window layers' cache, sized to their window (size 0: they live in kv, as with
    // --swa-full or when the window is not smaller than the context)
    llama_kv_cache kv_swa;
    bool has_kv_swa() const { return kv_swa.size > 0; }
    llama_recurrent_state rs;           // active only for models with recurrent layers
    ggml_backend_t cpu = nullptr;
    std::vector<ggml_backend_t> device_backends;   // one per device of the model (the scheduler's
                                                   // backends are these, then cpu)
    ggml_backend_sched_t sched = nullptr;
    // the host CPU backend runs n threads; each CPU-backed (virtual) device a share of them
    void set_threads(int n);
    // the graph's device choices (-sm graph's reduced sums) onto the scheduler, after its reset
    void pin_nodes(const llm_graph_context & g);
    size_t graph_size = 0;
    std::vector<uint8_t> graph_mem;     // tensor metadata of the graph being built (reused)

    std::vector<float> logits;          // [n_outputs][n_vocab] of the last batch
    std::vector<float> embd;            // [n_outputs][n_embd] of the last batch (cparams.embeddings)
    std::vector<int32_t> output_of;     // batch index -> output row (-1: none)
    int32_t n_outputs = 0;

    // reused input staging
    std::vector<int64_t> scratch_i64;
    std::vector<int32_t> scratch_i32;
    std::vector<float> scratch_f32;
    std::vector<uint32_t> cells_taken, cells_taken_swa;  // cells llama_decode assigned so far in this call
    // llama_decode's per-call arrays, kept so that decoding allocates nothing once warm
    std::vector<llama_pos> pos_scratch, next_pos_scratch;
    std::vector<int32_t> n_seq_scratch, out_idx_scratch;
    std::vector<const llama_seq_id *> seq_scratch;
    std::vector<int32_t> seq_tokens_scratch;    // tokens per sequence in this call (recurrent models)
    std::vector<uint8_t> seq_touched_scratch;
    // Tests only: the micro-batch (index within a call) whose graph runs and is then reported as
    // failed, to check what a failure after the state was written leaves behind. -1: none.
    int32_t fail_ubatch_for_test = -1;

    int64_t t_start_us = 0, t_p_eval_us = 0, t_eval_us = 0;
    int32_t n_p_eval = 0, n_eval = 0;
    bool no_perf = false;               // llama_context_params.no_perf: the counters stay at zero

    // graph observation (llama_context_params.cb_eval); observed: nodes asked for in this graph
    ggml_backend_sched_eval_callback cb_eval = nullptr;
    void * cb_eval_user_data = nullptr;
    std::vector<ggml_tensor *> observed;

    int32_t decode(const llama_batch & batch);
    // Cells in kv_swa for the micro-batch (ub.cells_swa), freeing cells outside every window if needed.
    bool place_in_window(llama_ubatch & ub);
    std::vector<llama_pos> window_next_;   // reused by place_in_window
    bool reserve();   // size the scheduler's buffers for the largest graph
};

// Apply pending RoPE shifts (llama_memory_seq_add) to the cached keys of every cache.
bool llama_apply_kv_shift(llama_context & lctx);
