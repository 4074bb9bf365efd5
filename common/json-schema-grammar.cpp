// JSON Schema -> GBNF. Each schema node becomes a rule that matches one JSON value followed by
// optional whitespace ("space"); shared building blocks (string characters, numbers, generic
// values) are added once, on first use. Rule names come from property and $defs names, so the
// grammar is readable when a user asks to see it.
#include "json-schema-grammar.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

using json = nlohmann::ordered_json;

std::string gbnf_literal(const std::string & text) {
    std::string out = "\"";
    for (const char ch : text) {
        const unsigned char c = (unsigned char) ch;
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\x%02x", (unsigned) c);
                    out += buf;
                } else {
                    out += ch;
                }
        }
    }
    return out + "\"";
}

namespace {

const std::map<std::string, std::string> & primitive_rules() {
    static const std::map<std::string, std::string> rules = {
        { "space", "| \" \" | \"\\n\" [ \\t]{0,20}" },
        { "boolean", "(\"true\" | \"false\") space" },
        { "null", "\"null\" space" },
        { "integral-part", "[0] | [1-9] [0-9]{0,15}" },
        { "decimal-part", "[0-9]{1,16}" },
        { "integer", "(\"-\"? integral-part) space" },
        { "number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space" },
        { "char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})" },
        { "string", "\"\\\"\" char* \"\\\"\" space" },
        { "value", "object | array | string | number | boolean | null" },
        { "object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space" },
        { "array", "\"[\" space ( value (\",\" space value)* )? \"]\" space" },
        { "date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )" },
        { "time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? "
                  "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )" },
        { "date-time", "date \"T\" time" },
        { "uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}" },
    };
    return rules;
}

// The rules a primitive refers to.
std::vector<std::string> primitive_deps(const std::string & name) {
    if (name == "integer") return { "integral-part", "space" };
    if (name == "number") return { "integral-part", "decimal-part", "space" };
    if (name == "boolean" || name == "null") return { "space" };
    if (name == "string") return { "char", "space" };
    if (name == "value") return { "object", "array", "string", "number", "boolean", "null" };
    if (name == "object" || name == "array") return { "value", "string", "space" };
    if (name == "date-time") return { "date", "time" };
    return {};
}

// ---- integer ranges -----------------------------------------------------------------------------

std::string digit_class(int lo, int hi) {
    if (lo == hi) return "[" + std::to_string(lo) + "]";
    return "[" + std::to_string(lo) + "-" + std::to_string(hi) + "]";
}

// Digit strings of one length n (leading zeros allowed) between a and b, as GBNF.
std::string same_length(const std::string & a, const std::string & b) {
    if (a.empty()) return "\"\"";
    const int a0 = a[0] - '0', b0 = b[0] - '0';
    const std::string ra = a.substr(1), rb = b.substr(1);
    if (a.size() == 1) return digit_class(a0, b0);
    if (a0 == b0) return digit_class(a0, a0) + " " + same_length(ra, rb);
    std::vector<std::string> alts;
    const std::string nines(ra.size(), '9'), zeros(ra.size(), '0');
    int mid_lo = a0, mid_hi = b0;
    if (ra != zeros) {
        alts.push_back(digit_class(a0, a0) + " " + same_length(ra, nines));
        mid_lo = a0 + 1;
    }
    if (rb != nines) {
        mid_hi = b0 - 1;
    }
    if (mid_lo <= mid_hi) alts.push_back(digit_class(mid_lo, mid_hi) + " [0-9]{" + std::to_string(ra.size()) + "}");
    if (rb != nines) alts.push_back(digit_class(b0, b0) + " " + same_length(zeros, rb));
    std::string out;
    for (const auto & s : alts) out += (out.empty() ? "" : " | ") + s;
    return alts.size() > 1 ? "(" + out + ")" : out;
}

// Non-negative integers in [lo, hi] without leading zeros; hi < 0: unbounded.
std::string nonneg_range(long long lo, long long hi) {
    std::vector<std::string> alts;
    std::string slo = std::to_string(lo);
    const size_t max_len = hi < 0 ? 16 : std::to_string(hi).size();
    for (size_t len = slo.size(); len <= max_len; ++len) {
        const std::string first = len == slo.size() ? slo : "1" + std::string(len - 1, '0');
        const std::string last = hi >= 0 && len == max_len ? std::to_string(hi) : std::string(len, '9');
        if (len == 1 || first[0] != '0') alts.push_back(same_length(first, last));
        if (hi < 0 && len == slo.size() + 1) {
            // everything longer: a non-zero digit and up to 15 more (what "integer" allows)
            alts.push_back("[1-9] [0-9]{" + std::to_string(len - 1) + "," + std::to_string(15) + "}");
            break;
        }
    }
    std::string out;
    for (const auto & s : alts) out += (out.empty() ? "" : " | ") + s;
    return "(" + out + ")";
}

// Integers in [lo, hi]; has_lo / has_hi false: unbounded on that side.
std::string integer_range(bool has_lo, long long lo, bool has_hi, long long hi) {
    std::vector<std::string> alts;
    const bool neg_part = !has_lo || lo < 0;
    const bool pos_part = !has_hi || hi >= 0;
    if (neg_part) {
        // -m for m in [max(1, -hi), -lo]
        const long long mlo = has_hi && hi < 0 ? -hi : 1;
        const long long mhi = has_lo ? -lo : -1;
        if (mhi < 0 || mlo <= mhi) alts.push_back("\"-\" " + nonneg_range(mlo, mhi));
    }
    if (pos_part) alts.push_back(nonneg_range(has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1));
    std::string out;
    for (const auto & s : alts) out += (out.empty() ? "" : " | ") + s;
    return "(" + out + ")";
}

// ---- the converter ------------------------------------------------------------------------------

class converter {
public:
    // Rules for one schema, whose $refs resolve within it; returns the rule matching one value.
    std::string add(const json & schema, const std::string & hint) {
        root_ = &schema;
        ref_names_.clear();
        const std::string expr = visit(schema, hint, "#");
        root_ = nullptr;
        const bool is_name = std::all_of(expr.begin(), expr.end(), [](char c) { return std::isalnum((unsigned char) c) || c == '-'; });
        return is_name ? expr : add_rule(hint, expr);
    }

