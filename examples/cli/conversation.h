// llama-cli -cnv: an interactive chat through the chat template. Each line read from stdin is a
// user turn; the conversation so far is rendered with the template and only what is new since
// the last turn is decoded (the KV cache keeps the rest). `/exit` or end of input ends it; Ctrl-C
// stops the reply being generated, and at the prompt ends the program.
#pragma once

#include "chat-template.h"
#include "common.h"

// -p (if any) is the system message, as in llama.cpp. Returns the exit code.
int run_conversation(llama_context * ctx, const common_params & params, const kiln::chat_template & tmpl);
