// The "pattern" keyword's regular expressions as GBNF expressions. JSON Schema patterns are
// ECMA-262 regexes; the subset here is what schemas in the wild use for identifiers, codes and
// phone numbers: literals, escapes, classes, '.', groups, alternation and quantifiers. The
// generated expression describes the decoded characters; characters JSON must escape inside a
// string (quote, backslash, controls) are written in their escaped form so the output stays JSON.
#include "json-schema-grammar.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>
#include <vector>

namespace {

// A code point as a GBNF literal, in its JSON-escaped spelling when JSON requires one.
std::string literal_char(uint32_t cp) {
    char buf[16];
    switch (cp) {
        case '"': return "\"\\\\\\\"\"";    // the two characters \"
        case '\\': return "\"\\\\\\\\\"";   // the two characters \\ (one escaped backslash)
        case '\n': return "\"\\\\n\"";
        case '\r': return "\"\\\\r\"";
        case '\t': return "\"\\\\t\"";
        default: break;
    }
    if (cp < 0x20) {
        std::snprintf(buf, sizeof buf, "\"\\\\u%04x\"", (unsigned) cp);
        return buf;
    }
    std::snprintf(buf, sizeof buf, "[\\U%08x]", (unsigned) cp);
    return buf;
}

// A code point inside a GBNF character class.
std::string class_char(uint32_t cp) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\U%08x", (unsigned) cp);
    return buf;
}

class regex_translator {
public:
    explicit regex_translator(const std::string & p) : s_(p) {}

    std::string run() {
        size_t end = s_.size();
        if (pos_ < end && s_[pos_] == '^') ++pos_;
        // a final unescaped $ anchors the end; patterns are matched against the whole string
        if (end > pos_ && s_[end - 1] == '$' && !(end >= 2 && s_[end - 2] == '\\')) --end;
        limit_ = end;
        std::string out = alternation();
        if (pos_ != limit_) fail("unexpected ')'");
        return out.empty() ? "\"\"" : out;
    }

private:
    const std::string & s_;
    size_t pos_ = 0;
    size_t limit_ = 0;

    [[noreturn]] void fail(const std::string & msg) const {
        throw std::invalid_argument("pattern '" + s_ + "': " + msg + " (at offset " + std::to_string(pos_) + ")");
    }
    bool more() const { return pos_ < limit_; }
    char peek() const { return more() ? s_[pos_] : '\0'; }

    uint32_t utf8_char() {
        const unsigned char c = (unsigned char) s_[pos_];
        const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (len == 0 || pos_ + (size_t) len > limit_) fail("invalid UTF-8");
        uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
        for (int i = 1; i < len; ++i) v = (v << 6) | ((unsigned char) s_[pos_ + (size_t) i] & 0x3f);
        pos_ += (size_t) len;
        return v;
    }

    std::string alternation() {
        std::string out = sequence();
        bool alt = false;
        while (peek() == '|') {
            ++pos_;
            out += " | " + sequence();
            alt = true;
        }
        return alt ? "(" + out + ")" : out;
    }

    std::string sequence() {
        std::string out;
        while (more() && peek() != '|' && peek() != ')') {
            std::string a = atom();
            a += quantifier();
            if (!out.empty()) out += " ";
            out += a;
        }
        return out.empty() ? "\"\"" : out;
    }

    std::string quantifier() {
        std::string q;
        const char c = peek();
        if (c == '*' || c == '+' || c == '?') {
            q = std::string(1, c);
            ++pos_;
        } else if (c == '{') {
            const size_t close = s_.find('}', pos_);
            if (close == std::string::npos || close > limit_) fail("unclosed '{'");
            const std::string body = s_.substr(pos_ + 1, close - pos_ - 1);
            for (char b : body) {
                if (!(b >= '0' && b <= '9') && b != ',') fail("bad repetition '{" + body + "}'");
            }
            if (body.empty() || body[0] == ',') fail("bad repetition '{" + body + "}'");
            // {m,n} with m > n (or a second comma) is not a regular expression, and would become a
            // GBNF repetition the grammar parser refuses: the schema's author hears it here
            const size_t comma = body.find(',');
            if (comma != std::string::npos) {
                if (body.find(',', comma + 1) != std::string::npos) fail("bad repetition '{" + body + "}'");
                const std::string lo = body.substr(0, comma), hi = body.substr(comma + 1);
                if (lo.size() > 9 || hi.size() > 9) fail("repetition '{" + body + "}' is too large");
                if (!hi.empty() && std::stoul(lo) > std::stoul(hi)) fail("repetition '{" + body + "}' needs min <= max");
            } else if (body.size() > 9) {
                fail("repetition '{" + body + "}' is too large");
            }
            q = "{" + body + "}";
            pos_ = close + 1;
        } else {
            return q;
        }
        if (peek() == '?') ++pos_;   // lazy: the same language
        if (peek() == '*' || peek() == '+' || peek() == '{') fail("nested quantifier");
        return q;
    }

    // A class escape (\d \w \s and their negations) as class contents; empty if not one.
    static std::string class_escape(char e, bool * negated) {
        *negated = e == 'D' || e == 'W' || e == 'S';
        switch (e) {
            case 'd': case 'D': return "0-9";
            case 'w': case 'W': return "a-zA-Z0-9_";
            case 's': case 'S': return " \\t\\n\\r\\U0000000b\\U0000000c";
            default: return "";
        }
    }

