// GBNF grammars: the parser (accepts the usual example grammars, reports errors by line and
// column), the matcher on hand-picked strings, and grammar-constrained sampling from a
// random-weight model whose every output must be accepted by a recogniser written here
// independently of the grammar engine (hand parsers, std::regex, nlohmann::json).
#include "common.h"
#include "llama-grammar.h"
#include "llama.h"
#include "testing.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <regex>
#include <string>
#include <vector>

namespace {

// ---- test grammars (bounded, so a random model always reaches the end) -----------------------

const char * k_arithmetic = R"G(# integer arithmetic with one level of parentheses
root   ::= expr
expr   ::= term (("+" | "-") term){0,3}
term   ::= factor (("*" | "/") factor){0,2}
factor ::= number | "(" inner ")"
inner  ::= number (("+" | "-" | "*") number){0,3}
number ::= "-"? [0-9]{1,4}
)G";

const char * k_json = R"G(root   ::= object
object ::= "{" ws ( pair ( "," ws pair ){0,3} )? "}"
pair   ::= string ":" ws value ws
value  ::= string | number | "true" | "false" | "null" | array | inner
inner  ::= "{" ws ( string ":" ws scalar ( "," ws string ":" ws scalar ){0,2} )? "}"
array  ::= "[" ws ( scalar ( "," ws scalar ){0,3} )? "]"
scalar ::= string | number | "true" | "false" | "null"
string ::= "\"" ( [a-zA-Z0-9 _] | "\\" ["\\/nt] | "\\u" [0-9a-f]{4} ){0,10} "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,5} ) ( "." [0-9]{1,3} )? ( [eE] [-+]? [0-9]{1,2} )?
ws     ::= [ \t\n]?
)G";

const char * k_list = R"G(root ::= item{1,5}
item ::= "- " [a-zA-Z0-9] [a-zA-Z0-9 ]{0,19} "\n"
)G";

const char * k_chess = R"G(# two moves in standard algebraic notation
root    ::= "1. " move " " move "\n"
move    ::= ( castle | pawn | piece ) [+#]?
castle  ::= "O-O" "-O"?
pawn    ::= ( [a-h] "x" )? [a-h] [1-8] ( "=" [QRBN] )?
piece   ::= [KQRBN] [a-h]? [1-8]? "x"? [a-h] [1-8]
)G";

// ---- independent recognisers ------------------------------------------------------------------

// expr := term (('+'|'-') term)*; term := factor (('*'|'/') factor)*; factor := number | '(' expr ')'
struct arith_parser {
    const std::string & s;
    size_t i = 0;
    bool number() {
        if (i < s.size() && s[i] == '-') ++i;
        const size_t start = i;
        while (i < s.size() && std::isdigit((unsigned char) s[i])) ++i;
        return i > start && i - start <= 4;
    }
    bool factor() {
        if (i < s.size() && s[i] == '(') {
            ++i;
            if (!expr() || i >= s.size() || s[i] != ')') return false;
            ++i;
            return true;
        }
        return number();
    }
    bool term() {
        if (!factor()) return false;
        while (i < s.size() && (s[i] == '*' || s[i] == '/')) {
            ++i;
            if (!factor()) return false;
        }
        return true;
    }
    bool expr() {
        if (!term()) return false;
        while (i < s.size() && (s[i] == '+' || s[i] == '-')) {
            ++i;
            if (!term()) return false;
        }
        return true;
    }
};

bool is_arithmetic(const std::string & s) {
    arith_parser p{ s };
    return p.expr() && p.i == s.size();
}

bool is_json_object(const std::string & s) {
    const nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
    return !j.is_discarded() && j.is_object();
}

bool is_list(const std::string & s) {
    static const std::regex re("(- [a-zA-Z0-9][a-zA-Z0-9 ]{0,19}\n){1,5}");
    return std::regex_match(s, re);
}

bool is_chess(const std::string & s) {
    static const std::string move = "(O-O(-O)?|([a-h]x)?[a-h][1-8](=[QRBN])?|[KQRBN][a-h]?[1-8]?x?[a-h][1-8])[+#]?";
    static const std::regex re("1\\. " + move + " " + move + "\n");
    return std::regex_match(s, re);
}

