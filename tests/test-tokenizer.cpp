// Tokenizers against the reference: the llama.cpp vocab suites in shared/vocab, the golden
// tokenize.json (special tokens parsed, BOS per metadata), the token streams stored in the
// reference's KL-divergence base files, round trips, partial UTF-8 and speed.

#include "llama-vocab.h"
#include "llama-vocab-impl.h"
#include "unicode.h"
#include "gguf.h"
#include "testing.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

namespace {

std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Load the vocabulary of a GGUF file (metadata only). Empty err on success.
std::unique_ptr<llama_vocab> load_vocab(const std::string & path, std::string & err) {
    gguf_init_params params{};
    params.no_alloc = true;
    params.ctx = nullptr;
    gguf_context * ctx = gguf_init_from_file(path.c_str(), params);
    if (!ctx) {
        err = std::string("cannot read ") + path + ": " + gguf_last_error();
        return nullptr;
    }
    auto vocab = std::make_unique<llama_vocab>();
    const bool ok = vocab->load(ctx, err);
    gguf_free(ctx);
    if (!ok) return nullptr;
    err.clear();
    return vocab;
}

std::string ids_to_string(const std::vector<int32_t> & ids) {
    std::string s;
    for (int32_t id : ids) s += " " + std::to_string(id);
    return s;
}

struct vocab_suite {
    std::vector<std::string> inputs;
    std::vector<std::vector<int32_t>> expected;
};

// .inp: strings separated by "\n__ggml_vocab_test__\n" (the file ends with a separator);
// .out: one line of space-separated ids per string.
vocab_suite read_suite(const std::string & base) {
    vocab_suite s;
    const std::string raw = read_file(base + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    size_t pos = 0;
    while (pos < raw.size()) {
        const size_t next = raw.find(sep, pos);
        if (next == std::string::npos) { s.inputs.push_back(raw.substr(pos)); break; }
        s.inputs.push_back(raw.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::ifstream out(base + ".out");
    std::string line;
    while (std::getline(out, line)) {
        std::istringstream ls(line);
        std::vector<int32_t> ids;
        int32_t id;
        while (ls >> id) ids.push_back(id);
        s.expected.push_back(std::move(ids));
    }
    return s;
}

// The vocab files shared/vocab holds. Some of the suite's files are too large to carry (its README
// says so), so the tests are made from what the folder holds rather than from a fixed list that
// would skip the absent ones: NAME for each ggml-vocab-NAME.gguf, split by whether its reference
// (.inp and .out) is there. VocabSuitesPresent fails when the folder is missing.
std::vector<std::string> vocab_names(bool with_reference) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto & e : std::filesystem::directory_iterator(kiln_test::shared_path("vocab"), ec)) {
        const std::string f = e.path().filename().string();
        const std::string prefix = "ggml-vocab-", suffix = ".gguf";
        if (f.size() <= prefix.size() + suffix.size() || f.compare(0, prefix.size(), prefix) != 0 ||
            f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0) {
            continue;
        }
        const std::string full = e.path().string();
        const bool has_reference = kiln_test::file_exists(full + ".inp") && kiln_test::file_exists(full + ".out");
        if (has_reference == with_reference) names.push_back(f.substr(prefix.size(), f.size() - prefix.size() - suffix.size()));
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string vocab_path(const std::string & name) { return kiln_test::shared_path("vocab/ggml-vocab-" + name + ".gguf"); }

std::string param_name(const ::testing::TestParamInfo<std::string> & info) {
    std::string n = info.param;
    for (char & c : n) if (!std::isalnum((unsigned char) c)) c = '_';
    return n;
}

class VocabSuite : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabSuite, MatchesReference) {
    const std::string base = vocab_path(GetParam());
    std::string err;
    auto vocab = load_vocab(base, err);
    ASSERT_TRUE(vocab) << err;

    const vocab_suite suite = read_suite(base);
    ASSERT_FALSE(suite.inputs.empty());
    ASSERT_EQ(suite.inputs.size(), suite.expected.size()) << "inp/out line count mismatch";

    // the reference's test tokenizes with add_special = false and parse_special = false
    size_t pass = 0;
    for (size_t i = 0; i < suite.inputs.size(); ++i) {
        const std::vector<int32_t> got = vocab->tokenize(suite.inputs[i], false, false);
        if (got == suite.expected[i]) {
            ++pass;
        } else {
            ADD_FAILURE() << GetParam() << " string " << i << " '" << suite.inputs[i] << "'\n  expected:"
                          << ids_to_string(suite.expected[i]) << "\n  got:     " << ids_to_string(got);
        }
    }
    std::printf("[ vocab    ] %-16s %zu/%zu strings match\n", GetParam().c_str(), pass, suite.inputs.size());
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, VocabSuite, ::testing::ValuesIn(vocab_names(true)), param_name);

// A vocab file without a reference: it loads, and the suite's strings (those of gpt-2's
// reference) come back unchanged through tokenize and detokenize. A vocabulary that cleans up
// spaces when decoding (gpt-neox: " ?" becomes "?") is checked on its pieces joined instead.
class VocabWithoutReference : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabWithoutReference, LoadsAndRoundTrips) {
    std::string err;
    auto vocab = load_vocab(vocab_path(GetParam()), err);
    ASSERT_TRUE(vocab) << err;
    const vocab_suite suite = read_suite(vocab_path("gpt-2"));
    ASSERT_FALSE(suite.inputs.empty());
    for (const std::string & s : suite.inputs) {
        const auto ids = vocab->tokenize(s, false, false);
        std::string pieces;
        for (int32_t id : ids) {
            ASSERT_LT((uint32_t) id, vocab->n_tokens());
            pieces += vocab->token_to_piece(id, false);
        }
        EXPECT_EQ(vocab->clean_spaces() ? pieces : vocab->detokenize(ids, false, false), s) << GetParam() << ": '" << s << "'";
    }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, VocabWithoutReference, ::testing::ValuesIn(vocab_names(false)), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VocabWithoutReference);

TEST(Tokenizer, VocabSuitesPresent) {
    // guard against testing nothing (wrong shared dir): the three tokenizer families with references
    const std::vector<std::string> names = vocab_names(true);
    for (const char * name : {"llama-spm", "gpt-2", "bert-bge"}) {
        EXPECT_NE(std::find(names.begin(), names.end(), name), names.end())
            << "ggml-vocab-" << name << ".gguf with .inp/.out not found in " << kiln_test::shared_path("vocab");
    }
}

TEST(Tokenizer, GoldenTokenizeJson) {
    const std::string path = kiln_test::shared_path("golden/tokenize/tokenize.json");
    ASSERT_TRUE(kiln_test::file_exists(path)) << path;
    const auto golden = nlohmann::json::parse(read_file(path));
    ASSERT_FALSE(golden.empty());
    for (const auto & [model, cases] : golden.items()) {
        std::string err;
        auto vocab = load_vocab(kiln_test::shared_path("models/" + model), err);
        ASSERT_TRUE(vocab) << err;
        size_t pass = 0;
        for (const auto & c : cases) {
            const std::string text = c.at("text").get<std::string>();
            const std::vector<int32_t> want = c.at("ids").get<std::vector<int32_t>>();
            const std::vector<int32_t> got = vocab->tokenize(text, true, true);
            if (got == want) {
                ++pass;
            } else {
                ADD_FAILURE() << model << " '" << text << "'\n  expected:" << ids_to_string(want)
                              << "\n  got:     " << ids_to_string(got);
            }
        }
        std::printf("[ golden   ] %-22s %zu/%zu strings match\n", model.c_str(), pass, cases.size());
    }
}

// The reference's KL-divergence base files store the tokenization of the wikitext sample
// (add_special = true, parse_special = false) it computed perplexity on.
TEST(Tokenizer, WikitextMatchesPerplexityBaseTokens) {
    const std::string text = read_file(kiln_test::shared_path("text/wikitext-2-test-300k.txt"));
    ASSERT_FALSE(text.empty());
    for (const char * model : {"stories260K", "synth-qwen3-f16"}) {
        const std::string kld = read_file(kiln_test::shared_path(std::string("golden/ppl/") + model + ".kld"));
        ASSERT_GT(kld.size(), 20u);
        ASSERT_EQ(kld.compare(0, 8, "_logits_"), 0);
        int32_t hdr[3];
        std::memcpy(hdr, kld.data() + 8, sizeof(hdr));
        const size_t n = (size_t) hdr[0] * hdr[2];
        ASSERT_GE(kld.size(), 20 + n * 4);
        std::vector<int32_t> want(n);
        std::memcpy(want.data(), kld.data() + 20, n * 4);

        std::string err;
        auto vocab = load_vocab(kiln_test::shared_path(std::string("models/") + model + ".gguf"), err);
        ASSERT_TRUE(vocab) << err;
        std::vector<int32_t> got = vocab->tokenize(text, true, false);
        ASSERT_GE(got.size(), n);
        got.resize(n);
        size_t first_diff = n;
        for (size_t i = 0; i < n; ++i) if (got[i] != want[i]) { first_diff = i; break; }
        EXPECT_EQ(first_diff, n) << model << ": first mismatch at token " << first_diff;
    }
}

// Byte-level BPE without space cleaning reproduces its input exactly.
TEST(Tokenizer, RoundTripByteLevelBpe) {
    const std::string base = kiln_test::shared_path("vocab/ggml-vocab-gpt-2.gguf");
    const vocab_suite suite = read_suite(base);
    const std::string wiki = read_file(kiln_test::shared_path("text/wikitext-2-test-300k.txt")).substr(0, 20000);
    for (const char * path : {"models/synth-qwen3-f16.gguf", "vocab/ggml-vocab-deepseek-coder.gguf", "vocab/ggml-vocab-deepseek-llm.gguf"}) {
        const std::string full = kiln_test::shared_path(path);
        std::string err;
        auto vocab = load_vocab(full, err);
        ASSERT_TRUE(vocab) << err;
        ASSERT_FALSE(vocab->clean_spaces()) << path;
        std::vector<std::string> inputs = suite.inputs;
        inputs.push_back(wiki);
        inputs.push_back("<|im_start|>user\nHi<|im_end|>");
        for (const std::string & s : inputs) {
            const auto ids = vocab->tokenize(s, false, true);
            EXPECT_EQ(vocab->detokenize(ids, false, true), s) << path << ": '" << s.substr(0, 80) << "'";
        }
    }
}

// SPM undoes its space prefix, so plain text round-trips too.
TEST(Tokenizer, RoundTripSpm) {
    std::string err;
    auto vocab = load_vocab(kiln_test::shared_path("vocab/ggml-vocab-llama-spm.gguf"), err);
    ASSERT_TRUE(vocab) << err;
    const vocab_suite suite = read_suite(kiln_test::shared_path("vocab/ggml-vocab-llama-spm.gguf"));
    for (const std::string & s : suite.inputs) {
        const auto ids = vocab->tokenize(s, true, false);
        ASSERT_EQ(ids.at(0), vocab->bos());
        // as in the reference, the prefix space stays when a leading BOS is removed
        EXPECT_EQ(vocab->detokenize(ids, true, false), s.empty() ? s : " " + s);
        const auto ids2 = vocab->tokenize(s, false, false);
        EXPECT_EQ(vocab->detokenize(ids2, false, false), s);
    }
}

TEST(Tokenizer, PartialUtf8Pieces) {
    const std::string llama = "\xF0\x9F\xA6\x99";   // U+1F999, not a token: byte fallback in SPM
    {
        std::string err;
        auto vocab = load_vocab(kiln_test::shared_path("models/stories260K.gguf"), err);
        ASSERT_TRUE(vocab) << err;
        const auto ids = vocab->tokenize(llama, false, false);
        // "▁" then four byte tokens
        ASSERT_EQ(ids.size(), 5u);
        for (size_t i = 1; i < 5; ++i) {
            EXPECT_TRUE(vocab->is_byte(ids[i]));
            EXPECT_EQ(vocab->token_to_piece(ids[i], false), llama.substr(i - 1, 1));
        }
        // a prefix of the byte tokens gives the raw partial sequence, the whole gives the char
        EXPECT_EQ(vocab->detokenize({ids[1], ids[2]}, false, false), llama.substr(0, 2));
        EXPECT_EQ(vocab->detokenize(ids, false, false), llama);
    }
    {
        std::string err;
        auto vocab = load_vocab(kiln_test::shared_path("models/synth-qwen3-f16.gguf"), err);
        ASSERT_TRUE(vocab) << err;
        const auto ids = vocab->tokenize(llama, false, false);
        ASSERT_GE(ids.size(), 2u);
        std::string acc;
        for (int32_t id : ids) acc += vocab->token_to_piece(id, false);
        EXPECT_EQ(acc, llama);
        EXPECT_NE(vocab->token_to_piece(ids[0], false), llama) << "pieces are partial byte sequences";
    }
}

TEST(Tokenizer, SpecialTokensAndAttributes) {
    std::string err;
    auto vocab = load_vocab(kiln_test::shared_path("models/synth-qwen3-f16.gguf"), err);
    ASSERT_TRUE(vocab) << err;
    const int32_t im_start = vocab->text_to_token("<|im_start|>");
    ASSERT_EQ(im_start, 4097);
    EXPECT_TRUE(vocab->is_control(im_start));
    EXPECT_EQ(vocab->eos(), 4098);
    EXPECT_TRUE(vocab->is_eog(4098));
    EXPECT_TRUE(vocab->is_eog(4096));   // <|endoftext|> by its text
    EXPECT_FALSE(vocab->is_eog(im_start));
    EXPECT_FALSE(vocab->add_bos());
    // control tokens: parsed only on request, rendered only on request
    EXPECT_EQ(vocab->tokenize("<|im_start|>", false, true), std::vector<int32_t>{im_start});
    EXPECT_GT(vocab->tokenize("<|im_start|>", false, false).size(), 1u);
    EXPECT_EQ(vocab->token_to_piece(im_start, false), "");
    EXPECT_EQ(vocab->token_to_piece(im_start, true), "<|im_start|>");
    EXPECT_EQ(vocab->detokenize({im_start, 40}, false, false), vocab->token_to_piece(40, false));
    // invalid ids never crash
    EXPECT_EQ(vocab->token_to_piece(-5, true), "");
    EXPECT_EQ(vocab->token_to_piece(1 << 30, true), "");

    auto spm = load_vocab(kiln_test::shared_path("models/stories260K.gguf"), err);
    ASSERT_TRUE(spm) << err;
    EXPECT_EQ(spm->bos(), 1);
    EXPECT_EQ(spm->eos(), 2);
    EXPECT_TRUE(spm->add_bos());
    EXPECT_EQ(spm->sep(), llama_vocab::TOKEN_NULL) << "out-of-range sep id falls back to none";
    EXPECT_FALSE(spm->warnings().empty());
    EXPECT_EQ(spm->tokenize("", true, false), std::vector<int32_t>{1});
    EXPECT_TRUE(spm->tokenize("", false, false).empty());
    // invalid UTF-8 is tokenized byte-wise without crashing
    const auto bad = spm->tokenize(std::string("a\xFF\xC3"), false, false);
    EXPECT_EQ(spm->detokenize(bad, false, false), std::string("a\xFF\xC3"));
}

TEST(Tokenizer, AddSpecialPerModel) {
    std::string err;
    auto bert = load_vocab(kiln_test::shared_path("vocab/ggml-vocab-bert-bge.gguf"), err);
    ASSERT_TRUE(bert) << err;
    const auto b = bert->tokenize("Hello world", true, false);
    ASSERT_EQ(b.size(), 4u);
    EXPECT_EQ(b.front(), 101);   // [CLS]
    EXPECT_EQ(b.back(), 102);    // [SEP]
    EXPECT_EQ(std::vector<int32_t>(b.begin() + 1, b.end() - 1), bert->tokenize("Hello world", false, false));
    EXPECT_EQ(bert->tokenize("[MASK]", false, true), std::vector<int32_t>{103});

    auto ds = load_vocab(kiln_test::shared_path("vocab/ggml-vocab-deepseek-llm.gguf"), err);
    ASSERT_TRUE(ds) << err;
    EXPECT_TRUE(ds->add_bos());
    EXPECT_EQ(ds->tokenize("Hi", true, false).front(), 100000);
    EXPECT_TRUE(ds->is_eog(100001));
    EXPECT_EQ(ds->detokenize(ds->tokenize("Hi", true, false), true, false), "Hi");
}

TEST(Tokenizer, LoadErrorsNameTheKey) {
    std::string err;
    llama_vocab v;
    gguf_context * ctx = gguf_init_empty();
    ASSERT_NE(ctx, nullptr);
    EXPECT_FALSE(v.load(ctx, err));
    EXPECT_NE(err.find("tokenizer.ggml.model"), std::string::npos) << err;

    gguf_set_val_str(ctx, "tokenizer.ggml.model", "gpt2");
    EXPECT_FALSE(v.load(ctx, err));
    EXPECT_NE(err.find("tokenizer.ggml.tokens"), std::string::npos) << err;

    const char * toks[] = {"a", "b", "ab"};
    gguf_set_arr_str(ctx, "tokenizer.ggml.tokens", toks, 3);
    EXPECT_FALSE(v.load(ctx, err));
    EXPECT_NE(err.find("tokenizer.ggml.merges"), std::string::npos) << err;

    const char * merges[] = {"a b"};
    gguf_set_arr_str(ctx, "tokenizer.ggml.merges", merges, 1);
    const float scores[2] = {0, 0};
    gguf_set_arr_data(ctx, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 2);
    EXPECT_FALSE(v.load(ctx, err));
    EXPECT_NE(err.find("tokenizer.ggml.scores"), std::string::npos) << err;
    gguf_remove_key(ctx, "tokenizer.ggml.scores");

    gguf_set_val_str(ctx, "tokenizer.ggml.pre", "no-such-family");
    EXPECT_FALSE(v.load(ctx, err));
    EXPECT_NE(err.find("no-such-family"), std::string::npos) << err;

    gguf_set_val_str(ctx, "tokenizer.ggml.pre", "gpt-2");
    gguf_set_val_f32(ctx, "tokenizer.ggml.add_bos_token", 1.0f);
    EXPECT_FALSE(v.load(ctx, err));
    EXPECT_NE(err.find("tokenizer.ggml.add_bos_token"), std::string::npos) << err;
    gguf_remove_key(ctx, "tokenizer.ggml.add_bos_token");

    ASSERT_TRUE(v.load(ctx, err)) << err;
    EXPECT_EQ(v.tokenize("ab", false, false), std::vector<int32_t>{2});
    EXPECT_EQ(v.tokenize("ba", false, false), (std::vector<int32_t>{1, 0}));
    gguf_free(ctx);
}

// Found by fuzz-gguf: a WordPiece vocabulary smaller than BERT's default ids ([UNK] = 100,
// [CLS] = 101 ...) and without the keys that set them emitted those ids. Defaults outside the
// vocabulary mean "no such token"; nothing tokenize returns is out of range.
TEST(Tokenizer, DefaultSpecialIdsOutsideASmallVocabAreNone) {
    gguf_context * ctx = gguf_init_empty();
    ASSERT_NE(ctx, nullptr);
    gguf_set_val_str(ctx, "tokenizer.ggml.model", "bert");
    // as the reference's converter writes WordPiece: word starts marked with U+2581, no "##"
    const char * toks[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xe2\x96\x81hello", "s", "\xe2\x96\x81world", "\xe2\x96\x81,"};
    gguf_set_arr_str(ctx, "tokenizer.ggml.tokens", toks, 8);
    llama_vocab v;
    std::string err;
    ASSERT_TRUE(v.load(ctx, err)) << err;
    EXPECT_EQ(v.unk(), llama_vocab::TOKEN_NULL);
    EXPECT_EQ(v.bos(), llama_vocab::TOKEN_NULL);
    for (const char * text : {"hello worlds, zzz", "[CLS] qq", ""}) {
        for (bool add_special : {false, true}) {
            for (int32_t id : v.tokenize(text, add_special, true)) EXPECT_LT((uint32_t) id, v.n_tokens()) << text;
        }
    }
    EXPECT_EQ(v.tokenize("hello worlds", true, false), (std::vector<int32_t>{4, 6, 5}));
    gguf_free(ctx);
}

TEST(Tokenizer, UnicodeTables) {
    EXPECT_TRUE(unicode_is_letter('a'));
    EXPECT_TRUE(unicode_is_letter(0x4E2D));            // 中
    EXPECT_TRUE(unicode_is_number(0x0663));            // Arabic-Indic three
    EXPECT_TRUE(unicode_is_whitespace(0x3000));
    EXPECT_FALSE(unicode_is_whitespace(0x1C));
    EXPECT_TRUE(unicode_cpt_flags(0x0301) & UNICODE_FLAG_MARK);
    EXPECT_TRUE(unicode_cpt_flags(0x00BF) & UNICODE_FLAG_PUNCTUATION);   // ¿
    EXPECT_TRUE(unicode_cpt_flags(0x20AC) & UNICODE_FLAG_SYMBOL);        // €
    EXPECT_EQ(unicode_tolower('A'), (uint32_t) 'a');
    EXPECT_EQ(unicode_tolower(0x0416), 0x0436u);       // Ж -> ж
    EXPECT_EQ(unicode_nfd_first(0x00E9), (uint32_t) 'e');
    EXPECT_EQ(unicode_nfd_first(0xAC00), 0x1100u);     // 가 -> ᄀ
    EXPECT_EQ(unicode_nfd_first('x'), (uint32_t) 'x');
    for (int b = 0; b < 256; ++b) {
        const std::string & u = unicode_byte_to_utf8((uint8_t) b);
        size_t off = 0;
        uint8_t back = 0;
        ASSERT_TRUE(unicode_utf8_to_byte(unicode_cpt_from_utf8(u, off), back));
        EXPECT_EQ(back, b);
    }
    EXPECT_EQ(unicode_cpts_from_utf8("a\xE2\x82"), (std::vector<uint32_t>{'a', 0xFFFD, 0xFFFD}));
}

// Pre-tokenizer families whose vocab files are not in shared/vocab, checked on hand-derived
// splits of the regexes (digit grouping, case-insensitive contractions, newline runs).
TEST(Tokenizer, PretokenizerSplits) {
    auto split = [](llama_vocab::pre_type pre, const std::string & text) {
        std::vector<std::string> words;
        EXPECT_TRUE(llama_bpe_pretokenize(pre, text, words));
        std::vector<std::string> raw;   // undo the byte -> code point mapping for readability
        for (const std::string & w : words) {
            std::string r;
            size_t off = 0;
            while (off < w.size()) {
                uint8_t b = 0;
                EXPECT_TRUE(unicode_utf8_to_byte(unicode_cpt_from_utf8(w, off), b));
                r += (char) b;
            }
            raw.push_back(r);
        }
        return raw;
    };
    using P = llama_vocab::pre_type;
    using V = std::vector<std::string>;
    EXPECT_EQ(split(P::llama3, "12345"), (V{"123", "45"}));
    EXPECT_EQ(split(P::qwen2, "12345"), (V{"1", "2", "3", "4", "5"}));
    EXPECT_EQ(split(P::llama3, "I'M here"), (V{"I", "'M", " here"}));
    EXPECT_EQ(split(P::gpt2, "I'M here"), (V{"I", "'", "M", " here"}));
    EXPECT_EQ(split(P::gpt2, "it's"), (V{"it", "'s"}));
    EXPECT_EQ(split(P::llama3, "a\n\n b"), (V{"a", "\n\n", " b"}));
    EXPECT_EQ(split(P::llama3, "a  b  "), (V{"a", " ", " b", "  "}));
    EXPECT_EQ(split(P::gpt2, "a  b"), (V{"a", " ", " b"}));
    EXPECT_EQ(split(P::gpt2, "x\ty"), (V{"x", "\t", "y"}));
    EXPECT_EQ(split(P::llama3, "!!\n\nx"), (V{"!!\n\n", "x"}));
    EXPECT_EQ(split(P::llama3, "\u00e9t\u00e9 \u4e2d\u6587"), (V{"\u00e9t\u00e9", " \u4e2d\u6587"}));
    EXPECT_EQ(split(P::starcoder, "ab 123"), (V{"ab", " ", "1", "2", "3"}));
    EXPECT_EQ(split(P::default_, "a+=1234"), (V{"a", "+=", "123", "4"}));
    EXPECT_EQ(split(P::bloom, "hi, there"), (V{"hi", ",", " there"}));
    EXPECT_EQ(split(P::deepseek_v3, "Hello, 12345 world"), (V{"Hello", ",", " ", "123", "45", " world"}));
    EXPECT_EQ(split(P::deepseek_v3, "\u65e5\u672c\u8a9e\u3067\u3059!"), (V{"\u65e5\u672c\u8a9e\u3067\u3059", "!"}));
    EXPECT_EQ(split(P::deepseek_v3, ".Net"), (V{".Net"}));
    EXPECT_EQ(split(P::tekken, "HelloWorld"), (V{"Hello", "World"}));
    EXPECT_EQ(split(P::tekken, "HTTPServer"), (V{"HTTPServer"}));
    EXPECT_EQ(split(P::tekken, "ABC def 12"), (V{"ABC", " def", " ", "1", "2"}));
    EXPECT_EQ(split(P::gpt4o, "I'm HERE's 12345"), (V{"I'm", " HERE's", " ", "123", "45"}));
}

// Arbitrary bytes and ids: every tokenizer returns valid ids and never reads out of bounds.
TEST(Tokenizer, RandomInputIsSafe) {
    std::mt19937 rng(1234);
    for (const char * path : {"models/stories260K.gguf", "models/synth-qwen3-f16.gguf", "vocab/ggml-vocab-bert-bge.gguf",
                              "vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-falcon.gguf"}) {
        std::string err;
        auto vocab = load_vocab(kiln_test::shared_path(path), err);
        ASSERT_TRUE(vocab) << err;
        for (int iter = 0; iter < 50; ++iter) {
            std::string s(rng() % 64, '\0');
            for (char & c : s) {
                // mostly ASCII and UTF-8 lead/continuation bytes, so sequences are sometimes valid
                const uint32_t r = rng() % 4;
                c = (char) (r == 0 ? 0x80 + rng() % 64 : r == 1 ? 0xC0 + rng() % 64 : 0x09 + rng() % 0x76);
            }
            for (bool special : {false, true}) {
                const auto ids = vocab->tokenize(s, special, special);
                for (int32_t id : ids) ASSERT_TRUE(vocab->valid(id)) << path << " id " << id;
                (void) vocab->detokenize(ids, special, special);
            }
            std::vector<int32_t> junk(8);
            for (int32_t & id : junk) id = (int32_t) (rng() % (vocab->n_tokens() + 20)) - 10;
            (void) vocab->detokenize(junk, true, true);
        }
    }
}

TEST(Tokenizer, SpeedBpeWikitext) {
    const std::string text = read_file(kiln_test::shared_path("text/wikitext-2-test-300k.txt"));
    for (const char * path : {"models/synth-qwen3-f16.gguf", "vocab/ggml-vocab-gpt-2.gguf"}) {
        std::string err;
        auto vocab = load_vocab(kiln_test::shared_path(path), err);
        ASSERT_TRUE(vocab) << err;
        // the time is printed, not asserted: speed is for benchmarks, and a sanitizer build is slow
        const std::clock_t c0 = std::clock();
        const auto ids = vocab->tokenize(text, false, false);
        const double s = double(std::clock() - c0) / CLOCKS_PER_SEC;
        std::printf("[ speed    ] %-36s %zu bytes -> %zu tokens in %.3f s CPU\n", path, text.size(), ids.size(), s);
        EXPECT_GT(ids.size(), text.size() / 8);
    }
}

} // namespace
