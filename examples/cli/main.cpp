// llama-cli: load a model, evaluate a prompt, and print the generated text as it is sampled.
// The generation goes to stdout; everything else (load messages, timings) to stderr, so
// `llama-cli ... > out.txt` captures just the text.
#include "arg.h"
#include "chat-template.h"
#include "conversation.h"
#include "speculative.h"
#include "common.h"
#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace {

double now_ms() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

struct timings {
    double t_start = 0, t_load = 0;
    double t_prompt = 0, t_eval = 0, t_sample = 0;
    int n_prompt = 0, n_eval = 0, n_sample = 0;
};

void print_rate_line(const char * what, double ms, int n, const char * unit) {
    const double per_tok = n > 0 ? ms / n : 0.0;
    const double per_sec = ms > 0 ? 1e3 * n / ms : 0.0;
    LOG_INF("%s = %10.2f ms / %5d %s (%8.2f ms per token, %8.2f tokens per second)\n", what, ms, n, unit, per_tok,
            per_sec);
}

void print_timings(const timings & t) {
    LOG_INF("\n");
    LOG_INF("llama_perf_context_print:        load time = %10.2f ms\n", t.t_load);
    print_rate_line("llama_perf_context_print: prompt eval time", t.t_prompt, t.n_prompt, "tokens");
    print_rate_line("llama_perf_context_print:        eval time", t.t_eval, t.n_eval, "runs  ");
    LOG_INF("llama_perf_context_print:       total time = %10.2f ms / %5d tokens\n", now_ms() - t.t_start,
            t.n_prompt + t.n_eval);
    print_rate_line("llama_perf_sampler_print:    sampling time", t.t_sample, t.n_sample, "runs  ");
}

struct resources {
    llama_model * model = nullptr;
    llama_context * ctx = nullptr;
    llama_sampler * smpl = nullptr;
    llama_model * draft_model = nullptr;   // -md
    llama_context * draft_ctx = nullptr;
    std::unique_ptr<drafter> drafts;       // speculative decoding (null: off)
    ~resources() {
        drafts.reset();
        if (draft_ctx) llama_free(draft_ctx);
        if (draft_model) llama_model_free(draft_model);
        llama_sampler_free(smpl);
        if (ctx) llama_free(ctx);
        if (model) llama_model_free(model);
        llama_backend_free();
    }
};

// Evaluate tokens in chunks of at most n_batch; false (with a message) on failure.
bool decode_in_batches(llama_context * ctx, std::vector<llama_token> & tokens, int32_t n_batch) {
    for (size_t i = 0; i < tokens.size(); i += (size_t) n_batch) {
        const int32_t n = (int32_t) std::min<size_t>((size_t) n_batch, tokens.size() - i);
        const int32_t rc = llama_decode(ctx, llama_batch_get_one(tokens.data() + i, n));
        if (rc != 0) {
            LOG_ERR("error: llama_decode failed on prompt tokens %zu..%zu (code %d)%s%s\n", i, i + (size_t) n, rc,
                    llama_last_error() && *llama_last_error() ? ": " : "", llama_last_error() ? llama_last_error() : "");
            return false;
        }
    }
    return true;
}

// -md / --spec-type ngram-simple: the drafter (the draft model's context as large as the main
// one); false with err set.
bool load_drafter(resources & res, common_params & params, std::string & err) {
    const common_params_speculative & sp = params.speculative;
    if (sp.model.empty() && !sp.ngram) return true;
    if (llama_model_is_recurrent(res.model) || llama_model_is_hybrid(res.model)) {
        err = "speculative decoding needs a model without a recurrent state (it cannot drop rejected drafts)";
        return false;
    }
    if (!sp.model.empty()) {
        llama_model_params mparams;
        if (!common_model_params_to_llama(params, mparams, err)) return false;
        res.draft_model = llama_model_load_from_file(sp.model.c_str(), mparams);
        if (!res.draft_model) {
            err = "failed to load the draft model '" + sp.model + "'";
            return false;
        }
        if (!draft_vocab_compatible(llama_model_get_vocab(res.model), llama_model_get_vocab(res.draft_model), err)) {
            err = "the draft model '" + sp.model + "' cannot draft for '" + params.model + "': " + err;
            return false;
        }
        llama_context_params cp = common_context_params_to_llama(params);
        cp.n_ctx = llama_n_ctx(res.ctx) + (uint32_t) sp.n_max + 1;
        res.draft_ctx = llama_init_from_model(res.draft_model, cp);
        if (!res.draft_ctx) {
            err = "failed to create the draft model's context";
            return false;
        }
    }
    draft_params dp;
    dp.n_max = sp.n_max;
    dp.n_min = sp.n_min;
    dp.p_min = sp.p_min;
    dp.ngram = sp.ngram;
    dp.n_vocab_target = llama_vocab_n_tokens(llama_model_get_vocab(res.model));
    res.drafts = std::make_unique<drafter>(dp, res.draft_ctx, 1);
    return true;
}

