#include "server-oai.h"

#include "json-schema-grammar.h"
#include "server-constraints.h"
#include "server-samplers.h"

#include <algorithm>
#include <cmath>
#include <ctime>

// ---- request fields ------------------------------------------------------------------------------

namespace {

bool has(const json & body, const char * key) { return body.contains(key) && !body.at(key).is_null(); }

double get_number(const json & body, const char * key, double def, double lo, double hi) {
    if (!has(body, key)) return def;
    const json & v = body.at(key);
    if (!v.is_number()) throw http_error(400, std::string("'") + key + "' must be a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
        throw http_error(400, std::string("'") + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                                  " (got " + v.dump() + ")");
    }
    return x;
}

int64_t get_int(const json & body, const char * key, int64_t def, int64_t lo, int64_t hi) {
    if (!has(body, key)) return def;
    const json & v = body.at(key);
    // 5.0 is accepted as 5: JavaScript clients do not tell the two apart
    if (!v.is_number() || (v.is_number_float() && std::floor(v.get<double>()) != v.get<double>())) {
        throw http_error(400, std::string("'") + key + "' must be an integer");
    }
    const double x = v.get<double>();
    if (x < (double) lo || x > (double) hi) {
        throw http_error(400, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " +
                                  std::to_string(hi) + " (got " + v.dump() + ")");
    }
    return (int64_t) x;
}

bool get_bool(const json & body, const char * key, bool def) {
    if (!has(body, key)) return def;
    if (!body.at(key).is_boolean()) throw http_error(400, std::string("'") + key + "' must be true or false");
    return body.at(key).get<bool>();
}

// ---- fields Kiln does not implement yet ----------------------------------------------------------
//
// A request field is a promise: a client that sets one of these gets 400 naming it, not a 200
// that ignored it. A field is matched when the request gives it a value that asks for the feature
// (clients often send the feature's off value, e.g. "mirostat": 0, and those pass). Implementing a
// feature means deleting its row here. The tuning knobs of a feature that is off ("dry_base"
// without "dry_multiplier", "mirostat_tau" without "mirostat") change nothing anywhere, so they
// are accepted.

struct unimplemented_field {
    const char * key;
    bool (*asks)(const json & value);   // whether this value asks for the feature
    const char * what;
};

bool is_positive_number(const json & v) { return v.is_number() && v.get<double>() > 0.0; }
bool is_true(const json & v) { return v.is_boolean() && v.get<bool>(); }
bool is_non_empty(const json & v) { return !v.is_null() && !(v.is_array() && v.empty()) && !(v.is_object() && v.empty()) && !(v.is_string() && v.get<std::string>().empty()); }
bool is_anything(const json &) { return true; }

// llama.cpp's /completion (and chat) fields with no implementation here
const std::vector<unimplemented_field> k_unimplemented_fields = {
    { "dynatemp_range", is_positive_number, "dynamic temperature" },
    { "t_max_predict_ms", is_positive_number, "a time limit on generation" },
    { "n_indent", is_positive_number, "indentation-based stopping" },
    { "lora", is_non_empty, "per-request LoRA adapters" },
    { "image_data", is_non_empty, "image input" },
    { "multimodal_data", is_non_empty, "multimodal input" },
    { "response_fields", is_non_empty, "selecting the reply's fields" },
    { "return_tokens", is_true, "returning the generated token ids" },
    { "speculative.n_max", is_anything, "per-request draft settings (use --draft-max)" },
    { "speculative.n_min", is_anything, "per-request draft settings (use --draft-min)" },
    { "speculative.p_min", is_anything, "per-request draft settings (use --draft-p-min)" },
};

void refuse_unimplemented_fields(const json & body) {
    for (const unimplemented_field & f : k_unimplemented_fields) {
        if (body.contains(f.key) && f.asks(body.at(f.key))) {
            throw http_error(400, std::string("'") + f.key + "' is not supported yet (" + f.what + " is not implemented)");
        }
    }
}

std::vector<std::string> get_stop(const json & body) {
    std::vector<std::string> stops;
    if (!has(body, "stop")) return stops;
    const json & v = body.at("stop");
    if (v.is_string()) {
        stops.push_back(v.get<std::string>());
    } else if (v.is_array()) {
        for (const auto & s : v) {
            if (!s.is_string()) throw http_error(400, "'stop' must be a string or a list of strings");
            stops.push_back(s.get<std::string>());
        }
    } else {
        throw http_error(400, "'stop' must be a string or a list of strings");
    }
    return stops;
}

generation_params parse_generation(const json & body, const server_info & info, api_kind kind) {
    refuse_unimplemented_fields(body);
    generation_params g;
    common_params_sampling & sp = g.sampling;
    sp = info.defaults->sampling;
    sp.temp            = (float) get_number(body, "temperature", sp.temp, 0.0, 100.0);
    sp.top_p           = (float) get_number(body, "top_p", sp.top_p, 0.0, 1.0);
    sp.min_p           = (float) get_number(body, "min_p", sp.min_p, 0.0, 1.0);
    sp.typ_p           = (float) get_number(body, "typical_p", sp.typ_p, 0.0, 1.0);
    sp.top_k           = (int32_t) get_int(body, "top_k", sp.top_k, 0, INT32_MAX);
    sp.penalty_present = (float) get_number(body, "presence_penalty", sp.penalty_present, -2.0, 2.0);
    sp.penalty_freq    = (float) get_number(body, "frequency_penalty", sp.penalty_freq, -2.0, 2.0);
    sp.penalty_repeat  = (float) get_number(body, "repeat_penalty", sp.penalty_repeat, 0.0, 100.0);
    sp.penalty_last_n  = (int32_t) get_int(body, "repeat_last_n", sp.penalty_last_n, -1, INT32_MAX);
    sp.min_keep        = (int32_t) get_int(body, "min_keep", sp.min_keep, 0, INT32_MAX);
    sp.ignore_eos      = get_bool(body, "ignore_eos", sp.ignore_eos);
    parse_constraints(body, sp);
    parse_sampler_fields(body, info.vocab, sp);
    if (has(body, "seed")) {
        const int64_t seed = get_int(body, "seed", -1, INT64_MIN / 2, INT64_MAX / 2);
        // -1 (and any negative seed) means a random one, as in llama.cpp
        sp.seed = seed < 0 ? LLAMA_DEFAULT_SEED : (uint32_t) (seed & 0xffffffff);
    }

    g.n_predict = info.defaults->n_predict < 0 ? -1 : info.defaults->n_predict;
    const char * limit_keys[] = { "max_completion_tokens", "max_tokens", "n_predict" };
    for (const char * key : limit_keys) {
        if (kind != api_kind::native && std::string(key) == "n_predict") continue;
        if (has(body, key)) {
            g.n_predict = (int32_t) get_int(body, key, -1, kind == api_kind::native ? -2 : 0, INT32_MAX);
            if (g.n_predict < 0) g.n_predict = -1;
            break;
        }
    }
    g.stop = get_stop(body);
    g.n_keep = (int32_t) get_int(body, "n_keep", info.defaults->n_keep, -1, INT32_MAX);
    g.id_slot = (int32_t) get_int(body, "id_slot", -1, -1, info.n_slots - 1);
    g.cache_prompt = get_bool(body, "cache_prompt", true);

    switch (kind) {
        case api_kind::chat:
            g.logprobs = get_bool(body, "logprobs", false);
            g.top_logprobs = (int32_t) get_int(body, "top_logprobs", 0, 0, 20);
            if (g.top_logprobs > 0 && !g.logprobs) throw http_error(400, "'top_logprobs' needs 'logprobs': true");
            break;
        case api_kind::completions:
            if (has(body, "logprobs")) {
                g.logprobs = true;
                g.top_logprobs = (int32_t) get_int(body, "logprobs", 0, 0, 20);
            }
            break;
        case api_kind::native:
            g.top_logprobs = (int32_t) get_int(body, "n_probs", 0, 0, 20);
            g.logprobs = g.top_logprobs > 0;
            break;
    }
    // llama.cpp's: the probabilities of the distribution the samplers drew from
    g.post_sampling_probs = get_bool(body, "post_sampling_probs", false);
    // llama.cpp's, sent by its web UI on every request: they add to what a stream carries only
    const bool stream = get_bool(body, "stream", false);
    g.timings_per_token = get_bool(body, "timings_per_token", false) && stream;
    g.return_progress = get_bool(body, "return_progress", false) && stream;
    return g;
}

// A message's content as the text the template sees: a string, or the text parts joined.
json message_content(const json & content, size_t index) {
    if (content.is_null() || content.is_string()) return content;
    if (!content.is_array()) {
        throw http_error(400, "'messages[" + std::to_string(index) + "].content' must be a string or a list of parts");
    }
    std::string text;
    for (const auto & part : content) {
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
            throw http_error(400, "'messages[" + std::to_string(index) + "].content' parts must be objects with a 'type'");
        }
        const std::string type = part["type"].get<std::string>();
        if (type != "text") {
            throw http_error(400, "'messages[" + std::to_string(index) + "].content': part type '" + type +
                                      "' is not supported (only text)");
        }
        if (!part.contains("text") || !part["text"].is_string()) {
            throw http_error(400, "'messages[" + std::to_string(index) + "].content': a text part needs a string 'text'");
        }
        if (!text.empty()) text += "\n";
        text += part["text"].get<std::string>();
    }
    return text;
}

