// GBNF text -> rules. A recursive-descent parser over the bytes of the grammar; repetition
// operators are rewritten into generated rules (X* becomes R ::= X R | empty) so the matcher
// only ever sees sequences, alternatives and rule references. Errors carry the byte offset and
// are reported as line:column so a user can find them in a grammar file.
#include "llama-grammar.h"

#include <map>
#include <stdexcept>

namespace llama_gbnf {

namespace {

struct parse_failure {
    size_t pos;
    std::string msg;
};

bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class parser {
public:
    explicit parser(const std::string & text) : s_(text) {}

    void run(grammar & g) {
        size_t pos = skip_space(0, true);
        while (pos < s_.size()) {
            pos = parse_rule(pos);
            pos = skip_space(pos, true);
        }
        finish(g);
    }

    std::map<std::string, uint32_t> ids;

private:
    const std::string & s_;
    std::vector<std::vector<elem>> rules_;
    std::vector<std::string> names_;
    std::vector<size_t> first_use_;   // where each rule was first referenced (for "undefined")
    std::vector<bool> defined_;
    size_t repeated_ = 0;   // elements added by expanding repetitions

    [[noreturn]] void fail(size_t pos, const std::string & msg) const { throw parse_failure{ pos, msg }; }

    char at(size_t pos) const { return pos < s_.size() ? s_[pos] : '\0'; }

    size_t skip_space(size_t pos, bool newline_ok) const {
        while (pos < s_.size()) {
            const char c = s_[pos];
            if (c == ' ' || c == '\t') {
                ++pos;
            } else if (c == '#') {
                while (pos < s_.size() && s_[pos] != '\n' && s_[pos] != '\r') ++pos;
            } else if (newline_ok && (c == '\n' || c == '\r')) {
                ++pos;
            } else {
                break;
            }
        }
        return pos;
    }

    uint32_t symbol(const std::string & name, size_t pos) {
        auto it = ids.find(name);
        if (it != ids.end()) return it->second;
        const uint32_t id = (uint32_t) rules_.size();
        ids.emplace(name, id);
        rules_.emplace_back();
        names_.push_back(name);
        first_use_.push_back(pos);
        defined_.push_back(false);
        return id;
    }

    uint32_t generated(const std::string & base) {
        const uint32_t id = (uint32_t) rules_.size();
        std::string name = base + "_" + std::to_string(id);
        ids.emplace(name, id);
        rules_.emplace_back();
        names_.push_back(name);
        first_use_.push_back(0);
        defined_.push_back(true);
        return id;
    }

    size_t parse_name(size_t pos, std::string & name) const {
        const size_t start = pos;
        while (is_word_char(at(pos))) ++pos;
        if (pos == start) fail(start, "expecting a rule name");
        name = s_.substr(start, pos - start);
        return pos;
    }

    size_t parse_rule(size_t pos) {
        std::string name;
        const size_t name_pos = pos;
        pos = parse_name(pos, name);
        pos = skip_space(pos, false);
        if (s_.compare(pos, 3, "::=") != 0) fail(pos, "expecting '::=' after rule name '" + name + "'");
        pos = skip_space(pos + 3, true);
        const uint32_t id = symbol(name, name_pos);
        if (defined_[id]) fail(name_pos, "rule '" + name + "' is defined twice");
        defined_[id] = true;
        std::vector<elem> body;
        pos = parse_alternatives(pos, name, body, false);
        body.push_back({ elem_type::end, 0 });
        rules_[id] = std::move(body);
        if (pos < s_.size()) {
            if (s_[pos] == '\r') pos += at(pos + 1) == '\n' ? 2 : 1;
            else if (s_[pos] == '\n') ++pos;
            else fail(pos, std::string("unexpected '") + s_[pos] + "' (expecting a newline or the end of the rule)");
        }
        return pos;
    }

    size_t parse_alternatives(size_t pos, const std::string & rule_name, std::vector<elem> & out, bool nested) {
        pos = parse_sequence(pos, rule_name, out, nested);
        while (at(pos) == '|') {
            out.push_back({ elem_type::alt, 0 });
            pos = skip_space(pos + 1, true);
            pos = parse_sequence(pos, rule_name, out, nested);
        }
        return pos;
    }

    // One code point of a literal or class, with escapes; pos is advanced past it.
    uint32_t parse_char(size_t & pos) {
        if (pos >= s_.size()) fail(pos, "unexpected end of input");
        const unsigned char c = (unsigned char) s_[pos];
        if (c == '\\') {
            const char e = at(pos + 1);
            int hex_digits = 0;
            switch (e) {
                case 'x': hex_digits = 2; break;
                case 'u': hex_digits = 4; break;
                case 'U': hex_digits = 8; break;
                case 't': pos += 2; return '\t';
                case 'r': pos += 2; return '\r';
                case 'n': pos += 2; return '\n';
                case '\\': case '"': case '[': case ']': case '-': case '^': pos += 2; return (uint32_t) e;
                default: fail(pos, std::string("unknown escape '\\") + (e ? std::string(1, e) : std::string()) + "'");
            }
            uint32_t v = 0;
            size_t p = pos + 2;
            for (int i = 0; i < hex_digits; ++i, ++p) {
                const char h = at(p);
                uint32_t d;
                if (h >= '0' && h <= '9') d = (uint32_t) (h - '0');
                else if (h >= 'a' && h <= 'f') d = (uint32_t) (h - 'a' + 10);
                else if (h >= 'A' && h <= 'F') d = (uint32_t) (h - 'A' + 10);
                else fail(p, "expecting " + std::to_string(hex_digits) + " hex digits after '\\" + std::string(1, e) + "'");
                v = v * 16 + d;
            }
            pos = p;
            return v;
        }
        // UTF-8 sequence in the grammar text itself
        int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (len == 0) fail(pos, "invalid UTF-8 in the grammar");
        uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
        for (int i = 1; i < len; ++i) {
            const unsigned char cc = (unsigned char) at(pos + (size_t) i);
            if ((cc >> 6) != 0x2) fail(pos, "invalid UTF-8 in the grammar");
            v = (v << 6) | (cc & 0x3f);
        }
        pos += (size_t) len;
        return v;
    }

    // Replace out[start..] (one item) by its repetition between lo and hi (hi < 0: unbounded).
    void repeat(std::vector<elem> & out, size_t start, int lo, int hi, const std::string & rule_name, size_t pos) {
        const std::vector<elem> item(out.begin() + (long) start, out.end());
        // copies of the item (and a rule of three more elements per optional one): the only place
        // where the rules can grow faster than the text, so the size is bounded here
        const size_t copies = (size_t) lo + (hi < 0 ? 1 : (size_t) (hi - lo));
        repeated_ += copies * (item.size() + 3);
        if (repeated_ > k_max_grammar_elements) {
            fail(pos, "repetitions make the grammar too large (more than " + std::to_string(k_max_grammar_elements) +
                          " elements once expanded)");
        }
        out.resize(start);
        for (int i = 0; i < lo; ++i) out.insert(out.end(), item.begin(), item.end());
        if (hi == lo) return;
        if (hi < 0) {
            // R ::= item R | empty
            const uint32_t r = generated(rule_name);
            std::vector<elem> body = item;
            body.push_back({ elem_type::rule_ref, r });
            body.push_back({ elem_type::alt, 0 });
            body.push_back({ elem_type::end, 0 });
            rules_[r] = std::move(body);
            out.push_back({ elem_type::rule_ref, r });
            return;
        }
        // (hi - lo) nested optionals: O1 ::= item | empty, Ok ::= item O(k-1) | empty
        uint32_t prev = 0;
        for (int k = 1; k <= hi - lo; ++k) {
            const uint32_t r = generated(rule_name);
            std::vector<elem> body = item;
            if (k > 1) body.push_back({ elem_type::rule_ref, prev });
            body.push_back({ elem_type::alt, 0 });
            body.push_back({ elem_type::end, 0 });
            rules_[r] = std::move(body);
            prev = r;
        }
        out.push_back({ elem_type::rule_ref, prev });
    }

    size_t parse_int(size_t pos, int & v) const {
        const size_t start = pos;
        long long x = 0;
        while (at(pos) >= '0' && at(pos) <= '9') {
            x = x * 10 + (at(pos) - '0');
            if (x > 100000) fail(start, "repetition count too large (at most 100000)");
            ++pos;
        }
        if (pos == start) fail(pos, "expecting a number");
        v = (int) x;
        return pos;
    }

    size_t parse_sequence(size_t pos, const std::string & rule_name, std::vector<elem> & out, bool nested) {
        size_t last_start = out.size();
        bool have_item = false;
        while (pos < s_.size()) {
            const char c = s_[pos];
            if (c == '"') {
                last_start = out.size();
                const size_t open = pos++;
                while (at(pos) != '"') {
                    if (pos >= s_.size() || at(pos) == '\n') fail(open, "unterminated string literal");
                    out.push_back({ elem_type::chr, parse_char(pos) });
                }
                pos = skip_space(pos + 1, nested);
                // an empty literal matches nothing and cannot be repeated
                have_item = out.size() > last_start;
            } else if (c == '[') {
                last_start = out.size();
                const size_t open = pos++;
                elem_type first = elem_type::chr;
                if (at(pos) == '^') {
                    first = elem_type::chr_not;
                    ++pos;
                }
                bool empty = true;
                while (at(pos) != ']') {
                    if (pos >= s_.size()) fail(open, "unterminated character class");
                    const uint32_t lo = parse_char(pos);
                    out.push_back({ empty ? first : elem_type::chr_alt, lo });
                    empty = false;
                    if (at(pos) == '-' && at(pos + 1) != ']') {
                        ++pos;
                        if (pos >= s_.size()) fail(open, "unterminated character class");
                        const uint32_t hi = parse_char(pos);
                        if (hi < lo) fail(pos, "character range is reversed");
                        out.push_back({ elem_type::rng_upper, hi });
                    }
                }
                if (empty) fail(open, "empty character class");
                pos = skip_space(pos + 1, nested);
                have_item = true;
            } else if (is_word_char(c)) {
                last_start = out.size();
                std::string name;
                const size_t name_pos = pos;
                pos = parse_name(pos, name);
                out.push_back({ elem_type::rule_ref, symbol(name, name_pos) });
                pos = skip_space(pos, nested);
                have_item = true;
            } else if (c == '(') {
                last_start = out.size();
                const size_t open = pos;
                pos = skip_space(pos + 1, true);
                const uint32_t sub = generated(rule_name);
                std::vector<elem> body;
                pos = parse_alternatives(pos, rule_name, body, true);
                body.push_back({ elem_type::end, 0 });
                rules_[sub] = std::move(body);
                if (at(pos) != ')') fail(open, "unclosed '('");
                out.push_back({ elem_type::rule_ref, sub });
                pos = skip_space(pos + 1, nested);
                have_item = true;
            } else if (c == '.') {
                last_start = out.size();
                out.push_back({ elem_type::any, 0 });
                pos = skip_space(pos + 1, nested);
                have_item = true;
            } else if (c == '*' || c == '+' || c == '?') {
                if (!have_item) fail(pos, std::string("'") + c + "' needs an item before it");
                repeat(out, last_start, c == '+' ? 1 : 0, c == '?' ? 1 : -1, rule_name, pos);
                pos = skip_space(pos + 1, nested);
                have_item = false;
            } else if (c == '{') {
                if (!have_item) fail(pos, "'{' needs an item before it");
                const size_t open = pos;
                int lo = 0, hi = 0;
                pos = skip_space(pos + 1, nested);
                pos = parse_int(pos, lo);
                pos = skip_space(pos, nested);
                if (at(pos) == ',') {
                    pos = skip_space(pos + 1, nested);
                    if (at(pos) == '}') hi = -1;
                    else {
                        pos = parse_int(pos, hi);
                        if (hi < lo) fail(open, "repetition {m,n} needs m <= n");
                    }
                    pos = skip_space(pos, nested);
                } else {
                    hi = lo;
                }
                if (at(pos) != '}') fail(open, "expecting '}' to close the repetition");
                repeat(out, last_start, lo, hi, rule_name, open);
                pos = skip_space(pos + 1, nested);
                have_item = false;
            } else if (c == '<') {
                fail(pos, "token references (<...>) are not supported");
            } else {
                break;
            }
        }
        return pos;
    }

    // Rules that can match the empty string, by fixed point.
    std::vector<bool> nullable() const {
        std::vector<bool> n(rules_.size(), false);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < rules_.size(); ++r) {
                if (n[r]) continue;
                bool alt_nullable = true;
                for (const elem & e : rules_[r]) {
                    if (e.type == elem_type::alt || e.type == elem_type::end) {
                        if (alt_nullable) {
                            n[r] = true;
                            changed = true;
                            break;
                        }
                        alt_nullable = true;
                    } else if (e.type == elem_type::rule_ref) {
                        alt_nullable = alt_nullable && n[e.value];
                    } else if (e.type != elem_type::rng_upper && e.type != elem_type::chr_alt) {
                        alt_nullable = false;
                    }
                }
            }
        }
        return n;
    }

