// The sampler chain and the individual samplers (greedy, dist, top-k, top-p, min-p, typical,
// temperature, penalties). Semantics follow llama.cpp so that a given set of options narrows
// the candidates the same way; see include/llama.h for the C API.
#include "llama-sampling.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

// Descending logit; ties broken by id so the order (and thus every draw) is reproducible.
bool logit_greater(const llama_token_data & a, const llama_token_data & b) {
    if (a.logit != b.logit) return a.logit > b.logit;
    return a.id < b.id;
}

void sort_candidates(llama_token_data_array * cur_p) {
    if (!cur_p->sorted) {
        std::sort(cur_p->data, cur_p->data + cur_p->size, logit_greater);
        cur_p->sorted = true;
    }
}

// p = exp(logit - max) / sum, without reordering.
void softmax_unsorted(llama_token_data_array * cur_p) {
    if (cur_p->size == 0) return;
    float max_logit = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < cur_p->size; ++i) max_logit = std::max(max_logit, cur_p->data[i].logit);
    if (!std::isfinite(max_logit)) {
        // all -inf (or a +inf): give the mass to the first maximal entries only
        size_t n_max = 0;
        for (size_t i = 0; i < cur_p->size; ++i) n_max += cur_p->data[i].logit == max_logit;
        for (size_t i = 0; i < cur_p->size; ++i) {
            cur_p->data[i].p = cur_p->data[i].logit == max_logit ? 1.0f / (float) n_max : 0.0f;
        }
        return;
    }
    double sum = 0.0;
    for (size_t i = 0; i < cur_p->size; ++i) {
        const float e = std::exp(cur_p->data[i].logit - max_logit);
        cur_p->data[i].p = e;
        sum += e;
    }
    const float inv = (float) (1.0 / sum);
    for (size_t i = 0; i < cur_p->size; ++i) cur_p->data[i].p *= inv;
}

size_t argmax_index(const llama_token_data_array * cur_p) {
    size_t best = 0;
    for (size_t i = 1; i < cur_p->size; ++i) {
        if (cur_p->data[i].logit > cur_p->data[best].logit) best = i;
    }
    return best;
}

// ---------------------------------------------------------------------------------------------

struct sampler_chain final : llama_sampler {
    std::vector<llama_sampler *> constraints;   // applied first, whatever the order of adding
    std::vector<llama_sampler *> samplers;
    bool no_perf = true;
    // consecutive tokens the unconstrained pick did not fit; after a few, the pick is tried
    // only now and then (inside rigid structure it rarely fits, and costs a second pass)
    uint32_t fast_misses = 0;

    ~sampler_chain() override {
        for (llama_sampler * s : constraints) delete s;
        for (llama_sampler * s : samplers) delete s;
    }
    const char * name() const override { return "chain"; }
    void accept(llama_token token) override {
        for (llama_sampler * s : constraints) s->accept(token);
        for (llama_sampler * s : samplers) s->accept(token);
    }
    void apply(llama_token_data_array * cur_p) override {
        for (llama_sampler * s : constraints) s->apply(cur_p);
        apply_unconstrained(cur_p);
    }
    void apply_unconstrained(llama_token_data_array * cur_p) {
        for (llama_sampler * s : samplers) s->apply(cur_p);
    }
    void reset() override {
        fast_misses = 0;
        for (llama_sampler * s : constraints) s->reset();
        for (llama_sampler * s : samplers) s->reset();
    }
    bool is_constraint() const override { return !constraints.empty(); }
    bool allows(llama_token token) override {
        for (llama_sampler * s : constraints) {
            if (!s->allows(token)) return false;
        }
        return true;
    }
    const char * error() const override {
        for (const auto * list : { &constraints, &samplers }) {
            for (const llama_sampler * s : *list) {
                if (const char * e = s->error()) return e;
            }
        }
        return nullptr;
    }
};

struct sampler_greedy final : llama_sampler {
    const char * name() const override { return "greedy"; }
    void apply(llama_token_data_array * cur_p) override {
        cur_p->selected = cur_p->size == 0 ? -1 : (int64_t) argmax_index(cur_p);
    }
};