// -cnv runs its own loop (conversation.cpp), which implements none of these: refused by name
// rather than ignored. Empty when the command line asks for none of them.
std::string flags_conversation_lacks(const common_params & params) {
    std::string out;
    auto add = [&](const char * flags) { out += out.empty() ? flags : std::string(", ") + flags; };
    if (!params.sampling.grammar.empty()) add("--grammar / --grammar-file / --json-schema");
    if (!params.speculative.model.empty() || params.speculative.ngram) add("-md / --spec-type");
    if (!params.antiprompt.empty()) add("-r");
    if (params.n_keep != 0) add("--keep");
    return out;
}

// -cnv's template: --chat-template / --chat-template-file, else the model's; null with err set.
std::unique_ptr<kiln::chat_template> load_chat_template(const llama_model * model, const common_params & params, std::string & err) {
    std::string source = params.chat_template;
    if (source.empty()) {
        const char * tmpl = llama_model_chat_template(model, nullptr);
        if (!tmpl) {
            err = "the model has no chat template (tokenizer.chat_template); give one with --chat-template-file";
            return nullptr;
        }
        source = tmpl;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const llama_token bos = llama_vocab_bos(vocab), eos = llama_vocab_eos(vocab);
    try {
        return std::make_unique<kiln::chat_template>(source, bos == LLAMA_TOKEN_NULL ? "" : llama_vocab_get_text(vocab, bos),
                                                     eos == LLAMA_TOKEN_NULL ? "" : llama_vocab_get_text(vocab, eos));
    } catch (const std::exception & e) {
        err = std::string("chat template: ") + e.what();
        return nullptr;
    }
}

} // namespace

