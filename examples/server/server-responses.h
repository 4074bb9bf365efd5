// OpenAI's Responses API: POST /v1/responses, whole or streamed. A request ("input" items and
// "instructions") becomes an OpenAI chat body that the chat machinery runs; the adapter writes
// the reply as a response object (reasoning and message output items) or as its stream of typed
// events (response.created ... response.output_text.delta ... response.completed). Nothing is
// stored, so previous_response_id and store: true are refused.
#pragma once

#include "server-oai.h"
#include "server-wire.h"

#include <memory>

// The OpenAI chat body for a Responses request; throws http_error(400) naming the field at fault.
json responses_to_chat(const json & body);

std::shared_ptr<wire_adapter> make_responses_adapter(const json & body, const completion_request & creq, const std::string & model);
