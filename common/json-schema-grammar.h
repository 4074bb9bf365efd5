// JSON Schema -> GBNF grammar, so "json_schema" / response_format requests are enforced by the
// same grammar sampler as "grammar". The generated grammar accepts only JSON text that the
// schema validates (within the supported keywords), with optional whitespace between tokens.
//
// Supported: type (and lists of types), properties / required / additionalProperties, enum,
// const, items / prefixItems / minItems / maxItems, minLength / maxLength, pattern (a regular
// expression subset: literals, classes, groups, alternation, quantifiers, \d \w \s), format
// (date, time, date-time, uuid), integer minimum / maximum / exclusive bounds, anyOf / oneOf,
// allOf of object schemas, $ref into the same document ($defs, definitions, "#").
// Refused (std::invalid_argument naming the schema path): bounds on non-integer numbers,
// references to other documents, regex features outside the subset, a schema that is not an
// object or boolean. Annotations (title, description, examples, default ...) are ignored.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

// GBNF text whose start rule is "root".
std::string json_schema_to_grammar(const nlohmann::ordered_json & schema);

// Grammars that embed JSON values of several schemas (tool calls): each add() brings the rules
// of one schema (its $refs resolve within it) and returns the rule that matches one value
// followed by optional whitespace; the caller writes the root.
class json_schema_grammar_builder {
public:
    json_schema_grammar_builder();
    ~json_schema_grammar_builder();
    std::string add(const nlohmann::ordered_json & schema, const std::string & name_hint);
    std::string primitive(const std::string & name);   // "space", "string", "value", ...
    std::string add_rule(const std::string & name_hint, const std::string & body);   // returns the name
    void set_root(const std::string & body);
    std::string text() const;   // every rule, root first

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

// GBNF literal of raw text: "..." with quotes, backslashes and control characters escaped.
std::string gbnf_literal(const std::string & text);

// A JSON regular expression (the "pattern" keyword) as a GBNF expression over the characters of
// the decoded string. Throws std::invalid_argument for unsupported syntax.
std::string json_regex_to_gbnf(const std::string & pattern);
