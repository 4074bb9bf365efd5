// llama-sweep-bench: prompt-processing and generation speed as the KV cache fills. For N_KV = 0,
// ub, 2*ub, ... while a batch still fits in -c: generate -n tokens one at a time on top of N_KV
// cached tokens (TG), drop them, then process a batch of -ub tokens at N_KV (PP), which becomes
// the cache of the next step. The table (and the jsonl rows) have the layout of ik_llama.cpp's
// sweep-bench so results can be compared across engines and plotted by scripts/sweep-plot.
#include "arg.h"
#include "common.h"
#include "llama.h"
#include "synth.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Decodes batch in views of at most n_batch tokens.
bool decode_all(llama_context * ctx, llama_batch & batch, int32_t n_batch) {
    for (int32_t i = 0; i < batch.n_tokens; i += n_batch) {
        const int32_t n = std::min(n_batch, batch.n_tokens - i);
        llama_batch view = { n, batch.token + i, nullptr, batch.pos + i, batch.n_seq_id + i, batch.seq_id + i, batch.logits + i };
        const int32_t ret = llama_decode(ctx, view);
        if (ret != 0) {
            LOG_ERR("sweep-bench: error: llama_decode failed (n_tokens = %d, ret = %d)\n", n, ret);
            return false;
        }
    }
    return true;
}

void batch_set(llama_batch & batch, int32_t n_tokens) {
    batch.n_tokens = n_tokens;
    for (int32_t i = 0; i < n_tokens; ++i) {
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 0;
    }
}

} // namespace

