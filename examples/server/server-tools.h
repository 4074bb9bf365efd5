// OpenAI tool calling: reading "tools", "tool_choice" and "parallel_tool_calls"; the grammar
// that forces a call when one is required; turning the model's calls into message.tool_calls
// (whole, or as streamed delta.tool_calls) with the syntax the chat template uses.
#pragma once

#include "chat-tools.h"
#include "common.h"
#include "server-utils.h"

#include <string>
#include <vector>

struct tool_request {
    bool active = false;              // tools given and tool_choice is not "none": parse replies
    tool_syntax syntax = tool_syntax::generic;
    json tools = json::array();       // the request's tools, as given
    bool parallel = true;             // parallel_tool_calls
    bool forced = false;              // tool_choice "required" or a named function: sp.grammar forces a call
    // where the reply's text still holds its reasoning (reasoning_format none): the leading block
    // between these tags (from the start when the prompt opened it) is not searched for calls
    std::string reasoning_open, reasoning_close;
    bool reasoning_starts_inside = false;
};

// Reads the tool fields of a chat request (400 naming the field when malformed). For
// tool_choice "required" or a named function, sets sp.grammar so the first tokens are a call;
// together with "grammar" / "json_schema" / "response_format" that is a 400.
tool_request parse_tool_request(const json & body, tool_syntax syntax, common_params_sampling & sp);

// The "tools" to render into the prompt: null when tool_choice is "none" or there are none.
json tools_for_template(const json & body);

// An assistant message's tool_calls with "arguments" strings decoded to objects, which most
// templates iterate over (Qwen3-Coder's items(), Llama's tojson).
json decoded_tool_calls(const json & tool_calls, const std::string & where);

// Splits streamed content into text that can be sent now and text held back because a tool call
// may be starting, and streams the calls as OpenAI does: a call's first delta carries its index,
// id, type and name (arguments ""), later ones pieces of its arguments' JSON text, only ever
// the part no later text can change. finish() parses the whole reply (the non-streamed result)
// and gives what is still to send.
class tool_stream {
public:
    tool_stream() = default;
    explicit tool_stream(const tool_request * req) : req_(req) {}

    struct delta {
        std::string content;            // text safe to send
        json calls = json::array();     // delta.tool_calls entries, in order
    };
    delta feed(const std::string & content);
    struct result {
        std::string content;            // text still to send
        json call_deltas = json::array();   // the calls' last pieces (and calls not streamed yet)
        json calls = json::array();     // OpenAI tool_calls (id, type, function {name, arguments})
    };
    result finish();

private:
    struct sent_call {
        std::string id, name, arguments;   // what the client has been sent
    };
    const tool_request * req_ = nullptr;
    std::string all_;
    size_t sent_ = 0;
    std::vector<sent_call> calls_;
    // where calls may start: after a leading reasoning block (npos: still inside it); undecided:
    // the reply so far may still become the block's opening tag
    size_t calls_from(bool * undecided) const;
    // the deltas that bring the client from calls_ to these calls (a new call's header, then
    // the growth of its arguments when they extend what was sent)
    void send_calls(const std::vector<parsed_tool_call> & calls, json & out);
};
