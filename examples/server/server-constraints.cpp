#include "server-constraints.h"

#include "json-schema-grammar.h"

#include <string>

namespace {

bool has(const json & body, const char * key) { return body.contains(key) && !body.at(key).is_null(); }

std::string checked_grammar(const std::string & text, const std::string & field) {
    char err[512];
    if (!llama_grammar_validate(text.c_str(), "root", err, sizeof err)) throw http_error(400, "'" + field + "': " + err);
    return text;
}

std::string schema_grammar(const json & schema, const std::string & field) {
    if (!schema.is_object() && !schema.is_boolean()) throw http_error(400, "'" + field + "' must be a JSON schema (an object)");
    std::string g;
    try {
        g = json_schema_to_grammar(schema);
    } catch (const std::exception & e) {
        throw http_error(400, "'" + field + "': " + e.what());
    }
    return checked_grammar(g, field);
}

} // namespace

void parse_constraints(const json & body, common_params_sampling & sp) {
    const char * fields[] = { "grammar", "json_schema", "response_format" };
    const char * given = nullptr;
    for (const char * f : fields) {
        if (!has(body, f)) continue;
        // "grammar": "" is what clients send when they use none
        if (std::string(f) == "grammar" && body[f].is_string() && body[f].get<std::string>().empty()) continue;
        // response_format {type: text} constrains nothing and combines with anything
        if (std::string(f) == "response_format" && body[f].is_object() && body[f].value("type", json()) == "text") continue;
        if (given) throw http_error(400, std::string("'") + given + "' and '" + f + "' cannot be used together");
        given = f;
    }
    if (has(body, "grammar")) {
        if (!body["grammar"].is_string()) throw http_error(400, "'grammar' must be a string (GBNF)");
        const std::string g = body["grammar"].get<std::string>();
        if (!g.empty()) sp.grammar = checked_grammar(g, "grammar");
    }
    if (has(body, "json_schema")) sp.grammar = schema_grammar(body["json_schema"], "json_schema");
    if (has(body, "response_format")) {
        const json & rf = body["response_format"];
        if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
            throw http_error(400, "'response_format' must be an object with a 'type'");
        }
        const std::string type = rf["type"].get<std::string>();
        if (type == "json_object") {
            // llama.cpp also reads a "schema" here; without one, any JSON object
            const json schema = has(rf, "schema") ? rf["schema"] : json{ { "type", "object" } };
            sp.grammar = schema_grammar(schema, "response_format.schema");
        } else if (type == "json_schema") {
            if (!has(rf, "json_schema") || !rf["json_schema"].is_object()) {
                throw http_error(400, "'response_format.json_schema' must be an object with a 'schema'");
            }
            const json & js = rf["json_schema"];
            if (has(js, "strict") && !js["strict"].is_boolean()) {
                throw http_error(400, "'response_format.json_schema.strict' must be true or false");
            }
            if (has(js, "name") && !js["name"].is_string()) throw http_error(400, "'response_format.json_schema.name' must be a string");
            // strict or not, the grammar enforces the schema exactly
            const json schema = has(js, "schema") ? js["schema"] : json{ { "type", "object" } };
            sp.grammar = schema_grammar(schema, "response_format.json_schema.schema");
        } else if (type != "text") {
            throw http_error(400, "'response_format.type' must be text, json_object or json_schema (got '" + type + "')");
        }
    }
}
