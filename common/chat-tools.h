// Tool calls in model output: which syntax a chat template teaches its model, finding and
// parsing the calls in a reply (what does not parse stays text), how much of a streamed reply
// can be shown before a call might start, and the GBNF grammar that forces a call. The families
// are implemented in chat-tools-json.cpp and chat-tools-tagged.cpp (chat-tools-family.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

enum class tool_syntax {
    hermes,      // Qwen2.5 / Qwen3 / Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
    qwen_xml,    // Qwen3-Coder / Qwen3.5: <tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>
    mistral,     // [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] or [TOOL_CALLS]NAME[ARGS]{...}
    llama3,      // Llama 3.x: {"name": ..., "parameters": {...}} (optionally after <|python_tag|>)
    generic,     // any other template: {"tool_calls": [{"name": ..., "arguments": {...}}]} as the whole reply
    // added after the first five: the values above keep their numbers
    deepseek_r1,      // DeepSeek V3 / R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>...
    deepseek_v31,     // DeepSeek V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
    kimi_k2,          // Kimi-K2: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}<|tool_call_end|>...
    glm,              // GLM-4.5+: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>
    seed_xml,         // Seed-OSS: <seed:tool_call><function=NAME><parameter=P>value</parameter></function></seed:tool_call>
    harmony,          // gpt-oss: <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
    functionary_v31,  // Functionary v3.1: <function=NAME>{...}</function>
    functionary_v32,  // Functionary v3.2 (the prompt ends with >>>): NAME\n{...}>>>NAME\n{...}, text as all\n...
    command_r,        // Command R / R+: Action:\n```json\n[{"tool_name": ..., "parameters": {...}}]\n```
    command_r7b,      // Command R7B: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": ..., "parameters": {...}}]<|END_ACTION|>
    granite,          // Granite 3.x: <|tool_call|>[{"name": ..., "arguments": {...}}]
    deepseek_v32,     // DeepSeek V3.2 (DSML): <｜DSML｜function_calls><｜DSML｜invoke name="NAME"><｜DSML｜parameter name="P" string="true">V</｜DSML｜parameter>...
    deepseek_v4,      // DeepSeek V4: the same inside <｜DSML｜tool_calls>
    firefunction_v2,  // FireFunction v2: functools[{"name": ..., "arguments": {...}}, ...]
};

// The syntax the template's source text uses to show tool calls.
tool_syntax tool_syntax_from_template(const std::string & template_source);
const char * tool_syntax_name(tool_syntax s);

struct parsed_tool_call {
    std::string name;
    std::string arguments;   // JSON text of an object
};

struct parsed_reply {
    std::string content;     // the text outside the calls (everything, when nothing parsed)
    std::vector<parsed_tool_call> calls;
};

// Parses a complete reply. tools is the request's "tools" list (for parameter types of the XML
// syntax, and to keep only calls to declared functions). A call that is truncated or malformed,
// or names an unknown function, leaves the whole reply as content.
parsed_reply parse_tool_calls(tool_syntax syntax, const std::string & text, const nlohmann::ordered_json & tools);

// A reply being streamed, parsed as far as it goes: the calls written in full and, last, the call
// the text ends inside of once its name is complete, with the part of its arguments' JSON text
// that no later text can change (the finished call's arguments start with it).
struct partial_reply {
    std::vector<parsed_tool_call> calls;
    bool last_open = false;   // the last call is still being written
};
partial_reply parse_tool_calls_partial(tool_syntax syntax, const std::string & text, const nlohmann::ordered_json & tools);

// The marker texts of the syntax ("<tool_call>", "[TOOL_CALLS]" ...): where a vocabulary has them
// as special tokens, their text must be kept in the output for the parser to see.
std::vector<std::string> tool_syntax_markers(tool_syntax syntax);

// Words that open a call, for a lazy grammar under tool_choice "auto" (the grammar text from
// tool_call_grammar starts with them). Empty where a call is not marked (Llama 3 JSON, generic,
// Functionary v3.2's first call).
std::vector<std::string> tool_call_triggers(tool_syntax syntax);

// How many leading bytes of a reply being streamed are surely text (no call can start in them).
size_t tool_text_safe_prefix(tool_syntax syntax, const std::string & text);

// GBNF that makes the model write calls (one, or several when parallel) to the given tools in
// the syntax; only_name restricts to one function. Throws std::invalid_argument for a tool
// whose parameter schema cannot be converted, naming it.
std::string tool_call_grammar(tool_syntax syntax, const nlohmann::ordered_json & tools, bool parallel,
                              const std::string & only_name);
// The same for a grammar that applies from the reply's first token (tool_choice "required" or a
// named function): where a family's calls start with a header before the trigger (harmony's
// channel), the header too.
std::string tool_call_forced_grammar(tool_syntax syntax, const nlohmann::ordered_json & tools, bool parallel,
                                     const std::string & only_name);
