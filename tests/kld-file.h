// Reader of llama-perplexity's KL-divergence base files (../shared/golden/ppl/*.kld) for tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace kiln_test {

struct kld_base {
    int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
    std::vector<int32_t> tokens;   // n_chunk * n_ctx, as the text tokenized (before any BOS)
    // per chunk, per scored position (n_ctx/2 .. n_ctx-2): nv u16 values
    std::vector<uint16_t> data;
    size_t nv = 0;

    bool load(const std::string & path, std::string & err) {
        FILE * f = std::fopen(path.c_str(), "rb");
        if (!f) {
            err = "cannot open " + path;
            return false;
        }
        char magic[8];
        bool ok = std::fread(magic, 1, 8, f) == 8 && std::memcmp(magic, "_logits_", 8) == 0 &&
                  std::fread(&n_ctx, 4, 1, f) == 1 && std::fread(&n_vocab, 4, 1, f) == 1 && std::fread(&n_chunk, 4, 1, f) == 1;
        if (ok) {
            tokens.resize((size_t) n_ctx * n_chunk);
            ok = std::fread(tokens.data(), 4, tokens.size(), f) == tokens.size();
        }
        if (ok) {
            nv = 2 * ((n_vocab + 1) / 2) + 4;
            const size_t n_scored = (size_t) (n_ctx - 1 - n_ctx / 2);
            data.resize(nv * n_scored * n_chunk);
            ok = std::fread(data.data(), 2, data.size(), f) == data.size();
        }
        std::fclose(f);
        if (!ok) err = "malformed kld file " + path;
        return ok;
    }

    size_t n_scored() const { return (size_t) (n_ctx - 1 - n_ctx / 2); }

    // base log-probabilities of (chunk, scored position k)
    void log_probs(int chunk, size_t k, std::vector<double> & out) const {
        const uint16_t * p = data.data() + (chunk * n_scored() + k) * nv;
        float scale, min_log_prob;
        std::memcpy(&scale, p, 4);
        std::memcpy(&min_log_prob, p + 2, 4);
        out.resize(n_vocab);
        for (int32_t i = 0; i < n_vocab; ++i) out[i] = min_log_prob + (double) scale * p[4 + i];
    }
};

// Compare our logits at a scored position with the base: returns KLD(base || ours); sets
// same_top when both argmaxes agree.
inline double kld_against(const std::vector<double> & base_logp, const float * logits, int n_vocab, bool & same_top,
                          double * our_logp_of = nullptr, int token = -1) {
    double mx = -INFINITY;
    int our_top = 0;
    for (int i = 0; i < n_vocab; ++i) {
        if (logits[i] > mx) {
            mx = logits[i];
            our_top = i;
        }
    }
    double sum = 0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp((double) logits[i] - mx);
    const double log_z = mx + std::log(sum);
    int base_top = 0;
    double kld = 0;
    double base_sum = 0;
    for (int i = 0; i < n_vocab; ++i) base_sum += std::exp(base_logp[i]);
    for (int i = 0; i < n_vocab; ++i) {
        if (base_logp[i] > base_logp[base_top]) base_top = i;
        const double pb = std::exp(base_logp[i]) / base_sum;
        if (pb > 0) kld += pb * (base_logp[i] - std::log(base_sum) - ((double) logits[i] - log_z));
    }
    same_top = our_top == base_top;
    if (our_logp_of && token >= 0) *our_logp_of = (double) logits[token] - log_z;
    return kld;
}

} // namespace kiln_test
