#include "testing.h"

#include <cmath>
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

} // namespace kiln_test
