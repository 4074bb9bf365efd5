// OpenAI Responses API on the chat machinery (see server-responses.h).
#include "server-responses.h"

#include <algorithm>

namespace {

void refuse_unknown(const json & obj, std::initializer_list<const char *> known, const std::string & where) {
    refuse_unknown_fields(obj, known, where, "/v1/responses");
}

// A message item's content: a string, or input_text / output_text parts (annotations come back
// with earlier output_text parts; they do not change the prompt).
json item_content(const json & content, const std::string & where) {
    return text_parts_to_chat(content, where,
                              { { "input_text", "output_text" }, { "type", "text", "annotations", "logprobs" }, "/v1/responses" });
}

// A function_call item (the model's earlier call) joins the assistant message before it as a
// tool call; a function_call_output item (its result) is a "tool" message.
void append_call_item(json & messages, const json & it, const std::string & type, const std::string & at) {
    auto need_string = [&](const char * key) {
        if (!it.contains(key) || !it[key].is_string()) throw http_error(400, "'" + at + "." + key + "' must be a string");
    };
    need_string("call_id");
    if (type == "function_call_output") {
        refuse_unknown(it, { "type", "call_id", "output", "id", "status" }, at + ".");
        need_string("output");
        messages.push_back({ { "role", "tool" }, { "tool_call_id", it["call_id"] }, { "content", it["output"] } });
        return;
    }
    refuse_unknown(it, { "type", "call_id", "name", "arguments", "id", "status" }, at + ".");
    need_string("name");
    need_string("arguments");
    json tc = { { "id", it["call_id"] }, { "type", "function" }, { "function", { { "name", it["name"] }, { "arguments", it["arguments"] } } } };
    if (messages.empty() || messages.back()["role"] != "assistant") {
        messages.push_back({ { "role", "assistant" }, { "content", "" } });
    }
    json & last = messages.back();
    if (!last.contains("tool_calls")) last["tool_calls"] = json::array();
    last["tool_calls"].push_back(std::move(tc));
}

// Responses function tools ({type: function, name, description, parameters, strict}), tool_choice
// and parallel_tool_calls as the chat request's.
void tools_to_chat(const json & body, json & chat) {
    json tools = tools_list_to_chat(body, [](const json & t, const std::string & at) {
        if (t.value("type", "") != "function") {
            throw http_error(400, "'" + at + ".type' must be \"function\" (built-in tools such as web search are not available)");
        }
        refuse_unknown(t, { "type", "name", "description", "parameters", "strict" }, at + ".");
        if (!t.contains("name") || !t["name"].is_string()) throw http_error(400, "'" + at + ".name' must be a string");
        json fn = { { "name", t["name"] } };
        for (const char * k : { "description", "parameters", "strict" }) {
            if (t.contains(k) && !t[k].is_null()) fn[k] = t[k];
        }
        return json{ { "type", "function" }, { "function", std::move(fn) } };
    });
    if (!tools.is_null()) chat["tools"] = std::move(tools);
    if (body.contains("tool_choice")) {
        const json & c = body["tool_choice"];
        if (c.is_object()) {
            if (c.value("type", "") != "function" || !c.contains("name") || !c["name"].is_string()) {
                throw http_error(400, "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
            }
            chat["tool_choice"] = { { "type", "function" }, { "function", { { "name", c["name"] } } } };
        } else {
            chat["tool_choice"] = c;   // the chat parser checks the string
        }
    }
    if (body.contains("parallel_tool_calls")) chat["parallel_tool_calls"] = body["parallel_tool_calls"];
}

class responses_adapter : public wire_adapter {
public:
    responses_adapter(const json & body, int64_t input_tokens, std::string model)
        : id_(random_id("resp_")), msg_id_(random_id("msg_")), rs_id_(random_id("rs_")), model_(std::move(model)),
          created_(unix_time_s()), input_tokens_(input_tokens) {
        // the request's settings, echoed in the response object as OpenAI does
        echo_ = { { "instructions", body.value("instructions", json(nullptr)) },
                  { "max_output_tokens", body.value("max_output_tokens", json(nullptr)) },
                  { "temperature", body.value("temperature", json(1.0)) },
                  { "top_p", body.value("top_p", json(1.0)) },
                  { "metadata", body.value("metadata", json::object()) },
                  { "tools", body.value("tools", json::array()) },
                  { "tool_choice", body.value("tool_choice", json("auto")) },
                  { "parallel_tool_calls", body.value("parallel_tool_calls", json(true)) } };
    }

    json final_response(const json & chat) override {
        const json & choice = chat.at("choices").at(0);
        const json & msg = choice.at("message");
        reasoning_ = msg.value("reasoning_content", "");
        text_ = msg.contains("content") && msg["content"].is_string() ? msg["content"].get<std::string>() : "";
        for (const json & call : msg.value("tool_calls", json::array())) {
            calls_.push_back({ random_id("fc_"), call.value("id", ""), call["function"].value("name", ""),
                               call["function"].value("arguments", ""), -1 });
        }
        finish_reason_ = choice.value("finish_reason", "stop");
        output_tokens_ = chat.at("usage").value("completion_tokens", 0);
        return response(finish_reason_ == "length" ? "incomplete" : "completed");
    }

    std::string stream_begin() override {
        std::string out = event("response.created", { { "response", response("in_progress") } });
        out += event("response.in_progress", { { "response", response("in_progress") } });
        return out;
    }

    std::string stream_chunk(const json & chunk) override {
        std::string out;
        const chat_chunk_view v = read_chat_chunk(chunk);
        if (v.completion_tokens >= 0) output_tokens_ = v.completion_tokens;
        if (!v.reasoning.empty()) {
            if (!reasoning_open_) {
                reasoning_open_ = true;
                out += event("response.output_item.added", { { "output_index", index_of(rs_id_) }, { "item", reasoning_item("in_progress", "") } });
            }
            reasoning_ += v.reasoning;
            out += event("response.reasoning_text.delta",
                         { { "item_id", rs_id_ }, { "output_index", index_of(rs_id_) }, { "content_index", 0 }, { "delta", v.reasoning } });
        }
        if (!v.content.empty()) {
            out += open_message();
            text_ += v.content;
            out += event("response.output_text.delta", { { "item_id", msg_id_ },
                                                         { "output_index", index_of(msg_id_) },
                                                         { "content_index", 0 },
                                                         { "delta", v.content },
                                                         { "logprobs", json::array() } });
        }
        for (const auto & tc : v.tool_calls) {
            if (!tc.id.empty()) {
                // a call starts: its item follows the items sent so far
                out += close_reasoning();
                calls_.push_back({ random_id("fc_"), tc.id, tc.name, "", 0 });
                calls_.back().output_index = n_items_sent() - 1;
                out += event("response.output_item.added",
                             { { "output_index", calls_.back().output_index }, { "item", call_item(calls_.back(), "in_progress") } });
            }
            // the calls open in index order, so a piece's index is its place in calls_
            if (!tc.arguments.empty() && tc.index >= 0 && (size_t) tc.index < calls_.size()) {
                call & c = calls_[(size_t) tc.index];
                c.arguments += tc.arguments;
                out += event("response.function_call_arguments.delta",
                             { { "item_id", c.item_id }, { "output_index", c.output_index }, { "delta", tc.arguments } });
            }
        }
        if (!v.finish_reason.empty()) finish_reason_ = v.finish_reason;
        return out;
    }

    std::string stream_end() override {
        // the message item comes even when the reply is empty (unless it is only tool calls), as in
        // the whole response
        std::string out = calls_.empty() ? open_message() : close_reasoning();
        if (message_open_) {
            const int idx = index_of(msg_id_);
            out += event("response.output_text.done", { { "item_id", msg_id_ },
                                                        { "output_index", idx },
                                                        { "content_index", 0 },
                                                        { "text", text_ },
                                                        { "logprobs", json::array() } });
            out += event("response.content_part.done",
                         { { "item_id", msg_id_ }, { "output_index", idx }, { "content_index", 0 }, { "part", text_part(text_) } });
            out += event("response.output_item.done", { { "output_index", idx }, { "item", message_item("completed", true) } });
        }
        for (const call & c : calls_) {
            out += event("response.function_call_arguments.done",
                         { { "item_id", c.item_id }, { "output_index", c.output_index }, { "arguments", c.arguments } });
            out += event("response.output_item.done", { { "output_index", c.output_index }, { "item", call_item(c, "completed") } });
        }
        const bool complete = finish_reason_ != "length";
        out += event(complete ? "response.completed" : "response.incomplete",
                     { { "response", response(complete ? "completed" : "incomplete") } });
        return out;
    }

    std::string stream_error(int status, const std::string & message) override {
        return event("error", { { "code", status < 500 ? "invalid_request_error" : "server_error" }, { "message", message }, { "param", nullptr } });
    }

private:
    std::string event(const std::string & type, json data) {
        json e = { { "type", type } };
        for (auto & item : data.items()) e[item.key()] = std::move(item.value());
        e["sequence_number"] = sequence_++;
        return sse_named_event(type, e);
    }

    // Output items come in order: reasoning (when there is any), then the message.
    int index_of(const std::string & item_id) const {
        const bool has_reasoning = reasoning_open_ || reasoning_done_ || !reasoning_.empty();
        if (item_id == msg_id_ && msg_index_ >= 0) return msg_index_;
        return item_id == rs_id_ ? 0 : (has_reasoning ? 1 : 0);
    }

    // text after the calls (the calls stream as they are written): the message item follows them
    bool message_after_calls() const { return msg_index_ >= 0 && !calls_.empty() && msg_index_ > calls_.front().output_index; }

    std::string open_message() {
        if (message_open_) return "";
        std::string out = close_reasoning();
        msg_index_ = n_items_sent();
        message_open_ = true;
        out += event("response.output_item.added", { { "output_index", index_of(msg_id_) }, { "item", message_item("in_progress", false) } });
        out += event("response.content_part.added",
                     { { "item_id", msg_id_ }, { "output_index", index_of(msg_id_) }, { "content_index", 0 }, { "part", text_part("") } });
        return out;
    }

    std::string close_reasoning() {
        if (!reasoning_open_) return "";
        reasoning_open_ = false;
        reasoning_done_ = true;
        const int idx = index_of(rs_id_);
        std::string out = event("response.reasoning_text.done",
                                { { "item_id", rs_id_ }, { "output_index", idx }, { "content_index", 0 }, { "text", reasoning_ } });
        out += event("response.output_item.done", { { "output_index", idx }, { "item", reasoning_item("completed", reasoning_) } });
        return out;
    }

    static json text_part(const std::string & text) {
        return json{ { "type", "output_text" }, { "text", text }, { "annotations", json::array() }, { "logprobs", json::array() } };
    }

    json reasoning_item(const char * status, const std::string & text) const {
        json content = json::array();
        if (!text.empty()) content.push_back({ { "type", "reasoning_text" }, { "text", text } });
        return json{ { "type", "reasoning" }, { "id", rs_id_ }, { "status", status }, { "summary", json::array() }, { "content", content } };
    }

    json message_item(const char * status, bool with_text) const {
        return json{ { "type", "message" },
                     { "id", msg_id_ },
                     { "status", status },
                     { "role", "assistant" },
                     { "content", with_text ? json::array({ text_part(text_) }) : json::array() } };
    }

    json response(const std::string & status) const {
        json output = json::array();
        const bool done = status != "in_progress";
        if (done) {
            if (!reasoning_.empty()) output.push_back(reasoning_item("completed", reasoning_));
            const bool message = !text_.empty() || calls_.empty();
            if (message && !message_after_calls()) output.push_back(message_item("completed", true));
            for (const call & c : calls_) output.push_back(call_item(c, "completed"));
            if (message && message_after_calls()) output.push_back(message_item("completed", true));
        }
        json r = { { "id", id_ },
                   { "object", "response" },
                   { "created_at", created_ },
                   { "status", status },
                   { "error", nullptr },
                   { "incomplete_details", status == "incomplete" ? json{ { "reason", "max_output_tokens" } } : json(nullptr) },
                   { "model", model_ },
                   { "output", std::move(output) },
                   { "text", { { "format", { { "type", "text" } } } } },
                   { "store", false } };
        for (const auto & item : echo_.items()) r[item.key()] = item.value();
        if (done) {
            r["usage"] = { { "input_tokens", input_tokens_ },
                           { "input_tokens_details", { { "cached_tokens", 0 } } },
                           { "output_tokens", output_tokens_ },
                           { "output_tokens_details", { { "reasoning_tokens", 0 } } },
                           { "total_tokens", input_tokens_ + output_tokens_ } };
        } else {
            r["usage"] = nullptr;
        }
        return r;
    }

    struct call {
        std::string item_id, call_id, name, arguments;
        int output_index;
    };
    json call_item(const call & c, const char * status) const {
        return json{ { "type", "function_call" }, { "id", c.item_id },   { "call_id", c.call_id },
                     { "name", c.name },          { "arguments", c.arguments }, { "status", status } };
    }
    // items announced so far: reasoning, the message, the calls
    int n_items_sent() const {
        return (reasoning_open_ || reasoning_done_ ? 1 : 0) + (message_open_ ? 1 : 0) + (int) calls_.size();
    }

    std::vector<call> calls_;
    int msg_index_ = -1;   // the message item's output_index once it is sent
    std::string id_, msg_id_, rs_id_, model_;
    int64_t created_;
    int64_t input_tokens_ = 0, output_tokens_ = 0;
    json echo_;
    std::string reasoning_, text_, finish_reason_ = "stop";
    bool reasoning_open_ = false, reasoning_done_ = false, message_open_ = false;
    int64_t sequence_ = 0;
};

} // namespace

json responses_to_chat(const json & body) {
    if (!body.is_object()) throw http_error(400, "the request body must be a JSON object");
    refuse_unknown(body, { "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream", "store",
                           "metadata", "user", "truncation", "text", "tools", "tool_choice", "parallel_tool_calls" },
                   "");
    json chat = json::object();
    if (body.contains("model")) {
        if (!body["model"].is_string()) throw http_error(400, "'model' must be a string");
        chat["model"] = body["model"];
    }
    // nothing is kept after the reply, so a request to store it cannot be honoured
    if (body.contains("store") && (!body["store"].is_boolean() || body["store"].get<bool>())) {
        throw http_error(400, "'store' must be false: this server does not keep responses");
    }
    if (body.contains("truncation") && body["truncation"] != "disabled") {
        throw http_error(400, "'truncation' must be \"disabled\" (prompts longer than the context are refused)");
    }
    if (body.contains("text")) {
        const json & t = body["text"];
        if (!t.is_object()) throw http_error(400, "'text' must be an object");
        refuse_unknown(t, { "format" }, "text.");
        if (t.contains("format") && (!t["format"].is_object() || t["format"].value("type", "") != "text")) {
            throw http_error(400, "'text.format' must be {\"type\": \"text\"} (structured output is not implemented)");
        }
    }
    if (body.contains("metadata") && !body["metadata"].is_object()) throw http_error(400, "'metadata' must be an object");
    if (body.contains("user") && !body["user"].is_string()) throw http_error(400, "'user' must be a string");

    json messages = json::array();
    if (body.contains("instructions") && !body["instructions"].is_null()) {
        if (!body["instructions"].is_string()) throw http_error(400, "'instructions' must be a string");
        messages.push_back({ { "role", "system" }, { "content", body["instructions"] } });
    }
    if (!body.contains("input")) throw http_error(400, "'input' is required");
    const json & input = body["input"];
    if (input.is_string()) {
        messages.push_back({ { "role", "user" }, { "content", input } });
    } else if (input.is_array() && !input.empty()) {
        for (size_t i = 0; i < input.size(); ++i) {
            const json & it = input[i];
            const std::string at = "input[" + std::to_string(i) + "]";
            if (!it.is_object()) throw http_error(400, "'" + at + "' must be an object");
            const std::string type = it.contains("type") && it["type"].is_string() ? it["type"].get<std::string>() : "message";
            if (type == "function_call" || type == "function_call_output") {
                append_call_item(messages, it, type, at);
                continue;
            }
            if (type != "message") {
                throw http_error(400, "'" + at + ".type' " + it["type"].dump() +
                                          " is not supported (message, function_call and function_call_output items are)");
            }
            refuse_unknown(it, { "type", "role", "content", "id", "status" }, at + ".");
            static const char * roles[] = { "user", "assistant", "system", "developer" };
            if (!it.contains("role") || !it["role"].is_string() ||
                std::none_of(std::begin(roles), std::end(roles), [&](const char * r) { return it["role"] == r; })) {
                throw http_error(400, "'" + at + ".role' must be user, assistant, system or developer");
            }
            if (!it.contains("content")) throw http_error(400, "'" + at + ".content' is required");
            messages.push_back({ { "role", it["role"] }, { "content", item_content(it["content"], at + ".content") } });
        }
    } else {
        throw http_error(400, "'input' must be a string or a non-empty list of input items");
    }
    chat["messages"] = std::move(messages);
    tools_to_chat(body, chat);

    if (body.contains("max_output_tokens") && !body["max_output_tokens"].is_null()) {
        if (!body["max_output_tokens"].is_number_integer() || body["max_output_tokens"].get<int64_t>() < 1) {
            throw http_error(400, "'max_output_tokens' must be a whole number of at least 1");
        }
        chat["max_tokens"] = body["max_output_tokens"];
    }
    for (const char * k : { "temperature", "top_p" }) {
        if (body.contains(k) && !body[k].is_null()) chat[k] = body[k];   // the chat parser checks them
    }
    if (body.contains("stream")) {
        if (!body["stream"].is_boolean()) throw http_error(400, "'stream' must be true or false");
        chat["stream"] = body["stream"];
        if (body["stream"].get<bool>()) chat["stream_options"] = { { "include_usage", true } };
    }
    return chat;
}

std::shared_ptr<wire_adapter> make_responses_adapter(const json & body, const completion_request & creq, const std::string & model) {
    return std::make_shared<responses_adapter>(body, creq.usage_prompt_tokens, model);
}
