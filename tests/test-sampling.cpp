// Samplers against hand-computed and double-precision references on small candidate arrays,
// the chain, the parameters -> chain conversion, and llama_sampler_sample on a real model.
#include "common.h"
#include "llama.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace {

// A candidate array that owns its storage. Ids are 0..n-1 in input order.
struct candidates {
    std::vector<llama_token_data> data;
    llama_token_data_array arr;

    explicit candidates(const std::vector<float> & logits) {
        for (size_t i = 0; i < logits.size(); ++i) data.push_back({ (llama_token) i, logits[i], 0.0f });
        arr = { data.data(), data.size(), -1, false };
    }
    static candidates from_probs(const std::vector<float> & probs) {
        std::vector<float> logits;
        for (float p : probs) logits.push_back(std::log(p));
        return candidates(logits);
    }
    std::vector<llama_token> ids() const {
        std::vector<llama_token> out;
        for (size_t i = 0; i < arr.size; ++i) out.push_back(arr.data[i].id);
        return out;
    }
    std::set<llama_token> id_set() const {
        auto v = ids();
        return { v.begin(), v.end() };
    }
    float logit_of(llama_token id) const {
        for (size_t i = 0; i < arr.size; ++i) {
            if (arr.data[i].id == id) return arr.data[i].logit;
        }
        ADD_FAILURE() << "token " << id << " not among the candidates";
        return NAN;
    }
};

// Apply one sampler (freed afterwards).
void apply_one(llama_sampler * s, candidates & c) {
    llama_sampler_apply(s, &c.arr);
    llama_sampler_free(s);
}

std::vector<double> softmax_ref(const std::vector<float> & logits) {
    const double m = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(logits.size());
    double sum = 0;
    for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((double) logits[i] - m);
    for (double & x : p) x /= sum;
    return p;
}

// Reference locally-typical selection in double precision.
std::set<llama_token> typical_ref(const std::vector<float> & logits, double p, size_t min_keep) {
    const auto probs = softmax_ref(logits);
    double h = 0;
    for (double q : probs) h -= q * std::log(q);
    std::vector<size_t> idx(probs.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
        return std::fabs(-std::log(probs[a]) - h) < std::fabs(-std::log(probs[b]) - h);
    });
    std::set<llama_token> out;
    double cum = 0;
    for (size_t i = 0; i < idx.size(); ++i) {
        out.insert((llama_token) idx[i]);
        cum += probs[idx[i]];
        if (cum > p && i + 1 >= min_keep) break;
    }
    return out;
}

} // namespace

TEST(Sampling, GreedyPicksArgmaxFirstOnTies) {
    candidates c({ 0.5f, 3.0f, -1.0f, 3.0f, 2.9f });
    apply_one(llama_sampler_init_greedy(), c);
    ASSERT_EQ(c.arr.selected, 1);
    EXPECT_EQ(c.arr.size, 5u);   // greedy selects, it does not remove

    candidates empty({});
    apply_one(llama_sampler_init_greedy(), empty);
    EXPECT_EQ(empty.arr.selected, -1);
}

TEST(Sampling, TopKKeepsTheKLargestSorted) {
    candidates c({ 1.0f, 5.0f, 3.0f, 4.0f, 2.0f });
    apply_one(llama_sampler_init_top_k(2), c);
    EXPECT_EQ(c.ids(), (std::vector<llama_token>{ 1, 3 }));
    EXPECT_TRUE(c.arr.sorted);

    candidates all({ 1.0f, 5.0f, 3.0f });
    apply_one(llama_sampler_init_top_k(10), all);   // k > size: everything, sorted
    EXPECT_EQ(all.ids(), (std::vector<llama_token>{ 1, 2, 0 }));

    for (int k : { 0, -3 }) {   // k <= 0: no-op
        candidates same({ 1.0f, 5.0f, 3.0f });
        apply_one(llama_sampler_init_top_k(k), same);
        EXPECT_EQ(same.ids(), (std::vector<llama_token>{ 0, 1, 2 })) << "k = " << k;
        EXPECT_FALSE(same.arr.sorted);
    }
}