// ---- matcher helpers ---------------------------------------------------------------------------

llama_gbnf::grammar parse_ok(const std::string & text) {
    llama_gbnf::grammar g;
    std::string err;
    EXPECT_TRUE(llama_gbnf::parse(text, "root", g, err)) << err;
    return g;
}

std::string parse_error(const std::string & text) {
    llama_gbnf::grammar g;
    std::string err;
    EXPECT_FALSE(llama_gbnf::parse(text, "root", g, err)) << "parsed: " << text;
    return err;
}

// Feeds the pieces one after another; true if all were accepted and the grammar is complete.
bool matches(const llama_gbnf::grammar & g, const std::vector<std::string> & pieces) {
    llama_gbnf::matcher m(g);
    for (const auto & p : pieces) {
        if (!m.allows(p)) return false;
        if (!m.accept(p)) return false;
    }
    return m.complete();
}

bool matches(const llama_gbnf::grammar & g, const std::string & text) {
    // one code point at a time as well as whole, to cover both paths
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    const bool whole = matches(g, std::vector<std::string>{ text });
    EXPECT_EQ(whole, matches(g, bytes)) << "byte-wise and whole disagree on '" << text << "'";
    return whole;
}

} // namespace

TEST(GrammarParse, ExampleGrammarsParse) {
    for (const char * g : { k_arithmetic, k_json, k_list, k_chess }) parse_ok(g);
    // comments, multi-line groups, escapes, any-char
    parse_ok("root ::= ( \"a\" # first\n  | \"b\" )  # trailing\n\n# done\n");
    parse_ok("root ::= [\\x41-\\x5A\\u00e9\\U0001F600] . \"\\t\\n\\\\\\\"\"");
}

TEST(GrammarParse, ErrorsNameLineAndColumn) {
    EXPECT_NE(parse_error("root ::= foo\n").find("line 1, column 10: undefined rule 'foo'"), std::string::npos);
    EXPECT_NE(parse_error("root ::= x\nx ::= \"a\"\ny := \"b\"\n").find("line 3, column 3: expecting '::='"),
              std::string::npos);
    EXPECT_NE(parse_error("root ::= \"abc\n").find("line 1, column 10: unterminated string literal"), std::string::npos);
    EXPECT_NE(parse_error("root ::= [a-z\n").find("line 1, column 10"), std::string::npos);
    EXPECT_NE(parse_error("root ::= ( \"a\"\n").find("unclosed '('"), std::string::npos);
    EXPECT_NE(parse_error("root ::= \"a\"{3,1}\n").find("m <= n"), std::string::npos);
    EXPECT_NE(parse_error("root ::= * \"a\"\n").find("line 1, column 10: '*' needs an item"), std::string::npos);
    EXPECT_NE(parse_error("root ::= \"\\q\"\n").find("unknown escape"), std::string::npos);
    EXPECT_NE(parse_error("root ::= \"a\" \"b\" ]\n").find("line 1, column 18: unexpected ']'"), std::string::npos);
    EXPECT_NE(parse_error("start ::= \"a\"\n").find("no rule named 'root'"), std::string::npos);
    EXPECT_NE(parse_error("root ::= \"a\"\nroot ::= \"b\"\n").find("line 2, column 1: rule 'root' is defined twice"),
              std::string::npos);
    EXPECT_NE(parse_error("root ::= [z-a]\n").find("reversed"), std::string::npos);
}

TEST(GrammarParse, LeftRecursionIsRefused) {
    EXPECT_NE(parse_error("root ::= root \"a\" | \"b\"\n").find("left recursion in rule 'root'"), std::string::npos);
    // through a nullable rule and another rule
    EXPECT_NE(parse_error("root ::= e x\nx ::= \"a\"? root | \"b\"\ne ::= \"\"\n").find("left recursion"), std::string::npos);
    // a repeated nullable item would loop the matcher the same way
    EXPECT_NE(parse_error("root ::= (\"a\"?)*\n").find("left recursion"), std::string::npos);
    // right recursion is fine
    parse_ok("root ::= \"a\" root | \"b\"\n");
}

