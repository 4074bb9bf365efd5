// A loaded model: hyper-parameters, vocabulary, weights, and the architecture that builds its graph.
#pragma once

#include "ggml-backend.h"
#include "llama-impl.h"
#include "llama-vocab.h"
#include "llama.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

struct llama_model_loader;
struct llama_mmap;
struct llm_graph_context;
struct llama_cparams;
struct llama_kv_layer_shape;
struct llama_recurrent_layer_shape;

struct llama_hparams {
    uint32_t n_ctx_train = 0;
    uint32_t n_embd = 0;
    uint32_t n_layer = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t n_embd_head_k = 0;
    uint32_t n_embd_head_v = 0;
    uint32_t n_ff = 0;
    uint32_t n_rot = 0;
    uint32_t n_vocab = 0;
    float    f_norm_rms_eps = 1e-5f;
    float    f_norm_eps = 1e-5f;
    float    rope_freq_base = 10000.0f;
    float    rope_freq_scale = 1.0f;
    int      rope_type = GGML_ROPE_TYPE_NORMAL;
    // YaRN
    uint32_t n_ctx_orig_yarn = 0;
    float    yarn_ext_factor = -1.0f;
    float    yarn_attn_factor = 1.0f;
    float    yarn_beta_fast = 32.0f;
    float    yarn_beta_slow = 1.0f;
    float    yarn_log_mul = 0.0f;
    float    f_attn_logit_softcap = 0.0f;
    float    f_embedding_scale = 0.0f;   // token embeddings times this (0: not scaled)
    // sliding-window attention: layer il with swa_layers[il] sees the last n_swa positions only
    // (itself included) and rotates with its own base/scale
    uint32_t n_swa = 0;
    std::vector<bool> swa_layers;
    float    rope_freq_base_swa = 10000.0f;
    float    rope_freq_scale_swa = 1.0f;
    // layers after n_layer whose tensors load but never run (GLM-4.5's NextN/MTP predictor)
    uint32_t n_layer_nextn = 0;
    // mixture of experts
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;
    uint32_t n_expert_shared = 0;
    uint32_t n_ff_exp = 0;
    uint32_t n_ff_shexp = 0;
    uint32_t n_layer_dense_lead = 0;
    float    expert_weights_scale = 1.0f;
    bool     expert_weights_norm = false;
    int      expert_gating_func = 1;   // 1 softmax, 2 sigmoid
    // MLA
    uint32_t n_lora_q = 0;
    uint32_t n_lora_kv = 0;
    // multi-section RoPE (GGML_ROPE_TYPE_MROPE / IMROPE): pairs per position component
    int32_t  rope_sections[4] = { 0, 0, 0, 0 };
    // recurrent (gated delta-net) layers: every full_attn_interval-th layer is attention, the
    // others recurrent (0: no recurrent layers)
    uint32_t full_attn_interval = 0;
    uint32_t ssm_d_conv = 0;     // convolution kernel
    uint32_t ssm_d_inner = 0;    // value dims over all value heads
    uint32_t ssm_d_state = 0;    // key (and value) head size
    uint32_t ssm_n_group = 0;    // key heads
    uint32_t ssm_dt_rank = 0;    // value heads

    uint32_t n_embd_k_gqa() const { return n_embd_head_k * n_head_kv; }
    uint32_t n_embd_v_gqa() const { return n_embd_head_v * n_head_kv; }
    bool is_swa(uint32_t il) const { return n_swa > 0 && il < swa_layers.size() && swa_layers[il]; }
    // every period-th layer is global, the others slide (Gemma 3: 6, gpt-oss: 2)
    void set_swa_pattern(uint32_t period) {
        swa_layers.assign(n_layer, false);
        for (uint32_t il = 0; il < n_layer; ++il) swa_layers[il] = period > 0 && (il + 1) % period != 0;
    }
    bool is_recurrent(uint32_t il) const { return full_attn_interval > 0 && (il + 1) % full_attn_interval != 0; }
};

// Every tensor any architecture's layer may have; each architecture fills what it uses.
struct llama_layer {
    ggml_tensor * attn_norm = nullptr;
    ggml_tensor * attn_norm_b = nullptr;
    ggml_tensor * wq = nullptr, * wk = nullptr, * wv = nullptr, * wo = nullptr, * wqkv = nullptr;
    ggml_tensor * bq = nullptr, * bk = nullptr, * bv = nullptr, * bo = nullptr;
    ggml_tensor * attn_q_norm = nullptr, * attn_k_norm = nullptr;
    ggml_tensor * attn_post_norm = nullptr;   // on the attention output, before the residual add
    ggml_tensor * attn_sinks = nullptr;       // [n_head] per-head sink logits
    // MLA
    ggml_tensor * wq_a = nullptr, * wq_b = nullptr, * attn_q_a_norm = nullptr;
    ggml_tensor * wkv_a_mqa = nullptr, * attn_kv_a_norm = nullptr, * wkv_b = nullptr;
    ggml_tensor * wk_b = nullptr, * wv_b = nullptr;
    // feed-forward
    ggml_tensor * ffn_norm = nullptr;
    ggml_tensor * ffn_gate = nullptr, * ffn_up = nullptr, * ffn_down = nullptr;
    ggml_tensor * ffn_post_norm = nullptr;    // on the feed-forward output, before the residual add
    // experts
    ggml_tensor * ffn_gate_inp = nullptr;
    ggml_tensor * ffn_gate_exps = nullptr, * ffn_up_exps = nullptr, * ffn_down_exps = nullptr;
    ggml_tensor * ffn_exp_probs_b = nullptr;
    ggml_tensor * ffn_gate_inp_b = nullptr;   // router bias
    ggml_tensor * ffn_gate_exps_b = nullptr, * ffn_up_exps_b = nullptr, * ffn_down_exps_b = nullptr;   // [n, n_expert]
    ggml_tensor * ffn_gate_shexp = nullptr, * ffn_up_shexp = nullptr, * ffn_down_shexp = nullptr;
    ggml_tensor * ffn_gate_inp_shexp = nullptr;
    // NextN / multi-token prediction (loaded, not run)
    ggml_tensor * nextn_eh_proj = nullptr, * nextn_enorm = nullptr, * nextn_hnorm = nullptr;
    ggml_tensor * nextn_shared_head_norm = nullptr;
    // gated delta-net: input projections (qwen35: wqkv + attn_gate for z; qwen3next: fused
    // ssm_in for q, k, v, z and ssm_ba for beta and alpha), convolution, decay, gated norm
    ggml_tensor * wqkv_gate = nullptr;
    ggml_tensor * ssm_in = nullptr, * ssm_ba = nullptr;
    ggml_tensor * ssm_beta = nullptr, * ssm_alpha = nullptr;
    ggml_tensor * ssm_conv1d = nullptr, * ssm_dt = nullptr, * ssm_a = nullptr;
    ggml_tensor * ssm_norm = nullptr, * ssm_out = nullptr;
};