    void set_rule(const std::string & name, const std::string & body) { rules_[name] = body; }

    std::string text() const {
        std::string out;
        auto root = rules_.find("root");
        if (root != rules_.end()) out += "root ::= " + root->second + "\n";
        for (const auto & [name, rule] : rules_) {
            if (name != "root") out += name + " ::= " + rule + "\n";
        }
        return out;
    }

    // A primitive's rule ("space", "string", ...), added with what it uses.
    std::string primitive(const std::string & name) {
        if (!rules_.count(name)) {
            rules_[name] = primitive_rules().at(name);
            for (const auto & d : primitive_deps(name)) primitive(d);
        }
        return name;
    }

    // A rule with this body under a name derived from hint; identical bodies share one rule.
    std::string add_rule(const std::string & hint, const std::string & body) {
        const std::string base = sanitize(hint);
        std::string name = base;
        for (int i = 1;; ++i) {
            auto it = rules_.find(name);
            if (it == rules_.end()) {
                rules_[name] = body;
                return name;
            }
            if (it->second == body) return name;
            name = base + "-" + std::to_string(i);
        }
    }

private:
    const json * root_ = nullptr;
    std::map<std::string, std::string> rules_{ { "root", "\"\"" } };   // root: reserved for the caller
    std::map<std::string, std::string> ref_names_;   // "$ref" -> rule name

    [[noreturn]] static void fail(const std::string & path, const std::string & msg) {
        throw std::invalid_argument("schema at " + path + ": " + msg);
    }

    static std::string sanitize(const std::string & hint) {
        std::string out;
        for (char c : hint) out += std::isalnum((unsigned char) c) ? c : '-';
        if (out.empty()) out = "r";
        return out;
    }

    const json & resolve(const std::string & ref, const std::string & path) const {
        if (ref.empty() || ref[0] != '#') fail(path, "$ref '" + ref + "' points outside this schema (not supported)");
        try {
            const json::json_pointer ptr(ref.substr(1));
            return root_->at(ptr);
        } catch (const std::exception &) {
            fail(path, "$ref '" + ref + "' does not resolve");
        }
    }

