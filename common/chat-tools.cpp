// Tool-call syntaxes. Each family's model writes calls the way its chat template shows them;
// the parser here accepts exactly that shape (with free whitespace between parts) and gives up
// on anything else, so a reply that only looks like a call is still returned, whole, as text.
#include "chat-tools.h"

#include "json-schema-grammar.h"

#include <algorithm>
#include <stdexcept>

using json = nlohmann::ordered_json;

namespace {

const char * k_hermes_open = "<tool_call>";
const char * k_hermes_close = "</tool_call>";
const char * k_mistral_open = "[TOOL_CALLS]";
const char * k_python_tag = "<|python_tag|>";

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

// End (one past the closing brace or bracket) of the JSON object or array starting at pos, or
// npos when it is not closed; strings and escapes are skipped over.
size_t json_end(const std::string & s, size_t pos) {
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

// A JSON value at pos (object or array) parsed; *end set past it. Discarded on failure.
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

// {"name": ..., "arguments"|"parameters": {...} or "{...}"} as a call; false if it is not one.
bool object_to_call(const json & obj, const json & tools, parsed_tool_call & out) {
    if (!obj.is_object() || !obj.contains("name") || !obj["name"].is_string()) return false;
    out.name = obj["name"].get<std::string>();
    if (!find_tool(tools, out.name)) return false;
    const char * key = obj.contains("arguments") ? "arguments" : "parameters";
    if (!obj.contains(key)) {
        out.arguments = "{}";
        return true;
    }
    const json & args = obj[key];
    if (args.is_object()) {
        out.arguments = args.dump();
        return true;
    }
    if (args.is_string()) {
        const json parsed = json::parse(args.get<std::string>(), nullptr, false);
        if (parsed.is_discarded() || !parsed.is_object()) return false;
        out.arguments = parsed.dump();
        return true;
    }
    return false;
}

bool starts_with_at(const std::string & s, size_t pos, const char * lit) {
    return s.compare(pos, std::char_traits<char>::length(lit), lit) == 0;
}

// <tool_call> {json} </tool_call>, repeated with whitespace between.
bool parse_hermes(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end) {
    while (starts_with_at(s, pos, k_hermes_open)) {
        size_t p = skip_space(s, pos + std::char_traits<char>::length(k_hermes_open));
        size_t e = 0;
        const json obj = json_at(s, p, &e);
        parsed_tool_call call;
        if (obj.is_discarded() || !object_to_call(obj, tools, call)) return false;
        p = skip_space(s, e);
        if (!starts_with_at(s, p, k_hermes_close)) return false;
        calls.push_back(std::move(call));
        pos = p + std::char_traits<char>::length(k_hermes_close);
        *end = pos;
        pos = skip_space(s, pos);
    }
    return !calls.empty();
}

// The JSON type a parameter's schema declares ("" if none or several).
std::string param_type(const json * fn, const std::string & param) {
    if (!fn || !fn->contains("parameters")) return "";
    const json & params = (*fn)["parameters"];
    if (!params.is_object() || !params.contains("properties") || !params["properties"].contains(param)) return "";
    const json & p = params["properties"][param];
    return p.is_object() && p.contains("type") && p["type"].is_string() ? p["type"].get<std::string>() : "";
}

// <tool_call> <function=NAME> (<parameter=P> value </parameter>)* </function> </tool_call>
bool parse_qwen_xml(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end) {
    while (starts_with_at(s, pos, k_hermes_open)) {
        size_t p = skip_space(s, pos + std::char_traits<char>::length(k_hermes_open));
        if (!starts_with_at(s, p, "<function=")) return false;
        p += 10;
        const size_t gt = s.find('>', p);
        if (gt == std::string::npos) return false;
        parsed_tool_call call;
        call.name = s.substr(p, gt - p);
        const json * fn = find_tool(tools, call.name);
        if (!fn) return false;
        json args = json::object();
        p = skip_space(s, gt + 1);
        while (starts_with_at(s, p, "<parameter=")) {
            p += 11;
            const size_t pgt = s.find('>', p);
            if (pgt == std::string::npos) return false;
            const std::string pname = s.substr(p, pgt - p);
            const size_t close = s.find("</parameter>", pgt + 1);
            if (close == std::string::npos) return false;
            std::string value = s.substr(pgt + 1, close - pgt - 1);
            // the template puts the value on its own line
            if (!value.empty() && value.front() == '\n') value.erase(0, 1);
            if (!value.empty() && value.back() == '\n') value.pop_back();
            const std::string type = param_type(fn, pname);
            json v = type == "string" ? json(value) : json::parse(value, nullptr, false);
            if (v.is_discarded()) v = value;   // untyped or not JSON: the text itself
            args[pname] = std::move(v);
            p = skip_space(s, close + 12);
        }
        if (!starts_with_at(s, p, "</function>")) return false;
        p = skip_space(s, p + 11);
        if (!starts_with_at(s, p, k_hermes_close)) return false;
        call.arguments = args.dump();
        calls.push_back(std::move(call));
        pos = p + std::char_traits<char>::length(k_hermes_close);
        *end = pos;
        pos = skip_space(s, pos);
    }
    return !calls.empty();
}

// [TOOL_CALLS] [ {...}, ... ]   or   [TOOL_CALLS]NAME[ARGS]{...} (repeated)
bool parse_mistral(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end) {
    while (starts_with_at(s, pos, k_mistral_open)) {
        size_t p = skip_space(s, pos + std::char_traits<char>::length(k_mistral_open));
        if (p < s.size() && s[p] == '[') {
            size_t e = 0;
            const json arr = json_at(s, p, &e);
            if (arr.is_discarded() || !arr.is_array() || arr.empty()) return false;
            for (const auto & obj : arr) {
                parsed_tool_call call;
                if (!object_to_call(obj, tools, call)) return false;
                calls.push_back(std::move(call));
            }
            p = e;
        } else {
            const size_t args = s.find("[ARGS]", p);
            if (args == std::string::npos) return false;
            parsed_tool_call call;
            call.name = trim(s.substr(p, args - p));
            if (!find_tool(tools, call.name)) return false;
            size_t e = 0;
            const json obj = json_at(s, skip_space(s, args + 6), &e);
            if (obj.is_discarded() || !obj.is_object()) return false;
            call.arguments = obj.dump();
            calls.push_back(std::move(call));
            p = e;
        }
        *end = p;
        pos = skip_space(s, p);
    }
    return !calls.empty();
}

// One or more {"name": ..., "parameters": {...}} objects (separated by ';' or whitespace).
bool parse_json_objects(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls,
                        size_t * end) {
    if (starts_with_at(s, pos, k_python_tag)) pos = skip_space(s, pos + std::char_traits<char>::length(k_python_tag));
    while (pos < s.size() && s[pos] == '{') {
        size_t e = 0;
        const json obj = json_at(s, pos, &e);
        parsed_tool_call call;
        if (obj.is_discarded() || !object_to_call(obj, tools, call)) return false;
        calls.push_back(std::move(call));
        *end = e;
        pos = skip_space(s, e);
        if (pos < s.size() && s[pos] == ';') pos = skip_space(s, pos + 1);
    }
    return !calls.empty();
}

// {"tool_calls": [{"name": ..., "arguments": {...}}, ...]} or {"tool_call": {...}}
bool parse_generic(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end) {
    size_t e = 0;
    const json obj = json_at(s, pos, &e);
    if (obj.is_discarded() || !obj.is_object()) return false;
    json list = json::array();
    if (obj.contains("tool_calls") && obj["tool_calls"].is_array()) list = obj["tool_calls"];
    else if (obj.contains("tool_call")) list.push_back(obj["tool_call"]);
    else return parse_json_objects(s, pos, tools, calls, end);
    for (const auto & c : list) {
        parsed_tool_call call;
        if (!object_to_call(c, tools, call)) return false;
        calls.push_back(std::move(call));
    }
    *end = e;
    return !calls.empty();
}

// Where the calls of this syntax begin in text (npos if they do not).
size_t opener_at(tool_syntax syntax, const std::string & s) {
    switch (syntax) {
        case tool_syntax::hermes:
        case tool_syntax::qwen_xml: return s.find(k_hermes_open);
        case tool_syntax::mistral: return s.find(k_mistral_open);
        case tool_syntax::llama3: {
            const size_t tag = s.find(k_python_tag);
            if (tag != std::string::npos) return tag;
            // a JSON call is the whole reply
            const size_t p = skip_space(s, 0);
            return p < s.size() && s[p] == '{' ? p : std::string::npos;
        }
        case tool_syntax::generic: {
            const size_t p = skip_space(s, 0);
            return p < s.size() && s[p] == '{' ? p : std::string::npos;
        }
    }
    return std::string::npos;
}

} // namespace

tool_syntax tool_syntax_from_template(const std::string & src) {
    if (src.find("<function=") != std::string::npos && src.find("<parameter=") != std::string::npos) return tool_syntax::qwen_xml;
    if (src.find(k_hermes_open) != std::string::npos) return tool_syntax::hermes;
    if (src.find(k_mistral_open) != std::string::npos) return tool_syntax::mistral;
    if (src.find(k_python_tag) != std::string::npos ||
        (src.find("<|start_header_id|>") != std::string::npos && src.find("\"parameters\"") != std::string::npos)) {
        return tool_syntax::llama3;
    }
    return tool_syntax::generic;
}

const char * tool_syntax_name(tool_syntax s) {
    switch (s) {
        case tool_syntax::hermes: return "hermes";
        case tool_syntax::qwen_xml: return "qwen-xml";
        case tool_syntax::mistral: return "mistral";
        case tool_syntax::llama3: return "llama3";
        case tool_syntax::generic: return "generic";
    }
    return "?";
}

std::vector<std::string> tool_syntax_markers(tool_syntax syntax) {
    switch (syntax) {
        case tool_syntax::hermes:
        case tool_syntax::qwen_xml: return { k_hermes_open, k_hermes_close };
        case tool_syntax::mistral: return { k_mistral_open, "[ARGS]" };
        case tool_syntax::llama3: return { k_python_tag };
        case tool_syntax::generic: return {};
    }
    return {};
}

std::vector<std::string> tool_call_triggers(tool_syntax syntax) {
    switch (syntax) {
        case tool_syntax::hermes:
        case tool_syntax::qwen_xml: return { k_hermes_open };
        case tool_syntax::mistral: return { k_mistral_open };
        case tool_syntax::llama3:
        case tool_syntax::generic: return {};
    }
    return {};
}

parsed_reply parse_tool_calls(tool_syntax syntax, const std::string & text, const json & tools) {
    parsed_reply out;
    out.content = text;
    const size_t open = opener_at(syntax, text);
    if (open == std::string::npos) return out;
    std::vector<parsed_tool_call> calls;
    size_t end = open;
    bool ok = false;
    switch (syntax) {
        case tool_syntax::hermes: ok = parse_hermes(text, open, tools, calls, &end); break;
        case tool_syntax::qwen_xml: ok = parse_qwen_xml(text, open, tools, calls, &end); break;
        case tool_syntax::mistral: ok = parse_mistral(text, open, tools, calls, &end); break;
        case tool_syntax::llama3: ok = parse_json_objects(text, open, tools, calls, &end); break;
        case tool_syntax::generic: ok = parse_generic(text, open, tools, calls, &end); break;
    }
    if (!ok) return out;
    out.calls = std::move(calls);
    // the text before the first call, and anything after the last
    out.content = text.substr(0, open) + text.substr(skip_space(text, end));
    if (trim(out.content).empty()) out.content.clear();
    return out;
}

size_t tool_text_safe_prefix(tool_syntax syntax, const std::string & text) {
    const size_t open = opener_at(syntax, text);
    if (open != std::string::npos) return open;
    if (syntax == tool_syntax::llama3 || syntax == tool_syntax::generic) {
        // a reply that is only whitespace so far may still become a JSON call
        if (skip_space(text, 0) == text.size()) return 0;
    }
    // hold back a tail that could be the start of the opener
    const std::string opener = syntax == tool_syntax::mistral ? k_mistral_open
                             : syntax == tool_syntax::llama3  ? k_python_tag
                             : syntax == tool_syntax::generic ? ""
                                                              : k_hermes_open;
    for (size_t n = std::min(opener.size() - (opener.empty() ? 0 : 1), text.size()); n > 0; --n) {
        if (text.compare(text.size() - n, n, opener, 0, n) == 0) return text.size() - n;
    }
    return text.size();
}

std::string tool_call_grammar(tool_syntax syntax, const json & tools, bool parallel, const std::string & only_name) {
    json_schema_grammar_builder b;
    std::vector<std::string> alternatives;
    for (const auto & t : tools) {
        const json & f = t.contains("function") ? t["function"] : t;
        const std::string name = f.value("name", std::string());
        if (!only_name.empty() && name != only_name) continue;
        const json params = f.contains("parameters") ? f["parameters"] : json{ { "type", "object" } };
        try {
            if (syntax == tool_syntax::qwen_xml) {
                // one <parameter=...> block per property: required ones in order, then optional ones
                std::string body = "\"<function=" + name + ">\\n\" ";
                const json props = params.value("properties", json::object());
                const json req = params.value("required", json::array());
                for (const auto & [pname, pschema] : props.items()) {
                    const bool required = std::find(req.begin(), req.end(), json(pname)) != req.end();
                    std::string value;
                    if (pschema.is_object() && pschema.value("type", json()) == "string") {
                        value = b.add_rule("xml-text", "([^<] | \"<\" [^/])*");
                    } else {
                        value = b.add(pschema, name + "-" + pname);
                    }
                    const std::string block = "\"<parameter=" + pname + ">\\n\" " + value + " \"\\n</parameter>\\n\"";
                    body += required ? block + " " : "(" + block + ")? ";
                }
                alternatives.push_back(b.add_rule(name + "-call", body + "\"</function>\\n\""));
            } else {
                const json call_schema = {
                    { "type", "object" },
                    { "properties", { { "name", { { "const", name } } }, { syntax == tool_syntax::llama3 ? "parameters" : "arguments", params } } },
                    { "required", json::array({ "name", syntax == tool_syntax::llama3 ? "parameters" : "arguments" }) },
                    { "additionalProperties", false },
                };
                alternatives.push_back(b.add(call_schema, name + "-call"));
            }
        } catch (const std::invalid_argument & e) {
            throw std::invalid_argument("tool '" + name + "': " + e.what());
        }
    }
    if (alternatives.empty()) throw std::invalid_argument("no tool named '" + only_name + "'");
    std::string any;
    for (const auto & a : alternatives) any += (any.empty() ? "" : " | ") + a;
    const std::string call = b.add_rule("call", any);
    std::string one;
    switch (syntax) {
        case tool_syntax::hermes:
        case tool_syntax::qwen_xml: one = "\"<tool_call>\\n\" " + call + " \"\\n</tool_call>\""; break;
        case tool_syntax::mistral: one = "\"[TOOL_CALLS][\" " + call + " \"]\""; break;
        case tool_syntax::llama3: one = call; break;
        case tool_syntax::generic: one = "\"{\\\"tool_calls\\\": [\" " + call + " \"]}\""; break;
    }
    const std::string block = b.add_rule("call-block", one);
    if (!parallel || syntax == tool_syntax::generic || syntax == tool_syntax::mistral) {
        b.set_root(block);
    } else {
        b.set_root(block + " (\"\\n\" " + block + ")*");
    }
    return b.text();
}
