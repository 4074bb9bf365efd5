// The lexer follows jinja2's tokeniter rules closely because whitespace handling decides the
// rendered bytes: `{%-` strips all whitespace before a tag, `-%}` all whitespace after,
// trim_blocks drops the one newline after a block or comment tag, lstrip_blocks drops spaces and
// tabs between the start of a line and a block or comment tag.
#include "jinja/lexer.h"

#include "jinja/value.h"

#include <algorithm>
#include <cstring>

namespace kiln::jinja {

SourceMap::SourceMap(std::string_view source) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\n') {
            line_starts_.push_back(i + 1);
        }
    }
}

void SourceMap::locate(size_t pos, int & line, int & column) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    size_t idx = (size_t) (it - line_starts_.begin()) - 1;
    line = (int) idx + 1;
    column = (int) (pos - line_starts_[idx]) + 1;
}

std::string normalize_newlines(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        unsigned char c = s[i];
        if (c == '\r') {
            if (i + 1 < s.size() && s[i + 1] == '\n') {
                ++i;
            }
            out += '\n';
        } else if (c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
            out += '\n';
        } else if (c == 0xc2 && i + 1 < s.size() && (unsigned char) s[i + 1] == 0x85) {
            out += '\n';
            ++i;
        } else if (c == 0xe2 && i + 2 < s.size() && (unsigned char) s[i + 1] == 0x80 &&
                   ((unsigned char) s[i + 2] == 0xa8 || (unsigned char) s[i + 2] == 0xa9)) {
            out += '\n';
            i += 2;
        } else {
            out += (char) c;
        }
    }
    if (!out.empty() && out.back() == '\n') {
        out.pop_back();
    }
    return out;
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_name_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

