// The golden models on a GPU (issues 15 and 16): every model of ../shared/golden/ppl that has a
// KL-divergence base, run through libllama as a user runs it, against the reference's logits
// (mean KLD <= 1e-3, same top token >= 98%, as on the CPU):
//  - fully offloaded to CUDA0, whole chunks (the batch kernels) and one token at a time (the
//    token-generation kernels);
//  - the MoE models with their routed experts in host memory (-ot exps=CPU): whole chunks compute
//    the expert products on the GPU after copying the weights over, single tokens on the CPU;
//  - split over two CUDA devices (-sm layer and -sm graph, uneven -ts 2,1).
// A run that quietly stayed on the CPU would pass those, so a first test checks where every node
// of a prompt batch and of a one-token batch ran: with the whole model on CUDA0, none on the CPU.
//
// KILN_VIRTUAL_CUDA_DEVICES=2 is set here (unless the environment says otherwise) before the
// device list is first read, so one GPU serves as the two devices of the split cases. Without a
// GPU every test reports as skipped with the reason. Shared data: KILN_SHARED_DIR (the device
// tool's machines carry the models in a folder of the checkout: scripts/gpu-check.sh).
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "golden-runner.h"
#include "llama-context.h"
#include "model-handles.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

using namespace kiln_test;

namespace {

const int k_env = (setenv("KILN_VIRTUAL_CUDA_DEVICES", "2", 0), unsetenv("KILN_VIRTUAL_CPU_DEVICES"), 0);

struct golden_model {
    const char * name;   // models/<name>.gguf, golden/ppl/<name>.kld
};

const golden_model k_models[] = {
    { "stories260K" },        { "synth-qwen3-f16" },     { "synth-gemma3-f16" },
    { "synth-qwen35-f16" },   { "synth-qwen3moe-f16" },  { "synth-deepseek2-f16" },
    { "synth-glm4moe-f16" },  { "synth-gpt-oss-f16" },   { "synth-qwen35moe-f16" },
};
// the mixture-of-experts ones, whose routed experts can stay in host memory
const golden_model k_moe_models[] = {
    { "synth-qwen3moe-f16" }, { "synth-deepseek2-f16" }, { "synth-glm4moe-f16" },
    { "synth-gpt-oss-f16" },  { "synth-qwen35moe-f16" },
};

void PrintTo(const golden_model & m, std::ostream * os) { *os << m.name; }

std::string case_name(const ::testing::TestParamInfo<golden_model> & info) {
    std::string s = info.param.name;
    for (char & c : s) {
        if (!std::isalnum((unsigned char) c)) c = '_';
    }
    return s;
}

#define REQUIRE_GPU()                                                                                                  \
    do {                                                                                                               \
        ASSERT_EQ(k_env, 0);                                                                                           \
        if (ggml_backend_cuda_get_device_count() == 0) {                                                               \
            GTEST_SKIP() << (ggml_cuda_compiled() ? "no usable CUDA device on this machine (see the log line above)"    \
                                                  : "this build has no CUDA backend (configure with -DKILN_CUDA=ON)");  \
        }                                                                                                              \
    } while (0)

// The registry's CUDA devices, NULL-terminated (at most n).
std::vector<ggml_backend_dev_t> cuda_devices(size_t n) {
    std::vector<ggml_backend_dev_t> d;
    for (size_t i = 0; i < ggml_backend_dev_count() && d.size() < n; ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (std::string(ggml_backend_dev_name(dev)).rfind("CUDA", 0) == 0) d.push_back(dev);
    }
    d.push_back(nullptr);
    return d;
}

// Where the nodes of the graphs ran: "op on backend" for every node the scheduler placed on a
// backend whose name does not start with `expected` (views and inputs do not run).
struct node_sites {
    llama_context * ctx = nullptr;
    std::string expected;
    bool experts_only = false;   // only the expert products (mul_mat_id, fused gate/up)
    int n_checked = 0;
    std::set<std::string> elsewhere;
};

bool record_sites(ggml_tensor * t, bool ask, void * user) {
    auto * s = (node_sites *) user;
    switch (t->op) {
        case GGML_OP_NONE: case GGML_OP_VIEW: case GGML_OP_RESHAPE: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE: return !ask;
        default: break;
    }
    const bool expert = t->op == GGML_OP_MUL_MAT_ID || t->op == GGML_OP_MOE_FUSED_UP_GATE;
    if (ask) return !s->experts_only || expert;
    if (s->experts_only && !expert) return true;
    ggml_backend_t b = ggml_backend_sched_get_tensor_backend(s->ctx->sched, t);
    const std::string name = b ? ggml_backend_name(b) : "(none)";
    ++s->n_checked;
    if (name.rfind(s->expected, 0) != 0) s->elsewhere.insert(std::string(ggml_op_desc(t)) + " on " + name);
    return true;
}

// Decodes a 40-token batch then one token with the sites recorded for each.
void sites_of(llama_model * model, node_sites & prompt, node_sites & token) {
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::vector<llama_token> toks;
    for (int i = 0; i < 41; ++i) toks.push_back((llama_token) (3 + 53 * i % (n_vocab - 3)));
    node_sites * current = &prompt;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.cb_eval = [](ggml_tensor * t, bool ask, void * user) { return record_sites(t, ask, *(node_sites **) user); };
    cp.cb_eval_user_data = &current;
    context_ptr ctx(llama_init_from_model(model, cp));
    ASSERT_TRUE(ctx) << llama_last_error();
    prompt.ctx = token.ctx = ctx.get();
    ASSERT_EQ(decode_tokens(ctx.get(), toks, 0, 40, 0), 0);
    current = &token;
    ASSERT_EQ(decode_tokens(ctx.get(), toks, 40, 1, 40), 0);
}

std::string joined(const std::set<std::string> & s) {
    std::string out;
    for (const std::string & x : s) out += "\n  " + x;
    return out;
}

void expect_golden(const golden_model & m, golden_config cfg, const char * what) {
    kld_base base;
    if (!load_golden_base(std::string(m.name), base)) return;
    for (int ubatch : { 0, 1 }) {
        cfg.n_ubatch = ubatch;
        cfg.max_chunks = ubatch == 1 ? 1 : 0;   // token by token: the first chunk
        const golden_result r = run_golden(model_path(std::string(m.name) + ".gguf"), base, cfg);
        std::printf("%s %s ub=%d: mean KLD %.3g, same top %.2f%%, PPL %.4f\n", m.name, what, ubatch, r.mean_kld,
                    100 * r.same_top, r.ppl);
        ASSERT_TRUE(r.ok) << what << " ub " << ubatch;
        EXPECT_LE(r.mean_kld, 1e-3) << what << " ub " << ubatch;
        EXPECT_GE(r.same_top, 0.98) << what << " ub " << ubatch;
    }
}

const llama_model_tensor_buft_override k_experts_in_ram[] = { { "exps", nullptr }, { nullptr, nullptr } };

} // namespace

