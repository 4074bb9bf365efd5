// Placement reaches any device a provider registers, not only the built-in ones. This process
// registers a fake accelerator, "FAKE0", before the registry is first read: its memory is its own
// buffer type that the host CPU backend does not read directly (as a GPU's), and its backend
// runs graphs with the CPU kernels. Through the same paths a tool takes (the flag table,
// common_model_params_to_llama, model loading, the scheduler) -ngl and -ot put layers and tensors
// on it, with the logits of the all-CPU run. Without any device, the flags warn once each and
// the model runs on the CPU.
#include "arg.h"
#include "common.h"
#include "llama-context.h"
#include "llama-model-placement.h"
#include "llama-model.h"
#include "model-handles.h"

#include "cpu-ops.h"
#include "ggml-backend-impl.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

// ---- the fake device

void fake_buffer_free(ggml_backend_buffer_t b) { std::free(b->context); }
const char * fake_buft_name(ggml_backend_buffer_type_t) { return "FAKE0"; }
ggml_backend_buffer_t fake_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    void * mem = std::aligned_alloc(64, ggml_pad(std::max<size_t>(size, 1), 64));
    return mem ? ggml_backend_host_buffer_init(buft, mem, size, fake_buffer_free) : nullptr;
}
size_t fake_buft_alignment(ggml_backend_buffer_type_t) { return 64; }
bool fake_buft_is_host(ggml_backend_buffer_type_t) { return false; }   // device memory, as far as anyone knows
ggml_backend_buffer_type g_fake_buft = {
    { fake_buft_name, fake_buft_alloc, fake_buft_alignment, nullptr, nullptr, fake_buft_is_host }, nullptr,
};

// its page-locked host memory, as CUDA_Host: host memory of a type of its own
const char * fake_host_name(ggml_backend_buffer_type_t) { return "FAKE0_Host"; }
bool fake_host_is_host(ggml_backend_buffer_type_t) { return true; }
ggml_backend_buffer_type g_fake_host_buft = {
    { fake_host_name, fake_buft_alloc, fake_buft_alignment, nullptr, nullptr, fake_host_is_host }, nullptr,
};

int g_fake_graphs = 0;   // graphs the fake backend ran
const char * fake_name(ggml_backend_t) { return "FAKE0"; }
void fake_free(ggml_backend_t b) { delete b; }
ggml_backend_buffer_type_t fake_default_buft(ggml_backend_t) { return &g_fake_buft; }
ggml_status fake_compute(ggml_backend_t, ggml_cgraph * g) {
    ++g_fake_graphs;
    return ggml_graph_compute_cpu(g, 2);
}
bool g_fake_refuses_conv = false;   // a device without a kernel for ssm_conv
bool fake_supports_op(ggml_backend_t, const ggml_tensor * op) {
    return !(g_fake_refuses_conv && op->op == GGML_OP_SSM_CONV) && ggml_cpu_supports_op(op);
}
bool fake_supports_buft(ggml_backend_t, ggml_backend_buffer_type_t buft) { return buft == &g_fake_buft; }

const char * fake_dev_name(ggml_backend_dev_t) { return "FAKE0"; }
const char * fake_dev_description(ggml_backend_dev_t) { return "fake accelerator"; }
void fake_dev_memory(ggml_backend_dev_t, size_t * free, size_t * total) { *free = *total = (size_t) 1 << 30; }
ggml_backend_buffer_type_t fake_dev_buft(ggml_backend_dev_t) { return &g_fake_buft; }
ggml_backend_t fake_dev_init(ggml_backend_dev_t) {
    return new ggml_backend{ { fake_name, fake_free, fake_default_buft, fake_compute, fake_supports_op, fake_supports_buft, nullptr, nullptr, nullptr },
                             nullptr };
}
ggml_backend_buffer_type_t fake_dev_host_buft(ggml_backend_dev_t) { return &g_fake_host_buft; }
ggml_backend_device g_fake_dev = { { fake_dev_name, fake_dev_description, fake_dev_memory, fake_dev_buft, fake_dev_init, fake_dev_host_buft },
                                   nullptr };

// registered before anything reads the device list (the providers add theirs after it)
const int k_registered = (unsetenv("KILN_VIRTUAL_CPU_DEVICES"), ggml_backend_device_register(&g_fake_dev), 0);

