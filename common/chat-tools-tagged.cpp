// The tool-call families that write each argument in its own tags: Qwen3-Coder / Qwen3.5 and
// Seed-OSS (<function=NAME><parameter=P>value</parameter>), GLM-4.5+ (<arg_key>/<arg_value>),
// DeepSeek V3.2 / V4 (DSML <｜DSML｜parameter name=P string=...>);
// and gpt-oss's harmony format, where a call is a message addressed to functions.NAME.
#include "chat-tools-family.h"

#include <algorithm>
#include <cctype>

namespace chat_tools_detail {

namespace {

// The GBNF of a parameter's value written as text: strings raw (no "<" that opens a closing
// tag), anything else as JSON.
std::string text_value_rule(json_schema_grammar_builder & b, const std::string & call, const std::string & pname, const json & pschema) {
    if (!pschema.is_object() || pschema.value("type", json()) != "string") return b.add(pschema, call + "-" + pname);
    if (pschema.contains("enum") && pschema["enum"].is_array()) {
        std::string alts;
        for (const auto & v : pschema["enum"]) {
            if (v.is_string()) alts += (alts.empty() ? "" : " | ") + gbnf_literal(v.get<std::string>());
        }
        if (!alts.empty()) return b.add_rule(call + "-" + pname + "-enum", alts);
    }
    // bounded strings stay bounded (a model that never closes the tag would run to the limit)
    const json lo = pschema.value("minLength", json()), hi = pschema.value("maxLength", json());
    if (hi.is_number_unsigned() || lo.is_number_unsigned()) {
        const std::string n_lo = lo.is_number_unsigned() ? lo.dump() : "0", n_hi = hi.is_number_unsigned() ? hi.dump() : "";
        return b.add_rule(call + "-" + pname + "-text", "[^<]{" + n_lo + "," + n_hi + "}");
    }
    return b.add_rule("xml-text", "([^<] | \"<\" [^/])*");
}

// Streaming a call of tagged parameters: stop() records it in oc as far as it has been written
// (the complete parameters in args, then the open one) and returns false for the parser to
// return; without oc it only returns false.
struct tagged_stream {
    open_call * oc;
    const std::string & name;
    const json & args;
    std::string close_tag;
    bool strip_newlines;
    bool stop(const std::string & pname = "", bool is_string = false, const std::string & value = "") const {
        if (!oc) return false;
        oc->at_end = true;
        oc->name = name;
        oc->arguments = tagged_arguments_prefix(args, pname, is_string, value, close_tag, strip_newlines);
        return false;
    }
};

// Whether the text ends at pos with the start of one of lits (so it may still become it).
bool stops_at(const std::string & s, size_t pos, std::initializer_list<std::string> lits) {
    for (const auto & l : lits) {
        if (s.size() - pos < l.size() && l.compare(0, s.size() - pos, s, pos) == 0) return true;
    }
    return false;
}

// One block per property, required ones always and optional ones maybe, in the schema's order.
std::string parameter_blocks(json_schema_grammar_builder & b, const std::string & name, const json & params,
                             std::string (*block)(const std::string & pname, const std::string & value)) {
    const json props = params.value("properties", json::object());
    const json req = params.value("required", json::array());
    std::string body;
    for (const auto & [pname, pschema] : props.items()) {
        const bool required = std::find(req.begin(), req.end(), json(pname)) != req.end();
        const std::string one = block(pname, text_value_rule(b, name, pname, pschema));
        body += required ? one + " " : "(" + one + ")? ";
    }
    return body;
}

// ---- Qwen3-Coder / Seed-OSS: OPEN <function=NAME> (<parameter=P> value </parameter>)* </function> CLOSE

bool parse_xml_calls(const std::string & open, const std::string & close, const std::string & s, size_t pos, const json & tools,
                     std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    while (starts_with_at(s, pos, open)) {
        size_t p = skip_space(s, pos + open.size());
        if (!starts_with_at(s, p, "<function=")) return false;
        p += 10;
        const size_t gt = s.find('>', p);
        if (gt == std::string::npos) return false;
        parsed_tool_call call;
        call.name = s.substr(p, gt - p);
        const json * fn = find_tool(tools, call.name);
        if (!fn) return false;
        json args = json::object();
        const tagged_stream open_here{ oc, call.name, args, "</parameter>", true };
        p = skip_space(s, gt + 1);
        while (starts_with_at(s, p, "<parameter=")) {
            p += 11;
            const size_t pgt = s.find('>', p);
            if (pgt == std::string::npos) return open_here.stop();
            const std::string pname = s.substr(p, pgt - p);
            const size_t pclose = s.find("</parameter>", pgt + 1);
            if (pclose == std::string::npos) return open_here.stop(pname, parameter_type(fn, pname) == "string", s.substr(pgt + 1));
            std::string value = s.substr(pgt + 1, pclose - pgt - 1);
            // Qwen's template puts the value on its own line
            if (!value.empty() && value.front() == '\n') value.erase(0, 1);
            if (!value.empty() && value.back() == '\n') value.pop_back();
            args[pname] = text_parameter(fn, pname, value);
            p = skip_space(s, pclose + 12);
        }
        if (!starts_with_at(s, p, "</function>")) return stops_at(s, p, { "<parameter=", "</function>" }) && open_here.stop();
        p = skip_space(s, p + 11);
        call.arguments = arguments_json(args);
        if (!starts_with_at(s, p, close)) return call_awaits(oc, call, s, p, close);
        calls.push_back(std::move(call));
        *end = p + close.size();
        pos = skip_space(s, *end);
    }
    return true;
}

bool parse_qwen_xml(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    return parse_xml_calls("<tool_call>", "</tool_call>", s, pos, tools, calls, end, oc);
}

bool parse_seed_xml(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    return parse_xml_calls("<seed:tool_call>", "</seed:tool_call>", s, pos, tools, calls, end, oc);
}

std::string xml_parameter(const std::string & pname, const std::string & value) {
    return gbnf_literal("<parameter=" + pname + ">\n") + " " + value + " \"\\n</parameter>\\n\"";
}

std::string xml_function(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return gbnf_literal("<function=" + name + ">\n") + " " + parameter_blocks(b, name, params, xml_parameter) + "\"</function>\\n\"";
}

std::string qwen_xml_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return "\"<tool_call>\\n\" " + xml_function(b, name, params) + " \"</tool_call>\"";
}

std::string seed_xml_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return "\"<seed:tool_call>\\n\" " + xml_function(b, name, params) + " \"</seed:tool_call>\"";
}