    // Returns a GBNF expression matching one value of the schema followed by optional space.
    std::string visit(const json & s, const std::string & hint, const std::string & path) {
        if (s.is_boolean()) {
            if (!s.get<bool>()) fail(path, "the schema 'false' matches nothing");
            return primitive("value");
        }
        if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
        if (s.contains("$ref")) {
            if (!s["$ref"].is_string()) fail(path, "'$ref' must be a string");
            const std::string ref = s["$ref"].get<std::string>();
            auto it = ref_names_.find(ref);
            if (it != ref_names_.end()) return it->second;
            const std::string name = sanitize("ref" + ref.substr(ref.rfind('/') == std::string::npos ? 0 : ref.rfind('/')));
            std::string unique = name;
            for (int i = 1; rules_.count(unique); ++i) unique = name + "-" + std::to_string(i);
            ref_names_[ref] = unique;
            rules_[unique] = "\"\"";   // placeholder: recursive references see the name
            rules_[unique] = visit(resolve(ref, path), unique, ref);
            return unique;
        }
        if (s.contains("const")) return gbnf_literal(s["const"].dump()) + " " + primitive("space");
        if (s.contains("enum")) {
            if (!s["enum"].is_array() || s["enum"].empty()) fail(path, "'enum' must be a non-empty list");
            std::string alts;
            for (const auto & v : s["enum"]) alts += (alts.empty() ? "" : " | ") + gbnf_literal(v.dump());
            return "(" + alts + ") " + primitive("space");
        }
        for (const char * key : { "anyOf", "oneOf" }) {
            if (!s.contains(key)) continue;
            if (!s[key].is_array() || s[key].empty()) fail(path, std::string("'") + key + "' must be a non-empty list");
            std::string alts;
            for (size_t i = 0; i < s[key].size(); ++i) {
                const std::string sub = visit(s[key][i], hint + "-" + std::to_string(i), path + "/" + key + "/" + std::to_string(i));
                alts += (alts.empty() ? "" : " | ") + add_rule(hint + "-" + std::to_string(i), sub);
            }
            return "(" + alts + ")";
        }
        if (s.contains("allOf")) return visit(merge_all_of(s, path), hint, path + "/allOf");

        json type = s.contains("type") ? s["type"] : json();
        if (type.is_array()) {
            std::string alts;
            for (const auto & t : type) {
                if (!t.is_string()) fail(path, "'type' must be a string or a list of strings");
                json one = s;
                one["type"] = t;
                alts += (alts.empty() ? "" : " | ") + add_rule(hint + "-" + t.get<std::string>(), visit(one, hint, path));
            }
            return "(" + alts + ")";
        }
        if (type.is_null()) {
            // no type: infer it from the keywords present, else any value
            if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) type = "object";
            else if (s.contains("items") || s.contains("prefixItems")) type = "array";
            else return primitive("value");
        }
        if (!type.is_string()) fail(path, "'type' must be a string or a list of strings");
        const std::string t = type.get<std::string>();
        if (t == "object") return object_rule(s, hint, path);
        if (t == "array") return array_rule(s, hint, path);
        if (t == "string") return string_rule(s, hint, path);
        if (t == "integer") return integer_rule(s, path);
        if (t == "number") {
            for (const char * k : { "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf" }) {
                if (s.contains(k)) fail(path, std::string("'") + k + "' on a non-integer number is not supported");
            }
            return primitive("number");
        }
        if (t == "boolean") return primitive("boolean");
        if (t == "null") return primitive("null");
        fail(path, "unknown type '" + t + "'");
    }