// Draws from the softmax of the candidates with a seeded Mersenne twister (llama_sampler_draw).
struct sampler_dist final : llama_sampler {
    uint32_t seed;
    std::mt19937 rng;

    explicit sampler_dist(uint32_t s) : seed(s), rng(llama_sampler_resolve_seed(s)) {}
    const char * name() const override { return "dist"; }
    void apply(llama_token_data_array * cur_p) override { cur_p->selected = llama_sampler_draw(cur_p, rng); }
    void reset() override { rng.seed(llama_sampler_resolve_seed(seed)); }
};

struct sampler_top_k final : llama_sampler {
    int32_t k;
    explicit sampler_top_k(int32_t k_) : k(k_) {}
    const char * name() const override { return "top-k"; }
    void apply(llama_token_data_array * cur_p) override {
        if (k <= 0 || cur_p->size == 0) return;
        const size_t keep = std::min((size_t) k, cur_p->size);
        if (!cur_p->sorted) {
            if (keep < cur_p->size) {
                std::partial_sort(cur_p->data, cur_p->data + keep, cur_p->data + cur_p->size, logit_greater);
            } else {
                std::sort(cur_p->data, cur_p->data + cur_p->size, logit_greater);
            }
            cur_p->sorted = true;
        }
        cur_p->size = keep;
    }
};

// Smallest prefix (by probability) whose mass reaches p, and at least min_keep tokens.
struct sampler_top_p final : llama_sampler {
    float p;
    size_t min_keep;
    sampler_top_p(float p_, size_t mk) : p(p_), min_keep(std::max<size_t>(mk, 1)) {}
    const char * name() const override { return "top-p"; }
    void apply(llama_token_data_array * cur_p) override {
        if (p >= 1.0f || cur_p->size == 0) return;
        sort_candidates(cur_p);
        softmax_unsorted(cur_p);
        double cum = 0.0;
        size_t last = cur_p->size;
        for (size_t i = 0; i < cur_p->size; ++i) {
            cum += cur_p->data[i].p;
            if (cum >= p && i + 1 >= min_keep) {
                last = i + 1;
                break;
            }
        }
        cur_p->size = last;
    }
};

// Tokens whose probability is at least p times the most likely one's (at least min_keep).
struct sampler_min_p final : llama_sampler {
    float p;
    size_t min_keep;
    sampler_min_p(float p_, size_t mk) : p(p_), min_keep(std::max<size_t>(mk, 1)) {}
    const char * name() const override { return "min-p"; }
    void apply(llama_token_data_array * cur_p) override {
        if (p <= 0.0f || cur_p->size == 0) return;
        float max_logit = -std::numeric_limits<float>::infinity();
        for (size_t i = 0; i < cur_p->size; ++i) max_logit = std::max(max_logit, cur_p->data[i].logit);
        // p_i >= p * p_max  <=>  logit_i >= max_logit + log(p)
        const float threshold = max_logit + std::log(p);
        if (cur_p->sorted) {
            size_t keep = 1;
            while (keep < cur_p->size && cur_p->data[keep].logit >= threshold) ++keep;
            cur_p->size = std::max(keep, std::min(min_keep, cur_p->size));
            return;
        }
        size_t n_pass = 0;
        for (size_t i = 0; i < cur_p->size; ++i) n_pass += cur_p->data[i].logit >= threshold;
        if (n_pass >= min_keep) {
            // stable in-place filter keeps the caller's order
            size_t w = 0;
            for (size_t i = 0; i < cur_p->size; ++i) {
                if (cur_p->data[i].logit >= threshold) cur_p->data[w++] = cur_p->data[i];
            }
            cur_p->size = w;
        } else {
            sort_candidates(cur_p);
            cur_p->size = std::min(min_keep, cur_p->size);
        }
    }
};

// Locally typical sampling: keep the tokens whose surprise is closest to the entropy until
// their mass exceeds p. The kept tokens are left in that order (not sorted by logit).
struct sampler_typical final : llama_sampler {
    float p;
    size_t min_keep;
    std::vector<float> shifted;
    std::vector<size_t> order;
    std::vector<llama_token_data> kept;

