// llama-imatrix: runs calibration text through a model in chunks of -c tokens and collects, for
// every matmul whose weight is a model tensor, the per-column sum of squared inputs (per expert
// for expert matmuls), through libllama's graph evaluation callback. Shows the running perplexity,
// saves every --output-frequency chunks, and writes the legacy .dat or GGUF format; --in-file
// matrices are merged in, weighted by their counts.
//
//   llama-imatrix -m MODEL -f TEXT [-o imatrix.dat] [-c 512] [--chunks N] [--output-frequency 10]
//                 [--save-frequency 0] [--output-format dat|gguf] [--in-file A --in-file B ...]
//                 [--process-output] [--no-ppl] [--chunk FIRST]
#include "arg.h"
#include "common.h"
#include "llama-imatrix.h"
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct imatrix_options {
    int out_freq = 10;
    int save_freq = 0;
    int from_chunk = 0;
    bool compute_ppl = true;
    bool process_output = false;
    std::string format;   // "dat", "gguf" or "" (by the output name)
    std::vector<std::string> in_files;
};

bool ends_with(const std::string & s, const char * sfx) {
    const size_t n = std::strlen(sfx);
    return s.size() >= n && s.compare(s.size() - n, n, sfx) == 0;
}

bool parse_count(const std::string & flag, const std::string & v, int & out, std::string & err) {
    char * end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || x < 0 || x > 1000000000) {
        err = "flag " + flag + ": expected a whole number >= 0, got '" + v + "'";
        return false;
    }
    out = (int) x;
    return true;
}

// Take the flags only llama-imatrix has out of argv; the rest goes to the shared parser.
bool take_own_flags(int argc, char ** argv, imatrix_options & o, std::vector<char *> & rest, bool & ctx_given,
                    std::string & err) {
    rest.push_back(argv[0]);
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](std::string & v) {
            if (i + 1 >= argc) {
                err = "flag " + a + " needs a value";
                return false;
            }
            v = argv[++i];
            return true;
        };
        std::string v;
        if (a == "--output-frequency" || a == "--save-frequency" || a == "--chunk" || a == "--from-chunk") {
            if (!value(v)) return false;
            int & dst = a == "--output-frequency" ? o.out_freq : a == "--save-frequency" ? o.save_freq : o.from_chunk;
            if (!parse_count(a, v, dst, err)) return false;
        } else if (a == "--in-file") {
            if (!value(v)) return false;
            o.in_files.push_back(v);
        } else if (a == "--output-format") {
            if (!value(v)) return false;
            if (v != "dat" && v != "gguf") {
                err = "flag --output-format: expected dat or gguf, got '" + v + "'";
                return false;
            }
            o.format = v;
        } else if (a == "--no-ppl") {
            o.compute_ppl = false;
        } else if (a == "--process-output") {
            o.process_output = true;
        } else {
            if (a == "-c" || a == "--ctx-size" || a.rfind("--ctx-size=", 0) == 0) ctx_given = true;
            rest.push_back(argv[i]);
        }
    }
    return true;
}

bool save(const llama_imatrix & m, const std::string & path, const std::string & format) {
    const bool gguf = format == "gguf" || (format.empty() && ends_with(path, ".gguf"));
    std::string err;
    const bool ok = gguf ? llama_imatrix_save_gguf(path, m, err) : llama_imatrix_save_dat(path, m, err);
    if (!ok) LOG_ERR("error: %s\n", err.c_str());
    return ok;
}

} // namespace

