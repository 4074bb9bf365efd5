// Other APIs' wire formats on top of the chat machinery (Anthropic Messages, OpenAI Responses).
// Such a request is translated into an OpenAI chat body, parsed and run like any chat request;
// what comes back (the chat completion, or each chunk of its stream) is translated into the
// other format by a wire_adapter, so sampling, stop strings, reasoning and slots stay in one place.
#pragma once

#include "server-slots.h"
#include "server-stream.h"
#include "server-utils.h"

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

class wire_adapter {
public:
    virtual ~wire_adapter() = default;
    // Each task event before it becomes chunks: the final one tells which stop string ended it.
    virtual void on_event(const task_event & ev) { (void) ev; }
    // Non-streaming: the response body from the OpenAI chat completion.
    virtual json final_response(const json & chat_completion) = 0;
    // Streaming: SSE text to send first, for each OpenAI chunk ("" for none), at the end, and
    // for an error in the middle of the stream.
    virtual std::string stream_begin() = 0;
    virtual std::string stream_chunk(const json & chunk) = 0;
    virtual std::string stream_end() = 0;
    virtual std::string stream_error(int status, const std::string & message) = 0;
};

// A field of obj (at path where, "messages[0]." ...) that is not in known is refused: 400
// "'<where><field>' is not supported by <endpoint>", so a client never believes it took effect.
void refuse_unknown_fields(const json & obj, std::initializer_list<const char *> known, const std::string & where,
                           const std::string & endpoint);

// Which content parts an API's text may hold: their types and the keys they may carry.
struct text_part_rules {
    std::initializer_list<const char *> types;
    std::initializer_list<const char *> keys;
    const char * endpoint;
};
// A string, or a list of text parts as OpenAI chat text parts; throws http_error(400) naming the
// part at fault (an image, an unknown key).
json text_parts_to_chat(const json & content, const std::string & where, const text_part_rules & rules);

// body["tools"] as chat tools: each must be an object; to_chat converts one (at: "tools[i]"),
// throwing http_error(400) naming what is wrong. Null when the body has no tools.
json tools_list_to_chat(const json & body, const std::function<json(const json & tool, const std::string & at)> & to_chat);

// What one OpenAI chat stream chunk carries for the first choice: text deltas, the finish reason
// ("" until the last), and the completion tokens of the usage chunk (-1 when it is not one).
struct chat_chunk_view {
    std::string reasoning, content, finish_reason;
    int64_t completion_tokens = -1;
    // tool calls: a call starts with its id and name, then its arguments come in pieces
    struct tool_call_delta {
        int index = 0;
        std::string id, name, arguments;
    };
    std::vector<tool_call_delta> tool_calls;
};
chat_chunk_view read_chat_chunk(const json & chunk);
