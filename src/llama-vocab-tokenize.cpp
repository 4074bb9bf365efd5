// The three tokenizer algorithms, applied to one raw-text fragment (special tokens have already
// been split out by llama_vocab::tokenize).

#include "llama-vocab-impl.h"
#include "unicode.h"

#include <algorithm>
#include <queue>

namespace {

// A run of bytes of the fragment; merged symbols stay contiguous, so a symbol is (offset, length)
// and the pair (left, right) spells text[left.off, left.off + left.n + right.n).
struct symbol {
    int    prev;
    int    next;
    size_t off;
    size_t n;
};

std::vector<symbol> split_utf8_chars(const std::string & text, size_t begin, size_t end) {
    std::vector<symbol> syms;
    size_t off = begin;
    while (off < end) {
        const size_t len = std::min(end - off, unicode_len_utf8((uint8_t) text[off]));
        const int idx = (int) syms.size();
        syms.push_back({idx - 1, off + len == end ? -1 : idx + 1, off, len});
        off += len;
    }
    return syms;
}

// ---- SPM ---------------------------------------------------------------------------------

struct spm_bigram {
    int    left;
    int    right;
    float  score;
    size_t size;
};

// Highest score first; among equal scores the leftmost pair.
struct spm_bigram_order {
    bool operator()(const spm_bigram & a, const spm_bigram & b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

} // namespace

void llama_tokenize_spm(const llama_vocab & vocab, const std::string & text, std::vector<int32_t> & out) {
    std::vector<symbol> syms = split_utf8_chars(text, 0, text.size());
    std::priority_queue<spm_bigram, std::vector<spm_bigram>, spm_bigram_order> queue;

    auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const size_t size = syms[left].n + syms[right].n;
        const int32_t id = vocab.text_to_token(std::string_view(text).substr(syms[left].off, size));
        if (id == llama_vocab::TOKEN_NULL) return;
        queue.push({left, right, vocab.token_score(id), size});
    };

    for (int i = 1; i < (int) syms.size(); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const spm_bigram bg = queue.top();
        queue.pop();
        symbol & l = syms[bg.left];
        symbol & r = syms[bg.right];
        // stale entry: one side was merged away or has grown since the pair was queued
        if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0) syms[r.next].prev = bg.left;
        try_add(l.prev, bg.left);
        try_add(bg.left, l.next);
    }

    if (syms.empty()) return;
    for (int i = 0; i != -1; i = syms[i].next) {
        const symbol & s = syms[i];
        const int32_t id = vocab.text_to_token(std::string_view(text).substr(s.off, s.n));
        if (id != llama_vocab::TOKEN_NULL) {
            out.push_back(id);
            continue;
        }
        // no token for this character: byte fallback (<0xXX>)
        for (size_t j = 0; j < s.n; ++j) {
            const int32_t b = vocab.byte_to_token((uint8_t) text[s.off + j]);
            if (b != llama_vocab::TOKEN_NULL) out.push_back(b);
        }
    }
}

// ---- BPE ---------------------------------------------------------------------------------

namespace {

struct bpe_bigram {
    int     left;
    int     right;
    int32_t rank;
    size_t  size;
};

// Lowest merge rank first; among equal ranks the leftmost pair.
struct bpe_bigram_order {
    bool operator()(const bpe_bigram & a, const bpe_bigram & b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

void bpe_word(const llama_vocab & vocab, const std::string & word, std::vector<int32_t> & out) {
    if (vocab.ignore_merges()) {
        const int32_t id = vocab.text_to_token(word);
        if (id != llama_vocab::TOKEN_NULL) {
            out.push_back(id);
            return;
        }
    }

    std::vector<symbol> syms = split_utf8_chars(word, 0, word.size());
    std::priority_queue<bpe_bigram, std::vector<bpe_bigram>, bpe_bigram_order> queue;
    const std::string_view w(word);

    auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const int32_t rank = vocab.find_bpe_rank(w.substr(syms[left].off, syms[left].n), w.substr(syms[right].off, syms[right].n));
        if (rank < 0) return;
        queue.push({left, right, rank, syms[left].n + syms[right].n});
    };

    for (int i = 1; i < (int) syms.size(); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const bpe_bigram bg = queue.top();
        queue.pop();
        symbol & l = syms[bg.left];
        symbol & r = syms[bg.right];
        if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;   // stale
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0) syms[r.next].prev = bg.left;
        try_add(l.prev, bg.left);
        try_add(bg.left, l.next);
    }