    json merge_all_of(const json & s, const std::string & path) {
        if (!s["allOf"].is_array() || s["allOf"].empty()) fail(path, "'allOf' must be a non-empty list");
        json merged = { { "type", "object" }, { "properties", json::object() }, { "required", json::array() } };
        for (json part : s["allOf"]) {
            if (part.is_object() && part.contains("$ref")) part = resolve(part["$ref"].get<std::string>(), path);
            if (!part.is_object() || !(part.contains("properties") || part.value("type", json()) == "object")) {
                fail(path, "'allOf' is supported for object schemas only");
            }
            if (part.contains("properties")) {
                for (const auto & [k, v] : part["properties"].items()) merged["properties"][k] = v;
            }
            if (part.contains("required")) {
                for (const auto & r : part["required"]) merged["required"].push_back(r);
            }
            if (part.contains("additionalProperties")) merged["additionalProperties"] = part["additionalProperties"];
        }
        // keywords beside allOf apply too
        for (const auto & [k, v] : s.items()) {
            if (k == "properties") {
                for (const auto & [pk, pv] : v.items()) merged["properties"][pk] = pv;
            } else if (k == "required") {
                for (const auto & r : v) merged["required"].push_back(r);
            } else if (k != "allOf" && k != "type") {
                merged[k] = v;
            }
        }
        return merged;
    }

    std::string object_rule(const json & s, const std::string & hint, const std::string & path) {
        const json props = s.contains("properties") ? s["properties"] : json::object();
        if (!props.is_object()) fail(path, "'properties' must be an object");
        std::set<std::string> required;
        if (s.contains("required")) {
            if (!s["required"].is_array()) fail(path, "'required' must be a list");
            for (const auto & r : s["required"]) {
                if (!r.is_string()) fail(path, "'required' must list property names");
                required.insert(r.get<std::string>());
            }
        }
        std::vector<std::string> req_kv, opt_kv;
        std::vector<std::string> names;
        for (const auto & [name, sub] : props.items()) {
            names.push_back(name);
            const std::string value = visit(sub, hint + "-" + name, path + "/properties/" + name);
            const std::string kv = add_rule(hint + "-" + name + "-kv", gbnf_literal(json(name).dump()) + " space \":\" space " + value);
            (required.count(name) ? req_kv : opt_kv).push_back(kv);
        }
        primitive("space");
        for (const auto & r : required) {
            if (!props.contains(r)) fail(path, "required property '" + r + "' has no schema in 'properties'");
        }
        // additional properties: any key not named in "properties", with the given schema
        const json add = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
        if (!(add.is_boolean() && !add.get<bool>())) {
            const std::string value = add.is_boolean() ? primitive("value") : visit(add, hint + "-additional", path + "/additionalProperties");
            const std::string key = other_key_rule(names, hint);
            const std::string kv = add_rule(hint + "-additional-kv", key + " \":\" space " + value);
            opt_kv.push_back(add_rule(hint + "-additional-kvs", kv + " (\",\" space " + kv + ")*"));
        }
        std::string body = "\"{\" space ";
        for (size_t i = 0; i < req_kv.size(); ++i) body += (i ? "\",\" space " : "") + req_kv[i] + " ";
        if (!opt_kv.empty()) {
            if (!req_kv.empty()) {
                for (const auto & o : opt_kv) body += "(\",\" space " + o + ")? ";
            } else {
                // the first optional property present has no comma before it
                std::string tail;   // ("," o_{i+1})? ... ("," o_n)?
                std::vector<std::string> firsts;
                for (size_t i = opt_kv.size(); i-- > 0;) {
                    firsts.push_back(opt_kv[i] + (tail.empty() ? "" : " " + tail));
                    tail = "(\",\" space " + opt_kv[i] + ")? " + tail;
                }
                std::string alts;
                for (auto it = firsts.rbegin(); it != firsts.rend(); ++it) alts += (alts.empty() ? "" : " | ") + *it;
                body += "(" + add_rule(hint + "-props", alts) + ")? ";
            }
        }
        body += "\"}\" space";
        return add_rule(hint, body);
    }

