// libllama: load a GGUF model, decode batches of tokens, get logits, tokenize, sample.
// The names and semantics follow llama.cpp's C API so that tools written for it port directly.
#pragma once

#include "ggml.h"
#include "ggml-backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLAMA_DEFAULT_SEED 0xFFFFFFFF
#define LLAMA_TOKEN_NULL -1

typedef int32_t llama_token;
typedef int32_t llama_pos;
typedef int32_t llama_seq_id;

struct llama_model;
struct llama_context;
struct llama_vocab;
struct llama_sampler;

enum llama_flash_attn_type {
    LLAMA_FLASH_ATTN_TYPE_AUTO     = -1,
    LLAMA_FLASH_ATTN_TYPE_DISABLED = 0,
    LLAMA_FLASH_ATTN_TYPE_ENABLED  = 1,
};

// A tensor placement rule: tensors whose name matches the regex go to the named buffer type.
struct llama_model_tensor_buft_override {
    const char * pattern;
    ggml_backend_buffer_type_t buft;
};

// How a model is divided among devices (-sm). LAYER: consecutive layers per device, their
// weights and KV cache there, in -ts proportions. ROW is llama.cpp's row split and is refused.
enum llama_split_mode {
    LLAMA_SPLIT_MODE_NONE  = 0,   // everything offloaded goes to main_gpu
    LLAMA_SPLIT_MODE_LAYER = 1,
    LLAMA_SPLIT_MODE_ROW   = 2,
    LLAMA_SPLIT_MODE_GRAPH = 3,
};

// -sm graph: how the parts' partial sums are added up (src/llama-all-reduce.h)
enum llama_graph_reduce_form {
    LLAMA_GRAPH_REDUCE_GATHER = 0,   // every partial to the main device, summed there
    LLAMA_GRAPH_REDUCE_RING   = 1,   // reduce-scatter around the devices, the summed chunks gathered
    // one collective step the devices' backends run (NCCL over distinct GPUs, the CPU's sum over CPU
    // devices), after which every device holds the sum; refused where the backends offer none
    LLAMA_GRAPH_REDUCE_COLLECTIVE = 2,
    LLAMA_GRAPH_REDUCE_AUTO       = 3,   // the collective where the backends offer one, else gather
};

struct llama_model_params {
    // the devices to use (NULL-terminated; NULL: every device of ggml_backend_dev_count())
    ggml_backend_dev_t * devices;
    // layers on the devices, counted from the last; the output head counts as one more layer.
    // Negative: all. Without devices every layer stays on the host CPU.
    int32_t n_gpu_layers;
    enum llama_split_mode split_mode;
    int32_t main_gpu;              // index in devices: split mode NONE's device, and where the
                                   // embeddings and the output head go
    const float * tensor_split;    // llama_max_devices() shares (NULL or all 0: by free memory)
    bool    split_experts;   // -sm graph: routed experts go whole to the devices by -ts shares (--moe-split experts)
                             // instead of every device holding the same columns of each expert
    bool    use_mmap;
    bool    use_mlock;
    bool    check_tensors;   // validate tensor data (NaN/inf) at load
    bool    repack_tensors;  // -rtr: weights with an interleaved twin repacked at load (not mapped)
    const struct llama_model_tensor_buft_override * tensor_buft_overrides;   // NULL-terminated
    void (*progress_callback)(float progress, void * user_data);
    void *  progress_callback_user_data;
};

// Graph evaluation callback (llama.cpp's cb_eval). For every node of every graph llama_decode
// builds, it is first called with ask = true: returning true asks to observe that node. After the
// graph has been computed it is called again with ask = false for each node it asked for, with the
// node's data and its sources' data readable (host memory); returning false stops the reports for
// that graph. The sources of observed nodes are kept alive until then (not reused by the planner).
typedef bool (*ggml_backend_sched_eval_callback)(struct ggml_tensor * t, bool ask, void * user_data);

