// llama-perplexity: perplexity of a model over a text, in chunks of -c tokens, scoring the second
// half of every chunk (so each scored token has at least n_ctx/2 tokens of context), and the
// KL-divergence comparison against base log-probabilities (kl-divergence.cpp). The printed lines
// and the base file follow llama.cpp so results can be compared across engines line by line.
#include "perplexity.h"

#include "arg.h"
#include "synth.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace {

double now_s() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// Writes the base file to path.tmp and renames it when complete, so a failed run never leaves a
// truncated file that a later --kl-divergence run would misread.
struct base_writer {
    std::string path, tmp;
    std::ofstream out;

    bool open(const std::string & p) {
        path = p;
        tmp = p + ".tmp";
        out.open(tmp, std::ios::binary | std::ios::trunc);
        return out.is_open();
    }
    void write(const void * data, size_t bytes) { out.write((const char *) data, (std::streamsize) bytes); }
    bool finish(std::string & err) {
        out.close();
        if (!out) {
            err = "cannot write " + tmp;
            std::remove(tmp.c_str());
            return false;
        }
        if (std::rename(tmp.c_str(), path.c_str()) != 0) {
            err = "cannot rename " + tmp + " to " + path;
            std::remove(tmp.c_str());
            return false;
        }
        return true;
    }
    void abandon() {
        if (out.is_open()) out.close();
        if (!tmp.empty()) std::remove(tmp.c_str());
    }
};

// Negative log-likelihood of tok under the softmax of logits (double accumulation).
double token_nll(const float * logits, int32_t n_vocab, int32_t tok) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp((double) logits[i] - mx);
    return std::log(sum) + mx - logits[tok];
}

int perplexity_run(llama_context * ctx, const common_params & params, int32_t n_ctx, int32_t n_seq) {
    const llama_model * model = llama_get_model(ctx);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const bool add_bos = llama_vocab_get_add_bos(vocab);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const llama_token bos = add_bos ? llama_vocab_bos(vocab) : -1;

    base_writer writer;
    if (!params.logits_file.empty()) {
        if (!writer.open(params.logits_file)) {
            LOG_ERR("perplexity: error: cannot open %s for writing\n", params.logits_file.c_str());
            return 1;
        }
        LOG_INF("perplexity: saving all logits to %s\n", params.logits_file.c_str());
    }

    LOG_INF("perplexity: tokenizing the input ..\n");
    const double t0 = now_s();
    std::vector<llama_token> tokens = common_tokenize(ctx, params.prompt, true);
    LOG_INF("perplexity: tokenization took %g ms\n", 1e3 * (now_s() - t0));

    if ((int64_t) tokens.size() < 2 * (int64_t) n_ctx) {
        LOG_ERR("perplexity: error: you need at least %d tokens to evaluate perplexity with a context of %d\n",
                2 * n_ctx, n_ctx);
        LOG_ERR("perplexity: error: the data file you provided (%s) tokenizes to only %zu tokens\n",
                params.prompt_file.empty() ? "the prompt" : params.prompt_file.c_str(), tokens.size());
        writer.abandon();
        return 1;
    }

    const int32_t n_chunk_max = (int32_t) (tokens.size() / n_ctx);
    const int32_t n_chunk = params.n_chunks < 0 ? n_chunk_max : std::min(params.n_chunks, n_chunk_max);
    const int32_t first = n_ctx / 2;
    const int32_t n_scored = n_ctx - 1 - first;
    const int32_t n_batch = std::min(params.n_batch, n_seq * n_ctx);

    LOG_INF("perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d, n_seq=%d\n", n_chunk, n_ctx,
            n_batch, n_seq);

    const size_t nv = kld_record_size(n_vocab);
    std::vector<uint16_t> records;
    if (!params.logits_file.empty()) {
        writer.write("_logits_", 8);
        writer.write(&n_ctx, sizeof(n_ctx));
        writer.write(&n_vocab, sizeof(n_vocab));
        writer.write(&n_chunk, sizeof(n_chunk));
        writer.write(tokens.data(), (size_t) n_chunk * n_ctx * sizeof(llama_token));
        records.resize((size_t) n_scored * nv);
    }

    llama_batch batch = llama_batch_init(n_batch, 0, 1);
    std::vector<float> logits;
    double nll = 0, nll2 = 0;
    int64_t count = 0;

    for (int32_t i = 0; i < n_chunk; i += n_seq) {
        const int32_t n_seq_batch = std::min(n_seq, n_chunk - i);
        const double t_start = now_s();
        llama_memory_clear(ctx);
        logits.clear();

        // The chunks of this pass one after another, each its own sequence; BOS replaces the
        // first token of each chunk in the batch only (the written tokens stay the original).
        const int32_t n_total = n_seq_batch * n_ctx;
        for (int32_t b0 = 0; b0 < n_total; b0 += n_batch) {
            const int32_t nb = std::min(n_batch, n_total - b0);
            batch.n_tokens = nb;
            int32_t n_out = 0;
            for (int32_t k = 0; k < nb; ++k) {
                const int32_t idx = b0 + k;
                const int32_t seq = idx / n_ctx, pos = idx % n_ctx;
                llama_token t = tokens[(size_t) (i + seq) * n_ctx + pos];
                if (pos == 0 && bos >= 0) t = bos;
                batch.token[k] = t;
                batch.pos[k] = pos;
                batch.n_seq_id[k] = 1;
                batch.seq_id[k][0] = seq;
                batch.logits[k] = pos >= first;
                n_out += pos >= first;
            }
            if (llama_decode(ctx, batch) != 0) {
                LOG_ERR("perplexity: error: failed to decode chunk %d\n", i + 1);
                llama_batch_free(batch);
                writer.abandon();
                return 1;
            }
            if (n_out > 0) {
                const float * out = llama_get_logits(ctx);
                logits.insert(logits.end(), out, out + (size_t) n_out * n_vocab);
            }
        }
        if (i == 0) ppl_print_eta(now_s() - t_start, (n_chunk + n_seq - 1) / n_seq);

        for (int32_t seq = 0; seq < n_seq_batch; ++seq) {
            const float * chunk_logits = logits.data() + (size_t) seq * (n_ctx - first) * n_vocab;
            const llama_token * next = tokens.data() + (size_t) (i + seq) * n_ctx + first + 1;
            for (int32_t k = 0; k < n_scored; ++k) {
                const float * l = chunk_logits + (size_t) k * n_vocab;
                const double v = records.empty() ? token_nll(l, n_vocab, next[k])
                                                 : kld_compress_log_probs(l, n_vocab, next[k], records.data() + k * nv);
                nll += v;
                nll2 += v * v;
            }
            if (!records.empty()) writer.write(records.data(), records.size() * sizeof(uint16_t));
            count += n_scored;
            std::printf("[%d]%.4lf,", i + seq + 1, std::exp(nll / count));
        }
        std::fflush(stdout);
    }
    std::printf("\n");
    llama_batch_free(batch);

    const double mean = nll / count;
    const double ppl = std::exp(mean);
    const double var = nll2 / count - mean * mean;
    if (var > 0) {
        std::printf("Final estimate: PPL over %d chunks for n_ctx=%d = %.4lf +/- %.5lf\n", n_chunk, n_ctx, ppl,
                    std::sqrt(var / (count - 1)) * ppl);
    } else {
        std::printf("Unexpected negative standard deviation of log(prob)\n");
    }
    std::fflush(stdout);

    if (!params.logits_file.empty()) {
        std::string err;
        if (!writer.finish(err)) {
            LOG_ERR("perplexity: error: %s\n", err.c_str());
            return 1;
        }
    }
    return 0;
}

