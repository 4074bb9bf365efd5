// Logit bias, XTC, top-n-sigma and mirostat v1 / v2 against distributions worked out by hand
// (see each test's comment for the arithmetic).
#include "common.h"
#include "llama.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

struct cands {
    std::vector<llama_token_data> data;
    llama_token_data_array arr;
    explicit cands(const std::vector<float> & logits) {
        for (size_t i = 0; i < logits.size(); ++i) data.push_back({ (llama_token) i, logits[i], 0.0f });
        arr = { data.data(), data.size(), -1, false };
    }
    static cands probs(const std::vector<double> & p) {
        std::vector<float> l;
        for (double x : p) l.push_back((float) std::log(x));
        return cands(l);
    }
    std::vector<llama_token> ids() const {
        std::vector<llama_token> out;
        for (size_t i = 0; i < arr.size; ++i) out.push_back(arr.data[i].id);
        return out;
    }
};

void apply_free(llama_sampler * s, cands & c) {
    llama_sampler_apply(s, &c.arr);
    llama_sampler_free(s);
}

} // namespace

TEST(SamplingAdaptive, LogitBias) {
    cands c({ 1.0f, 2.0f, 3.0f, 4.0f });
    const llama_logit_bias lb[] = { { 0, 5.0f }, { 2, -INFINITY }, { 0, 0.5f }, { 99, 1.0f } };   // 99: out of range, ignored
    apply_free(llama_sampler_init_logit_bias(4, 4, lb), c);
    EXPECT_FLOAT_EQ(c.data[0].logit, 6.5f);
    EXPECT_FLOAT_EQ(c.data[1].logit, 2.0f);
    EXPECT_TRUE(std::isinf(c.data[2].logit) && c.data[2].logit < 0);
    EXPECT_FLOAT_EQ(c.data[3].logit, 4.0f);
}

// logits 0..4: mean 2, standard deviation sqrt(2) = 1.414. n = 1 keeps logits >= 4 - 1.414
// (3 and 4); n = 2 keeps >= 1.17 (2, 3, 4); n = 0 is off.
TEST(SamplingAdaptive, TopNSigma) {
    cands a({ 0, 1, 2, 3, 4 });
    apply_free(llama_sampler_init_top_n_sigma(1.0f), a);
    EXPECT_EQ(a.ids(), (std::vector<llama_token>{ 3, 4 }));
    cands b({ 4, 0, 3, 1, 2 });
    apply_free(llama_sampler_init_top_n_sigma(2.0f), b);
    EXPECT_EQ(b.ids(), (std::vector<llama_token>{ 0, 2, 4 }));
    cands c({ 0, 1, 2, 3, 4 });
    apply_free(llama_sampler_init_top_n_sigma(0.0f), c);
    EXPECT_EQ(c.arr.size, 5u);
}

// p = 0.4 0.3 0.2 0.1. Threshold 0.25: two tokens pass, the more likely (0) goes. Threshold 0.35:
// only one passes, nothing changes. Probability 0: never applies.
TEST(SamplingAdaptive, Xtc) {
    cands a = cands::probs({ 0.4, 0.3, 0.2, 0.1 });
    apply_free(llama_sampler_init_xtc(1.0f, 0.25f, 1, 1), a);
    EXPECT_EQ(a.ids(), (std::vector<llama_token>{ 1, 2, 3 }));
    cands b = cands::probs({ 0.4, 0.3, 0.2, 0.1 });
    apply_free(llama_sampler_init_xtc(1.0f, 0.35f, 1, 1), b);
    EXPECT_EQ(b.arr.size, 4u);
    cands c = cands::probs({ 0.4, 0.3, 0.2, 0.1 });
    apply_free(llama_sampler_init_xtc(0.0f, 0.25f, 1, 1), c);
    EXPECT_EQ(c.arr.size, 4u);
    // min_keep 4: removing one would leave 3
    cands d = cands::probs({ 0.4, 0.3, 0.2, 0.1 });
    apply_free(llama_sampler_init_xtc(1.0f, 0.25f, 4, 1), d);
    EXPECT_EQ(d.arr.size, 4u);
}

// p = 1/2 1/4 1/8 1/8: surprises 1, 2, 3, 3 bits. tau 1 -> mu 2 keeps the first two,
// renormalized to 2/3 and 1/3. Picking token 0 (surprise log2(3/2) = 0.585) moves mu to
// 2 - 0.1 * (0.585 - 1) = 2.0415: the same two stay next time; picking token 1 (surprise
// log2 3 = 1.585) moves it to 1.9415, below 2 bits: only token 0 stays.
TEST(SamplingAdaptive, MirostatV2) {
    int picked[2] = { 0, 0 };
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        llama_sampler * s = llama_sampler_init_mirostat_v2(seed, 1.0f, 0.1f);
        cands c = cands::probs({ 0.5, 0.25, 0.125, 0.125 });
        llama_sampler_apply(s, &c.arr);
        ASSERT_EQ(c.arr.size, 2u);
        EXPECT_NEAR(c.arr.data[0].p, 2.0 / 3.0, 1e-5);
        EXPECT_NEAR(c.arr.data[1].p, 1.0 / 3.0, 1e-5);
        ASSERT_GE(c.arr.selected, 0);
        const llama_token first = c.arr.data[c.arr.selected].id;
        picked[first]++;
        cands next = cands::probs({ 0.5, 0.25, 0.125, 0.125 });
        llama_sampler_apply(s, &next.arr);
        EXPECT_EQ(next.arr.size, first == 0 ? 2u : 1u) << "seed " << seed;
        llama_sampler_free(s);
    }
    EXPECT_GT(picked[0], 0);
    EXPECT_GT(picked[1], 0);
    // tau 1.6 -> mu 3.2: all four stay (at exactly 3 bits rounding would decide)
    llama_sampler * wide = llama_sampler_init_mirostat_v2(7, 1.6f, 0.1f);
    cands c = cands::probs({ 0.5, 0.25, 0.125, 0.125 });
    llama_sampler_apply(wide, &c.arr);
    EXPECT_EQ(c.arr.size, 4u);
    llama_sampler_free(wide);
}

