// The CUDA entry points (ggml-cuda.h) on whatever machine runs the suite:
//   - without a GPU (CI, and any build without KILN_CUDA): zero devices, one log line saying why
//     and that the CPU is used, no backend or buffer type, device names refused;
//   - with a GPU: names, descriptions and memory of every device, and an allocation larger than
//     the device refused with a message naming the device, the size asked and the memory free
//     (not a CUDA abort);
//   - asynchronous copies and events: refused for other backends everywhere; on a GPU, a copy
//     chain across two streams ordered by events arrives intact.
// Each TEST runs in its own process under CTest, so the one-time enumeration logs in each.
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

std::string g_log;

void capture(ggml_log_level, const char * text, void *) { g_log += text; }

struct log_capture {
    log_capture() {
        g_log.clear();
        ggml_log_set(capture, nullptr);
    }
    ~log_capture() { ggml_log_set(nullptr, nullptr); }
};

TEST(CudaDevices, EnumerationSaysWhereModelsRun) {
    log_capture cap;
    const int n = ggml_backend_cuda_get_device_count();
    if (!ggml_cuda_compiled()) {
        EXPECT_EQ(n, 0);
        EXPECT_EQ(ggml_backend_cuda_init(0), nullptr);
        EXPECT_NE(g_log.find("no CUDA backend"), std::string::npos) << g_log;
        return;
    }
    if (n == 0) {
        // exactly one line, naming the fallback
        EXPECT_NE(g_log.find("running on the CPU"), std::string::npos) << g_log;
        EXPECT_EQ(g_log.find('\n'), g_log.size() - 1) << g_log;
        ggml_backend_cuda_get_device_count();
        EXPECT_EQ(g_log.find("running on the CPU", g_log.find("running on the CPU") + 1), std::string::npos)
            << "the fallback is logged once: " << g_log;
    } else {
        EXPECT_NE(g_log.find("CUDA0: "), std::string::npos) << g_log;
    }
}

TEST(CudaDevices, NoDeviceMeansNoBackend) {
    const int n = ggml_backend_cuda_get_device_count();
    EXPECT_EQ(ggml_backend_cuda_buffer_type(n), nullptr);
    EXPECT_EQ(ggml_backend_cuda_buffer_type(-1), nullptr);
    log_capture cap;
    EXPECT_EQ(ggml_backend_cuda_init(n), nullptr);
    EXPECT_NE(g_log.find("CUDA" + std::to_string(n)), std::string::npos) << g_log;
    if (n == 0) {
        EXPECT_EQ(ggml_backend_cuda_host_buffer_type(), nullptr);
    }
    char desc[64] = "x";
    ggml_backend_cuda_get_device_description(n, desc, sizeof(desc));
    EXPECT_STREQ(desc, "");
    size_t free = 1, total = 1;
    ggml_backend_cuda_get_device_memory(n, &free, &total);
    EXPECT_EQ(free, 0u);
    EXPECT_EQ(total, 0u);
}