int main(int argc, char ** argv) {
    imatrix_options opt;
    std::vector<char *> rest;
    bool ctx_given = false;
    std::string err;
    if (!take_own_flags(argc, argv, opt, rest, ctx_given, err)) {
        std::fprintf(stderr, "llama-imatrix: error: %s\n", err.c_str());
        return 1;
    }
    common_params params;
    if (!ctx_given) params.n_ctx = 512;   // llama-imatrix's default chunk size
    if (!common_params_parse((int) rest.size(), rest.data(), params, COMMON_TOOL_IMATRIX)) return 1;
    common_log_install();
    const std::string out_file = params.out_file.empty() ? std::string("imatrix.dat") : params.out_file;

    llama_imatrix_collector col;
    col.process_output = opt.process_output;
    const int32_t chunk_size = params.n_ctx;
    for (const auto & f : opt.in_files) {
        llama_imatrix m;
        if (!llama_imatrix_load(f, m, err, chunk_size) || !col.data.merge(m, err)) {
            LOG_ERR("error: --in-file %s: %s\n", f.c_str(), err.c_str());
            return 1;
        }
        LOG_INF("llama-imatrix: merged %s (%zu entries, %d chunks)\n", f.c_str(), m.entries.size(), m.chunk_count);
    }
    if (params.model.empty()) {
        if (opt.in_files.empty()) {
            LOG_ERR("error: no model given (-m), and no --in-file to combine\n");
            return 1;
        }
        // only combining files
        if (col.data.chunk_size == 0) col.data.chunk_size = chunk_size;
        if (!save(col.data, out_file, opt.format)) return 1;
        LOG_INF("llama-imatrix: wrote %s\n", out_file.c_str());
        return 0;
    }
    if (params.prompt.empty()) {
        LOG_ERR("error: no calibration text given (-f)\n");
        return 1;
    }
    if (params.n_ctx < 8) {
        LOG_ERR("error: -c %d is too small for a chunk (at least 8)\n", params.n_ctx);
        return 1;
    }

    llama_backend_init();
    llama_model_params mparams;
    if (!common_model_params_to_llama(params, mparams, err)) {
        LOG_ERR("error: %s\n", err.c_str());
        return 1;
    }
    llama_model * model = llama_model_load_from_file(params.model.c_str(), mparams);
    if (!model) {
        LOG_ERR("error: failed to load model '%s': %s\n", params.model.c_str(), llama_last_error());
        return 1;
    }
    llama_context_params cparams = common_context_params_to_llama(params);
    cparams.n_ctx = chunk_size;
    cparams.n_batch = std::min<uint32_t>(cparams.n_batch, chunk_size);
    cparams.cb_eval = llama_imatrix_collector::callback;
    cparams.cb_eval_user_data = &col;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        LOG_ERR("error: failed to create the context: %s\n", llama_last_error());
        llama_model_free(model);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const bool add_bos = llama_vocab_get_add_bos(vocab);

    std::vector<llama_token> tokens = common_tokenize(vocab, params.prompt, add_bos, false);
    const int n_avail = (int) (tokens.size() / chunk_size);
    const int first = std::min(opt.from_chunk, n_avail);
    int n_chunk = n_avail - first;
    if (params.n_chunks >= 0) n_chunk = std::min(n_chunk, params.n_chunks);
    if (n_chunk <= 0) {
        LOG_ERR("error: %s has %zu tokens: not enough for one chunk of %d after skipping %d\n", params.prompt_file.c_str(),
                tokens.size(), chunk_size, opt.from_chunk);
        llama_free(ctx);
        llama_model_free(model);
        return 1;
    }
    col.data.chunk_size = chunk_size;
    if (!params.prompt_file.empty()) col.data.datasets.push_back(params.prompt_file);
    LOG_INF("llama-imatrix: %d chunks of %d tokens\n", n_chunk, chunk_size);

    llama_batch batch = llama_batch_init(chunk_size, 0, 1);
    const int n_batch = (int) llama_n_batch(ctx);
    double nll = 0;
    int64_t n_scored = 0;
    int rc = 0;
    for (int c = 0; c < n_chunk && rc == 0; ++c) {
        const llama_token * chunk = tokens.data() + (size_t) (first + c) * chunk_size;
        llama_memory_clear(ctx);
        std::vector<float> logits;   // the scored half (positions chunk_size/2 .. chunk_size-2)
        for (int b0 = 0; b0 < chunk_size; b0 += n_batch) {
            const int nb = std::min(n_batch, chunk_size - b0);
            batch.n_tokens = nb;
            for (int i = 0; i < nb; ++i) {
                const int pos = b0 + i;
                batch.token[i] = (pos == 0 && add_bos) ? llama_vocab_bos(vocab) : chunk[pos];
                batch.pos[i] = pos;
                batch.n_seq_id[i] = 1;
                batch.seq_id[i][0] = 0;
                batch.logits[i] = opt.compute_ppl && pos >= chunk_size / 2 && pos < chunk_size - 1;
            }
            if (llama_decode(ctx, batch) != 0) {
                LOG_ERR("error: decode failed in chunk %d\n", first + c);
                rc = 1;
                break;
            }
            if (!col.error.empty()) {
                LOG_ERR("error: %s\n", col.error.c_str());
                rc = 1;
                break;
            }
            if (opt.compute_ppl) {
                for (int i = 0; i < nb; ++i) {
                    if (!batch.logits[i]) continue;
                    const float * l = llama_get_logits_ith(ctx, i);
                    const int next = chunk[b0 + i + 1];
                    float mx = l[0];
                    for (int v = 1; v < n_vocab; ++v) mx = std::max(mx, l[v]);
                    double sum = 0;
                    for (int v = 0; v < n_vocab; ++v) sum += std::exp((double) l[v] - mx);
                    nll += mx + std::log(sum) - l[next];
                    ++n_scored;
                }
            }
        }
        if (rc) break;
        col.data.chunk_count += 1;
        if (opt.compute_ppl && n_scored > 0) {
            std::printf("[%d]%.4f,", c + 1, std::exp(nll / n_scored));
            std::fflush(stdout);
        }
        if (opt.out_freq > 0 && (c + 1) % opt.out_freq == 0 && c + 1 < n_chunk) {
            if (!save(col.data, out_file, opt.format)) rc = 1;
        }
        if (opt.save_freq > 0 && (c + 1) % opt.save_freq == 0) {
            if (!save(col.data, out_file + ".at_" + std::to_string(col.data.chunk_count), opt.format)) rc = 1;
        }
    }
    if (opt.compute_ppl && n_scored > 0) std::printf("\nFinal estimate: PPL = %.4f\n", std::exp(nll / n_scored));
    llama_batch_free(batch);
    if (rc == 0) {
        if (col.data.entries.empty()) {
            LOG_ERR("error: no matmul inputs were observed\n");
            rc = 1;
        } else if (save(col.data, out_file, opt.format)) {
            LOG_INF("llama-imatrix: stored %zu entries after %d chunks in %s\n", col.data.entries.size(),
                    col.data.chunk_count, out_file.c_str());
        } else {
            rc = 1;
        }
    }
    llama_free(ctx);
    llama_model_free(model);
    return rc;
}
