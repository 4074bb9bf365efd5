// The tool-call families whose arguments are one JSON object: Hermes / Qwen, Mistral, Llama 3,
// the generic form, DeepSeek V3 / R1 / V3.1, Kimi-K2, Functionary v3.1 / v3.2, Command R / R7B,
// Granite and FireFunction v2. Each parser follows its template's own rendering of an assistant's tool_calls.
#include "chat-tools-family.h"

namespace chat_tools_detail {

namespace {

// ---- grammar pieces ------------------------------------------------------------------------------

// One call as a JSON object {name_key: NAME, args_key: {arguments}} (plus leading extras).
std::string json_object_call(json_schema_grammar_builder & b, const std::string & name, const json & params,
                             const char * name_key, const char * args_key, const json & extra_props = json::object()) {
    json props = extra_props;
    props[name_key] = { { "const", name } };
    props[args_key] = params;
    json required = json::array();
    for (const auto & [k, v] : props.items()) required.push_back(k);
    const json schema = { { "type", "object" }, { "properties", props }, { "required", required }, { "additionalProperties", false } };
    return b.add(schema, name + "-call");
}

std::string name_arguments(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return json_object_call(b, name, params, "name", "arguments");
}

std::string name_parameters(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return json_object_call(b, name, params, "name", "parameters");
}

std::string args(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return b.add(params, name + "-args");
}

// ---- Hermes / Qwen: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeated --------

bool parse_hermes(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    static const std::string open = "<tool_call>", close = "</tool_call>";
    while (starts_with_at(s, pos, open)) {
        size_t e = 0;
        const json obj = read_json(s, skip_space(s, pos + open.size()), &e, oc);
        if (oc && oc->healed) {
            open_object_call(obj, tools, *oc);
            return false;
        }
        parsed_tool_call call;
        if (obj.is_discarded() || !object_to_call(obj, tools, call)) return false;
        const size_t p = skip_space(s, e);
        if (!starts_with_at(s, p, close)) return call_awaits(oc, call, s, p, close);
        calls.push_back(std::move(call));
        *end = p + close.size();
        pos = skip_space(s, *end);
    }
    return true;
}

std::string hermes_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return "\"<tool_call>\\n\" " + name_arguments(b, name, params) + " \"\\n</tool_call>\"";
}

// ---- a JSON list of call objects after an opener ------------------------------------------------

// The calls of a JSON array at pos, each {name_key, args_key}; *end past the array.
bool parse_call_array(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end,
                      const char * name_key, const char * args_key, open_call * oc) {
    size_t e = 0;
    const json arr = read_json(s, pos, &e, oc);
    if (!array_calls(arr, tools, calls, oc, name_key, args_key)) return false;
    *end = e;
    return true;
}

// ---- Mistral: [TOOL_CALLS][{...}, ...]  or  [TOOL_CALLS]NAME[ARGS]{...} (repeated) --------------

bool parse_mistral(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    static const std::string open = "[TOOL_CALLS]", args_tag = "[ARGS]";
    while (starts_with_at(s, pos, open)) {
        size_t p = skip_space(s, pos + open.size());
        if (p < s.size() && s[p] == '[') {
            if (!parse_call_array(s, p, tools, calls, &p, "name", "", oc)) return false;
        } else {
            const size_t at = s.find(args_tag, p);
            if (at == std::string::npos) return false;
            parsed_tool_call call;
            call.name = trim(s.substr(p, at - p));
            if (!find_tool(tools, call.name)) return false;
            const json obj = read_json(s, skip_space(s, at + args_tag.size()), &p, oc);
            if (oc && oc->at_end) return open_arguments(oc, call.name, obj);
            if (obj.is_discarded() || !arguments_text(obj, call.arguments)) return false;
            calls.push_back(std::move(call));
        }
        *end = p;
        pos = skip_space(s, p);
    }
    return true;
}

// ---- Llama 3.x: {"name": ..., "parameters": {...}} (after <|python_tag|> or as the reply) -------

bool parse_json_objects(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    static const std::string python_tag = "<|python_tag|>";
    if (starts_with_at(s, pos, python_tag)) pos = skip_space(s, pos + python_tag.size());
    while (pos < s.size() && s[pos] == '{') {
        size_t e = 0;
        const json obj = read_json(s, pos, &e, oc);
        if (oc && oc->healed) {
            open_object_call(obj, tools, *oc);
            return false;
        }
        parsed_tool_call call;
        if (obj.is_discarded() || !object_to_call(obj, tools, call)) return false;
        calls.push_back(std::move(call));
        *end = e;
        pos = skip_space(s, e);
        if (pos < s.size() && s[pos] == ';') pos = skip_space(s, pos + 1);
    }
    return true;
}

size_t find_llama3(const std::string & s) {
    const size_t tag = s.find("<|python_tag|>");
    if (tag != std::string::npos) return tag;
    // a JSON call is the whole reply
    const size_t p = skip_space(s, 0);
    return p < s.size() && s[p] == '{' ? p : std::string::npos;
}

// ---- generic: {"tool_calls": [{...}, ...]} or {"tool_call": {...}} as the whole reply ----------

bool parse_generic(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    size_t e = 0;
    const json obj = read_json(s, pos, &e, oc);
    if (obj.is_discarded() || !obj.is_object()) return false;
    json list = json::array();
    if (obj.contains("tool_calls") && obj["tool_calls"].is_array()) list = obj["tool_calls"];
    else if (obj.contains("tool_call")) list.push_back(obj["tool_call"]);
    else if (oc && oc->healed) {
        open_object_call(obj, tools, *oc);
        return false;
    } else return parse_json_objects(s, pos, tools, calls, end, oc);
    if (!array_calls(list, tools, calls, oc, "name", "")) return false;
    *end = e;
    return true;
}

size_t find_json_reply(const std::string & s) {
    const size_t p = skip_space(s, 0);
    return p < s.size() && s[p] == '{' ? p : std::string::npos;
}

// ---- DeepSeek: <｜tool▁calls▁begin｜> (<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>)+ <｜tool▁calls▁end｜> -----
// V3 / R1 write "function<｜tool▁sep｜>NAME\n```json\n{...}\n```" inside a call, V3.1 "NAME<｜tool▁sep｜>{...}".

const std::string k_ds_calls_begin = "<｜tool▁calls▁begin｜>", k_ds_calls_end = "<｜tool▁calls▁end｜>";
const std::string k_ds_call_begin = "<｜tool▁call▁begin｜>", k_ds_call_end = "<｜tool▁call▁end｜>", k_ds_sep = "<｜tool▁sep｜>";

bool parse_deepseek(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    if (!starts_with_at(s, pos, k_ds_calls_begin)) return false;
    size_t p = skip_space(s, pos + k_ds_calls_begin.size());
    while (starts_with_at(s, p, k_ds_call_begin)) {
        p += k_ds_call_begin.size();
        const size_t sep = s.find(k_ds_sep, p);
        if (sep == std::string::npos) return false;
        parsed_tool_call call;
        call.name = trim(s.substr(p, sep - p));
        p = sep + k_ds_sep.size();
        bool fenced = false;
        if (call.name == "function") {
            // V3 / R1: the name on the line after the separator, the arguments in a json fence
            const size_t nl = s.find('\n', p);
            if (nl == std::string::npos) return false;
            call.name = trim(s.substr(p, nl - p));
            p = skip_space(s, nl);
            if (starts_with_at(s, p, "```json")) {
                fenced = true;
                p = skip_space(s, p + 7);
            }
        }
        if (!find_tool(tools, call.name)) return false;
        size_t e = 0;
        const json obj = read_json(s, skip_space(s, p), &e, oc);
        if (oc && oc->at_end) return open_arguments(oc, call.name, obj);
        if (obj.is_discarded() || !arguments_text(obj, call.arguments)) return false;
        p = skip_space(s, e);
        if (fenced) {
            if (!starts_with_at(s, p, "```")) return call_awaits(oc, call, s, p, "```");
            p = skip_space(s, p + 3);
        }
        if (!starts_with_at(s, p, k_ds_call_end)) return call_awaits(oc, call, s, p, k_ds_call_end);
        calls.push_back(std::move(call));
        p = skip_space(s, p + k_ds_call_end.size());
    }
    if (!starts_with_at(s, p, k_ds_calls_end)) return false;
    *end = p + k_ds_calls_end.size();
    return true;
}

std::string deepseek_r1_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return gbnf_literal(k_ds_call_begin + "function" + k_ds_sep + name + "\n```json\n") + " " + args(b, name, params) + " " +
           gbnf_literal("```" + k_ds_call_end);
}

