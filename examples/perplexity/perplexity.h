// llama-perplexity internals shared by the perplexity pass and the KL-divergence pass.
#pragma once

#include "common.h"
#include "llama.h"

#include <cstdint>
#include <string>
#include <vector>

// Log-probabilities of one position, compressed as llama.cpp's KL-divergence base files hold them:
// two floats (scale, min_log_prob) in the first four u16 slots, then one u16 per vocabulary entry
// with log p = min_log_prob + scale * q. Logits more than 24 below the maximum are clamped.
inline size_t kld_record_size(int32_t n_vocab) { return 2 * (((size_t) n_vocab + 1) / 2) + 4; }

// Returns the negative log-likelihood of token tok and fills out (kld_record_size u16 values).
double kld_compress_log_probs(const float * logits, int32_t n_vocab, int32_t tok, uint16_t * out);

// Decodes one chunk of n_ctx tokens in batches of n_batch (the first token replaced by BOS when
// bos >= 0), asking for logits from position `first` on; copies them into logits
// ((n_ctx - first) x n_vocab). False on a decode error (logged).
bool ppl_eval_chunk(llama_context * ctx, const llama_token * tokens, int32_t n_ctx, int32_t n_batch, int32_t first,
                    llama_token bos, std::vector<float> & logits);

// The KL-divergence pass (--kl-divergence with --kl-divergence-base FILE). Returns the exit code.
int kl_divergence_run(llama_context * ctx, const common_params & params);

// "ETA" line after the first chunk, as llama.cpp prints it.
void ppl_print_eta(double seconds_per_pass, int n_passes);