class CudaGolden : public ::testing::TestWithParam<golden_model> {};
class CudaGoldenMoe : public ::testing::TestWithParam<golden_model> {};

// Every node of both batches on CUDA0 with the whole model there: an op without a CUDA kernel for
// the shapes and types this architecture uses would run on the CPU and be listed.
TEST_P(CudaGolden, EveryNodeRunsOnTheGpu) {
    REQUIRE_GPU();
    auto devs = cuda_devices(1);
    llama_model_params mp = llama_model_default_params();
    mp.devices = devs.data();
    model_ptr model(llama_model_load_from_file(model_path(std::string(GetParam().name) + ".gguf").c_str(), mp));
    ASSERT_TRUE(model) << llama_last_error();
    node_sites prompt, token;
    prompt.expected = token.expected = "CUDA";
    sites_of(model.get(), prompt, token);
    EXPECT_GT(prompt.n_checked, 0);
    EXPECT_GT(token.n_checked, 0);
    EXPECT_TRUE(prompt.elsewhere.empty()) << "40-token batch:" << joined(prompt.elsewhere);
    EXPECT_TRUE(token.elsewhere.empty()) << "one-token batch:" << joined(token.elsewhere);
}

TEST_P(CudaGolden, FullyOffloadedMatchesReference) {
    REQUIRE_GPU();
    auto devs = cuda_devices(1);
    golden_config cfg;
    cfg.devices = devs.data();
    expect_golden(GetParam(), cfg, "on CUDA0");
}

// -ot exps=CPU: the expert products of whole chunks run on the GPU (the weights copied over), of
// single tokens on the CPU, where the weights are; both against the reference.
TEST_P(CudaGoldenMoe, ExpertsInHostMemoryMatchReference) {
    REQUIRE_GPU();
    auto devs = cuda_devices(1);
    llama_model_tensor_buft_override ov[2] = { k_experts_in_ram[0], k_experts_in_ram[1] };
    ov[0].buft = ggml_backend_cpu_buffer_type();
    {
        llama_model_params mp = llama_model_default_params();
        mp.devices = devs.data();
        mp.tensor_buft_overrides = ov;
        model_ptr model(llama_model_load_from_file(model_path(std::string(GetParam().name) + ".gguf").c_str(), mp));
        ASSERT_TRUE(model) << llama_last_error();
        node_sites prompt, token;
        prompt.experts_only = token.experts_only = true;
        prompt.expected = "CUDA";
        token.expected = "CPU";
        sites_of(model.get(), prompt, token);
        EXPECT_GT(prompt.n_checked, 0);
        EXPECT_TRUE(prompt.elsewhere.empty()) << "40-token batch, expert products:" << joined(prompt.elsewhere);
        EXPECT_TRUE(token.elsewhere.empty()) << "one-token batch, expert products:" << joined(token.elsewhere);
    }
    golden_config cfg;
    cfg.devices = devs.data();
    cfg.overrides = ov;
    expect_golden(GetParam(), cfg, "-ot exps=CPU");
}

// Two CUDA devices (two virtual ones over one GPU by default), uneven shares, both split modes.
TEST_P(CudaGolden, SplitOverTwoDevicesMatchesReference) {
    REQUIRE_GPU();
    auto devs = cuda_devices(2);
    if (devs.size() < 3) GTEST_SKIP() << "one CUDA device (KILN_VIRTUAL_CUDA_DEVICES=1?): nothing to split across";
    static const float ts[16] = { 2, 1 };
    for (llama_split_mode mode : { LLAMA_SPLIT_MODE_LAYER, LLAMA_SPLIT_MODE_GRAPH }) {
        golden_config cfg;
        cfg.devices = devs.data();
        cfg.split_mode = mode;
        cfg.tensor_split = ts;
        expect_golden(GetParam(), cfg, mode == LLAMA_SPLIT_MODE_LAYER ? "-sm layer -ts 2,1" : "-sm graph -ts 2,1");
    }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGolden, ::testing::ValuesIn(k_models), case_name);
INSTANTIATE_TEST_SUITE_P(Models, CudaGoldenMoe, ::testing::ValuesIn(k_moe_models), case_name);
