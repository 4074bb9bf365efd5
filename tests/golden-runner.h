// Running a model over the chunks of a KL-divergence base file (../shared/golden/ppl/*.kld) and
// comparing each scored position's distribution with the reference's: mean KLD, same top token,
// perplexity. Shared by the model golden tests.
#pragma once

#include "kld-file.h"
#include "llama.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace kiln_test {

struct golden_result {
    double mean_kld = 0;
    double same_top = 0;
    double ppl = 0;
    bool ok = false;
    std::vector<float> logits;   // chunk 0's scored logits when asked for
};

struct golden_config {
    bool flash_attn = true;
    int n_threads = 2;
    int n_ubatch = 0;   // 0: the whole chunk at once
    ggml_type type_k = GGML_TYPE_F16;
    ggml_type type_v = GGML_TYPE_F16;
    int mla = -1;
    int attn_max_batch = 0;      // -amb MiB
    bool fused_moe = true;
    int ser_n_min = 0;
    float ser_threshold = 0.0f;
    int max_chunks = 0;          // 0: all
    bool keep_logits = false;
    const llama_model_tensor_buft_override * overrides = nullptr;
    // placement (tests/test-device-split.cpp): devices NULL-terminated, NULL: all there are
    ggml_backend_dev_t * devices = nullptr;
    int n_gpu_layers = -1;
    llama_split_mode split_mode = LLAMA_SPLIT_MODE_LAYER;
    const float * tensor_split = nullptr;
    int main_gpu = 0;
    ggml_type reduce_type = GGML_TYPE_F32;   // -grt
    llama_graph_reduce_form reduce_form = LLAMA_GRAPH_REDUCE_AUTO;   // --graph-reduce-form (the context's default)
    bool split_experts = false;   // --moe-split experts
};

inline golden_result run_golden(const std::string & model_path, const kld_base & base, const golden_config & cfg) {
    golden_result r;
    llama_model_params mp = llama_model_default_params();
    mp.tensor_buft_overrides = cfg.overrides;
    mp.devices = cfg.devices;
    mp.n_gpu_layers = cfg.n_gpu_layers;
    mp.split_mode = cfg.split_mode;
    mp.tensor_split = cfg.tensor_split;
    mp.split_experts = cfg.split_experts;
    mp.main_gpu = cfg.main_gpu;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
    EXPECT_NE(model, nullptr) << llama_last_error();
    if (!model) return r;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    EXPECT_EQ(llama_vocab_n_tokens(vocab), base.n_vocab);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = base.n_ctx;
    cp.n_batch = base.n_ctx;
    cp.n_ubatch = cfg.n_ubatch > 0 ? cfg.n_ubatch : base.n_ctx;
    cp.n_threads = cp.n_threads_batch = cfg.n_threads;
    cp.flash_attn_type = cfg.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cfg.type_k;
    cp.type_v = cfg.type_v;
    cp.mla = cfg.mla;
    cp.attn_max_batch = cfg.attn_max_batch;
    cp.fused_moe = cfg.fused_moe;
    cp.ser_n_min = cfg.ser_n_min;
    cp.ser_threshold = cfg.ser_threshold;
    cp.graph_reduce_type = cfg.reduce_type;
    cp.graph_reduce_form = cfg.reduce_form;
    llama_context * ctx = llama_init_from_model(model, cp);
    EXPECT_NE(ctx, nullptr) << llama_last_error();
    if (!ctx) {
        llama_model_free(model);
        return r;
    }

    const bool add_bos = llama_vocab_get_add_bos(vocab);
    const int n_chunk = cfg.max_chunks > 0 ? std::min(cfg.max_chunks, base.n_chunk) : base.n_chunk;
    llama_batch batch = llama_batch_init(base.n_ctx, 0, 1);
    double kld_sum = 0, nll = 0;
    size_t n = 0, same = 0;
    bool decoded = true;
    std::vector<double> base_logp;
    for (int c = 0; c < n_chunk && decoded; ++c) {
        llama_memory_clear(ctx);
        batch.n_tokens = base.n_ctx;
        for (int i = 0; i < base.n_ctx; ++i) {
            batch.token[i] = base.tokens[(size_t) c * base.n_ctx + i];
            batch.pos[i] = i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = i >= base.n_ctx / 2;
        }
        if (add_bos) batch.token[0] = llama_vocab_bos(vocab);
        const int rc = llama_decode(ctx, batch);
        EXPECT_EQ(rc, 0);
        decoded = rc == 0;
        for (size_t k = 0; k < base.n_scored() && decoded; ++k) {
            const int pos = base.n_ctx / 2 + (int) k;
            const float * logits = llama_get_logits_ith(ctx, pos);
            if (c == 0 && cfg.keep_logits) r.logits.insert(r.logits.end(), logits, logits + base.n_vocab);
            base.log_probs(c, k, base_logp);
            bool top = false;
            double lp = 0;
            const int next = base.tokens[(size_t) c * base.n_ctx + pos + 1];
            kld_sum += kld_against(base_logp, logits, base.n_vocab, top, &lp, next);
            nll -= lp;
            same += top;
            ++n;
        }
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    if (n == 0) return r;
    r.mean_kld = kld_sum / n;
    r.same_top = (double) same / n;
    r.ppl = std::exp(nll / n);
    r.ok = decoded;
    return r;
}

inline std::string golden_ppl_path(const std::string & rel) { return shared_path("golden/ppl/" + rel); }

// The KL-divergence base of a golden model (golden/ppl/<model>.kld); a test failure if unreadable.
inline bool load_golden_base(const std::string & model, kld_base & base) {
    std::string err;
    const bool ok = base.load(golden_ppl_path(model + ".kld"), err);
    EXPECT_TRUE(ok) << err;
    return ok;
}
inline std::string model_path(const std::string & rel) { return shared_path("models/" + rel); }

// A number after `label` on a line of the reference's .txt ("Mean    KLD:   0.43 ± ..."), NaN if absent.
inline double golden_txt_value(const std::string & txt, const std::string & label) {
    std::ifstream f(txt);
    std::string line;
    while (std::getline(f, line)) {
        const size_t at = line.find(label);
        if (at == std::string::npos) continue;
        const size_t colon = line.find(':', at);
        if (colon == std::string::npos) continue;
        return std::atof(line.c_str() + colon + 1);
    }
    return NAN;
}

} // namespace kiln_test
