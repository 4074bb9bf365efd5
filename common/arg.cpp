// The flag table and the parser. Values are checked when parsed (numbers are whole numbers,
// enumerations are one of their names, files exist) so a bad command line fails up front with a
// message that names the flag.
#include "arg.h"

#include "arg-promises.h"
#include "chat-template.h"
#include "json-schema-grammar.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

namespace {

constexpr uint32_t CLI  = COMMON_TOOL_CLI;
constexpr uint32_t SRV  = COMMON_TOOL_SERVER;
constexpr uint32_t PPL  = COMMON_TOOL_PERPLEXITY;
constexpr uint32_t SWB  = COMMON_TOOL_SWEEP_BENCH;
constexpr uint32_t IMX  = COMMON_TOOL_IMATRIX;
// llama-bench has its own parser (every flag takes a comma list), so no row is for it
constexpr uint32_t ALL  = COMMON_TOOL_ALL & ~(uint32_t) COMMON_TOOL_BENCH;
constexpr uint32_t GEN  = CLI | SRV;   // tools that sample text

// ---- value parsing ----------------------------------------------------------------------------

int64_t parse_i64(const std::string & v) {
    if (v.empty()) throw common_arg_error("expected an integer");
    errno = 0;
    char * end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (end != v.c_str() + v.size() || errno == ERANGE) throw common_arg_error("expected an integer");
    return x;
}

int32_t parse_int(const std::string & v, int64_t lo = INT32_MIN, int64_t hi = INT32_MAX) {
    const int64_t x = parse_i64(v);
    if (x < lo || x > hi) {
        throw common_arg_error("out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
    }
    return (int32_t) x;
}

float parse_float(const std::string & v) {
    if (v.empty()) throw common_arg_error("expected a number");
    errno = 0;
    char * end = nullptr;
    const float x = std::strtof(v.c_str(), &end);
    if (end != v.c_str() + v.size() || errno == ERANGE || !std::isfinite(x)) throw common_arg_error("expected a number");
    return x;
}

std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : s) {
        if (c == sep) {
            parts.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    parts.push_back(cur);
    return parts;
}

// A grammar is checked when the flag is read, so a typo fails at start-up with its position.
std::string check_grammar(const std::string & text, const std::string & where) {
    char err[512];
    if (!llama_grammar_validate(text.c_str(), "root", err, sizeof err)) throw common_arg_error(where + ": " + err);
    return text;
}

std::string schema_grammar(const std::string & text, const std::string & where) {
    const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
    if (schema.is_discarded()) throw common_arg_error(where + ": not valid JSON");
    try {
        return check_grammar(json_schema_to_grammar(schema), where);
    } catch (const std::invalid_argument & e) {
        throw common_arg_error(where + ": " + e.what());
    }
}

std::string read_file_or_throw(const std::string & path) {
    std::string text, err;
    if (!common_read_file(path, text, err)) throw common_arg_error(err);
    return text;
}

enum llama_flash_attn_type parse_flash_attn(const std::string & v) {
    // bare -fa means on, as in llama.cpp before the value was added
    if (v.empty() || v == "on" || v == "1" || v == "true" || v == "enabled") return LLAMA_FLASH_ATTN_TYPE_ENABLED;
    if (v == "off" || v == "0" || v == "false" || v == "disabled") return LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (v == "auto") return LLAMA_FLASH_ATTN_TYPE_AUTO;
    throw common_arg_error("expected on, off or auto");
}

std::string parse_cache_type(const std::string & v) {
    if (common_kv_cache_type_from_str(v) == GGML_TYPE_COUNT) {
        throw common_arg_error("unknown cache type (allowed: " + common_kv_cache_type_names() + ")");
    }
    return v;
}

std::string parse_choice(const std::string & v, std::initializer_list<const char *> choices) {
    std::string list;
    for (const char * c : choices) {
        if (v == c) return v;
        if (!list.empty()) list += ", ";
        list += c;
    }
    throw common_arg_error("expected one of: " + list);
}

// -ot "regex=buffer[,regex=buffer...]"
void add_tensor_overrides(common_params & p, const std::string & v) {
    for (const std::string & item : split(v, ',')) {
        const size_t eq = item.rfind('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
            throw common_arg_error("expected PATTERN=BUFFER_TYPE, got '" + item + "'");
        }
        std::string pattern = item.substr(0, eq);
        try {
            std::regex re(pattern);
        } catch (const std::regex_error & e) {
            throw common_arg_error("invalid regular expression '" + pattern + "': " + e.what());
        }
        p.tensor_overrides.push_back({ std::move(pattern), item.substr(eq + 1) });
    }
}

// ---- table construction helpers ---------------------------------------------------------------

common_arg sw(std::vector<std::string> names, uint32_t tools, std::string help,
              std::function<void(common_params &)> set) {
    common_arg a;
    a.names = std::move(names);
    a.tools = tools;
    a.help  = std::move(help);
    a.kind  = common_arg_kind::none;
    a.set   = [set = std::move(set)](common_params & p, const std::string &) { set(p); };
    return a;
}

common_arg val(std::vector<std::string> names, std::string hint, uint32_t tools, std::string help,
               std::function<void(common_params &, const std::string &)> set,
               common_arg_kind kind = common_arg_kind::required) {
    common_arg a;
    a.names      = std::move(names);
    a.value_hint = std::move(hint);
    a.tools      = tools;
    a.help       = std::move(help);
    a.kind       = kind;
    a.set        = std::move(set);
    return a;
}

std::vector<common_arg> build_table() {
    std::vector<common_arg> t;

    // ---- general
    t.push_back(sw({ "-h", "--help", "--usage" }, ALL, "print this help and exit", [](common_params &) {}));
    t.push_back(sw({ "--version" }, ALL, "print the version and exit", [](common_params &) {}));
    t.push_back(sw({ "-v", "--verbose" }, ALL, "print debug messages", [](common_params & p) { p.verbosity = 1; }));
    t.push_back(sw({ "--log-disable" }, ALL, "print errors only", [](common_params & p) { p.verbosity = -1; }));
    t.push_back(sw({ "--demo" }, ALL, "run on a small synthesized model with random weights (no -m needed)",
                   [](common_params & p) { p.demo = true; }));

    // ---- model and input
    t.push_back(val({ "-m", "--model" }, "FNAME", ALL, "model file (GGUF)",
                    [](common_params & p, const std::string & v) { p.model = v; }));
    t.push_back(val({ "-p", "--prompt" }, "PROMPT", CLI, "prompt to start generation with",
                    [](common_params & p, const std::string & v) {
                        p.prompt = v;
                        p.prompt_file.clear();
                    }));
    t.push_back(val({ "-f", "--file" }, "FNAME", CLI | PPL | IMX, "read the prompt (or the text to evaluate) from a file",
                    [](common_params & p, const std::string & v) {
                        p.prompt = read_file_or_throw(v);
                        p.prompt_file = v;
                    }));
    t.push_back(val({ "-n", "--n-predict", "--predict" }, "N", GEN | SWB,
                    "tokens to predict (default: -1, -1 = until end of generation, -2 = until the context is full)",
                    [](common_params & p, const std::string & v) { p.n_predict = parse_int(v, -2); }));
    t.push_back(val({ "--keep" }, "N", CLI | SRV, "tokens of the prompt to keep when the context is shifted (default: 0, -1 = all)",
                    [](common_params & p, const std::string & v) { p.n_keep = parse_int(v, -1); }));
    t.push_back(sw({ "--context-shift" }, CLI | SRV, "when the context fills, drop the oldest half of the tokens after --keep and go on (default: on)",
                   [](common_params & p) { p.ctx_shift = true; }));
    t.push_back(sw({ "--no-context-shift" }, CLI | SRV, "stop generating when the context fills",
                   [](common_params & p) { p.ctx_shift = false; }));

    // ---- context, batching, threads
    t.push_back(val({ "-c", "--ctx-size" }, "N", ALL, "size of the context (default: 4096, 0 = from the model)",
                    [](common_params & p, const std::string & v) { p.n_ctx = parse_int(v, 0); }));
    t.push_back(val({ "-b", "--batch-size" }, "N", ALL, "logical maximum batch size (default: 2048)",
                    [](common_params & p, const std::string & v) { p.n_batch = parse_int(v, 1); }));
    t.push_back(val({ "-ub", "--ubatch-size" }, "N", ALL, "physical maximum batch size (default: 512)",
                    [](common_params & p, const std::string & v) { p.n_ubatch = parse_int(v, 1); }));
    t.push_back(val({ "-t", "--threads" }, "N", ALL, "threads for generation (default: -1 = all cores)",
                    [](common_params & p, const std::string & v) {
                        const int32_t n = parse_int(v, -1);
                        if (n == 0) throw common_arg_error("must be at least 1 (or -1 for all cores)");
                        p.n_threads = n;
                    }));
    t.push_back(val({ "-tb", "--threads-batch" }, "N", ALL, "threads for batch and prompt processing (default: same as -t)",
                    [](common_params & p, const std::string & v) {
                        const int32_t n = parse_int(v, -1);
                        if (n == 0) throw common_arg_error("must be at least 1 (or -1 for the -t value)");
                        p.n_threads_batch = n;
                    }));
    t.push_back(val({ "-np", "--parallel" }, "N", SRV | PPL, "number of parallel sequences / server slots (default: 1)",
                    [](common_params & p, const std::string & v) { p.n_parallel = parse_int(v, 1, 4096); }));
    t.push_back(val({ "-fa", "--flash-attn" }, "[on|off|auto]", ALL,
                    "flash attention (default: auto; a bare -fa means on)",
                    [](common_params & p, const std::string & v) { p.flash_attn_type = parse_flash_attn(v); },
                    common_arg_kind::optional));
    t.push_back(val({ "-ctk", "--cache-type-k" }, "TYPE", ALL, "KV cache type for K (default: f16)",
                    [](common_params & p, const std::string & v) { p.cache_type_k = parse_cache_type(v); }));
    t.push_back(val({ "-ctv", "--cache-type-v" }, "TYPE", ALL, "KV cache type for V (default: f16; quantized V needs -fa)",
                    [](common_params & p, const std::string & v) { p.cache_type_v = parse_cache_type(v); }));
    t.push_back(val({ "--rope-freq-base" }, "F", ALL, "RoPE base frequency (default: from the model)",
                    [](common_params & p, const std::string & v) { p.rope_freq_base = parse_float(v); }));
    t.push_back(val({ "--rope-freq-scale" }, "F", ALL, "RoPE frequency scale (default: from the model)",
                    [](common_params & p, const std::string & v) { p.rope_freq_scale = parse_float(v); }));
    t.push_back(sw({ "--no-warmup" }, ALL, "skip the warm-up run", [](common_params & p) { p.warmup = false; }));
    t.push_back(sw({ "--no-perf" }, ALL, "do not collect timings", [](common_params & p) { p.no_perf = true; }));

    // ---- model loading and placement
    t.push_back(sw({ "--no-mmap" }, ALL, "read the model into memory instead of mapping it",
                   [](common_params & p) { p.use_mmap = false; }));
    t.push_back(sw({ "--mlock" }, ALL, "keep the model in RAM (no swapping)", [](common_params & p) { p.use_mlock = true; }));
    t.push_back(sw({ "--check-tensors" }, ALL, "check tensor data for NaN / inf while loading",
                   [](common_params & p) { p.check_tensors = true; }));
    t.push_back(val({ "-ngl", "--gpu-layers", "--n-gpu-layers" }, "N", ALL,
                    "layers to offload to the GPU (without a usable GPU: a warning, and the CPU runs them)",
                    [](common_params & p, const std::string & v) {
                        if (v == "all" || v == "auto") p.n_gpu_layers = v == "all" ? 9999 : -1;
                        else p.n_gpu_layers = parse_int(v, -1);
                    }));
    // device names are checked against the devices when the model is placed (common_model_params_to_llama)
    t.push_back(val({ "-dev", "--device" }, "DEV0,DEV1,...", ALL,
                    "devices to place the model on (none: none; default: all, see --list-devices)",
                    [](common_params & p, const std::string & v) {
                        p.devices.clear();
                        for (const std::string & d : split(v, ',')) {
                            if (d.empty()) throw common_arg_error("empty device name");
                            p.devices.push_back(d);
                        }
                    }));
    t.push_back(sw({ "--list-devices" }, ALL, "print the devices a model can be placed on and exit", [](common_params &) {}));
    t.push_back(val({ "-sm", "--split-mode" }, "MODE", ALL, "how to split the model across GPUs: none, layer, row, graph",
                    [](common_params & p, const std::string & v) {
                        p.split_mode = parse_choice(v, { "none", "layer", "row", "graph" });
                    }));
    t.push_back(val({ "-ts", "--tensor-split" }, "N0,N1,...", ALL, "fraction of the model per GPU",
                    [](common_params & p, const std::string & v) {
                        for (const std::string & part : split(v, v.find('/') != std::string::npos ? '/' : ',')) {
                            if (parse_float(part) < 0.0f) throw common_arg_error("fractions must not be negative");
                        }
                        p.tensor_split = v;
                    }));
    t.push_back(sw({ "-nkvo", "--no-kv-offload" }, ALL, "keep the KV cache in host memory, not with the layers on their devices",
                   [](common_params & p) { p.no_kv_offload = true; }));
    t.push_back(sw({ "--no-op-offload" }, ALL,
                   "compute prompt batches' products of weights kept in host memory on the CPU (default: from 32 tokens on, "
                   "on the main device, the weights copied over)",
                   [](common_params & p) { p.no_op_offload = true; }));
    t.push_back(val({ "--op-offload-min-batch" }, "N", ALL,
                    "the smallest batch (tokens) whose products of weights kept in host memory run on the main device "
                    "(default: 32)",
                    [](common_params & p, const std::string & v) { p.op_offload_min_batch = parse_int(v, 1, 1 << 30); }));
    t.push_back(sw({ "-cmoe", "--cpu-moe" }, ALL, "keep every MoE expert weight in host memory (as -ot exps=CPU)",
                   [](common_params & p) { p.tensor_overrides.push_back({ "\\.ffn_(up|down|gate)_exps", "CPU" }); }));
    t.push_back(val({ "-ncmoe", "--n-cpu-moe" }, "N", ALL, "keep the MoE expert weights of the first N layers in host memory",
                    [](common_params & p, const std::string & v) {
                        const int n = parse_int(v, 0, 100000);
                        for (int i = 0; i < n; ++i) p.tensor_overrides.push_back({ "blk\\." + std::to_string(i) + "\\.ffn_(up|down|gate)_exps", "CPU" });
                    }));
    t.push_back(val({ "-grt", "--graph-reduce-type" }, "{f32,f16,bf16}", ALL,
                    "-sm graph: the type partial results are summed across devices in: f32, f16, bf16 (default: f32)",
                    [](common_params & p, const std::string & v) { p.graph_reduce_type = parse_choice(v, { "f32", "f16", "bf16" }); }));
    t.push_back(val({ "--moe-split" }, "{columns,experts}", ALL,
                    "-sm graph: every device holds the same columns of every routed expert (columns), or whole experts "
                    "by -ts shares (experts) (default: columns)",
                    [](common_params & p, const std::string & v) { p.moe_split = parse_choice(v, { "columns", "experts" }); }));
    t.push_back(val({ "--graph-reduce-form" }, "{auto,collective,gather,ring}", ALL,
                    "-sm graph: add the partial results up with the devices' all-reduce (collective: NCCL over distinct GPUs, "
                    "the CPU's over CPU devices), on -mg (gather) or around the devices, then gather the summed pieces "
                    "(ring: less traffic on -mg's link, more copies) (default: auto, the collective where the devices offer one, "
                    "else gather)",
                    [](common_params & p, const std::string & v) {
                        p.graph_reduce_form = parse_choice(v, { "auto", "collective", "gather", "ring" });
                    }));
    t.push_back(val({ "-mg", "--main-gpu" }, "N", ALL, "the GPU for intermediate results (default: 0)",
                    [](common_params & p, const std::string & v) { p.main_gpu = parse_int(v, 0); }));
    t.push_back(val({ "-ot", "--override-tensor" }, "PATTERN=TYPE,...", ALL,
                    "place tensors whose name matches the regex in that buffer type (repeatable)",
                    [](common_params & p, const std::string & v) { add_tensor_overrides(p, v); }));
    t.push_back(sw({ "-rtr", "--run-time-repack" }, ALL, "repack weights at load into the interleaved layouts that are faster on this CPU (the log names them)",
                   [](common_params & p) { p.repack_tensors = true; }));

    // ---- MoE / MLA
    t.push_back(val({ "-mla", "--mla-use" }, "N", ALL, "MLA attention mode 0..3 (default: the model's)",
                    [](common_params & p, const std::string & v) { p.mla_attn = parse_int(v, 0, 3); }));
    t.push_back(val({ "-amb", "--attention-max-batch" }, "N", ALL, "cap the attention work buffer at N MiB (default: 0 = no cap)",
                    [](common_params & p, const std::string & v) { p.attn_max_batch = parse_int(v, 0); }));
    t.push_back(sw({ "-fmoe", "--fused-moe" }, ALL, "fused MoE up/gate computation (default: on)",
                   [](common_params & p) { p.fused_moe = true; }));
    t.push_back(sw({ "-no-fmoe", "--no-fused-moe" }, ALL, "disable fused MoE", [](common_params & p) { p.fused_moe = false; }));
    t.push_back(sw({ "--swa-full" }, ALL,
                   "sliding-window layers cache the whole context (default: only their window, which is smaller "
                   "but cannot rewind further back than the window)",
                   [](common_params & p) { p.swa_full = true; }));
    t.push_back(val({ "-ctxcp", "--ctx-checkpoints" }, "N", ALL,
                    "models with recurrent layers: state checkpoints kept per sequence, taken after each prompt piece, "
                    "so a later prompt sharing a prefix resumes from one (default: 8)",
                    [](common_params & p, const std::string & v) { p.n_ctx_checkpoints = parse_int(v, 0, 1024); }));
    t.push_back(val({ "-ser", "--smart-expert-reduction" }, "K,T", ALL,
                    "use at least K experts, dropping the weakest below cumulative weight T (default: off)",
                    [](common_params & p, const std::string & v) {
                        const auto parts = split(v, ',');
                        if (parts.size() != 2) throw common_arg_error("expected K,T (an integer and a number)");
                        p.ser_n_min     = parse_int(parts[0], -1);
                        p.ser_threshold = parse_float(parts[1]);
                    }));

    // ---- sampling
    t.push_back(val({ "-s", "--seed" }, "SEED", GEN, "random seed (default: -1 = random)",
                    [](common_params & p, const std::string & v) {
                        const int64_t s = parse_i64(v);
                        if (s == -1) p.sampling.seed = LLAMA_DEFAULT_SEED;
                        else if (s < 0 || s > (int64_t) UINT32_MAX) throw common_arg_error("expected -1 or 0 to 4294967295");
                        else p.sampling.seed = (uint32_t) s;
                    }));
    t.push_back(val({ "--temp" }, "T", GEN, "temperature (default: 0.8, <= 0 = greedy)",
                    [](common_params & p, const std::string & v) { p.sampling.temp = parse_float(v); }));
    t.push_back(val({ "--top-k" }, "N", GEN, "top-k sampling (default: 40, 0 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.top_k = parse_int(v); }));
    t.push_back(val({ "--top-p" }, "P", GEN, "top-p sampling (default: 0.95, 1.0 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.top_p = parse_float(v); }));
    t.push_back(val({ "--min-p" }, "P", GEN, "min-p sampling (default: 0.05, 0.0 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.min_p = parse_float(v); }));
    t.push_back(val({ "--typical" }, "P", GEN, "locally typical sampling (default: 1.0 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.typ_p = parse_float(v); }));
    t.push_back(val({ "--min-keep" }, "N", GEN, "samplers keep at least N tokens (default: 0)",
                    [](common_params & p, const std::string & v) { p.sampling.min_keep = parse_int(v, 0); }));
    t.push_back(val({ "--repeat-penalty" }, "F", GEN, "penalize repeated tokens (default: 1.0 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.penalty_repeat = parse_float(v); }));
    t.push_back(val({ "--repeat-last-n" }, "N", GEN, "tokens considered by the penalties (default: 64, 0 = off, -1 = context size)",
                    [](common_params & p, const std::string & v) { p.sampling.penalty_last_n = parse_int(v, -1); }));
    t.push_back(val({ "--presence-penalty" }, "F", GEN, "presence penalty (default: 0.0 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.penalty_present = parse_float(v); }));
    t.push_back(val({ "--frequency-penalty" }, "F", GEN, "frequency penalty (default: 0.0 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.penalty_freq = parse_float(v); }));
    t.push_back(val({ "--samplers" }, "SAMPLERS", GEN,
                    "samplers in order, separated by ';' (default: penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)",
                    [](common_params & p, const std::string & v) {
                        p.sampling.samplers.clear();
                        for (const std::string & name : split(v, ';')) {
                            const std::string c = common_sampler_canonical_name(name);
                            if (c.empty()) throw common_arg_error("unknown sampler '" + name + "'");
                            p.sampling.samplers.push_back(c);
                        }
                    }));
    t.push_back(val({ "--dry-multiplier" }, "N", GEN, "DRY repetition penalty multiplier (default: 0.0 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.dry_multiplier = parse_float(v); }));
    t.push_back(val({ "--dry-base" }, "N", GEN, "DRY: penalty base (default: 1.75)",
                    [](common_params & p, const std::string & v) { p.sampling.dry_base = parse_float(v); }));
    t.push_back(val({ "--dry-allowed-length" }, "N", GEN, "DRY: repeats up to this long are free (default: 2)",
                    [](common_params & p, const std::string & v) { p.sampling.dry_allowed_length = parse_int(v, 1); }));
    t.push_back(val({ "--dry-penalty-last-n" }, "N", GEN, "DRY: tokens looked back over (default: -1 = context size)",
                    [](common_params & p, const std::string & v) { p.sampling.dry_penalty_last_n = parse_int(v, -1); }));
    t.push_back(val({ "--dry-sequence-breaker" }, "STRING", GEN,
                    "DRY: a sequence breaker (repeatable; replaces the defaults \\n : \" *; 'none' for none)",
                    [](common_params & p, const std::string & v) {
                        // the first one given replaces the defaults
                        static const std::vector<std::string> defaults = common_params_sampling().dry_sequence_breakers;
                        if (p.sampling.dry_sequence_breakers == defaults) p.sampling.dry_sequence_breakers.clear();
                        if (v != "none") {
                            std::string s = v;
                            common_process_escapes(s);
                            p.sampling.dry_sequence_breakers.push_back(s);
                        }
                    }));
    t.push_back(val({ "--top-nsigma", "--top-n-sigma" }, "N", GEN, "keep tokens within N standard deviations of the top logit (default: -1 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.top_n_sigma = parse_float(v); }));
    t.push_back(val({ "--xtc-probability" }, "P", GEN, "XTC: chance of removing the top choices (default: 0.0 = off)",
                    [](common_params & p, const std::string & v) { p.sampling.xtc_probability = parse_float(v); }));
    t.push_back(val({ "--xtc-threshold" }, "P", GEN, "XTC: tokens at least this likely count as top choices (default: 0.1)",
                    [](common_params & p, const std::string & v) { p.sampling.xtc_threshold = parse_float(v); }));
    t.push_back(val({ "--mirostat" }, "N", GEN, "mirostat: 0 off, 1 mirostat, 2 mirostat 2.0 (replaces top-k/p, min-p, typical, XTC)",
                    [](common_params & p, const std::string & v) {
                        const int32_t m = parse_int(v);
                        if (m < 0 || m > 2) throw common_arg_error("expected 0, 1 or 2");
                        p.sampling.mirostat = m;
                    }));
    t.push_back(val({ "--mirostat-lr" }, "ETA", GEN, "mirostat learning rate (default: 0.1)",
                    [](common_params & p, const std::string & v) { p.sampling.mirostat_eta = parse_float(v); }));
    t.push_back(val({ "--mirostat-ent" }, "TAU", GEN, "mirostat target entropy (default: 5.0)",
                    [](common_params & p, const std::string & v) { p.sampling.mirostat_tau = parse_float(v); }));
    t.push_back(val({ "-l", "--logit-bias" }, "TOKEN_ID(+/-)BIAS", GEN, "add BIAS to a token's logit, e.g. 15043+1 or 15043-inf",
                    [](common_params & p, const std::string & v) {
                        const size_t sign = v.find_first_of("+-", 1);
                        if (sign == std::string::npos) throw common_arg_error("expected TOKEN_ID+BIAS or TOKEN_ID-BIAS");
                        const int32_t id = parse_int(v.substr(0, sign));
                        if (id < 0) throw common_arg_error("the token id must not be negative");
                        const std::string b = v.substr(sign);
                        const float bias = (b == "-inf" || b == "-INF") ? -INFINITY : (b == "+inf" ? INFINITY : parse_float(b));
                        p.sampling.logit_bias.push_back({ id, bias });
                    }));
    t.push_back(val({ "--grammar" }, "GRAMMAR", GEN, "constrain generations with a GBNF grammar (start rule: root)",
                    [](common_params & p, const std::string & v) { p.sampling.grammar = check_grammar(v, "--grammar"); }));
    t.push_back(val({ "--grammar-file" }, "FNAME", GEN, "read the GBNF grammar from a file",
                    [](common_params & p, const std::string & v) {
                        p.sampling.grammar = check_grammar(read_file_or_throw(v), "'" + v + "'");
                    }));
    t.push_back(val({ "-j", "--json-schema" }, "SCHEMA", GEN, "constrain generations to JSON this schema validates",
                    [](common_params & p, const std::string & v) { p.sampling.grammar = schema_grammar(v, "--json-schema"); }));
    t.push_back(val({ "-jf", "--json-schema-file" }, "FNAME", GEN, "read the JSON schema from a file",
                    [](common_params & p, const std::string & v) {
                        p.sampling.grammar = schema_grammar(read_file_or_throw(v), "'" + v + "'");
                    }));
    t.push_back(sw({ "--ignore-eos" }, GEN, "keep generating after end-of-generation tokens",
                   [](common_params & p) { p.sampling.ignore_eos = true; }));

    // ---- cli
    t.push_back(sw({ "-cnv", "--conversation" }, CLI, "conversation mode with the chat template",
                   [](common_params & p) { p.conversation_mode = COMMON_CONVERSATION_MODE_ENABLED; }));
    t.push_back(sw({ "-no-cnv", "--no-conversation" }, CLI, "run the prompt once and exit",
                   [](common_params & p) { p.conversation_mode = COMMON_CONVERSATION_MODE_DISABLED; }));
    t.push_back(sw({ "-e", "--escape" }, CLI, "process escapes (\\n, \\t, \\xNN, ...) in the prompt (default: on)",
                   [](common_params & p) { p.escape = true; }));
    t.push_back(sw({ "--no-escape" }, CLI, "do not process escapes", [](common_params & p) { p.escape = false; }));
    t.push_back(sw({ "--verbose-prompt" }, CLI, "print the prompt's tokens before generating",
                   [](common_params & p) { p.verbose_prompt = true; }));
    t.push_back(val({ "-r", "--reverse-prompt" }, "PROMPT", CLI, "stop generating when the output ends with PROMPT (repeatable)",
                    [](common_params & p, const std::string & v) {
                        if (v.empty()) throw common_arg_error("the reverse prompt must not be empty");
                        p.antiprompt.push_back(v);
                    }));
    t.push_back(sw({ "--no-display-prompt" }, CLI, "do not print the prompt before the generation",
                   [](common_params & p) { p.display_prompt = false; }));
    t.push_back(sw({ "--simple-io" }, CLI, "accepted for compatibility (output is always plain)", [](common_params &) {}));
    t.push_back(sw({ "-sp", "--special" }, CLI, "print special tokens", [](common_params & p) { p.special = true; }));

    // ---- chat templates (cli and server)
    t.push_back(val({ "--chat-template" }, "JINJA_TEMPLATE", GEN,
                    "chat template: a built-in name (chatml, llama3, deepseek3, ...: see common/chat-template.h) or Jinja source",
                    [](common_params & p, const std::string & v) { p.chat_template = kiln::chat_template_source(v); }));
    t.push_back(val({ "--chat-template-file" }, "FNAME", GEN, "read the chat template from a file",
                    [](common_params & p, const std::string & v) { p.chat_template = read_file_or_throw(v); }));
    // templates always run on the Jinja engine: both are accepted with a warning (arg-promises.cpp)
    t.push_back(sw({ "--jinja" }, GEN, "accepted for compatibility (templates always use Jinja)", [](common_params &) {}));
    t.push_back(sw({ "--no-jinja" }, GEN, "accepted for compatibility (templates always use Jinja)", [](common_params &) {}));
    t.push_back(val({ "--reasoning-format" }, "FORMAT", GEN, "where reasoning goes: none, auto, deepseek, deepseek-legacy (default: auto)",
                    [](common_params & p, const std::string & v) {
                        const std::string f = parse_choice(v, { "none", "auto", "deepseek", "deepseek-legacy" });
                        p.reasoning_format = f == "none"     ? COMMON_REASONING_FORMAT_NONE
                                           : f == "auto"     ? COMMON_REASONING_FORMAT_AUTO
                                           : f == "deepseek" ? COMMON_REASONING_FORMAT_DEEPSEEK
                                                             : COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY;
                    }));
    t.push_back(val({ "--reasoning-budget" }, "N", GEN,
                    "thinking budget: -1 unrestricted, 0 thinking off (the template's enable_thinking=false), N: after N "
                    "tokens of thinking the server closes the block and the answer follows (default: -1)",
                    [](common_params & p, const std::string & v) { p.reasoning_budget = parse_int(v, -1, INT32_MAX); }));
    t.push_back(val({ "--chat-template-kwargs" }, "JSON", GEN,
                    "extra variables for the chat template, a JSON object, e.g. '{\"enable_thinking\": false}'",
                    [](common_params & p, const std::string & v) {
                        const nlohmann::ordered_json j = nlohmann::ordered_json::parse(v, nullptr, false);
                        if (j.is_discarded() || !j.is_object()) throw common_arg_error("expected a JSON object, got '" + v + "'");
                        p.chat_template_kwargs = j.dump();
                    }));

    // ---- server
    t.push_back(val({ "--host" }, "HOST", SRV, "address to listen on (default: 127.0.0.1)",
                    [](common_params & p, const std::string & v) {
                        if (v.empty()) throw common_arg_error("expected a host name or address");
                        p.hostname = v;
                    }));
    t.push_back(val({ "--port" }, "PORT", SRV, "port to listen on (default: 8080)",
                    [](common_params & p, const std::string & v) { p.port = parse_int(v, 0, 65535); }));
    t.push_back(val({ "-a", "--alias" }, "NAME", SRV, "model name reported by the API",
                    [](common_params & p, const std::string & v) { p.model_alias = v; }));
    t.push_back(val({ "--api-key" }, "KEY", SRV, "API key(s) clients must send (comma-separated; repeatable)",
                    [](common_params & p, const std::string & v) {
                        for (const std::string & k : split(v, ',')) {
                            if (!k.empty()) p.api_keys.push_back(k);
                        }
                    }));
    t.push_back(val({ "--api-key-file" }, "FNAME", SRV, "file with one API key per line",
                    [](common_params & p, const std::string & v) {
                        std::istringstream in(read_file_or_throw(v));
                        std::string line;
                        while (std::getline(in, line)) {
                            while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
                            if (!line.empty()) p.api_keys.push_back(line);
                        }
                    }));
    t.push_back(val({ "-to", "--timeout" }, "N", SRV, "read/write timeout in seconds (default: 600)",
                    [](common_params & p, const std::string & v) { p.timeout_read = p.timeout_write = parse_int(v, 0); }));
    t.push_back(val({ "--cors-origin" }, "ORIGIN[,ORIGIN...]", SRV,
                    "origins browsers may call the API from (default: *, any; never with credentials)",
                    [](common_params & p, const std::string & v) {
                        std::vector<std::string> origins;
                        for (const std::string & o : split(v, ',')) {
                            if (o.empty()) throw common_arg_error("empty origin");
                            if (o != "*" && o.find("://") == std::string::npos) {
                                throw common_arg_error("'" + o + "' is not an origin (scheme://host[:port]) or *");
                            }
                            origins.push_back(o);
                        }
                        p.cors_origins = origins;
                    }));
    t.push_back(val({ "--threads-http" }, "N", SRV, "threads serving HTTP connections (default: -1 = every slot and the queue, plus 8)",
                    [](common_params & p, const std::string & v) {
                        const int32_t n = parse_int(v, -1, 1024);
                        if (n == 0) throw common_arg_error("must be at least 1 (or -1 for the default)");
                        p.n_threads_http = n;
                    }));
    t.push_back(sw({ "--metrics" }, SRV, "enable the Prometheus /metrics endpoint",
                   [](common_params & p) { p.endpoint_metrics = true; }));
    t.push_back(sw({ "--slots" }, SRV, "enable the /slots endpoint (default: on)", [](common_params & p) { p.endpoint_slots = true; }));
    t.push_back(sw({ "--no-slots" }, SRV, "disable the /slots endpoint", [](common_params & p) { p.endpoint_slots = false; }));
    // llama.cpp's --webui/--no-webui switches, and ik_llama.cpp's --webui NAME (there "llamacpp" picks
    // another bundled page; Kiln has one)
    t.push_back(val({ "--webui" }, "[auto|llamacpp|none]", SRV, "serve the chat page at / (default: auto = on; none: off)",
                    [](common_params & p, const std::string & v) {
                        p.webui = v.empty() || parse_choice(v, { "auto", "llamacpp", "none" }) != "none";
                    },
                    common_arg_kind::optional));
    t.push_back(sw({ "--no-webui" }, SRV, "do not serve the chat page (/ answers 404)", [](common_params & p) { p.webui = false; }));
    t.push_back(val({ "--path" }, "DIR", SRV, "serve the web page from the files in DIR (its index.html at /) instead of the built-in one",
                    [](common_params & p, const std::string & v) {
                        std::error_code ec;
                        if (!std::filesystem::is_directory(v, ec)) throw common_arg_error("not a directory");
                        p.public_path = v;
                    }));
    t.push_back(val({ "-md", "--model-draft" }, "FNAME", CLI | SRV, "draft model for speculative decoding (same vocabulary as -m)",
                    [](common_params & p, const std::string & v) { p.speculative.model = v; }));
    t.push_back(val({ "--draft-max", "--draft", "--draft-n" }, "N", CLI | SRV, "most tokens drafted per step (default: 16)",
                    [](common_params & p, const std::string & v) { p.speculative.n_max = parse_int(v, 1, 256); }));
    t.push_back(val({ "--draft-min", "--draft-n-min" }, "N", CLI | SRV, "fewest tokens a draft must have to be tried (default: 0)",
                    [](common_params & p, const std::string & v) { p.speculative.n_min = parse_int(v, 0, 256); }));
    t.push_back(val({ "--draft-p-min" }, "P", CLI | SRV, "the draft model stops drafting below this probability of its top token (default: 0.8)",
                    [](common_params & p, const std::string & v) {
                        const float f = parse_float(v);
                        if (!(f >= 0.0f && f <= 1.0f)) throw common_arg_error("must be between 0 and 1");
                        p.speculative.p_min = f;
                    }));
    t.push_back(val({ "--spec-type" }, "{none,ngram-simple}", CLI | SRV,
                    "draft without a draft model: ngram-simple drafts what followed the last n-gram earlier in prompt and output (default: none)",
                    [](common_params & p, const std::string & v) {
                        if (v == "none") p.speculative.ngram = false;
                        else if (v == "ngram-simple") p.speculative.ngram = true;
                        else throw common_arg_error("must be none or ngram-simple (ngram-cache, ngram-map-k, ngram-map-k4v and ngram-mod are not implemented)");
                    }));
    t.push_back(val({ "--ssl-key-file" }, "FNAME", SRV, "PEM private key: serve HTTPS (with --ssl-cert-file)",
                    [](common_params & p, const std::string & v) { p.ssl_file_key = v; }));
    t.push_back(val({ "--ssl-cert-file" }, "FNAME", SRV, "PEM certificate (chain): serve HTTPS (with --ssl-key-file)",
                    [](common_params & p, const std::string & v) { p.ssl_file_cert = v; }));
    t.push_back(sw({ "--props" }, SRV, "enable POST /props (changing server properties)", [](common_params & p) { p.endpoint_props = true; }));
    t.push_back(val({ "--slot-save-path" }, "PATH", SRV, "directory of the slot files of /slots/{id}?action=save|restore (default: off)",
                    [](common_params & p, const std::string & v) { p.slot_save_path = v; }));
    t.push_back(val({ "--cache-reuse" }, "N", SRV,
                    "reuse chunks of at least N cached tokens that a new prompt has further on, by shifting them (default: 0 = off)",
                    [](common_params & p, const std::string & v) { p.n_cache_reuse = parse_int(v, 0); }));
    t.push_back(sw({ "--embedding", "--embeddings" }, SRV, "serve embeddings (/v1/embeddings, /embedding) instead of completions",
                   [](common_params & p) { p.embedding = true; }));
    t.push_back(val({ "--pooling" }, "{none,mean,cls,last}", SRV,
                    "how token embeddings become one vector (default: the model's, else none)",
                    [](common_params & p, const std::string & v) { p.pooling = parse_choice(v, { "none", "mean", "cls", "last" }); }));
    // batching is always continuous: both are accepted with a warning (arg-promises.cpp)
    t.push_back(sw({ "-cb", "--cont-batching" }, SRV, "accepted for compatibility (batching is always continuous)",
                   [](common_params &) {}));
    t.push_back(sw({ "-nocb", "--no-cont-batching" }, SRV, "accepted for compatibility (batching is always continuous)",
                   [](common_params &) {}));

    // ---- perplexity / imatrix
    t.push_back(val({ "--chunks" }, "N", PPL | IMX, "process at most N chunks (default: -1 = all)",
                    [](common_params & p, const std::string & v) { p.n_chunks = parse_int(v, -1); }));
    t.push_back(val({ "--kl-divergence-base" }, "FNAME", PPL, "file of base logits to write (or to read with --kl-divergence)",
                    [](common_params & p, const std::string & v) { p.logits_file = v; }));
    t.push_back(sw({ "--kl-divergence" }, PPL, "compare with the base logits of --kl-divergence-base",
                   [](common_params & p) { p.kl_divergence = true; }));
    t.push_back(val({ "--ppl-stride" }, "N", PPL, "stride for perplexity (default: 0 = chunks)",
                    [](common_params & p, const std::string & v) { p.ppl_stride = parse_int(v, 0); }));
    t.push_back(val({ "-o", "--output", "--output-file" }, "FNAME", IMX, "output file",
                    [](common_params & p, const std::string & v) { p.out_file = v; }));

    // ---- benchmarks (llama-bench parses its comma lists itself: examples/llama-bench)
    // sweep-bench's table is markdown, so "md" (llama-bench's name for it) is accepted too
    t.push_back(val({ "--output-format" }, "FORMAT", SWB, "output format: table (or md) or jsonl (default: table)",
                    [](common_params & p, const std::string & v) { p.output_format = parse_choice(v, { "table", "md", "jsonl" }); }));
    t.push_back(sw({ "-wb", "--warmup-batch" }, SWB, "warm up with a full batch before measuring",
                   [](common_params & p) { p.warmup_batch = true; }));

    return t;
}

const common_arg * find_arg(common_tool tool, const std::string & name, bool * other_tool) {
    *other_tool = false;
    for (const common_arg & a : common_arg_table()) {
        if (!a.has_name(name)) continue;
        if (a.for_tool(tool)) return &a;
        *other_tool = true;
    }
    return nullptr;
}

std::string names_of(const common_arg & a) {
    std::string s;
    for (const std::string & n : a.names) {
        if (!s.empty()) s += ", ";
        s += n;
    }
    return s;
}

} // namespace

const char * common_tool_name(common_tool tool) {
    switch (tool) {
        case COMMON_TOOL_CLI:         return "llama-cli";
        case COMMON_TOOL_SERVER:      return "llama-server";
        case COMMON_TOOL_PERPLEXITY:  return "llama-perplexity";
        case COMMON_TOOL_SWEEP_BENCH: return "llama-sweep-bench";
        case COMMON_TOOL_BENCH:       return "llama-bench";
        case COMMON_TOOL_IMATRIX:     return "llama-imatrix";
        default:                      return "kiln";
    }
}

bool common_arg::has_name(const std::string & name) const {
    return std::find(names.begin(), names.end(), name) != names.end();
}

const std::vector<common_arg> & common_arg_table() {
    static const std::vector<common_arg> table = build_table();
    return table;
}

std::vector<const common_arg *> common_args_for_tool(common_tool tool) {
    std::vector<const common_arg *> out;
    for (const common_arg & a : common_arg_table()) {
        if (a.for_tool(tool)) out.push_back(&a);
    }
    return out;
}

std::string common_version_text() {
    return "version: kiln 0.1\nbuilt with " + std::string(__VERSION__) + "\n";
}

// llama.cpp's format: "Available devices:" then "  NAME: description (total MiB, free MiB free)"
std::string common_device_list_text() {
    std::string out = "Available devices:\n";
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        size_t free = 0, total = 0;
        ggml_backend_dev_memory(d, &free, &total);
        char line[256];
        std::snprintf(line, sizeof(line), "  %s: %s (%zu MiB, %zu MiB free)\n", ggml_backend_dev_name(d),
                      ggml_backend_dev_description(d), total / 1048576, free / 1048576);
        out += line;
    }
    return out;
}

std::string common_params_usage(common_tool tool) {
    std::string out = "usage: " + std::string(common_tool_name(tool)) + " [options]\n\noptions:\n";
    for (const common_arg * a : common_args_for_tool(tool)) {
        std::string left = "  " + names_of(*a);
        if (!a->value_hint.empty()) left += " " + a->value_hint;
        if (left.size() < 36) left.resize(36, ' ');
        else left += "\n" + std::string(36, ' ');
        out += left + a->help + "\n";
    }
    return out;
}

common_parse_result common_params_parse_args(const std::vector<std::string> & args, common_params & params,
                                             common_tool tool) {
    common_parse_result res;
    auto fail = [&](std::string msg) {
        res.status  = common_parse_result::error;
        res.message = std::move(msg);
        return res;
    };

    for (size_t i = 0; i < args.size(); ++i) {
        std::string name = args[i];
        std::string value;
        bool has_inline_value = false;
        // --name=value for long flags
        if (name.rfind("--", 0) == 0) {
            const size_t eq = name.find('=');
            if (eq != std::string::npos) {
                value = name.substr(eq + 1);
                name  = name.substr(0, eq);
                has_inline_value = true;
            }
        }
        if (name.empty() || name[0] != '-' || name == "-") {
            return fail("unexpected argument '" + args[i] + "' (flags start with '-'; see --help)");
        }

        bool other_tool = false;
        const common_arg * a = find_arg(tool, name, &other_tool);
        if (!a) {
            if (other_tool) {
                return fail("argument " + name + " is not supported by " + common_tool_name(tool));
            }
            return fail("unknown argument: " + name);
        }
        if (a->has_name("-h")) {
            res.status  = common_parse_result::help;
            res.message = common_params_usage(tool);
            return res;
        }
        if (a->has_name("--version")) {
            res.status  = common_parse_result::version;
            res.message = common_version_text();
            return res;
        }
        if (a->has_name("--list-devices")) {   // printed and exit(0), as for --help
            res.status  = common_parse_result::help;
            res.message = common_device_list_text();
            return res;
        }

        switch (a->kind) {
            case common_arg_kind::none:
                if (has_inline_value) return fail("argument " + name + " does not take a value");
                break;
            case common_arg_kind::required:
                if (!has_inline_value) {
                    if (i + 1 >= args.size()) {
                        return fail("argument " + name + " needs a value (" + a->value_hint + ")");
                    }
                    value = args[++i];
                }
                break;
            case common_arg_kind::optional:
                if (!has_inline_value && i + 1 < args.size() && !args[i + 1].empty() && args[i + 1][0] != '-') {
                    value = args[++i];
                }
                break;
        }

        // flags that are not implemented (here) are refused or ignored with a warning, never
        // silently accepted; a bad value is still an error either way
        const common_flag_status * promise = common_flag_promise_of(*a);
        if (promise && promise->promise == common_flag_promise::unsupported) {
            return fail(name + " is not supported yet (" + promise->note + ")");
        }
        bool ignored = false;
        if (promise && promise->promise == common_flag_promise::no_op) {
            res.warnings.push_back(name + " has no effect: " + promise->note);
            ignored = true;
        } else if (promise && promise->promise == common_flag_promise::gpu_placement && !common_gpu_available() &&
                   (!promise->asks_for_gpu || promise->asks_for_gpu(value))) {
            res.warnings.push_back("no usable GPU found, " + name + " ignored (" + promise->note + ")");
            ignored = true;
        }
        common_params scratch;
        try {
            a->set(ignored ? scratch : params, value);
        } catch (const std::exception & e) {
            return fail("invalid value '" + value + "' for " + name + ": " + e.what());
        }
    }

    if (params.escape && params.prompt_file.empty()) common_process_escapes(params.prompt);
    if (params.ser_n_min >= 0 && params.ser_threshold < 0.0f) {
        return fail("invalid value for -ser: the threshold must not be negative");
    }
    common_log_set_verbosity(params.verbosity);
    return res;
}

bool common_params_parse(int argc, char ** argv, common_params & params, common_tool tool) {
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    common_parse_result r = common_params_apply_env(args, params, tool, [](const char * name) { return std::getenv(name); });
    if (r.status == common_parse_result::ok) r = common_params_parse_args(args, params, tool);
    switch (r.status) {
        case common_parse_result::ok:
            for (const std::string & w : r.warnings) LOG_WRN("warning: %s\n", w.c_str());
            return true;
        case common_parse_result::help:
        case common_parse_result::version:
            std::fputs(r.message.c_str(), stdout);
            std::fflush(stdout);
            std::exit(0);
        case common_parse_result::error:
            break;
    }
    for (const std::string & w : r.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    std::fprintf(stderr, "error: %s\n", r.message.c_str());
    std::fprintf(stderr, "run '%s --help' for the list of options\n", common_tool_name(tool));
    return false;
}
