// Drafts for speculative decoding: tokens that probably follow a sequence's history, which the
// main model then checks in one batch (llama-server's slots and llama-cli keep the tokens they
// would have sampled anyway, so the output is what it would be without drafts). Two sources: n-grams of the history itself
// (--spec-type ngram-simple: what followed the last occurrence of the final tokens), and a small
// draft model (-md) run greedily on its own context, one sequence per slot.
#pragma once

#include "common.h"

#include <string>
#include <vector>

struct draft_params {
    int32_t n_max = 16;     // --draft-max
    int32_t n_min = 0;      // --draft-min
    float   p_min = 0.8f;   // --draft-p-min
    bool    ngram = false;  // --spec-type ngram-simple
    int32_t n_vocab_target = 0;   // tokens of the main model: drafts stay below
};

// Whether a draft model's tokens mean what the main model's do: the same tokenizer type, BOS and
// EOS, and the same text for every token id both have (vocabulary sizes may differ by padding, at
// most 128). False with err naming the first difference.
bool draft_vocab_compatible(const llama_vocab * main, const llama_vocab * draft, std::string & err);

class drafter {
public:
    // draft_ctx (may be null: n-grams only) has one sequence per slot and is owned by the caller.
    drafter(draft_params params, llama_context * draft_ctx, int32_t n_slots);
    ~drafter();

    bool enabled() const { return draft_ctx_ || params_.ngram; }

    // Up to n_max tokens that may follow history + next (history: the slot's cached tokens;
    // next: the token about to be decoded). Fewer than --draft-min: none.
    void draft(int32_t slot, const std::vector<llama_token> & history, llama_token next, int32_t n_max,
               std::vector<llama_token> & out);

private:
    bool draft_ngram(const std::vector<llama_token> & seq, int32_t n_max, std::vector<llama_token> & out) const;
    bool draft_model(int32_t slot, const std::vector<llama_token> & seq, int32_t n_max, std::vector<llama_token> & out);

    draft_params params_;
    llama_context * draft_ctx_;
    std::vector<std::vector<llama_token>> cached_;   // per slot: the tokens in the draft context's sequence
    llama_batch batch_{};
    int32_t n_batch_ = 0;
    std::vector<llama_token> seq_;                    // scratch: history + next
};
