// Parameter conversions, sampler chain, token helpers and the stderr logger shared by the tools.
#include "common.h"

#include "ggml-cpu.h"
#include "synth.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

namespace {

bool iequals(const std::string & a, const std::string & b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::tolower((unsigned char) a[i]) != std::tolower((unsigned char) b[i])) return false;
    }
    return true;
}

struct kv_type_name {
    const char * name;
    enum ggml_type type;
};

// KV cache types the tools accept (llama.cpp's list plus ik_llama.cpp's q6_0 and q8_KV). q8_KV
// keeps one f32 scale per (cell, head) row: the cache lays those rows out one per head.
const kv_type_name kv_cache_types[] = {
    { "f32",    GGML_TYPE_F32 },
    { "f16",    GGML_TYPE_F16 },
    { "bf16",   GGML_TYPE_BF16 },
    { "q8_0",   GGML_TYPE_Q8_0 },
    { "q4_0",   GGML_TYPE_Q4_0 },
    { "q4_1",   GGML_TYPE_Q4_1 },
    { "iq4_nl", GGML_TYPE_IQ4_NL },
    { "q5_0",   GGML_TYPE_Q5_0 },
    { "q5_1",   GGML_TYPE_Q5_1 },
    { "q6_0",   GGML_TYPE_Q6_0 },
    { "q8_KV",  GGML_TYPE_Q8_KV },
};

} // namespace

int32_t common_default_n_threads() {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? (int32_t) n : 4;
}

enum ggml_type common_kv_cache_type_from_str(const std::string & s) {
    for (const auto & t : kv_cache_types) {
        if (iequals(s, t.name)) return t.type;
    }
    return GGML_TYPE_COUNT;
}

std::string common_kv_cache_type_names() {
    std::string out;
    for (const auto & t : kv_cache_types) {
        if (!out.empty()) out += ", ";
        out += t.name;
    }
    return out;
}

namespace {

// what -ot (with the host, "CPU") or -dev (with "none") accepts
std::string device_names(const char * extra) {
    std::string out = extra;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) out += std::string(", ") + ggml_backend_dev_name(ggml_backend_dev_get(i));
    return out;
}

} // namespace

bool common_model_params_to_llama(common_params & params, llama_model_params & out, std::string & err) {
    out = llama_model_default_params();
    out.n_gpu_layers  = params.n_gpu_layers;
    out.use_mmap      = params.use_mmap;
    out.use_mlock     = params.use_mlock;
    out.check_tensors = params.check_tensors;
    out.repack_tensors = params.repack_tensors;
    out.main_gpu      = params.main_gpu;
    out.split_mode    = params.split_mode == "none"  ? LLAMA_SPLIT_MODE_NONE
                      : params.split_mode == "row"   ? LLAMA_SPLIT_MODE_ROW
                      : params.split_mode == "graph" ? LLAMA_SPLIT_MODE_GRAPH
                                                     : LLAMA_SPLIT_MODE_LAYER;
    out.split_experts = params.moe_split == "experts";

    params.device_storage.clear();
    out.devices = nullptr;
    if (!params.devices.empty()) {
        for (const std::string & name : params.devices) {
            if (name == "none") continue;
            ggml_backend_dev_t d = ggml_backend_dev_by_name(name.c_str());
            if (!d) {
                err = "-dev " + name + ": no such device (available: " + device_names("none") + ")";
                return false;
            }
            params.device_storage.push_back(d);
        }
        params.device_storage.push_back(nullptr);
        out.devices = params.device_storage.data();
    }

    params.tensor_split_storage.assign(llama_max_devices(), 0.0f);
    out.tensor_split = nullptr;
    if (!params.tensor_split.empty()) {
        const char sep = params.tensor_split.find('/') != std::string::npos ? '/' : ',';
        size_t i = 0, start = 0;
        while (start <= params.tensor_split.size()) {
            size_t end = params.tensor_split.find(sep, start);
            if (end == std::string::npos) end = params.tensor_split.size();
            if (i >= params.tensor_split_storage.size()) {
                err = "-ts " + params.tensor_split + ": more than " + std::to_string(llama_max_devices()) + " shares";
                return false;
            }
            params.tensor_split_storage[i++] = std::strtof(params.tensor_split.substr(start, end - start).c_str(), nullptr);
            start = end + 1;
        }
        out.tensor_split = params.tensor_split_storage.data();
    }

    params.tensor_buft_storage.clear();
    for (const auto & ov : params.tensor_overrides) {
        ggml_backend_buffer_type_t buft = nullptr;
        if (iequals(ov.buft, "CPU")) {
            buft = ggml_backend_cpu_buffer_type();
        } else if (ggml_backend_dev_t d = ggml_backend_dev_by_name(ov.buft.c_str())) {
            buft = ggml_backend_dev_buffer_type(d);
        }
        if (!buft) {
            err = "-ot " + ov.pattern + "=" + ov.buft + ": unknown buffer type '" + ov.buft + "' (available: " + device_names("CPU") + ")";
            params.tensor_buft_storage.clear();
            return false;
        }
        params.tensor_buft_storage.push_back({ ov.pattern.c_str(), buft });
    }
    if (!params.tensor_buft_storage.empty()) {
        params.tensor_buft_storage.push_back({ nullptr, nullptr });
        out.tensor_buft_overrides = params.tensor_buft_storage.data();
    } else {
        out.tensor_buft_overrides = nullptr;
    }
    return true;
}