struct llama_context_params {
    uint32_t n_ctx;            // 0: from the model
    uint32_t n_batch;          // logical batch: most tokens per llama_decode call
    uint32_t n_ubatch;         // physical batch: most tokens per graph
    uint32_t n_seq_max;        // sequences (server slots)
    int32_t  n_threads;        // generation (1 token)
    int32_t  n_threads_batch;  // prompt processing
    enum llama_flash_attn_type flash_attn_type;
    enum ggml_type type_k;
    enum ggml_type type_v;
    bool     embeddings;
    bool     no_perf;
    // MoE / MLA controls (ik_llama.cpp)
    int32_t  mla;              // -1: default for the model
    int32_t  attn_max_batch;   // -amb, MiB (0: no cap)
    bool     fused_moe;        // -fmoe
    int32_t  ser_n_min;        // -ser K,T: at least K experts ...
    float    ser_threshold;    // ... dropping the weakest whose cumulative weight is below T
    float    rope_freq_base;   // 0: from the model
    float    rope_freq_scale;  // 0: from the model
    bool     swa_full;         // --swa-full: sliding-window layers cache the whole context
    ggml_backend_sched_eval_callback cb_eval;   // NULL: none
    void *   cb_eval_user_data;
    // models with recurrent layers: copies of a sequence's state kept after each prompt piece
    // (--ctx-checkpoints), so llama_memory_seq_rm can go back to them
    uint32_t n_ctx_checkpoints;
    // -sm graph: the type partial sums cross devices in (-grt: f32, f16 or bf16)
    enum ggml_type graph_reduce_type;
    enum llama_graph_reduce_form graph_reduce_form;   // --graph-reduce-form auto|collective|gather|ring
    bool offload_kqv;          // the KV cache of offloaded layers on their device (-nkvo: false, host memory)
    // matrix products of prompt batches (>= op_offload_min_batch tokens) whose weights stay in
    // host memory (experts kept in RAM) run on the main device, the weights copied over
    // (--no-op-offload: false)
    bool op_offload;
    int32_t op_offload_min_batch;   // --op-offload-min-batch (default 32, at least 1)
};

struct llama_batch {
    int32_t        n_tokens;
    llama_token *  token;
    float *        embd;
    llama_pos *    pos;
    int32_t *      n_seq_id;
    llama_seq_id ** seq_id;
    int8_t *       logits;    // non-zero: output logits for this token
};

// ---- lifetime
void llama_backend_init(void);
void llama_backend_free(void);
void llama_log_set(ggml_log_callback cb, void * user_data);

struct llama_model_params   llama_model_default_params(void);
size_t llama_max_devices(void);   // entries of llama_model_params.tensor_split
struct llama_context_params llama_context_default_params(void);

// NULL on failure (the message was logged; llama_last_error() has it too).
struct llama_model * llama_model_load_from_file(const char * path, struct llama_model_params params);
void llama_model_free(struct llama_model * model);
const char * llama_last_error(void);

struct llama_context * llama_init_from_model(struct llama_model * model, struct llama_context_params params);
void llama_free(struct llama_context * ctx);

// ---- model info
const struct llama_vocab * llama_model_get_vocab(const struct llama_model * model);
int32_t  llama_model_n_embd(const struct llama_model * model);
int32_t  llama_model_n_layer(const struct llama_model * model);
int32_t  llama_model_n_head(const struct llama_model * model);
int32_t  llama_model_n_ctx_train(const struct llama_model * model);
uint64_t llama_model_size(const struct llama_model * model);
uint64_t llama_model_n_params(const struct llama_model * model);
int32_t  llama_model_desc(const struct llama_model * model, char * buf, size_t buf_size);
const char * llama_model_chat_template(const struct llama_model * model, const char * name);
// metadata value as a string; -1 if absent
int32_t  llama_model_meta_val_str(const struct llama_model * model, const char * key, char * buf, size_t buf_size);
bool     llama_model_has_encoder(const struct llama_model * model);
// recurrent layers only / recurrent layers interleaved with attention (qwen35, qwen3next): a
// sequence's memory then includes a state that cannot drop a suffix (see llama_memory_seq_rm)
bool     llama_model_is_recurrent(const struct llama_model * model);
bool     llama_model_is_hybrid(const struct llama_model * model);

