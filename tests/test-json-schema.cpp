// JSON Schema -> GBNF: for each supported keyword, documents the schema allows must be accepted
// by the generated grammar and documents it forbids refused; unsupported schemas are errors that
// name the schema path. Sampling from a random-weight model under a schema gives documents a
// hand-written check of the same schema accepts.
#include "common.h"
#include "json-schema-grammar.h"
#include "llama-grammar.h"
#include "llama.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

using json = nlohmann::ordered_json;

namespace {

std::string grammar_of(const json & schema) {
    std::string g = json_schema_to_grammar(schema);
    char err[512];
    EXPECT_TRUE(llama_grammar_validate(g.c_str(), "root", err, sizeof err)) << err << "\n" << g;
    return g;
}

bool accepts(const std::string & grammar_text, const std::string & doc) {
    llama_gbnf::grammar g;
    std::string err;
    if (!llama_gbnf::parse(grammar_text, "root", g, err)) return false;
    llama_gbnf::matcher m(g);
    return m.accept(doc) && m.complete();
}

void expect_accepts(const json & schema, std::initializer_list<const char *> good, std::initializer_list<const char *> bad) {
    const std::string g = grammar_of(schema);
    for (const char * d : good) EXPECT_TRUE(accepts(g, d)) << "should accept " << d << " for " << schema.dump() << "\n" << g;
    for (const char * d : bad) EXPECT_FALSE(accepts(g, d)) << "should refuse " << d << " for " << schema.dump() << "\n" << g;
}

std::string error_of(const json & schema) {
    try {
        json_schema_to_grammar(schema);
    } catch (const std::invalid_argument & e) {
        return e.what();
    }
    ADD_FAILURE() << "no error for " << schema.dump();
    return "";
}

} // namespace

TEST(JsonSchema, Primitives) {
    expect_accepts({ { "type", "string" } }, { "\"\"", "\"a b\"", "\"\\\"q\\u00e9\\n\"", "\"é\" " }, { "\"a", "\"\n\"", "1", "\"\\x\"" });
    expect_accepts({ { "type", "integer" } }, { "0", "-12", "1234567" }, { "01", "1.5", "-", "\"1\"" });
    expect_accepts({ { "type", "number" } }, { "0", "-1.25", "3e10", "2.5E-3" }, { ".5", "1.", "--1", "1e" });
    expect_accepts({ { "type", "boolean" } }, { "true", "false" }, { "True", "1" });
    expect_accepts({ { "type", "null" } }, { "null" }, { "nil", "" });
    expect_accepts(json::object(), { "1", "{\"a\": [true, null, \"x\"]}", "[]" }, { "{", "[1,]" });
    expect_accepts({ { "type", json::array({ "string", "null" }) } }, { "\"x\"", "null" }, { "1" });
}

TEST(JsonSchema, ObjectsRequiredAndAdditional) {
    const json person = json::parse(R"({
        "type": "object",
        "properties": { "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}} },
        "required": ["name"],
        "additionalProperties": false
    })");
    expect_accepts(person, { "{\"name\": \"a\"}", "{ \"name\":\"a\", \"age\": 3 }", "{\"name\":\"a\",\"tags\":[\"x\",\"y\"]}",
                             "{\"name\":\"a\",\"age\":1,\"tags\":[]}" },
                   { "{}", "{\"age\": 3}", "{\"name\": 1}", "{\"name\":\"a\",\"x\":1}", "{\"name\":\"a\",}" });
    // no required properties: any subset, in order
    json opt = person;
    opt.erase("required");
    expect_accepts(opt, { "{}", "{\"age\": 1}", "{\"tags\": []}", "{\"age\": 1, \"tags\": []}" }, { "{,}", "{\"age\":1,}" });
    // additional properties allowed (the default) with other keys; declared keys keep their type
    json open = person;
    open.erase("additionalProperties");
    expect_accepts(open, { "{\"name\":\"a\",\"x\":1}", "{\"name\":\"a\",\"agent\":[1]}", "{\"name\":\"a\",\"ag\":{}}" },
                   { "{\"name\":\"a\",\"age\":\"old\"}", "{\"name\":\"a\",\"name\":2}" });
    // typed additional properties
    expect_accepts({ { "type", "object" }, { "additionalProperties", { { "type", "integer" } } } }, { "{}", "{\"a\":1,\"b\":2}" },
                   { "{\"a\":\"x\"}" });
}