llama_context_params common_context_params_to_llama(const common_params & params) {
    llama_context_params out = llama_context_default_params();
    const int32_t n_threads = params.n_threads > 0 ? params.n_threads : common_default_n_threads();
    out.n_ctx           = (uint32_t) std::max(params.n_ctx, 0);
    out.n_batch         = (uint32_t) std::max(params.n_batch, 1);
    out.n_ubatch        = (uint32_t) std::max(std::min(params.n_ubatch, params.n_batch), 1);
    out.n_seq_max       = (uint32_t) std::max(params.n_parallel, 1);
    out.n_threads       = n_threads;
    out.n_threads_batch = params.n_threads_batch > 0 ? params.n_threads_batch : n_threads;
    out.flash_attn_type = params.flash_attn_type;
    const ggml_type tk  = common_kv_cache_type_from_str(params.cache_type_k);
    const ggml_type tv  = common_kv_cache_type_from_str(params.cache_type_v);
    out.type_k          = tk == GGML_TYPE_COUNT ? GGML_TYPE_F16 : tk;   // the parser rejected bad names
    out.type_v          = tv == GGML_TYPE_COUNT ? GGML_TYPE_F16 : tv;
    out.no_perf         = params.no_perf;
    out.embeddings      = params.embedding;
    out.mla             = params.mla_attn;
    out.attn_max_batch  = params.attn_max_batch;
    out.fused_moe       = params.fused_moe;
    out.offload_kqv     = !params.no_kv_offload;
    out.op_offload      = !params.no_op_offload;
    out.op_offload_min_batch = params.op_offload_min_batch;
    out.graph_reduce_type = params.graph_reduce_type == "f16"  ? GGML_TYPE_F16
                          : params.graph_reduce_type == "bf16" ? GGML_TYPE_BF16
                                                               : GGML_TYPE_F32;
    out.graph_reduce_form = params.graph_reduce_form == "ring"         ? LLAMA_GRAPH_REDUCE_RING
                            : params.graph_reduce_form == "collective" ? LLAMA_GRAPH_REDUCE_COLLECTIVE
                            : params.graph_reduce_form == "gather"     ? LLAMA_GRAPH_REDUCE_GATHER
                                                                       : LLAMA_GRAPH_REDUCE_AUTO;
    out.ser_n_min       = params.ser_n_min;
    out.ser_threshold   = params.ser_threshold;
    out.n_ctx_checkpoints = (uint32_t) std::max(params.n_ctx_checkpoints, 0);
    out.rope_freq_base  = params.rope_freq_base;
    out.rope_freq_scale = params.rope_freq_scale;
    out.swa_full        = params.swa_full;
    return out;
}

bool common_warmup(llama_context * ctx, llama_token token) {
    if (token == LLAMA_TOKEN_NULL) {
        const llama_token bos = llama_vocab_bos(llama_model_get_vocab(llama_get_model(ctx)));
        token = bos != LLAMA_TOKEN_NULL ? bos : 0;
    }
    llama_set_warmup(ctx, true);
    const bool ok = llama_decode(ctx, llama_batch_get_one(&token, 1)) == 0;
    llama_set_warmup(ctx, false);
    llama_memory_clear(ctx);
    llama_perf_context_reset(ctx);
    return ok;
}