// ---- GLM-4.5+: <tool_call>NAME (<arg_key>K</arg_key> <arg_value>V</arg_value>)* </tool_call> ----
// (GLM-4.5/4.6 put newlines between the parts, GLM-4.7 writes them together: both parse)

bool parse_glm(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    static const std::string open = "<tool_call>", close = "</tool_call>";
    while (starts_with_at(s, pos, open)) {
        size_t p = pos + open.size();
        size_t name_end = std::min(s.find("<arg_key>", p), s.find(close, p));
        if (name_end == std::string::npos) return false;
        parsed_tool_call call;
        call.name = trim(s.substr(p, name_end - p));
        const json * fn = find_tool(tools, call.name);
        if (!fn) return false;
        json args = json::object();
        const tagged_stream open_here{ oc, call.name, args, "</arg_value>", false };
        p = name_end;
        while (starts_with_at(s, p, "<arg_key>")) {
            const size_t kend = s.find("</arg_key>", p);
            if (kend == std::string::npos) return open_here.stop();
            const std::string key = trim(s.substr(p + 9, kend - p - 9));
            p = skip_space(s, kend + 10);
            if (!starts_with_at(s, p, "<arg_value>")) return stops_at(s, p, { "<arg_value>" }) && open_here.stop(key, false, "");
            const size_t vend = s.find("</arg_value>", p);
            if (vend == std::string::npos) return open_here.stop(key, parameter_type(fn, key) == "string", s.substr(p + 11));
            args[key] = text_parameter(fn, key, s.substr(p + 11, vend - p - 11));
            p = skip_space(s, vend + 12);
        }
        if (!starts_with_at(s, p, close)) return stops_at(s, p, { "<arg_key>", close }) && open_here.stop();
        call.arguments = arguments_json(args);
        calls.push_back(std::move(call));
        *end = p + close.size();
        pos = skip_space(s, *end);
    }
    return true;
}

