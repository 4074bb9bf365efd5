// Small pieces the server's parts share: the JSON type, HTTP errors in the OpenAI shape, UTF-8
// boundaries, ids and clocks, and prompt tokenization.
#pragma once

#include "llama.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

// Ordered, so responses list their fields in the order clients are used to reading them.
using json = nlohmann::ordered_json;

// A request the server refuses: the HTTP status and the OpenAI error type go to the client with
// the message (which names the field at fault).
struct http_error : std::runtime_error {
    int status;
    std::string type;
    http_error(int status, const std::string & message, std::string type = "");
};

// The error type OpenAI uses for a status (invalid_request_error for 400, ...).
const char * error_type_for_status(int status);

// {"error": {"code": 400, "message": "...", "type": "invalid_request_error"}}: the OpenAI error
// object, with the numeric code llama.cpp's server adds.
json make_error_json(int status, const std::string & message, const std::string & type = "");

// A request body as JSON. Throws http_error(400) when it is empty, not JSON, or nested deeper
// than 64 levels (copying or rendering a deeply nested value recurses: a request must not be able
// to exhaust the stack).
json parse_request_json(const std::string & body);

// JSON text for the wire: invalid UTF-8 (a token that ends mid-character) is replaced, not thrown on.
std::string dump_json(const json & j);

// Length of the longest prefix of s that does not end inside a UTF-8 sequence: the rest waits
// for the bytes that complete it.
size_t utf8_complete_prefix(const std::string & s);

// "chatcmpl-<24 random alphanumerics>"
std::string random_id(const std::string & prefix);

int64_t unix_time_s();
double  monotonic_ms();

// The bytes of a string as the integer list OpenAI's logprobs report.
json bytes_json(const std::string & s);


// a == b for secrets (API keys): the time taken depends on b's length only, not on where the
// strings first differ.
bool secrets_equal(const std::string & a, const std::string & b);

// Tokenize a prompt given as a string, a token-id list or a mix ("text", [1, 2], "more"), as
// /completion and /v1/completions allow. Special tokens in the text are parsed; add_special adds
// BOS the way the model wants it, once.
std::vector<llama_token> tokenize_prompt(const llama_vocab * vocab, const json & prompt, bool add_special);

// Every prompt of a "prompt" field: a string or a token list is one prompt; a list of strings or
// of token lists is several.
std::vector<json> split_prompts(const json & prompt);
