// `llama-gguf synth`: write a random-weight model of a preset architecture (common/synth.h).
#include "commands.h"

#include "synth.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

namespace {

void synth_usage(FILE * out) {
    std::fprintf(out,
                 "usage: llama-gguf synth PRESET [options]\n\n"
                 "Writes a GGUF model with random weights and the shapes of a real model, for benchmarks and tests.\n\n"
                 "options:\n"
                 "  -o, --output FILE   output file (default: synth-PRESET-TYPE.gguf)\n"
                 "  --layers N          number of layers (default: the preset's)\n"
                 "  --experts N         number of routed experts (MoE presets; default: the preset's)\n"
                 "  --seed N            random seed (default: 42); the same options give the same bytes\n"
                 "  --type T            f16, bf16 or f32 for the matrices (default: f16)\n"
                 "  --name NAME         general.name (default: synth-PRESET)\n"
                 "  --dry-run           print the tensors (name, type, shape) and write nothing\n"
                 "  --list              list the presets\n\n"
                 "presets:\n");
    for (const auto & [name, desc] : kiln_synth_presets()) std::fprintf(out, "  %-15s %s\n", name.c_str(), desc.c_str());
}

bool parse_int(const char * s, long long lo, long long hi, long long & out) {
    errno = 0;
    char * end = nullptr;
    const long long v = std::strtoll(s, &end, 10);
    if (!*s || *end || errno == ERANGE || v < lo || v > hi) return false;
    out = v;
    return true;
}

// Percent steps on a terminal; nothing in logs.
void print_progress(float fraction, void * user) {
    int & last = *(int *) user;
    const int pct = (int) (100.0f * fraction);
    if (pct == last) return;
    last = pct;
    std::fprintf(stderr, "\rwriting: %3d%%", pct);
    std::fflush(stderr);
}

} // namespace

int gguf_cmd_synth(int argc, char ** argv) {
    kiln_synth_options opt;
    std::string out;
    bool have_preset = false;
    bool dry_run = false;
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](const char * what) -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "llama-gguf synth: %s needs a value (%s)\n", a.c_str(), what);
                return nullptr;
            }
            return argv[++i];
        };
        long long n = 0;
        if (a == "-h" || a == "--help") {
            synth_usage(stdout);
            return 0;
        } else if (a == "--list") {
            for (const auto & [name, desc] : kiln_synth_presets()) std::printf("%-15s %s\n", name.c_str(), desc.c_str());
            return 0;
        } else if (a == "--dry-run") {
            dry_run = true;
        } else if (a == "-o" || a == "--output") {
            const char * v = value("FILE");
            if (!v) return 1;
            out = v;
        } else if (a == "--layers" || a == "--experts") {
            const char * v = value("N");
            if (!v) return 1;
            if (!parse_int(v, 1, a == "--layers" ? 1000 : 4096, n)) {
                std::fprintf(stderr, "llama-gguf synth: invalid value '%s' for %s (expected a positive integer)\n", v, a.c_str());
                return 1;
            }
            (a == "--layers" ? opt.n_layers : opt.n_experts) = (int32_t) n;
        } else if (a == "--seed") {
            const char * v = value("N");
            if (!v) return 1;
            if (!parse_int(v, 0, INT64_MAX, n)) {
                std::fprintf(stderr, "llama-gguf synth: invalid value '%s' for --seed (expected a non-negative integer)\n", v);
                return 1;
            }
            opt.seed = (uint64_t) n;
        } else if (a == "--type") {
            const char * v = value("T");
            if (!v) return 1;
            const std::string t = v;
            if (t == "f16" || t == "F16") opt.type = GGML_TYPE_F16;
            else if (t == "bf16" || t == "BF16") opt.type = GGML_TYPE_BF16;
            else if (t == "f32" || t == "F32") opt.type = GGML_TYPE_F32;
            else {
                std::fprintf(stderr, "llama-gguf synth: invalid value '%s' for --type (expected f16, bf16 or f32)\n", v);
                return 1;
            }
        } else if (a == "--name") {
            const char * v = value("NAME");
            if (!v) return 1;
            opt.name = v;
        } else if (a == "--preset" || (!a.empty() && a[0] != '-' && !have_preset)) {
            const char * v = a == "--preset" ? value("PRESET") : argv[i];
            if (!v) return 1;
            opt.preset = v;
            have_preset = true;
        } else {
            std::fprintf(stderr, "llama-gguf synth: unknown argument '%s'\n\n", a.c_str());
            synth_usage(stderr);
            return 1;
        }
    }
    if (!have_preset) {
        std::fprintf(stderr, "llama-gguf synth: no preset given\n\n");
        synth_usage(stderr);
        return 1;
    }
    std::string err;
    if (!kiln_synth_validate(opt, err)) {
        std::fprintf(stderr, "llama-gguf synth: %s\n", err.c_str());
        return 1;
    }
    if (dry_run) {
        uint64_t n_params = 0;
        for (const kiln_synth_tensor & t : kiln_synth_tensors(opt)) {
            std::string shape = "[" + std::to_string(t.ne[0]);
            for (int d = 1; d < t.n_dims; ++d) shape += ", " + std::to_string(t.ne[d]);
            shape += "]";
            std::printf("%-40s %-5s %s\n", t.name.c_str(), ggml_type_name(t.type), shape.c_str());
            n_params += (uint64_t) t.ne[0] * t.ne[1] * t.ne[2];
        }
        std::printf("total: %" PRIu64 " parameters, %.2f MiB of tensor data\n", n_params, kiln_synth_data_size(opt) / 1048576.0);
        return 0;
    }
    if (out.empty()) out = "synth-" + opt.preset + "-" + ggml_type_name(opt.type) + ".gguf";

    const uint64_t bytes = kiln_synth_data_size(opt);
    std::fprintf(stderr, "llama-gguf synth: %s -> %s (%.2f MiB of tensor data)\n", opt.preset.c_str(), out.c_str(),
                 bytes / 1048576.0);
    const bool tty = isatty(fileno(stderr));
    int last_pct = -1;
    if (!kiln_synth_write(opt, out, err, tty ? print_progress : nullptr, &last_pct)) {
        std::fprintf(stderr, "%sllama-gguf synth: %s\n", tty ? "\n" : "", err.c_str());
        return 1;
    }
    if (tty) std::fprintf(stderr, "\rwriting: done\n");
    std::printf("%s\n", out.c_str());
    return 0;
}