TEST(Sampling, TopPKeepsSmallestPrefixReachingP) {
    const std::vector<float> probs = { 0.1f, 0.2f, 0.3f, 0.4f };
    struct { float p; size_t min_keep; std::vector<llama_token> want; } cases[] = {
        { 0.35f, 1, { 3 } },          // 0.4 >= 0.35
        { 0.5f,  1, { 3, 2 } },       // 0.4 + 0.3
        { 0.75f, 1, { 3, 2, 1 } },    // 0.9
        { 0.95f, 1, { 3, 2, 1, 0 } },
        { 0.0f,  1, { 3 } },
        { 0.1f,  3, { 3, 2, 1 } },    // min_keep wins
    };
    for (const auto & tc : cases) {
        auto c = candidates::from_probs(probs);
        apply_one(llama_sampler_init_top_p(tc.p, tc.min_keep), c);
        EXPECT_EQ(c.ids(), tc.want) << "p = " << tc.p << " min_keep = " << tc.min_keep;
        // probabilities of the kept tokens are those of the full softmax
        for (size_t i = 0; i < c.arr.size; ++i) {
            EXPECT_NEAR(c.arr.data[i].p, probs[c.arr.data[i].id], 1e-6);
        }
    }
    auto c = candidates::from_probs(probs);
    apply_one(llama_sampler_init_top_p(1.0f, 1), c);   // p >= 1: no-op, order untouched
    EXPECT_EQ(c.ids(), (std::vector<llama_token>{ 0, 1, 2, 3 }));
}

TEST(Sampling, MinPKeepsTokensAboveFractionOfMax) {
    const std::vector<float> probs = { 0.1f, 0.2f, 0.3f, 0.4f };
    struct { float p; size_t min_keep; std::set<llama_token> want; } cases[] = {
        { 0.45f, 1, { 3, 2, 1 } },   // >= 0.18
        { 0.6f,  1, { 3, 2 } },      // >= 0.24
        { 0.8f,  1, { 3 } },         // >= 0.32
        { 0.8f,  2, { 3, 2 } },      // min_keep
        { 0.01f, 1, { 0, 1, 2, 3 } },
    };
    for (const auto & tc : cases) {
        for (bool presorted : { false, true }) {
            auto c = candidates::from_probs(probs);
            if (presorted) {
                apply_one(llama_sampler_init_top_k(100), c);   // sorts without removing
                ASSERT_TRUE(c.arr.sorted);
            }
            apply_one(llama_sampler_init_min_p(tc.p, tc.min_keep), c);
            EXPECT_EQ(c.id_set(), tc.want) << "p = " << tc.p << " min_keep = " << tc.min_keep << " sorted = " << presorted;
        }
    }
    auto c = candidates::from_probs(probs);
    apply_one(llama_sampler_init_min_p(0.0f, 1), c);
    EXPECT_EQ(c.ids(), (std::vector<llama_token>{ 0, 1, 2, 3 }));
}

TEST(Sampling, TypicalHandComputed) {
    // H = 0.168; the 0.97 token's surprise (0.03) is closest to it and alone exceeds 0.5
    auto a = candidates::from_probs({ 0.97f, 0.01f, 0.01f, 0.01f });
    apply_one(llama_sampler_init_typical(0.5f, 1), a);
    EXPECT_EQ(a.ids(), (std::vector<llama_token>{ 0 }));

    // H = 1.332; the 0.2 tokens (surprise 1.609) are more typical than the 0.4 one (0.916)
    auto b = candidates::from_probs({ 0.4f, 0.2f, 0.2f, 0.2f });
    apply_one(llama_sampler_init_typical(0.5f, 1), b);
    EXPECT_EQ(b.id_set(), (std::set<llama_token>{ 1, 2, 3 }));
    EXPECT_FALSE(b.arr.sorted);

    auto c = candidates::from_probs({ 0.4f, 0.2f, 0.2f, 0.2f });
    apply_one(llama_sampler_init_typical(1.0f, 1), c);   // p >= 1: no-op
    EXPECT_EQ(c.ids(), (std::vector<llama_token>{ 0, 1, 2, 3 }));
}

