// The server's request path without HTTP: a body as the handlers receive it, through the same
// functions (parse_request_json, the Anthropic and Responses conversions, parse_chat_request /
// parse_completion_request) with the vocabulary and chat template of a synth model. The first
// byte picks the endpoint. The server answers a json::exception with 400 and any other exception
// with 500; a 5xx for a client's body is a finding, as is any crash.

#include "fuzz-support.h"

#include "chat-tools.h"
#include "server-anthropic.h"
#include "server-oai.h"
#include "server-responses.h"

namespace {

struct fixture {
    std::unique_ptr<llama_vocab> vocab;
    std::unique_ptr<kiln::chat_template> tmpl;
    common_params defaults;
    server_info info;

    fixture() {
        const char * model = "models/synth-qwen3-Q4_K_M.gguf";
        vocab = kiln_fuzz::load_shared_vocab(model);
        gguf_context * meta = kiln_fuzz::open_shared_gguf(model);
        const int64_t key = gguf_find_key(meta, "tokenizer.chat_template");
        const std::string source = key >= 0 ? gguf_get_val_str(meta, key) : "";
        gguf_free(meta);
        if (source.empty()) {
            std::fprintf(stderr, "fuzz set-up: %s has no chat template\n", model);
            std::exit(2);
        }
        tmpl = std::make_unique<kiln::chat_template>(source, "", "<|im_end|>");
        info.model_name = "fuzz";
        info.vocab = vocab.get();
        info.n_ctx_slot = 512;
        info.defaults = &defaults;
        info.tmpl = tmpl.get();
        info.tools_syntax = tool_syntax_from_template(source);
    }
};

void handle(uint8_t endpoint, const std::string & text, const server_info & info) {
    const json body = parse_request_json(text);
    switch (endpoint % 6) {
        case 0: parse_chat_request(body, info); break;
        case 1: parse_completion_request(body, info, api_kind::completions); break;
        case 2: parse_completion_request(body, info, api_kind::native); break;
        case 3: parse_chat_request(anthropic_to_chat(body, false), info); break;
        case 4: anthropic_count_tokens(body, info); break;
        case 5: parse_chat_request(responses_to_chat(body), info); break;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    static fixture f;
    if (size == 0) return 0;
    const std::string text(reinterpret_cast<const char *>(data + 1), size - 1);
    try {
        handle(data[0], text, f.info);
    } catch (const http_error & e) {
        if (e.status >= 500) kiln_fuzz::finding("server request", "status " + std::to_string(e.status) + ": " + e.what());
    } catch (const json::exception &) {
        // answered 400 "bad field type in the request"
    } catch (const std::exception & e) {
        kiln_fuzz::finding("server request", std::string("answered 500: ") + e.what());
    }
    return 0;
}