TEST(GrammarMatch, ArithmeticStrings) {
    const auto g = parse_ok(k_arithmetic);
    for (const char * ok : { "1", "-12+3", "(1+2)*3", "7/(1*2-3)+4-5", "1234" }) EXPECT_TRUE(matches(g, ok)) << ok;
    for (const char * bad : { "", "+1", "12345", "(1+2", "((1))", "1+2+3+4+5", "1 + 2" }) EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(GrammarMatch, JsonStrings) {
    const auto g = parse_ok(k_json);
    for (const char * ok : { "{}", "{\"a\":1}", "{ \"k\": [1, 2.5, \"x\"], \"o\": {\"z\": null}}", "{\"e\":-1.5e+10}",
                             "{\"s\":\"\\u00e9\\n\"}" }) {
        EXPECT_TRUE(matches(g, ok)) << ok;
    }
    for (const char * bad : { "{", "{\"a\"}", "{\"a\":01}", "[1]", "{\"a\":1,}", "{\"a\":{\"b\":{}}}" }) {
        EXPECT_FALSE(matches(g, bad)) << bad;
    }
}

TEST(GrammarMatch, ClassesRepetitionsAndUtf8) {
    const auto g = parse_ok("root ::= [^a-c\\n] . \"é\" [α-ω]{2,3} \"x\"*\n");
    EXPECT_TRUE(matches(g, "dQéαβ"));
    EXPECT_TRUE(matches(g, "z€éαβγxxx"));
    EXPECT_FALSE(matches(g, "aQéαβ"));     // negated class
    EXPECT_FALSE(matches(g, "dQéα"));      // too few
    EXPECT_FALSE(matches(g, "dQéαβγδ"));   // too many
    // a multi-byte code point split across tokens is checked as far as its bytes go
    llama_gbnf::matcher m(g);
    ASSERT_TRUE(m.accept("dQ\xc3"));
    EXPECT_FALSE(m.allows("\xa8"));   // è, not é
    ASSERT_TRUE(m.accept("\xa9\xce"));
    EXPECT_FALSE(m.allows("\x91"));   // Α (upper case alpha) is outside [α-ω]
    EXPECT_FALSE(m.complete());
    ASSERT_TRUE(m.accept("\xb1\xce\xb2"));
    EXPECT_TRUE(m.complete());
    EXPECT_FALSE(m.accept("y"));   // refused: the state stays as it was
    EXPECT_TRUE(m.complete());
    EXPECT_FALSE(m.allows("\xff"));   // invalid UTF-8
}

// Bytes that decode to no code point UTF-8 may carry never fit a negated class: a JSON string
// the grammar lets through must parse (surrogates, overlong forms and values past U+10FFFF are
// refused by JSON parsers).
TEST(GrammarMatch, NegatedClassesRefuseInvalidUtf8) {
    const auto g = parse_ok("root ::= [^\"]*\n");
    EXPECT_TRUE(matches(g, "\xe3\x81\x81\xf0\x9f\x98\x80"));     // ぁ and an emoji
    for (const char * bad : { "\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\x80", "\xe0\x80\x80", "\xf4\x90\x80\x80", "\xf6\x83\x83\x83" }) {
        EXPECT_FALSE(matches(g, bad)) << "complete: " << bad;
        llama_gbnf::matcher m(g);
        const std::string b = bad;
        // fed byte by byte, the sequence is refused by its last byte at the latest
        bool refused = false;
        for (char c : b) refused = refused || !m.accept(std::string(1, c));
        EXPECT_TRUE(refused) << bad;
    }
    // a lead byte no valid continuation can complete is refused at once, so sampling never
    // walks into a dead end
    llama_gbnf::matcher m(g);
    EXPECT_FALSE(m.allows("\xf6"));
    EXPECT_FALSE(m.allows("\xf4\x90"));
    EXPECT_TRUE(m.allows("\xf4\x8f"));
}

TEST(GrammarMatch, ExactRepetitionCounts) {
    const auto g = parse_ok("root ::= \"ab\"{2} \"c\"{1,} \"d\"{0,1}\n");
    EXPECT_TRUE(matches(g, "ababc"));
    EXPECT_TRUE(matches(g, "ababcccd"));
    EXPECT_FALSE(matches(g, "abc"));
    EXPECT_FALSE(matches(g, "ababdd"));
}

// ---- ambiguous grammars (issue 12: a fuzz-grammar input kept the matcher busy for > 10 s) -------

// ("a"?){40} "b": after k a's the parse can be at any copy from k on, 41 - k distinct stacks, and
// every step reaches most of them many times over; past 16 stacks the set is hash-indexed.
TEST(GrammarMatch, DuplicateParsesAreMergedInLargeSets) {
    const auto g = parse_ok("root ::= (\"a\"?){40} \"b\"\n");
    llama_gbnf::matcher m(g);
    EXPECT_EQ(m.n_stacks(), 41u);
    for (size_t k = 1; k <= 40; ++k) {
        ASSERT_TRUE(m.accept("a")) << k;
        EXPECT_EQ(m.n_stacks(), 41u - k) << "after " << k << " a's";
    }
    EXPECT_FALSE(m.allows("a"));
    EXPECT_TRUE(m.accept("b"));
    EXPECT_TRUE(m.complete());
    EXPECT_FALSE(m.failed());

    // three alternatives matching the same character, repeated: 3^n paths, always 4 parses
    const auto same = parse_ok("root ::= (\"a\" | \"a\" | [a])* \"b\"\n");
    llama_gbnf::matcher ms(same);
    for (int k = 0; k < 60; ++k) ASSERT_TRUE(ms.accept("a"));
    EXPECT_EQ(ms.n_stacks(), 4u);
    EXPECT_TRUE(ms.accept("b"));
    EXPECT_TRUE(ms.complete());
}

// Many live parses (the hash-indexed set) decide exactly what a regular expression does.
TEST(GrammarMatch, LargeStackSetsAgreeWithARegex) {
    const auto g = parse_ok("root ::= [ab]{0,12} \"a\"{0,12} [ab]{0,12} \"!\"\n");
    const std::regex re("[ab]{0,12}a{0,12}[ab]{0,12}!");
    uint32_t state = 12345;
    auto next = [&]() { return state = state * 1103515245u + 12345u; };
    size_t n_true = 0, max_stacks = 0;
    for (int i = 0; i < 400; ++i) {
        std::string s;
        const size_t len = next() % 40;
        for (size_t k = 0; k < len; ++k) s += (next() >> 8) % 5 == 0 ? 'b' : 'a';
        if ((next() >> 8) % 4 != 0) s += '!';
        llama_gbnf::matcher m(g);
        bool ok = true;
        for (char c : s) {
            ok = ok && m.accept(std::string(1, c));
            max_stacks = std::max(max_stacks, m.n_stacks());
        }
        ok = ok && m.complete();
        EXPECT_EQ(ok, std::regex_match(s, re)) << s;
        n_true += ok;
    }
    EXPECT_GT(n_true, 50u);
    EXPECT_GT(max_stacks, 16u);   // the indexed path was taken
}

// What a grammar too ambiguous to follow looks like once the matcher gives up: a message, and
// nothing allowed any more (reset() does not bring it back).
void expect_gave_up(llama_gbnf::matcher & m, const char * limit) {
    ASSERT_TRUE(m.failed());
    EXPECT_NE(m.error().find("the grammar is too ambiguous to follow"), std::string::npos) << m.error();
    EXPECT_NE(m.error().find(limit), std::string::npos) << m.error();
    EXPECT_FALSE(m.allows("a"));
    EXPECT_FALSE(m.accept("a"));
    EXPECT_FALSE(m.complete());
    m.reset();
    EXPECT_TRUE(m.failed());
    EXPECT_FALSE(m.allows("a"));
}

TEST(GrammarMatch, AmbiguousGrammarsFailWithAMessage) {
    // the stack cap, reached within a few characters: every one doubles the distinct parses
    const auto doubles = [](const char * text, const char * c) {
        const auto g = parse_ok(text);
        llama_gbnf::matcher m(g);
        size_t n = 0;
        while (n < 40 && m.accept(c)) ++n;
        EXPECT_LT(n, 14u) << text;
        expect_gave_up(m, "more than 4096 parses are possible at once");
    };
    // the closing letters of every 'a' are still open
    doubles("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"\n", "a");
    // the shape of the fuzz finding (line{3,4} of an ambiguous rule): every '(' may open either
    // alternative, and what must follow differs
    doubles("# cment\nroot ::= line{3,4} \nline ::= \"(\" line \")\" \"x\"? | \"(\" line \")\" \"y\"? | [a-z]*\n", "(");
    // a long run of optional items: every 'a' may end any of them (quadratic work per step)
    {
        const auto g = parse_ok("root ::= (\"a\"?){150}\n");
        llama_gbnf::matcher_limits small;
        small.max_work = 5000;
        llama_gbnf::matcher m(g, small);
        EXPECT_FALSE(m.failed());   // the start alone fits
        EXPECT_FALSE(m.accept("a"));
        expect_gave_up(m, "steps of work for one token");
        // with the default limits it runs, and each accepted token refills the budget
        llama_gbnf::matcher ok(g);
        for (int k = 0; k < 150; ++k) ASSERT_TRUE(ok.accept("a")) << k << ": " << ok.error();
        EXPECT_TRUE(ok.complete());
    }
    // rules entered one inside the other before any character: the nesting cap, at the start
    {
        const auto g = parse_ok("root ::= (\"a\"?){5000}\n");
        llama_gbnf::matcher_limits deep;
        deep.max_stacks = 100000;
        llama_gbnf::matcher m(g, deep);
        expect_gave_up(m, "more than 4096 rules are entered before the next character");
    }
}

TEST(GrammarParse, RepetitionsThatExpandTooFarAreRefused) {
    std::string text = "root ::=";
    for (int i = 0; i < 60; ++i) text += " \"abcdefghij\"{100000}";
    const std::string err = parse_error(text + "\n");
    EXPECT_NE(err.find("repetitions make the grammar too large"), std::string::npos) << err;
    EXPECT_NE(err.find("line 1, column "), std::string::npos) << err;
    parse_ok("root ::= \"abcdefghij\"{30000} [a-z]{0,30000}\n");   // large but within the bound
}

// ---- sampling -----------------------------------------------------------------------------------

namespace {

struct model_fixture {
    llama_model * model = nullptr;
    llama_context * ctx = nullptr;
    const llama_vocab * vocab = nullptr;

    bool load() {
        const std::string path = kiln_test::shared_path("models/synth-qwen3-Q8_0.gguf");
        if (!kiln_test::file_exists(path)) return false;
        llama_backend_init();
        model = llama_model_load_from_file(path.c_str(), llama_model_default_params());
        if (!model) return false;
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 512;
        cp.n_threads = cp.n_threads_batch = 2;
        ctx = llama_init_from_model(model, cp);
        vocab = llama_model_get_vocab(model);
        return ctx != nullptr;
    }
    ~model_fixture() {
        if (ctx) llama_free(ctx);
        if (model) llama_model_free(model);
    }

    // Generates until an end-of-generation token (or max_tokens); *ended tells which.
    std::string generate(llama_sampler * smpl, const std::string & prompt, int max_tokens, bool * ended) {
        llama_memory_clear(ctx);
        std::vector<llama_token> toks = common_tokenize(vocab, prompt, false, true);
        std::string out;
        *ended = false;
        if (llama_decode(ctx, llama_batch_get_one(toks.data(), (int32_t) toks.size())) != 0) return out;
        for (int i = 0; i < max_tokens; ++i) {
            llama_token t = llama_sampler_sample(smpl, ctx, -1);
            if (t == LLAMA_TOKEN_NULL) break;
            if (llama_vocab_is_eog(vocab, t)) {
                *ended = true;
                break;
            }
            out += common_token_to_piece(vocab, t, true);
            if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) break;
        }
        return out;
    }
};

} // namespace

TEST(GrammarSampling, RandomModelOutputsAreAccepted) {
    model_fixture f;
    ASSERT_TRUE(f.load()) << "synth-qwen3-Q8_0.gguf does not load: " << llama_last_error();
    struct grammar_case {
        const char * name;
        const char * text;
        bool (*recognise)(const std::string &);
    };
    const grammar_case cases[] = {
        { "arithmetic", k_arithmetic, is_arithmetic },
        { "json", k_json, is_json_object },
        { "list", k_list, is_list },
        { "chess", k_chess, is_chess },
    };
    for (const auto & c : cases) {
        for (uint32_t seed = 1; seed <= 4; ++seed) {
            llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
            llama_sampler_chain_add(chain, llama_sampler_init_top_k(50));
            llama_sampler_chain_add(chain, llama_sampler_init_temp(1.5f));
            llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
            llama_sampler * g = llama_sampler_init_grammar(f.vocab, c.text, "root");
            ASSERT_NE(g, nullptr) << c.name;
            llama_sampler_chain_add(chain, g);
            bool ended = false;
            const std::string out = f.generate(chain, "<|im_start|>user\nhello<|im_end|>\n", 300, &ended);
            EXPECT_TRUE(ended) << c.name << " seed " << seed << ": no end of generation after: " << out;
            EXPECT_TRUE(c.recognise(out)) << c.name << " seed " << seed << " produced: " << out;
            llama_sampler_free(chain);
        }
    }
}

// With greedy selection the pick is the most likely token among those the grammar allows.
TEST(GrammarSampling, GreedyPicksTheBestAllowedToken) {
    model_fixture f;
    ASSERT_TRUE(f.load()) << "synth-qwen3-Q8_0.gguf does not load: " << llama_last_error();
    std::vector<llama_token> toks = common_tokenize(f.vocab, "hello", false, true);
    ASSERT_EQ(llama_decode(f.ctx, llama_batch_get_one(toks.data(), (int32_t) toks.size())), 0);
    const float * logits = llama_get_logits_ith(f.ctx, -1);
    const int32_t n_vocab = llama_vocab_n_tokens(f.vocab);
    // allowed first tokens: exactly the pieces "q" and "z"
    llama_token best = LLAMA_TOKEN_NULL;
    for (llama_token t = 0; t < n_vocab; ++t) {
        const std::string piece = common_token_to_piece(f.vocab, t, true);
        if ((piece == "q" || piece == "z") && (best == LLAMA_TOKEN_NULL || logits[t] > logits[best])) best = t;
    }
    ASSERT_NE(best, LLAMA_TOKEN_NULL);
    llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    llama_sampler_chain_add(chain, llama_sampler_init_grammar(f.vocab, "root ::= \"q\" | \"z\"", "root"));
    EXPECT_EQ(llama_sampler_chain_n(chain), 2);
    EXPECT_EQ(llama_sampler_sample(chain, f.ctx, -1), best);
    // the grammar is complete now: only an end-of-generation token is left
    const llama_token next = llama_sampler_sample(chain, f.ctx, -1);
    EXPECT_TRUE(llama_vocab_is_eog(f.vocab, next)) << next;
    llama_sampler_free(chain);

    char err[256];
    EXPECT_FALSE(llama_grammar_validate("root ::= \"a\" | bogus", "root", err, sizeof err));
    EXPECT_NE(std::string(err).find("line 1, column 16: undefined rule 'bogus'"), std::string::npos) << err;
    EXPECT_EQ(llama_sampler_init_grammar(f.vocab, "root ::= (", "root"), nullptr);
}

// Filtering the whole vocabulary (the trie walk) keeps exactly the tokens that checking each one
// alone (one-candidate arrays) allows, at several positions of a JSON grammar.
TEST(GrammarSampling, TrieWalkAgreesWithPerTokenChecks) {
    model_fixture f;
    ASSERT_TRUE(f.load()) << "synth-qwen3-Q8_0.gguf does not load: " << llama_last_error();
    const int32_t n_vocab = llama_vocab_n_tokens(f.vocab);
    const char * prefixes[] = { "", "{", "{ \"ab", "{\"a\": [1", "{\"a\": -1.5e", "{\"s\":\"\\u00", "{\"s\":\"x\"}" };
    for (const char * prefix : prefixes) {
        llama_sampler * g = llama_sampler_init_grammar(f.vocab, k_json, "root");
        ASSERT_NE(g, nullptr);
        for (llama_token t : common_tokenize(f.vocab, prefix, false, false)) llama_sampler_accept(g, t);
        std::vector<llama_token_data> all;
        for (llama_token t = 0; t < n_vocab; ++t) all.push_back({ t, 0.0f, 0.0f });
        llama_token_data_array arr = { all.data(), all.size(), -1, false };
        llama_sampler_apply(g, &arr);
        std::vector<llama_token> walked;
        for (size_t i = 0; i < arr.size; ++i) walked.push_back(arr.data[i].id);
        std::vector<llama_token> single;
        for (llama_token t = 0; t < n_vocab; ++t) {
            llama_token_data one = { t, 0.0f, 0.0f };
            llama_token_data_array a1 = { &one, 1, -1, false };
            llama_sampler_apply(g, &a1);
            if (a1.size == 1) single.push_back(t);
        }
        EXPECT_EQ(walked, single) << "after '" << prefix << "'";
        EXPECT_FALSE(walked.empty()) << "after '" << prefix << "'";
        llama_sampler_free(g);
    }
}

// The whole vocabulary, as one candidate array, after the sampler's filter.
static std::vector<llama_token_data> filtered_vocab(llama_sampler * s, int32_t n_vocab) {
    std::vector<llama_token_data> all;
    for (llama_token t = 0; t < n_vocab; ++t) all.push_back({ t, 0.0f, 0.0f });
    llama_token_data_array arr = { all.data(), all.size(), -1, false };
    llama_sampler_apply(s, &arr);
    all.resize(arr.size);
    return all;
}

// A lazy grammar leaves the output free until a trigger word appears (here as the special token
// and, separately, spelled out in plain text), then constrains from the trigger on.
TEST(GrammarSampling, LazyGrammarStartsAtTheTrigger) {
    model_fixture f;
    ASSERT_TRUE(f.load()) << "synth-qwen3-Q8_0.gguf does not load: " << llama_last_error();
    const int32_t n_vocab = llama_vocab_n_tokens(f.vocab);
    const char * grammar = "root ::= \"<tool_call>\\n\" [0-9]+ \"\\n</tool_call>\"";
    const char * triggers[] = { "<tool_call>" };
    auto allowed_count = [&](llama_sampler * s) {
        const std::vector<llama_token_data> kept = filtered_vocab(s, n_vocab);
        for (const llama_token_data & d : kept) {
            const std::string piece = common_token_to_piece(f.vocab, d.id, true);
            EXPECT_TRUE(kept.size() == (size_t) n_vocab || piece.rfind("\n", 0) == 0) << "'" << piece << "' allowed after the trigger";
        }
        return kept.size();
    };
    for (const char * text : { "Let me see <tool_call>", "Let me see <tool_", "Let me see <tool_call" }) {
        llama_sampler * s = llama_sampler_init_grammar_lazy(f.vocab, grammar, "root", triggers, 1);
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(allowed_count(s), (size_t) n_vocab);   // free before the trigger
        // special tokens on: "<tool_call>" is one token; the partial texts are plain tokens
        for (llama_token t : common_tokenize(f.vocab, text, false, true)) llama_sampler_accept(s, t);
        const bool complete_trigger = std::string(text).find("<tool_call>") != std::string::npos;
        if (complete_trigger) {
            EXPECT_LT(allowed_count(s), 50u) << text;
        } else {
            EXPECT_EQ(allowed_count(s), (size_t) n_vocab) << text;
            // the rest of the trigger arrives as plain text
            const std::string rest = std::string(text).back() == '_' ? "call>" : ">";
            for (llama_token t : common_tokenize(f.vocab, rest, false, false)) llama_sampler_accept(s, t);
            EXPECT_LT(allowed_count(s), 50u) << text;
        }
        llama_sampler_reset(s);
        EXPECT_EQ(allowed_count(s), (size_t) n_vocab);   // reset: waiting again
        llama_sampler_free(s);
    }
}

// A trigger inside the leading reasoning block is the model thinking about a call, not making
// one: the lazy grammar stays off until the block is closed, and only then reacts to a trigger.
TEST(GrammarSampling, LazyGrammarIgnoresTriggersWhileReasoning) {
    model_fixture f;
    ASSERT_TRUE(f.load()) << "synth-qwen3-Q8_0.gguf does not load: " << llama_last_error();
    const int32_t n_vocab = llama_vocab_n_tokens(f.vocab);
    const char * grammar = "root ::= \"<tool_call>\\n\" [0-9]+ \"\\n</tool_call>\"";
    const char * triggers[] = { "<tool_call>" };
    auto n_allowed = [&](llama_sampler * s) { return filtered_vocab(s, n_vocab).size(); };
    struct step_case {
        bool starts_inside;
        const char * text;
        bool constrained;
    };
    const step_case cases[] = {
        { false, "<think>maybe <tool_call>", false },               // inside the block
        { false, "\n<think>I could write <tool_call> then", false },
        { false, "<think>hm</think>\n\n<tool_call>", true },         // after it
        { false, "<think>a <tool_call> b</think> ok <tool_call>", true },
        { true, "thinking of <tool_call>", false },                 // the prompt opened the block
        { true, "done</think><tool_call>", true },
        { false, "No thinking here <tool_call>", true },            // no block at the start
        { false, "text <think> <tool_call>", true },                // a block later is not reasoning
    };
    for (const step_case & c : cases) {
        llama_sampler * s = llama_sampler_init_grammar_lazy_after_reasoning(f.vocab, grammar, "root", triggers, 1, "<think>",
                                                                            "</think>", c.starts_inside);
        ASSERT_NE(s, nullptr);
        // byte-sized pieces: the tags arrive split across tokens
        for (llama_token t : common_tokenize(f.vocab, c.text, false, false)) llama_sampler_accept(s, t);
        if (c.constrained) EXPECT_LT(n_allowed(s), 50u) << c.text;
        else EXPECT_EQ(n_allowed(s), (size_t) n_vocab) << c.text;
        llama_sampler_reset(s);
        EXPECT_EQ(n_allowed(s), (size_t) n_vocab) << "after reset: " << c.text;
        llama_sampler_free(s);
    }
}

// A grammar too ambiguous to follow ends the generation with a message, whether the sampler meets
// it at once (refused when created or validated), after some tokens, or after a lazy trigger.
TEST(GrammarSampling, TooAmbiguousGrammarFailsTheGeneration) {
    model_fixture f;
    ASSERT_TRUE(f.load()) << "synth-qwen3-Q8_0.gguf does not load: " << llama_last_error();
    const char * at_start = "root ::= (\"a\"?){20000}\n";
    char err[512];
    EXPECT_FALSE(llama_grammar_validate(at_start, "root", err, sizeof err));
    EXPECT_NE(std::string(err).find("too ambiguous"), std::string::npos) << err;
    EXPECT_EQ(llama_sampler_init_grammar(f.vocab, at_start, "root"), nullptr);

    const std::vector<llama_token> a = common_tokenize(f.vocab, "a", false, false);
    ASSERT_EQ(a.size(), 1u);
    std::vector<llama_token> toks = common_tokenize(f.vocab, "hello", false, true);
    ASSERT_EQ(llama_decode(f.ctx, llama_batch_get_one(toks.data(), (int32_t) toks.size())), 0);
    const char * doubling = "root ::= \"<tool_call>\" s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"\n";
    for (bool lazy : { false, true }) {
        llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
        const char * triggers[] = { "<tool_call>" };
        llama_sampler * g = lazy ? llama_sampler_init_grammar_lazy(f.vocab, doubling, "root", triggers, 1)
                                 : llama_sampler_init_grammar(f.vocab, doubling, "root");
        ASSERT_NE(g, nullptr);
        llama_sampler_chain_add(chain, g);
        if (lazy) {
            llama_sampler_accept(chain, a[0]);   // free text before the trigger
            EXPECT_NE(llama_sampler_sample(chain, f.ctx, -1), LLAMA_TOKEN_NULL);
        }
        for (llama_token t : common_tokenize(f.vocab, "<tool_call>", false, true)) llama_sampler_accept(chain, t);
        EXPECT_EQ(llama_sampler_error(chain), nullptr);
        for (int i = 0; i < 30; ++i) llama_sampler_accept(chain, a[0]);
        EXPECT_EQ(llama_sampler_sample(chain, f.ctx, -1), LLAMA_TOKEN_NULL) << (lazy ? "lazy" : "plain");
        const char * why = llama_sampler_error(chain);
        ASSERT_NE(why, nullptr);
        EXPECT_NE(std::string(why).find("the grammar is too ambiguous to follow"), std::string::npos) << why;
        llama_sampler_free(chain);
    }
}
