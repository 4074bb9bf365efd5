// The tokenizers on arbitrary text: SentencePiece (llama-spm), byte-level BPE with two
// pre-tokenizer families (gpt-2, deepseek-llm) and WordPiece (bert-bge), from the vocab files in
// ../shared/vocab. The first input byte picks the vocabulary and the flags, the rest is the text.
// Every id must be in the vocabulary, every id must turn back into text, and byte-level BPE
// without special-token parsing must give back exactly the valid UTF-8 it was given, unless the
// vocabulary asks for clean-up of spaces in decoded text (gpt-2 does: " 's" becomes "'s").

#include "fuzz-support.h"

#include "unicode.h"

#include <vector>

namespace {

struct vocab_entry {
    const char * file;
    bool byte_level;   // byte-level BPE: decoding restores the input bytes
    std::unique_ptr<llama_vocab> vocab;
};

std::vector<vocab_entry> & vocabs() {
    static std::vector<vocab_entry> v = [] {
        std::vector<vocab_entry> r;
        r.push_back({ "vocab/ggml-vocab-llama-spm.gguf", false, nullptr });
        r.push_back({ "vocab/ggml-vocab-gpt-2.gguf", true, nullptr });
        r.push_back({ "vocab/ggml-vocab-deepseek-llm.gguf", true, nullptr });
        r.push_back({ "vocab/ggml-vocab-bert-bge.gguf", false, nullptr });
        for (auto & e : r) e.vocab = kiln_fuzz::load_shared_vocab(e.file);
        return r;
    }();
    return v;
}

// Invalid UTF-8 is read as U+FFFD (as llama.cpp does), so only valid text must come back unchanged.
bool valid_utf8(const std::string & s) {
    std::string again;
    for (uint32_t cp : unicode_cpts_from_utf8(s)) unicode_append_utf8(again, cp);
    return again == s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size == 0) return 0;
    const uint8_t sel = data[0];
    vocab_entry & e = vocabs()[sel % vocabs().size()];
    const bool add_special = sel & 0x10, parse_special = sel & 0x20;
    const std::string text(reinterpret_cast<const char *>(data + 1), size - 1);
    const llama_vocab & vocab = *e.vocab;

    const std::vector<int32_t> ids = vocab.tokenize(text, add_special, parse_special);
    for (int32_t id : ids) {
        if (id < 0 || (uint32_t) id >= vocab.n_tokens()) {
            kiln_fuzz::finding(e.file, "token id " + std::to_string(id) + " outside the vocabulary");
        }
        vocab.token_to_piece(id, true);
    }
    const std::string decoded = vocab.detokenize(ids, false, true);
    if (e.byte_level && !vocab.clean_spaces() && !add_special && !parse_special && decoded != text && valid_utf8(text)) {
        kiln_fuzz::finding(e.file, "byte-level BPE did not round-trip (" + std::to_string(text.size()) + " bytes in, " +
                                       std::to_string(decoded.size()) + " out)");
    }
    return 0;
}