// Every usable GPU is a device of the registry, first in its list, named CUDA<i>, with the CUDA
// buffer type and backend of that index: what -dev, -ot REGEX=CUDA0, -ngl and --list-devices use.
// Without a GPU there are none, and names of the form are unknown.
TEST(CudaDevices, RegisteredInTheDeviceRegistry) {
    const int n = ggml_backend_cuda_get_device_count();
    ASSERT_GE(ggml_backend_dev_count(), (size_t) n);
    for (int i = 0; i < n; ++i) {
        ggml_backend_dev_t d = ggml_backend_dev_get((size_t) i);
        EXPECT_EQ(std::string(ggml_backend_dev_name(d)), "CUDA" + std::to_string(i));
        EXPECT_EQ(ggml_backend_dev_by_name(("cuda" + std::to_string(i)).c_str()), d);
        EXPECT_EQ(ggml_backend_dev_buffer_type(d), ggml_backend_cuda_buffer_type(i));
        EXPECT_EQ(ggml_backend_buft_get_device(ggml_backend_cuda_buffer_type(i)), d);
        char desc[256];
        ggml_backend_cuda_get_device_description(i, desc, sizeof(desc));
        EXPECT_EQ(std::string(ggml_backend_dev_description(d)), desc);
        ggml_backend_t be = ggml_backend_dev_init(d);
        ASSERT_NE(be, nullptr);
        EXPECT_TRUE(ggml_backend_is_cuda(be));
        EXPECT_EQ(ggml_backend_get_default_buffer_type(be), ggml_backend_cuda_buffer_type(i));
        ggml_backend_free(be);
    }
    for (const char * bad : { "CUDA", "CUDA-1", "CUDAx", "CUDA0x", "CUDA123" }) EXPECT_EQ(ggml_backend_dev_by_name(bad), nullptr) << bad;
    EXPECT_EQ(ggml_backend_dev_by_name(("CUDA" + std::to_string(n)).c_str()), nullptr);
}

// the GPU-only checks: not run (and listed so by CTest) without a device
#define REQUIRE_GPU(n)                                             \
    do {                                                           \
        if ((n) == 0) {                                            \
            GTEST_SKIP() << "no CUDA device on this machine";      \
        }                                                          \
    } while (0)

TEST(CudaDevices, EveryDeviceDescribesItself) {
    const int n = ggml_backend_cuda_get_device_count();
    REQUIRE_GPU(n);
    for (int i = 0; i < n; ++i) {
        char desc[128] = "";
        ggml_backend_cuda_get_device_description(i, desc, sizeof(desc));
        EXPECT_GT(std::string(desc).size(), 0u) << i;
        size_t free = 0, total = 0;
        ggml_backend_cuda_get_device_memory(i, &free, &total);
        EXPECT_GT(total, 0u);
        EXPECT_LE(free, total);
        ggml_backend_buffer_type_t buft = ggml_backend_cuda_buffer_type(i);
        ASSERT_NE(buft, nullptr);
        EXPECT_EQ(std::string(ggml_backend_buft_name(buft)), "CUDA" + std::to_string(i));
        EXPECT_FALSE(ggml_backend_buft_is_host(buft));
        ggml_backend_t be = ggml_backend_cuda_init(i);
        ASSERT_NE(be, nullptr);
        EXPECT_TRUE(ggml_backend_is_cuda(be));
        EXPECT_EQ(ggml_backend_get_default_buffer_type(be), buft);
        ggml_backend_free(be);
    }
}

TEST(CudaDevices, TooLargeAllocationIsAClearError) {
    const int n = ggml_backend_cuda_get_device_count();
    REQUIRE_GPU(n);
    for (int i = 0; i < n; ++i) {
        size_t free = 0, total = 0;
        ggml_backend_cuda_get_device_memory(i, &free, &total);
        log_capture cap;
        const size_t asked = total + (size_t(64) << 30);
        ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(ggml_backend_cuda_buffer_type(i), asked);
        EXPECT_EQ(buf, nullptr);
        if (buf) ggml_backend_buffer_free(buf);
        const std::string name = "CUDA" + std::to_string(i) + ": not enough device memory";
        EXPECT_NE(g_log.find(name), std::string::npos) << g_log;
        EXPECT_NE(g_log.find("asked"), std::string::npos) << g_log;
        EXPECT_NE(g_log.find("free of"), std::string::npos) << g_log;
        // the device still works afterwards
        ggml_backend_buffer_t small = ggml_backend_buft_alloc_buffer(ggml_backend_cuda_buffer_type(i), 1 << 20);
        EXPECT_NE(small, nullptr);
        ggml_backend_buffer_free(small);
    }
}

