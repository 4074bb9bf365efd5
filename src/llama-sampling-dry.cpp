// DRY ("don't repeat yourself"): a token that would extend a repetition of earlier output gets a
// penalty growing exponentially with the repeated length. For each earlier position whose
// preceding tokens match the end of the output, the token that followed it there is the one
// that would continue the repeat; the match length is found by comparing backwards, and stops at
// sequence breakers (tokens whose text contains one of the breaker strings, e.g. a newline), so
// repeated structure such as list markers is not punished across lines.
#include "llama-sampling.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

struct sampler_dry final : llama_sampler {
    float multiplier, base;
    int32_t allowed_length, last_n;
    std::vector<uint8_t> breaker;          // per token id
    std::vector<llama_token> ring;         // the window, oldest at head once full
    size_t head = 0;
    std::vector<llama_token> hist;         // the window in order (scratch)
    std::vector<int32_t> repeat_len;       // per token id: longest repeat it would extend
    std::vector<llama_token> touched;

    sampler_dry(const llama_vocab * vocab, int32_t n_ctx, float m, float b, int32_t allowed, int32_t n_last,
                const char ** breakers, size_t n_breakers)
        : multiplier(m), base(b), allowed_length(std::max(allowed, 1)), last_n(n_last < 0 ? n_ctx : n_last) {
        const int32_t n_vocab = vocab ? llama_vocab_n_tokens(vocab) : 0;
        breaker.assign((size_t) std::max(n_vocab, 0), 0);
        repeat_len.assign(breaker.size(), 0);
        std::vector<std::string> words;
        for (size_t i = 0; i < n_breakers; ++i) {
            if (breakers[i] && *breakers[i]) words.emplace_back(breakers[i]);
        }
        char buf[256];
        for (int32_t t = 0; t < n_vocab && !words.empty(); ++t) {
            const int32_t len = llama_token_to_piece(vocab, t, buf, (int32_t) sizeof buf, 0, false);
            const std::string piece = len > 0 ? std::string(buf, (size_t) len) : std::string();
            for (const auto & w : words) {
                if (piece.find(w) != std::string::npos) breaker[(size_t) t] = 1;
            }
        }
        ring.reserve((size_t) std::max(last_n, 0));
        hist.reserve(ring.capacity());
    }

    bool is_breaker(llama_token t) const { return t >= 0 && (size_t) t < breaker.size() && breaker[(size_t) t]; }
    const char * name() const override { return "dry"; }

    void accept(llama_token t) override {
        if (last_n <= 0) return;
        if (ring.size() < (size_t) last_n) {
            ring.push_back(t);
        } else {
            ring[head] = t;
            head = (head + 1) % ring.size();
        }
    }

    void apply(llama_token_data_array * cur_p) override {
        if (multiplier == 0.0f || base < 1.0f || ring.size() < 2) return;
        hist.clear();
        for (size_t i = 0; i < ring.size(); ++i) hist.push_back(ring[(head + i) % ring.size()]);
        const size_t n = hist.size();
        if (is_breaker(hist[n - 1])) return;
        touched.clear();
        // position i (followed by hist[i + 1]) against the end of the output
        for (size_t i = n - 1; i-- > 0;) {
            size_t k = 0;
            while (k <= i && hist[i - k] == hist[n - 1 - k] && !is_breaker(hist[i - k])) ++k;
            if (k == 0) continue;
            const llama_token next = hist[i + 1];
            if (next < 0 || (size_t) next >= repeat_len.size()) continue;
            if (repeat_len[(size_t) next] == 0) touched.push_back(next);
            repeat_len[(size_t) next] = std::max(repeat_len[(size_t) next], (int32_t) k);
        }
        for (size_t c = 0; c < cur_p->size; ++c) {
            const llama_token id = cur_p->data[c].id;
            if (id < 0 || (size_t) id >= repeat_len.size()) continue;
            const int32_t len = repeat_len[(size_t) id];
            if (len < allowed_length) continue;
            // capped so the power stays finite
            const float exponent = (float) std::min(len - allowed_length, 60);
            cur_p->data[c].logit -= multiplier * std::pow(base, exponent);
            cur_p->sorted = false;
        }
        for (llama_token t : touched) repeat_len[(size_t) t] = 0;
    }

    void reset() override {
        ring.clear();
        head = 0;
    }
};

} // namespace

struct llama_sampler * llama_sampler_init_dry(const struct llama_vocab * vocab, int32_t n_ctx_train, float dry_multiplier,
                                              float dry_base, int32_t dry_allowed_length, int32_t dry_penalty_last_n,
                                              const char ** seq_breakers, size_t num_breakers) {
    return new sampler_dry(vocab, n_ctx_train, dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n, seq_breakers,
                           num_breakers);
}
