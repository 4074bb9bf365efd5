// Command-line parsing shared by the tools. Every flag is one row of a table (names, value kind,
// help text, the tools that accept it, a setter); a tool parses with its own name and so accepts
// exactly its flags. The flag names follow llama.cpp / ik_llama.cpp so existing command lines work.
#pragma once

#include "common.h"

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

// The tools, as a bit set so a flag can belong to several.
enum common_tool : uint32_t {
    COMMON_TOOL_CLI         = 1u << 0,
    COMMON_TOOL_SERVER      = 1u << 1,
    COMMON_TOOL_PERPLEXITY  = 1u << 2,
    COMMON_TOOL_SWEEP_BENCH = 1u << 3,
    COMMON_TOOL_BENCH       = 1u << 4,
    COMMON_TOOL_IMATRIX     = 1u << 5,
    COMMON_TOOL_ALL         = 0xffffffffu,
};

// Binary name of a tool ("llama-cli", ...), for usage lines and messages.
const char * common_tool_name(common_tool tool);

enum class common_arg_kind {
    none,       // a switch: --mlock
    required,   // takes the next argument: -c 4096 (or --ctx-size=4096)
    optional,   // takes the next argument unless it starts with '-': -fa [on|off|auto]
};

// A setter throws this with the reason a value is bad ("expected an integer"); the parser adds
// the flag and the value to the message.
struct common_arg_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct common_arg {
    std::vector<std::string> names;   // e.g. {"-c", "--ctx-size"}
    std::string value_hint;           // e.g. "N"; empty for switches
    std::string help;
    uint32_t tools = COMMON_TOOL_ALL;
    common_arg_kind kind = common_arg_kind::none;
    // value is "" for a switch or an optional value that was not given
    std::function<void(common_params &, const std::string & value)> set;

    bool has_name(const std::string & name) const;
    bool for_tool(common_tool tool) const { return (tools & (uint32_t) tool) != 0; }
};

// Every flag of every tool.
const std::vector<common_arg> & common_arg_table();
// The flags one tool accepts, in table order.
std::vector<const common_arg *> common_args_for_tool(common_tool tool);

struct common_parse_result {
    enum status_t { ok, help, version, error } status = ok;
    std::string message;   // the error, the usage text or the version text
    std::vector<std::string> warnings;   // one line each: flags accepted but with no effect here
};

// Parse args (without the program name) into params. Does not print or exit.
common_parse_result common_params_parse_args(const std::vector<std::string> & args, common_params & params,
                                             common_tool tool);

// The LLAMA_ARG_* environment variables (llama.cpp's names) of this tool's flags, read with
// get_env, applied to params unless args (the command line) gives the same flag. Call before
// parsing args. A bad value is an error that names the variable.
common_parse_result common_params_apply_env(const std::vector<std::string> & args, common_params & params, common_tool tool,
                                            const std::function<const char *(const char *)> & get_env);

// The usage text of a tool: one line per flag with its value hint and help.
std::string common_params_usage(common_tool tool);
std::string common_version_text();
// --list-devices: the devices a model can be placed on (besides the host CPU)
std::string common_device_list_text();

// For main(): parses argv, prints --help / --version to stdout and exits 0 for them; prints the
// warnings, and an error to stderr and returns false for bad arguments (the caller exits non-zero).
bool common_params_parse(int argc, char ** argv, common_params & params, common_tool tool);