// -sm graph: one device's part of a layer (see llama-model-shards.h)
struct llama_layer_shard {
    int device = -1;           // index in llama_model::devices
    llama_layer w;             // this device's slices and copies (NULL: not held)
    uint32_t n_head = 0;       // query heads it attends with, or a delta-net's value heads (0: no mixer part)
    uint32_t n_head_kv = 0;
    uint32_t kv_slot = 0;      // its entry in the KV cache (after the model's own layers)
    uint32_t rs_slot = 0;      // a delta-net part's entry in the recurrent state, likewise
    bool has_ffn = false;
    uint32_t expert0 = 0;      // experts split whole (--moe-split experts): the first it holds
};

// What one architecture contributes (src/models/<arch>.cpp registers one of these).
struct llm_arch_impl {
    const char * name;
    void (*load_hparams)(llama_model_loader & ml, llama_hparams & hp);
    void (*create_tensors)(llama_model_loader & ml, llama_model & model, ggml_context * ctx);
    ggml_tensor * (*build_graph)(llm_graph_context & g);   // returns the logits tensor
    // Optional: what the KV cache holds per layer (NULL: per-head K and V from the hparams).
    void (*kv_shapes)(const llama_model & model, const llama_cparams & cp, std::vector<llama_kv_layer_shape> & out) = nullptr;
    // Optional: settle context parameters for this model (e.g. the MLA mode), logging changes.
    void (*adjust_cparams)(const llama_model & model, llama_cparams & cp) = nullptr;
    // Optional: the per-sequence recurrent state each layer keeps (NULL: none, a pure KV model).
    void (*recurrent_shapes)(const llama_model & model, std::vector<llama_recurrent_layer_shape> & out) = nullptr;
    // Its graph builds cut layers from their shards (llm_build_prenorm_stack with the llama
    // block's attention), so -sm graph may cut its layers by heads and FFN columns.
    bool tensor_parallel = false;
};

void llm_arch_register(const llm_arch_impl & impl);
const llm_arch_impl * llm_arch_find(const std::string & name);
std::vector<std::string> llm_arch_names();

// Shared hyper-parameter reading for the common keys (each arch adds its own).
void llm_load_common_hparams(llama_model_loader & ml, llama_hparams & hp);

struct llama_model {
    std::string arch_name;
    const llm_arch_impl * arch = nullptr;
    llama_hparams hparams;
    llama_vocab vocab;
    std::string name;
    std::string chat_template;
    std::vector<std::pair<std::string, std::string>> meta;   // metadata as strings (for the API)

    ggml_tensor * tok_embd = nullptr;
    ggml_tensor * output_norm = nullptr;
    ggml_tensor * output_norm_b = nullptr;
    ggml_tensor * output = nullptr;
    std::vector<llama_layer> layers;

    // Weights computed at load from others (e.g. MLA's attn_k_b from attn_kv_b): created with
    // new_derived while the tensors are created, filled once the file data is in place.
    struct derived_tensor {
        ggml_tensor * t;
        std::function<void(ggml_tensor * dst)> fill;   // writes dst->data (host memory)
    };
    ggml_context * ctx_derived = nullptr;
    std::vector<derived_tensor> derived;
    ggml_tensor * new_derived(ggml_type type, std::initializer_list<int64_t> ne, const std::string & name,
                              std::function<void(ggml_tensor *)> fill);

    // -sm graph: per layer, the devices' parts (empty: the layer is whole on one device)
    std::vector<std::vector<llama_layer_shard>> shards;
    ggml_context * ctx_shards = nullptr;
    int main_device = -1;                             // index in devices of -mg (-1: the host CPU)

    ggml_context * ctx = nullptr;                     // tensor metadata of the weights
    std::vector<std::unique_ptr<llama_mmap>> mmaps;
    std::vector<ggml_backend_buffer_t> buffers;
    std::vector<ggml_backend_t> backends;             // the CPU backend last
    std::vector<ggml_backend_dev_t> devices;          // the devices the model may use (contexts make backends on them)
    std::vector<ggml_backend_buffer_type_t> layer_buft;   // per layer: where its weights, KV cache and state live
    uint64_t n_bytes = 0;
    uint64_t n_elements = 0;
    int64_t  t_load_us = 0;
    std::vector<std::pair<void *, size_t>> locked;   // --mlock: ranges locked in RAM

    ~llama_model();
};