void check_prompt_fits(std::vector<llama_token> & prompt, const server_info & info) {
    if (prompt.empty()) {
        const llama_token bos = llama_vocab_bos(info.vocab);
        if (bos == LLAMA_TOKEN_NULL) throw http_error(400, "the prompt is empty");
        prompt.push_back(bos);
    }
    if ((int64_t) prompt.size() >= info.n_ctx_slot) {
        throw http_error(400, "the prompt is " + std::to_string(prompt.size()) + " tokens long but a slot's context holds " +
                                  std::to_string(info.n_ctx_slot) + " tokens (raise -c or lower -np)",
                         "exceed_context_size_error");
    }
}

// "reasoning_format" of a request, else the server's --reasoning-format.
common_reasoning_format request_reasoning_format(const json & body, const server_info & info) {
    if (!has(body, "reasoning_format")) return info.defaults->reasoning_format;
    const json & v = body.at("reasoning_format");
    const std::string f = v.is_string() ? v.get<std::string>() : "";
    if (f == "none") return COMMON_REASONING_FORMAT_NONE;
    if (f == "auto") return COMMON_REASONING_FORMAT_AUTO;
    if (f == "deepseek") return COMMON_REASONING_FORMAT_DEEPSEEK;
    if (f == "deepseek-legacy") return COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY;
    throw http_error(400, "'reasoning_format' must be one of none, auto, deepseek, deepseek-legacy (got " + v.dump() + ")");
}

