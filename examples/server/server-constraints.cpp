#include "server-constraints.h"

#include <string>

namespace {

bool has(const json & body, const char * key) { return body.contains(key) && !body.at(key).is_null(); }

std::string checked_grammar(const std::string & text, const std::string & field) {
    char err[512];
    if (!llama_grammar_validate(text.c_str(), "root", err, sizeof err)) throw http_error(400, "'" + field + "': " + err);
    return text;
}

} // namespace

void parse_constraints(const json & body, common_params_sampling & sp) {
    const char * fields[] = { "grammar", "json_schema", "response_format" };
    const char * given = nullptr;
    for (const char * f : fields) {
        if (!has(body, f)) continue;
        // response_format {type: text} constrains nothing and combines with anything
        if (std::string(f) == "response_format" && body[f].is_object() && body[f].value("type", json()) == "text") continue;
        if (given) throw http_error(400, std::string("'") + given + "' and '" + f + "' cannot be used together");
        given = f;
    }
    if (has(body, "grammar")) {
        if (!body["grammar"].is_string()) throw http_error(400, "'grammar' must be a string (GBNF)");
        sp.grammar = checked_grammar(body["grammar"].get<std::string>(), "grammar");
    }
    if (has(body, "json_schema")) {
        throw http_error(400, "'json_schema' is not supported yet");
    }
    if (has(body, "response_format")) {
        const json & rf = body["response_format"];
        if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
            throw http_error(400, "'response_format' must be an object with a 'type'");
        }
        const std::string type = rf["type"].get<std::string>();
        if (type != "text") {
            throw http_error(400, "'response_format' type '" + type + "' is not supported yet");
        }
    }
}
