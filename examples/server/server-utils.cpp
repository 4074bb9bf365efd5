#include "server-utils.h"

#include "common.h"

#include <chrono>
#include <cstdlib>
#include <random>

http_error::http_error(int status_, const std::string & message, std::string type_)
    : std::runtime_error(message), status(status_), type(type_.empty() ? error_type_for_status(status_) : std::move(type_)) {}

const char * error_type_for_status(int status) {
    switch (status) {
        case 400: return "invalid_request_error";
        case 401: return "authentication_error";
        case 403: return "permission_error";
        case 404: return "not_found_error";
        case 501: return "not_supported_error";
        case 503: return "unavailable_error";
        default:  return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

json make_error_json(int status, const std::string & message, const std::string & type) {
    return json{ { "error", { { "code", status },
                              { "message", message },
                              { "type", type.empty() ? error_type_for_status(status) : type } } } };
}

json parse_request_json(const std::string & body) {
    if (body.empty()) throw http_error(400, "the request body is empty (expected JSON)");
    constexpr int max_depth = 64;
    auto limit_depth = [](int depth, json::parse_event_t, json &) {
        if (depth > max_depth) throw http_error(400, "the request body nests deeper than " + std::to_string(max_depth) + " levels");
        return true;
    };
    try {
        return json::parse(body, limit_depth);
    } catch (const json::parse_error & e) {
        throw http_error(400, std::string("the request body is not valid JSON: ") + e.what());
    }
}

std::string dump_json(const json & j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

size_t utf8_complete_prefix(const std::string & s) {
    // Look back at most 3 bytes for the lead byte of a sequence that is still incomplete.
    const size_t n = s.size();
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
        const unsigned char c = (unsigned char) s[n - back];
        if ((c & 0xC0) == 0x80) continue;   // continuation byte: keep looking for the lead
        size_t need = 1;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return need > back ? n - back : n;
    }
    return n;   // only continuation bytes (invalid): nothing to wait for
}

std::string random_id(const std::string & prefix) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(0, (int) sizeof(alphabet) - 2);
    std::string id = prefix;
    for (int i = 0; i < 24; ++i) id += alphabet[pick(rng)];
    return id;
}

int64_t unix_time_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double monotonic_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

json bytes_json(const std::string & s) {
    json out = json::array();
    for (unsigned char c : s) out.push_back((int) c);
    return out;
}

bool secrets_equal(const std::string & a, const std::string & b) {
    // volatile: the compiler must not turn the loop into an early-exit comparison
    volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < b.size(); ++i) {
        const unsigned char x = i < a.size() ? (unsigned char) a[i] : 0;
        diff = diff | (unsigned char) (x ^ (unsigned char) b[i]);
    }
    return diff == 0;
}

namespace {

bool is_token_list(const json & j) {
    if (!j.is_array() || j.empty()) return false;
    for (const auto & e : j) {
        if (!e.is_number_integer()) return false;
    }
    return true;
}

} // namespace

std::vector<llama_token> tokenize_prompt(const llama_vocab * vocab, const json & prompt, bool add_special) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    std::vector<llama_token> out;
    auto add_ids = [&](const json & ids) {
        for (const auto & e : ids) {
            const int64_t id = e.get<int64_t>();
            if (id < 0 || id >= n_vocab) {
                throw http_error(400, "prompt token id " + std::to_string(id) + " is out of the vocabulary (0.." +
                                          std::to_string(n_vocab - 1) + ")");
            }
            out.push_back((llama_token) id);
        }
    };
    if (prompt.is_string()) {
        out = common_tokenize(vocab, prompt.get<std::string>(), add_special, true);
    } else if (is_token_list(prompt)) {
        add_ids(prompt);
    } else if (prompt.is_array()) {
        // mixed: strings and ids; only the first piece gets BOS
        bool first = true;
        for (const auto & part : prompt) {
            if (part.is_string()) {
                auto t = common_tokenize(vocab, part.get<std::string>(), add_special && first, true);
                out.insert(out.end(), t.begin(), t.end());
            } else if (part.is_number_integer()) {
                add_ids(json::array({ part }));
            } else {
                throw http_error(400, "'prompt' must be a string, a list of token ids, or a list of those");
            }
            first = false;
        }
    } else {
        throw http_error(400, "'prompt' must be a string, a list of token ids, or a list of those");
    }
    // a prompt that writes the BOS text itself would otherwise start with two
    const llama_token bos = llama_vocab_bos(vocab);
    if (out.size() >= 2 && bos != LLAMA_TOKEN_NULL && out[0] == bos && out[1] == bos) out.erase(out.begin());
    return out;
}

std::vector<json> split_prompts(const json & prompt) {
    if (prompt.is_string() || is_token_list(prompt)) return { prompt };
    if (prompt.is_array()) {
        if (prompt.empty()) throw http_error(400, "'prompt' must not be an empty list");
        bool all_prompts = true;
        for (const auto & p : prompt) all_prompts = all_prompts && (p.is_string() || is_token_list(p));
        if (all_prompts) return std::vector<json>(prompt.begin(), prompt.end());
        return { prompt };   // a mixed list of strings and ids is one prompt
    }
    throw http_error(400, "'prompt' must be a string, a list of token ids, or a list of those");
}
