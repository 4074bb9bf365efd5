// The all-reduce across GPUs (ggml_backend_cuda_all_reduce, ggml/src/cuda/cuda-nccl.cpp) against a
// double-precision sum on the host: every device's tensor becomes the sum of all, for f32, f16 and
// bf16, on an awkward element count. Needs a build with NCCL and two GPUs or more (skipped with
// the reason otherwise). The refusals (CPU backends, two backends on one GPU) run wherever their
// backends exist: the caller must then get false and its tensors untouched. -sm graph's use of it:
// ggml_all_reduce's node run by the scheduler over the GPUs, no part copied, every GPU's part the sum.
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int64_t k_n = 3 * 4099 + 5;   // not a multiple of any chunk or vector width

struct placed {
    ggml_context * ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ggml_tensor * t = nullptr;
    ~placed() {
        ggml_backend_buffer_free(buf);
        if (ctx) ggml_free(ctx);
    }
};

// a tensor of k_n values of `type` in backend's memory, holding `vals` rounded to the type
void place(placed & p, ggml_backend_t backend, ggml_type type, const std::vector<float> & vals) {
    p.ctx = ggml_init({ ggml_tensor_overhead() * 2, nullptr, true });
    p.t = ggml_new_tensor_1d(p.ctx, type, k_n);
    p.buf = ggml_backend_alloc_ctx_tensors(p.ctx, backend);
    ASSERT_NE(p.buf, nullptr);
    std::vector<uint8_t> bytes(ggml_nbytes(p.t));
    if (type == GGML_TYPE_F32) std::memcpy(bytes.data(), vals.data(), bytes.size());
    if (type == GGML_TYPE_F16) ggml_fp32_to_fp16_row(vals.data(), (ggml_fp16_t *) bytes.data(), k_n);
    if (type == GGML_TYPE_BF16) ggml_fp32_to_bf16_row(vals.data(), (ggml_bf16_t *) bytes.data(), k_n);
    ggml_backend_tensor_set(p.t, bytes.data(), 0, bytes.size());
}

// k_n values of t's type, as f32
std::vector<float> read_tensor(const ggml_tensor * t) {
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
    std::vector<float> out((size_t) k_n);
    if (t->type == GGML_TYPE_F32) std::memcpy(out.data(), bytes.data(), bytes.size());
    if (t->type == GGML_TYPE_F16) ggml_fp16_to_fp32_row((const ggml_fp16_t *) bytes.data(), out.data(), k_n);
    if (t->type == GGML_TYPE_BF16) ggml_bf16_to_fp32_row((const ggml_bf16_t *) bytes.data(), out.data(), k_n);
    return out;
}

std::vector<float> read(const placed & p) { return read_tensor(p.t); }

// the values as the type holds them (what each device starts from)
std::vector<float> rounded(ggml_type type, std::vector<float> v) {
    for (float & x : v) {
        if (type == GGML_TYPE_F16) x = ggml_fp16_to_fp32(ggml_fp32_to_fp16(x));
        if (type == GGML_TYPE_BF16) x = ggml_bf16_to_fp32(ggml_fp32_to_bf16(x));
    }
    return v;
}

std::vector<float> random_values(uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-4.0f, 4.0f);
    std::vector<float> v((size_t) k_n);
    for (float & x : v) x = d(rng);
    return v;
}

// Refused: false, and the tensors keep their values.
void expect_refused(std::vector<ggml_backend_t> backends) {
    const int n = (int) backends.size();
    std::vector<placed> ps((size_t) n);
    std::vector<std::vector<float>> vals;
    std::vector<ggml_tensor *> ts;
    for (int i = 0; i < n; ++i) {
        vals.push_back(random_values(100 + i));
        place(ps[(size_t) i], backends[(size_t) i], GGML_TYPE_F32, vals.back());
        ts.push_back(ps[(size_t) i].t);
    }
    EXPECT_FALSE(ggml_backend_cuda_all_reduce(backends.data(), ts.data(), n));
    for (int i = 0; i < n; ++i) {
        ggml_backend_synchronize(backends[(size_t) i]);
        EXPECT_EQ(read(ps[(size_t) i]), vals[(size_t) i]) << "participant " << i << " was changed";
    }
}

} // namespace