std::string deepseek_v31_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return gbnf_literal(k_ds_call_begin + name + k_ds_sep) + " " + args(b, name, params) + " " + gbnf_literal(k_ds_call_end);
}

// ---- Kimi-K2: <|tool_calls_section_begin|> (<|tool_call_begin|>functions.NAME:IDX
//      <|tool_call_argument_begin|>{...}<|tool_call_end|>)+ <|tool_calls_section_end|> -----------

const std::string k_kimi_begin = "<|tool_calls_section_begin|>", k_kimi_end = "<|tool_calls_section_end|>";
const std::string k_kimi_call = "<|tool_call_begin|>", k_kimi_args = "<|tool_call_argument_begin|>", k_kimi_call_end = "<|tool_call_end|>";

bool parse_kimi(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    if (!starts_with_at(s, pos, k_kimi_begin)) return false;
    size_t p = skip_space(s, pos + k_kimi_begin.size());
    while (starts_with_at(s, p, k_kimi_call)) {
        p += k_kimi_call.size();
        const size_t at = s.find(k_kimi_args, p);
        if (at == std::string::npos) return false;
        // the call id: functions.NAME:INDEX
        std::string id = trim(s.substr(p, at - p));
        if (id.rfind("functions.", 0) == 0) id.erase(0, 10);
        const size_t colon = id.rfind(':');
        parsed_tool_call call;
        call.name = colon == std::string::npos ? id : id.substr(0, colon);
        if (!find_tool(tools, call.name)) return false;
        size_t e = 0;
        const json obj = read_json(s, skip_space(s, at + k_kimi_args.size()), &e, oc);
        if (oc && oc->at_end) return open_arguments(oc, call.name, obj);
        if (obj.is_discarded() || !arguments_text(obj, call.arguments)) return false;
        p = skip_space(s, e);
        if (!starts_with_at(s, p, k_kimi_call_end)) return call_awaits(oc, call, s, p, k_kimi_call_end);
        calls.push_back(std::move(call));
        p = skip_space(s, p + k_kimi_call_end.size());
    }
    if (!starts_with_at(s, p, k_kimi_end)) return false;
    *end = p + k_kimi_end.size();
    return true;
}