void print_timings(llama_context * ctx, double t_total_s) {
    const llama_perf_context_data d = llama_perf_context(ctx);
    LOG_INF("\n");
    LOG_INF("llama_perf_context_print:        load time = %10.2f ms\n", d.t_load_ms);
    LOG_INF("llama_perf_context_print: prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
            d.t_p_eval_ms, d.n_p_eval, d.n_p_eval > 0 ? d.t_p_eval_ms / d.n_p_eval : 0.0,
            d.t_p_eval_ms > 0 ? 1e3 * d.n_p_eval / d.t_p_eval_ms : 0.0);
    LOG_INF("llama_perf_context_print:       total time = %10.2f ms\n", 1e3 * t_total_s);
}

} // namespace

double kld_compress_log_probs(const float * logits, int32_t n_vocab, int32_t tok, uint16_t * out) {
    float mx = logits[0], mn = logits[0];
    for (int32_t i = 1; i < n_vocab; ++i) {
        mx = std::max(mx, logits[i]);
        mn = std::min(mn, logits[i]);
    }
    // 16 bits over at most 24 nats: finer steps where the probability mass is
    mn = std::max(mn, mx - 24.0f);
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp((double) logits[i] - mx);
    const float log_sum = (float) std::log(sum);
    const float scale = (mx - mn) / 65535.0f;
    const float min_log_prob = mn - mx - log_sum;
    std::memcpy(out, &scale, sizeof(float));
    std::memcpy(out + 2, &min_log_prob, sizeof(float));
    uint16_t * q = out + 4;
    if (scale > 0) {
        const float inv = 1.0f / scale;
        for (int32_t i = 0; i < n_vocab; ++i) {
            q[i] = logits[i] > mn ? (uint16_t) std::min(65535.0f, std::nearbyint(inv * (logits[i] - mn))) : 0;
        }
    } else {
        std::memset(q, 0, (size_t) n_vocab * sizeof(uint16_t));
    }
    // the odd-vocabulary padding slot is zero, so files are byte-identical across runs
    if (n_vocab % 2) q[n_vocab] = 0;
    return (double) mx + log_sum - logits[tok];
}