TEST(CudaNccl, CpuBackendsAreRefused) {
    ggml_backend_t a = ggml_backend_cpu_init(), b = ggml_backend_cpu_init();
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    expect_refused({ a, b });
    ggml_backend_free(a);
    ggml_backend_free(b);
}

TEST(CudaNccl, TwoBackendsOnOneGpuAreRefused) {
    if (ggml_backend_cuda_get_device_count() == 0) {
        GTEST_SKIP() << (ggml_cuda_compiled() ? "no usable CUDA device on this machine (see the log line above)"
                                              : "this build has no CUDA backend (KILN_CUDA=OFF)");
    }
    ggml_backend_t a = ggml_backend_cuda_init(0), b = ggml_backend_cuda_init(0);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    expect_refused({ a, b });
    // and -sm graph is told so before it builds a graph (it gathers instead)
    ggml_backend_t both[2] = { a, b };
    EXPECT_FALSE(ggml_backend_all_reduce_supported(both, 2));
    ggml_backend_free(a);
    ggml_backend_free(b);
}

TEST(CudaNccl, SumOnEveryGpu) {
    if (!ggml_cuda_nccl_compiled()) GTEST_SKIP() << "this build has no NCCL (configure with -DKILN_NCCL=ON)";
    const int n = ggml_backend_cuda_get_device_count();
    if (n < 2) GTEST_SKIP() << "needs two CUDA devices or more, " << n << " here";
    char desc[256];
    ggml_backend_cuda_get_device_description(0, desc, sizeof(desc));
    if (std::strstr(desc, "virtual")) GTEST_SKIP() << "virtual devices over one GPU (KILN_VIRTUAL_CUDA_DEVICES): NCCL needs distinct GPUs";
    std::vector<ggml_backend_t> backends;
    for (int i = 0; i < n; ++i) {
        backends.push_back(ggml_backend_cuda_init(i));
        ASSERT_NE(backends.back(), nullptr);
    }
    for (ggml_type type : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 }) {
        SCOPED_TRACE(ggml_type_name(type));
        // the sum of what the devices hold, in double; each device's result is that sum rounded
        // to the type, up to the rounding of NCCL's partial sums in it (n - 1 of them)
        std::vector<double> want((size_t) k_n, 0.0);
        std::vector<placed> ps((size_t) n);
        std::vector<ggml_tensor *> ts;
        for (int i = 0; i < n; ++i) {
            const std::vector<float> v = rounded(type, random_values(7 + 31 * i + (int) type));
            for (int64_t j = 0; j < k_n; ++j) want[(size_t) j] += v[(size_t) j];
            place(ps[(size_t) i], backends[(size_t) i], type, v);
            ts.push_back(ps[(size_t) i].t);
        }
        ASSERT_TRUE(ggml_backend_cuda_all_reduce(backends.data(), ts.data(), n));
        const double eps = type == GGML_TYPE_F32 ? 0x1p-23 : type == GGML_TYPE_F16 ? 0x1p-10 : 0x1p-7;
        for (int i = 0; i < n; ++i) {
            ggml_backend_synchronize(backends[(size_t) i]);
            const std::vector<float> got = read(ps[(size_t) i]);
            int bad = 0;
            for (int64_t j = 0; j < k_n && bad < 5; ++j) {
                // partial sums are bounded by 4 n in magnitude: n roundings of at most half an ulp there
                const double tol = n * eps * 4.0 * n;
                if (!(std::fabs(got[(size_t) j] - want[(size_t) j]) <= tol)) {
                    ADD_FAILURE() << "device " << i << " element " << j << ": " << got[(size_t) j] << ", want " << want[(size_t) j];
                    ++bad;
                }
            }
        }
    }
    for (ggml_backend_t b : backends) ggml_backend_free(b);
}

