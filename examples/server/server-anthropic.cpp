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

// An Anthropic message as chat messages: its text blocks are the content; an assistant's tool_use
// blocks become its tool_calls, a user's tool_result blocks "tool" messages (before its text, as
// the results answer the previous turn's calls).
void append_message(json & messages, const std::string & role, const json & content, const std::string & at) {
    if (!content.is_array()) {
        messages.push_back({ { "role", role }, { "content", text_content(content, at) } });
        return;
    }
    json text = json::array(), calls = json::array();
    for (size_t j = 0; j < content.size(); ++j) {
        const json & b = content[j];
        const std::string bat = at + "[" + std::to_string(j) + "]";
        const std::string type = b.is_object() && b.contains("type") && b["type"].is_string() ? b["type"].get<std::string>() : "";
        if (type == "tool_use" && role == "assistant") {
            refuse_unknown(b, { "type", "id", "name", "input", "cache_control" }, bat + ".");
            if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string()) {
                throw http_error(400, "'" + bat + "' needs a string 'id' and 'name'");
            }
            if (!b.contains("input") || !b["input"].is_object()) throw http_error(400, "'" + bat + ".input' must be an object");
            calls.push_back({ { "id", b["id"] }, { "type", "function" }, { "function", { { "name", b["name"] }, { "arguments", b["input"].dump() } } } });
        } else if (type == "tool_result" && role == "user") {
            refuse_unknown(b, { "type", "tool_use_id", "content", "is_error", "cache_control" }, bat + ".");
            if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string()) throw http_error(400, "'" + bat + ".tool_use_id' must be a string");
            if (b.contains("is_error") && !b["is_error"].is_boolean()) throw http_error(400, "'" + bat + ".is_error' must be true or false");
            json result = b.contains("content") ? text_content(b["content"], bat + ".content") : json("");
            messages.push_back({ { "role", "tool" }, { "tool_call_id", b["tool_use_id"] }, { "content", std::move(result) } });
        } else {
            for (const json & part : text_content(json::array({ b }), bat)) text.push_back(part);
        }
    }
    if (text.empty() && calls.empty()) return;   // only tool results
    json msg = { { "role", role }, { "content", text.empty() ? json("") : std::move(text) } };
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    messages.push_back(std::move(msg));
}

// Anthropic tools ({name, description, input_schema}) and tool_choice as the chat request's.
void tools_to_chat(const json & body, json & chat) {
    json tools = tools_list_to_chat(body, [](const json & t, const std::string & at) {
        refuse_unknown(t, { "name", "description", "input_schema", "type", "cache_control" }, at + ".");
        if (t.contains("type") && t["type"] != "custom") {
            throw http_error(400, "'" + at + ".type': only client tools (\"custom\") are supported, not Anthropic's server tools");
        }
        if (!t.contains("name") || !t["name"].is_string()) throw http_error(400, "'" + at + ".name' must be a string");
        if (!t.contains("input_schema") || !t["input_schema"].is_object()) throw http_error(400, "'" + at + ".input_schema' must be an object");
        json fn = { { "name", t["name"] }, { "parameters", t["input_schema"] } };
        if (t.contains("description")) fn["description"] = t["description"];
        return json{ { "type", "function" }, { "function", std::move(fn) } };
    });
    if (!tools.is_null()) chat["tools"] = std::move(tools);
    if (!body.contains("tool_choice")) return;
    const json & c = body["tool_choice"];
    if (!c.is_object() || !c.contains("type") || !c["type"].is_string()) {
        throw http_error(400, "'tool_choice' must be an object with a 'type' (auto, any, tool, none)");
    }
    refuse_unknown(c, { "type", "name", "disable_parallel_tool_use" }, "tool_choice.");
    const std::string type = c["type"];
    if (type == "auto") chat["tool_choice"] = "auto";
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "none") chat["tool_choice"] = "none";
    else if (type == "tool") {
        if (!c.contains("name") || !c["name"].is_string()) throw http_error(400, "'tool_choice.name' must be a string");
        chat["tool_choice"] = { { "type", "function" }, { "function", { { "name", c["name"] } } } };
    } else {
        throw http_error(400, "'tool_choice.type' must be auto, any, tool or none");
    }
    if (c.contains("disable_parallel_tool_use")) {
        if (!c["disable_parallel_tool_use"].is_boolean()) throw http_error(400, "'tool_choice.disable_parallel_tool_use' must be true or false");
        chat["parallel_tool_calls"] = !c["disable_parallel_tool_use"].get<bool>();
    }
}

std::string stop_reason(const std::string & finish_reason, const std::string & stop_word) {
    if (finish_reason == "length") return "max_tokens";
    if (finish_reason == "tool_calls") return "tool_use";
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
        const std::string text = msg.contains("content") && msg["content"].is_string() ? msg["content"].get<std::string>() : "";
        const bool has_calls = msg.contains("tool_calls") && !msg["tool_calls"].empty();
        if (!text.empty() || (content.empty() && !has_calls)) content.push_back({ { "type", "text" }, { "text", text } });
        for (size_t i = 0; has_calls && i < msg["tool_calls"].size(); ++i) {
            const json & call = msg["tool_calls"][i];
            const std::string args = call["function"].value("arguments", "{}");
            json input = json::parse(args, nullptr, false);
            content.push_back({ { "type", "tool_use" },
                                { "id", call.value("id", "") },
                                { "name", call["function"].value("name", "") },
                                { "input", input.is_object() ? input : json::object() } });
        }
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
        for (const auto & tc : v.tool_calls) {
            // a call opens its own tool_use block (id and name), then its arguments stream in
            const std::string key = "tool_use:" + std::to_string(tc.index);
            if (!tc.id.empty()) {
                out += open_block(key, { { "type", "tool_use" }, { "id", tc.id }, { "name", tc.name }, { "input", json::object() } });
            }
            if (!tc.arguments.empty()) out += block_delta(key, { { "type", "input_json_delta" }, { "partial_json", tc.arguments } });
        }
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
    // Closes the open block and opens this one (key: what it is, "text", "tool_use:0", ...).
    std::string open_block(const std::string & key, const json & block) {
        std::string out = close_block();
        block_type_ = key;
        out += sse_named_event("content_block_start",
                               { { "type", "content_block_start" }, { "index", block_index_ }, { "content_block", block } });
        return out;
    }

    // A delta for the block key, opening a text or thinking block first if another is open.
    std::string block_delta(const std::string & key, const json & delta) {
        std::string out;
        if (block_type_ != key) {
            out += open_block(key, key == "thinking" ? json{ { "type", "thinking" }, { "thinking", "" }, { "signature", "" } }
                                                     : json{ { "type", "text" }, { "text", "" } });
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
        refuse_unknown(body, { "model", "messages", "system", "tools", "tool_choice" }, "");
    } else {
        refuse_unknown(body, { "model", "max_tokens", "messages", "system", "stop_sequences", "stream", "temperature", "top_p",
                               "top_k", "metadata", "tools", "tool_choice" },
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
        append_message(messages, m["role"].get<std::string>(), m["content"], at + ".content");
    }
    chat["messages"] = std::move(messages);
    tools_to_chat(body, chat);
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
