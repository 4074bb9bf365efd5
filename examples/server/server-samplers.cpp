#include "server-samplers.h"

#include <climits>
#include <cmath>
#include <string>

namespace {

bool has(const json & body, const char * key) { return body.contains(key) && !body.at(key).is_null(); }

float number_in(const json & body, const char * key, float def, double lo, double hi) {
    if (!has(body, key)) return def;
    const json & v = body.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo || v.get<double>() > hi) {
        throw http_error(400, std::string("'") + key + "' must be a number between " + json(lo).dump() + " and " + json(hi).dump());
    }
    return v.get<float>();
}

// A bias value: a number, or false for "never this token".
float bias_value(const json & v, const std::string & where) {
    if (v.is_boolean() && !v.get<bool>()) return -INFINITY;
    if (!v.is_number() || !std::isfinite(v.get<double>())) throw http_error(400, where + " must be a number or false");
    return v.get<float>();
}

// The tokens a logit_bias key stands for: an id, or a text whose tokens all get the bias.
void add_bias(const std::string & key, bool key_is_id, float bias, const llama_vocab * vocab, common_params_sampling & sp,
              const std::string & where) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    if (key_is_id) {
        size_t used = 0;
        long long id = -1;
        try {
            id = std::stoll(key, &used);
        } catch (const std::exception &) {
            used = 0;
        }
        if (used == key.size() && used > 0) {
            if (id < 0 || id >= n_vocab) {
                throw http_error(400, where + ": token id " + key + " is outside the vocabulary (0.." + std::to_string(n_vocab - 1) + ")");
            }
            sp.logit_bias.push_back({ (llama_token) id, bias });
            return;
        }
    }
    const std::vector<llama_token> toks = common_tokenize(vocab, key, false, false);
    if (toks.empty()) throw http_error(400, where + ": '" + key + "' has no tokens");
    for (llama_token t : toks) sp.logit_bias.push_back({ t, bias });
}

} // namespace

void parse_sampler_fields(const json & body, const llama_vocab * vocab, common_params_sampling & sp) {
    sp.top_n_sigma = number_in(body, "top_n_sigma", sp.top_n_sigma, -1.0, 1000.0);
    sp.xtc_probability = number_in(body, "xtc_probability", sp.xtc_probability, 0.0, 1.0);
    sp.xtc_threshold = number_in(body, "xtc_threshold", sp.xtc_threshold, 0.0, 1.0);
    if (has(body, "mirostat")) {
        const json & m = body["mirostat"];
        if (!m.is_number_integer() || m.get<int>() < 0 || m.get<int>() > 2) throw http_error(400, "'mirostat' must be 0, 1 or 2");
        sp.mirostat = m.get<int>();
    }
    sp.mirostat_tau = number_in(body, "mirostat_tau", sp.mirostat_tau, 0.0, 100.0);
    sp.mirostat_eta = number_in(body, "mirostat_eta", sp.mirostat_eta, 0.0, 10.0);
    sp.dry_multiplier = number_in(body, "dry_multiplier", sp.dry_multiplier, 0.0, 100.0);
    sp.dry_base = number_in(body, "dry_base", sp.dry_base, 1.0, 100.0);
    for (const char * key : { "dry_allowed_length", "dry_penalty_last_n" }) {
        if (!has(body, key)) continue;
        const json & v = body[key];
        const int lo = std::string(key) == "dry_penalty_last_n" ? -1 : 1;
        if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > INT32_MAX) {
            throw http_error(400, std::string("'") + key + "' must be an integer of at least " + std::to_string(lo));
        }
        (std::string(key) == "dry_allowed_length" ? sp.dry_allowed_length : sp.dry_penalty_last_n) = v.get<int32_t>();
    }
    if (has(body, "dry_sequence_breakers")) {
        const json & v = body["dry_sequence_breakers"];
        if (!v.is_array()) throw http_error(400, "'dry_sequence_breakers' must be a list of strings");
        sp.dry_sequence_breakers.clear();
        for (const auto & b : v) {
            if (!b.is_string() || b.get<std::string>().empty()) throw http_error(400, "'dry_sequence_breakers' must be a list of non-empty strings");
            sp.dry_sequence_breakers.push_back(b.get<std::string>());
        }
    }
    if (has(body, "samplers")) {
        const json & v = body["samplers"];
        std::vector<std::string> names;
        if (v.is_string()) {
            std::string cur;
            for (char c : v.get<std::string>() + ";") {
                if (c == ';') {
                    if (!cur.empty()) names.push_back(cur);
                    cur.clear();
                } else {
                    cur += c;
                }
            }
        } else if (v.is_array()) {
            for (const auto & n : v) {
                if (!n.is_string()) throw http_error(400, "'samplers' must be a list of sampler names");
                names.push_back(n.get<std::string>());
            }
        } else {
            throw http_error(400, "'samplers' must be a list of sampler names");
        }
        sp.samplers.clear();
        for (const auto & n : names) {
            const std::string c = common_sampler_canonical_name(n);
            if (c.empty()) {
                throw http_error(400, "'samplers': unknown sampler '" + n + "' (known: penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature)");
            }
            sp.samplers.push_back(c);
        }
    }
    if (!has(body, "logit_bias")) return;
    const json & lb = body["logit_bias"];
    sp.logit_bias.clear();   // the request's biases replace the server's -l ones
    if (lb.is_object()) {
        for (const auto & [key, v] : lb.items()) {
            add_bias(key, true, bias_value(v, "'logit_bias[\"" + key + "\"]'"), vocab, sp, "'logit_bias'");
        }
    } else if (lb.is_array()) {
        for (size_t i = 0; i < lb.size(); ++i) {
            const std::string where = "'logit_bias[" + std::to_string(i) + "]'";
            const json & pair = lb[i];
            if (!pair.is_array() || pair.size() != 2 || !(pair[0].is_string() || pair[0].is_number_integer())) {
                throw http_error(400, where + " must be [token id or text, bias]");
            }
            const float bias = bias_value(pair[1], where);
            if (pair[0].is_string()) add_bias(pair[0].get<std::string>(), false, bias, vocab, sp, where);
            else add_bias(std::to_string(pair[0].get<long long>()), true, bias, vocab, sp, where);
        }
    } else {
        throw http_error(400, "'logit_bias' must be an object of token id -> bias, or a list of [token, bias] pairs");
    }
}