    // A quoted key that is none of the names (so an additional property cannot repeat a declared
    // one with a value of the wrong type). Built from the trie of the names.
    std::string other_key_rule(const std::vector<std::string> & names, const std::string & hint) {
        primitive("char");
        primitive("space");
        const bool ascii = std::all_of(names.begin(), names.end(), [](const std::string & n) {
            return std::all_of(n.begin(), n.end(), [](char c) { return (unsigned char) c >= 0x20 && (unsigned char) c < 0x7f; });
        });
        // (non-ASCII names: any key; a duplicate of a declared name is then possible)
        if (names.empty() || !ascii) return add_rule("key", "\"\\\"\" char* \"\\\"\" space");
        struct node {
            std::map<char, size_t> next;
            bool end = false;
        };
        std::vector<node> trie(1);
        for (const auto & n : names) {
            size_t cur = 0;
            for (char c : n) {
                auto it = trie[cur].next.find(c);
                if (it == trie[cur].next.end()) {
                    trie.push_back({});
                    it = trie[cur].next.emplace(c, trie.size() - 1).first;
                }
                cur = it->second;
            }
            trie[cur].end = true;
        }
        // not(n): the rest of a key that has matched the path to n so far and is not a name
        std::vector<std::string> rule_of(trie.size());
        const std::string base = sanitize(hint) + "-other-key";
        for (size_t n = trie.size(); n-- > 0;) rule_of[n] = base + "-" + std::to_string(n);
        for (size_t n = 0; n < trie.size(); ++n) {
            std::string alts;
            std::string excluded;
            for (const auto & [c, child] : trie[n].next) {
                alts += (alts.empty() ? "" : " | ") + gbnf_literal(std::string(1, c)) + " " + rule_of[child];
                char buf[16];
                std::snprintf(buf, sizeof buf, "\\x%02x", (unsigned) (unsigned char) c);
                excluded += buf;
            }
            // a different character (or an escape), then anything
            alts += std::string(alts.empty() ? "" : " | ") + "([^" + excluded + "\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})) char*";
            if (!trie[n].end) alts += " | \"\"";   // the key may end here: not a name
            rules_[rule_of[n]] = alts;
        }
        return add_rule(hint + "-other-key", "\"\\\"\" " + rule_of[0] + " \"\\\"\" space");
    }

    static long long get_count(const json & s, const char * key, const std::string & path, long long def) {
        if (!s.contains(key)) return def;
        if (!s[key].is_number_integer() || s[key].get<long long>() < 0) fail(path, std::string("'") + key + "' must be a non-negative integer");
        return s[key].get<long long>();
    }

