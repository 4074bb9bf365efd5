// A model split across devices gives the logits of the same model on one device. Runs on any
// machine with virtual CPU devices: this process asks for four (KILN_VIRTUAL_CPU_DEVICES=4, set
// before the device list is first read) and uses two, three or all four of them per case, with
// uneven -ts shares, so the scheduler's splits and the copies between devices are exercised as
// they would be between GPUs.
#include "golden-runner.h"
#include "llama-context.h"
#include "model-handles.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const int k_registered = (setenv("KILN_VIRTUAL_CPU_DEVICES", "4", 1), 0);

std::vector<ggml_backend_dev_t> first_devices(int n) {
    std::vector<ggml_backend_dev_t> d;
    for (int i = 0; i < n; ++i) d.push_back(ggml_backend_dev_get((size_t) i));
    d.push_back(nullptr);
    return d;
}

// log-softmax in double
std::vector<double> log_probs(const float * logits, int n) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; ++i) mx = std::max(mx, (double) logits[i]);
    for (int i = 0; i < n; ++i) sum += std::exp(logits[i] - mx);
    std::vector<double> out(n);
    for (int i = 0; i < n; ++i) out[i] = logits[i] - mx - std::log(sum);
    return out;
}

TEST(VirtualDevices, FourAreListedWithTheirOwnBuffers) {
    ASSERT_EQ(ggml_backend_dev_count(), 4u) << "KILN_VIRTUAL_CPU_DEVICES=4 was set before the first use";
    for (size_t i = 0; i < 4; ++i) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        EXPECT_EQ(std::string(ggml_backend_dev_name(d)), "CPU" + std::to_string(i));
        EXPECT_EQ(ggml_backend_dev_by_name(("cpu" + std::to_string(i)).c_str()), d);
        EXPECT_NE(ggml_backend_dev_buffer_type(d), ggml_backend_cpu_buffer_type());
        EXPECT_EQ(ggml_backend_buft_get_device(ggml_backend_dev_buffer_type(d)), d);
        size_t free = 0, total = 0;
        ggml_backend_dev_memory(d, &free, &total);
        EXPECT_GT(total, 0u);
    }
    EXPECT_EQ(ggml_backend_dev_by_name("CPU4"), nullptr);
    EXPECT_TRUE(llama_supports_gpu_offload());
}

// A chain of "layers" (norm, scale by a norm weight, projection, residual add) with layers 0-1
// on CPU0, 2-3 on CPU1 and the head on CPU0: three splits, and the residual stream is copied
// once at each of the two boundaries. The result equals the same graph on the host CPU.
TEST(VirtualDevices, SchedulerCopiesTheStreamOncePerBoundary) {
    const int n_embd = 37, n_tokens = 5, n_layer = 4;
    const int dev_of_layer[n_layer] = { 0, 0, 1, 1 };
    std::vector<ggml_backend_t> backends = { ggml_backend_dev_init(ggml_backend_dev_get(0)),
                                             ggml_backend_dev_init(ggml_backend_dev_get(1)), ggml_backend_cpu_init() };
    ggml_context * wctx[2];
    for (auto & c : wctx) c = ggml_init({ ggml_tensor_overhead() * 16, nullptr, true });
    std::vector<ggml_tensor *> w(n_layer), g(n_layer);
    for (int l = 0; l < n_layer; ++l) {
        w[l] = ggml_new_tensor_2d(wctx[dev_of_layer[l]], GGML_TYPE_F32, n_embd, n_embd);
        g[l] = ggml_new_tensor_1d(wctx[dev_of_layer[l]], GGML_TYPE_F32, n_embd);
    }
    ggml_tensor * head = ggml_new_tensor_2d(wctx[0], GGML_TYPE_F32, n_embd, 11);
    ggml_backend_buffer_t wbuf[2];
    for (int d = 0; d < 2; ++d) {
        wbuf[d] = ggml_backend_alloc_ctx_tensors_from_buft(wctx[d], ggml_backend_dev_buffer_type(ggml_backend_dev_get(d)));
        ASSERT_NE(wbuf[d], nullptr);
        ggml_backend_buffer_set_usage(wbuf[d], GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    uint32_t seed = 1;
    for (ggml_tensor * t : { w[0], w[1], w[2], w[3], g[0], g[1], g[2], g[3], head }) {
        const auto v = kiln_test::random_floats(ggml_nelements(t), seed++, -0.5f, 0.5f);
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    }
    const auto xin = kiln_test::random_floats((size_t) n_embd * n_tokens, 99);

    auto run = [&](ggml_backend_t * bs, int n_b, int & n_splits, int & n_copies) {
        std::vector<char> mem(ggml_tensor_overhead() * 64 + ggml_graph_overhead());
        ggml_context * ctx = ggml_init({ mem.size(), mem.data(), true });
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_embd, n_tokens);
        ggml_set_input(x);
        ggml_tensor * cur = x;
        for (int l = 0; l < n_layer; ++l) {
            ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, cur, 1e-5f), g[l]);
            cur = ggml_add(ctx, cur, ggml_mul_mat(ctx, w[l], h));
        }
        ggml_tensor * out = ggml_mul_mat(ctx, head, ggml_rms_norm(ctx, cur, 1e-5f));
        ggml_set_output(out);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        ggml_backend_sched_t s = ggml_backend_sched_new(bs, n_b, 256);
        EXPECT_TRUE(ggml_backend_sched_alloc_graph(s, gf));
        ggml_backend_tensor_set(x, xin.data(), 0, ggml_nbytes(x));
        EXPECT_EQ(ggml_backend_sched_graph_compute(s, gf), GGML_STATUS_SUCCESS);
        std::vector<float> r(ggml_nelements(out));
        ggml_backend_tensor_get(out, r.data(), 0, ggml_nbytes(out));
        n_splits = ggml_backend_sched_get_n_splits(s);
        n_copies = ggml_backend_sched_get_n_copies(s);
        ggml_backend_sched_free(s);
        ggml_free(ctx);
        return r;
    };
    int splits = 0, copies = 0, splits1 = 0, copies1 = 0;
    const std::vector<float> split = run(backends.data(), 3, splits, copies);
    const std::vector<float> one = run(&backends[2], 1, splits1, copies1);   // the host CPU reads every host buffer
    EXPECT_EQ(splits, 3);
    EXPECT_EQ(copies, 2);
    EXPECT_EQ(splits1, 1);
    EXPECT_EQ(copies1, 0);
    ASSERT_EQ(split.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(split[i], one[i], 1e-5f * (1 + std::fabs(one[i])));
    for (auto * b : backends) ggml_backend_free(b);
    for (int d = 0; d < 2; ++d) ggml_backend_buffer_free(wbuf[d]);
    for (auto & c : wctx) ggml_free(c);
}

