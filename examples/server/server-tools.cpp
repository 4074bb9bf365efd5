#include "server-tools.h"

#include <cctype>
#include <stdexcept>

namespace {

bool has(const json & body, const char * key) { return body.contains(key) && !body.at(key).is_null(); }

void check_tools(const json & tools) {
    if (!tools.is_array()) throw http_error(400, "'tools' must be a list");
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string where = "'tools[" + std::to_string(i) + "]";
        const json & t = tools[i];
        if (!t.is_object() || t.value("type", json()) != "function") throw http_error(400, where + ".type' must be \"function\"");
        if (!t.contains("function") || !t["function"].is_object()) throw http_error(400, where + ".function' must be an object");
        const json & f = t["function"];
        if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty()) {
            throw http_error(400, where + ".function.name' must be a non-empty string");
        }
        if (has(f, "parameters") && !f["parameters"].is_object()) {
            throw http_error(400, where + ".function.parameters' must be a JSON schema object");
        }
    }
}

} // namespace

json tools_for_template(const json & body) {
    if (!has(body, "tools") || !body["tools"].is_array() || body["tools"].empty()) return nullptr;
    if (has(body, "tool_choice") && body["tool_choice"] == "none") return nullptr;
    return body["tools"];
}

tool_request parse_tool_request(const json & body, tool_syntax syntax, common_params_sampling & sp) {
    tool_request req;
    req.syntax = syntax;
    req.parallel = true;
    if (has(body, "parallel_tool_calls")) {
        if (!body["parallel_tool_calls"].is_boolean()) throw http_error(400, "'parallel_tool_calls' must be true or false");
        req.parallel = body["parallel_tool_calls"].get<bool>();
    }
    const bool given = has(body, "tools");
    if (given) check_tools(body["tools"]);
    std::string choice = "auto", only;
    if (has(body, "tool_choice")) {
        const json & tc = body["tool_choice"];
        if (tc.is_string()) {
            choice = tc.get<std::string>();
            if (choice != "auto" && choice != "none" && choice != "required") {
                throw http_error(400, "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
            }
        } else if (tc.is_object() && tc.value("type", json()) == "function" && tc.contains("function") &&
                   tc["function"].is_object() && tc["function"].contains("name") && tc["function"]["name"].is_string()) {
            choice = "named";
            only = tc["function"]["name"].get<std::string>();
        } else {
            throw http_error(400, "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        }
        if (choice != "none" && choice != "auto" && (!given || body["tools"].empty())) {
            throw http_error(400, "'tool_choice' " + (choice == "named" ? "names a function" : "'" + choice + "'") + " but 'tools' is empty");
        }
    }
    if (!given || body["tools"].empty() || choice == "none") return req;
    req.active = true;
    req.tools = body["tools"];
    if (choice == "auto" && sp.grammar.empty() && !tool_call_triggers(syntax).empty()) {
        // calls amid free text: the grammar takes over at the call's opening tag
        try {
            sp.grammar = tool_call_grammar(syntax, req.tools, req.parallel, "");
            sp.grammar_triggers = tool_call_triggers(syntax);
        } catch (const std::invalid_argument & e) {
            throw http_error(400, std::string("'tools': ") + e.what());
        }
    }
    if (choice == "required" || choice == "named") {
        for (const char * f : { "grammar", "json_schema", "response_format" }) {
            if (has(body, f) && !(std::string(f) == "response_format" && body[f].value("type", json()) == "text")) {
                throw http_error(400, std::string("'tool_choice' ") + (choice == "named" ? "naming a function" : "\"required\"") +
                                          " and '" + f + "' cannot be used together");
            }
        }
        req.forced = true;
        try {
            sp.grammar = tool_call_forced_grammar(syntax, req.tools, req.parallel, only);
        } catch (const std::invalid_argument & e) {
            throw http_error(400, std::string("'tools': ") + e.what());
        }
        char err[512];
        if (!llama_grammar_validate(sp.grammar.c_str(), "root", err, sizeof err)) {
            throw http_error(400, std::string("'tools': the tool-call grammar does not parse: ") + err);
        }
    }
    return req;
}

json decoded_tool_calls(const json & tool_calls, const std::string & where) {
    if (!tool_calls.is_array()) throw http_error(400, where + ".tool_calls' must be a list");
    json out = tool_calls;
    for (size_t i = 0; i < out.size(); ++i) {
        json & c = out[i];
        const std::string at = where + ".tool_calls[" + std::to_string(i) + "]";
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
            !c["function"]["name"].is_string()) {
            throw http_error(400, at + ".function.name' must be a string");
        }
        json & f = c["function"];
        if (f.contains("arguments") && f["arguments"].is_string()) {
            const json args = json::parse(f["arguments"].get<std::string>(), nullptr, false);
            if (args.is_discarded()) throw http_error(400, at + ".function.arguments' is not valid JSON");
            f["arguments"] = args;
        }
    }
    return out;
}

size_t tool_stream::calls_from(bool * undecided) const {
    *undecided = false;
    const std::string & open = req_->reasoning_open, & close = req_->reasoning_close;
    if (close.empty()) return 0;
    size_t from = 0;
    if (!req_->reasoning_starts_inside) {
        while (from < all_.size() && std::isspace((unsigned char) all_[from])) ++from;
        if (all_.compare(from, open.size(), open) != 0) {
            // a reply that is so far a prefix of the opening tag may still become one
            *undecided = all_.size() - from < open.size() && open.compare(0, all_.size() - from, all_, from) == 0;
            return 0;
        }
        from += open.size();
    }
    const size_t at = all_.find(close, from);
    return at == std::string::npos ? std::string::npos : at + close.size();
}

void tool_stream::send_calls(const std::vector<parsed_tool_call> & calls, json & out) {
    const size_t n = req_->parallel ? calls.size() : std::min<size_t>(calls.size(), 1);
    for (size_t i = 0; i < n && i <= calls_.size(); ++i) {
        const parsed_tool_call & c = calls[i];
        if (i == calls_.size()) {
            calls_.push_back({ random_id("call_"), c.name, "" });
            out.push_back({ { "index", i },
                            { "id", calls_[i].id },
                            { "type", "function" },
                            { "function", { { "name", c.name }, { "arguments", "" } } } });
        }
        sent_call & s = calls_[i];
        // a call whose text turned out otherwise than it began (a model repeating a key) gets
        // nothing more rather than something the client would have to take back
        if (c.name != s.name || c.arguments.size() <= s.arguments.size() || c.arguments.compare(0, s.arguments.size(), s.arguments) != 0) {
            continue;
        }
        out.push_back({ { "index", i }, { "function", { { "arguments", c.arguments.substr(s.arguments.size()) } } } });
        s.arguments = c.arguments;
    }
}

tool_stream::delta tool_stream::feed(const std::string & content) {
    delta d;
    if (!req_ || !req_->active) {
        d.content = content;
        return d;
    }
    all_ += content;
    bool undecided = false;
    const size_t from = calls_from(&undecided);
    size_t safe = 0;
    if (undecided) safe = 0;
    else if (from == std::string::npos) safe = all_.size();   // inside the reasoning: it streams as it comes
    else if (from == 0) safe = tool_text_safe_prefix(req_->syntax, all_);
    else safe = from + tool_text_safe_prefix(req_->syntax, all_.substr(from));
    if (safe > sent_) {
        d.content = all_.substr(sent_, safe - sent_);
        sent_ = safe;
    }
    // held text may be calls being written: send what is sure of them
    if (!undecided && from != std::string::npos && safe < all_.size()) {
        send_calls(parse_tool_calls_partial(req_->syntax, all_.substr(from), req_->tools).calls, d.calls);
    }
    return d;
}

tool_stream::result tool_stream::finish() {
    result r;
    if (!req_ || !req_->active) return r;
    bool undecided = false;
    size_t from = calls_from(&undecided);
    if (from == std::string::npos) from = all_.size();   // the reply ended inside its reasoning
    parsed_reply p = parse_tool_calls(req_->syntax, all_.substr(from), req_->tools);
    p.content = all_.substr(0, from) + p.content;
    if (!req_->parallel && p.calls.size() > 1) p.calls.resize(1);
    if (p.calls.empty() && !calls_.empty()) {
        // calls were streamed, but the reply did not end as calls (cut off by the token limit):
        // the client keeps the partial calls, as OpenAI's stream does, and their text is not
        // sent again as content
        return r;
    }
    send_calls(p.calls, r.call_deltas);
    for (size_t i = 0; i < p.calls.size(); ++i) {
        const parsed_tool_call & c = p.calls[i];
        r.calls.push_back({ { "id", calls_[i].id }, { "type", "function" }, { "function", { { "name", c.name }, { "arguments", c.arguments } } } });
    }
    // what was sent is a prefix of the content (text before the first call never held back)
    if (p.content.size() >= sent_ && p.content.compare(0, sent_, all_, 0, sent_) == 0) r.content = p.content.substr(sent_);
    return r;
}