TEST(JsonSchema, EnumConstAndCombinators) {
    expect_accepts({ { "enum", json::array({ "red", 1, nullptr }) } }, { "\"red\"", "1", "null" }, { "\"blue\"", "2" });
    expect_accepts({ { "const", { { "k", "v" } } } }, { "{\"k\":\"v\"}" }, { "{\"k\":\"w\"}" });
    expect_accepts({ { "anyOf", json::array({ { { "type", "integer" } }, { { "type", "string" }, { "maxLength", 2 } } }) } },
                   { "7", "\"ab\"" }, { "\"abc\"", "true" });
    expect_accepts({ { "oneOf", json::array({ { { "type", "boolean" } }, { { "type", "null" } } }) } }, { "true", "null" }, { "0" });
    const json all = json::parse(R"({"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]}
    ], "additionalProperties": false})");
    expect_accepts(all, { "{\"a\":1,\"b\":true}" }, { "{\"a\":1}", "{\"b\":true}", "{\"a\":1,\"b\":true,\"c\":1}" });
}

TEST(JsonSchema, ArraysAndStrings) {
    expect_accepts({ { "type", "array" }, { "items", { { "type", "integer" } } }, { "minItems", 1 }, { "maxItems", 3 } },
                   { "[1]", "[1, 2,3]" }, { "[]", "[1,2,3,4]", "[1,]", "[\"a\"]" });
    expect_accepts({ { "type", "array" }, { "maxItems", 0 } }, { "[]" }, { "[1]" });
    expect_accepts({ { "type", "array" }, { "prefixItems", json::array({ { { "type", "string" } }, { { "type", "integer" } } }) } },
                   { "[\"a\", 1]" }, { "[1, \"a\"]", "[\"a\"]" });
    expect_accepts({ { "type", "string" }, { "minLength", 2 }, { "maxLength", 3 } }, { "\"ab\"", "\"abc\"", "\"\\u0041b\"" },
                   { "\"a\"", "\"abcd\"" });
    expect_accepts({ { "type", "string" }, { "format", "date" } }, { "\"2024-02-29\"" }, { "\"2024-13-01\"", "\"24-01-01\"" });
    expect_accepts({ { "type", "string" }, { "format", "date-time" } }, { "\"2024-01-02T03:04:05Z\"", "\"2024-01-02T23:59:59.123+05:30\"" },
                   { "\"2024-01-02 03:04:05\"" });
    expect_accepts({ { "type", "string" }, { "format", "uuid" } }, { "\"123e4567-e89b-12d3-a456-426614174000\"" }, { "\"123e4567\"" });
}

TEST(JsonSchema, Patterns) {
    expect_accepts({ { "type", "string" }, { "pattern", "^[A-Z]{2}-\\d{3,4}$" } }, { "\"AB-123\"", "\"ZZ-0000\"" },
                   { "\"ab-123\"", "\"AB-12\"", "\"AB-12345\"" });
    expect_accepts({ { "type", "string" }, { "pattern", "^(?:cat|dog)s?( [a-z]+)*$" } }, { "\"cat\"", "\"dogs are fun\"" },
                   { "\"cow\"", "\"cat \"" });
    expect_accepts({ { "type", "string" }, { "pattern", "^a\\.b.c\\\"$" } }, { "\"a.bxc\\\"\"" }, { "\"axbxc\\\"\"", "\"a.b\\nc\\\"\"" });
    expect_accepts({ { "type", "string" }, { "pattern", "^[^a-c]+$" } }, { "\"xyz\"" }, { "\"xaz\"", "\"\"" });
    EXPECT_NE(error_of({ { "type", "string" }, { "pattern", "^(a)\\1$" } }).find("back-references"), std::string::npos);
    EXPECT_NE(error_of({ { "type", "string" }, { "pattern", "^(?=a)$" } }).find("lookarounds"), std::string::npos);
    EXPECT_NE(error_of({ { "type", "string" }, { "pattern", "^(ab$" } }).find("unclosed '('"), std::string::npos);
    // found by fuzz-json-schema: {6,4} became a GBNF repetition the grammar parser refuses
    EXPECT_NE(error_of({ { "type", "string" }, { "pattern", "^[a-f]{6,4}$" } }).find("needs min <= max"), std::string::npos);
    EXPECT_NE(error_of({ { "type", "string" }, { "pattern", "^a{1,2,3}$" } }).find("bad repetition"), std::string::npos);
    // found by fuzz-json-schema: prefixItems holding a string was indexed as an array
    EXPECT_NE(error_of({ { "type", "array" }, { "prefixItems", "object" } }).find("must be an array"), std::string::npos);
}

TEST(JsonSchema, IntegerRanges) {
    expect_accepts({ { "type", "integer" }, { "minimum", 0 }, { "maximum", 150 } }, { "0", "7", "99", "100", "150" },
                   { "-1", "151", "200", "1000", "007" });
    expect_accepts({ { "type", "integer" }, { "minimum", -20 }, { "maximum", -3 } }, { "-20", "-3", "-15" }, { "-2", "-21", "0", "3" });
    expect_accepts({ { "type", "integer" }, { "minimum", 15 } }, { "15", "99", "100", "123456" }, { "14", "0", "-1" });
    expect_accepts({ { "type", "integer" }, { "exclusiveMaximum", 10 } }, { "9", "0", "-100000" }, { "10", "11" });
    expect_accepts({ { "type", "integer" }, { "exclusiveMinimum", -1 }, { "maximum", 1 } }, { "0", "1" }, { "-1", "2" });
    EXPECT_NE(error_of({ { "type", "number" }, { "minimum", 0.5 } }).find("'minimum' on a non-integer number"), std::string::npos);
    EXPECT_NE(error_of({ { "type", "integer" }, { "minimum", 5 }, { "maximum", 2 } }).find("empty"), std::string::npos);
}