uint32_t llama_n_ctx(const struct llama_context * ctx);
uint32_t llama_n_batch(const struct llama_context * ctx);
uint32_t llama_n_ubatch(const struct llama_context * ctx);
uint32_t llama_n_seq_max(const struct llama_context * ctx);
const struct llama_model * llama_get_model(const struct llama_context * ctx);
void llama_set_n_threads(struct llama_context * ctx, int32_t n_threads, int32_t n_threads_batch);
// While set, every MoE layer routes each token to all of its experts (as llama.cpp's warm-up):
// one decode then touches every expert's weights (page faults of an mmapped model, first copies
// to a device) instead of leaving that to the first requests. The results are meaningless:
// clear the memory after such a decode and unset the flag.
void llama_set_warmup(struct llama_context * ctx, bool warmup);

// ---- batches
struct llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
void llama_batch_free(struct llama_batch batch);
// A batch view over tokens of sequence 0 at the next positions (logits for the last token).
struct llama_batch llama_batch_get_one(llama_token * tokens, int32_t n_tokens);

// 0: success; 1: no KV slot for the batch (try a smaller batch or free space); < 0: error.
int32_t llama_decode(struct llama_context * ctx, struct llama_batch batch);

// Logits of the i-th token of the last batch that asked for output (negative i counts from the end).
float * llama_get_logits_ith(struct llama_context * ctx, int32_t i);
// With llama_context_params.embeddings on, a batch outputs the final normalized hidden state
// (n_embd floats) of each output token instead of logits (which are then NULL). Pooling is left
// to the caller. NULL when embeddings are off or token i asked for no output.
float * llama_get_embeddings_ith(struct llama_context * ctx, int32_t i);
// All output logits of the last batch, [n_outputs][n_vocab].
float * llama_get_logits(struct llama_context * ctx);

// ---- KV cache (memory) per sequence
void llama_memory_clear(struct llama_context * ctx);
// remove positions [p0, p1) of seq (seq < 0: all; p0 < 0: from 0; p1 < 0: to the end). A model
// with a recurrent state can only remove everything, or everything after a checkpoint
// (llama_memory_seq_pos_resume); otherwise false, and the memory is unchanged.
bool llama_memory_seq_rm(struct llama_context * ctx, llama_seq_id seq, llama_pos p0, llama_pos p1);
// The largest p' <= p such that llama_memory_seq_rm(ctx, seq, p', -1) succeeds: p for a KV cache;
// with a recurrent state p when it holds nothing from p on, else one past the latest checkpoint
// before p, else 0. Prefix reuse keeps [0, p') and decodes the rest.
llama_pos llama_memory_seq_pos_resume(struct llama_context * ctx, llama_seq_id seq, llama_pos p);
void llama_memory_seq_cp(struct llama_context * ctx, llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1);
void llama_memory_seq_keep(struct llama_context * ctx, llama_seq_id seq);
// add delta to positions [p0, p1) of seq (RoPE shifted lazily before the next decode)
void llama_memory_seq_add(struct llama_context * ctx, llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta);
// Whether dropping cached tokens from the middle of a sequence and moving the later ones down
// (seq_rm + seq_add: a context shift) gives the memory those tokens would have had at their new
// positions. False with a recurrent state (it has folded in the dropped tokens for good) and for
// a cache whose rows carry positions in no RoPE'd part the shift could rotate; *why (may be null)
// then says which.
bool llama_memory_can_shift(const struct llama_context * ctx, const char ** why);
llama_pos llama_memory_seq_pos_min(struct llama_context * ctx, llama_seq_id seq);
llama_pos llama_memory_seq_pos_max(struct llama_context * ctx, llama_seq_id seq);
// cells in use / total
int32_t llama_memory_n_used(struct llama_context * ctx);
size_t  llama_memory_size_bytes(struct llama_context * ctx);

// ---- sequence state files (server slots: save, restart, restore)
// Write sequence seq_id's cached rows and positions, with the n_token_count tokens they came
// from, to filepath (through a temporary file renamed into place). Returns the bytes written,
// 0 on failure (llama_last_error() says why). Not for models with a recurrent state (yet).
size_t llama_state_seq_save_file(struct llama_context * ctx, const char * filepath, llama_seq_id seq_id,
                                 const llama_token * tokens, size_t n_token_count);
// Replace dest_seq_id's memory by a file's and return its tokens (at most n_token_capacity).
// Returns the bytes read, 0 on failure: a file of another model (its weights' names, types,
// shapes and first bytes are fingerprinted), other KV cache types, too few free cells, a
// truncated or malformed file (the whole file is checked before the sequence is touched),
// and the sequence is then unchanged.
size_t llama_state_seq_load_file(struct llama_context * ctx, const char * filepath, llama_seq_id dest_seq_id,
                                 llama_token * tokens_out, size_t n_token_capacity, size_t * n_token_count_out);