std::string glm_parameter(const std::string & pname, const std::string & value) {
    return gbnf_literal("<arg_key>" + pname + "</arg_key>") + " \"\\n\"? \"<arg_value>\" " + value + " \"</arg_value>\" \"\\n\"?";
}

std::string glm_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return gbnf_literal("<tool_call>" + name) + " \"\\n\"? " + parameter_blocks(b, name, params, glm_parameter) + "\"</tool_call>\"";
}

// ---- DeepSeek V3.2 / V4 (DSML): <｜DSML｜BLOCK> (<｜DSML｜invoke name="NAME"> (<｜DSML｜parameter name="P"
//      string="true|false">V</｜DSML｜parameter>)* </｜DSML｜invoke>)+ </｜DSML｜BLOCK>; BLOCK is function_calls
//      (V3.2) or tool_calls (V4)

const std::string k_dsml = "｜DSML｜";

bool parse_dsml(const std::string & block, const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls,
                size_t * end, open_call * oc) {
    const std::string open = "<" + k_dsml + block + ">", close = "</" + k_dsml + block + ">";
    const std::string invoke = "<" + k_dsml + "invoke name=\"", invoke_end = "</" + k_dsml + "invoke>";
    const std::string param = "<" + k_dsml + "parameter name=\"", param_end = "</" + k_dsml + "parameter>";
    if (!starts_with_at(s, pos, open)) return false;
    size_t p = skip_space(s, pos + open.size());
    while (starts_with_at(s, p, invoke)) {
        p += invoke.size();
        const size_t q = s.find("\">", p);
        if (q == std::string::npos) return false;
        parsed_tool_call call;
        call.name = s.substr(p, q - p);
        const json * fn = find_tool(tools, call.name);
        if (!fn) return false;
        json args = json::object();
        const tagged_stream open_here{ oc, call.name, args, param_end, false };
        p = skip_space(s, q + 2);
        while (starts_with_at(s, p, param)) {
            p += param.size();
            const size_t nq = s.find('"', p), gt = s.find('>', p);
            if (nq == std::string::npos || gt == std::string::npos) return open_here.stop();
            if (gt < nq) return false;
            const std::string pname = s.substr(p, nq - p);
            const bool is_string = s.compare(nq, 16, "\" string=\"true\"") == 0;
            const size_t vend = s.find(param_end, gt + 1);
            if (vend == std::string::npos) {
                return open_here.stop(pname, is_string || parameter_type(fn, pname) == "string", s.substr(gt + 1));
            }
            const std::string value = s.substr(gt + 1, vend - gt - 1);
            args[pname] = is_string ? json(value) : text_parameter(fn, pname, value);
            p = skip_space(s, vend + param_end.size());
        }
        if (!starts_with_at(s, p, invoke_end)) return stops_at(s, p, { param, invoke_end }) && open_here.stop();
        call.arguments = arguments_json(args);
        calls.push_back(std::move(call));
        p = skip_space(s, p + invoke_end.size());
    }
    if (!starts_with_at(s, p, close)) return false;
    *end = p + close.size();
    return true;
}

bool parse_dsml_v32(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    return parse_dsml("function_calls", s, pos, tools, calls, end, oc);
}

bool parse_dsml_v4(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    return parse_dsml("tool_calls", s, pos, tools, calls, end, oc);
}

std::string dsml_parameter(const std::string & pname, const std::string & value) {
    return gbnf_literal("<" + k_dsml + "parameter name=\"" + pname + "\" string=\"") + " (\"true\" | \"false\") \"\\\">\" " + value +
           " " + gbnf_literal("</" + k_dsml + "parameter>\n");
}

std::string dsml_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return gbnf_literal("<" + k_dsml + "invoke name=\"" + name + "\">\n") + " " + parameter_blocks(b, name, params, dsml_parameter) +
           gbnf_literal("</" + k_dsml + "invoke>");
}

// ---- harmony: <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
// (the recipient may also stand before the channel: <|start|>assistant to=functions.NAME<|channel|>...)

const std::string k_recipient = " to=functions.";

size_t find_harmony(const std::string & s) {
    const size_t to = s.find(k_recipient);
    if (to == std::string::npos) return std::string::npos;
    // the call starts with its message's header
    for (const char * head : { "<|start|>", "<|channel|>" }) {
        const size_t h = s.rfind(head, to);
        if (h != std::string::npos) return h;
    }
    return to;
}

