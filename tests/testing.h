// Helpers shared by the test suites: where the shared material is, random data, references.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kiln_test {

// ../shared relative to the project root (KILN_SHARED_DIR at build time, or $KILN_SHARED_DIR).
std::string shared_dir();
std::string shared_path(const std::string & rel);
bool file_exists(const std::string & path);
std::string binary_dir();   // the build tree's root (tools are in bin/)

// Deterministic random floats in [lo, hi).
std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// Max |a - b| / max(|b|, floor) over two arrays.
double max_rel_diff(const float * a, const double * b, size_t n, double floor = 1e-6);

} // namespace kiln_test
