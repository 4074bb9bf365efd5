// Sequence state files (src/llama-state.cpp): a saved sequence loaded into a fresh context (and
// into another sequence id) continues with bit-identical logits; files of another model, other
// cache types, truncated or foreign files are refused with a message and leave the sequence as
// it was.
#include "llama.h"
#include "model-handles.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using kiln_test::context_ptr;
using kiln_test::model_ptr;

context_ptr make_ctx(llama_model * m, int n_seq = 2, ggml_type tk = GGML_TYPE_F16) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = 128;
    cp.n_seq_max = n_seq;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = tk;
    return context_ptr(llama_init_from_model(m, cp));
}

std::vector<llama_token> some_tokens(const llama_model * m, int n) {
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    std::vector<llama_token> t(n);
    for (int i = 0; i < n; ++i) t[i] = (llama_token) ((i * 7919 + 13) % n_vocab);
    return t;
}

std::string temp_path(const char * name) { return ::testing::TempDir() + "kiln-test-state-" + name; }

std::string read_bytes(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string & path, const std::string & bytes) { std::ofstream(path, std::ios::binary) << bytes; }

} // namespace

TEST(StateFile, SavedSequenceContinuesIdenticallyInAFreshContext) {
    // q8_KV: a cell's K is one row per head, each with its header (llama_kv_per_head_rows)
    const std::pair<const char *, ggml_type> runs[] = { { "stories260K.gguf", GGML_TYPE_F16 },
                                                        { "synth-qwen3-f16.gguf", GGML_TYPE_F16 },
                                                        { "synth-gemma3-f16.gguf", GGML_TYPE_F16 },
                                                        { "synth-qwen3-f16.gguf", GGML_TYPE_Q8_KV } };
    for (const auto & [name, tk] : runs) {
        SCOPED_TRACE(std::string(name) + " K " + ggml_type_name(tk));
        model_ptr m = kiln_test::load_shared_model(name);
        ASSERT_TRUE(m) << name;
        const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
        auto toks = some_tokens(m.get(), 40);
        const std::string path = temp_path("seq.bin");

        // the original: 30 tokens in sequence 1 (sequence 0 holds other tokens), then 10 more
        context_ptr a = make_ctx(m.get(), 2, tk);
        ASSERT_TRUE(a) << name;
        ASSERT_EQ(kiln_test::decode_tokens(a.get(), toks, 20, 20, 0, 0), 0);
        ASSERT_EQ(kiln_test::decode_tokens(a.get(), toks, 0, 30, 0, 1), 0);
        const size_t written = llama_state_seq_save_file(a.get(), path.c_str(), 1, toks.data(), 30);
        ASSERT_GT(written, 30 * sizeof(llama_token)) << llama_last_error();
        ASSERT_EQ(kiln_test::decode_tokens(a.get(), toks, 30, 10, 30, 1), 0);
        std::vector<float> want(llama_get_logits_ith(a.get(), 9), llama_get_logits_ith(a.get(), 9) + n_vocab);

        // restored into sequence 0 of a new context, after something else was there
        context_ptr b = make_ctx(m.get(), 2, tk);
        ASSERT_EQ(kiln_test::decode_tokens(b.get(), toks, 5, 12, 0, 0), 0);
        std::vector<llama_token> got(64);
        size_t n_got = 0;
        const size_t read = llama_state_seq_load_file(b.get(), path.c_str(), 0, got.data(), got.size(), &n_got);
        ASSERT_EQ(read, written) << llama_last_error();
        ASSERT_EQ(n_got, 30u);
        EXPECT_TRUE(std::equal(toks.begin(), toks.begin() + 30, got.begin()));
        EXPECT_EQ(llama_memory_seq_pos_min(b.get(), 0), 0);
        EXPECT_EQ(llama_memory_seq_pos_max(b.get(), 0), 29);
        ASSERT_EQ(kiln_test::decode_tokens(b.get(), toks, 30, 10, 30, 0), 0);
        // the same rows in other cells: equal up to the order attention adds them in
        EXPECT_LT(kiln_test::logits_rel_diff(llama_get_logits_ith(b.get(), 9), want.data(), n_vocab), 1e-5) << name;

        // control: without the restore the continuation differs (the test can fail)
        context_ptr c = make_ctx(m.get(), 2, tk);
        ASSERT_EQ(kiln_test::decode_tokens(c.get(), toks, 30, 10, 30, 0), 0);
        EXPECT_GT(kiln_test::logits_rel_diff(llama_get_logits_ith(c.get(), 9), want.data(), n_vocab), 1e-3) << name;
        std::remove(path.c_str());
    }
}

