// Tool calls in a reply that is still being written (streaming). The families' own parsers read
// the partial text: where it stops inside a call's JSON, the JSON is healed (closed, with a
// marker string where the text stopped) and read as usual, and the arguments' JSON text is cut
// at the marker. What is sent is only what no later text can change: a string's characters as
// far as they are complete, a number or literal once it has ended, a key with its colon, never
// a closing brace or a comma that might still be one. The cut text is a prefix of what the
// finished call dumps, because both are dumped the same way (ordered keys, compact).
#include "chat-tools-family.h"

#include <cctype>
#include <cstdlib>

namespace chat_tools_detail {

namespace {

// Marker strings written into healed JSON: "in" ends a string the text stopped inside of (the
// cut is at the marker), "new" is a value or key that has not started (the cut is before its
// opening quote).
const std::string k_mark_in = "@kiln-partial-in@";
const std::string k_mark_new = "@kiln-partial-new@";

// How many bytes at the end of s cannot be sent yet because a UTF-8 character is cut short.
size_t unfinished_utf8_tail(const std::string & s) {
    const size_t n = s.size();
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
        const unsigned char c = (unsigned char) s[n - back];
        if ((c & 0xC0) == 0x80) continue;
        const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

// The same for a JSON string's raw content from `from` on: also an escape that is not complete,
// or a \u high surrogate still waiting for its low half.
size_t unfinished_json_string_tail(const std::string & s, size_t from) {
    const size_t n = s.size();
    for (size_t i = from; i < n; ++i) {
        if (s[i] != '\\') continue;
        if (i + 1 >= n) return n - i;
        if (s[i + 1] != 'u') {
            ++i;
            continue;
        }
        if (i + 6 > n) return n - i;
        const unsigned long cp = std::strtoul(s.substr(i + 2, 4).c_str(), nullptr, 16);
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 12 > n) return n - i;   // the pair is not complete
        i += 5;
    }
    return unfinished_utf8_tail(s);
}

struct healed_text {
    bool ok = false;           // a JSON value starts at pos and the text ends inside it
    bool strip_comma = false;
    std::string text;
};

// Closes the JSON value starting at pos, which the text ends inside of.
healed_text heal_json(const std::string & s, size_t pos) {
    enum class want { value, value_or_close, key, key_or_close, colon, comma_or_close };
    healed_text h;
    std::string stack;
    want w = want::value;
    size_t i = pos;
    auto closers = [&] {
        std::string c;
        for (size_t k = stack.size(); k > 0; --k) c += stack[k - 1] == '{' ? '}' : ']';
        return c;
    };
    auto after_value = [&] { w = want::comma_or_close; };
    while (i < s.size()) {
        const char c = s[i];
        if (is_space(c)) {
            ++i;
            continue;
        }
        const bool value_here = w == want::value || w == want::value_or_close;
        if (c == '"' && (value_here || w == want::key || w == want::key_or_close)) {
            const bool is_key = !value_here;
            size_t j = i + 1;
            bool closed = false;
            while (j < s.size()) {
                if (s[j] == '\\') j += 2;
                else if (s[j] == '"') {
                    closed = true;
                    break;
                } else ++j;
            }
            if (!closed) {
                const size_t keep = s.size() - unfinished_json_string_tail(s, i + 1);
                h.text = s.substr(pos, keep - pos) + k_mark_in + "\"" + (is_key ? ":0" : "") + closers();
                h.ok = true;
                return h;
            }
            i = j + 1;
            if (is_key) w = want::colon;
            else if (stack.empty()) return h;   // a complete string: nothing to heal
            else after_value();
            continue;
        }
        if ((c == '{' || c == '[') && value_here) {
            stack += c;
            w = c == '{' ? want::key_or_close : want::value_or_close;
            ++i;
            continue;
        }
        if ((c == '}' && (w == want::key_or_close || w == want::comma_or_close) && !stack.empty() && stack.back() == '{') ||
            (c == ']' && (w == want::value_or_close || w == want::comma_or_close) && !stack.empty() && stack.back() == '[')) {
            stack.pop_back();
            if (stack.empty()) return h;   // closed: not for healing
            after_value();
            ++i;
            continue;
        }
        if (c == ',' && w == want::comma_or_close) {
            w = stack.back() == '{' ? want::key : want::value;
            ++i;
            continue;
        }
        if (c == ':' && w == want::colon) {
            w = want::value;
            ++i;
            continue;
        }
        if (value_here && (c == '-' || std::isdigit((unsigned char) c) || c == 't' || c == 'f' || c == 'n')) {
            size_t j = i;
            while (j < s.size() && (std::isalnum((unsigned char) s[j]) || s[j] == '-' || s[j] == '+' || s[j] == '.')) ++j;
            if (j == s.size()) break;   // a number or literal may go on: leave it out
            if (stack.empty()) return h;
            i = j;
            after_value();
            continue;
        }
        return h;   // not JSON
    }
    if (stack.empty()) return h;   // nothing started (or a bare scalar)
    const std::string fresh = "\"" + k_mark_new + "\"";
    switch (w) {
        case want::value:
        case want::value_or_close: h.text = s.substr(pos, i - pos) + fresh; break;
        case want::key:
        case want::key_or_close: h.text = s.substr(pos, i - pos) + fresh + ":0"; break;
        case want::colon: h.text = s.substr(pos, i - pos) + ":" + fresh; break;
        case want::comma_or_close:
            h.text = s.substr(pos, i - pos) + "," + fresh + (stack.back() == '{' ? ":0" : "");
            h.strip_comma = true;
            break;
    }
    // a number or literal the text stopped in is left out: cut it from the healed text
    h.text += closers();
    h.ok = true;
    return h;
}

bool holds_mark(const std::string & text) {
    return text.find(k_mark_in) != std::string::npos || text.find(k_mark_new) != std::string::npos;
}

} // namespace

json read_json(const std::string & s, size_t pos, size_t * end, open_call * oc) {
    json v = json_at(s, pos, end);
    if (!v.is_discarded() || !oc) return v;
    if (skip_space(s, pos) >= s.size()) {
        oc->at_end = true;   // the value has not started yet
        return v;
    }
    const healed_text h = heal_json(s, pos);
    if (!h.ok) return v;
    json healed = json::parse(h.text, nullptr, false);
    if (healed.is_discarded()) return v;
    oc->at_end = oc->healed = true;
    oc->strip_comma = h.strip_comma;
    *end = s.size();
    return healed;
}

bool is_partial(const json & v) {
    if (v.is_string()) return holds_mark(v.get<std::string>());
    if (!v.is_structured()) return false;
    return holds_mark(arguments_json(v));
}

std::string partial_arguments(const json & args, const open_call & oc) {
    if (!args.is_object()) return "";
    std::string text = arguments_json(args);
    size_t at = text.find(k_mark_in);
    if (at != std::string::npos) return text.substr(0, at);
    at = text.find("\"" + k_mark_new);
    if (at == std::string::npos) return text;   // complete
    text.resize(at);
    if (oc.strip_comma && !text.empty() && text.back() == ',') text.pop_back();
    return text;
}

void open_object_call(const json & obj, const json & tools, open_call & oc, const char * name_key, const char * args_key) {
    oc.at_end = true;
    if (!obj.is_object() || !obj.contains(name_key) || !obj[name_key].is_string() || is_partial(obj[name_key])) return;
    const std::string name = obj[name_key].get<std::string>();
    if (!find_tool(tools, name)) return;
    oc.name = name;
    const char * key = *args_key ? args_key : obj.contains("arguments") ? "arguments" : "parameters";
    if (!obj.contains(key)) return;
    const json & a = obj[key];
    if (a.is_object()) oc.arguments = partial_arguments(a, oc);
    else if (a.is_string() && !is_partial(a)) arguments_text(a, oc.arguments);   // given as a JSON string: whole or not at all
}

bool array_calls(const json & arr, const json & tools, std::vector<parsed_tool_call> & calls, open_call * oc, const char * name_key,
                 const char * args_key) {
    if (!arr.is_array() || (arr.empty() && !(oc && oc->healed))) return false;
    for (const auto & obj : arr) {
        if (oc && oc->healed && is_partial(obj)) {
            open_object_call(obj, tools, *oc, name_key, args_key);
            return false;
        }
        parsed_tool_call call;
        if (!object_to_call(obj, tools, call, name_key, args_key)) return false;
        calls.push_back(std::move(call));
    }
    return !(oc && oc->healed);
}

bool open_arguments(open_call * oc, const std::string & name, const json & args) {
    oc->name = name;
    oc->arguments = oc->healed ? partial_arguments(args, *oc) : "";
    return false;
}

bool call_awaits(open_call * oc, const parsed_tool_call & call, const std::string & s, size_t p, const std::string & closing) {
    if (oc && s.size() - std::min(p, s.size()) < closing.size() && closing.compare(0, s.size() - std::min(p, s.size()), s, std::min(p, s.size())) == 0) {
        oc->at_end = true;
        oc->name = call.name;
        oc->arguments = call.arguments;
    }
    return false;
}

std::string parameter_type(const json * fn, const std::string & param) {
    if (!fn || !fn->contains("parameters")) return "";
    const json & params = (*fn)["parameters"];
    if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object() ||
        !params["properties"].contains(param)) {
        return "";
    }
    const json & p = params["properties"][param];
    return p.is_object() && p.contains("type") && p["type"].is_string() ? p["type"].get<std::string>() : "";
}

std::string tagged_arguments_prefix(const json & done, const std::string & pname, bool is_string, std::string value,
                                    const std::string & close_tag, bool strip_newlines) {
    std::string out = arguments_json(done);
    out.pop_back();   // the closing brace
    if (pname.empty()) return out;
    if (!done.empty()) out += ',';
    out += arguments_json(json(pname));
    out += ':';
    if (!is_string) return out;   // a typed value is read when it is complete
    // a tail that may be the start of the closing tag, a trailing newline the parser would drop
    for (size_t n = std::min(close_tag.size() - 1, value.size()); n > 0; --n) {
        if (value.compare(value.size() - n, n, close_tag, 0, n) == 0) {
            value.resize(value.size() - n);
            break;
        }
    }
    if (strip_newlines) {
        if (value.empty()) return out;   // the leading newline is not known to be there or not
        if (value.front() == '\n') value.erase(0, 1);
        if (!value.empty() && value.back() == '\n') value.pop_back();
    }
    value.resize(value.size() - unfinished_utf8_tail(value));
    const std::string quoted = arguments_json(json(value));
    return out + quoted.substr(0, quoted.size() - 1);   // without the closing quote
}

} // namespace chat_tools_detail
