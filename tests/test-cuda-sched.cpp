// The scheduler's asynchronous copies on GPUs (compiled, not run here: without a GPU every test
// reports as skipped). KILN_VIRTUAL_CUDA_DEVICES=2 (set before the device list is first read)
// gives two CUDA devices over one GPU, each with its own compute and copy streams. The graphs of
// sched-cross.h (the same that test-sched-copy-plan runs with fake queueing backends) then cross
// devices through strided views (a row slice: one cudaMemcpy2DAsync; transposes: one per row of
// the source), copy device results to the host (device to host on the source's copy stream),
// and copy a host weight (pageable, then page-locked CUDA_Host) into memory a queued split still
// uses (the copy stream must wait for it). Each result equals the host CPU's alone, twice over
// (the second run reuses the plan and memory).
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "sched-cross.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

namespace {

const int k_env = (setenv("KILN_VIRTUAL_CUDA_DEVICES", "2", 1), unsetenv("KILN_VIRTUAL_CPU_DEVICES"), 0);

#define REQUIRE_GPUS()                                                                                       \
    do {                                                                                                     \
        ASSERT_EQ(k_env, 0);                                                                                 \
        if (ggml_backend_cuda_get_device_count() < 2) GTEST_SKIP() << "no usable CUDA device on this machine"; \
    } while (0)

void expect_same(const std::vector<float> & got, const std::vector<float> & want) {
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << "at " << i;
}

struct gpus {
    ggml_backend_t a = ggml_backend_cuda_init(0), b = ggml_backend_cuda_init(1), cpu = ggml_backend_cpu_init();
    ~gpus() {
        ggml_backend_free(a);
        ggml_backend_free(b);
        ggml_backend_free(cpu);
    }
};

TEST(CudaSched, StridedViewsCrossDevicesAndComeBackToTheHost) {
    REQUIRE_GPUS();
    gpus g;
    ASSERT_TRUE(g.a && g.b);
    for (ggml_backend_buffer_type_t head : { ggml_backend_cpu_buffer_type(), ggml_backend_cuda_buffer_type(0) }) {
        SCOPED_TRACE(ggml_backend_buft_name(head));
        const kiln_test::cross_graph c(ggml_backend_cuda_buffer_type(0), ggml_backend_cuda_buffer_type(1), head);
        int n_copies = 0;
        const auto split = c.run({ g.a, g.b, g.cpu }, &n_copies);
        // the slice and z^T; u^T too when the head is the host's (device to host)
        EXPECT_EQ(n_copies, head == ggml_backend_cpu_buffer_type() ? 3 : 2);
        expect_same(split, c.run({ g.cpu }));
    }
}

TEST(CudaSched, HostWeightCopiedIntoMemoryOfAQueuedSplit) {
    REQUIRE_GPUS();
    gpus g;
    ASSERT_TRUE(g.a && g.b);
    for (ggml_backend_buffer_type_t host : { ggml_backend_cpu_buffer_type(), ggml_backend_cuda_host_buffer_type() }) {
        SCOPED_TRACE(ggml_backend_buft_name(host));
        kiln_test::cross_graph c(ggml_backend_cuda_buffer_type(0), ggml_backend_cuda_buffer_type(1), host);
        const auto build = c.queued_split_graph(ggml_backend_cuda_buffer_type(0), ggml_backend_cuda_buffer_type(1), host);
        int n_copies = 0;
        auto offload = [&](ggml_backend_sched_t s) { ggml_backend_sched_set_offload(s, g.a, 1); };
        const auto split = c.run_graph({ g.a, g.b, g.cpu }, &n_copies, offload, build);
        EXPECT_EQ(n_copies, 2);   // the host weight and v into CUDA0
        expect_same(split, c.run_graph({ g.cpu }, nullptr, nullptr, build));
    }
}

} // namespace