TEST(StateFile, ForeignTruncatedAndMismatchedFilesAreRefused) {
    model_ptr m = kiln_test::load_shared_model("synth-qwen3-f16.gguf");
    model_ptr other = kiln_test::load_shared_model("synth-qwen3-Q8_0.gguf");
    ASSERT_TRUE(m && other);
    auto toks = some_tokens(m.get(), 20);
    const std::string path = temp_path("good.bin");
    context_ptr a = make_ctx(m.get());
    ASSERT_EQ(kiln_test::decode_tokens(a.get(), toks, 0, 20, 0, 0), 0);
    ASSERT_GT(llama_state_seq_save_file(a.get(), path.c_str(), 0, toks.data(), toks.size()), 0u);
    const std::string good = read_bytes(path);

    std::vector<llama_token> out(64);
    size_t n = 0;
    auto refuses = [&](llama_context * ctx, const std::string & file, const char * why) {
        const llama_pos before = llama_memory_seq_pos_max(ctx, 1);
        EXPECT_EQ(llama_state_seq_load_file(ctx, file.c_str(), 1, out.data(), out.size(), &n), 0u) << why;
        EXPECT_NE(std::string(llama_last_error()).find(why), std::string::npos) << llama_last_error();
        EXPECT_EQ(llama_memory_seq_pos_max(ctx, 1), before) << why;
    };
    context_ptr b = make_ctx(m.get());
    ASSERT_EQ(kiln_test::decode_tokens(b.get(), toks, 0, 3, 0, 1), 0);

    // another quantization of the same model
    context_ptr q = make_ctx(other.get());
    ASSERT_EQ(kiln_test::decode_tokens(q.get(), toks, 0, 3, 0, 1), 0);
    refuses(q.get(), path, "another model");
    // another K cache type
    context_ptr k8 = make_ctx(m.get(), 2, GGML_TYPE_Q8_0);
    ASSERT_EQ(kiln_test::decode_tokens(k8.get(), toks, 0, 3, 0, 1), 0);
    refuses(k8.get(), path, "KV cache types");
    // not a state file; a llama.cpp-style header of another version; cut short
    const std::string bad = temp_path("bad.bin");
    write_bytes(bad, "hello, this is not a state file at all");
    refuses(b.get(), bad, "not a sequence state file");
    std::string other_version = good;
    other_version[4] = 2;
    other_version[5] = other_version[6] = other_version[7] = 0;
    write_bytes(bad, other_version);
    refuses(b.get(), bad, "version");
    write_bytes(bad, good.substr(0, 40));
    refuses(b.get(), bad, "ends early");
    refuses(b.get(), temp_path("missing.bin"), "cannot open");
    // too many tokens for the caller's buffer
    EXPECT_EQ(llama_state_seq_load_file(b.get(), path.c_str(), 1, out.data(), 5, &n), 0u);
    EXPECT_NE(std::string(llama_last_error()).find("more than the 5"), std::string::npos) << llama_last_error();
    // a sequence id the context does not have
    EXPECT_EQ(llama_state_seq_save_file(b.get(), bad.c_str(), 7, toks.data(), 1), 0u);
    EXPECT_NE(std::string(llama_last_error()).find("sequence 7"), std::string::npos) << llama_last_error();

    // rows cut off half-way, or bytes after the last: found before the sequence is touched
    write_bytes(bad, good.substr(0, good.size() - 100));
    refuses(b.get(), bad, "ends early");
    write_bytes(bad, good + "x");
    refuses(b.get(), bad, "bytes after its last row");
    EXPECT_EQ(llama_memory_seq_pos_max(b.get(), 1), 2);
    std::remove(bad.c_str());
    std::remove(path.c_str());
}

// Corrupted files (bytes changed in the header, the tokens, the positions or the row sizes, or
// cut anywhere) are refused or loaded, never read out of bounds; a loaded one keeps the slot's
// bookkeeping consistent (positions 0..n-1 for n tokens is the caller's check).
TEST(StateFile, CorruptedFilesNeverCrash) {
    model_ptr m = kiln_test::load_shared_model("stories260K.gguf");
    ASSERT_TRUE(m);
    auto toks = some_tokens(m.get(), 12);
    const std::string path = temp_path("fuzz.bin"), bad = temp_path("fuzz-bad.bin");
    context_ptr a = make_ctx(m.get());
    ASSERT_EQ(kiln_test::decode_tokens(a.get(), toks, 0, 12, 0, 0), 0);
    ASSERT_GT(llama_state_seq_save_file(a.get(), path.c_str(), 0, toks.data(), toks.size()), 0u);
    const std::string good = read_bytes(path);
    uint64_t rng = 12345;
    auto next = [&] { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return (uint32_t) (rng >> 33); };
    std::vector<llama_token> out(64);
    size_t n = 0;
    int n_refused = 0;
    for (int i = 0; i < 300; ++i) {
        std::string f = good;
        if (i % 3 == 0) {
            f.resize(next() % good.size());
        } else {
            // mostly the structured head of the file (header, tokens, positions, row sizes)
            const size_t at = next() % std::min<size_t>(f.size(), 200);
            f[at] = (char) next();
        }
        write_bytes(bad, f);
        if (llama_state_seq_load_file(a.get(), bad.c_str(), 1, out.data(), out.size(), &n) == 0) ++n_refused;
    }
    EXPECT_GT(n_refused, 100);
    std::remove(bad.c_str());
    std::remove(path.c_str());
}

TEST(StateFile, RecurrentModelsAreRefusedByName) {
    model_ptr m = kiln_test::load_shared_model("synth-qwen35-f16.gguf");
    ASSERT_TRUE(m);
    context_ptr a = make_ctx(m.get());
    ASSERT_TRUE(a);
    auto toks = some_tokens(m.get(), 4);
    const std::string path = temp_path("rs.bin");
    EXPECT_EQ(llama_state_seq_save_file(a.get(), path.c_str(), 0, toks.data(), toks.size()), 0u);
    EXPECT_NE(std::string(llama_last_error()).find("recurrent state"), std::string::npos) << llama_last_error();
    std::FILE * f = std::fopen(path.c_str(), "rb");
    EXPECT_EQ(f, nullptr) << "a refused save leaves no file";
    if (f) std::fclose(f);
}