TEST(Sampling, TypicalMatchesDoubleReferenceOnRandomLogits) {
    for (uint32_t seed = 1; seed <= 20; ++seed) {
        const auto logits = kiln_test::random_floats(50, seed, -4.0f, 4.0f);
        for (float p : { 0.2f, 0.5f, 0.9f }) {
            for (size_t min_keep : { 1u, 10u }) {
                candidates c(logits);
                apply_one(llama_sampler_init_typical(p, min_keep), c);
                EXPECT_EQ(c.id_set(), typical_ref(logits, p, min_keep)) << "seed " << seed << " p " << p;
            }
        }
    }
}

TEST(Sampling, TemperatureScalesLogits) {
    const std::vector<float> logits = { 1.0f, -2.0f, 0.5f, 3.0f };
    for (float t : { 0.5f, 1.0f, 2.0f }) {
        candidates c(logits);
        apply_one(llama_sampler_init_temp(t), c);
        ASSERT_EQ(c.arr.size, 4u);
        for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(c.arr.data[i].logit, logits[i] / t, 1e-6) << "t = " << t;
    }
    for (float t : { 0.0f, -1.0f }) {   // t <= 0: only the argmax survives
        candidates c(logits);
        apply_one(llama_sampler_init_temp(t), c);
        EXPECT_EQ(c.logit_of(3), 3.0f);
        for (llama_token id : { 0, 1, 2 }) EXPECT_TRUE(std::isinf(c.logit_of(id)) && c.logit_of(id) < 0);
        apply_one(llama_sampler_init_dist(7), c);
        EXPECT_EQ(c.arr.data[c.arr.selected].id, 3);
    }
}

TEST(Sampling, PenaltiesOverWindow) {
    const std::vector<float> logits = { -1.0f, 2.0f, -3.0f, 4.0f, 1.0f };
    llama_sampler * s = llama_sampler_init_penalties(3, 2.0f, 0.5f, 0.25f);
    for (llama_token t : { 1, 1, 2 }) llama_sampler_accept(s, t);
    {
        candidates c(logits);
        llama_sampler_apply(s, &c.arr);
        EXPECT_FLOAT_EQ(c.logit_of(0), -1.0f);                         // not seen
        EXPECT_FLOAT_EQ(c.logit_of(1), 2.0f / 2.0f - 2 * 0.5f - 0.25f);   // positive: divided
        EXPECT_FLOAT_EQ(c.logit_of(2), -3.0f * 2.0f - 0.5f - 0.25f);      // negative: multiplied
        EXPECT_FLOAT_EQ(c.logit_of(3), 4.0f);
    }
    // window of 3: accepting 3 pushes out the first 1
    llama_sampler_accept(s, 3);
    {
        candidates c(logits);
        llama_sampler_apply(s, &c.arr);
        EXPECT_FLOAT_EQ(c.logit_of(1), 2.0f / 2.0f - 0.5f - 0.25f);
        EXPECT_FLOAT_EQ(c.logit_of(3), 4.0f / 2.0f - 0.5f - 0.25f);
    }
    llama_sampler_reset(s);
    {
        candidates c(logits);
        llama_sampler_apply(s, &c.arr);
        for (size_t i = 0; i < logits.size(); ++i) EXPECT_EQ(c.logit_of((llama_token) i), logits[i]);
    }
    llama_sampler_free(s);

    // last_n = 0 disables
    s = llama_sampler_init_penalties(0, 2.0f, 1.0f, 1.0f);
    llama_sampler_accept(s, 1);
    candidates c(logits);
    llama_sampler_apply(s, &c.arr);
    EXPECT_EQ(c.logit_of(1), 2.0f);
    llama_sampler_free(s);
}

TEST(Sampling, PenaltiesWindowMatchesBruteForce) {
    // a long random history wraps the window many times; after every token the penalised
    // logits must equal those computed from the last n tokens directly
    const int32_t last_n = 7;
    const float repeat = 1.5f, freq = 0.2f, present = 0.1f;
    const auto base = kiln_test::random_floats(10, 3, -2.0f, 2.0f);
    llama_sampler * s = llama_sampler_init_penalties(last_n, repeat, freq, present);
    std::mt19937 rng(5);
    std::vector<llama_token> history;
    for (int step = 0; step < 200; ++step) {
        const llama_token t = (llama_token) (rng() % 10);
        history.push_back(t);
        llama_sampler_accept(s, t);
        candidates c(base);
        llama_sampler_apply(s, &c.arr);
        for (llama_token id = 0; id < 10; ++id) {
            int count = 0;
            for (size_t k = history.size() > (size_t) last_n ? history.size() - last_n : 0; k < history.size(); ++k) {
                count += history[k] == id;
            }
            double want = base[id];
            if (count > 0) want = (want <= 0 ? want * repeat : want / repeat) - count * freq - present;
            ASSERT_NEAR(c.logit_of(id), want, 1e-5) << "step " << step << " token " << id;
        }
    }
    llama_sampler_free(s);
}

