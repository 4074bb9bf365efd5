// JSON Schema -> GBNF on arbitrary JSON: a schema is either refused (std::invalid_argument naming
// the schema path) or becomes a grammar that the GBNF parser accepts.

#include "fuzz-support.h"

#include "json-schema-grammar.h"
#include "llama-grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const nlohmann::ordered_json schema = kiln_fuzz::parse_json_bounded(std::string(reinterpret_cast<const char *>(data), size));
    if (schema.is_discarded()) return 0;
    std::string gbnf;
    try {
        gbnf = json_schema_to_grammar(schema);
    } catch (const std::invalid_argument &) {
        return 0;
    } catch (const std::exception & e) {
        kiln_fuzz::finding("json-schema", std::string("not std::invalid_argument: ") + e.what());
    }
    llama_gbnf::grammar g;
    std::string err;
    if (!llama_gbnf::parse(gbnf, "root", g, err)) kiln_fuzz::finding("json-schema", "the grammar does not parse: " + err + "\n" + gbnf);
    return 0;
}
