// Which nodes of each architecture's graphs the CUDA backend would send back to the CPU, checked
// without a GPU (issue 15: kernels for every op the supported architectures use). Every golden
// model decodes a 40-token batch and then one token on the CPU while each node is asked
// ggml_cuda_supports_node, the backend's own supports_op: any node it refuses is listed. Run
// with flash attention on and off, each KV cache type the GPU takes, fused and separate expert
// products, smart expert reduction, and each MLA mode for deepseek2; one node refused means that
// on a GPU its inputs travel to the host and back for every layer of every batch.
// Every KV cache type the GPU reads and writes (f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q6_0,
// iq4_nl, q8_KV) is among the configurations. A build without CUDA skips with the reason.
#include "ggml-cuda.h"
#include "golden-runner.h"
#include "model-handles.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace kiln_test;

namespace {

const char * const k_models[] = {
    "stories260K",         "synth-qwen3-f16",   "synth-gemma3-f16",  "synth-qwen35-f16",    "synth-qwen3moe-f16",
    "synth-deepseek2-f16", "synth-glm4moe-f16", "synth-gpt-oss-f16", "synth-qwen35moe-f16",
};

struct refused_nodes {
    int n_checked = 0;
    std::set<std::string> refused;   // "op (types and shapes of the sources)", layer numbers left out
};

std::string describe(const ggml_tensor * t) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s -> %s", ggml_op_desc(t), ggml_type_name(t->type));
    std::string s = buf;
    for (int i = 0; i < GGML_MAX_SRC && t->src[i]; ++i) {
        const ggml_tensor * x = t->src[i];
        std::snprintf(buf, sizeof(buf), " %s[%lld,%lld,%lld]%s", ggml_type_name(x->type), (long long) x->ne[0],
                      (long long) x->ne[1], (long long) x->ne[2], ggml_is_contiguous(x) ? "" : "(strided)");
        s += buf;
    }
    return s;
}

bool ask_cuda(ggml_tensor * t, bool ask, void * user) {
    if (ask) return true;   // observed after the compute: sources allocated, views resolved
    auto * r = (refused_nodes *) user;
    ++r->n_checked;
    if (!ggml_cuda_supports_node(t)) r->refused.insert(describe(t));
    return true;
}

struct config {
    const char * what;
    bool fa;
    ggml_type cache;
    bool fmoe;
    bool ser;
    int mla;
};

// The nodes of a 40-token batch and of one token after it that CUDA refuses, with this config.
refused_nodes refused_by_cuda(llama_model * model, const config & c, std::string & err) {
    refused_nodes r;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::vector<llama_token> toks;
    for (int i = 0; i < 41; ++i) toks.push_back((llama_token) (3 + 53 * i % (n_vocab - 3)));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.flash_attn_type = c.fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = c.cache;
    cp.type_v = c.fa ? c.cache : GGML_TYPE_F16;
    cp.fused_moe = c.fmoe;
    cp.mla = c.mla;
    if (c.ser) {
        cp.ser_n_min = 1;
        cp.ser_threshold = 0.5f;
    }
    cp.cb_eval = ask_cuda;
    cp.cb_eval_user_data = &r;
    context_ptr ctx(llama_init_from_model(model, cp));
    if (!ctx) {
        err = llama_last_error();
        return r;
    }
    if (decode_tokens(ctx.get(), toks, 0, 40, 0) != 0 || decode_tokens(ctx.get(), toks, 40, 1, 40) != 0) err = "decode failed";
    return r;
}

} // namespace

class GpuOpCoverage : public ::testing::TestWithParam<const char *> {};

TEST_P(GpuOpCoverage, EveryNodeHasACudaKernel) {
    if (!ggml_cuda_compiled()) GTEST_SKIP() << "this build has no CUDA backend (configure with -DKILN_CUDA=ON)";
    const std::string name = GetParam();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;   // the graph is the same wherever it runs; here it runs on the CPU
    model_ptr model(llama_model_load_from_file(model_path(name + ".gguf").c_str(), mp));
    ASSERT_TRUE(model) << llama_last_error();
    const bool mla = name.find("deepseek2") != std::string::npos;
    // stories260K's 8-value heads are shorter than a q8_0 block: no quantized cache there
    const bool q8_cache = name != "stories260K";
    std::vector<config> configs = {
        { "fa f16", true, GGML_TYPE_F16, true, false, -1 },
        { "no fa f16", false, GGML_TYPE_F16, true, false, -1 },
        { "fa bf16", true, GGML_TYPE_BF16, true, false, -1 },
        { "fa f16, experts unfused", true, GGML_TYPE_F16, false, false, -1 },
        { "fa f16, -ser 1,0.5", true, GGML_TYPE_F16, true, true, -1 },
    };
    // the quantized KV cache types the attention kernel and the cache writes take
    const std::vector<std::pair<const char *, ggml_type>> quant_caches = {
        { "fa q8_0", GGML_TYPE_Q8_0 }, { "fa q4_0", GGML_TYPE_Q4_0 }, { "fa q4_1", GGML_TYPE_Q4_1 },
        { "fa q5_0", GGML_TYPE_Q5_0 }, { "fa q5_1", GGML_TYPE_Q5_1 }, { "fa q6_0", GGML_TYPE_Q6_0 },
        { "fa iq4_nl", GGML_TYPE_IQ4_NL }, { "fa q8_KV", GGML_TYPE_Q8_KV },
    };
    // (a latent MLA cache refuses q8_KV: llama_init_from_model says so)
    auto model_takes = [mla](ggml_type t) { return !(mla && t == GGML_TYPE_Q8_KV); };
    if (q8_cache) {
        for (const auto & qc : quant_caches) {
            if (model_takes(qc.second)) configs.push_back({ qc.first, true, qc.second, true, false, -1 });
        }
    }
    if (mla) {
        for (int m : { 0, 1, 2, 3 }) {
            configs.push_back({ "fa f16 mla", true, GGML_TYPE_F16, true, false, m });
            for (const auto & qc : quant_caches) {
                if (model_takes(qc.second)) configs.push_back({ qc.first, true, qc.second, true, false, m });
            }
        }
        configs.push_back({ "no fa f16 mla 1", false, GGML_TYPE_F16, true, false, 1 });
    }
    for (const config & c : configs) {
        std::string err;
        const refused_nodes r = refused_by_cuda(model.get(), c, err);
        const std::string what = name + ", " + c.what + (c.mla >= 0 ? " " + std::to_string(c.mla) : "");
        EXPECT_TRUE(err.empty()) << what << ": " << err;
        EXPECT_GT(r.n_checked, 0) << what;
        std::string list;
        for (const std::string & s : r.refused) list += "\n  " + s;
        EXPECT_TRUE(r.refused.empty()) << what << ": nodes the GPU would hand back to the CPU:" << list;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, GpuOpCoverage, ::testing::ValuesIn(k_models),
                         [](const ::testing::TestParamInfo<const char *> & i) {
                             std::string s = i.param;
                             for (char & ch : s) {
                                 if (!std::isalnum((unsigned char) ch)) ch = '_';
                             }
                             return s;
                         });
