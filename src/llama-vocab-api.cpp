// The C API of the vocabulary (include/llama.h): thin wrappers over the llama_vocab class that
// add the caller-buffer conventions (return -needed when the buffer is too small).
#include "llama.h"
#include "llama-vocab.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

// Copy `s` into buf if it fits; otherwise report the size needed as a negative number.
int32_t copy_out(const std::string & s, char * buf, int32_t buf_len) {
    if (s.size() > (size_t) INT32_MAX) return INT32_MIN;
    const int32_t n = (int32_t) s.size();
    if (buf_len < n || (n > 0 && !buf)) return -n;
    if (n > 0) std::memcpy(buf, s.data(), (size_t) n);
    return n;
}

} // namespace

enum llama_vocab_type llama_vocab_type(const struct llama_vocab * vocab) {
    if (!vocab) return LLAMA_VOCAB_TYPE_NONE;
    switch (vocab->type()) {
        case llama_vocab::kind::spm: return LLAMA_VOCAB_TYPE_SPM;
        case llama_vocab::kind::bpe: return LLAMA_VOCAB_TYPE_BPE;
        case llama_vocab::kind::wpm: return LLAMA_VOCAB_TYPE_WPM;
        case llama_vocab::kind::none: break;
    }
    return LLAMA_VOCAB_TYPE_NONE;
}

int32_t llama_vocab_n_tokens(const struct llama_vocab * vocab) { return vocab ? (int32_t) vocab->n_tokens() : 0; }
llama_token llama_vocab_bos(const struct llama_vocab * vocab) { return vocab ? vocab->bos() : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_eos(const struct llama_vocab * vocab) { return vocab ? vocab->eos() : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_eot(const struct llama_vocab * vocab) { return vocab ? vocab->eot() : LLAMA_TOKEN_NULL; }

bool llama_vocab_is_eog(const struct llama_vocab * vocab, llama_token token) {
    return vocab && vocab->is_eog(token);
}

bool llama_vocab_is_control(const struct llama_vocab * vocab, llama_token token) {
    return vocab && vocab->is_control(token);
}

bool llama_vocab_get_add_bos(const struct llama_vocab * vocab) { return vocab && vocab->add_bos(); }
bool llama_vocab_get_add_eos(const struct llama_vocab * vocab) { return vocab && vocab->add_eos(); }

const char * llama_vocab_get_text(const struct llama_vocab * vocab, llama_token token) {
    if (!vocab || !vocab->valid(token)) return "";
    return vocab->token_text(token).c_str();
}

int32_t llama_tokenize(const struct llama_vocab * vocab, const char * text, int32_t text_len, llama_token * tokens,
                       int32_t n_tokens_max, bool add_special, bool parse_special) {
    if (!vocab || text_len < 0 || (text_len > 0 && !text)) return INT32_MIN;
    std::vector<int32_t> ids;
    try {
        ids = vocab->tokenize(std::string(text ? text : "", (size_t) text_len), add_special, parse_special);
    } catch (const std::exception & e) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "llama_tokenize: %s\n", e.what());
        return INT32_MIN;
    }
    if (ids.size() > (size_t) INT32_MAX) return INT32_MIN;
    const int32_t n = (int32_t) ids.size();
    if (n_tokens_max < n || (n > 0 && !tokens)) return -n;
    std::copy(ids.begin(), ids.end(), tokens);
    return n;
}

int32_t llama_token_to_piece(const struct llama_vocab * vocab, llama_token token, char * buf, int32_t length,
                             int32_t lstrip, bool special) {
    if (!vocab) return 0;
    std::string piece = vocab->token_to_piece(token, special);
    // lstrip: drop up to that many leading spaces (used to undo the SPM word-start space)
    size_t n_strip = 0;
    while (lstrip > 0 && n_strip < piece.size() && piece[n_strip] == ' ') {
        ++n_strip;
        --lstrip;
    }
    if (n_strip > 0) piece.erase(0, n_strip);
    return copy_out(piece, buf, length);
}

int32_t llama_detokenize(const struct llama_vocab * vocab, const llama_token * tokens, int32_t n_tokens, char * text,
                         int32_t text_len_max, bool remove_special, bool unparse_special) {
    if (!vocab || n_tokens < 0 || (n_tokens > 0 && !tokens)) return INT32_MIN;
    std::string out;
    try {
        out = vocab->detokenize(std::vector<int32_t>(tokens, tokens + n_tokens), remove_special, unparse_special);
    } catch (const std::exception & e) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "llama_detokenize: %s\n", e.what());
        return INT32_MIN;
    }
    return copy_out(out, text, text_len_max);
}