    // A rule reachable from itself without consuming input would make the matcher recurse forever.
    void check_left_recursion() const {
        const std::vector<bool> null = nullable();
        std::vector<std::vector<uint32_t>> left(rules_.size());
        for (size_t r = 0; r < rules_.size(); ++r) {
            bool at_left = true;
            for (const elem & e : rules_[r]) {
                if (e.type == elem_type::alt || e.type == elem_type::end) {
                    at_left = true;
                } else if (e.type == elem_type::rule_ref) {
                    if (at_left) left[r].push_back(e.value);
                    at_left = at_left && null[e.value];
                } else if (e.type != elem_type::rng_upper && e.type != elem_type::chr_alt) {
                    at_left = false;
                }
            }
        }
        std::vector<int> state(rules_.size(), 0);   // 0 new, 1 on the path, 2 done
        std::vector<std::pair<uint32_t, size_t>> path;
        for (uint32_t start = 0; start < rules_.size(); ++start) {
            if (state[start]) continue;
            path.push_back({ start, 0 });
            state[start] = 1;
            while (!path.empty()) {
                auto & [r, i] = path.back();
                if (i < left[r].size()) {
                    const uint32_t next = left[r][i++];
                    if (state[next] == 1) {
                        fail(first_use_[next], "left recursion in rule '" + display_name(next) + "'");
                    }
                    if (state[next] == 0) {
                        state[next] = 1;
                        path.push_back({ next, 0 });
                    }
                } else {
                    state[r] = 2;
                    path.pop_back();
                }
            }
        }
    }

    // Generated rules are reported by the rule they came from.
    std::string display_name(uint32_t id) const {
        const std::string & n = names_[id];
        const size_t us = n.rfind('_');
        if (us != std::string::npos && us + 1 < n.size() && std::to_string(id) == n.substr(us + 1)) return n.substr(0, us);
        return n;
    }

    void finish(grammar & g) {
        for (size_t r = 0; r < rules_.size(); ++r) {
            if (!defined_[r]) fail(first_use_[r], "undefined rule '" + names_[r] + "'");
        }
        check_left_recursion();
        g.rules = std::move(rules_);
        g.names = std::move(names_);
    }
};

std::string line_col(const std::string & text, size_t pos) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            col = 1;
        } else {
            ++col;
        }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

} // namespace

bool parse(const std::string & text, const std::string & root, grammar & out, std::string & err) {
    parser p(text);
    try {
        p.run(out);
    } catch (const parse_failure & f) {
        err = "grammar parse error at " + line_col(text, f.pos) + ": " + f.msg;
        return false;
    }
    auto it = p.ids.find(root);
    if (it == p.ids.end()) {
        err = "grammar has no rule named '" + root + "' (the start rule)";
        return false;
    }
    out.root = it->second;
    return true;
}

} // namespace llama_gbnf
