// Samplers: small objects that narrow or reweight a candidate array (llama_token_data_array)
// and, at the end of a chain, pick one token. The C API in include/llama.h wraps them.
#pragma once

#include "llama.h"

#include <random>
#include <vector>

struct llama_sampler {
    virtual ~llama_sampler() = default;

    virtual const char * name() const = 0;
    // Called with every token that was chosen, so stateful samplers (penalties) see history.
    virtual void accept(llama_token) {}
    virtual void apply(llama_token_data_array * cur_p) = 0;
    virtual void reset() {}

    // Constraints (grammars) decide which tokens may come next. A chain applies them before its
    // other samplers, and llama_sampler_sample first tries the unconstrained pick and checks
    // it with allows(), which is far cheaper than filtering the whole vocabulary.
    virtual bool is_constraint() const { return false; }
    virtual bool allows(llama_token) { return true; }
    // Why this sampler can no longer work (a grammar too ambiguous to follow), or nullptr.
    // Once set, its apply() removes every candidate, so sampling fails with this message.
    virtual const char * error() const { return nullptr; }

    // Candidates for llama_sampler_sample, kept between calls so sampling a token does not
    // allocate once the buffer has grown to n_vocab.
    std::vector<llama_token_data> candidates;
    size_t n_kept = 0;   // how many of them the last sample kept after the whole chain (at the front)
};

// Turn logits into probabilities in place: sorts by logit (descending) if not sorted yet.
void llama_sampler_softmax(llama_token_data_array * cur_p);
// The same without reordering.
void llama_sampler_probs(llama_token_data_array * cur_p);
// LLAMA_DEFAULT_SEED: a random seed; any other value as given.
uint32_t llama_sampler_resolve_seed(uint32_t seed);
// Index of a candidate drawn from the softmax of the logits (the p fields are set on the way).
int64_t llama_sampler_draw(llama_token_data_array * cur_p, std::mt19937 & rng);