llama_sampler * common_sampler_chain_from_params(const common_params_sampling & sp, int32_t n_ctx, const llama_vocab * vocab) {
    llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    llama_sampler * chain = llama_sampler_chain_init(cp);
    const size_t min_keep = (size_t) std::max(sp.min_keep, 0);
    int32_t n_vocab = vocab ? llama_vocab_n_tokens(vocab) : 0;
    for (const auto & lb : sp.logit_bias) n_vocab = std::max(n_vocab, lb.token + 1);

    if (!sp.logit_bias.empty()) {
        llama_sampler_chain_add(chain, llama_sampler_init_logit_bias(n_vocab, (int32_t) sp.logit_bias.size(), sp.logit_bias.data()));
    }
    const int32_t last_n = sp.penalty_last_n < 0 ? std::max(n_ctx, 0) : sp.penalty_last_n;
    const bool greedy = sp.temp <= 0.0f;
    const bool mirostat = !greedy && (sp.mirostat == 1 || sp.mirostat == 2);
    for (const std::string & name : sp.samplers) {
        if (name == "penalties") {
            if (last_n != 0 && (sp.penalty_repeat != 1.0f || sp.penalty_freq != 0.0f || sp.penalty_present != 0.0f)) {
                llama_sampler_chain_add(chain, llama_sampler_init_penalties(last_n, sp.penalty_repeat, sp.penalty_freq,
                                                                            sp.penalty_present));
            }
        } else if (name == "dry") {
            if (sp.dry_multiplier != 0.0f && vocab) {
                std::vector<const char *> breakers;
                for (const auto & b : sp.dry_sequence_breakers) breakers.push_back(b.c_str());
                llama_sampler_chain_add(chain, llama_sampler_init_dry(vocab, n_ctx, sp.dry_multiplier, sp.dry_base, sp.dry_allowed_length,
                                                                      sp.dry_penalty_last_n, breakers.data(), breakers.size()));
            }
        } else if (greedy || mirostat) {
            // greedy: the filters cannot change the argmax; mirostat replaces them
        } else if (name == "top_n_sigma") {
            if (sp.top_n_sigma > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_n_sigma(sp.top_n_sigma));
        } else if (name == "top_k") {
            llama_sampler_chain_add(chain, llama_sampler_init_top_k(sp.top_k));
        } else if (name == "typ_p") {
            llama_sampler_chain_add(chain, llama_sampler_init_typical(sp.typ_p, min_keep));
        } else if (name == "top_p") {
            llama_sampler_chain_add(chain, llama_sampler_init_top_p(sp.top_p, min_keep));
        } else if (name == "min_p") {
            llama_sampler_chain_add(chain, llama_sampler_init_min_p(sp.min_p, min_keep));
        } else if (name == "xtc") {
            if (sp.xtc_probability > 0.0f) {
                llama_sampler_chain_add(chain, llama_sampler_init_xtc(sp.xtc_probability, sp.xtc_threshold,
                                                                      std::max<size_t>(min_keep, 1), sp.seed));
            }
        } else if (name == "temperature") {
            llama_sampler_chain_add(chain, llama_sampler_init_temp(sp.temp));
        }
    }
    if (greedy) {
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    } else if (mirostat) {
        llama_sampler_chain_add(chain, llama_sampler_init_temp(sp.temp));
        llama_sampler_chain_add(chain, sp.mirostat == 1
                                           ? llama_sampler_init_mirostat(n_vocab, sp.seed, sp.mirostat_tau, sp.mirostat_eta, 100)
                                           : llama_sampler_init_mirostat_v2(sp.seed, sp.mirostat_tau, sp.mirostat_eta));
    } else {
        llama_sampler_chain_add(chain, llama_sampler_init_dist(sp.seed));
    }
    return chain;
}

std::string common_sampler_canonical_name(const std::string & name) {
    static const std::pair<const char *, const char *> names[] = {
        { "penalties", "penalties" }, { "dry", "dry" },         { "top_n_sigma", "top_n_sigma" }, { "top_k", "top_k" },
        { "typ_p", "typ_p" },         { "typical_p", "typ_p" }, { "typical", "typ_p" },           { "top_p", "top_p" },
        { "min_p", "min_p" },         { "xtc", "xtc" },         { "temperature", "temperature" }, { "temp", "temperature" },
    };
    for (const auto & [alias, canonical] : names) {
        if (name == alias) return canonical;
    }
    return "";
}

