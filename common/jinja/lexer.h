// Tokenizer of Jinja templates, configured as Hugging Face does for chat templates:
// trim_blocks and lstrip_blocks on, `-`/`+` whitespace control, comments dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jinja {

enum class TokenType : uint8_t {
    Text,         // literal template text (already whitespace-controlled)
    VarBegin,     // {{
    VarEnd,       // }}
    BlockBegin,   // {%
    BlockEnd,     // %}
    Name,
    String,       // value holds the decoded string
    Int,
    Float,
    Op,           // value holds the operator text
    Eof,
};

struct Token {
    TokenType type;
    std::string value;
    size_t pos = 0;   // byte offset in the normalized source
    int64_t int_value = 0;
    double float_value = 0.0;
};

// Line/column lookup for error messages.
class SourceMap {
public:
    explicit SourceMap(std::string_view source);
    void locate(size_t pos, int & line, int & column) const;

private:
    std::vector<size_t> line_starts_;
};

// Python's str.splitlines() + "\n".join(): CRLF/CR become LF and one trailing newline is dropped,
// as jinja2 does with keep_trailing_newline=False.
std::string normalize_newlines(std::string_view source);

// Tokenizes a normalized source. Throws Error (located) on an unterminated tag or string,
// or a character that starts no token.
std::vector<Token> tokenize(const std::string & source, const SourceMap & map);

} // namespace kiln::jinja
