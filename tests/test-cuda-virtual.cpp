// KILN_VIRTUAL_CUDA_DEVICES=3 (set here before the device list is first read): one GPU presented
// as CUDA0, CUDA1, CUDA2, each with its own buffer type, backend and stream, so that a model split
// across GPUs runs on a machine with one. On a GPU: the three are listed with a third of the
// memory each, and a stack of layers spread over them (the scheduler copying the residual stream
// between their buffers at each boundary) gives the host CPU's result, and the hybrid offload rule
// moves prompt-sized products of host weights to the GPU. Without a GPU the checks
// report as skipped with the reason; no device is listed.
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "sched-chain.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

namespace {

const int k_env = (setenv("KILN_VIRTUAL_CUDA_DEVICES", "3", 1), unsetenv("KILN_VIRTUAL_CPU_DEVICES"), 0);

#define REQUIRE_GPU()                                                                                        \
    do {                                                                                                     \
        if (ggml_backend_cuda_get_device_count() == 0) GTEST_SKIP() << "no usable CUDA device on this machine"; \
    } while (0)

TEST(VirtualCuda, WithoutGpuNoDeviceIsListed) {
    ASSERT_EQ(k_env, 0);
    if (ggml_backend_cuda_get_device_count() > 0) GTEST_SKIP() << "a GPU is present (the other tests cover it)";
    EXPECT_EQ(ggml_backend_dev_count(), 0u);
    EXPECT_EQ(ggml_backend_dev_by_name("CUDA0"), nullptr);
}

TEST(VirtualCuda, ThreeDevicesOverOneGpu) {
    REQUIRE_GPU();
    ASSERT_EQ(ggml_backend_cuda_get_device_count(), 3);
    ASSERT_EQ(ggml_backend_dev_count(), 3u);
    size_t total0 = 0;
    for (int i = 0; i < 3; ++i) {
        ggml_backend_dev_t d = ggml_backend_dev_get((size_t) i);
        EXPECT_EQ(std::string(ggml_backend_dev_name(d)), "CUDA" + std::to_string(i));
        const std::string desc = ggml_backend_dev_description(d);
        EXPECT_NE(desc.find("(virtual device " + std::to_string(i + 1) + " of 3)"), std::string::npos) << desc;
        for (int j = 0; j < i; ++j) EXPECT_NE(ggml_backend_dev_buffer_type(d), ggml_backend_dev_buffer_type(ggml_backend_dev_get((size_t) j)));
        size_t free = 0, total = 0;
        ggml_backend_dev_memory(d, &free, &total);
        EXPECT_GT(total, 0u);
        if (i == 0) total0 = total;
        EXPECT_EQ(total, total0);
    }
}

// layers 0-1 on CUDA0, 2 on CUDA1, 3-4 on CUDA2, the head on CUDA0: four splits, three copies of the
// residual stream, and the host CPU's output
TEST(VirtualCuda, LayersSpreadOverTheDevicesGiveTheCpuResult) {
    REQUIRE_GPU();
    ggml_backend_buffer_type_t b[3];
    for (int i = 0; i < 3; ++i) b[i] = ggml_backend_dev_buffer_type(ggml_backend_dev_get((size_t) i));
    const kiln_test::sched_chain chain(67, { b[0], b[0], b[1], b[2], b[2] }, b[0]);
    ASSERT_TRUE(chain.ok());
    std::vector<ggml_backend_t> backends;
    for (int i = 0; i < 3; ++i) backends.push_back(ggml_backend_dev_init(ggml_backend_dev_get((size_t) i)));
    for (ggml_backend_t be : backends) ASSERT_NE(be, nullptr);
    backends.push_back(ggml_backend_cpu_init());
    const auto gpu = chain.run(backends, 9);
    EXPECT_EQ(gpu.n_splits, 4);
    EXPECT_EQ(gpu.n_copies, 3);

    // the same weights read by the host CPU alone
    ggml_backend_buffer_type_t cpu = ggml_backend_cpu_buffer_type();
    const kiln_test::sched_chain host(67, { cpu, cpu, cpu, cpu, cpu }, cpu);
    const auto ref = host.run({ backends[3] }, 9);
    ASSERT_EQ(gpu.out.size(), ref.out.size());
    ASSERT_FALSE(ref.out.empty());
    for (size_t i = 0; i < ref.out.size(); ++i) EXPECT_NEAR(gpu.out[i], ref.out[i], 1e-3f * (1 + std::fabs(ref.out[i]))) << i;
    for (ggml_backend_t be : backends) ggml_backend_free(be);
}

// The hybrid offload rule with a real GPU: weights in host memory, CUDA0 as the offload backend.
// A 64-token batch computes every product on CUDA0 (the weights copied over), a 1-token batch on
// the host CPU; both give the host CPU's result.
TEST(VirtualCuda, HostWeightProductsOfPromptBatchesRunOnTheGpu) {
    REQUIRE_GPU();
    ggml_backend_buffer_type_t host = ggml_backend_cpu_buffer_type();
    const kiln_test::sched_chain chain(67, { host, host, host }, host);
    ASSERT_TRUE(chain.ok());
    ggml_backend_t gpu = ggml_backend_dev_init(ggml_backend_dev_get(0)), cpu = ggml_backend_cpu_init();
    ASSERT_NE(gpu, nullptr);
    for (int n_tokens : { 64, 1 }) {
        std::vector<ggml_backend_t> at;
        const auto on = chain.run({ gpu, cpu }, n_tokens, [&](ggml_backend_sched_t s, const std::vector<ggml_tensor *> & mm, ggml_tensor * head) {
            for (ggml_tensor * t : mm) at.push_back(ggml_backend_sched_get_tensor_backend(s, t));
            at.push_back(ggml_backend_sched_get_tensor_backend(s, head));
        }, [&](ggml_backend_sched_t s) { ggml_backend_sched_set_offload(s, gpu, 32); });
        const auto ref = chain.run({ cpu }, n_tokens);
        ASSERT_EQ(at.size(), 4u);
        for (ggml_backend_t b : at) EXPECT_EQ(b, n_tokens >= 32 ? gpu : cpu) << n_tokens << " tokens";
        ASSERT_EQ(on.out.size(), ref.out.size());
        ASSERT_FALSE(ref.out.empty());
        for (size_t i = 0; i < ref.out.size(); ++i) EXPECT_NEAR(on.out[i], ref.out[i], 1e-3f * (1 + std::fabs(ref.out[i]))) << i;
    }
    ggml_backend_free(gpu);
    ggml_backend_free(cpu);
}

} // namespace
