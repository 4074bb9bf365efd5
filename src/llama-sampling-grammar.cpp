// The grammar sampler: a constraint that removes the candidates the GBNF grammar does not allow
// next, and advances the grammar with every accepted token. Each token's text is looked up once
// at creation, so checking a candidate is a walk of its code points through the matcher.
#include "llama-grammar.h"
#include "llama-sampling.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

struct sampler_grammar final : llama_sampler {
    std::unique_ptr<llama_gbnf::grammar> g;   // the matcher points into it: keep its address
    llama_gbnf::matcher m;
    std::vector<std::string> pieces;       // token id -> text (special tokens as their text)
    std::vector<uint8_t> eog;
    std::vector<llama_token> eog_ids;      // the few end-of-generation tokens, so apply() need not scan eog
    llama_gbnf::token_trie trie;
    std::vector<uint8_t> allowed;          // per token, for the current position
    // lazy grammars (tool calls under tool_choice auto) constrain nothing until the output
    // contains one of the trigger words; the grammar then starts at the trigger
    std::vector<std::string> triggers;
    bool active = true;
    std::string tail;                      // the last output bytes while waiting for a trigger
    size_t max_trigger = 0;
    // triggers are not looked for inside a leading reasoning block
    enum class thought { maybe_at_start, inside, over };
    std::string think_open, think_close;
    bool think_starts_inside = false;
    thought think = thought::over;

    sampler_grammar(std::unique_ptr<llama_gbnf::grammar> gr, const llama_vocab * vocab)
        : g(std::move(gr)), m(*g) {
        const int32_t n = llama_vocab_n_tokens(vocab);
        pieces.resize((size_t) std::max(n, 0));
        eog.resize(pieces.size());
        std::vector<char> buf(256);
        for (int32_t t = 0; t < n; ++t) {
            int32_t len = llama_token_to_piece(vocab, t, buf.data(), (int32_t) buf.size(), 0, true);
            if (len < 0) {
                buf.resize((size_t) -len);
                len = llama_token_to_piece(vocab, t, buf.data(), (int32_t) buf.size(), 0, true);
            }
            if (len > 0) pieces[(size_t) t].assign(buf.data(), (size_t) len);
            eog[(size_t) t] = llama_vocab_is_eog(vocab, t) ? 1 : 0;
            if (eog[(size_t) t]) eog_ids.push_back(t);
        }
        trie.build(pieces, eog);
        allowed.resize(pieces.size());
    }

    const char * name() const override { return "grammar"; }
    bool is_constraint() const override { return true; }
    const char * error() const override { return m.failed() ? m.error().c_str() : nullptr; }

    void set_triggers(std::vector<std::string> words) {
        triggers = std::move(words);
        for (const auto & w : triggers) max_trigger = std::max(max_trigger, w.size());
        active = triggers.empty();
        tail.reserve(2 * max_trigger + 64);
    }

    void set_reasoning(std::string open, std::string close, bool starts_inside) {
        think_open = std::move(open);
        think_close = std::move(close);
        think_starts_inside = starts_inside;
        restart_thought();
    }

    void restart_thought() {
        if (think_close.empty()) think = thought::over;
        else think = think_starts_inside ? thought::inside : thought::maybe_at_start;
    }

    // Consumes tail while the output is (or may still turn out to be) inside the reasoning block;
    // false while it is, true once the text after it can be searched for triggers.
    bool past_reasoning() {
        if (think == thought::maybe_at_start) {
            size_t i = 0;
            while (i < tail.size() && (tail[i] == ' ' || tail[i] == '\n' || tail[i] == '\r' || tail[i] == '\t')) ++i;
            const size_t rest = tail.size() - i;
            if (rest >= think_open.size() && tail.compare(i, think_open.size(), think_open) == 0) {
                tail.erase(0, i + think_open.size());
                think = thought::inside;
            } else if (think_open.compare(0, rest, tail, i, rest) == 0) {
                return false;   // may still become the opening tag
            } else {
                think = thought::over;
            }
        }
        if (think == thought::inside) {
            const size_t at = tail.find(think_close);
            if (at == std::string::npos) {
                if (tail.size() >= think_close.size()) tail.erase(0, tail.size() - think_close.size() + 1);
                return false;
            }
            tail.erase(0, at + think_close.size());
            think = thought::over;
        }
        return true;
    }

    // Waiting for a trigger: look for one in the recent output; on a hit the grammar reads the
    // text from the trigger on.
    void watch(llama_token t) {
        tail += pieces[(size_t) t];
        if (!past_reasoning()) return;
        size_t hit = std::string::npos;
        for (const auto & w : triggers) hit = std::min(hit, tail.find(w));
        if (hit == std::string::npos) {
            // keep only what could still be the start of a trigger
            if (tail.size() > max_trigger) tail.erase(0, tail.size() - max_trigger);
            return;
        }
        active = true;
        m.reset();
        if (!m.accept(tail.substr(hit)) && !m.failed()) {
            ggml_log(GGML_LOG_LEVEL_WARN, "grammar sampler: the text after the trigger does not fit the grammar\n");
        }
        tail.clear();
    }

    bool allows(llama_token t) override {
        if (!active) return true;
        if (t < 0 || (size_t) t >= pieces.size()) return false;
        if (eog[(size_t) t]) return m.complete();
        const std::string & piece = pieces[(size_t) t];
        return !piece.empty() && m.allows(piece);
    }

