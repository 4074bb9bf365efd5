// LLAMA_ARG_* environment variables: llama.cpp lets most flags come from the environment (as
// container images and service files use them), under the names below. A flag given on the
// command line wins over its variable. The names are llama.cpp's; a flag Kiln does not have, or
// that this tool does not accept, has no variable here.
#include "arg.h"

#include <algorithm>
#include <cstdlib>

namespace {

struct env_flag {
    const char * env;
    const char * flag;   // one of the flag's names in the table
};

const env_flag k_env_flags[] = {
    { "LLAMA_ARG_MODEL", "--model" },
    { "LLAMA_ARG_N_PREDICT", "--n-predict" },
    { "LLAMA_ARG_CTX_SIZE", "--ctx-size" },
    { "LLAMA_ARG_BATCH", "--batch-size" },
    { "LLAMA_ARG_UBATCH", "--ubatch-size" },
    { "LLAMA_ARG_THREADS", "--threads" },
    { "LLAMA_ARG_N_PARALLEL", "--parallel" },
    { "LLAMA_ARG_FLASH_ATTN", "--flash-attn" },
    { "LLAMA_ARG_CACHE_TYPE_K", "--cache-type-k" },
    { "LLAMA_ARG_CACHE_TYPE_V", "--cache-type-v" },
    { "LLAMA_ARG_ROPE_FREQ_BASE", "--rope-freq-base" },
    { "LLAMA_ARG_ROPE_FREQ_SCALE", "--rope-freq-scale" },
    { "LLAMA_ARG_NO_PERF", "--no-perf" },
    { "LLAMA_ARG_NO_MMAP", "--no-mmap" },
    { "LLAMA_ARG_MLOCK", "--mlock" },
    { "LLAMA_ARG_N_GPU_LAYERS", "--n-gpu-layers" },
    { "LLAMA_ARG_SPLIT_MODE", "--split-mode" },
    { "LLAMA_ARG_TENSOR_SPLIT", "--tensor-split" },
    { "LLAMA_ARG_MAIN_GPU", "--main-gpu" },
    { "LLAMA_ARG_OVERRIDE_TENSOR", "--override-tensor" },
    { "LLAMA_ARG_SWA_FULL", "--swa-full" },
    { "LLAMA_ARG_CHAT_TEMPLATE", "--chat-template" },
    { "LLAMA_ARG_CHAT_TEMPLATE_FILE", "--chat-template-file" },
    { "LLAMA_ARG_JINJA", "--jinja" },
    { "LLAMA_ARG_THINK", "--reasoning-format" },
    { "LLAMA_ARG_THINK_BUDGET", "--reasoning-budget" },
    { "LLAMA_CHAT_TEMPLATE_KWARGS", "--chat-template-kwargs" },
    { "LLAMA_ARG_HOST", "--host" },
    { "LLAMA_ARG_PORT", "--port" },
    { "LLAMA_ARG_ALIAS", "--alias" },
    { "LLAMA_API_KEY", "--api-key" },
    { "LLAMA_ARG_TIMEOUT", "--timeout" },
    { "LLAMA_ARG_ENDPOINT_METRICS", "--metrics" },
    { "LLAMA_ARG_ENDPOINT_SLOTS", "--slots" },
    { "LLAMA_ARG_NO_ENDPOINT_SLOTS", "--no-slots" },
    { "LLAMA_ARG_NO_WEBUI", "--no-webui" },
    { "LLAMA_ARG_STATIC_PATH", "--path" },
    { "LLAMA_ARG_ENDPOINT_PROPS", "--props" },
    { "LLAMA_ARG_SSL_KEY_FILE", "--ssl-key-file" },
    { "LLAMA_ARG_SSL_CERT_FILE", "--ssl-cert-file" },
    { "LLAMA_ARG_MODEL_DRAFT", "--model-draft" },
    { "LLAMA_ARG_DRAFT_MAX", "--draft-max" },
    { "LLAMA_ARG_DRAFT_MIN", "--draft-min" },
    { "LLAMA_ARG_DRAFT_P_MIN", "--draft-p-min" },
    { "LLAMA_ARG_CACHE_REUSE", "--cache-reuse" },
    { "LLAMA_ARG_EMBEDDINGS", "--embedding" },
    { "LLAMA_ARG_POOLING", "--pooling" },
    { "LLAMA_ARG_CONTEXT_SHIFT", "--context-shift" },
    { "LLAMA_ARG_NO_CONTEXT_SHIFT", "--no-context-shift" },
    { "LLAMA_ARG_CONT_BATCHING", "--cont-batching" },
    { "LLAMA_ARG_NO_CONT_BATCHING", "--no-cont-batching" },
};

// The flag an argument names ("-c", "--ctx-size=512"), if it is one of a's names.
bool names_flag(const std::string & arg, const common_arg & a) {
    if (arg.empty() || arg[0] != '-') return false;
    const size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    return a.has_name(eq == std::string::npos ? arg : arg.substr(0, eq));
}

} // namespace

common_parse_result common_params_apply_env(const std::vector<std::string> & args, common_params & params, common_tool tool,
                                            const std::function<const char *(const char *)> & get_env) {
    common_parse_result res;
    const std::vector<const common_arg *> flags = common_args_for_tool(tool);
    for (const env_flag & e : k_env_flags) {
        const char * value = get_env(e.env);
        if (!value) continue;
        const auto it = std::find_if(flags.begin(), flags.end(), [&](const common_arg * a) { return a->has_name(e.flag); });
        if (it == flags.end()) continue;   // not a flag of this tool
        const common_arg & a = **it;
        if (std::any_of(args.begin(), args.end(), [&](const std::string & s) { return names_flag(s, a); })) continue;
        std::vector<std::string> one = { e.flag };
        const std::string v = value;
        if (a.kind == common_arg_kind::none) {
            // a switch: set by a true value, left alone by a false one, as llama.cpp reads them
            if (v == "1" || v == "true" || v == "on" || v == "enabled" || v == "yes") {
                // one = { flag }
            } else if (v == "0" || v == "false" || v == "off" || v == "disabled" || v == "no" || v.empty()) {
                continue;
            } else {
                res.status = common_parse_result::error;
                res.message = std::string(e.env) + "=" + v + ": expected 1 or 0 (true/false, on/off) for the switch " + e.flag;
                return res;
            }
        } else {
            one.push_back(v);
        }
        const common_parse_result r = common_params_parse_args(one, params, tool);
        if (r.status != common_parse_result::ok) {
            res.status = common_parse_result::error;
            res.message = std::string("environment variable ") + e.env + ": " + r.message;
            return res;
        }
    }
    return res;
}