bool common_sampler_add_grammar(llama_sampler * chain, const llama_vocab * vocab, const common_params_sampling & sp,
                                std::string & err) {
    if (sp.grammar.empty()) return true;
    char msg[512];
    if (!llama_grammar_validate(sp.grammar.c_str(), "root", msg, sizeof msg)) {
        err = msg;
        return false;
    }
    if (sp.grammar_triggers.empty()) {
        llama_sampler_chain_add(chain, llama_sampler_init_grammar(vocab, sp.grammar.c_str(), "root"));
        return true;
    }
    std::vector<const char *> words;
    for (const auto & w : sp.grammar_triggers) words.push_back(w.c_str());
    llama_sampler_chain_add(chain, llama_sampler_init_grammar_lazy_after_reasoning(
                                       vocab, sp.grammar.c_str(), "root", words.data(), words.size(), sp.grammar_reasoning_open.c_str(),
                                       sp.grammar_reasoning_close.c_str(), sp.grammar_reasoning_starts_inside));
    return true;
}

void common_process_escapes(std::string & s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\' || i + 1 >= s.size()) {
            out += s[i];
            continue;
        }
        const char c = s[++i];
        switch (c) {
            case 'n': out += '\n'; break;
            case 't': out += '\t'; break;
            case 'r': out += '\r'; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'v': out += '\v'; break;
            case '0': out += '\0'; break;
            case '\\': out += '\\'; break;
            case '"': out += '"'; break;
            case '\'': out += '\''; break;
            case 'x': {
                auto hex = [](char h) -> int {
                    if (h >= '0' && h <= '9') return h - '0';
                    if (h >= 'a' && h <= 'f') return h - 'a' + 10;
                    if (h >= 'A' && h <= 'F') return h - 'A' + 10;
                    return -1;
                };
                if (i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
                    out += (char) (hex(s[i + 1]) * 16 + hex(s[i + 2]));
                    i += 2;
                } else {
                    out += "\\x";   // not a valid escape: keep it literally
                }
                break;
            }
            default:
                out += '\\';
                out += c;
                break;
        }
    }
    s = std::move(out);
}

bool common_read_file(const std::string & path, std::string & out, std::string & err) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        err = "cannot open file '" + path + "': " + std::strerror(errno);
        return false;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) {
        err = "error reading file '" + path + "'";
        return false;
    }
    out = ss.str();
    return true;
}

// ---- tokens ------------------------------------------------------------------------------------

std::vector<llama_token> common_tokenize(const llama_vocab * vocab, const std::string & text, bool add_special,
                                         bool parse_special) {
    if (text.size() > (size_t) INT32_MAX) {
        LOG_ERR("common_tokenize: text too long (%zu bytes)\n", text.size());
        return {};
    }
    std::vector<llama_token> tokens(text.size() + 2 * (size_t) add_special + 1);
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), tokens.data(), (int32_t) tokens.size(),
                               add_special, parse_special);
    if (n == INT32_MIN) {
        LOG_ERR("common_tokenize: tokenization failed\n");
        return {};
    }
    if (n < 0) {
        tokens.resize((size_t) -n);
        n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), tokens.data(), (int32_t) tokens.size(),
                           add_special, parse_special);
        if (n < 0) return {};
    }
    tokens.resize((size_t) n);
    return tokens;
}

std::vector<llama_token> common_tokenize(const llama_context * ctx, const std::string & text, bool add_special,
                                         bool parse_special) {
    return common_tokenize(llama_model_get_vocab(llama_get_model(ctx)), text, add_special, parse_special);
}

std::string common_token_to_piece(const llama_vocab * vocab, llama_token token, bool special) {
    std::string piece(16, '\0');
    int32_t n = llama_token_to_piece(vocab, token, piece.data(), (int32_t) piece.size(), 0, special);
    if (n < 0 && n != INT32_MIN) {
        piece.resize((size_t) -n);
        n = llama_token_to_piece(vocab, token, piece.data(), (int32_t) piece.size(), 0, special);
    }
    piece.resize(n > 0 ? (size_t) n : 0);
    return piece;
}

std::string common_token_to_piece(const llama_context * ctx, llama_token token, bool special) {
    return common_token_to_piece(llama_model_get_vocab(llama_get_model(ctx)), token, special);
}