TEST(Sampling, DistIsReproducibleWithSeed) {
    const std::vector<float> logits = { 0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f };
    auto draw_sequence = [&](llama_sampler * s, int n) {
        std::vector<llama_token> out;
        for (int i = 0; i < n; ++i) {
            candidates c(logits);
            llama_sampler_apply(s, &c.arr);
            out.push_back(c.arr.data[c.arr.selected].id);
        }
        return out;
    };
    llama_sampler * a = llama_sampler_init_dist(1234);
    llama_sampler * b = llama_sampler_init_dist(1234);
    llama_sampler * d = llama_sampler_init_dist(99);
    const auto sa = draw_sequence(a, 64);
    EXPECT_EQ(sa, draw_sequence(b, 64));
    EXPECT_NE(sa, draw_sequence(d, 64));
    llama_sampler_reset(a);   // reset restarts the seeded stream
    EXPECT_EQ(sa, draw_sequence(a, 64));
    llama_sampler_free(a);
    llama_sampler_free(b);
    llama_sampler_free(d);
}

TEST(Sampling, DistFrequenciesFollowSoftmax) {
    const std::vector<float> probs = { 0.1f, 0.2f, 0.3f, 0.4f, 0.0f };
    std::vector<float> logits;
    for (float p : probs) logits.push_back(p > 0 ? std::log(p) : -std::numeric_limits<float>::infinity());
    llama_sampler * s = llama_sampler_init_dist(42);
    const int n = 40000;
    std::vector<int> hist(probs.size(), 0);
    for (int i = 0; i < n; ++i) {
        candidates c(logits);
        llama_sampler_apply(s, &c.arr);
        ASSERT_GE(c.arr.selected, 0);
        hist[c.arr.data[c.arr.selected].id]++;
    }
    llama_sampler_free(s);
    for (size_t i = 0; i < probs.size(); ++i) {
        // binomial standard deviation at n = 40000 is at most 0.0025
        EXPECT_NEAR((double) hist[i] / n, probs[i], 0.01) << "token " << i;
    }
    EXPECT_EQ(hist[4], 0);   // -inf is never drawn
}

TEST(Sampling, ChainAppliesInOrder) {
    const std::vector<float> probs = { 0.1f, 0.2f, 0.3f, 0.4f };
    // temp 0.5 squares the probabilities (0.533 for the top token), so top-p 0.5 keeps one token;
    // before the temperature it keeps two (0.4 + 0.3).
    llama_sampler * first = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(first, llama_sampler_init_temp(0.5f));
    llama_sampler_chain_add(first, llama_sampler_init_top_p(0.5f, 1));
    llama_sampler * second = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(second, llama_sampler_init_top_p(0.5f, 1));
    llama_sampler_chain_add(second, llama_sampler_init_temp(0.5f));
    EXPECT_EQ(llama_sampler_chain_n(first), 2);
    EXPECT_STREQ(llama_sampler_name(first), "chain");

    auto a = candidates::from_probs(probs);
    llama_sampler_apply(first, &a.arr);
    EXPECT_EQ(a.ids(), (std::vector<llama_token>{ 3 }));
    auto b = candidates::from_probs(probs);
    llama_sampler_apply(second, &b.arr);
    EXPECT_EQ(b.ids(), (std::vector<llama_token>{ 3, 2 }));
    llama_sampler_free(first);
    llama_sampler_free(second);
}

