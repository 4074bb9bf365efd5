// Samplers beyond the classic filters: logit bias, XTC (exclude top choices), top-n-sigma and
// mirostat v1 / v2. Semantics follow llama.cpp's so the same options give the same candidate
// sets; mirostat keeps its running target (mu) between tokens and selects the token itself.
#include "llama-sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace {

// Adds a bias to given tokens' logits (-inf bans them). The biases are a table indexed by token
// id built once, so applying costs one pass over the candidates.
struct sampler_logit_bias final : llama_sampler {
    std::vector<float> bias;   // per token id
    std::vector<llama_token> ids;

    sampler_logit_bias(int32_t n_vocab, int32_t n, const llama_logit_bias * lb) : bias((size_t) std::max(n_vocab, 0), 0.0f) {
        for (int32_t i = 0; i < n; ++i) {
            if (lb[i].token < 0 || lb[i].token >= n_vocab) continue;
            if (bias[(size_t) lb[i].token] == 0.0f) ids.push_back(lb[i].token);
            bias[(size_t) lb[i].token] += lb[i].bias;
        }
    }
    const char * name() const override { return "logit-bias"; }
    void apply(llama_token_data_array * cur_p) override {
        if (ids.empty()) return;
        for (size_t i = 0; i < cur_p->size; ++i) {
            const llama_token id = cur_p->data[i].id;
            if (id >= 0 && (size_t) id < bias.size()) cur_p->data[i].logit += bias[(size_t) id];
        }
        cur_p->sorted = false;
    }
};

// XTC: with probability `probability`, removes every token at least `threshold` likely except the
// least likely of them, so the model sometimes skips its most obvious choices.
struct sampler_xtc final : llama_sampler {
    float probability, threshold;
    size_t min_keep;
    uint32_t seed;
    std::mt19937 rng;

    sampler_xtc(float p, float t, size_t mk, uint32_t s)
        : probability(p), threshold(t), min_keep(mk), seed(s), rng(llama_sampler_resolve_seed(s)) {}
    const char * name() const override { return "xtc"; }
    void apply(llama_token_data_array * cur_p) override {
        if (probability <= 0.0f || threshold > 0.5f || cur_p->size < 2) return;
        std::uniform_real_distribution<float> dist(0.0f, 1.0f);
        if (dist(rng) > probability) return;
        llama_sampler_softmax(cur_p);
        size_t last_above = 0;
        bool any = false;
        for (size_t i = 0; i < cur_p->size; ++i) {
            if (cur_p->data[i].p < threshold) break;
            last_above = i;
            any = true;
        }
        // only when at least two pass the threshold, and enough tokens remain
        if (!any || last_above == 0 || cur_p->size - last_above < min_keep) return;
        std::move(cur_p->data + last_above, cur_p->data + cur_p->size, cur_p->data);
        cur_p->size -= last_above;
    }
    void reset() override { rng.seed(llama_sampler_resolve_seed(seed)); }
};

// Keeps the tokens whose logit is within n standard deviations of the largest.
struct sampler_top_n_sigma final : llama_sampler {
    float n;
    explicit sampler_top_n_sigma(float n_) : n(n_) {}
    const char * name() const override { return "top-n-sigma"; }
    void apply(llama_token_data_array * cur_p) override {
        if (n <= 0.0f || cur_p->size <= 1) return;
        float max_logit = -std::numeric_limits<float>::infinity();
        double sum = 0.0;
        size_t finite = 0;
        for (size_t i = 0; i < cur_p->size; ++i) {
            const float l = cur_p->data[i].logit;
            if (!std::isfinite(l)) continue;
            max_logit = std::max(max_logit, l);
            sum += l;
            ++finite;
        }
        if (finite == 0) return;
        const double mean = sum / (double) finite;
        double var = 0.0;
        for (size_t i = 0; i < cur_p->size; ++i) {
            const float l = cur_p->data[i].logit;
            if (std::isfinite(l)) var += (l - mean) * (l - mean);
        }
        const double sd = std::sqrt(var / (double) finite);
        const double cut = max_logit - n * sd;
        size_t w = 0;
        for (size_t i = 0; i < cur_p->size; ++i) {
            if (cur_p->data[i].logit >= cut) cur_p->data[w++] = cur_p->data[i];
        }
        cur_p->size = w;
    }
};