// the last token's logits of a 6-token prompt on stories260K, placed by these flags
std::vector<float> run_with_flags(const std::vector<std::string> & flags, llama_model ** keep = nullptr,
                                  const char * model_file = "models/stories260K.gguf") {
    common_params p;
    const common_parse_result r = common_params_parse_args(flags, p, COMMON_TOOL_CLI);
    EXPECT_EQ(r.status, common_parse_result::ok) << r.message;
    EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
    llama_model_params mp;
    std::string err;
    EXPECT_TRUE(common_model_params_to_llama(p, mp, err)) << err;
    llama_model * model = llama_model_load_from_file(kiln_test::shared_path(model_file).c_str(), mp);
    EXPECT_NE(model, nullptr) << llama_last_error();
    if (!model) return {};
    kiln_test::context_ptr ctx = kiln_test::small_context(model, 32);
    EXPECT_TRUE(ctx) << llama_last_error();
    std::vector<float> out;
    if (ctx && kiln_test::decode_tokens(ctx.get(), { 1, 400, 30, 72, 15, 99 }, 0, 6, 0) == 0) {
        const float * l = llama_get_logits_ith(ctx.get(), 5);
        out.assign(l, l + llama_vocab_n_tokens(llama_model_get_vocab(model)));
    }
    ctx.reset();
    if (keep) *keep = model; else llama_model_free(model);
    return out;
}

ggml_backend_buffer_type_t buft_of(const ggml_tensor * t) { return ggml_backend_buffer_get_type(t->buffer); }

TEST(DeviceRegistry, ARegisteredDeviceIsListedAndNamed) {
    ASSERT_EQ(k_registered, 0);
    ASSERT_GE(ggml_backend_dev_count(), 1u);
    EXPECT_EQ(ggml_backend_dev_get(0), &g_fake_dev);
    EXPECT_EQ(ggml_backend_dev_by_name("fake0"), &g_fake_dev);
    EXPECT_EQ(ggml_backend_buft_get_device(&g_fake_buft), &g_fake_dev);
    EXPECT_TRUE(llama_supports_gpu_offload());
    common_params p;
    const common_parse_result r = common_params_parse_args({ "--list-devices" }, p, COMMON_TOOL_CLI);
    EXPECT_NE(r.message.find("  FAKE0: fake accelerator"), std::string::npos) << r.message;
}

// -ngl 2: the head and the last layer (4) on FAKE0; -ot moves one more tensor there and keeps one
// of layer 4's on the CPU. The scheduler runs FAKE0's part on its backend, and the logits are the
// all-CPU run's.
TEST(DeviceRegistry, NglAndOverridesPlaceOnTheRegisteredDevice) {
    const std::vector<float> cpu = run_with_flags({ "-ngl", "0" });
    llama_model * model = nullptr;
    g_fake_graphs = 0;
    const std::vector<float> fake =
        run_with_flags({ "-ngl", "2", "-ot", "blk\\.0\\.ffn_up=FAKE0", "-ot", "blk\\.4\\.ffn_down=CPU" }, &model);
    ASSERT_NE(model, nullptr);
    kiln_test::model_ptr hold(model);
    EXPECT_GT(g_fake_graphs, 0) << "FAKE0's backend ran nothing";
    for (int il = 0; il < 4; ++il) EXPECT_EQ(buft_of(model->layers[il].wq), ggml_backend_cpu_buffer_type()) << il;
    EXPECT_EQ(buft_of(model->layers[4].wq), &g_fake_buft);
    EXPECT_EQ(buft_of(model->layers[4].ffn_up), &g_fake_buft);
    EXPECT_EQ(buft_of(model->layers[4].ffn_down), ggml_backend_cpu_buffer_type());
    EXPECT_EQ(buft_of(model->layers[0].ffn_up), &g_fake_buft);
    EXPECT_EQ(buft_of(model->layers[0].ffn_down), ggml_backend_cpu_buffer_type());
    EXPECT_EQ(buft_of(model->output_norm), &g_fake_buft);
    ASSERT_EQ(cpu.size(), fake.size());
    ASSERT_FALSE(cpu.empty());
    EXPECT_LT(kiln_test::logits_rel_diff(fake.data(), cpu.data(), (int) cpu.size()), 1e-5);
}

// an -ot rule naming a device nobody registered is an error naming it and the choices
TEST(DeviceRegistry, UnknownDeviceInAnOverrideIsAnError) {
    common_params p;
    ASSERT_EQ(common_params_parse_args({ "-ot", "ffn=FAKE1" }, p, COMMON_TOOL_CLI).status, common_parse_result::ok);
    llama_model_params mp;
    std::string err;
    EXPECT_FALSE(common_model_params_to_llama(p, mp, err));
    EXPECT_NE(err.find("FAKE1"), std::string::npos) << err;
    EXPECT_NE(err.find("FAKE0"), std::string::npos) << err;
}