TEST(CudaDevices, PinnedHostBuffersAreHostMemory) {
    if (ggml_backend_cuda_get_device_count() == 0) {
        EXPECT_EQ(ggml_backend_cuda_host_buffer_type(), nullptr);
        return;
    }
    ggml_backend_buffer_type_t host = ggml_backend_cuda_host_buffer_type();
    ASSERT_NE(host, nullptr);
    EXPECT_TRUE(ggml_backend_buft_is_host(host));
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(host, 4096);
    ASSERT_NE(buf, nullptr);
    ggml_backend_buffer_clear(buf, 0x5a);
    EXPECT_EQ(((unsigned char *) ggml_backend_buffer_get_base(buf))[4095], 0x5a);
    ggml_backend_buffer_free(buf);
}

} // namespace

namespace {

TEST(CudaAsync, OtherBackendsAreRefused) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_context * ctx = ggml_init({ 1 << 16, nullptr, false });
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    std::vector<float> host(16, 1.0f);
    log_capture cap;
    EXPECT_FALSE(ggml_backend_cuda_tensor_set_async(cpu, t, host.data(), 0, 64));
    EXPECT_FALSE(ggml_backend_cuda_tensor_get_async(cpu, t, host.data(), 0, 64));
    EXPECT_FALSE(ggml_backend_cuda_tensor_copy_async(cpu, cpu, t, t));
    EXPECT_EQ(ggml_backend_cuda_event_new(cpu), nullptr);
    if (ggml_cuda_compiled()) {
        EXPECT_NE(g_log.find("not a CUDA backend"), std::string::npos) << g_log;
    }
    ggml_backend_cuda_event_free(nullptr);   // harmless
    ggml_free(ctx);
    ggml_backend_free(cpu);
}

TEST(CudaAsync, CopiesAndEventsOrderTwoStreams) {
    REQUIRE_GPU(ggml_backend_cuda_get_device_count());
    ggml_backend_t be0 = ggml_backend_cuda_init(0), be1 = ggml_backend_cuda_init(0);
    ASSERT_TRUE(be0 && be1);
    const int64_t n = 1 << 20;
    ggml_context * ctx = ggml_init({ 4 * ggml_tensor_overhead(), nullptr, true });
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_backend_buffer_t dev = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cuda_buffer_type(0));
    ASSERT_NE(dev, nullptr);
    ggml_backend_buffer_t pinned = ggml_backend_buft_alloc_buffer(ggml_backend_cuda_host_buffer_type(), 2 * n * sizeof(float));
    ASSERT_NE(pinned, nullptr);
    float * src = (float *) ggml_backend_buffer_get_base(pinned);
    float * dst = src + n;
    for (int64_t i = 0; i < n; ++i) {
        src[i] = (float) i * 0.5f;
        dst[i] = -1.0f;
    }
    // host -> a on stream 0, a -> b ordered after it, b -> host on stream 1
    ASSERT_TRUE(ggml_backend_cuda_tensor_set_async(be0, a, src, 0, n * sizeof(float)));
    ASSERT_TRUE(ggml_backend_cuda_tensor_copy_async(be0, be1, a, b));
    ASSERT_TRUE(ggml_backend_cuda_tensor_get_async(be1, b, dst, 0, n * sizeof(float)));
    ggml_cuda_event_t ev = ggml_backend_cuda_event_new(be1);
    ASSERT_NE(ev, nullptr);
    ggml_backend_cuda_event_record(ev, be1);
    ggml_backend_cuda_event_synchronize(ev);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += dst[i] != src[i];
    EXPECT_EQ(wrong, 0);
    // out of range, and a tensor of another buffer, are refused
    {
        log_capture cap;
        EXPECT_FALSE(ggml_backend_cuda_tensor_set_async(be0, a, src, 8, n * sizeof(float)));
        EXPECT_NE(g_log.find("outside"), std::string::npos) << g_log;
    }
    ggml_backend_cuda_event_free(ev);
    ggml_backend_buffer_free(pinned);
    ggml_backend_buffer_free(dev);
    ggml_free(ctx);
    ggml_backend_free(be1);
    ggml_backend_free(be0);
}

} // namespace