// What both mirostat versions share: the running target mu (starting at 2 tau), and the step
// after truncation: renormalize, draw, and move mu toward tau by eta times the surprise error.
struct mirostat_base : llama_sampler {
    float tau, eta, mu;
    uint32_t seed;
    std::mt19937 rng;

    mirostat_base(uint32_t s, float t, float e) : tau(t), eta(e), mu(2.0f * t), seed(s), rng(llama_sampler_resolve_seed(s)) {}
    void draw_and_update(llama_token_data_array * cur_p) {
        llama_sampler_softmax(cur_p);
        const int64_t idx = llama_sampler_draw(cur_p, rng);
        cur_p->selected = idx;
        const float surprise = -std::log2(cur_p->data[idx].p);
        mu -= eta * (surprise - tau);
    }
    void reset() override {
        mu = 2.0f * tau;
        rng.seed(llama_sampler_resolve_seed(seed));
    }
};

// Mirostat 2.0: drop the tokens more surprising than mu bits.
struct sampler_mirostat_v2 final : mirostat_base {
    using mirostat_base::mirostat_base;
    const char * name() const override { return "mirostat-v2"; }
    void apply(llama_token_data_array * cur_p) override {
        if (cur_p->size == 0) return;
        llama_sampler_softmax(cur_p);
        size_t keep = 0;
        while (keep < cur_p->size && -std::log2(cur_p->data[keep].p) <= mu) ++keep;
        cur_p->size = std::max<size_t>(keep, 1);
        draw_and_update(cur_p);
    }
};

// Mirostat 1.0: estimate the Zipf exponent s from the top m probabilities and keep the top k
// tokens, k chosen so the expected surprise is mu.
struct sampler_mirostat_v1 final : mirostat_base {
    int32_t n_vocab, m;

    sampler_mirostat_v1(int32_t nv, uint32_t s, float t, float e, int32_t m_) : mirostat_base(s, t, e), n_vocab(nv), m(m_) {}
    const char * name() const override { return "mirostat"; }
    void apply(llama_token_data_array * cur_p) override {
        if (cur_p->size == 0) return;
        llama_sampler_softmax(cur_p);
        double sum_tb = 0.0, sum_tt = 0.0;
        for (size_t i = 0; i + 1 < std::min(cur_p->size, (size_t) std::max(m, 1)); ++i) {
            const double t = std::log((double) (i + 2) / (double) (i + 1));
            const double b = std::log((double) cur_p->data[i].p / (double) cur_p->data[i + 1].p);
            sum_tb += t * b;
            sum_tt += t * t;
        }
        const double s_hat = sum_tt > 0.0 ? sum_tb / sum_tt : 1.0;
        const double eps = s_hat - 1.0;
        const double k = std::pow(eps * std::pow(2.0, mu) / (1.0 - std::pow((double) n_vocab, -eps)), 1.0 / s_hat);
        cur_p->size = std::isfinite(k) ? (size_t) std::clamp(k, 1.0, (double) cur_p->size) : cur_p->size;
        draw_and_update(cur_p);
    }
};

} // namespace

struct llama_sampler * llama_sampler_init_logit_bias(int32_t n_vocab, int32_t n_logit_bias, const llama_logit_bias * logit_bias) {
    return new sampler_logit_bias(n_vocab, logit_bias ? n_logit_bias : 0, logit_bias);
}
struct llama_sampler * llama_sampler_init_xtc(float p, float t, size_t min_keep, uint32_t seed) {
    return new sampler_xtc(p, t, min_keep, seed);
}
struct llama_sampler * llama_sampler_init_top_n_sigma(float n) { return new sampler_top_n_sigma(n); }
struct llama_sampler * llama_sampler_init_mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m) {
    return new sampler_mirostat_v1(n_vocab, seed, tau, eta, m);
}
struct llama_sampler * llama_sampler_init_mirostat_v2(uint32_t seed, float tau, float eta) {
    return new sampler_mirostat_v2(seed, tau, eta);
}
