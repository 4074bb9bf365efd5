// Anthropic Messages API on the chat machinery (see server-anthropic.h).
#include "server-anthropic.h"

#include "common.h"
#include "server-stream.h"

#include <algorithm>

namespace {

void refuse_unknown(const json & obj, std::initializer_list<const char *> known, const std::string & where) {
    refuse_unknown_fields(obj, known, where, "/v1/messages");
}

// Text blocks ([{"type": "text", "text": ...}]) or a string. cache_control is a hint about
// Anthropic's prompt cache; Kiln's slots reuse prompt prefixes anyway.
json text_content(const json & content, const std::string & where) {
    return text_parts_to_chat(content, where, { { "text" }, { "type", "text", "cache_control" }, "/v1/messages" });
}

std::string stop_reason(const std::string & finish_reason, const std::string & stop_word) {
    if (finish_reason == "length") return "max_tokens";
    if (!stop_word.empty()) return "stop_sequence";
    return "end_turn";
}

class anthropic_adapter : public wire_adapter {
public:
    anthropic_adapter(int64_t input_tokens, std::string model)
        : id_(random_id("msg_")), model_(std::move(model)), input_tokens_(input_tokens) {}

    void on_event(const task_event & ev) override {
        if (ev.is_final && ev.summary.stopped_word) stop_word_ = ev.summary.stopping_word;
    }

    json final_response(const json & chat) override {
        const json & choice = chat.at("choices").at(0);
        const json & msg = choice.at("message");
        json content = json::array();
        if (msg.contains("reasoning_content") && !msg["reasoning_content"].get<std::string>().empty()) {
            content.push_back({ { "type", "thinking" }, { "thinking", msg["reasoning_content"] }, { "signature", "" } });
        }
        const std::string text = msg.value("content", "");
        if (!text.empty() || content.empty()) content.push_back({ { "type", "text" }, { "text", text } });
        const std::string reason = stop_reason(choice.value("finish_reason", "stop"), stop_word_);
        return json{ { "id", id_ },
                     { "type", "message" },
                     { "role", "assistant" },
                     { "model", model_ },
                     { "content", std::move(content) },
                     { "stop_reason", reason },
                     { "stop_sequence", reason == "stop_sequence" ? json(stop_word_) : json(nullptr) },
                     { "usage",
                       { { "input_tokens", chat.at("usage").value("prompt_tokens", 0) },
                         { "output_tokens", chat.at("usage").value("completion_tokens", 0) } } } };
    }

    std::string stream_begin() override {
        json message = { { "id", id_ },
                         { "type", "message" },
                         { "role", "assistant" },
                         { "model", model_ },
                         { "content", json::array() },
                         { "stop_reason", nullptr },
                         { "stop_sequence", nullptr },
                         { "usage", { { "input_tokens", input_tokens_ }, { "output_tokens", 0 } } } };
        return sse_named_event("message_start", { { "type", "message_start" }, { "message", std::move(message) } });
    }

    std::string stream_chunk(const json & chunk) override {
        std::string out;
        const chat_chunk_view v = read_chat_chunk(chunk);
        if (v.completion_tokens >= 0) output_tokens_ = v.completion_tokens;
        if (!v.reasoning.empty()) out += block_delta("thinking", { { "type", "thinking_delta" }, { "thinking", v.reasoning } });
        if (!v.content.empty()) out += block_delta("text", { { "type", "text_delta" }, { "text", v.content } });
        if (!v.finish_reason.empty()) finish_reason_ = v.finish_reason;
        return out;
    }

    std::string stream_end() override {
        std::string out = close_block();
        const std::string reason = stop_reason(finish_reason_, stop_word_);
        out += sse_named_event("message_delta",
                               { { "type", "message_delta" },
                                 { "delta",
                                   { { "stop_reason", reason },
                                     { "stop_sequence", reason == "stop_sequence" ? json(stop_word_) : json(nullptr) } } },
                                 { "usage", { { "output_tokens", output_tokens_ } } } });
        out += sse_named_event("message_stop", { { "type", "message_stop" } });
        return out;
    }

    std::string stream_error(int status, const std::string & message) override {
        return sse_named_event("error", { { "type", "error" },
                                          { "error", { { "type", status < 500 ? "invalid_request_error" : "api_error" },
                                                       { "message", message } } } });
    }

private:
    // A delta for a block of this type, opening it (and closing the previous one) first if needed.
    std::string block_delta(const std::string & type, const json & delta) {
        std::string out;
        if (block_type_ != type) {
            out += close_block();
            block_type_ = type;
            json block = type == "thinking" ? json{ { "type", "thinking" }, { "thinking", "" }, { "signature", "" } }
                                            : json{ { "type", "text" }, { "text", "" } };
            out += sse_named_event("content_block_start",
                                   { { "type", "content_block_start" }, { "index", block_index_ }, { "content_block", block } });
        }
        out += sse_named_event("content_block_delta", { { "type", "content_block_delta" }, { "index", block_index_ }, { "delta", delta } });
        return out;
    }