// ---- vocab
enum llama_vocab_type { LLAMA_VOCAB_TYPE_NONE = 0, LLAMA_VOCAB_TYPE_SPM = 1, LLAMA_VOCAB_TYPE_BPE = 2, LLAMA_VOCAB_TYPE_WPM = 3 };
enum llama_vocab_type llama_vocab_type(const struct llama_vocab * vocab);
int32_t     llama_vocab_n_tokens(const struct llama_vocab * vocab);
llama_token llama_vocab_bos(const struct llama_vocab * vocab);
llama_token llama_vocab_eos(const struct llama_vocab * vocab);
llama_token llama_vocab_eot(const struct llama_vocab * vocab);
bool        llama_vocab_is_eog(const struct llama_vocab * vocab, llama_token token);
bool        llama_vocab_is_control(const struct llama_vocab * vocab, llama_token token);
bool        llama_vocab_get_add_bos(const struct llama_vocab * vocab);
bool        llama_vocab_get_add_eos(const struct llama_vocab * vocab);
const char * llama_vocab_get_text(const struct llama_vocab * vocab, llama_token token);

// Returns the number of tokens, or -(needed) if n_tokens_max is too small.
int32_t llama_tokenize(const struct llama_vocab * vocab, const char * text, int32_t text_len, llama_token * tokens,
                       int32_t n_tokens_max, bool add_special, bool parse_special);
// Bytes written (not NUL-terminated), or -(needed) if the buffer is too small.
int32_t llama_token_to_piece(const struct llama_vocab * vocab, llama_token token, char * buf, int32_t length,
                             int32_t lstrip, bool special);
int32_t llama_detokenize(const struct llama_vocab * vocab, const llama_token * tokens, int32_t n_tokens, char * text,
                         int32_t text_len_max, bool remove_special, bool unparse_special);

// ---- sampling: a chain of samplers applied to a candidate array
typedef struct llama_token_data {
    llama_token id;
    float logit;
    float p;
} llama_token_data;

typedef struct llama_token_data_array {
    llama_token_data * data;
    size_t size;
    int64_t selected;   // index in data of the chosen token, -1 if none
    bool sorted;        // by logit, descending
} llama_token_data_array;

struct llama_sampler_chain_params { bool no_perf; };
struct llama_sampler_chain_params llama_sampler_chain_default_params(void);

struct llama_sampler * llama_sampler_chain_init(struct llama_sampler_chain_params params);
void llama_sampler_chain_add(struct llama_sampler * chain, struct llama_sampler * smpl);   // takes ownership
int  llama_sampler_chain_n(const struct llama_sampler * chain);

struct llama_sampler * llama_sampler_init_greedy(void);
struct llama_sampler * llama_sampler_init_dist(uint32_t seed);
struct llama_sampler * llama_sampler_init_top_k(int32_t k);
struct llama_sampler * llama_sampler_init_top_p(float p, size_t min_keep);
struct llama_sampler * llama_sampler_init_min_p(float p, size_t min_keep);
struct llama_sampler * llama_sampler_init_typical(float p, size_t min_keep);
struct llama_sampler * llama_sampler_init_temp(float t);
struct llama_sampler * llama_sampler_init_penalties(int32_t penalty_last_n, float penalty_repeat, float penalty_freq,
                                                    float penalty_present);

typedef struct llama_logit_bias {
    llama_token token;
    float bias;   // added to the logit; -INFINITY bans the token
} llama_logit_bias;
struct llama_sampler * llama_sampler_init_logit_bias(int32_t n_vocab, int32_t n_logit_bias, const llama_logit_bias * logit_bias);
// XTC: with probability p, drop every token at least t likely except the least likely of them.
struct llama_sampler * llama_sampler_init_xtc(float p, float t, size_t min_keep, uint32_t seed);
// Keep tokens whose logit is within n standard deviations of the largest (n <= 0: off).
struct llama_sampler * llama_sampler_init_top_n_sigma(float n);
// Mirostat v1 (m: tokens used to estimate the Zipf exponent, 100 in the paper) and v2; both
// select the token (use them last in a chain, instead of dist).
struct llama_sampler * llama_sampler_init_mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m);
struct llama_sampler * llama_sampler_init_mirostat_v2(uint32_t seed, float tau, float eta);