    sampler_typical(float p_, size_t mk) : p(p_), min_keep(std::max<size_t>(mk, 1)) {}
    const char * name() const override { return "typical"; }
    void apply(llama_token_data_array * cur_p) override {
        if (p >= 1.0f || cur_p->size == 0) return;
        softmax_unsorted(cur_p);
        double entropy = 0.0;
        for (size_t i = 0; i < cur_p->size; ++i) {
            const float pi = cur_p->data[i].p;
            if (pi > 0.0f) entropy -= pi * std::log(pi);
        }
        shifted.resize(cur_p->size);
        order.resize(cur_p->size);
        for (size_t i = 0; i < cur_p->size; ++i) {
            const float pi = cur_p->data[i].p;
            const double surprise = pi > 0.0f ? -std::log(pi) : std::numeric_limits<double>::infinity();
            shifted[i] = (float) std::fabs(surprise - entropy);
            order[i] = i;
        }
        // ties by position keep the order deterministic (std::stable_sort would allocate)
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
            return shifted[a] != shifted[b] ? shifted[a] < shifted[b] : a < b;
        });
        double cum = 0.0;
        size_t last = order.size();
        for (size_t i = 0; i < order.size(); ++i) {
            cum += cur_p->data[order[i]].p;
            if (cum > p && i + 1 >= min_keep) {
                last = i + 1;
                break;
            }
        }
        kept.clear();
        for (size_t i = 0; i < last; ++i) kept.push_back(cur_p->data[order[i]]);
        std::copy(kept.begin(), kept.end(), cur_p->data);
        cur_p->size = last;
        cur_p->sorted = false;
    }
};

// t <= 0 keeps only the most likely token (the others become -inf) so a following dist
// sampler is deterministic, as llama.cpp does.
struct sampler_temp final : llama_sampler {
    float t;
    explicit sampler_temp(float t_) : t(t_) {}
    const char * name() const override { return "temp"; }
    void apply(llama_token_data_array * cur_p) override {
        if (cur_p->size == 0) return;
        if (t <= 0.0f) {
            const size_t best = argmax_index(cur_p);
            for (size_t i = 0; i < cur_p->size; ++i) {
                if (i != best) cur_p->data[i].logit = -std::numeric_limits<float>::infinity();
            }
            return;
        }
        if (t == 1.0f) return;
        const float inv = 1.0f / t;
        for (size_t i = 0; i < cur_p->size; ++i) cur_p->data[i].logit *= inv;
    }
};

// Repetition / frequency / presence penalties over the last n accepted tokens. The window is a
// ring buffer and the counts a table indexed by token id: both stop growing after warm-up, so
// accepting and applying do not allocate per token.
struct sampler_penalties final : llama_sampler {
    int32_t last_n;
    float repeat, freq, present;
    std::vector<llama_token> ring;   // the window, oldest at ring_head once full
    size_t ring_head = 0;
    std::vector<int32_t> counts;     // occurrences in the window per token id

    sampler_penalties(int32_t n, float r, float f, float p) : last_n(std::max(n, 0)), repeat(r), freq(f), present(p) {}
    const char * name() const override { return "penalties"; }
    bool disabled() const { return last_n == 0 || (repeat == 1.0f && freq == 0.0f && present == 0.0f); }
    void accept(llama_token token) override {
        if (last_n == 0 || token < 0) return;
        if (ring.size() < (size_t) last_n) {
            ring.push_back(token);
        } else {
            counts[ring[ring_head]]--;
            ring[ring_head] = token;
            ring_head = (ring_head + 1) % ring.size();
        }
        if ((size_t) token >= counts.size()) counts.resize((size_t) token + 1, 0);
        counts[token]++;
    }
    void apply(llama_token_data_array * cur_p) override {
        if (disabled() || ring.empty()) return;
        for (size_t i = 0; i < cur_p->size; ++i) {
            const llama_token id = cur_p->data[i].id;
            if (id < 0 || (size_t) id >= counts.size() || counts[id] == 0) continue;
            float & logit = cur_p->data[i].logit;
            // dividing a negative logit would make the token more likely: multiply instead
            if (logit <= 0.0f) logit *= repeat;
            else logit /= repeat;
            logit -= (float) counts[id] * freq + present;
        }
        cur_p->sorted = false;
    }
    void reset() override {
        ring.clear();
        ring_head = 0;
        std::fill(counts.begin(), counts.end(), 0);
    }
};

} // namespace