    static std::string repetition(const std::string & item, long long lo, long long hi) {
        if (hi == 0) return "";
        if (lo == 0 && hi < 0) return "(" + item + ")*";
        return "(" + item + "){" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(hi)) + "}";
    }

    std::string array_rule(const json & s, const std::string & hint, const std::string & path) {
        primitive("space");
        const long long lo = get_count(s, "minItems", path, 0);
        const long long hi = get_count(s, "maxItems", path, -1);
        if (hi >= 0 && hi < lo) fail(path, "'maxItems' is below 'minItems'");
        if (s.contains("prefixItems") || (s.contains("items") && s["items"].is_array())) {
            const json & tuple = s.contains("prefixItems") ? s["prefixItems"] : s["items"];
            if (!tuple.is_array()) fail(path, "'prefixItems' must be an array of schemas");
            std::string body = "\"[\" space ";
            for (size_t i = 0; i < tuple.size(); ++i) {
                body += (i ? "\",\" space " : "") + visit(tuple[i], hint + "-" + std::to_string(i), path + "/prefixItems/" + std::to_string(i)) + " ";
            }
            return add_rule(hint, body + "\"]\" space");
        }
        const std::string item = s.contains("items") ? visit(s["items"], hint + "-item", path + "/items") : primitive("value");
        const std::string item_rule = add_rule(hint + "-item", item);
        std::string body = "\"[\" space ";
        if (hi != 0) {
            const std::string rest = repetition("\",\" space " + item_rule, lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
            const std::string list = item_rule + (rest.empty() ? "" : " " + rest);
            body += lo == 0 ? "(" + list + ")? " : list + " ";
        }
        return add_rule(hint, body + "\"]\" space");
    }

    std::string string_rule(const json & s, const std::string & hint, const std::string & path) {
        primitive("space");
        if (s.contains("pattern")) {
            if (!s["pattern"].is_string()) fail(path, "'pattern' must be a string");
            std::string expr;
            try {
                expr = json_regex_to_gbnf(s["pattern"].get<std::string>());
            } catch (const std::invalid_argument & e) {
                fail(path, e.what());
            }
            return add_rule(hint, "\"\\\"\" " + expr + " \"\\\"\" space");
        }
        if (s.contains("format") && s["format"].is_string()) {
            const std::string f = s["format"].get<std::string>();
            if (f == "date" || f == "time" || f == "date-time" || f == "uuid") {
                return add_rule(hint, "\"\\\"\" " + primitive(f) + " \"\\\"\" space");
            }
        }
        const long long lo = get_count(s, "minLength", path, 0);
        const long long hi = get_count(s, "maxLength", path, -1);
        if (hi >= 0 && hi < lo) fail(path, "'maxLength' is below 'minLength'");
        if (lo == 0 && hi < 0) return primitive("string");
        primitive("char");
        const std::string reps = hi == 0 ? "" : "char{" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(hi)) + "}";
        return add_rule(hint, "\"\\\"\" " + reps + " \"\\\"\" space");
    }

    std::string integer_rule(const json & s, const std::string & path) {
        bool has_lo = false, has_hi = false;
        long long lo = 0, hi = 0;
        auto bound = [&](const char * key, bool exclusive, bool lower) {
            if (!s.contains(key)) return;
            const json & v = s[key];
            if (v.is_boolean()) return;   // draft-04 style exclusive flags are handled with the bound
            if (!v.is_number()) fail(path, std::string("'") + key + "' must be a number");
            const double x = v.get<double>();
            if (std::fabs(x) > 1e15) fail(path, std::string("'") + key + "' is too large");
            long long b = lower ? (long long) std::ceil(x) : (long long) std::floor(x);
            if (exclusive && (double) b == x) b += lower ? 1 : -1;
            if (lower) {
                lo = has_lo ? std::max(lo, b) : b;
                has_lo = true;
            } else {
                hi = has_hi ? std::min(hi, b) : b;
                has_hi = true;
            }
        };
        bound("minimum", s.value("exclusiveMinimum", json(false)) == json(true), true);
        bound("maximum", s.value("exclusiveMaximum", json(false)) == json(true), false);
        bound("exclusiveMinimum", true, true);
        bound("exclusiveMaximum", true, false);
        if (s.contains("multipleOf")) fail(path, "'multipleOf' is not supported");
        if (!has_lo && !has_hi) return primitive("integer");
        if (has_lo && has_hi && lo > hi) fail(path, "the integer range is empty");
        return add_rule("integer-" + std::string(has_lo ? std::to_string(lo) : "") + "-" + (has_hi ? std::to_string(hi) : ""),
                        integer_range(has_lo, lo, has_hi, hi) + " " + primitive("space"));
    }
};

} // namespace

struct json_schema_grammar_builder::impl {
    converter c;
};

json_schema_grammar_builder::json_schema_grammar_builder() : impl_(std::make_unique<impl>()) {}
json_schema_grammar_builder::~json_schema_grammar_builder() = default;

std::string json_schema_grammar_builder::add(const json & schema, const std::string & name_hint) {
    return impl_->c.add(schema, name_hint);
}

std::string json_schema_grammar_builder::primitive(const std::string & name) { return impl_->c.primitive(name); }

std::string json_schema_grammar_builder::add_rule(const std::string & name_hint, const std::string & body) {
    return impl_->c.add_rule(name_hint, body);
}

void json_schema_grammar_builder::set_root(const std::string & body) { impl_->c.set_rule("root", body); }

std::string json_schema_grammar_builder::text() const { return impl_->c.text(); }

std::string json_schema_to_grammar(const json & schema) {
    json_schema_grammar_builder b;
    try {
        b.set_root(b.add(schema, "root"));
    } catch (const nlohmann::json::exception & e) {
        // a keyword holding a value of the wrong JSON type (a string where an array belongs, ...):
        // the schema is malformed, which callers report as such (HTTP 400), never as a crash
        throw std::invalid_argument(std::string("schema: a keyword has a value of the wrong type (") + e.what() + ")");
    }
    return b.text();
}
