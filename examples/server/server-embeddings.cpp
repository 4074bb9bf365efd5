// Embeddings: pooling, normalization and the two wire formats (see server-embeddings.h).
#include "server-embeddings.h"

#include "common.h"
#include "server-oai.h"
#include "server-wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

pooling_kind pooling_from_name(const std::string & name) {
    if (name == "none") return pooling_kind::none;
    if (name == "mean") return pooling_kind::mean;
    if (name == "cls") return pooling_kind::cls;
    if (name == "last") return pooling_kind::last;
    throw std::invalid_argument("unknown pooling '" + name + "' (expected none, mean, cls or last)");
}

const char * pooling_name(pooling_kind p) {
    switch (p) {
        case pooling_kind::none: return "none";
        case pooling_kind::mean: return "mean";
        case pooling_kind::cls:  return "cls";
        case pooling_kind::last: return "last";
    }
    return "none";
}

pooling_kind pooling_of_model(const llama_model * model) {
    char arch[128] = {};
    if (llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch) < 0) return pooling_kind::none;
    char val[32] = {};
    if (llama_model_meta_val_str(model, (std::string(arch) + ".pooling_type").c_str(), val, sizeof val) < 0) {
        return pooling_kind::none;
    }
    const std::string v = val;
    if (v == "1") return pooling_kind::mean;
    if (v == "2") return pooling_kind::cls;
    if (v == "3") return pooling_kind::last;
    return pooling_kind::none;   // 0 (none), 4 (rank) and anything newer
}

void normalize_embedding(std::vector<float> & v, int norm) {
    double sum = 0.0;
    switch (norm) {
        case -1:
            return;
        case 0:   // the largest magnitude becomes 32760, so the values fit int16
            for (float x : v) sum = std::max(sum, (double) std::fabs(x));
            sum /= 32760.0;
            break;
        case 2:
            for (float x : v) sum += (double) x * x;
            sum = std::sqrt(sum);
            break;
        default:   // 1 is the taxicab norm, the p-norm's first case
            for (float x : v) sum += std::pow(std::fabs((double) x), (double) norm);
            sum = std::pow(sum, 1.0 / norm);
            break;
    }
    const double scale = sum > 0.0 ? 1.0 / sum : 0.0;
    for (float & x : v) x = (float) (x * scale);
}

