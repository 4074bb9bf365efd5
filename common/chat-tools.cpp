// Tool-call syntaxes. Each family's model writes calls the way its chat template shows them;
// the parser of a family accepts exactly that shape (with free whitespace between parts) and
// gives up on anything else, so a reply that only looks like a call is still returned, whole,
// as text. This file holds what the families share and the dispatch; the families themselves
// are rows in chat-tools-json.cpp and chat-tools-tagged.cpp.
#include "chat-tools.h"

#include "chat-tools-family.h"

#include <algorithm>
#include <stdexcept>

namespace chat_tools_detail {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t skip_space(const std::string & s, size_t pos) {
    while (pos < s.size() && is_space(s[pos])) ++pos;
    return pos;
}

std::string trim(const std::string & s) {
    size_t b = 0, e = s.size();
    while (b < e && is_space(s[b])) ++b;
    while (e > b && is_space(s[e - 1])) --e;
    return s.substr(b, e - b);
}

bool starts_with_at(const std::string & s, size_t pos, const std::string & lit) {
    return pos <= s.size() && s.compare(pos, lit.size(), lit) == 0;
}

// End (one past the closing brace or bracket) of the JSON object or array starting at pos, or
// npos when it is not closed; strings and escapes are skipped over.
static size_t json_end(const std::string & s, size_t pos) {
    if (pos >= s.size() || (s[pos] != '{' && s[pos] != '[')) return std::string::npos;
    int depth = 0;
    bool in_string = false;
    for (size_t i = pos; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
        }
    }
    return std::string::npos;
}

json json_at(const std::string & s, size_t pos, size_t * end) {
    const size_t e = json_end(s, pos);
    if (e == std::string::npos) return json(json::value_t::discarded);
    *end = e;
    return json::parse(s.begin() + (long) pos, s.begin() + (long) e, nullptr, false);
}

const json * find_tool(const json & tools, const std::string & name) {
    if (!tools.is_array()) return nullptr;
    for (const auto & t : tools) {
        const json & f = t.contains("function") ? t["function"] : t;
        if (f.is_object() && f.value("name", std::string()) == name) return &f;
    }
    return nullptr;
}

std::string arguments_json(const json & args) { return args.dump(-1, ' ', false, json::error_handler_t::replace); }

bool arguments_text(const json & args, std::string & out) {
    if (args.is_object()) {
        out = arguments_json(args);
        return true;
    }
    if (args.is_string()) {
        const json parsed = json::parse(args.get<std::string>(), nullptr, false);
        if (parsed.is_discarded() || !parsed.is_object()) return false;
        out = arguments_json(parsed);
        return true;
    }
    return false;
}

bool object_to_call(const json & obj, const json & tools, parsed_tool_call & out, const char * name_key, const char * args_key) {
    if (!obj.is_object() || !obj.contains(name_key) || !obj[name_key].is_string()) return false;
    out.name = obj[name_key].get<std::string>();
    if (!find_tool(tools, out.name)) return false;
    const char * key = *args_key ? args_key : obj.contains("arguments") ? "arguments" : "parameters";
    if (!obj.contains(key)) {
        out.arguments = "{}";
        return true;
    }
    return arguments_text(obj[key], out.arguments);
}

json text_parameter(const json * fn, const std::string & param, const std::string & text) {
    if (parameter_type(fn, param) == "string") return json(text);
    json v = json::parse(text, nullptr, false);
    if (v.is_discarded()) v = text;   // untyped or not JSON: the text itself
    return v;
}

json tool_parameters(const json & tool_entry) {
    const json & f = tool_entry.contains("function") ? tool_entry["function"] : tool_entry;
    return f.contains("parameters") ? f["parameters"] : json{ { "type", "object" } };
}

} // namespace chat_tools_detail

using namespace chat_tools_detail;

namespace {

const tool_family & family(tool_syntax s) {
    for (const auto * rows : { &json_tool_families(), &tagged_tool_families() }) {
        for (const tool_family & f : *rows) {
            if (f.syntax == s) return f;
        }
    }
    throw std::logic_error("tool syntax without a family row");
}

size_t calls_start(const tool_family & f, const std::string & text) {
    if (f.find_calls) return f.find_calls(text);
    size_t best = std::string::npos;
    for (const auto & t : f.triggers) best = std::min(best, text.find(t));
    return best;
}

} // namespace