    for (const symbol & s : syms) {
        if (s.n == 0) continue;
        const std::string_view text = w.substr(s.off, s.n);
        const int32_t id = vocab.text_to_token(text);
        if (id != llama_vocab::TOKEN_NULL) {
            out.push_back(id);
            continue;
        }
        // a merged piece that is not a token (malformed vocab): emit whatever single bytes exist
        for (char c : text) {
            const int32_t b = vocab.text_to_token(std::string_view(&c, 1));
            if (b != llama_vocab::TOKEN_NULL) out.push_back(b);
        }
    }
}

} // namespace

void llama_tokenize_bpe(const llama_vocab & vocab, const std::string & text, std::vector<int32_t> & out) {
    std::vector<std::string> words;
    llama_bpe_pretokenize(vocab.pre(), text, words);
    for (const std::string & word : words) {
        bpe_word(vocab, word, out);
    }
}

// ---- WPM ---------------------------------------------------------------------------------

namespace {

bool is_cjk_ideograph(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B920 && c <= 0x2CEAF) ||   // sic: the HF implementation starts this block at 0x2B920
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// BERT basic tokenization: first NFD code point (drops accents of precomposed letters),
// lowercase, drop controls, split on whitespace, punctuation, ASCII symbols and CJK ideographs
// (each of those is a word of its own).
std::vector<std::string> wpm_words(const std::string & text) {
    std::vector<std::string> words(1);
    for (uint32_t cpt : unicode_cpts_from_utf8(text)) {
        cpt = unicode_nfd_first(cpt);
        const uint16_t flags = unicode_cpt_flags(cpt);
        if (flags & UNICODE_FLAG_WHITESPACE) {
            if (!words.back().empty()) words.emplace_back();
            continue;
        }
        if (cpt == 0 || cpt == UNICODE_REPLACEMENT || (flags & UNICODE_FLAG_CONTROL)) continue;
        const std::string s = unicode_cpt_to_utf8(unicode_tolower(cpt));
        if ((flags & UNICODE_FLAG_PUNCTUATION) || (cpt < 0x7F && (flags & UNICODE_FLAG_SYMBOL)) || is_cjk_ideograph(cpt)) {
            if (!words.back().empty()) words.emplace_back();
            words.back() = s;
            words.emplace_back();
        } else {
            words.back() += s;
        }
    }
    if (words.back().empty()) words.pop_back();
    return words;
}

} // namespace

void llama_tokenize_wpm(const llama_vocab & vocab, const std::string & text, std::vector<int32_t> & out) {
    const int max_len = vocab.max_token_len();
    for (const std::string & word : wpm_words(text)) {
        // word-initial pieces are stored with a U+2581 prefix, continuations ("##x") without
        const std::string w = "\xE2\x96\x81" + word;
        const int n = (int) w.size();
        const size_t before = out.size();
        for (int i = 0; i < n; ++i) {
            bool found = false;
            for (int j = std::min(n, i + max_len + 1); j > i; --j) {
                const int32_t id = vocab.text_to_token(std::string_view(w).substr(i, j - i));
                if (id != llama_vocab::TOKEN_NULL) {
                    out.push_back(id);
                    found = true;
                    i = j - 1;
                    break;
                }
            }
            if (!found) {   // the whole word becomes [UNK]
                out.resize(before);
                break;
            }
        }
        if (out.size() == before && vocab.unk() != llama_vocab::TOKEN_NULL) out.push_back(vocab.unk());
    }
}
