// Pre-tokenizer splits for byte-level BPE vocabularies.
//
// The reference engines express these as regular expressions with Unicode classes (\p{L},
// \p{N}, \s ...) that std::regex cannot evaluate. Each regex used by a supported family is
// written here as a small matcher: given a position inside a piece, it returns the length of the
// match starting there (0 = none), taking the alternatives in order and backtracking exactly as
// an ECMAScript/PCRE engine would for that pattern. A generic search loop then reproduces the
// regex-iterator semantics: the leftmost match wins, text between matches is kept as a piece of
// its own, and lookaheads / `$` see only the piece being split (not the whole text).

#include "llama-vocab-impl.h"
#include "unicode.h"

#include <cstring>

namespace {

// One piece being split, with per-code-point flags precomputed for the whole text.
struct piece_view {
    const uint32_t * cpt;
    const uint16_t * flags;
    size_t end;   // exclusive end of the piece (absolute index)

    uint16_t f(size_t i) const { return i < end ? flags[i] : 0; }
    bool ws(size_t i)     const { return f(i) & UNICODE_FLAG_WHITESPACE; }
    bool letter(size_t i) const { return f(i) & UNICODE_FLAG_LETTER; }
    bool number(size_t i) const { return f(i) & UNICODE_FLAG_NUMBER; }
    bool punct(size_t i)  const { return f(i) & UNICODE_FLAG_PUNCTUATION; }
    // [^\s\p{L}\p{N}]
    bool other(size_t i)  const { return i < end && !(flags[i] & (UNICODE_FLAG_WHITESPACE | UNICODE_FLAG_LETTER | UNICODE_FLAG_NUMBER)); }
    bool is(size_t i, uint32_t c) const { return i < end && cpt[i] == c; }
    bool newline(size_t i) const { return is(i, '\r') || is(i, '\n'); }
    size_t ws_run(size_t i) const { size_t k = 0; while (ws(i + k)) ++k; return k; }
};

struct cpt_range { uint32_t lo, hi; };

template <size_t N>
bool in_ranges(const cpt_range (&r)[N], uint32_t c) {
    for (const auto & x : r) if (c >= x.lo && c <= x.hi) return true;
    return false;
}

// Patterns written with literal code point classes (no \p{..}) were matched by the reference on
// the raw code points, except that non-ASCII whitespace was first replaced by U+000B so that
// \s matches it. Such whitespace therefore never falls inside those literal classes.
uint32_t literal_view(const piece_view & p, size_t i) {
    const uint32_t c = p.cpt[i];
    return (c > 0x7F && (p.flags[i] & UNICODE_FLAG_WHITESPACE)) ? 0x0B : c;
}

// ---- matchers: length of the match at pos, 0 if none ----------------------------------------

// 's|'t|'re|'ve|'m|'ll|'d   (case-sensitive) or the [sS]-style case-insensitive variant
size_t match_contraction(const piece_view & p, size_t pos, bool any_case) {
    if (!p.is(pos, '\'') || pos + 1 >= p.end) return 0;
    auto lc = [&](size_t i) -> uint32_t {
        uint32_t c = p.cpt[i];
        if (any_case && c >= 'A' && c <= 'Z') c += 'a' - 'A';
        return c;
    };
    const uint32_t a = lc(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= p.end) return 0;
    const uint32_t b = lc(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

// \s+(?!\S) : a whitespace run, minus its last char when a non-space follows inside the piece
size_t match_ws_not_before_text(const piece_view & p, size_t pos) {
    const size_t k = p.ws_run(pos);
    if (k == 0) return 0;
    if (pos + k == p.end) return k;
    return k >= 2 ? k - 1 : 0;
}

// The whitespace tail shared by the llama3-style patterns: \s*[\r\n]+|\s+(?!\S)|\s+
size_t match_ws_tail(const piece_view & p, size_t pos) {
    const size_t k = p.ws_run(pos);
    if (k == 0) return 0;
    for (size_t j = pos + k; j > pos; --j) {
        if (p.newline(j - 1)) return j - pos;
    }
    if (pos + k == p.end) return k;
    return k >= 2 ? k - 1 : k;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
size_t match_gpt2(const piece_view & p, size_t pos) {
    if (size_t n = match_contraction(p, pos, false)) return n;
    const size_t q = pos + (p.is(pos, ' ') ? 1 : 0);
    if (p.letter(q)) { size_t i = q; while (p.letter(i)) ++i; return i - pos; }
    if (p.number(q)) { size_t i = q; while (p.number(i)) ++i; return i - pos; }
    if (p.other(q))  { size_t i = q; while (p.other(i)) ++i; return i - pos; }
    return match_ws_not_before_text(p, pos);
}

// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}
//  | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_llama3_like(const piece_view & p, size_t pos, size_t max_digits) {
    if (size_t n = match_contraction(p, pos, true)) return n;
    const bool lead_ok = pos < p.end && !p.newline(pos) && !p.letter(pos) && !p.number(pos);
    if (lead_ok && p.letter(pos + 1)) { size_t i = pos + 1; while (p.letter(i)) ++i; return i - pos; }
    if (p.letter(pos)) { size_t i = pos; while (p.letter(i)) ++i; return i - pos; }
    if (p.number(pos)) { size_t i = pos; while (p.number(i) && i - pos < max_digits) ++i; return i - pos; }
    const size_t q = pos + (p.is(pos, ' ') ? 1 : 0);
    if (p.other(q)) {
        size_t i = q;
        while (p.other(i)) ++i;
        while (p.newline(i)) ++i;
        return i - pos;
    }
    return match_ws_tail(p, pos);
}

size_t match_llama3(const piece_view & p, size_t pos) { return match_llama3_like(p, pos, 3); }
size_t match_qwen2(const piece_view & p, size_t pos)  { return match_llama3_like(p, pos, 1); }

// [\p{P}\$\+<=>\^~\|]+  (and the falcon variant that also takes the backtick)
bool default_punct(const piece_view & p, size_t i, bool backtick) {
    if (i >= p.end) return false;
    if (p.punct(i)) return true;
    const uint32_t c = p.cpt[i];
    return c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' || c == '|' ||
           (backtick && c == '`');
}
size_t match_punct_default(const piece_view & p, size_t pos) { size_t i = pos; while (default_punct(p, i, false)) ++i; return i - pos; }
size_t match_punct_falcon(const piece_view & p, size_t pos)  { size_t i = pos; while (default_punct(p, i, true))  ++i; return i - pos; }

size_t match_number_1(const piece_view & p, size_t pos)   { return p.number(pos) ? 1 : 0; }                           // \p{N}
size_t match_number_run(const piece_view & p, size_t pos) { size_t i = pos; while (p.number(i)) ++i; return i - pos; } // \p{N}+

// [0-9][0-9][0-9]
size_t match_ascii_digits_3(const piece_view & p, size_t pos) {
    for (size_t i = pos; i < pos + 3; ++i) {
        if (i >= p.end || p.cpt[i] < '0' || p.cpt[i] > '9') return 0;
    }
    return 3;
}

size_t match_newline_1(const piece_view & p, size_t pos) { return p.newline(pos) ? 1 : 0; }   // [\r\n]

// \s?X+ for a class X
template <typename Pred>
size_t match_opt_ws_then_run(const piece_view & p, size_t pos, Pred in_class) {
    size_t i = pos;
    if (p.ws(pos) && pos + 1 < p.end && in_class(pos + 1)) i = pos + 1;
    if (i >= p.end || !in_class(i)) return 0;
    while (i < p.end && in_class(i)) ++i;
    return i - pos;
}

// deepseek-llm's explicit letter class (cased letters of many scripts)
const cpt_range k_ds_letters[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// [!-/:-~！-／：-～‘-‟　-。]
const cpt_range k_ds_punct[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};
// [一-龥ࠀ-一가-퟿]
const cpt_range k_cjk_hangul[] = { {0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF} };

size_t match_ds_letters(const piece_view & p, size_t pos) {
    return match_opt_ws_then_run(p, pos, [&](size_t i) { return in_ranges(k_ds_letters, literal_view(p, i)); });
}
size_t match_ds_punct(const piece_view & p, size_t pos) {
    return match_opt_ws_then_run(p, pos, [&](size_t i) { return in_ranges(k_ds_punct, literal_view(p, i)); });
}
size_t match_cjk_hangul(const piece_view & p, size_t pos) {
    size_t i = pos;
    while (i < p.end && in_ranges(k_cjk_hangul, literal_view(p, i))) ++i;
    return i - pos;
}
size_t match_ws_letters(const piece_view & p, size_t pos) {   // \s?\p{L}+
    return match_opt_ws_then_run(p, pos, [&](size_t i) { return p.letter(i); });
}
size_t match_ws_punct(const piece_view & p, size_t pos) {     // \s?\p{P}+
    return match_opt_ws_then_run(p, pos, [&](size_t i) { return p.punct(i); });
}

//  ?[^(\s|.,!?…。，、।۔،)]+
bool bloom_word_char(const piece_view & p, size_t i) {
    if (i >= p.end || p.ws(i)) return false;
    switch (p.cpt[i]) {
        case '(': case ')': case '|': case '.': case ',': case '!': case '?':
        case 0x2026: case 0x3002: case 0xFF0C: case 0x3001: case 0x0964: case 0x06D4: case 0x060C:
            return false;
        default:
            return true;
    }
}
size_t match_bloom(const piece_view & p, size_t pos) {
    size_t i = pos + (p.is(pos, ' ') && bloom_word_char(p, pos + 1) ? 1 : 0);
    if (!bloom_word_char(p, i)) return 0;
    while (bloom_word_char(p, i)) ++i;
    return i - pos;
}

// ---- deepseek-v3 -------------------------------------------------------------------------

// [一-龥぀-ゟ゠-ヿ]+
const cpt_range k_cjk_kana[] = { {0x4E00, 0x9FA5}, {0x3040, 0x309F}, {0x30A0, 0x30FF} };
size_t match_cjk_kana(const piece_view & p, size_t pos) {
    size_t i = pos;
    while (i < p.end && in_ranges(k_cjk_kana, literal_view(p, i))) ++i;
    return i - pos;
}

size_t match_number_upto_3(const piece_view & p, size_t pos) {   // \p{N}{1,3}
    size_t i = pos;
    while (p.number(i) && i - pos < 3) ++i;
    return i - pos;
}

bool ascii_letter(const piece_view & p, size_t i) {
    if (i >= p.end) return false;
    const uint32_t c = p.cpt[i];
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//  | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_deepseek_v3(const piece_view & p, size_t pos) {
    const uint32_t c = p.cpt[pos];
    const bool ascii_ps = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
    if (ascii_ps && ascii_letter(p, pos + 1)) {
        size_t i = pos + 1;
        while (ascii_letter(p, i)) ++i;
        return i - pos;
    }
    auto lm = [&](size_t i) { return (p.f(i) & (UNICODE_FLAG_LETTER | UNICODE_FLAG_MARK)) != 0; };
    auto ps = [&](size_t i) { return (p.f(i) & (UNICODE_FLAG_PUNCTUATION | UNICODE_FLAG_SYMBOL)) != 0; };
    const bool lead_ok = !p.newline(pos) && !(p.f(pos) & (UNICODE_FLAG_LETTER | UNICODE_FLAG_PUNCTUATION | UNICODE_FLAG_SYMBOL));
    if (lead_ok && lm(pos + 1)) { size_t i = pos + 1; while (lm(i)) ++i; return i - pos; }
    if (lm(pos)) { size_t i = pos; while (lm(i)) ++i; return i - pos; }
    const size_t q = pos + (p.is(pos, ' ') ? 1 : 0);
    if (ps(q)) {
        size_t i = q;
        while (ps(i)) ++i;
        while (p.newline(i)) ++i;
        return i - pos;
    }
    return match_ws_tail(p, pos);
}

// ---- tekken / gpt-4o: case-aware words ------------------------------------------------------
//
// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+C?
//  |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*C?
//  |\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// where C is the optional contraction suffix (gpt-4o only). "upper" below is a letter other
// than a-z, "lower" a letter other than A-Z: non-ASCII letters count as both.
size_t match_cased(const piece_view & p, size_t pos, size_t max_digits, bool contraction) {
    auto upper = [&](size_t i) { return p.letter(i) && !(p.cpt[i] >= 'a' && p.cpt[i] <= 'z'); };
    auto lower = [&](size_t i) { return p.letter(i) && !(p.cpt[i] >= 'A' && p.cpt[i] <= 'Z'); };
    auto finish = [&](size_t e) { return e - pos + (contraction ? match_contraction(p, e, true) : 0); };

    const bool lead = pos < p.end && !p.newline(pos) && !p.letter(pos) && !p.number(pos);
    const size_t i0 = lead ? pos + 1 : pos;   // without the lead char no letter could start at pos
    // upper* lower+ : greedy upper*, giving back chars until a lower+ can start
    size_t j = i0;
    while (upper(j)) ++j;
    for (size_t k = j + 1; k-- > i0;) {
        if (lower(k)) {
            size_t e = k;
            while (lower(e)) ++e;
            return finish(e);
        }
    }
    // upper+ lower*
    if (upper(i0)) {
        size_t e = j;
        while (lower(e)) ++e;
        return finish(e);
    }
    if (p.number(pos)) { size_t i = pos; while (p.number(i) && i - pos < max_digits) ++i; return i - pos; }
    const size_t q = pos + (p.is(pos, ' ') ? 1 : 0);
    if (p.other(q)) {
        size_t i = q;
        while (p.other(i)) ++i;
        while (p.newline(i) || p.is(i, '/')) ++i;
        return i - pos;
    }
    return match_ws_tail(p, pos);
}
size_t match_tekken(const piece_view & p, size_t pos) { return match_cased(p, pos, 1, false); }
size_t match_gpt4o(const piece_view & p, size_t pos)  { return match_cased(p, pos, 3, true); }

using matcher_fn = size_t (*)(const piece_view &, size_t);

// Split every piece in `lengths` (consecutive, starting at 0) by the leftmost-match search.
void split_pass(const uint32_t * cpt, const uint16_t * flags, matcher_fn m,
                const std::vector<size_t> & lengths, std::vector<size_t> & out) {
    out.clear();
    size_t start = 0;
    for (size_t len : lengths) {
        const piece_view p{cpt, flags, start + len};
        size_t gap = start;
        size_t i = start;
        while (i < p.end) {
            const size_t n = m(p, i);
            if (n == 0) { ++i; continue; }
            if (i > gap) out.push_back(i - gap);
            out.push_back(n);
            i += n;
            gap = i;
        }
        if (gap < p.end) out.push_back(p.end - gap);
        start += len;
    }
}

// \s+$ : only the trailing whitespace run of each piece can match, so split it off directly
// (a per-position search would be quadratic in long whitespace runs).
void split_trailing_ws(const uint16_t * flags, const std::vector<size_t> & lengths, std::vector<size_t> & out) {
    out.clear();
    size_t start = 0;
    for (size_t len : lengths) {
        size_t t = start + len;
        while (t > start && (flags[t - 1] & UNICODE_FLAG_WHITESPACE)) --t;
        if (t > start) out.push_back(t - start);
        if (t < start + len) out.push_back(start + len - t);
        start += len;
    }
}

enum class pass {
    gpt2, llama3, qwen2, punct_default, punct_falcon, number_1, number_run, ascii_digits_3,
    newline_1, ds_letters, ds_punct, trailing_ws, cjk_hangul, ws_letters, ws_punct, bloom,
    number_upto_3, cjk_kana, deepseek_v3, tekken, gpt4o,
};

matcher_fn matcher_for(pass p) {
    switch (p) {
        case pass::gpt2:           return match_gpt2;
        case pass::llama3:         return match_llama3;
        case pass::qwen2:          return match_qwen2;
        case pass::punct_default:  return match_punct_default;
        case pass::punct_falcon:   return match_punct_falcon;
        case pass::number_1:       return match_number_1;
        case pass::number_run:     return match_number_run;
        case pass::ascii_digits_3: return match_ascii_digits_3;
        case pass::newline_1:      return match_newline_1;
        case pass::ds_letters:     return match_ds_letters;
        case pass::ds_punct:       return match_ds_punct;
        case pass::cjk_hangul:     return match_cjk_hangul;
        case pass::ws_letters:     return match_ws_letters;
        case pass::ws_punct:       return match_ws_punct;
        case pass::bloom:          return match_bloom;
        case pass::number_upto_3:  return match_number_upto_3;
        case pass::cjk_kana:       return match_cjk_kana;
        case pass::deepseek_v3:    return match_deepseek_v3;
        case pass::tekken:         return match_tekken;
        case pass::gpt4o:          return match_gpt4o;
        case pass::trailing_ws:    return nullptr;
    }
    return nullptr;
}

// The regex list of each family, in the order they are applied.
std::vector<pass> passes_for(llama_vocab::pre_type pre) {
    using P = llama_vocab::pre_type;
    switch (pre) {
        case P::llama3: case P::dbrx: case P::smaug: case P::chatglm4:
            return {pass::llama3};
        case P::qwen2: case P::stablelm2:
            return {pass::qwen2};
        case P::deepseek_llm:
            return {pass::newline_1, pass::ds_letters, pass::ds_punct, pass::trailing_ws, pass::cjk_hangul, pass::number_run};
        case P::deepseek_v3:
            return {pass::number_upto_3, pass::cjk_kana, pass::deepseek_v3};
        case P::tekken:
            return {pass::tekken};
        case P::gpt4o:
            return {pass::gpt4o};
        case P::deepseek_coder:
            return {pass::newline_1, pass::ws_letters, pass::ws_punct, pass::cjk_hangul, pass::number_1};
        case P::falcon:
            return {pass::punct_falcon, pass::gpt2, pass::ascii_digits_3};
        case P::starcoder: case P::refact: case P::command_r: case P::smollm: case P::codeshell:
        case P::exaone: case P::minerva:
            return {pass::number_1, pass::gpt2};
        case P::gpt2: case P::mpt: case P::olmo: case P::jais:
            return {pass::gpt2};
        case P::poro: case P::bloom: case P::gpt3_finnish:
            return {pass::bloom};
        case P::viking:
            return {pass::bloom, pass::number_1};
        case P::default_:
            return {pass::punct_default, pass::gpt2, pass::number_run, pass::ascii_digits_3};
    }
    return {};
}

} // namespace

bool llama_bpe_pretok_supported(llama_vocab::pre_type pre) {
    return !passes_for(pre).empty();
}

bool llama_bpe_pretokenize(llama_vocab::pre_type pre, const std::string & text, std::vector<std::string> & words) {
    words.clear();
    const std::vector<pass> passes = passes_for(pre);
    if (passes.empty()) return false;

    const std::vector<uint32_t> cpts = unicode_cpts_from_utf8(text);
    std::vector<uint16_t> flags(cpts.size());
    for (size_t i = 0; i < cpts.size(); ++i) flags[i] = unicode_cpt_flags(cpts[i]);

    std::vector<size_t> lengths, next;
    if (!cpts.empty()) lengths.push_back(cpts.size());
    for (pass ps : passes) {
        if (ps == pass::trailing_ws) {
            split_trailing_ws(flags.data(), lengths, next);
        } else {
            split_pass(cpts.data(), flags.data(), matcher_for(ps), lengths, next);
        }
        lengths.swap(next);
    }

    words.reserve(lengths.size());
    size_t start = 0;
    std::string utf8;
    for (size_t len : lengths) {
        std::string word;
        for (size_t i = start; i < start + len; ++i) {
            utf8.clear();
            unicode_append_utf8(utf8, cpts[i]);
            for (unsigned char b : utf8) word += unicode_byte_to_utf8(b);
        }
        words.push_back(std::move(word));
        start += len;
    }
    return true;
}