void llama_sampler_softmax(llama_token_data_array * cur_p) {
    sort_candidates(cur_p);
    softmax_unsorted(cur_p);
}

void llama_sampler_probs(llama_token_data_array * cur_p) { softmax_unsorted(cur_p); }

uint32_t llama_sampler_resolve_seed(uint32_t seed) {
    if (seed != LLAMA_DEFAULT_SEED) return seed;
    std::random_device rd;
    return rd() ^ (uint32_t) std::chrono::steady_clock::now().time_since_epoch().count();
}

// An inverse-CDF walk with a canonical double in [0, 1), which is how std::discrete_distribution
// samples, but without its per-call allocation of the cumulative table.
int64_t llama_sampler_draw(llama_token_data_array * cur_p, std::mt19937 & rng) {
    if (cur_p->size == 0) return -1;
    softmax_unsorted(cur_p);
    double total = 0.0;
    for (size_t i = 0; i < cur_p->size; ++i) total += cur_p->data[i].p;
    const double u = std::generate_canonical<double, std::numeric_limits<double>::digits>(rng);
    double cum = 0.0;
    size_t last_nonzero = 0;
    for (size_t i = 0; i < cur_p->size; ++i) {
        const double p = cur_p->data[i].p / total;
        if (p <= 0.0) continue;
        last_nonzero = i;
        cum += p;
        if (cum > u) return (int64_t) i;
    }
    // rounding left the sum just below u: the last token with mass wins
    return (int64_t) last_nonzero;
}

// ---- C API ----------------------------------------------------------------------------------

struct llama_sampler_chain_params llama_sampler_chain_default_params(void) {
    llama_sampler_chain_params p;
    p.no_perf = true;
    return p;
}

struct llama_sampler * llama_sampler_chain_init(struct llama_sampler_chain_params params) {
    auto * chain = new sampler_chain();
    chain->no_perf = params.no_perf;
    return chain;
}

void llama_sampler_chain_add(struct llama_sampler * chain, struct llama_sampler * smpl) {
    if (!smpl) return;
    auto * c = chain ? dynamic_cast<sampler_chain *>(chain) : nullptr;
    if (!c) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "llama_sampler_chain_add: '%s' is not a sampler chain\n",
                 chain ? chain->name() : "(null)");
        delete smpl;   // ownership was passed to us
        return;
    }
    (smpl->is_constraint() ? c->constraints : c->samplers).push_back(smpl);
}

int llama_sampler_chain_n(const struct llama_sampler * chain) {
    auto * c = chain ? dynamic_cast<const sampler_chain *>(chain) : nullptr;
    return c ? (int) (c->constraints.size() + c->samplers.size()) : 0;
}

struct llama_sampler * llama_sampler_init_greedy(void) { return new sampler_greedy(); }
struct llama_sampler * llama_sampler_init_dist(uint32_t seed) { return new sampler_dist(seed); }
struct llama_sampler * llama_sampler_init_top_k(int32_t k) { return new sampler_top_k(k); }
struct llama_sampler * llama_sampler_init_top_p(float p, size_t min_keep) { return new sampler_top_p(p, min_keep); }
struct llama_sampler * llama_sampler_init_min_p(float p, size_t min_keep) { return new sampler_min_p(p, min_keep); }
struct llama_sampler * llama_sampler_init_typical(float p, size_t min_keep) { return new sampler_typical(p, min_keep); }
struct llama_sampler * llama_sampler_init_temp(float t) { return new sampler_temp(t); }
struct llama_sampler * llama_sampler_init_penalties(int32_t penalty_last_n, float penalty_repeat, float penalty_freq,
                                                    float penalty_present) {
    return new sampler_penalties(penalty_last_n, penalty_repeat, penalty_freq, penalty_present);
}

