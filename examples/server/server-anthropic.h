// Anthropic's Messages API: POST /v1/messages (whole or streamed) and /v1/messages/count_tokens.
// A request becomes an OpenAI chat body that the chat machinery runs; the adapter writes the
// reply as a Messages response or as its stream of named events (message_start,
// content_block_start / _delta / _stop, message_delta, message_stop).
#pragma once

#include "server-oai.h"
#include "server-wire.h"

#include <memory>

// The OpenAI chat body for an Anthropic request; throws http_error(400) naming the field at
// fault. count_only: a count_tokens body (no max_tokens, no sampling fields).
json anthropic_to_chat(const json & body, bool count_only);

std::shared_ptr<wire_adapter> make_anthropic_adapter(const completion_request & creq, const std::string & model);

// {"input_tokens": N}: the tokens of the rendered prompt of a count_tokens body.
json anthropic_count_tokens(const json & body, const server_info & info);