std::string kimi_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return gbnf_literal(k_kimi_call + "functions." + name + ":") + " [0-9] [0-9]? " + gbnf_literal(k_kimi_args) + " " +
           args(b, name, params) + " " + gbnf_literal(k_kimi_call_end);
}

// ---- Functionary v3.1: <function=NAME>{...}</function>, repeated -------------------------------

bool parse_functionary_v31(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls,
                           size_t * end, open_call * oc) {
    static const std::string open = "<function=", close = "</function>";
    while (starts_with_at(s, pos, open)) {
        const size_t gt = s.find('>', pos + open.size());
        if (gt == std::string::npos) return false;
        parsed_tool_call call;
        call.name = s.substr(pos + open.size(), gt - pos - open.size());
        if (!find_tool(tools, call.name)) return false;
        size_t e = 0;
        const json obj = read_json(s, skip_space(s, gt + 1), &e, oc);
        if (oc && oc->at_end) return open_arguments(oc, call.name, obj);
        if (obj.is_discarded() || !arguments_text(obj, call.arguments)) return false;
        const size_t p = skip_space(s, e);
        if (!starts_with_at(s, p, close)) return call_awaits(oc, call, s, p, close);
        calls.push_back(std::move(call));
        *end = p + close.size();
        pos = skip_space(s, *end);
    }
    return true;
}