const char * llama_sampler_name(const struct llama_sampler * smpl) { return smpl ? smpl->name() : "(null)"; }

void llama_sampler_accept(struct llama_sampler * smpl, llama_token token) {
    if (smpl) smpl->accept(token);
}

void llama_sampler_apply(struct llama_sampler * smpl, llama_token_data_array * cur_p) {
    if (smpl && cur_p) smpl->apply(cur_p);
}

void llama_sampler_reset(struct llama_sampler * smpl) {
    if (smpl) smpl->reset();
}

void llama_sampler_free(struct llama_sampler * smpl) { delete smpl; }

const char * llama_sampler_error(const struct llama_sampler * smpl) { return smpl ? smpl->error() : nullptr; }

namespace {

void fill_candidates(std::vector<llama_token_data> & cand, const float * logits, int32_t n_vocab) {
    cand.resize((size_t) n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) {
        // a NaN would break the sort order the samplers rely on; treat it as impossible
        const float l = logits[i];
        cand[i] = llama_token_data{ i, std::isnan(l) ? -std::numeric_limits<float>::infinity() : l, 0.0f };
    }
}

// The chosen candidate's token, or LLAMA_TOKEN_NULL when the samplers removed every one.
llama_token chosen_token(const llama_token_data_array & cur) {
    if (cur.selected >= 0 && (size_t) cur.selected < cur.size) return cur.data[cur.selected].id;
    // a chain without a final selector (greedy / dist): take the most likely candidate
    if (cur.size > 0) return cur.data[argmax_index(&cur)].id;
    return LLAMA_TOKEN_NULL;
}

} // namespace

llama_token llama_sampler_sample(struct llama_sampler * smpl, struct llama_context * ctx, int32_t idx) {
    if (!smpl || !ctx) return LLAMA_TOKEN_NULL;
    const float * logits = llama_get_logits_ith(ctx, idx);
    if (!logits) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "llama_sampler_sample: no logits for output %d of the last batch\n", idx);
        return LLAMA_TOKEN_NULL;
    }
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)));
    if (n_vocab <= 0) return LLAMA_TOKEN_NULL;

    auto & cand = smpl->candidates;
    llama_token token = LLAMA_TOKEN_NULL;
    auto * chain = dynamic_cast<sampler_chain *>(smpl);
    if (chain && !chain->constraints.empty() && (chain->fast_misses < 2 || chain->fast_misses % 4 == 0)) {
        // fast path: the unconstrained pick, kept if the constraints allow it
        fill_candidates(cand, logits, n_vocab);
        llama_token_data_array cur = { cand.data(), cand.size(), -1, false };
        chain->apply_unconstrained(&cur);
        token = chosen_token(cur);
        smpl->n_kept = cur.size;
        if (token != LLAMA_TOKEN_NULL && !chain->allows(token)) token = LLAMA_TOKEN_NULL;
        chain->fast_misses = token == LLAMA_TOKEN_NULL ? chain->fast_misses + 1 : 0;
    } else if (chain && !chain->constraints.empty()) {
        chain->fast_misses++;
    }
    if (token == LLAMA_TOKEN_NULL) {
        fill_candidates(cand, logits, n_vocab);
        llama_token_data_array cur = { cand.data(), cand.size(), -1, false };
        smpl->apply(&cur);
        token = chosen_token(cur);
        smpl->n_kept = cur.size;
    }
    if (token == LLAMA_TOKEN_NULL) {
        const char * why = smpl->error();
        ggml_log(GGML_LOG_LEVEL_ERROR, "llama_sampler_sample: %s\n", why ? why : "the samplers removed every candidate");
        return LLAMA_TOKEN_NULL;
    }
    smpl->accept(token);
    return token;
}

llama_token_data_array llama_sampler_last_candidates(const struct llama_sampler * smpl) {
    if (!smpl || smpl->n_kept == 0 || smpl->n_kept > smpl->candidates.size()) return { nullptr, 0, -1, false };
    return { const_cast<llama_token_data *>(smpl->candidates.data()), smpl->n_kept, -1, false };
}
