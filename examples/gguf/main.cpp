// llama-gguf: GGUF file tool. `llama-gguf <command> [args]`; each command lives in its own
// function (commands.h) and is listed once in k_commands below.
#include "commands.h"

#include <cstdio>
#include <cstring>

namespace {

struct command {
    const char * name;
    const char * args;
    const char * help;
    int (*run)(int argc, char ** argv);
};

// New subcommands (e.g. `synth`) are added here.
const command k_commands[] = {
    { "info",  "FILE...",   "print the header, every key/value and the tensor table", gguf_cmd_info  },
    { "check", "FILE...",   "validate every field and the tensor data bounds (split models: all parts); exit 0 only if valid", gguf_cmd_check },
    { "synth", "PRESET",    "write a random-weight model of a preset architecture (see `synth --help`)", gguf_cmd_synth },
};

void usage(FILE * out, const char * prog) {
    std::fprintf(out, "usage: %s <command> [args]\n\ncommands:\n", prog);
    for (const auto & c : k_commands) {
        std::fprintf(out, "  %-6s %-9s %s\n", c.name, c.args, c.help);
    }
    std::fprintf(out, "\n  -h, --help  show this help (also `%s <command> --help`)\n", prog);
}

} // namespace

int main(int argc, char ** argv) {
    const char * prog = "llama-gguf";
    if (argc < 2) {
        usage(stderr, prog);
        return 1;
    }
    const char * name = argv[1];
    if (std::strcmp(name, "-h") == 0 || std::strcmp(name, "--help") == 0 || std::strcmp(name, "help") == 0) {
        usage(stdout, prog);
        return 0;
    }
    for (const auto & c : k_commands) {
        if (std::strcmp(name, c.name) == 0) return c.run(argc - 2, argv + 2);
    }
    if (name[0] == '-') {
        std::fprintf(stderr, "%s: unknown option '%s' (expected a command first)\n\n", prog, name);
    } else {
        std::fprintf(stderr, "%s: unknown command '%s'\n\n", prog, name);
    }
    usage(stderr, prog);
    return 1;
}
