// Turning generated pieces into the text a client sees, one delta at a time, so that a streamed
// reply concatenates to exactly the non-streamed one:
//  - stop_matcher holds back text that might be the start of a stop string (and bytes of an
//    unfinished UTF-8 character), so a stop string is never sent, not even in part;
//  - reasoning_splitter moves a leading <think>...</think> block (or, in gpt-oss's harmony
//    format, the analysis channel) to reasoning_content, holding back partial tags;
//  - SSE framing.
#pragma once

#include "chat-template.h"
#include "server-utils.h"

#include <string>
#include <vector>

class stop_matcher {
public:
    explicit stop_matcher(std::vector<std::string> stops = {});

    // Add a piece of output; returns the text that is now safe to send. After a stop string is
    // seen, stopped() is true, the text before it has been returned and the rest is dropped.
    std::string feed(const std::string & piece);
    // The generation ended for another reason: everything still held back.
    std::string flush();

    bool stopped() const { return stopped_; }
    const std::string & stop_word() const { return stop_word_; }

private:
    std::vector<std::string> stops_;
    std::string pending_;
    bool stopped_ = false;
    std::string stop_word_;
};

// How a model marks its reasoning in the text it generates.
enum class reasoning_markup {
    think,       // <think> reasoning </think> answer (Qwen3, DeepSeek R1 / V3.1, GLM, Kimi, Granite, ...)
    seed,        // ByteDance Seed-OSS: <seed:think> reasoning </seed:think> answer
    command_r,   // Command R7B: <|START_THINKING|> reasoning <|END_THINKING|> answer
    mistral,     // Magistral / Ministral reasoning: [THINK] reasoning [/THINK] answer
    harmony,     // gpt-oss: <|channel|>analysis<|message|> reasoning <|end|><|start|>assistant<|channel|>final<|message|> answer
};

// The markup the template's source teaches its model (think when it shows none).
reasoning_markup reasoning_markup_from_template(const std::string & template_source);

// The texts that open and close the reasoning block in a markup (a prompt ending with the open
// tag starts inside).
const std::string & reasoning_open_tag(reasoning_markup markup);
const std::string & reasoning_close_tag(reasoning_markup markup);

// Chunking-invariant: feeding a text in any split gives the same concatenated output.
class reasoning_splitter {
public:
    struct delta {
        std::string reasoning;
        std::string content;
    };

    // enabled: split at all (--reasoning-format other than none).
    // starts_inside: the prompt already opened the block (it ends with the open tag).
    // In the harmony markup, the header of the message after the reasoning (up to its
    // <|message|>) is dropped, and so is the header of a reply without reasoning, except a
    // header addressed to a tool (" to=functions.NAME"): that is a call, kept for its parser.
    reasoning_splitter(bool enabled, bool starts_inside, reasoning_markup markup = reasoning_markup::think);

    delta feed(const std::string & text);
    delta flush();

private:
    enum class state { start, reasoning, skip_ws_after, skip_header, content };
    state st_;
    reasoning_markup markup_ = reasoning_markup::think;
    bool skip_ws_ = false;   // drop whitespace right after a tag
    std::string held_;
    void step(delta & out, bool final);
};

// --reasoning-budget N (or a request's "thinking_budget_tokens"): counts the tokens generated
// inside the reply's leading reasoning block (from the prompt's end when the prompt opened it),
// so the slot can close the block itself once N have been written. Fed each token's text; the
// block is left when its close tag appears (whatever the token boundaries).
class reasoning_budget {
public:
    reasoning_budget() = default;   // no budget: never exhausted
    reasoning_budget(int32_t budget, std::string open, std::string close, bool starts_inside);

    void feed(const std::string & piece);
    // Inside the block with the budget spent: the caller writes the close now (and calls closed()).
    bool exhausted() const { return st_ == state::inside && n_inside_ >= budget_; }
    void closed() { st_ = state::over; }
    int32_t n_inside() const { return n_inside_; }

private:
    enum class state { maybe_at_start, inside, over };
    state st_ = state::over;
    int32_t budget_ = -1;
    int32_t n_inside_ = 0;
    std::string open_, close_;
    std::string held_;   // text not yet known to be outside the tags
};

// What closing a reasoning block takes when the thinking budget is spent: the markup's close tag
// and what the chat template writes between it and the answer (read from the template's own
// rendering of an assistant turn with reasoning; the markup's usual separator when it shows none).
std::string reasoning_forced_close(const kiln::chat_template * tmpl, reasoning_markup markup);

// One server-sent event: "data: <json>\n\n".
std::string sse_event(const json & data);
// The OpenAI end-of-stream marker.
std::string sse_done();
// "event: NAME\ndata: JSON\n\n": the named events of Anthropic's and the Responses API's streams.
std::string sse_named_event(const std::string & name, const json & data);
// An error inside a stream (the headers were sent already, so the status cannot change).
std::string sse_error(int status, const std::string & message);
