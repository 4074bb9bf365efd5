// Chat prompt rendering the way Hugging Face's tokenizer.apply_chat_template does it, on top of
// Kiln's Jinja engine (common/jinja/). Use nlohmann::ordered_json for the inputs: templates print
// tool schemas with tojson, and Python keeps the keys in the order the client sent them.
#pragma once

#include "jinja/jinja.h"

#include <nlohmann/json.hpp>

#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

class chat_template {
public:
    // Parses `source`; throws kiln::jinja::Error (with line/column) on a syntax error.
    chat_template(const std::string & source, std::string bos_token, std::string eos_token);

    // Renders the prompt. `tools` is null or an array of tool schemas; `extra_context` (an
    // object or null) adds or overrides variables (enable_thinking, unk_token, ...).
    // Throws kiln::jinja::Error when the template raises (raise_exception) or fails.
    std::string apply(const nlohmann::ordered_json & messages,
                      const nlohmann::ordered_json & tools = nullptr,
                      bool add_generation_prompt = true,
                      const nlohmann::ordered_json & extra_context = nullptr) const;

    // Pins the clock strftime_now() reads (tests); the local time is used otherwise.
    void set_now(const std::tm & now) { now_ = now; }

    const std::string & bos_token() const { return bos_token_; }
    const std::string & eos_token() const { return eos_token_; }

private:
    jinja::Template template_;
    std::string bos_token_;
    std::string eos_token_;
    std::optional<std::tm> now_;
};

// Built-in templates (chat-template-builtin.cpp), by the names llama.cpp users pass to
// --chat-template: chatml, llama2, llama3, llama4, mistral-v1, mistral-v3, mistral-v3-tekken,
// mistral-v7, mistral-v7-tekken, phi3, phi4, gemma, zephyr, vicuna, deepseek, deepseek2,
// deepseek3, command-r, chatglm4, granite, falcon3. Null for an unknown name.
const char * builtin_chat_template(const std::string & name);
std::vector<std::string> builtin_chat_template_names();
// The template --chat-template VALUE means: VALUE itself when it is Jinja source (contains "{%"
// or "{{"), else the built-in of that name. Throws std::invalid_argument listing the names.
std::string chat_template_source(const std::string & name_or_source);

// JSON → template value: objects keep their key order, integers stay integers.
jinja::Value json_to_value(const nlohmann::ordered_json & j);

} // namespace kiln
