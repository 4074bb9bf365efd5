#include "conversation.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace {

std::atomic<bool> g_interrupted{ false };

void on_sigint(int) { g_interrupted = true; }

// SIGINT without SA_RESTART: a read waiting at the prompt returns, and generation sees the flag.
void install_sigint_handler() {
    struct sigaction sa{};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, nullptr);
}

bool decode_tokens(llama_context * ctx, std::vector<llama_token> & tokens) {
    const int32_t n_batch = (int32_t) std::max<uint32_t>(llama_n_batch(ctx), 1);
    for (size_t i = 0; i < tokens.size(); i += (size_t) n_batch) {
        const int32_t n = (int32_t) std::min<size_t>((size_t) n_batch, tokens.size() - i);
        if (llama_decode(ctx, llama_batch_get_one(tokens.data() + i, n)) != 0) return false;
    }
    return true;
}

// The assistant's reply to what was decoded last: sampled until end of turn, -n, a full
// context or Ctrl-C; printed as it comes. The reply's tokens stay in the cache.
std::string generate_reply(llama_context * ctx, llama_sampler * smpl, const common_params & params) {
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    const int32_t n_ctx = (int32_t) llama_n_ctx(ctx);
    std::string reply;
    for (int32_t n = 0; params.n_predict < 0 || n < params.n_predict; ++n) {
        if (g_interrupted) {
            g_interrupted = false;
            std::fputs("\n[interrupted]", stdout);
            break;
        }
        llama_token tok = llama_sampler_sample(smpl, ctx, -1);
        if (tok == LLAMA_TOKEN_NULL) {
            const char * why = llama_sampler_error(smpl);
            LOG_ERR("\nerror: sampling failed%s%s\n", why ? ": " : "", why ? why : "");
            break;
        }
        if (llama_vocab_is_eog(vocab, tok)) break;
        const std::string piece = common_token_to_piece(vocab, tok, params.special);
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
        reply += piece;
        if (llama_memory_seq_pos_max(ctx, 0) + 2 > n_ctx) {
            LOG_WRN("\nwarning: the context is full (%d tokens); the reply stops here\n", n_ctx);
            break;
        }
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) {
            LOG_ERR("\nerror: llama_decode failed\n");
            break;
        }
    }
    std::fputs("\n", stdout);
    std::fflush(stdout);
    return reply;
}

} // namespace

int run_conversation(llama_context * ctx, const common_params & params, const kiln::chat_template & tmpl) {
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    const int32_t n_ctx = (int32_t) llama_n_ctx(ctx);
    install_sigint_handler();
    llama_sampler * smpl = common_sampler_chain_from_params(params.sampling, n_ctx, vocab);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!params.prompt.empty()) messages.push_back({ { "role", "system" }, { "content", params.prompt } });
    std::string rendered;   // the conversation as decoded so far
    LOG_INF("conversation mode: type a message and press Enter; /exit or end of input ends it, Ctrl-C stops a reply\n");
    int rc = 0;
    for (;;) {
        std::fputs("\n> ", stdout);
        std::fflush(stdout);
        std::string line;
        if (!std::getline(std::cin, line) || g_interrupted) break;   // end of input, or Ctrl-C at the prompt
        if (line == "/exit") break;
        if (line.empty()) continue;
        messages.push_back({ { "role", "user" }, { "content", line } });
        std::string prompt;
        try {
            prompt = tmpl.apply(messages, nullptr, true);
        } catch (const std::exception & e) {
            LOG_ERR("error: chat template: %s\n", e.what());
            rc = 1;
            break;
        }
        // decode what is new; a template that rewrites earlier turns makes us start over
        std::string fresh = prompt;
        if (!rendered.empty() && prompt.compare(0, rendered.size(), rendered) == 0) {
            fresh = prompt.substr(rendered.size());
        } else if (!rendered.empty()) {
            llama_memory_clear(ctx);
        }
        const bool first = llama_memory_seq_pos_max(ctx, 0) < 0;
        std::vector<llama_token> tokens = common_tokenize(vocab, fresh, first, true);
        if (first && tokens.size() >= 2 && tokens[0] == llama_vocab_bos(vocab) && tokens[1] == tokens[0]) tokens.erase(tokens.begin());
        if (params.verbose_prompt) LOG_INF("new prompt text (%zu tokens):\n%s\n", tokens.size(), fresh.c_str());
        if (llama_memory_seq_pos_max(ctx, 0) + 1 + (int32_t) tokens.size() >= n_ctx) {
            LOG_ERR("error: the conversation no longer fits the context (%d tokens; raise -c)\n", n_ctx);
            rc = 1;
            break;
        }
        for (llama_token t : tokens) llama_sampler_accept(smpl, t);
        if (!decode_tokens(ctx, tokens)) {
            LOG_ERR("error: llama_decode failed on the prompt\n");
            rc = 1;
            break;
        }
        // the reply is decoded again with the next turn, as the template writes it (with its end
        // marker, which was sampled but never decoded): the cache keeps this turn's prompt only
        const llama_pos prompt_end = llama_memory_seq_pos_max(ctx, 0) + 1;
        const std::string reply = generate_reply(ctx, smpl, params);
        llama_memory_seq_rm(ctx, 0, prompt_end, -1);
        rendered = prompt;
        messages.push_back({ { "role", "assistant" }, { "content", reply } });
    }
    llama_sampler_free(smpl);
    return rc;
}
