// Things every tool shares: the parameters a command line can set (common_params), their
// conversion to the libllama structs, the sampler chain built from them, tokenize / detokenize
// helpers over std::string, and a small stderr logger.
#pragma once

#include "llama.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

// ---- parameters --------------------------------------------------------------------------------

enum common_conversation_mode {
    COMMON_CONVERSATION_MODE_DISABLED = 0,
    COMMON_CONVERSATION_MODE_ENABLED  = 1,
    COMMON_CONVERSATION_MODE_AUTO     = 2,   // on if the model has a chat template
};

enum common_reasoning_format {
    COMMON_REASONING_FORMAT_NONE,              // leave <think> blocks in the content
    COMMON_REASONING_FORMAT_AUTO,
    COMMON_REASONING_FORMAT_DEEPSEEK,          // move them to reasoning_content
    COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY,   // ... but also keep them in the stream
};

struct common_params_sampling {
    uint32_t seed            = LLAMA_DEFAULT_SEED;
    int32_t  top_k           = 40;
    float    top_p           = 0.95f;
    float    min_p           = 0.05f;
    float    typ_p           = 1.0f;    // 1: typical sampling off
    float    temp            = 0.8f;    // <= 0: greedy
    int32_t  penalty_last_n  = 64;      // -1: the context size, 0: penalties off
    float    penalty_repeat  = 1.0f;
    float    penalty_freq    = 0.0f;
    float    penalty_present = 0.0f;
    int32_t  min_keep        = 0;
    bool     ignore_eos      = false;
    float    top_n_sigma     = -1.0f;   // <= 0: off
    float    xtc_probability = 0.0f;    // 0: XTC off
    float    xtc_threshold   = 0.1f;
    int32_t  mirostat        = 0;       // 0 off, 1 mirostat, 2 mirostat 2.0 (replace the filters)
    float    mirostat_tau    = 5.0f;
    float    mirostat_eta    = 0.1f;
    std::vector<llama_logit_bias> logit_bias;
    float    dry_multiplier  = 0.0f;    // 0: DRY off
    float    dry_base        = 1.75f;
    int32_t  dry_allowed_length = 2;
    int32_t  dry_penalty_last_n = -1;   // -1: the context size
    std::vector<std::string> dry_sequence_breakers = { "\n", ":", "\"", "*" };
    // the order of the samplers between the logit bias and the final pick (canonical names)
    std::vector<std::string> samplers = { "penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature" };
    std::string grammar;                // GBNF; empty: unconstrained
    std::vector<std::string> grammar_triggers;   // non-empty: the grammar starts at the first of these
    // a trigger inside the reply's leading reasoning block (from grammar_reasoning_open, or from
    // the start when the prompt opened it, to grammar_reasoning_close) is not a call
    std::string grammar_reasoning_open, grammar_reasoning_close;
    bool grammar_reasoning_starts_inside = false;
};

// -ot PATTERN=BUFFER_TYPE: tensors whose name matches the regex are placed in that buffer type.
struct common_tensor_override {
    std::string pattern;
    std::string buft;
};

// Speculative decoding: drafts from a small model (-md) and/or n-grams of the history, verified
// by the main model in one batch.
struct common_params_speculative {
    std::string model;          // -md: the draft model
    int32_t n_max = 16;         // --draft-max: most tokens drafted per step
    int32_t n_min = 0;          // --draft-min: shorter drafts are not tried
    float   p_min = 0.8f;       // --draft-p-min: the draft model stops below this top probability
    bool    ngram = false;      // --spec-type ngram-simple: drafts from earlier n-grams of prompt and output
};

struct common_params {
    // model and input
    std::string model;
    std::string model_alias;
    std::string prompt;
    std::string prompt_file;        // where -f read the prompt from (for messages)
    int32_t n_predict  = -1;        // -1: until end of generation, -2: until the context is full
    int32_t n_keep     = 0;         // tokens of the prompt a context shift keeps (-1: all)
    bool    ctx_shift  = true;      // shift the context when it fills (--context-shift / --no-context-shift)

    // context and batching
    int32_t n_ctx      = 4096;      // 0: the model's training context
    int32_t n_batch    = 2048;
    int32_t n_ubatch   = 512;
    int32_t n_parallel = 1;
    int32_t n_threads       = -1;   // -1: the number of cores
    int32_t n_threads_batch = -1;   // -1: same as n_threads
    enum llama_flash_attn_type flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    std::string cache_type_k = "f16";
    std::string cache_type_v = "f16";
    float rope_freq_base  = 0.0f;
    float rope_freq_scale = 0.0f;

