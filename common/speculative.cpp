#include "speculative.h"

#include <algorithm>
#include <cmath>

bool draft_vocab_compatible(const llama_vocab * main, const llama_vocab * draft, std::string & err) {
    if (llama_vocab_type(main) != llama_vocab_type(draft)) {
        err = "the draft model's tokenizer type (" + std::to_string((int) llama_vocab_type(draft)) + ") is not the main model's (" +
              std::to_string((int) llama_vocab_type(main)) + ")";
        return false;
    }
    if (llama_vocab_bos(main) != llama_vocab_bos(draft) || llama_vocab_eos(main) != llama_vocab_eos(draft)) {
        err = "the draft model's BOS/EOS tokens differ from the main model's";
        return false;
    }
    const int32_t n_main = llama_vocab_n_tokens(main), n_draft = llama_vocab_n_tokens(draft);
    if (std::abs(n_main - n_draft) > 128) {
        err = "the draft model has " + std::to_string(n_draft) + " tokens, the main model " + std::to_string(n_main);
        return false;
    }
    for (llama_token t = 0; t < std::min(n_main, n_draft); ++t) {
        const char * a = llama_vocab_get_text(main, t);
        const char * b = llama_vocab_get_text(draft, t);
        if (std::string(a ? a : "") != std::string(b ? b : "")) {
            err = "token " + std::to_string(t) + " is '" + (b ? b : "") + "' in the draft model but '" + (a ? a : "") +
                  "' in the main model";
            return false;
        }
    }
    return true;
}

drafter::drafter(draft_params params, llama_context * draft_ctx, int32_t n_slots)
    : params_(params), draft_ctx_(draft_ctx), cached_(std::max(1, n_slots)) {
    if (draft_ctx_) {
        n_batch_ = (int32_t) std::max<uint32_t>(1, llama_n_batch(draft_ctx_));
        batch_ = llama_batch_init(n_batch_, 0, 1);
    }
}

drafter::~drafter() {
    if (draft_ctx_) llama_batch_free(batch_);
}

void drafter::draft(int32_t slot, const std::vector<llama_token> & history, llama_token next, int32_t n_max,
                    std::vector<llama_token> & out) {
    out.clear();
    n_max = std::min(n_max, params_.n_max);
    if (n_max <= 0 || !enabled()) return;
    seq_.assign(history.begin(), history.end());
    seq_.push_back(next);
    if (!(params_.ngram && draft_ngram(seq_, n_max, out)) && draft_ctx_) draft_model(slot, seq_, n_max, out);
    if ((int32_t) out.size() < std::max(params_.n_min, 1)) out.clear();
}

// The most recent earlier occurrence of the sequence's last 3 (else 2) tokens: what followed it.
bool drafter::draft_ngram(const std::vector<llama_token> & seq, int32_t n_max, std::vector<llama_token> & out) const {
    const size_t len = seq.size();
    for (size_t n = 3; n >= 2; --n) {
        if (len <= n) continue;
        for (size_t j = len - n; j-- > 0;) {
            if (!std::equal(seq.begin() + j, seq.begin() + j + n, seq.end() - n)) continue;
            for (size_t k = j + n; k < len && (int32_t) out.size() < n_max; ++k) out.push_back(seq[k]);
            return !out.empty();
        }
    }
    return false;
}

// Greedy tokens of the draft model after seq, while its top token is at least --draft-p-min likely.
bool drafter::draft_model(int32_t slot, const std::vector<llama_token> & seq, int32_t n_max, std::vector<llama_token> & out) {
    std::vector<llama_token> & cached = cached_[slot];
    // the draft context keeps what it has of seq (the drafts that were rejected go)
    size_t keep = 0;
    while (keep < cached.size() && keep < seq.size() && cached[keep] == seq[keep]) ++keep;
    if (keep == seq.size()) --keep;   // the last token is decoded again for its logits
    if (!llama_memory_seq_rm(draft_ctx_, slot, (llama_pos) keep, -1)) {
        llama_memory_seq_rm(draft_ctx_, slot, -1, -1);
        keep = 0;
    }
    cached.resize(keep);
    auto decode = [&](const llama_token * toks, size_t n) {
        for (size_t i = 0; i < n; i += (size_t) n_batch_) {
            const int32_t m = (int32_t) std::min(n - i, (size_t) n_batch_);
            batch_.n_tokens = m;
            for (int32_t k = 0; k < m; ++k) {
                batch_.token[k] = toks[i + k];
                batch_.pos[k] = (llama_pos) cached.size();
                batch_.n_seq_id[k] = 1;
                batch_.seq_id[k][0] = slot;
                batch_.logits[k] = i + k + 1 == n;
                cached.push_back(toks[i + k]);
            }
            if (llama_decode(draft_ctx_, batch_) != 0) {
                llama_memory_seq_rm(draft_ctx_, slot, -1, -1);
                cached.clear();
                return false;
            }
        }
        return true;
    };
    if (!decode(seq.data() + keep, seq.size() - keep)) return false;
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(draft_ctx_));
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    while ((int32_t) out.size() < n_max) {
        const float * logits = llama_get_logits_ith(draft_ctx_, -1);
        if (!logits) break;
        const int32_t best = (int32_t) (std::max_element(logits, logits + n_vocab) - logits);
        double sum = 0.0;
        for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp((double) logits[i] - logits[best]);
        // a token the main model does not have (a draft vocabulary with more padding) ends it
        if (1.0 / sum < params_.p_min || llama_vocab_is_eog(vocab, best) || best >= params_.n_vocab_target) break;
        out.push_back(best);
        if ((int32_t) out.size() == n_max) break;
        const llama_token t = best;
        if (!decode(&t, 1)) break;
    }
    return !out.empty();
}