// The template variables of a request: --chat-template-kwargs, thinking turned off by
// --reasoning-budget 0, then the request's own chat_template_kwargs (which win).
json template_kwargs(const json & body, const server_info & info) {
    json extra = json::object();
    const common_params & d = *info.defaults;
    if (!d.chat_template_kwargs.empty()) extra = json::parse(d.chat_template_kwargs);   // checked when the flag was read
    if (d.reasoning_budget == 0) {
        extra["enable_thinking"] = false;   // Qwen3, GLM, DeepSeek V3.1, Command R7B, ...
        extra["thinking_budget"] = 0;       // Seed-OSS
    }
    if (has(body, "chat_template_kwargs")) {
        if (!body["chat_template_kwargs"].is_object()) throw http_error(400, "'chat_template_kwargs' must be an object");
        for (const auto & [k, v] : body["chat_template_kwargs"].items()) extra[k] = v;
    }
    return extra.empty() ? json(nullptr) : extra;
}

// "thinking_budget_tokens" of a request (llama.cpp's name), else --reasoning-budget: -1
// unlimited, N >= 0 tokens of thinking before the server closes the block.
int32_t request_reasoning_budget(const json & body, const server_info & info) {
    const int32_t dflt = info.defaults->reasoning_budget;
    if (!has(body, "thinking_budget_tokens")) return dflt;
    const int32_t n = (int32_t) get_int(body, "thinking_budget_tokens", -1, -1, INT32_MAX);
    return n < 0 ? dflt : n;
}

// FireFunction v2's template prints two variables of its own: the tools' function specs as JSON
// text ("functions") and the current time ("datetime"); a request's chat_template_kwargs win.
void add_firefunction_variables(json & extra, const json & tools) {
    if (extra.is_null()) extra = json::object();
    if (!extra.contains("functions")) {
        json specs = json::array();
        for (const auto & t : tools.is_array() ? tools : json::array()) specs.push_back(t.contains("function") ? t["function"] : t);
        extra["functions"] = specs.empty() ? "" : specs.dump(2);
    }
    if (!extra.contains("datetime")) {
        const std::time_t now = std::time(nullptr);
        std::tm tm{};
        gmtime_r(&now, &tm);
        char buf[64];
        std::strftime(buf, sizeof buf, "%b %d %Y %H:%M:%S GMT", &tm);
        extra["datetime"] = buf;
    }
}

bool ends_inside_reasoning(const std::string & prompt, reasoning_markup markup) {
    size_t end = prompt.size();
    while (end > 0 && (prompt[end - 1] == ' ' || prompt[end - 1] == '\n' || prompt[end - 1] == '\r' || prompt[end - 1] == '\t')) --end;
    const std::string & tag = reasoning_open_tag(markup);
    return end >= tag.size() && prompt.compare(end - tag.size(), tag.size(), tag) == 0;
}

} // namespace

