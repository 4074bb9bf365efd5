// End-to-end logits of dense models against the reference implementation's KL-divergence base
// files: every chunk of the golden text is decoded through libllama and each scored position's
// distribution is compared with the reference's (mean KLD, same top token, perplexity).
#include "kld-file.h"
#include "llama.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace {

struct run_result {
    double mean_kld = 0;
    double same_top = 0;
    double ppl = 0;
};

struct run_config {
    bool flash_attn = true;
    int n_threads = 2;
    int n_ubatch = 0;   // 0: the whole chunk at once
    ggml_type type_k = GGML_TYPE_F16;
    ggml_type type_v = GGML_TYPE_F16;
};

run_result run_against_base(const std::string & model_path, const kiln_test::kld_base & base, const run_config & cfg) {
    run_result r;
    llama_model_params mp = llama_model_default_params();
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
    llama_context * ctx = llama_init_from_model(model, cp);
    EXPECT_NE(ctx, nullptr);
    if (!ctx) {
        llama_model_free(model);
        return r;
    }

    const bool add_bos = llama_vocab_get_add_bos(vocab);
    llama_batch batch = llama_batch_init(base.n_ctx, 0, 1);
    double kld_sum = 0, nll = 0;
    size_t n = 0, same = 0;
    std::vector<double> base_logp;
    for (int c = 0; c < base.n_chunk; ++c) {
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
        EXPECT_EQ(llama_decode(ctx, batch), 0);
        for (size_t k = 0; k < base.n_scored(); ++k) {
            const int pos = base.n_ctx / 2 + (int) k;
            const float * logits = llama_get_logits_ith(ctx, pos);
            base.log_probs(c, k, base_logp);
            bool top = false;
            double lp = 0;
            const int next = base.tokens[(size_t) c * base.n_ctx + pos + 1];
            kld_sum += kiln_test::kld_against(base_logp, logits, base.n_vocab, top, &lp, next);
            nll -= lp;
            same += top;
            ++n;
        }
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    r.mean_kld = kld_sum / n;
    r.same_top = (double) same / n;
    r.ppl = std::exp(nll / n);
    return r;
}

std::string golden(const std::string & rel) { return kiln_test::shared_path("golden/ppl/" + rel); }
std::string model_file(const std::string & rel) { return kiln_test::shared_path("models/" + rel); }

// "Final estimate: PPL = X +/- Y" or "... = X +/- Y" from the reference's .txt
double golden_ppl(const std::string & txt) {
    std::ifstream f(txt);
    std::string line, last;
    while (std::getline(f, line)) {
        if (line.find("Final estimate") != std::string::npos) last = line;
    }
    const size_t eq = last.rfind('=');
    return eq == std::string::npos ? NAN : std::atof(last.c_str() + eq + 1);
}

struct golden_case {
    const char * model;
    const char * base;
};

class DenseGolden : public ::testing::TestWithParam<std::tuple<golden_case, bool, int, int>> {};

TEST_P(DenseGolden, LogitsMatchReference) {
    const auto [gc, fa, threads, ubatch] = GetParam();
    const std::string base_path = golden(gc.base);
    if (!kiln_test::file_exists(base_path)) GTEST_SKIP() << "no " << base_path;
    kiln_test::kld_base base;
    std::string err;
    ASSERT_TRUE(base.load(base_path, err)) << err;
    run_config cfg;
    cfg.flash_attn = fa;
    cfg.n_threads = threads;
    cfg.n_ubatch = ubatch;
    const run_result r = run_against_base(model_file(gc.model), base, cfg);
    std::printf("%s fa=%d t=%d ub=%d: mean KLD %.3g, same top %.2f%%, PPL %.4f\n", gc.model, fa, threads, ubatch,
                r.mean_kld, 100 * r.same_top, r.ppl);
    EXPECT_LE(r.mean_kld, 1e-3);
    EXPECT_GE(r.same_top, 0.98);
}

INSTANTIATE_TEST_SUITE_P(
    Models, DenseGolden,
    ::testing::Combine(::testing::Values(golden_case{ "stories260K.gguf", "stories260K.kld" },
                                         golden_case{ "synth-qwen3-f16.gguf", "synth-qwen3-f16.kld" }),
                       ::testing::Bool(), ::testing::Values(1, 2), ::testing::Values(0, 1, 7)));

TEST(DenseGolden, Stories260KPerplexity) {
    kiln_test::kld_base base;
    std::string err;
    ASSERT_TRUE(base.load(golden("stories260K.kld"), err)) << err;
    const run_result r = run_against_base(model_file("stories260K.gguf"), base, {});
    const double ref = golden_ppl(golden("stories260K.txt"));
    ASSERT_FALSE(std::isnan(ref));
    EXPECT_NEAR(r.ppl, ref, ref * 5e-4) << "reference " << ref;
}

} // namespace