int main(int argc, char ** argv) {
    timings tm;
    tm.t_start = now_ms();

    common_params params;
    if (!common_params_parse(argc, argv, params, COMMON_TOOL_CLI)) return 1;
    common_log_install();

    common_model_source model_source;
    {
        std::string err;
        if (!model_source.resolve(params, err)) {
            LOG_ERR("error: %s\n", err.c_str());
            return 1;
        }
    }
    // -cnv: an interactive chat (conversation.cpp); the default (auto) runs the raw prompt once
    const bool chat = params.conversation_mode == COMMON_CONVERSATION_MODE_ENABLED;
    if (chat && !flags_conversation_lacks(params).empty()) {
        LOG_ERR("error: %s not supported with -cnv (conversation mode)\n", flags_conversation_lacks(params).c_str());
        return 1;
    }

    llama_backend_init();
    resources res;

    llama_model_params mparams;
    std::string err;
    if (!common_model_params_to_llama(params, mparams, err)) {
        LOG_ERR("error: %s\n", err.c_str());
        return 1;
    }
    res.model = llama_model_load_from_file(params.model.c_str(), mparams);
    if (!res.model) {
        const char * why = llama_last_error();
        LOG_ERR("error: failed to load model '%s'%s%s\n", params.model.c_str(), why && *why ? ": " : "", why ? why : "");
        return 1;
    }
    res.ctx = llama_init_from_model(res.model, common_context_params_to_llama(params));
    if (!res.ctx) {
        const char * why = llama_last_error();
        LOG_ERR("error: failed to create the context%s%s\n", why && *why ? ": " : "", why ? why : "");
        return 1;
    }
    llama_context * ctx = res.ctx;
    const llama_vocab * vocab = llama_model_get_vocab(res.model);
    const int32_t n_ctx   = (int32_t) llama_n_ctx(ctx);
    const int32_t n_batch = (int32_t) std::max<uint32_t>(llama_n_batch(ctx), 1);
    tm.t_load = now_ms() - tm.t_start;

    LOG_INF("system_info: n_threads = %d / n_threads_batch = %d | %s\n",
            common_context_params_to_llama(params).n_threads, common_context_params_to_llama(params).n_threads_batch,
            llama_print_system_info());

    if (chat) {
        const std::unique_ptr<kiln::chat_template> tmpl = load_chat_template(res.model, params, err);
        if (!tmpl) {
            LOG_ERR("error: %s\n", err.c_str());
            return 1;
        }
        return run_conversation(ctx, params, *tmpl);
    }

    if (!load_drafter(res, params, err)) {
        LOG_ERR("error: %s\n", err.c_str());
        return 1;
    }

    // ---- prompt
    std::string prompt_text = params.prompt;
    std::vector<llama_token> prompt = common_tokenize(vocab, prompt_text, true, true);
    // a template that writes the BOS itself would otherwise give two
    if (prompt.size() >= 2 && prompt[0] == llama_vocab_bos(vocab) && prompt[1] == prompt[0]) prompt.erase(prompt.begin());
    if (prompt.empty()) {
        const llama_token bos = llama_vocab_bos(vocab);
        if (bos == LLAMA_TOKEN_NULL) {
            LOG_ERR("error: the prompt is empty and the model has no BOS token to start from\n");
            return 1;
        }
        prompt.push_back(bos);
    }
    if ((int32_t) prompt.size() >= n_ctx) {
        LOG_ERR("error: the prompt is too long (%zu tokens, the context holds %d; raise -c)\n", prompt.size(), n_ctx);
        return 1;
    }
    if (params.verbose_prompt) {
        LOG_INF("\nprompt: '%s'\nnumber of tokens in prompt = %zu\n", prompt_text.c_str(), prompt.size());
        for (llama_token t : prompt) {
            LOG_INF("%6d -> '%s'\n", t, common_token_to_piece(vocab, t, true).c_str());
        }
        LOG_INF("\n");
    }

    res.smpl = common_sampler_chain_from_params(params.sampling, n_ctx, vocab);
    const auto & sp = params.sampling;
    LOG_INF("sampler params: repeat_last_n = %d, repeat_penalty = %.3f, frequency_penalty = %.3f, "
            "presence_penalty = %.3f\n\ttop_k = %d, top_p = %.3f, min_p = %.3f, typical_p = %.3f, temp = %.3f\n",
            sp.penalty_last_n, sp.penalty_repeat, sp.penalty_freq, sp.penalty_present, sp.top_k, sp.top_p, sp.min_p,
            sp.typ_p, sp.temp);
    if (sp.seed == LLAMA_DEFAULT_SEED) LOG_INF("sampler seed: random\n");
    else LOG_INF("sampler seed: %u\n", sp.seed);
    LOG_INF("generate: n_ctx = %d, n_batch = %d, n_predict = %d\n\n", n_ctx, n_batch, params.n_predict);

    // The prompt counts as history for the repetition penalties, as in llama.cpp.
    for (llama_token t : prompt) llama_sampler_accept(res.smpl, t);
    std::string grammar_err;
    if (!common_sampler_add_grammar(res.smpl, vocab, sp, grammar_err)) {
        LOG_ERR("error: %s\n", grammar_err.c_str());
        return 1;
    }

    // EOG tokens that --ignore-eos must never let the sampler pick.
    std::vector<llama_token> eog_tokens;
    if (sp.ignore_eos) {
        const int32_t n_vocab = llama_vocab_n_tokens(vocab);
        for (llama_token t = 0; t < n_vocab; ++t) {
            if (llama_vocab_is_eog(vocab, t)) eog_tokens.push_back(t);
        }
    }

    if (params.display_prompt) {
        std::fputs(params.prompt.c_str(), stdout);
        std::fflush(stdout);
    }

    // Warm-up: one token through the whole graph with every expert routed (allocations, page
    // faults of an mmapped model) so the timings measure steady-state speed.
    if (params.warmup) {
        const llama_token w = llama_vocab_bos(vocab) != LLAMA_TOKEN_NULL ? llama_vocab_bos(vocab) : prompt[0];
        if (!common_warmup(ctx, w)) {
            LOG_ERR("error: warm-up decode failed\n");
            return 1;
        }
    }

    double t0 = now_ms();
    if (!decode_in_batches(ctx, prompt, n_batch)) return 1;
    tm.t_prompt = now_ms() - t0;
    tm.n_prompt = (int) prompt.size();

    // ---- generation
    int32_t n_past = (int32_t) prompt.size();
    int32_t n_generated = 0;
    bool hit_eog = false;
    std::string output_tail;   // the end of the output, for the -r reverse prompts
    // speculative decoding: the tokens in the cache (for the drafter), this step's drafts (decoded
    // after the sampled token, at the next output rows), and the row the next token is sampled from
    std::vector<llama_token> history = prompt, drafts;
    size_t n_draft_used = 0;
    int32_t row = -1;
    int64_t n_drafted = 0, n_accepted = 0;
    llama_batch spec_batch = llama_batch_init(params.speculative.n_max + 1, 0, 1);
    struct batch_guard {
        llama_batch & b;
        ~batch_guard() { llama_batch_free(b); }
    } spec_batch_guard{ spec_batch };
    while (params.n_predict < 0 || n_generated < params.n_predict) {
        if (!eog_tokens.empty()) {
            float * logits = llama_get_logits_ith(ctx, row);
            if (logits) {
                for (llama_token t : eog_tokens) logits[t] = -std::numeric_limits<float>::infinity();
            }
        }
        t0 = now_ms();
        llama_token tok = llama_sampler_sample(res.smpl, ctx, row);
        tm.t_sample += now_ms() - t0;
        tm.n_sample++;
        if (tok == LLAMA_TOKEN_NULL) {
            const char * why = llama_sampler_error(res.smpl);
            LOG_ERR("\nerror: sampling failed%s%s\n", why ? ": " : "", why ? why : "");
            return 1;
        }
        if (llama_vocab_is_eog(vocab, tok)) {
            hit_eog = true;
            if (params.special) {
                std::fputs(common_token_to_piece(vocab, tok, true).c_str(), stdout);
            }
            break;
        }
        const std::string piece = common_token_to_piece(vocab, tok, params.special);
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
        ++n_generated;
        if (!params.antiprompt.empty()) {
            output_tail += piece;
            bool stop = false;
            size_t longest = 0;
            for (const std::string & a : params.antiprompt) {
                longest = std::max(longest, a.size());
                // the reverse prompt may end inside this token's piece, as in llama.cpp
                const size_t window = a.size() + piece.size();
                const size_t from = output_tail.size() > window ? output_tail.size() - window : 0;
                stop = stop || output_tail.find(a, from) != std::string::npos;
            }
            if (stop) break;
            if (output_tail.size() > 2 * longest + 256) output_tail.erase(0, output_tail.size() - longest);
        }
        if (params.n_predict >= 0 && n_generated >= params.n_predict) break;
        if (n_draft_used < drafts.size() && tok == drafts[n_draft_used]) {
            // drafted, and already decoded: its logits are the next row
            ++n_draft_used;
            ++n_accepted;
            ++row;
            ++n_past;
            history.push_back(tok);
            continue;
        }
        if (!drafts.empty()) llama_memory_seq_rm(ctx, 0, n_past, -1);   // the drafts not taken
        drafts.clear();
        n_draft_used = 0;
        if (n_past + 1 > n_ctx) {
            // -n -2 asks to stop exactly there; otherwise drop old tokens and go on, as llama.cpp does
            if (params.n_predict == -2) break;
            const char * why = "--no-context-shift";
            int32_t n_dropped = 0;
            if (params.ctx_shift && llama_memory_can_shift(ctx, &why)) {
                n_dropped = common_context_shift(ctx, 0, n_past, common_context_shift_keep(vocab, prompt, params.n_keep));
                why = "--keep leaves nothing to drop";
            }
            if (n_dropped == 0) {
                LOG_WRN("\n\nwarning: the context is full (%d tokens) and cannot shift (%s); stopping\n", n_ctx, why);
                break;
            }
            LOG_DBG("\ncontext shift: dropped %d tokens\n", n_dropped);
            const int32_t n_keep_now = common_context_shift_keep(vocab, prompt, params.n_keep);
            history.erase(history.begin() + n_keep_now, history.begin() + n_keep_now + n_dropped);
            n_past -= n_dropped;
        }
        if (res.drafts) {
            int32_t room = std::min(params.speculative.n_max, n_ctx - n_past - 2);
            if (params.n_predict >= 0) room = std::min(room, params.n_predict - n_generated - 1);
            res.drafts->draft(0, history, tok, room, drafts);
            n_drafted += (int64_t) drafts.size();
        }
        spec_batch.n_tokens = 1 + (int32_t) drafts.size();
        for (int32_t i = 0; i < spec_batch.n_tokens; ++i) {
            spec_batch.token[i] = i == 0 ? tok : drafts[i - 1];
            spec_batch.pos[i] = n_past + i;
            spec_batch.n_seq_id[i] = 1;
            spec_batch.seq_id[i][0] = 0;
            spec_batch.logits[i] = 1;
        }
        history.push_back(tok);
        row = 0;
        t0 = now_ms();
        const int32_t rc = llama_decode(ctx, spec_batch);
        tm.t_eval += now_ms() - t0;
        tm.n_eval++;
        if (rc != 0) {
            LOG_ERR("\nerror: llama_decode failed at position %d (code %d)\n", n_past, rc);
            return 1;
        }
        ++n_past;
    }
    std::fputs("\n", stdout);
    std::fflush(stdout);
    if (hit_eog) LOG_INF(" [end of text]\n");
    if (res.drafts) {
        LOG_INF("speculative decoding: %lld of %lld drafted tokens accepted (%.1f%%)\n", (long long) n_accepted,
                (long long) n_drafted, n_drafted > 0 ? 100.0 * n_accepted / n_drafted : 0.0);
    }

    if (!params.no_perf) print_timings(tm);
    return 0;
}