int main(int argc, char ** argv) {
    common_params params;
    params.output_format = "table";
    if (!common_params_parse(argc, argv, params, COMMON_TOOL_SWEEP_BENCH)) return 1;
    common_log_install();
    const bool jsonl = params.output_format == "jsonl";
    if (!jsonl && params.output_format != "table" && params.output_format != "md") {
        LOG_ERR("error: --output-format for llama-sweep-bench must be table or jsonl, not %s\n", params.output_format.c_str());
        return 1;
    }

    common_model_source model_source;
    {
        std::string err;
        if (!model_source.resolve(params, err)) {
            LOG_ERR("error: %s\n", err.c_str());
            return 1;
        }
    }

    llama_backend_init();
    llama_model_params mparams;
    std::string err;
    if (!common_model_params_to_llama(params, mparams, err)) {
        LOG_ERR("error: %s\n", err.c_str());
        return 1;
    }
    llama_model * model = llama_model_load_from_file(params.model.c_str(), mparams);
    if (!model) {
        LOG_ERR("error: unable to load model '%s': %s\n", params.model.c_str(), llama_last_error());
        return 1;
    }
    const llama_context_params cparams = common_context_params_to_llama(params);
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        LOG_ERR("error: failed to create the context: %s\n", llama_last_error());
        llama_model_free(model);
        return 1;
    }

    const int32_t n_kv_max = (int32_t) llama_n_ctx(ctx);
    const int32_t n_batch = (int32_t) llama_n_batch(ctx);
    const int32_t n_ubatch = (int32_t) llama_n_ubatch(ctx);
    const int32_t pp = n_ubatch;
    // -n N generates N tokens per row (-n 0: prompt processing only); left out, a quarter of a batch
    const int32_t tg = params.n_predict >= 0 ? params.n_predict : n_ubatch / 4;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const int flash_attn = params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_DISABLED ? 0 : 1;
    if (pp > n_kv_max || params.n_ubatch > n_kv_max) {
        LOG_ERR("error: the context (-c %d) is smaller than one batch (-ub %d)\n", n_kv_max, params.n_ubatch);
        llama_free(ctx);
        llama_model_free(model);
        return 1;
    }

    if (!jsonl) {
        std::printf("\n");
        std::printf("main: n_kv_max = %d, n_batch = %d, n_ubatch = %d, flash_attn = %d, n_gpu_layers = %d, n_threads = %u, "
                    "n_threads_batch = %u\n",
                    n_kv_max, params.n_batch, params.n_ubatch, flash_attn, params.n_gpu_layers, cparams.n_threads,
                    cparams.n_threads_batch);
        std::printf("\n");
        std::printf("|%6s | %6s | %6s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s");
        std::printf("|%6s-|-%6s-|-%6s-|-%8s-|-%8s-|-%8s-|-%8s-|\n", "------", "------", "------", "--------", "--------",
                    "--------", "--------");
        std::fflush(stdout);
    }

    llama_batch batch = llama_batch_init(std::max(pp, 1), 0, 1);
    int rc = 0;
    auto random_token = [&]() { return (llama_token) (std::rand() % n_vocab); };

    // warm-up: one token with every expert routed (first touch of all the weights), and with -wb
    // a full batch as well
    if (params.warmup && !common_warmup(ctx)) {
        LOG_ERR("sweep-bench: error: the warm-up decode failed\n");
        rc = 1;
    }
    if (rc == 0 && params.warmup_batch) {
        llama_memory_clear(ctx);
        batch_set(batch, pp);
        for (int32_t i = 0; i < pp; ++i) {
            batch.token[i] = random_token();
            batch.pos[i] = i;
        }
        if (!decode_all(ctx, batch, n_ubatch)) rc = 1;
    }
    llama_memory_clear(ctx);
    llama_perf_context_reset(ctx);

    for (int32_t n_kv = 0; rc == 0 && n_kv + pp <= n_kv_max; n_kv += pp) {
        // generation on top of n_kv cached tokens
        const int32_t n_tg = std::min(tg, n_kv_max - n_kv);
        llama_memory_seq_rm(ctx, 0, n_kv, -1);
        const int64_t t_tg_start = now_us();
        for (int32_t i = 0; i < n_tg && rc == 0; ++i) {
            batch_set(batch, 1);
            batch.token[0] = random_token();
            batch.pos[0] = n_kv + i;
            batch.logits[0] = 1;
            if (!decode_all(ctx, batch, n_batch)) rc = 1;
        }
        const int64_t t_tg_end = now_us();
        if (rc) break;

        // a prompt batch at n_kv (replacing the generated tokens)
        if (!llama_memory_seq_rm(ctx, 0, n_kv, -1)) {
            LOG_ERR("sweep-bench: error: cannot rewind the cache to %d\n", n_kv);
            rc = 1;
            break;
        }
        batch_set(batch, pp);
        for (int32_t i = 0; i < pp; ++i) {
            batch.token[i] = random_token();
            batch.pos[i] = n_kv + i;
        }
        batch.logits[pp - 1] = 1;
        const int64_t t_pp_start = now_us();
        if (!decode_all(ctx, batch, n_batch)) {
            rc = 1;
            break;
        }
        const int64_t t_pp_end = now_us();

        const float t_pp = (t_pp_end - t_pp_start) / 1e6f;
        const float t_tg = (t_tg_end - t_tg_start) / 1e6f;
        const float s_pp = t_pp > 0 ? pp / t_pp : 0.0f;
        const float s_tg = t_tg > 0 ? n_tg / t_tg : 0.0f;
        if (jsonl) {
            std::printf("{\"n_kv_max\": %d, \"n_batch\": %d, \"n_ubatch\": %d, \"flash_attn\": %d, \"n_gpu_layers\": %d, "
                        "\"n_threads\": %u, \"n_threads_batch\": %u, \"pp\": %d, \"tg\": %d, \"n_kv\": %d, \"t_pp\": %f, "
                        "\"speed_pp\": %f, \"t_tg\": %f, \"speed_tg\": %f }\n",
                        n_kv_max, params.n_batch, params.n_ubatch, flash_attn, params.n_gpu_layers, cparams.n_threads,
                        cparams.n_threads_batch, pp, n_tg, n_kv, t_pp, s_pp, t_tg, s_tg);
        } else {
            std::printf("|%6d | %6d | %6d | %8.3f | %8.2f | %8.3f | %8.2f |\n", pp, n_tg, n_kv, t_pp, s_pp, t_tg, s_tg);
        }
        std::fflush(stdout);
    }

    if (!params.no_perf) {
        const llama_perf_context_data d = llama_perf_context(ctx);
        LOG_INF("\nllama_perf_context_print: prompt eval time = %10.2f ms / %5d tokens (%8.2f tokens per second)\n",
                d.t_p_eval_ms, d.n_p_eval, d.t_p_eval_ms > 0 ? 1e3 * d.n_p_eval / d.t_p_eval_ms : 0.0);
        LOG_INF("llama_perf_context_print:        eval time = %10.2f ms / %5d runs   (%8.2f tokens per second)\n",
                d.t_eval_ms, d.n_eval, d.t_eval_ms > 0 ? 1e3 * d.n_eval / d.t_eval_ms : 0.0);
    }

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
