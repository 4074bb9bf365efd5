// Tool calls in model output: which syntax a chat template teaches its model, finding and
// parsing the calls in a reply (what does not parse stays text), how much of a streamed reply
// can be shown before a call might start, and the GBNF grammar that forces a call.
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

// The marker texts of the syntax ("<tool_call>", "[TOOL_CALLS]" ...): where a vocabulary has them
// as special tokens, their text must be kept in the output for the parser to see.
std::vector<std::string> tool_syntax_markers(tool_syntax syntax);

// Words that open a call, for a lazy grammar under tool_choice "auto" (the grammar text from
// tool_call_grammar starts with them). Empty where a call is not marked (Llama 3 JSON, generic).
std::vector<std::string> tool_call_triggers(tool_syntax syntax);

// How many leading bytes of a reply being streamed are surely text (no call can start in them).
size_t tool_text_safe_prefix(tool_syntax syntax, const std::string & text);

// GBNF that makes the model write calls (one, or several when parallel) to the given tools in
// the syntax; only_name restricts to one function. Throws std::invalid_argument for a tool
// whose parameter schema cannot be converted, naming it.
std::string tool_call_grammar(tool_syntax syntax, const nlohmann::ordered_json & tools, bool parallel,
                              const std::string & only_name);