std::string render_chat_prompt(const json & body, const server_info & info) {
    if (!body.contains("messages")) throw http_error(400, "'messages' is required");
    const json & in = body.at("messages");
    if (!in.is_array() || in.empty()) throw http_error(400, "'messages' must be a non-empty list");
    static const char * roles[] = { "system", "developer", "user", "assistant", "tool" };
    json messages = json::array();
    for (size_t i = 0; i < in.size(); ++i) {
        const json & m = in[i];
        const std::string where = "'messages[" + std::to_string(i) + "]";
        if (!m.is_object()) throw http_error(400, where + "' must be an object");
        if (!m.contains("role") || !m["role"].is_string()) throw http_error(400, where + ".role' must be a string");
        const std::string role = m["role"].get<std::string>();
        if (std::none_of(std::begin(roles), std::end(roles), [&](const char * r) { return role == r; })) {
            throw http_error(400, where + ".role' must be one of system, developer, user, assistant, tool (got '" + role + "')");
        }
        json out = m;
        if (role == "developer") out["role"] = "system";   // OpenAI's newer name for it
        if (m.contains("content")) {
            out["content"] = message_content(m["content"], i);
        } else if (role != "assistant") {
            throw http_error(400, where + ".content' is required");
        } else {
            out["content"] = nullptr;
        }
        if (out["content"].is_null() && role != "assistant") throw http_error(400, where + ".content' must not be null");
        if (role == "assistant" && has(m, "tool_calls")) {
            out["tool_calls"] = decoded_tool_calls(m["tool_calls"], where);
            // a call without text: templates test and split content as a string
            if (out["content"].is_null()) out["content"] = "";
        }
        messages.push_back(std::move(out));
    }
    if (has(body, "tools") && !body["tools"].is_array()) throw http_error(400, "'tools' must be a list");
    const json tools = tools_for_template(body);
    json extra = template_kwargs(body, info);
    if (info.tools_syntax == tool_syntax::firefunction_v2) add_firefunction_variables(extra, tools);
    const bool add_generation_prompt = get_bool(body, "add_generation_prompt", true);
    if (!info.tmpl) throw http_error(500, "no chat template is loaded");
    try {
        return info.tmpl->apply(messages, tools, add_generation_prompt, extra);
    } catch (const std::exception & e) {
        // Most templates read a call's arguments as an object; a few (Functionary v3.2) write
        // them into the prompt as the JSON text OpenAI sends. Those get the text.
        bool has_calls = false;
        for (size_t i = 0; i < messages.size(); ++i) {
            if (messages[i].contains("tool_calls")) {
                messages[i]["tool_calls"] = in[i]["tool_calls"];
                has_calls = true;
            }
        }
        if (has_calls) {
            try {
                return info.tmpl->apply(messages, tools, add_generation_prompt, extra);
            } catch (const std::exception &) {
                // the first failure is the one to report
            }
        }
        // the template refused these messages (raise_exception) or could not render them
        throw http_error(400, std::string("the chat template failed on these messages: ") + e.what());
    }
}

completion_request parse_chat_request(const json & body, const server_info & info) {
    if (!body.is_object()) throw http_error(400, "the request body must be a JSON object");
    completion_request req;
    req.kind = api_kind::chat;
    req.gen = parse_generation(body, info, api_kind::chat);
    req.tools = parse_tool_request(body, info.tools_syntax, req.gen.sampling);
    if (req.tools.active) {
        for (const std::string & marker : tool_syntax_markers(req.tools.syntax)) {
            const std::vector<llama_token> t = common_tokenize(info.vocab, marker, false, true);
            if (t.size() == 1) req.gen.preserved.push_back(t[0]);
        }
    }
    req.stream = get_bool(body, "stream", false);
    if (has(body, "stream_options")) {
        if (!body["stream_options"].is_object()) throw http_error(400, "'stream_options' must be an object");
        req.include_usage = get_bool(body["stream_options"], "include_usage", false);
    }
    const int64_t n = get_int(body, "n", 1, 1, 16);
    req.prompt_text = render_chat_prompt(body, info);
    std::vector<llama_token> prompt = common_tokenize(info.vocab, req.prompt_text, true, true);
    const llama_token bos = llama_vocab_bos(info.vocab);
    if (prompt.size() >= 2 && bos != LLAMA_TOKEN_NULL && prompt[0] == bos && prompt[1] == bos) prompt.erase(prompt.begin());
    check_prompt_fits(prompt, info);
    req.usage_prompt_tokens = (int64_t) prompt.size();
    for (int64_t i = 0; i < n; ++i) req.prompts.push_back(prompt);
    req.n_per_prompt = (int32_t) n;
    const common_reasoning_format format = request_reasoning_format(body, info);
    req.reasoning_split = format != COMMON_REASONING_FORMAT_NONE;
    req.reasoning_in_content = format == COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY;
    req.markup = info.markup;
    const bool opened = ends_inside_reasoning(req.prompt_text, info.markup);
    req.reasoning_starts_inside = req.reasoning_split && opened;
    req.gen.reasoning_budget = request_reasoning_budget(body, info);
    if (req.gen.reasoning_budget > 0 || (req.gen.reasoning_budget == 0 && has(body, "thinking_budget_tokens"))) {
        req.gen.reasoning_open = reasoning_open_tag(info.markup);
        req.gen.reasoning_close = reasoning_close_tag(info.markup);
        req.gen.reasoning_forced = info.reasoning_forced;
        req.gen.reasoning_starts_inside = opened;
    } else {
        req.gen.reasoning_budget = -1;   // 0 from --reasoning-budget: thinking is off through the template
    }
    // harmony's channel markers are control tokens: the reply's text must show them to be split
    // (and a call's header to be parsed)
    req.gen.render_special = info.markup == reasoning_markup::harmony && (req.reasoning_split || req.tools.active);
    // the reasoning tags are part of the reply's text (the splitter, the tool-call parser and, with
    // reasoning_format none, the client read them) where the vocabulary has them as special tokens
    for (const std::string & tag : { reasoning_open_tag(info.markup), reasoning_close_tag(info.markup) }) {
        const std::vector<llama_token> t = common_tokenize(info.vocab, tag, false, true);
        if (t.size() == 1) req.gen.preserved.push_back(t[0]);
    }
    if (req.tools.active && !req.reasoning_split) {
        // the reply's text keeps its reasoning: calls written inside it are not calls
        req.tools.reasoning_open = reasoning_open_tag(info.markup);
        req.tools.reasoning_close = reasoning_close_tag(info.markup);
        req.tools.reasoning_starts_inside = opened;
    }
    if (req.tools.forced && opened) {
        // The prompt opened the reasoning block: a call forced from the first token would be
        // written inside it, where it is not a call. The model reasons first; the grammar takes
        // over where it closes the block, and forces the call right after.
        const std::string after = info.markup == reasoning_markup::harmony ? "<|start|>assistant" : "";
        std::string & g = req.gen.sampling.grammar;
        g = "root ::= " + gbnf_literal(reasoning_close_tag(info.markup) + after) + " [ \\t\\n]{0,2} forced-root\nforced-" + g;
        req.gen.sampling.grammar_triggers = { reasoning_close_tag(info.markup) };
    } else if (!req.gen.sampling.grammar_triggers.empty()) {
        // a call the model only thinks about does not start the tool-call grammar
        req.gen.sampling.grammar_reasoning_open = reasoning_open_tag(info.markup);
        req.gen.sampling.grammar_reasoning_close = reasoning_close_tag(info.markup);
        req.gen.sampling.grammar_reasoning_starts_inside = opened;
    }
    return req;
}