bool parse_harmony(const std::string & s, size_t pos, const json & tools, std::vector<parsed_tool_call> & calls, size_t * end, open_call * oc) {
    for (;;) {
        const size_t msg = s.find("<|message|>", pos);
        const size_t to = s.find(k_recipient, pos);
        if (to == std::string::npos || msg == std::string::npos || to > msg) return false;
        size_t n = to + k_recipient.size(), e = n;
        while (e < msg && (std::isalnum((unsigned char) s[e]) || s[e] == '_' || s[e] == '-' || s[e] == '.')) ++e;
        parsed_tool_call call;
        call.name = s.substr(n, e - n);
        if (!find_tool(tools, call.name)) return false;
        size_t after = 0;
        const json obj = read_json(s, skip_space(s, msg + 11), &after, oc);
        if (oc && oc->at_end) return open_arguments(oc, call.name, obj);
        if (obj.is_discarded() || !arguments_text(obj, call.arguments)) return false;
        calls.push_back(std::move(call));
        after = skip_space(s, after);
        if (starts_with_at(s, after, "<|call|>")) after += 8;
        *end = after;
        // another call follows in a new message
        pos = skip_space(s, after);
        if (!starts_with_at(s, pos, "<|start|>")) return true;
        const size_t next_msg = s.find("<|message|>", pos), next_to = s.find(k_recipient, pos);
        if (next_to == std::string::npos || next_msg == std::string::npos || next_to > next_msg) return true;
    }
}

std::string harmony_call(json_schema_grammar_builder & b, const std::string & name, const json & params) {
    return gbnf_literal(k_recipient + name + " <|constrain|>json<|message|>") + " " + b.add(params, name + "-args");
}

} // namespace

const std::vector<tool_family> & tagged_tool_families() {
    static const std::vector<tool_family> rows = [] {
        std::vector<tool_family> r(6);
        r[0].syntax = tool_syntax::qwen_xml;
        r[0].name = "qwen-xml";
        r[0].markers = { "<tool_call>", "</tool_call>" };
        r[0].triggers = { "<tool_call>" };
        r[0].parse = parse_qwen_xml;
        r[0].call_rule = qwen_xml_call;
        r[0].separator = "\n";

        r[1] = r[0];
        r[1].syntax = tool_syntax::seed_xml;
        r[1].name = "seed-xml";
        r[1].markers = { "<seed:tool_call>", "</seed:tool_call>" };
        r[1].triggers = { "<seed:tool_call>" };
        r[1].parse = parse_seed_xml;
        r[1].call_rule = seed_xml_call;

        r[2] = r[0];
        r[2].syntax = tool_syntax::glm;
        r[2].name = "glm";
        r[2].markers = { "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>" };
        r[2].parse = parse_glm;
        r[2].call_rule = glm_call;

        // harmony's tokens are rendered with the reply (the server shows control tokens for it);
        // the lazy grammar starts at the recipient, a forced one writes the channel first
        r[3].syntax = tool_syntax::harmony;
        r[3].name = "harmony";
        r[3].triggers = { k_recipient };
        r[3].find_calls = find_harmony;
        r[3].parse = parse_harmony;
        r[3].call_rule = harmony_call;
        r[3].forced_prefix = "<|channel|>commentary";
        r[3].holds = { "<|" };
        r[3].parallel = false;

        for (size_t v = 4; v <= 5; ++v) {
            const std::string block = v == 4 ? "function_calls" : "tool_calls";
            r[v].syntax = v == 4 ? tool_syntax::deepseek_v32 : tool_syntax::deepseek_v4;
            r[v].name = v == 4 ? "deepseek-v3.2" : "deepseek-v4";
            r[v].triggers = { "<" + k_dsml + block + ">" };
            r[v].parse = v == 4 ? parse_dsml_v32 : parse_dsml_v4;
            r[v].call_rule = dsml_call;
            r[v].open = "<" + k_dsml + block + ">\n";
            r[v].separator = "\n";
            r[v].close = "\n</" + k_dsml + block + ">";
        }
        return r;
    }();
    return rows;
}

} // namespace chat_tools_detail
