// The transformer architectures of issue 14 against the reference: logits of synth-gemma3,
// synth-glm4moe and synth-gpt-oss over the golden text with flash attention on and off, 1 and 2
// threads, the whole chunk in one batch, token by token and in odd micro-batches. Their traps:
// Gemma 3's sliding-window layers (window 64 < the 256-token chunks) with their own RoPE base,
// GLM-4.5's NextN layer (loaded, never run) and partial NEOX rotation, gpt-oss's attention
// sinks, alternating windows of 128, YaRN and its clamped SwiGLU with expert biases.
#include "golden-runner.h"
#include "llama-quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

using namespace kiln_test;

namespace {

struct arch_case {
    const char * model;   // synth-<arch>-f16: the .gguf and its .kld
    bool fa;
    int threads;
    int ubatch;           // 0: the whole chunk at once
    int chunks;           // 0: all
};

void PrintTo(const arch_case & c, std::ostream * os) {
    *os << c.model << " fa " << c.fa << " t " << c.threads << " ub " << c.ubatch << " chunks " << c.chunks;
}

std::string case_name(const ::testing::TestParamInfo<arch_case> & info) {
    const arch_case & c = info.param;
    std::string m = std::string(c.model).substr(6);   // drop "synth-"
    m = m.substr(0, m.rfind("-f16"));
    for (char & ch : m) {
        if (ch == '-') ch = '_';
    }
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%s_fa%d_t%d_ub%d", m.c_str(), c.fa, c.threads, c.ubatch);
    return buf;
}

class ArchGolden : public ::testing::TestWithParam<arch_case> {};

TEST_P(ArchGolden, LogitsMatchReference) {
    const arch_case c = GetParam();
    kld_base base;
    std::string err;
    ASSERT_TRUE(base.load(golden_ppl_path(std::string(c.model) + ".kld"), err)) << err;
    golden_config cfg;
    cfg.flash_attn = c.fa;
    cfg.n_threads = c.threads;
    cfg.n_ubatch = c.ubatch;
    cfg.max_chunks = c.chunks;
    const golden_result r = run_golden(model_path(std::string(c.model) + ".gguf"), base, cfg);
    std::printf("%s fa=%d t=%d ub=%d: mean KLD %.3g, same top %.2f%%, PPL %.1f\n", c.model, c.fa, c.threads, c.ubatch,
                r.mean_kld, 100 * r.same_top, r.ppl);
    ASSERT_TRUE(r.ok);
    EXPECT_LE(r.mean_kld, 1e-3);
    EXPECT_GE(r.same_top, 0.98);
}

// Per model: both attention paths over every chunk in one batch; token by token (one chunk: 256
// decodes) on each path, flash attention with 2 threads (its KV split and merge); and 7-token
// micro-batches, whose windows straddle batch boundaries.
#define ARCH_CASES(m)                                                                                                  \
    arch_case{ m, true, 2, 0, 0 }, arch_case{ m, false, 2, 0, 0 }, arch_case{ m, true, 2, 1, 1 },                    \
        arch_case{ m, false, 1, 1, 1 }, arch_case{ m, true, 1, 7, 1 }, arch_case{ m, false, 2, 7, 1 }

INSTANTIATE_TEST_SUITE_P(Gemma3, ArchGolden, ::testing::Values(ARCH_CASES("synth-gemma3-f16")), case_name);
INSTANTIATE_TEST_SUITE_P(Glm4Moe, ArchGolden, ::testing::Values(ARCH_CASES("synth-glm4moe-f16")), case_name);
INSTANTIATE_TEST_SUITE_P(GptOss, ArchGolden, ::testing::Values(ARCH_CASES("synth-gpt-oss-f16")), case_name);

// Every combination of the axes (flash attention, threads, batch 1 / whole chunk) on the first
// chunk; the cases above run more chunks and odd micro-batches.
TEST(ArchGolden, FullCrossProductFirstChunk) {
    for (const char * model : { "synth-gemma3-f16", "synth-glm4moe-f16", "synth-gpt-oss-f16" }) {
        kld_base base;
        std::string err;
        ASSERT_TRUE(base.load(golden_ppl_path(std::string(model) + ".kld"), err)) << err;
        for (bool fa : { false, true }) {
            for (int t : { 1, 2 }) {
                for (int ub : { 0, 1 }) {
                    SCOPED_TRACE(std::string(model) + " fa " + std::to_string(fa) + " t " + std::to_string(t) + " ub " + std::to_string(ub));
                    golden_config cfg;
                    cfg.flash_attn = fa;
                    cfg.n_threads = t;
                    cfg.n_ubatch = ub;
                    cfg.max_chunks = 1;
                    const golden_result r = run_golden(model_path(std::string(model) + ".gguf"), base, cfg);
                    ASSERT_TRUE(r.ok);
                    EXPECT_LE(r.mean_kld, 1e-3);
                    EXPECT_GE(r.same_top, 0.98);
                }
            }
        }
    }
}

// The NextN layer's tensors are loaded (no "not used" warning, counted in the model) but the
// layer is not run: the model reports the layers that run.
TEST(ArchGolden, Glm4MoeNextNLayerLoadsButDoesNotRun) {
    llama_model * m = llama_model_load_from_file(model_path("synth-glm4moe-f16.gguf").c_str(), llama_model_default_params());
    ASSERT_NE(m, nullptr) << llama_last_error();
    EXPECT_EQ(llama_model_n_layer(m), 2);
    char buf[64];
    ASSERT_GT(llama_model_meta_val_str(m, "glm4moe.block_count", buf, sizeof(buf)), 0);
    EXPECT_STREQ(buf, "3");
    // every element of the file is in the model, the NextN projection included
    EXPECT_EQ(llama_model_n_params(m), 7358752u);
    llama_model_free(m);
}

// gpt-oss ships its experts as MXFP4: quantize the golden model's experts (the rest stays f16)
// and check the file holds MXFP4 blocks and that the model stays close to the f16 reference:
// no further than with Q4_0 experts (also 4-bit blocks of 32, but with a free f16 scale where
// MXFP4 has a power of two), and clearly not identical (the experts really are requantized).
TEST(ArchGolden, GptOssMxfp4ExpertsKld) {
    const std::string dir = (std::filesystem::temp_directory_path() / ("kiln-arch-" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(dir);
    kld_base base;
    std::string err;
    ASSERT_TRUE(base.load(golden_ppl_path("synth-gpt-oss-f16.kld"), err)) << err;
    auto experts_as = [&](const char * type) {
        llama_quant_params p;
        p.ftype = LLAMA_FT_F16;
        p.pure = true;   // the rule's type for the experts, f16 for the rest
        p.nthread = 2;
        llama_quant_parse_rules(std::string("_exps\\.weight$=") + type, p.custom_rules);
        const std::string out = dir + "/gpt-oss-" + type + ".gguf";
        llama_quant_plan_result plan;
        llama_quant_model(model_path("synth-gpt-oss-f16.gguf"), out, p, &plan);
        int n_typed = 0;
        for (const auto & t : plan.tensors) {
            const bool expert = t.name.find("_exps.weight") != std::string::npos;
            if (!expert) continue;
            EXPECT_EQ(t.new_type, llama_quant_type_find(type)) << t.name;
            ++n_typed;
        }
        EXPECT_EQ(n_typed, 6);   // gate, up, down in each of the 2 layers
        golden_config cfg;
        cfg.max_chunks = 2;
        return run_golden(out, base, cfg);
    };
    const golden_result mx = experts_as("mxfp4");
    const golden_result q4 = experts_as("q4_0");
    std::filesystem::remove_all(dir);
    std::printf("gpt-oss experts MXFP4: mean KLD %.4g, same top %.2f%%; Q4_0: mean KLD %.4g, same top %.2f%%\n",
                mx.mean_kld, 100 * mx.same_top, q4.mean_kld, 100 * q4.same_top);
    ASSERT_TRUE(mx.ok && q4.ok);
    EXPECT_GT(mx.mean_kld, 1e-5);
    EXPECT_LE(mx.mean_kld, 2.0 * q4.mean_kld);
    EXPECT_GE(mx.same_top, 0.8 * q4.same_top);
}

// ---- the sliding-window cache

// Two sequences of the golden text decoded side by side in 32-token micro-batches (then token by
// token) with a 1024-cell context: the window layers' own cache (window + micro-batch, freeing
// cells as it goes) must give the logits --swa-full gives, in less memory.
struct swa_run {
    std::vector<float> logits;   // every output, in order
    size_t bytes = 0;
    bool rewind_near = false, rewind_far = true;
    std::vector<float> after_rewind;
};

swa_run run_two_sequences(const std::string & model, const kld_base & base, bool swa_full) {
    swa_run out;
    llama_model * m = llama_model_load_from_file(model_path(model + ".gguf").c_str(), llama_model_default_params());
    EXPECT_NE(m, nullptr) << llama_last_error();
    if (!m) return out;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    cp.n_batch = 64;
    cp.n_ubatch = 32;
    cp.n_seq_max = 2;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.swa_full = swa_full;
    llama_context * ctx = llama_init_from_model(m, cp);
    EXPECT_NE(ctx, nullptr) << llama_last_error();
    if (!ctx) {
        llama_model_free(m);
        return out;
    }
    out.bytes = llama_memory_size_bytes(ctx);
    const int n_prompt = 320, n_gen = 24, per_batch = 32;   // 2 x 16 tokens a batch
    llama_batch b = llama_batch_init(per_batch, 0, 1);
    auto token_of = [&](int s, int p) { return base.tokens[(size_t) s * 500 + p]; };
    auto decode_range = [&](int p0, int p1, bool all_logits) {
        for (int p = p0; p < p1; p += per_batch / 2) {
            const int n = std::min(per_batch / 2, p1 - p);
            b.n_tokens = 2 * n;
            for (int s = 0; s < 2; ++s) {
                for (int i = 0; i < n; ++i) {
                    const int k = s * n + i;
                    b.token[k] = token_of(s, p + i);
                    b.pos[k] = p + i;
                    b.n_seq_id[k] = 1;
                    b.seq_id[k][0] = s;
                    b.logits[k] = all_logits || p + i >= p1 - 4;
                }
            }
            EXPECT_EQ(llama_decode(ctx, b), 0);
            for (int k = 0; k < b.n_tokens; ++k) {
                if (!b.logits[k]) continue;
                const float * l = llama_get_logits_ith(ctx, k);
                out.logits.insert(out.logits.end(), l, l + base.n_vocab);
            }
        }
    };
    decode_range(0, n_prompt, false);
    for (int p = n_prompt; p < n_prompt + n_gen; ++p) decode_range(p, p + 1, true);
    // back 8 tokens (inside the window): possible, and decoding them again gives the same logits
    out.rewind_near = llama_memory_seq_rm(ctx, 0, n_prompt + n_gen - 8, -1) &&
                      llama_memory_seq_rm(ctx, 1, n_prompt + n_gen - 8, -1);
    std::vector<float> before(out.logits.end() - 8 * 2 * base.n_vocab, out.logits.end());
    const size_t at = out.logits.size();
    for (int p = n_prompt + n_gen - 8; p < n_prompt + n_gen; ++p) decode_range(p, p + 1, true);
    out.after_rewind.assign(out.logits.begin() + at, out.logits.end());
    out.logits.resize(at);
    EXPECT_EQ(out.after_rewind, before) << "the same tokens after a rewind give the same logits";
    // far back: the window layers no longer hold what that needs (unless they keep everything);
    // a refused rewind leaves the cache as it was
    const int32_t used = llama_memory_n_used(ctx);
    out.rewind_far = llama_memory_seq_rm(ctx, 0, 40, -1);
    if (!out.rewind_far) {
        EXPECT_EQ(llama_memory_n_used(ctx), used);
    }
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(m);
    return out;
}

class SlidingWindowCache : public ::testing::TestWithParam<const char *> {};

TEST_P(SlidingWindowCache, SameLogitsAsSwaFullInLessMemory) {
    const std::string model = GetParam();
    kld_base base;
    std::string err;
    ASSERT_TRUE(base.load(golden_ppl_path(model + ".kld"), err)) << err;
    ASSERT_GE(base.tokens.size(), 1000u);
    const swa_run window = run_two_sequences(model, base, false);
    const swa_run full = run_two_sequences(model, base, true);
    ASSERT_FALSE(full.logits.empty());
    ASSERT_EQ(window.logits.size(), full.logits.size());
    double diff = 0, mx = 0;
    for (size_t i = 0; i < full.logits.size(); ++i) {
        diff = std::max(diff, (double) std::fabs(window.logits[i] - full.logits[i]));
        mx = std::max(mx, (double) std::fabs(full.logits[i]));
    }
    std::printf("%s: KV cache %.2f MiB (--swa-full %.2f MiB), logits differ by up to %.3g of %.3g\n", model.c_str(),
                window.bytes / 1048576.0, full.bytes / 1048576.0, diff, mx);
    // the same scores in another cell order: equal up to float summation order, which six
    // layers of random weights amplify to ~2e-5 (a missing or extra cell moves logits by O(1))
    EXPECT_LE(diff, 1e-4 * mx);
    EXPECT_LT(window.bytes, full.bytes);
    EXPECT_TRUE(window.rewind_near && full.rewind_near);
    EXPECT_FALSE(window.rewind_far);
    EXPECT_TRUE(full.rewind_far);
}

INSTANTIATE_TEST_SUITE_P(Models, SlidingWindowCache, ::testing::Values("synth-gemma3-f16", "synth-gpt-oss-f16"),
                         [](const ::testing::TestParamInfo<const char *> & i) {
                             return std::string(std::strstr(i.param, "gemma") ? "gemma3" : "gpt_oss");
                         });

} // namespace
