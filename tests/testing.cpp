#include "testing.h"

#include "ggml-cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>

namespace kiln_test {

std::string shared_dir() {
    if (const char * env = std::getenv("KILN_SHARED_DIR")) return env;
#ifdef KILN_SHARED_DIR
    return KILN_SHARED_DIR;
#else
    return "../shared";
#endif
}

std::string shared_path(const std::string & rel) { return shared_dir() + "/" + rel; }

bool file_exists(const std::string & path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

std::string binary_dir() {
#ifdef KILN_BINARY_DIR
    return KILN_BINARY_DIR;
#else
    return ".";
#endif
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo, float hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto & x : v) x = d(rng);
    return v;
}

double max_rel_diff(const float * a, const double * b, size_t n, double floor) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = std::fabs((double) a[i] - b[i]) / std::max(std::fabs(b[i]), floor);
        if (!(d <= m)) m = d;   // NaN propagates as the max
    }
    return m;
}

namespace {

// KILN_TEST_REQUIRE_GPU=1: a suite run to check the GPU (tests/CMakeLists.txt runs test-decode so,
// label cuda), which without one would silently check the CPU again. The process then says why
// and ends with status 77 before any test runs, which CTest reports as skipped (SKIP_RETURN_CODE 77).
// (A GTEST_SKIP here would print the reason, yet GoogleTest 1.12 counts the tests as passed.)
class require_gpu : public ::testing::Environment {
public:
    void SetUp() override {
        const char * env = std::getenv("KILN_TEST_REQUIRE_GPU");
        if (!env || std::string(env) != "1" || ggml_backend_cuda_get_device_count() > 0) return;
        std::fprintf(stderr, "skipped: KILN_TEST_REQUIRE_GPU=1 and %s\n",
                     ggml_cuda_compiled() ? "no usable CUDA device on this machine" : "this build has no CUDA backend");
        std::fflush(nullptr);
        std::_Exit(77);   // no exit handlers: a sanitizer's leak check would turn 77 into its own code
    }
};

[[maybe_unused]] ::testing::Environment * const g_require_gpu = ::testing::AddGlobalTestEnvironment(new require_gpu);

} // namespace

} // namespace kiln_test
