// Embeddings (llama-server --embedding): /v1/embeddings in OpenAI's wire format and llama.cpp's
// native /embedding. The context is created with embeddings on, so a decode yields each token's
// final normalized hidden state; pooling (mean, first token, last token, or none) and the
// normalization of the pooled vector happen here, as llama.cpp's server does them.
#pragma once

#include "llama.h"
#include "server-utils.h"

#include <mutex>
#include <string>
#include <vector>

enum class pooling_kind { none, mean, cls, last };

// "none", "mean", "cls", "last"; throws std::invalid_argument for anything else.
pooling_kind pooling_from_name(const std::string & name);
const char * pooling_name(pooling_kind p);
// The pooling a model asks for in its metadata ({arch}.pooling_type, llama.cpp's numbering:
// 0 none, 1 mean, 2 cls, 3 last); none when it says nothing or something Kiln does not pool.
pooling_kind pooling_of_model(const llama_model * model);

// llama.cpp's embd_normalize: -1 none, 0 scale the largest magnitude to int16's range,
// 1 taxicab, 2 Euclidean (the default), p > 2 the p-norm.
void normalize_embedding(std::vector<float> & v, int norm);

// The little-endian float32 bytes of v in base64, as OpenAI's encoding_format "base64" sends them.
std::string embedding_base64(const std::vector<float> & v);

class embedding_engine {
public:
    embedding_engine(llama_context * ctx, pooling_kind pooling);

    pooling_kind pooling() const { return pooling_; }

    // The rows for one prompt: one pooled vector, or with pooling none one per token. Requests
    // take turns on the context (the decode reuses sequence 0 from an empty cache each time).
    // Throws http_error(400) for a prompt that is empty or longer than the context.
    std::vector<std::vector<float>> embed(const std::vector<llama_token> & tokens);

private:
    llama_context * ctx_;
    pooling_kind pooling_;
    int32_t n_embd_;
    std::mutex mutex_;
};

struct server_info;

// The bodies of POST /v1/embeddings and POST /embedding; both throw http_error(400) naming the
// field at fault.
json handle_oai_embeddings(const json & body, embedding_engine & engine, const server_info & info);
json handle_native_embeddings(const json & body, embedding_engine & engine, const server_info & info);
