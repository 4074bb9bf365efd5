// The list of flags that are not (or not here) implemented. Implementing a flag means deleting
// its row; the flag-table test then checks that the flag is really used.
#include "arg-promises.h"

#include "arg.h"
#include "llama.h"

#include <cctype>

namespace {

// A -ot value asks for a GPU when one of its PATTERN=BUFFER items names a GPU buffer type
// (CUDA0, GPU1, Vulkan0, ...); "CPU" rules are honoured on any build.
bool overrides_name_a_gpu(const std::string & value) {
    static const char * gpu_prefixes[] = { "cuda", "gpu", "rocm", "vulkan", "metal", "sycl" };
    size_t start = 0;
    while (start <= value.size()) {
        size_t end = value.find(',', start);
        if (end == std::string::npos) end = value.size();
        const std::string item = value.substr(start, end - start);
        const size_t eq = item.rfind('=');
        std::string buft = eq == std::string::npos ? std::string() : item.substr(eq + 1);
        for (char & c : buft) c = (char) std::tolower((unsigned char) c);
        for (const char * p : gpu_prefixes) {
            if (buft.rfind(p, 0) == 0) return true;
        }
        start = end + 1;
    }
    return false;
}

bool layers_ask_for_gpu(const std::string & value) { return value != "0"; }
bool devices_ask_for_gpu(const std::string & value) { return value != "none"; }

const common_flag_status k_flag_status[] = {
    // not implemented yet: refused, so nobody believes they got it
    // (none at present: --keep and -rtr, the last two, are implemented)

    // no-ops by nature in Kiln
    { "-cb", common_flag_promise::no_op, "batching is always continuous" },
    { "-nocb", common_flag_promise::no_op, "batching is always continuous" },
    { "--jinja", common_flag_promise::no_op, "chat templates always use the Jinja engine" },
    { "--no-jinja", common_flag_promise::no_op, "chat templates always use the Jinja engine (built-in names select built-in Jinja templates)" },
    { "--simple-io", common_flag_promise::no_op, "output is always plain" },

    // placement on GPUs (or virtual devices, KILN_VIRTUAL_CPU_DEVICES): ignored, with a warning,
    // where there is none
    { "-dev", common_flag_promise::gpu_placement, "there is no device to pick", devices_ask_for_gpu },
    { "-ngl", common_flag_promise::gpu_placement, "layers stay on the CPU", layers_ask_for_gpu },
    { "-sm", common_flag_promise::gpu_placement, "there is nothing to split across", nullptr },
    { "-ts", common_flag_promise::gpu_placement, "there is nothing to split across", nullptr },
    { "-mg", common_flag_promise::gpu_placement, "there is no GPU to pick", nullptr },
    { "-grt", common_flag_promise::gpu_placement, "there is nothing to split across", nullptr },
    { "--graph-reduce-form", common_flag_promise::gpu_placement, "there is nothing to split across", nullptr },
    { "--moe-split", common_flag_promise::gpu_placement, "there is nothing to split across", nullptr },
    { "--no-op-offload", common_flag_promise::gpu_placement, "there is nothing to offload", nullptr },
    { "--op-offload-min-batch", common_flag_promise::gpu_placement, "there is nothing to offload", nullptr },
    { "-ot", common_flag_promise::gpu_placement, "tensors stay on the CPU", overrides_name_a_gpu },
};

} // namespace

const common_flag_status * common_flag_promise_of(const common_arg & arg) {
    for (const common_flag_status & s : k_flag_status) {
        if (arg.has_name(s.flag)) return &s;
    }
    return nullptr;
}

bool common_gpu_available() { return llama_supports_gpu_offload(); }