TEST(JsonSchema, RefsAndDefs) {
    const json tree = json::parse(R"({
        "$defs": {
            "node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                     "required": ["v"], "additionalProperties": false},
            "color": {"enum": ["red", "green"]}
        },
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}, "c": {"$ref": "#/$defs/color"}},
        "required": ["root", "c"],
        "additionalProperties": false
    })");
    expect_accepts(tree, { "{\"root\":{\"v\":1},\"c\":\"red\"}", "{\"root\":{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]}]},\"c\":\"green\"}" },
                   { "{\"root\":{\"v\":1,\"kids\":[{}]},\"c\":\"red\"}", "{\"root\":{\"v\":1},\"c\":\"blue\"}" });
    EXPECT_NE(error_of({ { "$ref", "other.json#/x" } }).find("outside this schema"), std::string::npos);
    EXPECT_NE(error_of({ { "$ref", "#/$defs/missing" } }).find("does not resolve"), std::string::npos);
    EXPECT_NE(error_of({ { "type", "object" }, { "properties", { { "a", 5 } } } }).find("#/properties/a"), std::string::npos);
    EXPECT_NE(error_of({ { "type", "tuple" } }).find("unknown type 'tuple'"), std::string::npos);
}

// A random-weight model under a schema writes documents that a hand check of the schema accepts.
TEST(JsonSchema, RandomModelOutputsValidate) {
    const std::string path = kiln_test::shared_path("models/synth-qwen3-Q8_0.gguf");
    ASSERT_TRUE(kiln_test::file_exists(path)) << path << " not present";
    const json schema = json::parse(R"({
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "maximum": 999},
            "kind": {"enum": ["a", "b", "c"]},
            "code": {"type": "string", "pattern": "^[A-Z]{3}[0-9]$"},
            "vals": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}
        },
        "required": ["id", "kind", "code", "vals"],
        "additionalProperties": false
    })");
    const std::string grammar = grammar_of(schema);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(path.c_str(), llama_model_default_params());
    ASSERT_NE(model, nullptr);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = cp.n_threads_batch = 2;
    llama_context * ctx = llama_init_from_model(model, cp);
    ASSERT_NE(ctx, nullptr);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    for (uint32_t seed = 1; seed <= 5; ++seed) {
        llama_memory_clear(ctx);
        llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
        llama_sampler_chain_add(chain, llama_sampler_init_temp(1.2f));
        llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
        llama_sampler_chain_add(chain, llama_sampler_init_grammar(vocab, grammar.c_str(), "root"));
        std::vector<llama_token> toks = common_tokenize(vocab, "json:", false, true);
        ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(toks.data(), (int32_t) toks.size())), 0);
        std::string out;
        bool ended = false;
        for (int i = 0; i < 400 && !ended; ++i) {
            llama_token t = llama_sampler_sample(chain, ctx, -1);
            ASSERT_NE(t, LLAMA_TOKEN_NULL);
            if (llama_vocab_is_eog(vocab, t)) {
                ended = true;
                break;
            }
            out += common_token_to_piece(vocab, t, true);
            ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(&t, 1)), 0);
        }
        llama_sampler_free(chain);
        EXPECT_TRUE(ended) << out;
        const json doc = json::parse(out, nullptr, false);
        ASSERT_FALSE(doc.is_discarded()) << out;
        ASSERT_TRUE(doc.is_object()) << out;
        EXPECT_EQ(doc.size(), 4u) << out;
        ASSERT_TRUE(doc["id"].is_number_integer()) << out;
        EXPECT_GE(doc["id"].get<int>(), 1);
        EXPECT_LE(doc["id"].get<int>(), 999);
        EXPECT_TRUE(doc["kind"] == "a" || doc["kind"] == "b" || doc["kind"] == "c") << out;
        ASSERT_TRUE(doc["code"].is_string()) << out;
        EXPECT_TRUE(std::regex_match(doc["code"].get<std::string>(), std::regex("[A-Z]{3}[0-9]"))) << out;
        ASSERT_TRUE(doc["vals"].is_array()) << out;
        EXPECT_LE(doc["vals"].size(), 3u);
        for (const auto & v : doc["vals"]) EXPECT_TRUE(v.is_boolean()) << out;
    }
    llama_free(ctx);
    llama_model_free(model);
}