bool ppl_eval_chunk(llama_context * ctx, const llama_token * tokens, int32_t n_ctx, int32_t n_batch, int32_t first,
                    llama_token bos, std::vector<float> & logits) {
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)));
    llama_batch batch = llama_batch_init(n_batch, 0, 1);
    logits.clear();
    llama_memory_clear(ctx);
    bool ok = true;
    for (int32_t b0 = 0; b0 < n_ctx && ok; b0 += n_batch) {
        const int32_t nb = std::min(n_batch, n_ctx - b0);
        batch.n_tokens = nb;
        int32_t n_out = 0;
        for (int32_t k = 0; k < nb; ++k) {
            const int32_t pos = b0 + k;
            batch.token[k] = pos == 0 && bos >= 0 ? bos : tokens[pos];
            batch.pos[k] = pos;
            batch.n_seq_id[k] = 1;
            batch.seq_id[k][0] = 0;
            batch.logits[k] = pos >= first;
            n_out += pos >= first;
        }
        if (llama_decode(ctx, batch) != 0) {
            LOG_ERR("perplexity: error: llama_decode failed\n");
            ok = false;
        } else if (n_out > 0) {
            const float * out = llama_get_logits(ctx);
            logits.insert(logits.end(), out, out + (size_t) n_out * n_vocab);
        }
    }
    llama_batch_free(batch);
    return ok;
}

void ppl_print_eta(double seconds_per_pass, int n_passes) {
    int total = (int) (seconds_per_pass * n_passes);
    std::string eta;
    if (total >= 3600) {
        eta = std::to_string(total / 3600) + " hours ";
        total %= 3600;
    }
    LOG_INF("perplexity: %.2f seconds per pass - ETA %s%.2f minutes\n", seconds_per_pass, eta.c_str(), total / 60.0);
}

int main(int argc, char ** argv) {
    const double t_main = now_s();
    common_params params;
    params.n_ctx = 512;   // llama-perplexity's default context
    if (!common_params_parse(argc, argv, params, COMMON_TOOL_PERPLEXITY)) return 1;
    common_log_install();

    common_model_source model_source;
    {
        std::string err;
        if (!model_source.resolve(params, err)) {
            LOG_ERR("error: %s\n", err.c_str());
            return 1;
        }
    }

    if (params.kl_divergence && params.logits_file.empty()) {
        LOG_ERR("error: --kl-divergence needs the base file: --kl-divergence-base FILE\n");
        return 1;
    }
    if (!params.kl_divergence && params.prompt.empty()) {
        LOG_ERR("error: no text to evaluate: give a file with -f FILE\n");
        return 1;
    }
    if (params.ppl_stride > 0) {
        LOG_ERR("error: --ppl-stride is not supported; use the default chunked evaluation\n");
        return 1;
    }
    if (params.n_ctx <= 0) {
        LOG_ERR("error: llama-perplexity needs a context size: -c N with N > 0\n");
        return 1;
    }

    // The KL pass evaluates the chunks of the base file, with its context size.
    int32_t n_ctx = params.n_ctx;
    int32_t n_seq = 1;
    if (params.kl_divergence) {
        std::ifstream in(params.logits_file, std::ios::binary);
        char magic[8] = {};
        int32_t file_ctx = 0;
        if (!in || !in.read(magic, 8) || std::memcmp(magic, "_logits_", 8) != 0 ||
            !in.read((char *) &file_ctx, 4) || file_ctx < 4) {
            LOG_ERR("error: %s: not a KL-divergence base file (no _logits_ header with a context size)\n",
                    params.logits_file.c_str());
            return 1;
        }
        if (file_ctx != n_ctx) {
            LOG_INF("perplexity: %s was computed with n_ctx=%d; using that context size\n", params.logits_file.c_str(),
                    file_ctx);
        }
        n_ctx = file_ctx;
        params.n_ctx = n_ctx;
        params.n_batch = std::min(params.n_batch, n_ctx);
        params.n_parallel = 1;
    } else {
        // As llama.cpp: a batch of several context sizes evaluates that many chunks at once.
        n_seq = std::max(1, params.n_batch / n_ctx);
        params.n_parallel = n_seq;
        params.n_ctx = n_seq * n_ctx;
        params.n_batch = std::min(params.n_batch, params.n_ctx);
    }
    params.n_ubatch = std::min(params.n_ubatch, params.n_batch);

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
    llama_context_params cparams = common_context_params_to_llama(params);
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        LOG_ERR("error: failed to create the context: %s\n", llama_last_error());
        llama_model_free(model);
        return 1;
    }
    if (llama_vocab_get_add_eos(llama_model_get_vocab(model))) {
        LOG_WRN("perplexity: warning: the model adds EOS to every text; perplexity may be off\n");
    }
    if (params.n_ctx > llama_model_n_ctx_train(model) && llama_model_n_ctx_train(model) > 0) {
        LOG_WRN("perplexity: warning: model was trained on only %d context tokens (%d specified)\n",
                llama_model_n_ctx_train(model), params.n_ctx);
    }
    LOG_INF("\nsystem_info: n_threads = %d / %d | %s\n", cparams.n_threads, common_default_n_threads(),
            llama_print_system_info());

    const int rc = params.kl_divergence ? kl_divergence_run(ctx, params) : perplexity_run(ctx, params, n_ctx, n_seq);
    if (!params.no_perf) print_timings(ctx, now_s() - t_main);

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