    uint32_t escaped_char(char e) {
        switch (e) {
            case 'n': return '\n';
            case 'r': return '\r';
            case 't': return '\t';
            case 'f': return '\f';
            case 'v': return '\v';
            case '0': return 0;
            default: break;
        }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            fail(std::string("unsupported escape '\\") + e + "'");
        }
        return (uint32_t) (unsigned char) e;
    }

    // A negated class may not produce characters JSON must escape: they would need two or more
    // output characters each, so they are left out.
    static std::string negated_class(const std::string & body) { return "[^" + body + "\\\"\\\\\\x00-\\x1F]"; }

    std::string atom() {
        const char c = peek();
        if (c == '(') {
            ++pos_;
            if (peek() == '?') {
                if (pos_ + 1 < limit_ && s_[pos_ + 1] == ':') pos_ += 2;
                else fail("lookarounds and named groups are not supported");
            }
            std::string inner = alternation();
            if (peek() != ')') fail("unclosed '('");
            ++pos_;
            return "(" + inner + ")";
        }
        if (c == '[') return char_class();
        if (c == '.') {
            ++pos_;
            return negated_class("\\n\\r");
        }
        if (c == '*' || c == '+' || c == '?' || c == '{') fail(std::string("nothing to repeat before '") + c + "'");
        if (c == '^' || c == '$') fail("anchors inside the pattern are not supported");
        if (c == '\\') {
            if (pos_ + 1 >= limit_) fail("trailing backslash");
            const char e = s_[pos_ + 1];
            pos_ += 2;
            bool neg = false;
            const std::string cls = class_escape(e, &neg);
            // \s writes a plain space: tabs and newlines would need JSON escapes
            if (e == 's') return "[ ]";
            if (!cls.empty()) return neg ? negated_class(cls) : "[" + cls + "]";
            if (e >= '1' && e <= '9') fail("back-references are not supported");
            if (e == 'b' || e == 'B') fail("word boundaries are not supported");
            if (e == 'u' || e == 'x') {
                const int n = e == 'u' ? 4 : 2;
                if (pos_ + (size_t) n > limit_) fail("short hex escape");
                const uint32_t v = (uint32_t) std::stoul(s_.substr(pos_, (size_t) n), nullptr, 16);
                pos_ += (size_t) n;
                return literal_char(v);
            }
            return literal_char(escaped_char(e));
        }
        return literal_char(utf8_char());
    }

    uint32_t class_member() {
        if (peek() != '\\') return utf8_char();
        if (pos_ + 1 >= limit_) fail("trailing backslash");
        const char e = s_[pos_ + 1];
        pos_ += 2;
        return escaped_char(e);
    }

    std::string char_class() {
        ++pos_;   // '['
        bool negated = false;
        if (peek() == '^') {
            negated = true;
            ++pos_;
        }
        std::vector<std::pair<uint32_t, uint32_t>> ranges;
        bool first = true;
        while (more() && (peek() != ']' || first)) {
            first = false;
            if (peek() == '\\' && pos_ + 1 < limit_) {
                bool neg = false;
                const char e = s_[pos_ + 1];
                if (!class_escape(e, &neg).empty()) {
                    if (neg) fail("negated class escapes inside [...] are not supported");
                    pos_ += 2;
                    if (e == 'd') ranges.push_back({ '0', '9' });
                    if (e == 'w') ranges.insert(ranges.end(), { { 'a', 'z' }, { 'A', 'Z' }, { '0', '9' }, { '_', '_' } });
                    if (e == 's') ranges.insert(ranges.end(), { { ' ', ' ' }, { '\t', '\r' } });
                    continue;
                }
            }
            const uint32_t lo = class_member();
            uint32_t hi = lo;
            if (peek() == '-' && pos_ + 1 < limit_ && s_[pos_ + 1] != ']') {
                ++pos_;
                hi = class_member();
                if (hi < lo) fail("reversed range in a class");
            }
            ranges.push_back({ lo, hi });
        }
        if (peek() != ']') fail("unclosed '['");
        ++pos_;
        std::string body;
        for (const auto & [lo, hi] : ranges) body += class_char(lo) + (hi != lo ? "-" + class_char(hi) : "");
        if (negated) return negated_class(body);
        // characters JSON escapes are left out: each would be several output characters
        std::string kept;
        for (auto [lo, hi] : ranges) {
            lo = std::max<uint32_t>(lo, 0x20);
            // split around '"' (0x22) and '\\' (0x5c)
            const uint32_t cuts[] = { '"', '\\' };
            uint32_t from = lo;
            for (uint32_t cut : cuts) {
                if (from > hi) break;
                if (cut < from || cut > hi) continue;
                if (from < cut) kept += class_char(from) + (cut - 1 != from ? "-" + class_char(cut - 1) : "");
                from = cut + 1;
            }
            if (from <= hi) kept += class_char(from) + (hi != from ? "-" + class_char(hi) : "");
        }
        if (kept.empty()) fail("the class only matches characters that JSON strings escape");
        return "[" + kept + "]";
    }
};

} // namespace

std::string json_regex_to_gbnf(const std::string & pattern) {
    regex_translator t(pattern);
    return t.run();
}