// -ts 1,2,3,1 over stories260K's 5 layers: cumulative shares 1/7, 3/7, 6/7, 1 against the
// layers' midpoints 0.1, 0.3, 0.5, 0.7, 0.9 give CPU0, CPU1, CPU2, CPU2, CPU3; each layer's KV
// cache lives with it; the embeddings and the head on -mg.
TEST(LayerSplit, WeightsAndCacheGoWhereTheSharesSay) {
    auto devs = first_devices(4);
    const float ts[16] = { 1, 2, 3, 1 };
    llama_model_params mp = llama_model_default_params();
    mp.devices = devs.data();
    mp.tensor_split = ts;
    mp.main_gpu = 3;
    kiln_test::model_ptr model(llama_model_load_from_file(kiln_test::shared_path("models/stories260K.gguf").c_str(), mp));
    ASSERT_TRUE(model) << llama_last_error();
    const int expect[5] = { 0, 1, 2, 2, 3 };
    auto dev_buft = [&](int d) { return ggml_backend_dev_buffer_type(devs[d]); };
    for (int il = 0; il < 5; ++il) {
        for (ggml_tensor * t : { model->layers[il].wq, model->layers[il].ffn_down, model->layers[il].attn_norm }) {
            EXPECT_EQ(ggml_backend_buffer_get_type(t->buffer), dev_buft(expect[il])) << t->name;
        }
    }
    EXPECT_EQ(ggml_backend_buffer_get_type(model->tok_embd->buffer), dev_buft(3));
    EXPECT_EQ(ggml_backend_buffer_get_type(model->output_norm->buffer), dev_buft(3));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = cp.n_threads_batch = 2;
    kiln_test::context_ptr ctx(llama_init_from_model(model.get(), cp));
    ASSERT_TRUE(ctx) << llama_last_error();
    for (int il = 0; il < 5; ++il) {
        EXPECT_EQ(ggml_backend_buffer_get_type(ctx->kv.k_l[il]->buffer), dev_buft(expect[il]));
        EXPECT_EQ(ggml_backend_buffer_get_type(ctx->kv.v_l[il]->buffer), dev_buft(expect[il]));
    }
}

// -ngl counts from the last layer, the head being one more; -ot wins over the layer plan.
TEST(LayerSplit, GpuLayersAndOverrides) {
    auto devs = first_devices(2);
    const llama_model_tensor_buft_override ov[] = { { "blk\\.4\\.ffn", ggml_backend_dev_buffer_type(devs[0]) }, { nullptr, nullptr } };
    llama_model_params mp = llama_model_default_params();
    mp.devices = devs.data();
    mp.n_gpu_layers = 3;   // the head, layers 4 and 3
    mp.tensor_buft_overrides = ov;
    kiln_test::model_ptr model(llama_model_load_from_file(kiln_test::shared_path("models/stories260K.gguf").c_str(), mp));
    ASSERT_TRUE(model) << llama_last_error();
    for (int il = 0; il < 3; ++il) EXPECT_EQ(ggml_backend_buffer_get_type(model->layers[il].wq->buffer), ggml_backend_cpu_buffer_type());
    EXPECT_EQ(ggml_backend_buffer_get_type(model->layers[3].wq->buffer), ggml_backend_dev_buffer_type(devs[0]));
    EXPECT_EQ(ggml_backend_buffer_get_type(model->layers[4].wq->buffer), ggml_backend_dev_buffer_type(devs[1]));
    EXPECT_EQ(ggml_backend_buffer_get_type(model->layers[4].ffn_up->buffer), ggml_backend_dev_buffer_type(devs[0]));
    EXPECT_EQ(ggml_backend_buffer_get_type(model->output_norm->buffer), ggml_backend_dev_buffer_type(devs[0]));
    mp.n_gpu_layers = 0;   // nothing
    kiln_test::model_ptr none(llama_model_load_from_file(kiln_test::shared_path("models/stories260K.gguf").c_str(), mp));
    ASSERT_TRUE(none) << llama_last_error();
    EXPECT_EQ(ggml_backend_buffer_get_type(none->output_norm->buffer), ggml_backend_cpu_buffer_type());
    EXPECT_EQ(ggml_backend_buffer_get_type(none->layers[4].wq->buffer), ggml_backend_cpu_buffer_type());
}