std::string functionary_v31_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return gbnf_literal("<function=" + name + ">") + " " + args(b, name, params) + " \"</function>\"";
}

// ---- Functionary v3.2: the prompt ends with ">>>"; the reply is "all\n" text, or NAME\n{...},
//      and more messages follow after ">>>" -------------------------------------------------------

size_t find_functionary_v32(const std::string & s) {
    if (s.rfind("all\n", 0) == 0 || s == "all" || s == "al" || s == "a") return s.find(">>>");
    return s.empty() ? std::string::npos : 0;
}

bool parse_functionary_v32(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls,
                           size_t * end, open_call * oc) {
    for (;;) {
        if (starts_with_at(s, pos, ">>>")) pos += 3;
        const size_t nl = s.find('\n', pos);
        if (nl == std::string::npos) return false;
        parsed_tool_call call;
        call.name = s.substr(pos, nl - pos);
        if (!find_tool(tools, call.name)) return false;
        size_t e = 0;
        const json obj = read_json(s, skip_space(s, nl + 1), &e, oc);
        if (oc && oc->at_end) return open_arguments(oc, call.name, obj);
        if (obj.is_discarded() || !arguments_text(obj, call.arguments)) return false;
        calls.push_back(std::move(call));
        *end = e;
        pos = skip_space(s, e);
        if (!starts_with_at(s, pos, ">>>")) return true;
    }
}

std::string functionary_v32_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return gbnf_literal(name + "\n") + " " + args(b, name, params);
}

// ---- Command R / R+: Action:\n```json\n[{"tool_name": ..., "parameters": {...}}]\n``` ----------

bool parse_command_r(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    if (!starts_with_at(s, pos, "Action:")) return false;
    size_t p = skip_space(s, pos + 7);
    const bool fenced = starts_with_at(s, p, "```json");
    if (fenced) p = skip_space(s, p + 7);
    if (!parse_call_array(s, p, tools, calls, &p, "tool_name", "parameters", oc)) return false;
    if (fenced) {
        p = skip_space(s, p);
        if (!starts_with_at(s, p, "```")) return false;
        p += 3;
    }
    *end = p;
    return true;
}

std::string command_r_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return json_object_call(b, name, params, "tool_name", "parameters");
}

// ---- Command R7B: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": ..., "parameters": {...}}]<|END_ACTION|>

bool parse_command_r7b(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    static const std::string open = "<|START_ACTION|>", close = "<|END_ACTION|>";
    if (!starts_with_at(s, pos, open)) return false;
    size_t p = 0;
    if (!parse_call_array(s, skip_space(s, pos + open.size()), tools, calls, &p, "tool_name", "parameters", oc)) return false;
    p = skip_space(s, p);
    if (!starts_with_at(s, p, close)) return false;
    *end = p + close.size();
    return true;
}

std::string command_r7b_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return json_object_call(b, name, params, "tool_name", "parameters", { { "tool_call_id", { { "type", "string" }, { "pattern", "^[0-9]{1,3}$" } } } });
}

// ---- Granite: <|tool_call|>[{"name": ..., "arguments": {...}}] ---------------------------------

bool parse_granite(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    static const std::string open = "<|tool_call|>";
    if (!starts_with_at(s, pos, open)) return false;
    return parse_call_array(s, skip_space(s, pos + open.size()), tools, calls, end, "name", "", oc);
}

// ---- FireFunction v2: functools[{"name": ..., "arguments": {...}}, ...] (no closing marker) ----

bool parse_firefunction(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end,
                        open_call * oc) {
    static const std::string open = "functools";
    if (!starts_with_at(s, pos, open)) return false;
    return parse_call_array(s, pos + open.size(), tools, calls, end, "name", "", oc);
}

} // namespace