    std::string close_block() {
        if (block_type_.empty()) return "";
        std::string out = sse_named_event("content_block_stop", { { "type", "content_block_stop" }, { "index", block_index_ } });
        block_type_.clear();
        ++block_index_;
        return out;
    }

    std::string id_, model_;
    int64_t input_tokens_ = 0, output_tokens_ = 0;
    std::string finish_reason_ = "stop", stop_word_;
    std::string block_type_;   // the open content block ("" none)
    int block_index_ = 0;
};

} // namespace

json anthropic_to_chat(const json & body, bool count_only) {
    if (!body.is_object()) throw http_error(400, "the request body must be a JSON object");
    if (count_only) {
        refuse_unknown(body, { "model", "messages", "system" }, "");
    } else {
        refuse_unknown(body, { "model", "max_tokens", "messages", "system", "stop_sequences", "stream", "temperature", "top_p",
                               "top_k", "metadata" },
                       "");
    }
    json chat = json::object();
    if (body.contains("model")) {
        if (!body["model"].is_string()) throw http_error(400, "'model' must be a string");
        chat["model"] = body["model"];
    }
    json messages = json::array();
    if (body.contains("system")) messages.push_back({ { "role", "system" }, { "content", text_content(body["system"], "system") } });
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
        throw http_error(400, "'messages' must be a non-empty list of messages");
    }
    for (size_t i = 0; i < body["messages"].size(); ++i) {
        const json & m = body["messages"][i];
        const std::string at = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) throw http_error(400, "'" + at + "' must be an object");
        refuse_unknown(m, { "role", "content" }, at + ".");
        if (!m.contains("role") || !(m["role"] == "user" || m["role"] == "assistant")) {
            throw http_error(400, "'" + at + ".role' must be \"user\" or \"assistant\"");
        }
        if (!m.contains("content")) throw http_error(400, "'" + at + ".content' is required");
        messages.push_back({ { "role", m["role"] }, { "content", text_content(m["content"], at + ".content") } });
    }
    chat["messages"] = std::move(messages);
    if (count_only) return chat;

    if (!body.contains("max_tokens") || !body["max_tokens"].is_number_integer() || body["max_tokens"].get<int64_t>() < 1) {
        throw http_error(400, "'max_tokens' is required: a whole number of at least 1");
    }
    chat["max_tokens"] = body["max_tokens"];
    if (body.contains("stop_sequences")) {
        const json & s = body["stop_sequences"];
        if (!s.is_array() || std::any_of(s.begin(), s.end(), [](const json & x) { return !x.is_string(); })) {
            throw http_error(400, "'stop_sequences' must be a list of strings");
        }
        chat["stop"] = s;
    }
    for (const char * k : { "temperature", "top_p", "top_k" }) {
        if (body.contains(k)) chat[k] = body[k];   // the chat parser checks their types and ranges
    }
    if (body.contains("metadata") && !body["metadata"].is_object()) throw http_error(400, "'metadata' must be an object");
    if (body.contains("stream")) {
        if (!body["stream"].is_boolean()) throw http_error(400, "'stream' must be true or false");
        chat["stream"] = body["stream"];
        // the adapter reports output_tokens in message_delta from the usage chunk
        if (body["stream"].get<bool>()) chat["stream_options"] = { { "include_usage", true } };
    }
    return chat;
}

std::shared_ptr<wire_adapter> make_anthropic_adapter(const completion_request & creq, const std::string & model) {
    return std::make_shared<anthropic_adapter>(creq.usage_prompt_tokens, model);
}

json anthropic_count_tokens(const json & body, const server_info & info) {
    const std::string prompt = render_chat_prompt(anthropic_to_chat(body, true), info);
    std::vector<llama_token> tokens = common_tokenize(info.vocab, prompt, true, true);
    // as the chat request does: a template that writes BOS itself does not get a second one
    const llama_token bos = llama_vocab_bos(info.vocab);
    if (tokens.size() >= 2 && bos != LLAMA_TOKEN_NULL && tokens[0] == bos && tokens[1] == bos) tokens.erase(tokens.begin());
    return json{ { "input_tokens", tokens.size() } };
}