completion_request parse_completion_request(const json & body, const server_info & info, api_kind kind) {
    if (!body.is_object()) throw http_error(400, "the request body must be a JSON object");
    completion_request req;
    req.kind = kind;
    if (!body.contains("prompt")) throw http_error(400, "'prompt' is required");
    req.gen = parse_generation(body, info, kind);
    req.stream = get_bool(body, "stream", false);
    if (has(body, "stream_options")) {
        if (!body["stream_options"].is_object()) throw http_error(400, "'stream_options' must be an object");
        req.include_usage = get_bool(body["stream_options"], "include_usage", false);
    }
    if (kind == api_kind::completions && get_bool(body, "echo", false)) {
        throw http_error(400, "'echo' is not supported");
    }
    const int64_t n = kind == api_kind::completions ? get_int(body, "n", 1, 1, 16) : 1;
    std::vector<json> prompts = split_prompts(body.at("prompt"));
    if (kind == api_kind::native && prompts.size() > 1) {
        throw http_error(400, "'prompt' must be one prompt for /completion (use /v1/completions for several)");
    }
    for (const json & p : prompts) {
        std::vector<llama_token> tokens = tokenize_prompt(info.vocab, p, true);
        check_prompt_fits(tokens, info);
        req.usage_prompt_tokens += (int64_t) tokens.size();
        for (int64_t i = 0; i < n; ++i) req.prompts.push_back(tokens);
    }
    req.n_per_prompt = (int32_t) n;
    if (body.at("prompt").is_string()) req.prompt_text = body.at("prompt").get<std::string>();
    return req;
}

// ---- responses -----------------------------------------------------------------------------------