    void accept(llama_token t) override {
        if (t < 0 || (size_t) t >= pieces.size() || eog[(size_t) t]) return;
        if (!active) {
            watch(t);
            return;
        }
        if (!m.accept(pieces[(size_t) t]) && !m.failed()) {
            ggml_log(GGML_LOG_LEVEL_WARN, "grammar sampler: token %d ('%s') does not fit the grammar; ignored\n", t,
                     pieces[(size_t) t].c_str());
        }
    }

    void apply(llama_token_data_array * cur_p) override {
        if (!active) return;
        if (!m.failed()) apply_grammar(cur_p);
        if (m.failed()) {   // too ambiguous to follow: nothing is allowed, error() says why
            cur_p->size = 0;
            cur_p->selected = -1;
        }
    }

    void apply_grammar(llama_token_data_array * cur_p) {
        // a few candidates: check each; many: one walk of the vocabulary trie answers them all
        const bool walk = cur_p->size > 64 && !m.inside_character();
        if (walk) {
            std::fill(allowed.begin(), allowed.end(), 0);
            m.allowed_trie_tokens(trie, allowed);
            for (int32_t t : trie.others) allowed[(size_t) t] = allows(t) ? 1 : 0;
            const uint8_t done = m.complete() ? 1 : 0;
            for (llama_token t : eog_ids) allowed[(size_t) t] = done;
        }
        // stable in-place filter: keeps the caller's order (and "sorted")
        size_t w = 0;
        for (size_t i = 0; i < cur_p->size; ++i) {
            const llama_token t = cur_p->data[i].id;
            const bool ok = t >= 0 && (size_t) t < pieces.size() && (walk ? allowed[(size_t) t] != 0 : allows(t));
            if (ok) cur_p->data[w++] = cur_p->data[i];
        }
        cur_p->size = w;
        cur_p->selected = -1;
    }

    void reset() override {
        m.reset();
        active = triggers.empty();
        tail.clear();
        restart_thought();
    }
};

std::unique_ptr<llama_gbnf::grammar> parse_or_log(const char * grammar_str, const char * grammar_root, std::string & err) {
    auto g = std::make_unique<llama_gbnf::grammar>();
    const std::string root = grammar_root && *grammar_root ? grammar_root : "root";
    if (!grammar_str || !llama_gbnf::parse(grammar_str, root, *g, err)) {
        if (!grammar_str) err = "no grammar text";
        return nullptr;
    }
    return g;
}

// Parses, then expands the start: a grammar whose first character already has too many parses
// is refused here, when a request is read, rather than at its first token.
bool grammar_usable(const char * grammar_str, const char * grammar_root, std::string & err) {
    auto g = parse_or_log(grammar_str, grammar_root, err);
    if (!g) return false;
    const llama_gbnf::matcher m(*g);
    if (m.failed()) err = m.error();
    return !m.failed();
}

} // namespace

struct llama_sampler * llama_sampler_init_grammar(const struct llama_vocab * vocab, const char * grammar_str,
                                                  const char * grammar_root) {
    if (!vocab) return nullptr;
    std::string err;
    auto g = parse_or_log(grammar_str, grammar_root, err);
    if (!g) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "llama_sampler_init_grammar: %s\n", err.c_str());
        return nullptr;
    }
    auto * s = new sampler_grammar(std::move(g), vocab);
    if (s->m.failed()) {   // ambiguous from the first character on
        ggml_log(GGML_LOG_LEVEL_ERROR, "llama_sampler_init_grammar: %s\n", s->m.error().c_str());
        delete s;
        return nullptr;
    }
    return s;
}

struct llama_sampler * llama_sampler_init_grammar_lazy(const struct llama_vocab * vocab, const char * grammar_str,
                                                       const char * grammar_root, const char ** trigger_words,
                                                       size_t num_trigger_words) {
    llama_sampler * s = llama_sampler_init_grammar(vocab, grammar_str, grammar_root);
    if (!s) return nullptr;
    std::vector<std::string> words;
    for (size_t i = 0; i < num_trigger_words; ++i) {
        if (trigger_words[i] && *trigger_words[i]) words.emplace_back(trigger_words[i]);
    }
    static_cast<sampler_grammar *>(s)->set_triggers(std::move(words));
    return s;
}

struct llama_sampler * llama_sampler_init_grammar_lazy_after_reasoning(
    const struct llama_vocab * vocab, const char * grammar_str, const char * grammar_root, const char ** trigger_words,
    size_t num_trigger_words, const char * reasoning_open, const char * reasoning_close, bool starts_inside) {
    llama_sampler * s = llama_sampler_init_grammar_lazy(vocab, grammar_str, grammar_root, trigger_words, num_trigger_words);
    if (!s) return nullptr;
    static_cast<sampler_grammar *>(s)->set_reasoning(reasoning_open ? reasoning_open : "", reasoning_close ? reasoning_close : "",
                                                     starts_inside);
    return s;
}

bool llama_grammar_validate(const char * grammar_str, const char * grammar_root, char * err, size_t err_size) {
    std::string msg;
    if (grammar_usable(grammar_str, grammar_root, msg)) return true;
    if (err && err_size > 0) {
        const size_t n = std::min(msg.size(), err_size - 1);
        std::memcpy(err, msg.data(), n);
        err[n] = '\0';
    }
    return false;
}
