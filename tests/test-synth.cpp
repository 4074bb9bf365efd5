// Synthetic models (common/synth.h): the vocabulary is a consistent byte-level BPE (every merge
// joins two existing tokens into one that exists), the written weights have the intended scale,
// and libllama tokenizes text with it losslessly and recognizes the control tokens.
#include "gguf.h"
#include "llama.h"
#include "synth.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <unistd.h>

namespace {

std::string temp_path(const char * tag) {
    return "/tmp/kiln-test-synth-" + std::to_string(getpid()) + "-" + tag + ".gguf";
}

TEST(SynthVocab, MergesAreConsistent) {
    const kiln_synth_vocab v = kiln_synth_build_vocab(4104, 4096);
    ASSERT_EQ(v.tokens.size(), 4104u);
    ASSERT_EQ(v.types.size(), 4104u);
    EXPECT_EQ(v.id_endoftext, 4096);
    EXPECT_EQ(v.id_im_start, 4097);
    EXPECT_EQ(v.id_im_end, 4098);
    EXPECT_EQ(v.tokens[4097], "<|im_start|>");
    EXPECT_EQ(v.tokens[4098], "<|im_end|>");
    EXPECT_EQ(v.tokens[0], "!");   // GPT-2's byte order
    EXPECT_GT(v.merges.size(), 1000u);

    std::map<std::string, int> id;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        EXPECT_TRUE(id.emplace(v.tokens[i], (int) i).second) << "duplicate token " << v.tokens[i];
    }
    for (size_t m = 0; m < v.merges.size(); ++m) {
        const std::string & s = v.merges[m];
        const size_t sp = s.find(' ');
        ASSERT_NE(sp, std::string::npos) << s;
        const std::string a = s.substr(0, sp), b = s.substr(sp + 1);
        ASSERT_TRUE(id.count(a) && id.count(b)) << "merge " << s << " of unknown tokens";
        ASSERT_TRUE(id.count(a + b)) << "merge " << s << " without its result token";
        // merge m creates token 256 + m, after both of its parts
        EXPECT_EQ(id[a + b], 256 + (int) m);
        EXPECT_LT(id[a], id[a + b]);
        EXPECT_LT(id[b], id[a + b]);
    }
    for (int i = 256 + (int) v.merges.size(); i < 4096; ++i) EXPECT_EQ(v.types[i], 5) << i;   // padding: unused
}

TEST(SynthVocab, RealSizePadsAroundTheSpecials) {
    const kiln_synth_vocab v = kiln_synth_build_vocab(151936, 151643);
    ASSERT_EQ(v.tokens.size(), 151936u);
    EXPECT_EQ(v.id_im_end, 151645);
    EXPECT_EQ(v.tokens[151645], "<|im_end|>");
    EXPECT_EQ(v.tokens[151935], "[PAD151935]");
    EXPECT_EQ(v.tokens[151642], "[PAD151642]");
}

TEST(SynthModel, WeightsHaveUnitScaleActivations) {
    const std::string path = temp_path("scale");
    kiln_synth_options opt;
    opt.preset = "tiny-qwen3";
    opt.type = GGML_TYPE_F32;
    std::string err;
    ASSERT_TRUE(kiln_synth_write(opt, path, err)) << err;
    ggml_context * data_ctx = nullptr;
    gguf_init_params ip = { false, &data_ctx };
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    ASSERT_NE(g, nullptr) << gguf_last_error();
    auto stats = [&](const char * name, double & mean, double & sd) {
        ggml_tensor * t = ggml_get_tensor(data_ctx, name);
        ASSERT_NE(t, nullptr) << name;
        const float * x = (const float *) t->data;
        const int64_t n = ggml_nelements(t);
        double s = 0, s2 = 0;
        for (int64_t i = 0; i < n; ++i) {
            s += x[i];
            s2 += (double) x[i] * x[i];
        }
        mean = s / n;
        sd = std::sqrt(s2 / n - mean * mean);
    };
    double mean = 0, sd = 0;
    stats("blk.0.ffn_down.weight", mean, sd);   // fan-in 768
    EXPECT_NEAR(sd, 1.0 / std::sqrt(768.0), 0.02 / std::sqrt(768.0));
    EXPECT_NEAR(mean, 0.0, 0.01 / std::sqrt(768.0));
    stats("blk.1.attn_q.weight", mean, sd);     // fan-in 256
    EXPECT_NEAR(sd, 1.0 / 16.0, 0.02 / 16.0);
    stats("output_norm.weight", mean, sd);
    EXPECT_EQ(mean, 1.0);
    EXPECT_EQ(sd, 0.0);
    gguf_free(g);
    ggml_free(data_ctx);
    std::remove(path.c_str());
}

TEST(SynthModel, TokenizesLosslessly) {
    const std::string path = temp_path("tok");
    std::string err;
    ASSERT_TRUE(kiln_synth_write("tiny-qwen3", path.c_str(), err)) << err;
    llama_model * model = llama_model_load_from_file(path.c_str(), llama_model_default_params());
    ASSERT_NE(model, nullptr) << llama_last_error();
    const llama_vocab * vocab = llama_model_get_vocab(model);
    EXPECT_EQ(llama_vocab_n_tokens(vocab), 4104);
    EXPECT_EQ(llama_vocab_eos(vocab), 4098);
    EXPECT_FALSE(llama_vocab_get_add_bos(vocab));

    const std::string text = "The history of the city, and the people who live there: 1,234 years.\n\nNew ideas  (caf\xc3\xa9)!";
    std::vector<llama_token> toks(256);
    const int n = llama_tokenize(vocab, text.data(), (int) text.size(), toks.data(), (int) toks.size(), false, false);
    ASSERT_GT(n, 0);
    EXPECT_LT(n, (int) text.size() / 2) << "common words should be single tokens";
    std::string back(text.size() * 2, '\0');
    const int nb = llama_detokenize(vocab, toks.data(), n, back.data(), (int) back.size(), false, false);
    ASSERT_GE(nb, 0);
    back.resize(nb);
    EXPECT_EQ(back, text);

    const std::string chat = "<|im_start|>user\nhi<|im_end|>";
    const int nc = llama_tokenize(vocab, chat.data(), (int) chat.size(), toks.data(), (int) toks.size(), false, true);
    ASSERT_GT(nc, 2);
    EXPECT_EQ(toks[0], 4097);
    EXPECT_EQ(toks[nc - 1], 4098);
    llama_model_free(model);
    std::remove(path.c_str());
}

TEST(SynthModel, BadOptionsAreRefused) {
    kiln_synth_options opt;
    std::string err;
    opt.preset = "nope";
    EXPECT_FALSE(kiln_synth_validate(opt, err));
    EXPECT_NE(err.find("nope"), std::string::npos);
    opt.preset = "qwen3-0.6b";
    opt.n_experts = 8;
    EXPECT_FALSE(kiln_synth_validate(opt, err));
    opt.n_experts = -1;
    opt.type = GGML_TYPE_Q4_0;
    EXPECT_FALSE(kiln_synth_validate(opt, err));
    opt.type = GGML_TYPE_F16;
    EXPECT_TRUE(kiln_synth_validate(opt, err)) << err;
    EXPECT_FALSE(kiln_synth_write(opt, "/nonexistent-dir/x.gguf", err));
    EXPECT_NE(err.find("/nonexistent-dir/x.gguf"), std::string::npos) << err;
}

} // namespace