json timings_json(const task_summary & s) {
    const int32_t prompt_n = s.n_prompt - s.n_cached;
    auto per_tok = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
    auto per_sec = [](double ms, int32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
    json t{
        { "cache_n", s.n_cached },
        { "prompt_n", prompt_n },
        { "prompt_ms", s.t_prompt_ms },
        { "prompt_per_token_ms", per_tok(s.t_prompt_ms, prompt_n) },
        { "prompt_per_second", per_sec(s.t_prompt_ms, prompt_n) },
        { "predicted_n", s.n_predicted },
        { "predicted_ms", s.t_predict_ms },
        { "predicted_per_token_ms", per_tok(s.t_predict_ms, s.n_predicted) },
        { "predicted_per_second", per_sec(s.t_predict_ms, s.n_predicted) },
    };
    if (s.n_drafted > 0) {   // as llama.cpp: only with speculative decoding
        t["draft_n"] = s.n_drafted;
        t["draft_n_accepted"] = s.n_draft_accepted;
    }
    return t;
}

response_builder::response_builder(const completion_request & req, std::string model_name)
    : req_(req), model_(std::move(model_name)), created_(unix_time_s()) {
    id_ = random_id(req.kind == api_kind::chat ? "chatcmpl-" : "cmpl-");
    choices_.resize(req.prompts.size());
    for (auto & c : choices_) {
        c.splitter = reasoning_splitter(req.reasoning_split, req.reasoning_starts_inside, req.markup);
        c.tools = tool_stream(&req_.tools);
    }
}

reasoning_splitter::delta response_builder::absorb(size_t choice, const task_event & ev) {
    choice_state & c = choices_[choice];
    reasoning_splitter::delta d = c.splitter.feed(ev.text);
    if (ev.is_final) {
        reasoning_splitter::delta rest = c.splitter.flush();
        d.reasoning += rest.reasoning;
        d.content += rest.content;
        c.summary = ev.summary;
        c.done = true;
    }
    // text that may be the start of a tool call is held back; the calls stream as they are written
    tool_stream::delta td = c.tools.feed(d.content);
    d.content = std::move(td.content);
    c.call_deltas = std::move(td.calls);
    if (ev.is_final) {
        tool_stream::result calls = c.tools.finish();
        d.content += calls.content;
        for (auto & cd : calls.call_deltas) c.call_deltas.push_back(std::move(cd));
        c.tool_calls = std::move(calls.calls);
        if (!c.tool_calls.empty() && c.summary.finish_reason == "stop") c.summary.finish_reason = "tool_calls";
    }
    if (req_.reasoning_in_content) {
        // deepseek-legacy: the content shows the reasoning too, between its tags
        std::string shown;
        if (!d.reasoning.empty() && !c.legacy_opened) {
            shown += reasoning_open_tag(req_.markup);
            c.legacy_opened = true;
        }
        shown += d.reasoning;
        if (c.legacy_opened && !c.legacy_closed && (!d.content.empty() || ev.is_final)) {
            shown += reasoning_close_tag(req_.markup);
            c.legacy_closed = true;
        }
        d.content = shown + d.content;
    }
    c.content += d.content;
    c.reasoning += d.reasoning;
    c.tokens.insert(c.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    return d;
}

void response_builder::add_event(size_t choice, const task_event & ev) { absorb(choice, ev); }

json response_builder::usage() const {
    int64_t completion = 0;
    for (const auto & c : choices_) completion += c.summary.n_predicted;
    // like the prompt tokens, the cached ones count once per distinct prompt
    int64_t cached = 0;
    for (size_t i = 0; i < choices_.size(); i += (size_t) std::max(1, req_.n_per_prompt)) cached += choices_[i].summary.n_cached;
    return json{ { "prompt_tokens", req_.usage_prompt_tokens },
                 { "completion_tokens", completion },
                 { "total_tokens", req_.usage_prompt_tokens + completion },
                 { "prompt_tokens_details", { { "cached_tokens", cached } } } };
}

json response_builder::timings() const {
    // of the first choice: what llama.cpp reports for single-choice requests
    return choices_.empty() ? json::object() : timings_json(choices_[0].summary);
}

// post_sampling_probs: llama.cpp's shape, probabilities under "prob" / "top_probs" with token ids.
static json post_sampling_probs_json(const std::vector<token_report> & tokens) {
    json out = json::array();
    auto prob = [](float logprob) { return std::isfinite(logprob) ? std::exp((double) logprob) : 0.0; };
    for (const auto & t : tokens) {
        json top = json::array();
        for (const auto & a : t.top) {
            top.push_back({ { "id", a.id }, { "token", a.piece }, { "bytes", bytes_json(a.piece) }, { "prob", prob(a.logprob) } });
        }
        out.push_back({ { "id", t.chosen.id },
                        { "token", t.chosen.piece },
                        { "bytes", bytes_json(t.chosen.piece) },
                        { "prob", prob(t.chosen.logprob) },
                        { "top_probs", std::move(top) } });
    }
    return out;
}

json response_builder::chat_logprobs(const std::vector<token_report> & tokens) const {
    if (req_.gen.post_sampling_probs) return json{ { "content", post_sampling_probs_json(tokens) } };
    json content = json::array();
    for (const auto & t : tokens) {
        json top = json::array();
        for (const auto & a : t.top) {
            top.push_back({ { "token", a.piece }, { "logprob", a.logprob }, { "bytes", bytes_json(a.piece) } });
        }
        content.push_back({ { "token", t.chosen.piece },
                            { "logprob", t.chosen.logprob },
                            { "bytes", bytes_json(t.chosen.piece) },
                            { "top_logprobs", std::move(top) } });
    }
    return json{ { "content", std::move(content) } };
}

json response_builder::completion_logprobs(const std::vector<token_report> & tokens, size_t & offset) const {
    json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
    for (const auto & t : tokens) {
        toks.push_back(t.chosen.piece);
        lps.push_back(t.chosen.logprob);
        json top = json::object();
        for (const auto & a : t.top) top[a.piece] = a.logprob;
        tops.push_back(std::move(top));
        offsets.push_back(offset);
        offset += t.chosen.piece.size();
    }
    return json{ { "tokens", std::move(toks) },
                 { "token_logprobs", std::move(lps) },
                 { "top_logprobs", std::move(tops) },
                 { "text_offset", std::move(offsets) } };
}

json response_builder::native_probs(const std::vector<token_report> & tokens) const {
    if (req_.gen.post_sampling_probs) return post_sampling_probs_json(tokens);
    json out = json::array();
    for (const auto & t : tokens) {
        json top = json::array();
        for (const auto & a : t.top) {
            top.push_back({ { "id", a.id }, { "token", a.piece }, { "logprob", a.logprob }, { "bytes", bytes_json(a.piece) } });
        }
        out.push_back({ { "id", t.chosen.id },
                        { "token", t.chosen.piece },
                        { "logprob", t.chosen.logprob },
                        { "bytes", bytes_json(t.chosen.piece) },
                        { "top_logprobs", std::move(top) } });
    }
    return out;
}

json response_builder::chunk_base(const char * object) const {
    return json{ { "id", id_ }, { "object", object }, { "created", created_ }, { "model", model_ },
                 { "system_fingerprint", "kiln" } };
}

std::vector<json> response_builder::stream_begin() {
    std::vector<json> out;
    if (req_.kind != api_kind::chat) return out;
    // OpenAI's first chunk of each choice carries only the role
    for (size_t i = 0; i < choices_.size(); ++i) {
        json c = chunk_base("chat.completion.chunk");
        c["choices"] = json::array({ { { "index", i },
                                       { "delta", { { "role", "assistant" }, { "content", "" } } },
                                       { "logprobs", nullptr },
                                       { "finish_reason", nullptr } } });
        if (req_.include_usage) c["usage"] = nullptr;
        out.push_back(std::move(c));
    }
    return out;
}

json response_builder::progress_chunk(size_t choice, const prompt_progress & p) const {
    json c;
    switch (req_.kind) {
        case api_kind::chat:
            c = chunk_base("chat.completion.chunk");
            c["choices"] = json::array({ { { "index", choice }, { "delta", json::object() }, { "logprobs", nullptr }, { "finish_reason", nullptr } } });
            break;
        case api_kind::completions:
            c = chunk_base("text_completion");
            c["choices"] = json::array({ { { "text", "" }, { "index", choice }, { "logprobs", nullptr }, { "finish_reason", nullptr } } });
            break;
        case api_kind::native:
            c = { { "index", choice }, { "content", "" }, { "tokens", json::array() }, { "stop", false } };
            break;
    }
    c["prompt_progress"] = { { "total", p.total }, { "cache", p.cache }, { "processed", p.processed }, { "time_ms", p.time_ms } };
    return c;
}

std::vector<json> response_builder::stream_event(size_t choice, const task_event & ev) {
    if (ev.is_progress) return { progress_chunk(choice, ev.progress) };
    std::vector<json> out = stream_chunks(choice, ev);
    // timings_per_token: every chunk carries the task's timings so far (the final ones at the end)
    if (ev.has_timings || (ev.is_final && req_.gen.timings_per_token)) {
        const json t = timings_json(ev.summary);
        for (json & c : out) {
            if (!c.contains("timings")) c["timings"] = t;
        }
    }
    return out;
}

std::vector<json> response_builder::stream_chunks(size_t choice, const task_event & ev) {
    std::vector<json> out;
    size_t offset_before = choices_[choice].text_offset;
    const reasoning_splitter::delta d = absorb(choice, ev);
    choice_state & c = choices_[choice];
    const bool has_text = !d.content.empty() || !d.reasoning.empty();
    const bool has_tokens = !ev.tokens.empty();

    switch (req_.kind) {
        case api_kind::chat: {
            if (has_text || has_tokens) {
                json delta = json::object();
                if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
                if (!d.content.empty() || d.reasoning.empty()) delta["content"] = d.content;
                json ch = chunk_base("chat.completion.chunk");
                ch["choices"] = json::array({ { { "index", choice },
                                                { "delta", std::move(delta) },
                                                { "logprobs", has_tokens && req_.gen.logprobs ? chat_logprobs(ev.tokens) : json(nullptr) },
                                                { "finish_reason", nullptr } } });
                if (req_.include_usage) ch["usage"] = nullptr;
                out.push_back(std::move(ch));
            }
            // each call as OpenAI streams it: id and name first, then the arguments in pieces
            for (const json & part : c.call_deltas) {
                json ch = chunk_base("chat.completion.chunk");
                ch["choices"] = json::array({ { { "index", choice },
                                                { "delta", { { "tool_calls", json::array({ part }) } } },
                                                { "logprobs", nullptr },
                                                { "finish_reason", nullptr } } });
                if (req_.include_usage) ch["usage"] = nullptr;
                out.push_back(std::move(ch));
            }
            if (ev.is_final) {
                json ch = chunk_base("chat.completion.chunk");
                ch["choices"] = json::array({ { { "index", choice },
                                                { "delta", json::object() },
                                                { "logprobs", nullptr },
                                                { "finish_reason", c.summary.finish_reason } } });
                if (req_.include_usage) ch["usage"] = nullptr;
                out.push_back(std::move(ch));
            }
            break;
        }
        case api_kind::completions: {
            if (has_text || has_tokens || ev.is_final) {
                json ch = chunk_base("text_completion");
                ch["choices"] = json::array({ { { "text", d.content },
                                                { "index", choice },
                                                { "logprobs", has_tokens && req_.gen.logprobs
                                                                  ? completion_logprobs(ev.tokens, offset_before)
                                                                  : json(nullptr) },
                                                { "finish_reason", ev.is_final ? json(c.summary.finish_reason) : json(nullptr) } } });
                c.text_offset = offset_before;
                if (req_.include_usage) ch["usage"] = nullptr;
                out.push_back(std::move(ch));
            }
            break;
        }
        case api_kind::native: {
            if (has_text || has_tokens) {
                json ch = { { "index", choice }, { "content", d.content }, { "tokens", json::array() }, { "stop", false } };
                for (const auto & t : ev.tokens) ch["tokens"].push_back(t.chosen.id);
                if (has_tokens && req_.gen.logprobs) ch["completion_probabilities"] = native_probs(ev.tokens);
                out.push_back(std::move(ch));
            }
            if (ev.is_final) {
                json fin = final_response();
                fin["content"] = "";
                fin.erase("completion_probabilities");
                out.push_back(std::move(fin));
            }
            break;
        }
    }
    return out;
}

std::vector<json> response_builder::stream_end() {
    std::vector<json> out;
    if (req_.kind != api_kind::native && req_.include_usage) {
        json ch = chunk_base(req_.kind == api_kind::chat ? "chat.completion.chunk" : "text_completion");
        ch["choices"] = json::array();
        ch["usage"] = usage();
        ch["timings"] = timings();
        out.push_back(std::move(ch));
    }
    return out;
}

json response_builder::final_response() const {
    switch (req_.kind) {
        case api_kind::chat: {
            json choices = json::array();
            for (size_t i = 0; i < choices_.size(); ++i) {
                const choice_state & c = choices_[i];
                json message = { { "role", "assistant" }, { "content", c.content } };
                if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
                if (!c.tool_calls.empty()) {
                    if (c.content.empty()) message["content"] = nullptr;
                    message["tool_calls"] = c.tool_calls;
                }
                choices.push_back({ { "index", i },
                                    { "message", std::move(message) },
                                    { "logprobs", req_.gen.logprobs ? chat_logprobs(c.tokens) : json(nullptr) },
                                    { "finish_reason", c.summary.finish_reason } });
            }
            json r = chunk_base("chat.completion");
            r["choices"] = std::move(choices);
            r["usage"] = usage();
            r["timings"] = timings();
            return r;
        }
        case api_kind::completions: {
            json choices = json::array();
            for (size_t i = 0; i < choices_.size(); ++i) {
                const choice_state & c = choices_[i];
                size_t offset = 0;
                choices.push_back({ { "text", c.content },
                                    { "index", i },
                                    { "logprobs", req_.gen.logprobs ? completion_logprobs(c.tokens, offset) : json(nullptr) },
                                    { "finish_reason", c.summary.finish_reason } });
            }
            json r = chunk_base("text_completion");
            r["choices"] = std::move(choices);
            r["usage"] = usage();
            r["timings"] = timings();
            return r;
        }
        case api_kind::native: {
            const choice_state & c = choices_.at(0);
            const task_summary & s = c.summary;
            json tokens = json::array();
            for (const auto & t : c.tokens) tokens.push_back(t.chosen.id);
            const auto & sp = req_.gen.sampling;
            json r = {
                { "index", 0 },
                { "content", c.content },
                { "tokens", std::move(tokens) },
                { "id_slot", s.slot_id },
                { "stop", true },
                { "model", model_ },
                { "tokens_predicted", s.n_predicted },
                { "tokens_evaluated", s.n_prompt },
                { "generation_settings",
                  { { "n_predict", req_.gen.n_predict },
                    { "seed", sp.seed },
                    { "temperature", sp.temp },
                    { "top_k", sp.top_k },
                    { "top_p", sp.top_p },
                    { "min_p", sp.min_p },
                    { "typical_p", sp.typ_p },
                    { "repeat_last_n", sp.penalty_last_n },
                    { "repeat_penalty", sp.penalty_repeat },
                    { "presence_penalty", sp.penalty_present },
                    { "frequency_penalty", sp.penalty_freq },
                    { "ignore_eos", sp.ignore_eos },
                    { "stop", req_.gen.stop },
                    { "n_keep", req_.gen.n_keep },
                    { "n_probs", req_.gen.top_logprobs } } },
                { "prompt", req_.prompt_text },
                { "has_new_line", c.content.find('\n') != std::string::npos },
                { "truncated", s.n_shifted > 0 },   // a context shift dropped tokens
                { "stop_type", s.stopped_word ? "word" : s.stopped_eos ? "eos" : "limit" },
                { "stopped_eos", s.stopped_eos },
                { "stopped_word", s.stopped_word },
                { "stopped_limit", s.stopped_limit },
                { "stopping_word", s.stopping_word },
                { "tokens_cached", s.n_cached + s.n_predicted },
                { "timings", timings_json(s) },
            };
            if (req_.gen.logprobs) r["completion_probabilities"] = native_probs(c.tokens);
            return r;
        }
    }
    return json::object();
}