TEST(Sampling, ChainForwardsAcceptToPenalties) {
    // a repeat penalty of 10 makes the repeated top token lose to the runner-up
    llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_penalties(8, 10.0f, 0.0f, 0.0f));
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    candidates c1({ 1.0f, 5.0f, 4.0f });
    llama_sampler_apply(chain, &c1.arr);
    EXPECT_EQ(c1.arr.data[c1.arr.selected].id, 1);
    llama_sampler_accept(chain, 1);
    candidates c2({ 1.0f, 5.0f, 4.0f });
    llama_sampler_apply(chain, &c2.arr);
    EXPECT_EQ(c2.arr.data[c2.arr.selected].id, 2);
    llama_sampler_reset(chain);
    candidates c3({ 1.0f, 5.0f, 4.0f });
    llama_sampler_apply(chain, &c3.arr);
    EXPECT_EQ(c3.arr.data[c3.arr.selected].id, 1);
    llama_sampler_free(chain);
}

TEST(Sampling, AddingToANonChainIsRejected) {
    llama_sampler * g = llama_sampler_init_greedy();
    llama_sampler_chain_add(g, llama_sampler_init_top_k(3));   // logged, the added sampler is freed
    EXPECT_EQ(llama_sampler_chain_n(g), 0);
    llama_sampler_free(g);
}

TEST(Sampling, ChainFromParams) {
    common_params_sampling sp;
    sp.temp = 0.0f;
    llama_sampler * s = common_sampler_chain_from_params(sp, 512);
    EXPECT_EQ(llama_sampler_chain_n(s), 1);   // greedy only
    llama_sampler_free(s);

    sp.penalty_repeat = 1.3f;
    s = common_sampler_chain_from_params(sp, 512);
    EXPECT_EQ(llama_sampler_chain_n(s), 2);   // penalties, greedy
    llama_sampler_free(s);

    sp.temp = 0.7f;
    s = common_sampler_chain_from_params(sp, 512);
    EXPECT_EQ(llama_sampler_chain_n(s), 7);   // penalties, top-k, typical, top-p, min-p, temp, dist
    llama_sampler_free(s);

    // a top-k 1 chain is deterministic whatever the seed
    sp.penalty_repeat = 1.0f;
    sp.top_k = 1;
    for (uint32_t seed : { 1u, 2u, 3u }) {
        sp.seed = seed;
        s = common_sampler_chain_from_params(sp, 512);
        candidates c({ 0.3f, 2.5f, 2.4f, -1.0f });
        llama_sampler_apply(s, &c.arr);
        EXPECT_EQ(c.arr.data[c.arr.selected].id, 1);
        llama_sampler_free(s);
    }

    // a seeded chain draws the same tokens twice
    sp.top_k = 40;
    sp.seed = 5;
    std::vector<llama_token> runs[2];
    for (auto & run : runs) {
        s = common_sampler_chain_from_params(sp, 512);
        for (int i = 0; i < 32; ++i) {
            candidates c({ 0.3f, 0.5f, 0.4f, 0.1f, 0.45f });
            llama_sampler_apply(s, &c.arr);
            run.push_back(c.arr.data[c.arr.selected].id);
        }
        llama_sampler_free(s);
    }
    EXPECT_EQ(runs[0], runs[1]);
}

// llama_sampler_sample on a real model: greedy equals the argmax of the logits.
TEST(Sampling, SampleFromContext) {
    const std::string path = kiln_test::shared_path("models/stories260K.gguf");
    ASSERT_TRUE(kiln_test::file_exists(path)) << path << " not present";
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(path.c_str(), mp);
    ASSERT_NE(model, nullptr) << llama_last_error();
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = cp.n_threads_batch = 1;
    llama_context * ctx = llama_init_from_model(model, cp);
    ASSERT_NE(ctx, nullptr) << llama_last_error();
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);

    std::vector<llama_token> prompt = common_tokenize(vocab, "Once upon a time", true);
    ASSERT_FALSE(prompt.empty());
    ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(prompt.data(), (int32_t) prompt.size())), 0);

    const float * logits = llama_get_logits_ith(ctx, -1);
    ASSERT_NE(logits, nullptr);
    const llama_token argmax = (llama_token) (std::max_element(logits, logits + n_vocab) - logits);

    llama_sampler * greedy = llama_sampler_init_greedy();
    EXPECT_EQ(llama_sampler_sample(greedy, ctx, -1), argmax);
    EXPECT_EQ(llama_sampler_sample(greedy, ctx, -1), argmax);   // the reused buffer is refilled
    llama_sampler_free(greedy);

    // a chain without a selector falls back to the most likely remaining candidate
    llama_sampler * topk = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(topk, llama_sampler_init_top_k(5));
    EXPECT_EQ(llama_sampler_sample(topk, ctx, -1), argmax);
    llama_sampler_free(topk);

    // top-k 3 + dist only ever returns one of the 3 best tokens
    std::vector<int32_t> order(n_vocab);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 3, order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    const std::set<llama_token> top3(order.begin(), order.begin() + 3);
    llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(3));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(11));
    for (int i = 0; i < 50; ++i) EXPECT_TRUE(top3.count(llama_sampler_sample(chain, ctx, -1)));
    llama_sampler_free(chain);

    llama_free(ctx);
    llama_model_free(model);
}