    // model loading and placement
    int32_t n_gpu_layers = -1;      // -1: all; set only when a device is usable (arg-promises.cpp)
    std::string split_mode = "layer";
    std::string tensor_split;       // -ts as given: "3,1" or "3/1"
    int32_t main_gpu = 0;
    std::vector<std::string> devices;   // -dev: device names ("none": no device; empty: all)
    std::string graph_reduce_type = "f32";   // -grt: -sm graph's partial sums cross devices as f32, f16 or bf16
    std::string graph_reduce_form = "auto";   // --graph-reduce-form: auto, collective, gather on -mg, or ring
    std::string moe_split = "columns";   // --moe-split: -sm graph cuts every expert by columns, or deals out whole experts
    bool no_kv_offload = false;     // -nkvo: the KV cache in host memory
    bool no_op_offload = false;     // --no-op-offload: prompt products of host weights stay on the CPU
    int  op_offload_min_batch = 32; // --op-offload-min-batch: the smallest batch whose products go to the device
    bool use_mmap      = true;
    bool use_mlock     = false;
    bool check_tensors = false;
    bool repack_tensors = false;    // -rtr
    std::vector<common_tensor_override> tensor_overrides;

    // MoE / MLA (ik_llama.cpp)
    int32_t mla_attn  = -1;         // -1: the model's default
    int32_t attn_max_batch = 0;     // MiB, 0: no cap
    bool    fused_moe = true;
    int32_t ser_n_min = -1;         // -ser K,T; -1: off
    float   ser_threshold = 0.0f;
    bool    swa_full = false;       // --swa-full
    int32_t n_ctx_checkpoints = 8;  // recurrent-state checkpoints per sequence

    common_params_sampling sampling;
    common_params_speculative speculative;

    // cli
    enum common_conversation_mode conversation_mode = COMMON_CONVERSATION_MODE_AUTO;
    bool escape         = true;     // process \n, \t, ... in the prompt
    bool verbose_prompt = false;
    bool special        = false;    // print special tokens
    bool display_prompt = true;     // echo the prompt before the generation
    std::vector<std::string> antiprompt;   // -r: stop when the output ends with one of these
    bool warmup         = true;
    bool no_perf        = false;
    int32_t verbosity   = 0;
    bool demo           = false;

    // server
    std::string hostname = "127.0.0.1";
    int32_t port = 8080;
    std::vector<std::string> api_keys;
    std::string chat_template;      // Jinja source (--chat-template NAME puts the built-in's source here)
    enum common_reasoning_format reasoning_format = COMMON_REASONING_FORMAT_AUTO;
    int32_t reasoning_budget = -1;  // -1: unrestricted, 0: thinking off (through the template), N: tokens of thinking
    std::string chat_template_kwargs;   // JSON object text: extra template variables ("" none)
    int32_t timeout_read  = 600;    // seconds
    int32_t timeout_write = 600;
    std::vector<std::string> cors_origins = { "*" };   // origins browsers may call from; "*": any
    int32_t n_threads_http = -1;    // -1: enough for every slot and the queue
    bool endpoint_metrics = false;
    bool        embedding = false;   // --embedding: the server answers embeddings, not completions
    std::string pooling;             // --pooling none|mean|cls|last (empty: the model's, else none)
    bool endpoint_slots   = true;
    bool webui            = true;    // the chat page at / (--webui, --no-webui)
    std::string public_path;         // --path: the page's files (empty: the built-in page)
    bool endpoint_props   = false;   // --props: POST /props
    std::string slot_save_path;      // --slot-save-path: where /slots/{id}?action=save|restore keep their files
    int32_t n_cache_reuse = 0;       // --cache-reuse: shortest cached chunk moved to where a new prompt has it
    std::string ssl_file_key, ssl_file_cert;   // --ssl-key-file / --ssl-cert-file: serve HTTPS

    // perplexity / KL-divergence
    int32_t n_chunks = -1;
    std::string logits_file;        // --kl-divergence-base
    bool kl_divergence = false;
    int32_t ppl_stride = 0;

    // benchmarks
    std::string output_format = "md";
    std::string out_file;
    bool warmup_batch = false;

    // Filled by common_model_params_to_llama: the NULL-terminated override array the model
    // params point into (it must outlive model loading).
    std::vector<llama_model_tensor_buft_override> tensor_buft_storage;
    // ... and the device list and -ts shares they point to
    std::vector<ggml_backend_dev_t> device_storage;
    std::vector<float> tensor_split_storage;
};

// ---- conversions -------------------------------------------------------------------------------

// Number of threads for -t -1: the cores this process may use.
int32_t common_default_n_threads();

// ggml type of a -ctk / -ctv name (f32, f16, bf16, q8_0, q4_0, ...); GGML_TYPE_COUNT if unknown.
enum ggml_type common_kv_cache_type_from_str(const std::string & s);
// The names common_kv_cache_type_from_str accepts, for messages: "f32, f16, ...".
std::string common_kv_cache_type_names();