// The scheduler runs ggml_all_reduce's node as one NCCL step over the GPUs: partials computed on
// each (a scale of a leaf there), no copy between devices, and afterwards every GPU's part holds
// the sum, for each wire type.
TEST(CudaNccl, SchedulerRunsTheCollectiveOnEveryGpu) {
    if (!ggml_cuda_nccl_compiled()) GTEST_SKIP() << "this build has no NCCL (configure with -DKILN_NCCL=ON)";
    const int n = std::min(ggml_backend_cuda_get_device_count(), GGML_MAX_SRC);
    if (n < 2) GTEST_SKIP() << "needs two CUDA devices or more, " << n << " here";
    char desc[256];
    ggml_backend_cuda_get_device_description(0, desc, sizeof(desc));
    if (std::strstr(desc, "virtual")) GTEST_SKIP() << "virtual devices over one GPU (KILN_VIRTUAL_CUDA_DEVICES): NCCL needs distinct GPUs";
    std::vector<ggml_backend_t> backends;
    for (int i = 0; i < n; ++i) {
        backends.push_back(ggml_backend_cuda_init(i));
        ASSERT_NE(backends.back(), nullptr);
    }
    ASSERT_TRUE(ggml_backend_all_reduce_supported(backends.data(), n));
    backends.push_back(ggml_backend_cpu_init());
    for (ggml_type type : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 }) {
        SCOPED_TRACE(ggml_type_name(type));
        std::vector<placed> leaves((size_t) n);
        std::vector<double> want((size_t) k_n, 0.0);
        for (int i = 0; i < n; ++i) {
            const std::vector<float> v = random_values(50 + 13 * i + (int) type);
            place(leaves[(size_t) i], backends[(size_t) i], GGML_TYPE_F32, v);
            for (int64_t j = 0; j < k_n; ++j) want[(size_t) j] += 0.5 * v[(size_t) j];
        }
        std::vector<char> mem(ggml_tensor_overhead() * 64 + ggml_graph_overhead());
        ggml_context * ctx = ggml_init({ mem.size(), mem.data(), true });
        std::vector<ggml_tensor *> parts;
        for (int i = 0; i < n; ++i) {
            ggml_tensor * x = ggml_scale(ctx, leaves[(size_t) i].t, 0.5f);
            parts.push_back(type == GGML_TYPE_F32 ? x : ggml_cast(ctx, x, type));
            ggml_set_output(parts.back());
        }
        ggml_tensor * sum = ggml_all_reduce(ctx, parts.data(), n, 0);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, sum);
        ggml_backend_sched_t s = ggml_backend_sched_new(backends.data(), (int) backends.size(), 64);
        for (int i = 0; i < n; ++i) {
            ggml_backend_sched_set_tensor_backend(s, parts[(size_t) i], backends[(size_t) i]);
            if (parts[(size_t) i]->src[0] && parts[(size_t) i]->src[0]->op != GGML_OP_NONE) {
                ggml_backend_sched_set_tensor_backend(s, parts[(size_t) i]->src[0], backends[(size_t) i]);
            }
        }
        ggml_backend_sched_set_tensor_backend(s, sum, backends[0]);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, gf));
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, gf), GGML_STATUS_SUCCESS);
        EXPECT_EQ(ggml_backend_sched_get_n_copies(s), 0);
        const double eps = type == GGML_TYPE_F32 ? 0x1p-23 : type == GGML_TYPE_F16 ? 0x1p-10 : 0x1p-7;
        for (int i = 0; i < n; ++i) {
            const std::vector<float> got = read_tensor(parts[(size_t) i]);
            int bad = 0;
            for (int64_t j = 0; j < k_n && bad < 5; ++j) {
                const double tol = (n + 1) * eps * 2.0 * n + 1e-6;
                if (!(std::fabs(got[(size_t) j] - want[(size_t) j]) <= tol)) {
                    ADD_FAILURE() << "device " << i << " element " << j << ": " << got[(size_t) j] << ", want " << want[(size_t) j];
                    ++bad;
                }
            }
        }
        ggml_backend_sched_free(s);
        ggml_free(ctx);
    }
    for (ggml_backend_t b : backends) ggml_backend_free(b);
}