// The vocab C wrappers' buffer conventions, on the stories260K SPM vocab.
TEST(VocabApi, BufferConventions) {
    const std::string path = kiln_test::shared_path("models/stories260K.gguf");
    ASSERT_TRUE(kiln_test::file_exists(path)) << path << " not present";
    llama_model * model = llama_model_load_from_file(path.c_str(), llama_model_default_params());
    ASSERT_NE(model, nullptr) << llama_last_error();
    const llama_vocab * vocab = llama_model_get_vocab(model);
    EXPECT_EQ(llama_vocab_type(vocab), LLAMA_VOCAB_TYPE_SPM);
    EXPECT_EQ(llama_vocab_n_tokens(vocab), 512);

    const std::string text = "Once upon a time";
    llama_token few[2];
    const int32_t need = llama_tokenize(vocab, text.data(), (int32_t) text.size(), few, 2, true, false);
    ASSERT_LT(need, -2);   // too small: minus the count
    std::vector<llama_token> toks((size_t) -need);
    ASSERT_EQ(llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), (int32_t) toks.size(), true, false),
              -need);
    EXPECT_EQ(toks[0], llama_vocab_bos(vocab));
    EXPECT_TRUE(llama_vocab_get_add_bos(vocab));

    // the SPM piece of "Once" starts with a space (U+2581 decoded); lstrip removes it
    char buf[64];
    const llama_token once = toks[1];
    const int32_t n_full = llama_token_to_piece(vocab, once, buf, sizeof(buf), 0, false);
    ASSERT_GT(n_full, 0);
    const std::string full(buf, (size_t) n_full);
    ASSERT_EQ(full[0], ' ');
    const int32_t n_strip = llama_token_to_piece(vocab, once, buf, sizeof(buf), 1, false);
    EXPECT_EQ(std::string(buf, (size_t) n_strip), full.substr(1));
    EXPECT_EQ(llama_token_to_piece(vocab, once, buf, 1, 0, false), -n_full);   // too small

    // BOS is a control token: empty unless special
    EXPECT_EQ(llama_token_to_piece(vocab, llama_vocab_bos(vocab), buf, sizeof(buf), 0, false), 0);
    EXPECT_TRUE(llama_vocab_is_control(vocab, llama_vocab_bos(vocab)));
    EXPECT_TRUE(llama_vocab_is_eog(vocab, llama_vocab_eos(vocab)));
    EXPECT_STREQ(llama_vocab_get_text(vocab, -5), "");   // out of range is safe

    char small[4];
    const int32_t n_text = llama_detokenize(vocab, toks.data(), (int32_t) toks.size(), small, sizeof(small), true, false);
    ASSERT_LT(n_text, -4);
    std::string out((size_t) -n_text, '\0');
    ASSERT_EQ(llama_detokenize(vocab, toks.data(), (int32_t) toks.size(), out.data(), (int32_t) out.size(), true, false),
              -n_text);
    // llama.cpp keeps the word-start space when a BOS precedes the text, and strips it otherwise
    EXPECT_EQ(out, " " + text);
    EXPECT_EQ(common_detokenize(vocab, std::vector<llama_token>(toks.begin() + 1, toks.end()), false), text);
    llama_model_free(model);
}