// Fills params.tensor_buft_storage. Returns false with err set if a -ot buffer type is unknown.
bool common_model_params_to_llama(common_params & params, llama_model_params & out, std::string & err);
llama_context_params common_context_params_to_llama(const common_params & params);
// The warm-up before the first timed or served token (skipped with --no-warmup by the callers):
// one decode of `token` (the vocabulary's BOS when LLAMA_TOKEN_NULL and it has one, else token 0)
// with every MoE expert routed (llama_set_warmup), so the graph's allocations and the first
// touches of all the mmapped weights happen here and not in the first row or request. The
// memory is cleared and the perf counters reset afterwards. False when the decode fails.
bool common_warmup(llama_context * ctx, llama_token token = LLAMA_TOKEN_NULL);

// The sampler chain of the parameters, in llama.cpp's order: logit bias, penalties, DRY, top-n-sigma,
// top-k, typical, top-p, min-p, XTC, temperature, then dist (seeded); greedy when temp <= 0;
// with mirostat, temperature then mirostat instead of the filters. n_ctx resolves a
// penalty_last_n of -1; vocab (may be null) sizes the logit-bias table and mirostat v1.
llama_sampler * common_sampler_chain_from_params(const common_params_sampling & sp, int32_t n_ctx,
                                                 const llama_vocab * vocab = nullptr);
// A sampler name of the "samplers" order as its canonical spelling ("temp" -> "temperature",
// "typical_p" -> "typ_p"); empty if it names no sampler.
std::string common_sampler_canonical_name(const std::string & name);
// Adds sp's grammar (if any) to the chain. Call it after accepting the prompt's tokens, which
// must not advance the grammar. False with a message naming line and column if it does not parse.
bool common_sampler_add_grammar(llama_sampler * chain, const llama_vocab * vocab, const common_params_sampling & sp,
                                std::string & err);

// Replace \n \t \r \\ \" \' \a \b \f \v \0 and \xNN by the characters they name.
void common_process_escapes(std::string & s);

// Read a whole file; false with err naming the file on failure.
bool common_read_file(const std::string & path, std::string & out, std::string & err);

// ---- tokens --------------------------------------------------------------------------------------

std::vector<llama_token> common_tokenize(const llama_vocab * vocab, const std::string & text, bool add_special,
                                         bool parse_special = false);
std::vector<llama_token> common_tokenize(const llama_context * ctx, const std::string & text, bool add_special,
                                         bool parse_special = false);
std::string common_token_to_piece(const llama_vocab * vocab, llama_token token, bool special = true);
std::string common_token_to_piece(const llama_context * ctx, llama_token token, bool special = true);
std::string common_detokenize(const llama_vocab * vocab, const std::vector<llama_token> & tokens,
                              bool special = true);
std::string common_detokenize(const llama_context * ctx, const std::vector<llama_token> & tokens,
                              bool special = true);

// ---- context shift -------------------------------------------------------------------------------

// Makes room in a full context, as llama.cpp's context shift does: of sequence seq's n_past
// tokens (positions 0..n_past-1) keeps the first n_keep, drops the oldest half of the rest and
// moves the remainder down to follow them. Returns how many tokens were dropped (the caller
// erases them from its own copy of the tokens at [n_keep, n_keep + dropped)); 0 when n_keep
// leaves fewer than two tokens to work with, or the memory cannot shift
// (llama_memory_can_shift), and then nothing changed.
int32_t common_context_shift(llama_context * ctx, llama_seq_id seq, int32_t n_past, int32_t n_keep);
// The n_keep of a shift for a prompt, as llama.cpp counts it: n_keep of the prompt's tokens (-1,
// or more than the prompt: all of them), plus the prompt's BOS when it starts with one.
int32_t common_context_shift_keep(const llama_vocab * vocab, const std::vector<llama_token> & prompt, int32_t n_keep);

// ---- logging -------------------------------------------------------------------------------------

// Messages go to stderr: errors always, info and warnings unless verbosity < 0 (--log-disable),
// debug only with verbosity >= 1 (-v).
void common_log_set_verbosity(int verbosity);
int  common_log_get_verbosity();
void common_log(enum ggml_log_level level, const char * fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;
// Route ggml's and libllama's log messages through common_log.
void common_log_install();

#define LOG_DBG(...) common_log(GGML_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define LOG_INF(...) common_log(GGML_LOG_LEVEL_INFO, __VA_ARGS__)
#define LOG_WRN(...) common_log(GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define LOG_ERR(...) common_log(GGML_LOG_LEVEL_ERROR, __VA_ARGS__)

// ---- --demo ---------------------------------------------------------------------------------------

// The model a tool runs: params.model, or with --demo (and no -m) a small random-weight model
// synthesized into a temporary file that is removed when this object goes away.
class common_model_source {
public:
    common_model_source() = default;
    common_model_source(const common_model_source &) = delete;
    common_model_source & operator=(const common_model_source &) = delete;
    ~common_model_source();

    // Sets params.model to the file to load; false (with a message naming -m / --demo) when there
    // is none. demo_if_empty: synthesize even without --demo when no -m is given (the server).
    bool resolve(common_params & params, std::string & err, bool demo_if_empty = false);
    bool is_demo() const { return !temp_path_.empty(); }

private:
    std::string temp_path_;
};