const std::vector<tool_family> & json_tool_families() {
    static const std::vector<tool_family> rows = [] {
        std::vector<tool_family> r;
        auto row = [&](tool_syntax syntax, const char * name, std::vector<std::string> markers, std::vector<std::string> triggers,
                       find_fn find, parse_fn parse, call_rule_fn rule, std::string open, std::string sep, std::string close) {
            tool_family f;
            f.syntax = syntax;
            f.name = name;
            f.markers = std::move(markers);
            f.triggers = std::move(triggers);
            f.find_calls = find;
            f.parse = parse;
            f.call_rule = rule;
            f.open = std::move(open);
            f.separator = std::move(sep);
            f.close = std::move(close);
            r.push_back(std::move(f));
            return &r.back();
        };
        row(tool_syntax::hermes, "hermes", { "<tool_call>", "</tool_call>" }, { "<tool_call>" }, nullptr, parse_hermes, hermes_call,
            "", "\n", "");
        row(tool_syntax::mistral, "mistral", { "[TOOL_CALLS]", "[ARGS]" }, { "[TOOL_CALLS]" }, nullptr, parse_mistral,
            name_arguments, "[TOOL_CALLS][", ", ", "]");
        row(tool_syntax::llama3, "llama3", { "<|python_tag|>" }, {}, find_llama3, parse_json_objects, name_parameters, "", "\n", "")
            ->whole_reply = true;
        row(tool_syntax::generic, "generic", {}, {}, find_json_reply, parse_generic, name_arguments, "{\"tool_calls\": [", ", ",
            "]}")
            ->whole_reply = true;
        const std::vector<std::string> ds = { k_ds_calls_begin, k_ds_calls_end, k_ds_call_begin, k_ds_call_end, k_ds_sep };
        row(tool_syntax::deepseek_r1, "deepseek-r1", ds, { k_ds_calls_begin }, nullptr, parse_deepseek, deepseek_r1_call,
            k_ds_calls_begin, "\n", k_ds_calls_end);
        row(tool_syntax::deepseek_v31, "deepseek-v3.1", ds, { k_ds_calls_begin }, nullptr, parse_deepseek, deepseek_v31_call,
            k_ds_calls_begin, "", k_ds_calls_end);
        row(tool_syntax::kimi_k2, "kimi-k2", { k_kimi_begin, k_kimi_end, k_kimi_call, k_kimi_args, k_kimi_call_end }, { k_kimi_begin },
            nullptr, parse_kimi, kimi_call, k_kimi_begin, "", k_kimi_end);
        row(tool_syntax::functionary_v31, "functionary-v3.1", { "<|python_tag|>" }, { "<function=" }, nullptr, parse_functionary_v31,
            functionary_v31_call, "", "", "");
        // the first call is unmarked (the prompt wrote its ">>>"): no lazy grammar, and a streamed
        // reply is held until it ends
        tool_family * v32 = row(tool_syntax::functionary_v32, "functionary-v3.2", {}, {}, find_functionary_v32, parse_functionary_v32,
                                functionary_v32_call, "", ">>>", "");
        v32->hold_everything = true;
        v32->text_prefix = "all\n";
        row(tool_syntax::command_r, "command-r", {}, { "Action:" }, nullptr, parse_command_r, command_r_call, "Action:\n```json\n[",
            ", ", "]\n```");
        row(tool_syntax::command_r7b, "command-r7b", { "<|START_ACTION|>", "<|END_ACTION|>" }, { "<|START_ACTION|>" }, nullptr,
            parse_command_r7b, command_r7b_call, "<|START_ACTION|>[", ", ", "]<|END_ACTION|>");
        row(tool_syntax::granite, "granite", { "<|tool_call|>" }, { "<|tool_call|>" }, nullptr, parse_granite, name_arguments,
            "<|tool_call|>[", ", ", "]");
        row(tool_syntax::firefunction_v2, "firefunction-v2", {}, { "functools[" }, nullptr, parse_firefunction, name_arguments,
            "functools[", ", ", "]");
        return r;
    }();
    return rows;
}

} // namespace chat_tools_detail
