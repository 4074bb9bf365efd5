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

#include <string>

// GBNF text whose start rule is "root".
std::string json_schema_to_grammar(const nlohmann::ordered_json & schema);

// A JSON regular expression (the "pattern" keyword) as a GBNF expression over the characters of
// the decoded string. Throws std::invalid_argument for unsupported syntax.
std::string json_regex_to_gbnf(const std::string & pattern);