// A recurrent op updates its state rows in place, so it runs where they are: on FAKE0 when they
// live there, even where FAKE0 has no kernel for it (then the compute fails, rather than the CPU
// updating a copy and the sequence silently losing its state); on the CPU when they live there.
TEST(DeviceRegistry, InPlaceStateUpdatesRunWhereTheStateIs) {
    ggml_backend_t fake = fake_dev_init(&g_fake_dev), cpu = ggml_backend_cpu_init();
    std::vector<ggml_backend_t> backends = { fake, cpu };
    for (bool state_on_fake : { true, false }) {
        for (bool refuses : { false, true }) {
            g_fake_refuses_conv = refuses;
            ggml_context * wctx = ggml_init({ ggml_tensor_overhead() * 4, nullptr, true });
            ggml_tensor * w = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 4, 8);
            ggml_tensor * state = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 3 * 8, 2);
            ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, state_on_fake ? &g_fake_buft : ggml_backend_cpu_buffer_type());
            ASSERT_NE(buf, nullptr);
            std::vector<char> mem(ggml_tensor_overhead() * 8 + ggml_graph_overhead());
            ggml_context * ctx = ggml_init({ mem.size(), mem.data(), true });
            ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 3);
            ggml_tensor * slots = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3);
            ggml_tensor * y = ggml_ssm_conv(ctx, x, w, state, slots);
            ggml_cgraph * gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, y);
            ggml_backend_sched_t s = ggml_backend_sched_new(backends.data(), 2, 64);
            ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, gf));
            EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, y), state_on_fake ? fake : cpu)
                << "state on " << (state_on_fake ? "FAKE0" : "CPU") << (refuses ? ", FAKE0 without the kernel" : "");
            ggml_backend_sched_free(s);
            ggml_free(ctx);
            ggml_backend_buffer_free(buf);
            ggml_free(wctx);
        }
    }
    g_fake_refuses_conv = false;
    ggml_backend_free(fake);
    ggml_backend_free(cpu);
}

// Weights kept in host memory and read (--no-mmap) go to the device's page-locked host memory, so
// that the hybrid rule's copies run at full speed; mapped ones stay in the mapping. Either way
// the memory report counts them on the host row, and the logits are the same.
TEST(DeviceRegistry, ReadHostWeightsGoToTheDevicesHostMemory) {
    llama_model * mapped = nullptr, * read = nullptr;
    const std::vector<float> a = run_with_flags({ "-ngl", "2" }, &mapped);
    const std::vector<float> b = run_with_flags({ "-ngl", "2", "--no-mmap" }, &read);
    ASSERT_TRUE(mapped && read);
    kiln_test::model_ptr hold_a(mapped), hold_b(read);
    EXPECT_EQ(buft_of(mapped->layers[0].wq), ggml_backend_cpu_buffer_type());
    EXPECT_EQ(buft_of(read->layers[0].wq), &g_fake_host_buft);
    EXPECT_EQ(buft_of(read->layers[4].wq), &g_fake_buft);
    const std::vector<llama_place_summary> rows = llama_place_summaries(*read);
    ASSERT_EQ(rows.size(), 2u);
    size_t host = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(read->ctx); t; t = ggml_get_next_tensor(read->ctx, t)) {
        if (buft_of(t) != &g_fake_buft) host += ggml_nbytes(t);
    }
    EXPECT_GT(host, 0u);
    EXPECT_EQ(rows[0].weights, host);
    EXPECT_EQ(rows[0].weights + rows[1].weights, llama_model_size(read));
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LT(kiln_test::logits_rel_diff(b.data(), a.data(), (int) a.size()), 1e-6);
}

// -rtr repacks only the weights in host memory: a device decodes the plain layouts, not the CPU's
// interleaved ones. With -ngl 2 the last layer's q4_K weights stay q4_K on FAKE0, the CPU layers'
// take q4_k_r4 where that pays on this CPU, and the logits are the plain run's.
TEST(DeviceRegistry, RunTimeRepackLeavesDeviceWeightsPlain) {
    llama_model * plain = nullptr, * rtr = nullptr;
    const std::vector<float> a = run_with_flags({ "-ngl", "2" }, &plain, "models/synth-qwen3-Q4_K_M.gguf");
    const std::vector<float> b = run_with_flags({ "-ngl", "2", "-rtr" }, &rtr, "models/synth-qwen3-Q4_K_M.gguf");
    ASSERT_TRUE(plain && rtr);
    kiln_test::model_ptr hold_a(plain), hold_b(rtr);
    const int n_layer = (int) rtr->layers.size();
    ASSERT_GE(n_layer, 2);
    const llama_layer & last = rtr->layers[n_layer - 1];
    ASSERT_EQ(buft_of(last.wq), &g_fake_buft);
    EXPECT_EQ(last.wq->type, plain->layers[n_layer - 1].wq->type);
    ASSERT_EQ(plain->layers[0].wq->type, GGML_TYPE_Q4_K);
    EXPECT_NE(buft_of(rtr->layers[0].wq), &g_fake_buft);
    if (ggml_cpu_repack_pays(GGML_TYPE_Q4_K_R4)) {
        EXPECT_EQ(rtr->layers[0].wq->type, GGML_TYPE_Q4_K_R4);
    }
    for (ggml_tensor * t = ggml_get_first_tensor(rtr->ctx); t; t = ggml_get_next_tensor(rtr->ctx, t)) {
        if (buft_of(t) == &g_fake_buft) {
            EXPECT_EQ(t->type, ggml_get_tensor(plain->ctx, t->name)->type) << t->name;
        }
    }
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LT(kiln_test::logits_rel_diff(b.data(), a.data(), (int) a.size()), 1e-4);
}

} // namespace
