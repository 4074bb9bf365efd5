// The wire formats: reading OpenAI (/v1/chat/completions, /v1/completions) and llama.cpp-native
// (/completion) request bodies into tasks, and writing the responses — whole, or as the chunks of
// a stream — from the events the slots send back.
#pragma once

#include "chat-template.h"
#include "common.h"
#include "server-slots.h"
#include "server-stream.h"
#include "server-tools.h"
#include "server-utils.h"

#include <memory>
#include <string>
#include <vector>

enum class api_kind {
    chat,          // /v1/chat/completions
    completions,   // /v1/completions
    native,        // /completion
};

// What the request handlers need to know about the model and the server's defaults.
struct server_info {
    std::string model_name;                       // the alias, or the model file's name
    const llama_vocab * vocab = nullptr;
    int32_t n_ctx_slot = 0;
    int32_t n_slots = 1;
    const common_params * defaults = nullptr;     // sampling defaults and -n
    const kiln::chat_template * tmpl = nullptr;   // null: no chat template available
    reasoning_markup markup = reasoning_markup::think;   // how the model's replies mark reasoning
    tool_syntax tools_syntax = tool_syntax::generic;   // how the template's model writes tool calls
    std::string reasoning_forced;                 // what a spent thinking budget writes (reasoning_forced_close)
};


struct completion_request {
    api_kind kind = api_kind::chat;
    std::vector<std::vector<llama_token>> prompts;   // one per choice
    int64_t usage_prompt_tokens = 0;                 // prompt tokens counted once per distinct prompt
    int32_t n_per_prompt = 1;                        // choices per prompt ("n"): prompts[i] is prompt i / n
    generation_params gen;
    bool stream = false;
    bool include_usage = false;                      // stream_options.include_usage
    std::string prompt_text;                         // the rendered chat prompt / the native prompt
    bool reasoning_split = false;                    // reasoning_format (or --reasoning-format) other than none
    bool reasoning_in_content = false;               // deepseek-legacy: the content keeps the tagged reasoning too
    bool reasoning_starts_inside = false;            // the prompt ends inside <think>
    reasoning_markup markup = reasoning_markup::think;
    tool_request tools;                              // chat: parse tool calls out of the replies
};

// Parse a request body. Throws http_error(400) naming the field at fault; prompts longer than
// the slot context are refused here (400) as well.
completion_request parse_chat_request(const json & body, const server_info & info);
completion_request parse_completion_request(const json & body, const server_info & info, api_kind kind);

// The chat prompt of a request's "messages" (and "tools", "chat_template_kwargs") as text.
std::string render_chat_prompt(const json & body, const server_info & info);

// Builds the response of one request from the events of its tasks (one task per choice).
class response_builder {
public:
    response_builder(const completion_request & req, std::string model_name);

    // Streaming: the chunks to send first (the chat role chunk), for each event, and at the end
    // (the usage chunk). Each is one SSE data event.
    std::vector<json> stream_begin();
    std::vector<json> stream_event(size_t choice, const task_event & ev);
    std::vector<json> stream_end();
    // OpenAI streams close with "data: [DONE]"; llama.cpp's native stream does not.
    bool sends_done() const { return req_.kind != api_kind::native; }

    // Non-streaming: feed every event, then take the response.
    void add_event(size_t choice, const task_event & ev);
    json final_response() const;

private:
    struct choice_state {
        reasoning_splitter splitter{ false, false };
        std::string content, reasoning;
        std::vector<token_report> tokens;
        task_summary summary;
        bool done = false;
        size_t text_offset = 0;   // completions logprobs: where the next token starts
        tool_stream tools;
        json tool_calls = json::array();
        json call_deltas = json::array();   // delta.tool_calls entries of the event absorb() took last
        bool legacy_opened = false, legacy_closed = false;   // deepseek-legacy: tags shown in the content
    };
    reasoning_splitter::delta absorb(size_t choice, const task_event & ev);
    std::vector<json> stream_chunks(size_t choice, const task_event & ev);   // stream_event without timings_per_token
    json progress_chunk(size_t choice, const prompt_progress & p) const;      // return_progress
    json usage() const;
    json timings() const;
    json chat_logprobs(const std::vector<token_report> & tokens) const;
    json completion_logprobs(const std::vector<token_report> & tokens, size_t & offset) const;
    json native_probs(const std::vector<token_report> & tokens) const;
    json chunk_base(const char * object) const;

    const completion_request & req_;
    std::string model_;
    std::string id_;
    int64_t created_;
    std::vector<choice_state> choices_;
};

// llama.cpp's "timings" object of one task.
json timings_json(const task_summary & s);
