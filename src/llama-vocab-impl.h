// Internals shared by the llama-vocab*.cpp files: the pre-tokenizer splitter and the three
// tokenizer algorithms. Not part of any public API.
#pragma once

#include "llama-vocab.h"

#include <string>
#include <vector>

// Byte-level BPE pre-tokenization: split text the way the pre-tokenizer regexes of `pre` do
// (each regex of the family refines the pieces of the previous one; unmatched gaps stay pieces
// of their own), then map each piece's bytes through the GPT-2 byte -> code point table.
// Returns false if `pre` has no splitter (unsupported family).
bool llama_bpe_pretokenize(llama_vocab::pre_type pre, const std::string & text, std::vector<std::string> & words);

// Whether `pre` is a family llama_bpe_pretokenize can split.
bool llama_bpe_pretok_supported(llama_vocab::pre_type pre);

// The tokenizer algorithms. Each appends the ids of one raw-text fragment to `out`.
void llama_tokenize_spm(const llama_vocab & vocab, const std::string & text, std::vector<int32_t> & out);
void llama_tokenize_bpe(const llama_vocab & vocab, const std::string & text, std::vector<int32_t> & out);
void llama_tokenize_wpm(const llama_vocab & vocab, const std::string & text, std::vector<int32_t> & out);