static bool is_name_char(unsigned char c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

namespace {

class Lexer {
public:
    Lexer(const std::string & src, const SourceMap & map) : src_(src), map_(map) {}

    std::vector<Token> run() {
        size_t pos = 0;
        const size_t n = src_.size();
        while (pos < n) {
            size_t tag = find_tag(pos);
            std::string text = src_.substr(pos, (tag == std::string::npos ? n : tag) - pos);
            if (tag == std::string::npos) {
                emit_text(std::move(text), pos);
                break;
            }
            const char kind = src_[tag + 1];
            const char mod = tag + 2 < n && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
            const bool line_starting = pos == 0 || src_[pos - 1] == '\n';
            if (mod == '-') {
                while (!text.empty() && is_space(text.back())) {
                    text.pop_back();
                }
            } else if (mod != '+' && kind != '{') {
                size_t l_pos = text.rfind('\n');
                l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
                if (l_pos > 0 || line_starting) {
                    bool blank = l_pos < text.size();
                    for (size_t i = l_pos; i < text.size() && blank; ++i) {
                        blank = is_space(text[i]);
                    }
                    if (blank) {
                        text.resize(l_pos);
                    }
                }
            }
            emit_text(std::move(text), pos);
            size_t body = tag + 2 + (mod ? 1 : 0);
            if (kind == '#') {
                pos = skip_comment(tag, body);
            } else if (kind == '%' && is_raw(body)) {
                pos = lex_raw(tag, body);
            } else {
                pos = lex_tag(tag, body, kind == '{');
            }
        }
        tokens_.push_back(Token{TokenType::Eof, "", src_.size()});
        return std::move(tokens_);
    }

private:
    const std::string & src_;
    const SourceMap & map_;
    std::vector<Token> tokens_;

    [[noreturn]] void fail(size_t pos, const std::string & msg) const {
        int line, col;
        map_.locate(pos, line, col);
        throw Error(msg, line, col);
    }

    size_t find_tag(size_t pos) const {
        while (true) {
            size_t p = src_.find('{', pos);
            if (p == std::string::npos || p + 1 >= src_.size()) {
                return std::string::npos;
            }
            char c = src_[p + 1];
            if (c == '{' || c == '%' || c == '#') {
                return p;
            }
            pos = p + 1;
        }
    }

    void emit_text(std::string text, size_t pos) {
        if (!text.empty()) {
            tokens_.push_back(Token{TokenType::Text, std::move(text), pos});
        }
    }

    // After a block/comment end: `-` eats all whitespace, `+` nothing, else one newline.
    size_t after_block_end(size_t end_pos, char mod) const {
        if (mod == '-') {
            while (end_pos < src_.size() && is_space(src_[end_pos])) {
                ++end_pos;
            }
        } else if (mod != '+' && end_pos < src_.size() && src_[end_pos] == '\n') {
            ++end_pos;
        }
        return end_pos;
    }

    size_t skip_comment(size_t tag, size_t body) {
        size_t end = src_.find("#}", body);
        if (end == std::string::npos) {
            fail(tag, "Missing end of comment tag");
        }
        char mod = end > body && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
        return after_block_end(end + 2, mod);
    }

    // `{% raw %}` (with optional whitespace control) at body?
    bool is_raw(size_t body) const {
        size_t p = body;
        while (p < src_.size() && is_space(src_[p])) {
            ++p;
        }
        if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) {
            return false;
        }
        p += 3;
        while (p < src_.size() && is_space(src_[p])) {
            ++p;
        }
        if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) {
            ++p;
        }
        return src_.compare(p, 2, "%}") == 0;
    }

    size_t lex_raw(size_t tag, size_t body) {
        size_t close = src_.find("%}", body);
        char open_mod = src_[close - 1] == '-' || src_[close - 1] == '+' ? src_[close - 1] : 0;
        size_t start = close + 2;
        if (open_mod == '-') {
            while (start < src_.size() && is_space(src_[start])) {
                ++start;
            }
        }
        for (size_t p = src_.find("{%", start); p != std::string::npos; p = src_.find("{%", p + 2)) {
            size_t q = p + 2;
            char end_mod = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
            if (end_mod) {
                ++q;
            }
            while (q < src_.size() && is_space(src_[q])) {
                ++q;
            }
            if (src_.compare(q, 6, "endraw") != 0) {
                continue;
            }
            q += 6;
            while (q < src_.size() && is_space(src_[q])) {
                ++q;
            }
            char close_mod = 0;
            if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) {
                close_mod = src_[q++];
            }
            if (src_.compare(q, 2, "%}") != 0) {
                fail(p, "malformed endraw tag");
            }
            std::string text = src_.substr(start, p - start);
            if (end_mod == '-') {
                while (!text.empty() && is_space(text.back())) {
                    text.pop_back();
                }
            }
            emit_text(std::move(text), start);
            return after_block_end(q + 2, close_mod);
        }
        fail(tag, "missing end of raw directive ({% endraw %})");
    }

    size_t lex_tag(size_t tag, size_t p, bool variable) {
        tokens_.push_back(Token{variable ? TokenType::VarBegin : TokenType::BlockBegin, "", tag});
        const char close = variable ? '}' : '%';
        int depth = 0;   // brackets open; an end delimiter inside brackets is not the end (as in jinja2)
        const size_t n = src_.size();
        while (true) {
            while (p < n && is_space(src_[p])) {
                ++p;
            }
            if (p >= n) {
                fail(tag, variable ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
            }
            if (depth == 0) {
                char mod = 0;
                size_t q = p;
                if ((src_[q] == '-' || src_[q] == '+') && q + 1 < n) {
                    mod = src_[q];
                    ++q;
                }
                if (q + 1 < n && src_[q] == close && src_[q + 1] == '}') {
                    tokens_.push_back(Token{variable ? TokenType::VarEnd : TokenType::BlockEnd, "", p});
                    if (variable) {
                        size_t end = q + 2;
                        if (mod == '-') {
                            while (end < n && is_space(src_[end])) {
                                ++end;
                            }
                        }
                        return end;
                    }
                    return after_block_end(q + 2, mod);
                }
            }
            p = lex_token(p, depth);
        }
    }

    size_t lex_token(size_t p, int & depth) {
        const size_t n = src_.size();
        const char c = src_[p];
        if (is_name_start((unsigned char) c)) {
            size_t e = p;
            while (e < n && is_name_char((unsigned char) src_[e])) {
                ++e;
            }
            tokens_.push_back(Token{TokenType::Name, src_.substr(p, e - p), p});
            return e;
        }
        if (is_digit(c)) {
            return lex_number(p);
        }
        if (c == '\'' || c == '"') {
            return lex_string(p);
        }
        static const char * const two_char_ops[] = {"//", "**", "==", "!=", "<=", ">="};
        for (const char * op : two_char_ops) {
            if (src_.compare(p, 2, op) == 0) {
                tokens_.push_back(Token{TokenType::Op, op, p});
                return p + 2;
            }
        }
        if (std::strchr("+-*/%~<>=.,:|()[]{};", c) && c != 0) {
            if (c == '(' || c == '[' || c == '{') {
                ++depth;
            } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
                --depth;
            }
            tokens_.push_back(Token{TokenType::Op, std::string(1, c), p});
            return p + 1;
        }
        fail(p, std::string("unexpected character '") + c + "'");
    }

    size_t scan_digits(size_t p) const {
        // digits with single underscores between them, as Python allows
        while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])))) {
            ++p;
        }
        return p;
    }

    size_t lex_number(size_t p) {
        const size_t n = src_.size();
        size_t e = scan_digits(p);
        bool is_float = false;
        // After a '.', `x.0.1` is attribute access, never a float.
        bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::Op && tokens_.back().value == ".";
        if (!after_dot) {
            if (e + 1 < n && src_[e] == '.' && is_digit(src_[e + 1])) {
                e = scan_digits(e + 1);
                is_float = true;
            }
            if (e < n && (src_[e] == 'e' || src_[e] == 'E')) {
                size_t q = e + 1;
                if (q < n && (src_[q] == '+' || src_[q] == '-')) {
                    ++q;
                }
                if (q < n && is_digit(src_[q])) {
                    e = scan_digits(q);
                    is_float = true;
                }
            }
        }
        std::string text;
        for (size_t i = p; i < e; ++i) {
            if (src_[i] != '_') {
                text += src_[i];
            }
        }
        Token t{is_float ? TokenType::Float : TokenType::Int, text, p};
        if (is_float) {
            t.float_value = std::strtod(text.c_str(), nullptr);
        } else {
            t.int_value = std::strtoll(text.c_str(), nullptr, 10);
        }
        tokens_.push_back(std::move(t));
        return e;
    }

    static int hex_value(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    // String literals decode Python escapes (jinja2 runs them through unicode-escape).
    size_t lex_string(size_t start) {
        const char quote = src_[start];
        const size_t n = src_.size();
        std::string out;
        size_t p = start + 1;
        while (true) {
            if (p >= n) {
                fail(start, "unterminated string literal");
            }
            char c = src_[p];
            if (c == quote) {
                break;
            }
            if (c != '\\' || p + 1 >= n) {
                out += c;
                ++p;
                continue;
            }
            char e = src_[p + 1];
            p += 2;
            switch (e) {
                case '\n': break;
                case '\\': out += '\\'; break;
                case '\'': out += '\''; break;
                case '"': out += '"'; break;
                case 'a': out += '\a'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'v': out += '\v'; break;
                case 'x':
                case 'u':
                case 'U': {
                    int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    uint32_t cp = 0;
                    for (int k = 0; k < digits; ++k) {
                        int h = p + k < n ? hex_value(src_[p + k]) : -1;
                        if (h < 0) {
                            fail(p - 2, std::string("truncated \\") + e + " escape in string literal");
                        }
                        cp = cp * 16 + h;
                    }
                    p += digits;
                    utf8_append(out, cp);
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        uint32_t cp = e - '0';
                        for (int k = 0; k < 2 && p < n && src_[p] >= '0' && src_[p] <= '7'; ++k) {
                            cp = cp * 8 + (src_[p++] - '0');
                        }
                        utf8_append(out, cp);
                    } else {
                        out += '\\';
                        out += e;
                    }
            }
        }
        tokens_.push_back(Token{TokenType::String, std::move(out), start});
        return p + 1;
    }
};

} // namespace

std::vector<Token> tokenize(const std::string & source, const SourceMap & map) {
    return Lexer(source, map).run();
}

} // namespace kiln::jinja
