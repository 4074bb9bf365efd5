// Other APIs' wire formats on top of the chat machinery (Anthropic Messages, OpenAI Responses).
// Such a request is translated into an OpenAI chat body, parsed and run like any chat request;
// what comes back (the chat completion, or each chunk of its stream) is translated into the
// other format by a wire_adapter, so sampling, stop strings, reasoning and slots stay in one place.
#pragma once

#include "server-slots.h"
#include "server-utils.h"

#include <string>

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

// "event: NAME\ndata: JSON\n\n", the named-event SSE both Anthropic and the Responses API use.
std::string sse_named_event(const std::string & name, const json & data);
