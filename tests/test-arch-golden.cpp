// The transformer architectures of issue 14 against the reference: logits of synth-gemma3,
// synth-glm4moe and synth-gpt-oss over the golden text with flash attention on and off, 1 and 2
// threads, the whole chunk in one batch, token by token and in odd micro-batches. Their traps:
// Gemma 3's sliding-window layers (window 64 < the 256-token chunks) with their own RoPE base,
// GLM-4.5's NextN layer (loaded, never run) and partial NEOX rotation, gpt-oss's attention
// sinks, alternating windows of 128, YaRN and its clamped SwiGLU with expert biases.
#include "golden-runner.h"
#include "llama-quantize.h"

#include <gtest/gtest.h>

#include <cstdio>
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

} // namespace