TEST(LayerSplit, ImpossibleRequestsAreErrors) {
    auto devs = first_devices(2);
    const std::string path = kiln_test::shared_path("models/stories260K.gguf");
    auto fails_with = [&](llama_model_params mp, const std::string & what) {
        llama_model * m = llama_model_load_from_file(path.c_str(), mp);
        EXPECT_EQ(m, nullptr);
        if (m) llama_model_free(m);
        EXPECT_NE(std::string(llama_last_error()).find(what), std::string::npos) << llama_last_error();
    };
    llama_model_params mp = llama_model_default_params();
    mp.devices = devs.data();
    mp.main_gpu = 2;
    fails_with(mp, "-mg");
    mp.main_gpu = 0;
    mp.split_mode = LLAMA_SPLIT_MODE_ROW;
    fails_with(mp, "'row'");
    mp.split_mode = LLAMA_SPLIT_MODE_LAYER;
    const llama_model_tensor_buft_override ov[] = { { "ffn", ggml_backend_dev_buffer_type(ggml_backend_dev_get(3)) }, { nullptr, nullptr } };
    mp.tensor_buft_overrides = ov;
    fails_with(mp, "CPU3 is not one of the devices in use");
}

struct split_case {
    const char * model;
    int n_dev;
    float ts[4];
    int main_gpu;
};

class SplitGolden : public ::testing::TestWithParam<std::tuple<const char *, int, bool>> {};

// Every architecture on 2, 3 and 4 devices with uneven shares, whole-chunk and one-token
// batches: the logits equal the single-device run's (KLD per position, mean and worst).
TEST_P(SplitGolden, LayerModeMatchesOneDevice) {
    const auto [model, n_dev, batch1] = GetParam();
    kiln_test::kld_base base;
    ASSERT_TRUE(kiln_test::load_golden_base(std::string(model), base));
    const std::string path = kiln_test::model_path(std::string(model) + ".gguf");
    kiln_test::golden_config cfg;
    cfg.max_chunks = 1;
    cfg.keep_logits = true;
    cfg.n_ubatch = batch1 ? 1 : 0;
    cfg.n_gpu_layers = 0;   // the reference: no device
    const kiln_test::golden_result one = run_golden(path, base, cfg);
    ASSERT_TRUE(one.ok);

    const float shares[3][4] = { { 1, 3 }, { 2, 1, 1 }, { 1, 2, 3, 1 } };
    auto devs = first_devices(n_dev);
    cfg.devices = devs.data();
    cfg.n_gpu_layers = -1;
    cfg.tensor_split = shares[n_dev - 2];
    cfg.main_gpu = n_dev - 1;
    const kiln_test::golden_result split = run_golden(path, base, cfg);
    ASSERT_TRUE(split.ok);
    ASSERT_EQ(split.logits.size(), one.logits.size());
    const int n_vocab = base.n_vocab;
    const size_t n_pos = one.logits.size() / n_vocab;
    double sum = 0, worst = 0;
    bool top = false;
    for (size_t p = 0; p < n_pos; ++p) {
        const std::vector<double> ref = log_probs(one.logits.data() + p * n_vocab, n_vocab);
        const double k = kiln_test::kld_against(ref, split.logits.data() + p * n_vocab, n_vocab, top);
        sum += k;
        worst = std::max(worst, k);
    }
    std::printf("%s on %d devices%s: KLD to one device mean %.3g, worst %.3g; to the reference %.3g (one device %.3g)\n",
                model, n_dev, batch1 ? ", batch 1" : "", sum / n_pos, worst, split.mean_kld, one.mean_kld);
    EXPECT_LE(sum / n_pos, 1e-3);
    EXPECT_LE(worst, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Models, SplitGolden,
                         ::testing::Combine(::testing::Values("stories260K", "synth-qwen3-f16", "synth-qwen3moe-f16",
                                                              "synth-deepseek2-f16", "synth-qwen35-f16", "synth-qwen35moe-f16",
                                                              "synth-gemma3-f16", "synth-gpt-oss-f16", "synth-glm4moe-f16"),
                                            ::testing::Values(2, 3, 4), ::testing::Bool()));

} // namespace