// Zipf with exponent 2 over 1000 tokens: the estimate is s = 2 exactly, eps = 1, and with tau 3
// (mu 6) k = (2^6 / (1 - 1/1000))^(1/2) = 8.004: the top 8 tokens stay.
TEST(SamplingAdaptive, MirostatV1) {
    std::vector<double> p;
    double z = 0.0;
    for (int i = 0; i < 1000; ++i) z += 1.0 / ((i + 1.0) * (i + 1.0));
    for (int i = 0; i < 1000; ++i) p.push_back(1.0 / ((i + 1.0) * (i + 1.0)) / z);
    llama_sampler * s = llama_sampler_init_mirostat(1000, 3, 3.0f, 0.1f, 100);
    cands c = cands::probs(p);
    llama_sampler_apply(s, &c.arr);
    EXPECT_EQ(c.arr.size, 8u);
    ASSERT_GE(c.arr.selected, 0);
    EXPECT_LT(c.arr.data[c.arr.selected].id, 8);
    llama_sampler_free(s);
}

// DRY on the synthetic model's vocabulary, with A B C three word tokens and N a newline
// (a breaker). multiplier 1, base 2, allowed length 2: a repeat of length L costs 2^(L - 2).
TEST(SamplingAdaptive, Dry) {
    const std::string path = kiln_test::shared_path("models/synth-qwen3-Q8_0.gguf");
    ASSERT_TRUE(kiln_test::file_exists(path)) << path << " not present";
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(path.c_str(), llama_model_default_params());
    ASSERT_NE(model, nullptr);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    auto one = [&](const char * text) {
        llama_token t[4];
        EXPECT_EQ(llama_tokenize(vocab, text, (int32_t) strlen(text), t, 4, false, false), 1) << text;
        return t[0];
    };
    const llama_token A = one(" the"), B = one(" cat"), C = one(" sat"), N = one("\n");
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const char * breakers[] = { "\n" };
    // the penalty each of A, B, C, N gets after the history
    auto penalties = [&](const std::vector<llama_token> & history, size_t n_breakers) {
        llama_sampler * s = llama_sampler_init_dry(vocab, 4096, 1.0f, 2.0f, 2, -1, breakers, n_breakers);
        for (llama_token t : history) llama_sampler_accept(s, t);
        std::vector<float> logits(n_vocab, 0.0f);
        cands c(logits);
        llama_sampler_apply(s, &c.arr);
        llama_sampler_free(s);
        return std::vector<float>{ -c.data[A].logit, -c.data[B].logit, -c.data[C].logit, -c.data[N].logit };
    };
    // A B C A B: "A B" was followed by C: C extends a repeat of 2 -> 2^0 = 1
    EXPECT_EQ(penalties({ A, B, C, A, B }, 1), (std::vector<float>{ 0, 0, 1, 0 }));
    // A B C A B C A B: C extends "A B C A B" (length 5) -> 2^3 = 8
    EXPECT_EQ(penalties({ A, B, C, A, B, C, A, B }, 1), (std::vector<float>{ 0, 0, 8, 0 }));
    // A N B A N B: A would extend "B" only, the match stops at the breaker N; without breakers
    // it extends "A N B" (3) -> 2
    EXPECT_EQ(penalties({ A, N, B, A, N, B }, 1), (std::vector<float>{ 0, 0, 0, 0 }));
    EXPECT_EQ(penalties({ A, N, B, A, N, B }, 0), (std::vector<float>{ 2, 0, 0, 0 }));
    // output ending in a breaker: nothing is penalized
    EXPECT_EQ(penalties({ A, B, N, A, B, N }, 1), (std::vector<float>{ 0, 0, 0, 0 }));
    llama_model_free(model);
}

// The "samplers" order: p = 0.4 0.3 0.2 0.1 with top-k 2 and top-p 0.5. top-k first leaves
// 0.4 / 0.3 -> 0.571 / 0.429, then top-p keeps one; top-p first keeps two (0.4 < 0.5 <= 0.7),
// then top-k keeps both.
TEST(SamplingAdaptive, SamplerOrder) {
    common_params_sampling sp;
    sp.top_k = 2;
    sp.top_p = 0.5f;
    sp.min_p = 0.0f;
    sp.temp = 1.0f;
    sp.seed = 1;
    auto kept = [&](std::vector<std::string> order) {
        sp.samplers = std::move(order);
        llama_sampler * chain = common_sampler_chain_from_params(sp, 64);
        cands c = cands::probs({ 0.4, 0.3, 0.2, 0.1 });
        llama_sampler_apply(chain, &c.arr);
        llama_sampler_free(chain);
        return c.arr.size;
    };
    EXPECT_EQ(kept({ "top_k", "top_p" }), 1u);
    EXPECT_EQ(kept({ "top_p", "top_k" }), 2u);
    EXPECT_EQ(kept({}), 4u);   // nothing but the final draw
    EXPECT_EQ(common_sampler_canonical_name("temp"), "temperature");
    EXPECT_EQ(common_sampler_canonical_name("typical_p"), "typ_p");
    EXPECT_EQ(common_sampler_canonical_name("top-k"), "");
}