std::string embedding_base64(const std::vector<float> & v) {
    static const char * alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes(v.size() * sizeof(float), '\0');
    // x86-64 and arm64 are little-endian, the byte order numpy.frombuffer(..., "<f4") reads
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const uint32_t n = ((uint8_t) bytes[i] << 16) | ((uint8_t) bytes[i + 1] << 8) | (uint8_t) bytes[i + 2];
        out += alphabet[(n >> 18) & 63];
        out += alphabet[(n >> 12) & 63];
        out += alphabet[(n >> 6) & 63];
        out += alphabet[n & 63];
    }
    const size_t rest = bytes.size() - i;
    if (rest > 0) {
        uint32_t n = (uint8_t) bytes[i] << 16;
        if (rest == 2) n |= (uint8_t) bytes[i + 1] << 8;
        out += alphabet[(n >> 18) & 63];
        out += alphabet[(n >> 12) & 63];
        out += rest == 2 ? alphabet[(n >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

embedding_engine::embedding_engine(llama_context * ctx, pooling_kind pooling)
    : ctx_(ctx), pooling_(pooling), n_embd_(llama_model_n_embd(llama_get_model(ctx))) {}

std::vector<std::vector<float>> embedding_engine::embed(const std::vector<llama_token> & tokens) {
    const int32_t n = (int32_t) tokens.size();
    if (n == 0) throw http_error(400, "'input' holds an empty prompt (nothing to embed)");
    const int32_t n_ctx = (int32_t) llama_n_ctx(ctx_);
    if (n > n_ctx) {
        throw http_error(400, "the input is " + std::to_string(n) + " tokens, longer than the context (" + std::to_string(n_ctx) +
                                  "; start the server with a larger -c)");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    llama_memory_clear(ctx_);
    const int32_t n_batch = (int32_t) llama_n_batch(ctx_);
    // hidden states of the tokens pooling reads: all of them for mean and none, else one
    auto wanted = [&](int32_t i) {
        switch (pooling_) {
            case pooling_kind::cls:  return i == 0;
            case pooling_kind::last: return i == n - 1;
            default:                 return true;
        }
    };
    std::vector<std::vector<float>> rows;
    std::vector<double> sum(pooling_ == pooling_kind::mean ? n_embd_ : 0, 0.0);
    llama_batch batch = llama_batch_init(n_batch, 0, 1);
    for (int32_t i0 = 0; i0 < n; i0 += n_batch) {
        const int32_t nt = std::min(n_batch, n - i0);
        batch.n_tokens = nt;
        for (int32_t j = 0; j < nt; ++j) {
            batch.token[j] = tokens[i0 + j];
            batch.pos[j] = i0 + j;
            batch.n_seq_id[j] = 1;
            batch.seq_id[j][0] = 0;
            batch.logits[j] = wanted(i0 + j) ? 1 : 0;
        }
        if (llama_decode(ctx_, batch) != 0) {
            llama_batch_free(batch);
            llama_memory_clear(ctx_);
            throw std::runtime_error("the decode of the input failed");
        }
        for (int32_t j = 0; j < nt; ++j) {
            if (!batch.logits[j]) continue;
            const float * e = llama_get_embeddings_ith(ctx_, j);
            if (!e) {
                llama_batch_free(batch);
                throw std::runtime_error("the context gave no embedding for token " + std::to_string(i0 + j));
            }
            if (pooling_ == pooling_kind::mean) {
                for (int32_t k = 0; k < n_embd_; ++k) sum[k] += e[k];
            } else {
                rows.emplace_back(e, e + n_embd_);
            }
        }
    }
    llama_batch_free(batch);
    llama_memory_clear(ctx_);
    if (pooling_ == pooling_kind::mean) {
        std::vector<float> mean(n_embd_);
        for (int32_t k = 0; k < n_embd_; ++k) mean[k] = (float) (sum[k] / n);
        rows = { std::move(mean) };
    }
    return rows;
}

namespace {

// The prompts of an "input" / "content" field, tokenized: a string or a token list is one; a
// list of those is several.
std::vector<std::vector<llama_token>> input_prompts(const json & input, const char * field, const server_info & info) {
    if (!(input.is_string() || input.is_array())) {
        throw http_error(400, std::string("'") + field + "' must be a string, a list of strings, or token ids");
    }
    if (input.is_array() && input.empty()) throw http_error(400, std::string("'") + field + "' must not be an empty list");
    std::vector<std::vector<llama_token>> out;
    for (const json & p : split_prompts(input)) {
        // an empty text would embed the BOS token alone (or nothing): refuse it rather than guess
        if (p.is_string() && p.get<std::string>().empty()) {
            throw http_error(400, std::string("'") + field + "' holds an empty prompt (nothing to embed)");
        }
        std::vector<llama_token> t = tokenize_prompt(info.vocab, p, true);
        if (t.empty()) throw http_error(400, std::string("'") + field + "' holds an empty prompt (nothing to embed)");
        out.push_back(std::move(t));
    }
    return out;
}

} // namespace

json handle_oai_embeddings(const json & body, embedding_engine & engine, const server_info & info) {
    if (!body.is_object()) throw http_error(400, "the request body must be a JSON object");
    refuse_unknown_fields(body, { "input", "model", "encoding_format", "user" }, "", "/v1/embeddings");
    if (!body.contains("input")) throw http_error(400, "'input' is required");
    if (engine.pooling() == pooling_kind::none) {
        throw http_error(400, "pooling 'none' gives one vector per token, which /v1/embeddings cannot return; start the server "
                              "with --pooling mean, cls or last (or use /embedding)");
    }
    bool base64 = false;
    if (body.contains("encoding_format")) {
        const json & f = body["encoding_format"];
        if (!f.is_string() || (f != "float" && f != "base64")) {
            throw http_error(400, "'encoding_format' must be \"float\" or \"base64\"");
        }
        base64 = f == "base64";
    }
    const auto prompts = input_prompts(body["input"], "input", info);
    json data = json::array();
    int64_t n_tokens = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        std::vector<float> v = engine.embed(prompts[i]).at(0);
        normalize_embedding(v, 2);
        n_tokens += (int64_t) prompts[i].size();
        data.push_back({ { "object", "embedding" },
                         { "index", i },
                         { "embedding", base64 ? json(embedding_base64(v)) : json(v) } });
    }
    return json{ { "object", "list" },
                 { "data", std::move(data) },
                 { "model", info.model_name },
                 { "usage", { { "prompt_tokens", n_tokens }, { "total_tokens", n_tokens } } } };
}

json handle_native_embeddings(const json & body, embedding_engine & engine, const server_info & info) {
    if (!body.is_object()) throw http_error(400, "the request body must be a JSON object");
    refuse_unknown_fields(body, { "content", "input", "embd_normalize", "model" }, "", "/embedding");
    if (body.contains("content") == body.contains("input")) throw http_error(400, "give the text in 'content' (or 'input')");
    const char * field = body.contains("content") ? "content" : "input";
    int norm = 2;
    if (body.contains("embd_normalize")) {
        const json & n = body["embd_normalize"];
        if (!n.is_number_integer() || n.get<int64_t>() < -1 || n.get<int64_t>() > 64) {
            throw http_error(400, "'embd_normalize' must be an integer from -1 to 64 (-1 none, 0 int16 range, 1 taxicab, 2 "
                                  "Euclidean, p > 2 p-norm)");
        }
        norm = n.get<int>();
    }
    const auto prompts = input_prompts(body[field], field, info);
    json out = json::array();
    for (size_t i = 0; i < prompts.size(); ++i) {
        std::vector<std::vector<float>> rows = engine.embed(prompts[i]);
        // per-token rows (pooling none) come as the model made them, as in llama.cpp
        if (engine.pooling() != pooling_kind::none) normalize_embedding(rows[0], norm);
        out.push_back({ { "index", i }, { "embedding", rows } });
    }
    return out;
}