// DRY: a token that would extend a repetition of length L >= allowed_length of the last
// penalty_last_n tokens (-1: n_ctx) loses multiplier * base^(L - allowed_length) from its logit;
// matching stops at tokens whose text contains a sequence breaker.
struct llama_sampler * llama_sampler_init_dry(const struct llama_vocab * vocab, int32_t n_ctx_train, float dry_multiplier,
                                              float dry_base, int32_t dry_allowed_length, int32_t dry_penalty_last_n,
                                              const char ** seq_breakers, size_t num_breakers);

// A GBNF grammar (llama.cpp's syntax) as a constraint: candidates the grammar does not allow next
// are removed. NULL when the grammar does not parse (the error is logged). In a chain,
// constraints apply before the other samplers whatever the order of adding, and
// llama_sampler_sample keeps the unconstrained pick when the grammar allows it. Add it after
// accepting the prompt's tokens: every token it accepts advances the grammar.
struct llama_sampler * llama_sampler_init_grammar(const struct llama_vocab * vocab, const char * grammar_str,
                                                  const char * grammar_root);
// The same, inactive until the output contains one of the trigger words; from there on the
// grammar applies to the text starting at the trigger (tool calls amid free text).
struct llama_sampler * llama_sampler_init_grammar_lazy(const struct llama_vocab * vocab, const char * grammar_str,
                                                       const char * grammar_root, const char ** trigger_words,
                                                       size_t num_trigger_words);
// The same, but trigger words inside the model's leading reasoning block do not count: a
// <tool_call> the model only thinks about is not a call. The block runs from reasoning_open
// (when the output starts with it, after whitespace; from the first token when starts_inside)
// to reasoning_close.
struct llama_sampler * llama_sampler_init_grammar_lazy_after_reasoning(
    const struct llama_vocab * vocab, const char * grammar_str, const char * grammar_root, const char ** trigger_words,
    size_t num_trigger_words, const char * reasoning_open, const char * reasoning_close, bool starts_inside);
// The candidates the last llama_sampler_sample kept after the whole chain (filters, constraints,
// temperature: their logits as the chain left them), in the sampler's own buffer, valid until the
// next call; the sampled token is among them. Empty (size 0) before the first sample.
llama_token_data_array llama_sampler_last_candidates(const struct llama_sampler * smpl);
// Whether the grammar parses and its start is not already too ambiguous to follow; if not, the
// message (naming line and column for a syntax error) is copied to err.
bool llama_grammar_validate(const char * grammar_str, const char * grammar_root, char * err, size_t err_size);

const char * llama_sampler_name(const struct llama_sampler * smpl);
void llama_sampler_accept(struct llama_sampler * smpl, llama_token token);
void llama_sampler_apply(struct llama_sampler * smpl, llama_token_data_array * cur_p);
void llama_sampler_reset(struct llama_sampler * smpl);
void llama_sampler_free(struct llama_sampler * smpl);
// Why the sampler (or a sampler of the chain) can no longer sample, or NULL: a grammar too
// ambiguous to follow within the matcher's limits. llama_sampler_sample then returns
// LLAMA_TOKEN_NULL; a caller reports this message and ends that generation.
const char * llama_sampler_error(const struct llama_sampler * smpl);
// Sample from the logits of output idx of the last batch, and accept the token.
llama_token llama_sampler_sample(struct llama_sampler * smpl, struct llama_context * ctx, int32_t idx);

// ---- performance counters
struct llama_perf_context_data {
    double t_start_ms, t_load_ms, t_p_eval_ms, t_eval_ms;
    int32_t n_p_eval, n_eval;
};
struct llama_perf_context_data llama_perf_context(const struct llama_context * ctx);
void llama_perf_context_reset(struct llama_context * ctx);

const char * llama_print_system_info(void);
// Whether this build and machine can place model layers on a GPU (n_gpu_layers, split mode,
// GPU buffer types). CPU-only builds answer false and run everything on the CPU.
bool llama_supports_gpu_offload(void);

#ifdef __cplusplus
}
#endif