tool_syntax tool_syntax_from_template(const std::string & src) {
    auto has = [&](const char * s) { return src.find(s) != std::string::npos; };
    // the most distinctive markers first: several templates also mention <tool_call> or <function=
    if (has("<|channel|>") && has("<|call|>")) return tool_syntax::harmony;
    if (has("｜DSML｜")) return has("tool_calls>") ? tool_syntax::deepseek_v4 : tool_syntax::deepseek_v32;
    if (has("<｜tool▁calls▁begin｜>")) return has("```json") ? tool_syntax::deepseek_r1 : tool_syntax::deepseek_v31;
    if (has("<|tool_calls_section_begin|>")) return tool_syntax::kimi_k2;
    if (has("<arg_key>")) return tool_syntax::glm;
    if (has("<seed:tool_call>")) return tool_syntax::seed_xml;
    if (has("<function=") && has("<parameter=")) return tool_syntax::qwen_xml;
    if (has("<tool_call>")) return tool_syntax::hermes;
    if (has("[TOOL_CALLS]")) return tool_syntax::mistral;
    if (has("<|START_ACTION|>")) return tool_syntax::command_r7b;
    if (has("Action:") && has("tool_name")) return tool_syntax::command_r;
    if (has("<|tool_call|>")) return tool_syntax::granite;
    if (has(">>>all")) return tool_syntax::functionary_v32;
    if (has("<function=")) return tool_syntax::functionary_v31;
    if (has("functools[")) return tool_syntax::firefunction_v2;   // a Llama 3 template: before llama3
    if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\""))) return tool_syntax::llama3;
    return tool_syntax::generic;
}

const char * tool_syntax_name(tool_syntax s) { return family(s).name; }

std::vector<std::string> tool_syntax_markers(tool_syntax syntax) { return family(syntax).markers; }

std::vector<std::string> tool_call_triggers(tool_syntax syntax) { return family(syntax).triggers; }

parsed_reply parse_tool_calls(tool_syntax syntax, const std::string & text, const json & tools) {
    const tool_family & f = family(syntax);
    parsed_reply out;
    out.content = text;
    const size_t open = calls_start(f, text);
    std::vector<parsed_tool_call> calls;
    size_t end = open;
    if (open != std::string::npos && f.parse(text, open, tools, calls, &end, nullptr) && !calls.empty()) {
        out.calls = std::move(calls);
        // the text before the first call, and anything after the last
        out.content = text.substr(0, open) + text.substr(skip_space(text, end));
        if (trim(out.content).empty()) out.content.clear();
    }
    if (!f.text_prefix.empty() && out.content.rfind(f.text_prefix, 0) == 0) out.content.erase(0, f.text_prefix.size());
    return out;
}

partial_reply parse_tool_calls_partial(tool_syntax syntax, const std::string & text, const json & tools) {
    const tool_family & f = family(syntax);
    partial_reply out;
    const size_t open = calls_start(f, text);
    if (open == std::string::npos) return out;
    size_t end = open;
    open_call oc;
    // the calls before a failure stay: a later failure makes the whole reply text only at the end
    if (f.parse(text, open, tools, out.calls, &end, &oc) || !oc.at_end || oc.name.empty()) return out;
    out.calls.push_back({ oc.name, oc.arguments });
    out.last_open = true;
    return out;
}

size_t tool_text_safe_prefix(tool_syntax syntax, const std::string & text) {
    const tool_family & f = family(syntax);
    if (f.hold_everything) return 0;
    size_t open = calls_start(f, text);
    for (const auto & h : f.holds) open = std::min(open, text.find(h));
    if (open != std::string::npos) return open;
    // a reply that is only whitespace so far may still become an unmarked call
    if (f.whole_reply && skip_space(text, 0) == text.size()) return 0;
    // hold back a tail that could be the start of an opener
    size_t hold = 0;
    std::vector<std::string> openers = f.triggers;
    openers.insert(openers.end(), f.holds.begin(), f.holds.end());
    for (const auto & t : openers) {
        for (size_t n = std::min(t.size() - 1, text.size()); n > hold; --n) {
            if (text.compare(text.size() - n, n, t, 0, n) == 0) {
                hold = n;
                break;
            }
        }
    }
    return text.size() - hold;
}

std::string tool_call_grammar(tool_syntax syntax, const json & tools, bool parallel, const std::string & only_name) {
    const tool_family & f = family(syntax);
    json_schema_grammar_builder b;
    std::string any;
    for (const auto & t : tools) {
        const json & fn = t.contains("function") ? t["function"] : t;
        const std::string name = fn.value("name", std::string());
        if (!only_name.empty() && name != only_name) continue;
        try {
            any += (any.empty() ? "" : " | ") + f.call_rule(b, name, tool_parameters(t));
        } catch (const std::invalid_argument & e) {
            throw std::invalid_argument("tool '" + name + "': " + e.what());
        }
    }
    if (any.empty()) throw std::invalid_argument("no tool named '" + only_name + "'");
    const std::string call = b.add_rule("call", any);
    std::string body = call;
    if (parallel && f.parallel) body += " (" + (f.separator.empty() ? "" : gbnf_literal(f.separator) + " ") + call + ")*";
    auto lit = [](const std::string & s) { return s.empty() ? std::string() : gbnf_literal(s) + " "; };
    b.set_root(lit(f.open) + body + (f.close.empty() ? "" : " " + gbnf_literal(f.close)));
    return b.text();
}

std::string tool_call_forced_grammar(tool_syntax syntax, const json & tools, bool parallel, const std::string & only_name) {
    const std::string g = tool_call_grammar(syntax, tools, parallel, only_name);
    const tool_family & f = family(syntax);
    if (f.forced_prefix.empty()) return g;
    // the lazy grammar starts at the trigger; forced from the first token, the reply also needs
    // what comes before it
    return "root ::= " + gbnf_literal(f.forced_prefix) + " lazy-root\nlazy-" + g;
}