std::string common_detokenize(const llama_vocab * vocab, const std::vector<llama_token> & tokens, bool special) {
    std::string text(tokens.size() * 4 + 16, '\0');
    int32_t n = llama_detokenize(vocab, tokens.data(), (int32_t) tokens.size(), text.data(), (int32_t) text.size(),
                                 false, special);
    if (n < 0 && n != INT32_MIN) {
        text.resize((size_t) -n);
        n = llama_detokenize(vocab, tokens.data(), (int32_t) tokens.size(), text.data(), (int32_t) text.size(),
                             false, special);
    }
    text.resize(n > 0 ? (size_t) n : 0);
    return text;
}

std::string common_detokenize(const llama_context * ctx, const std::vector<llama_token> & tokens, bool special) {
    return common_detokenize(llama_model_get_vocab(llama_get_model(ctx)), tokens, special);
}

// ---- context shift -------------------------------------------------------------------------------

int32_t common_context_shift(llama_context * ctx, llama_seq_id seq, int32_t n_past, int32_t n_keep) {
    n_keep = std::max(n_keep, 0);
    const int32_t n_left = n_past - n_keep;
    const int32_t n_discard = n_left / 2;
    if (n_discard < 1 || !llama_memory_can_shift(ctx, nullptr)) return 0;
    if (!llama_memory_seq_rm(ctx, seq, n_keep, n_keep + n_discard)) return 0;
    llama_memory_seq_add(ctx, seq, n_keep + n_discard, n_past, -n_discard);
    return n_discard;
}

int32_t common_context_shift_keep(const llama_vocab * vocab, const std::vector<llama_token> & prompt, int32_t n_keep) {
    const int32_t n_prompt = (int32_t) prompt.size();
    const bool bos = n_prompt > 0 && llama_vocab_bos(vocab) != LLAMA_TOKEN_NULL && prompt[0] == llama_vocab_bos(vocab);
    if (n_keep < 0 || n_keep + (bos ? 1 : 0) > n_prompt) return n_prompt;
    return n_keep + (bos ? 1 : 0);
}

// ---- logging -------------------------------------------------------------------------------------

namespace {

std::mutex g_log_mutex;
int g_log_verbosity = 0;

bool log_enabled(enum ggml_log_level level) {
    switch (level) {
        case GGML_LOG_LEVEL_ERROR: return true;
        case GGML_LOG_LEVEL_DEBUG: return g_log_verbosity >= 1;
        default:                   return g_log_verbosity >= 0;
    }
}

void log_text(enum ggml_log_level level, const char * text) {
    if (!log_enabled(level)) return;
    std::lock_guard<std::mutex> lock(g_log_mutex);
    std::fputs(text, stderr);
    std::fflush(stderr);
}

void log_callback(enum ggml_log_level level, const char * text, void *) { log_text(level, text); }

} // namespace

void common_log_set_verbosity(int verbosity) { g_log_verbosity = verbosity; }
int  common_log_get_verbosity() { return g_log_verbosity; }

void common_log(enum ggml_log_level level, const char * fmt, ...) {
    if (!log_enabled(level)) return;
    char small[512];
    va_list args;
    va_start(args, fmt);
    va_list copy;
    va_copy(copy, args);
    const int n = std::vsnprintf(small, sizeof(small), fmt, args);
    va_end(args);
    if (n < 0) {
        va_end(copy);
        return;
    }
    if ((size_t) n < sizeof(small)) {
        va_end(copy);
        log_text(level, small);
        return;
    }
    std::string big((size_t) n + 1, '\0');
    std::vsnprintf(big.data(), big.size(), fmt, copy);
    va_end(copy);
    log_text(level, big.c_str());
}

void common_log_install() {
    ggml_log_set(log_callback, nullptr);
    llama_log_set(log_callback, nullptr);
}

// ---- --demo ---------------------------------------------------------------------------------------

common_model_source::~common_model_source() {
    if (!temp_path_.empty()) std::remove(temp_path_.c_str());
}

bool common_model_source::resolve(common_params & params, std::string & err, bool demo_if_empty) {
    if (!params.model.empty() && !params.demo) return true;
    if (params.model.empty() && !params.demo && !demo_if_empty) {
        err = "no model given (-m FILE, or --demo for a small synthetic model)";
        return false;
    }
    std::string path, why;
    if (!kiln_synth_demo_model(path, why)) {
        err = "--demo: could not synthesize the demo model: " + why;
        return false;
    }
    LOG_WRN("--demo: running a small synthesized model with RANDOM WEIGHTS (its text is gibberish); "
            "give a real model with -m FILE\n");
    temp_path_ = path;
    params.model = path;
    return true;
}
