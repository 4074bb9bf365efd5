// Bit-for-bit comparison of decoded values, shared by the block-decoder suites
// (test-quants-blocks, test-quants-blocks-interleaved).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kiln_test {

// Equal bits, or both NaN (random fp16 scales include NaNs, whose payload may differ); with
// zero_sign_free, +0 and -0 count as equal. Reports the first five differences.
inline void expect_same_values(const std::vector<float> & want, const std::vector<float> & got, const std::string & what,
                               bool zero_sign_free = false) {
    ASSERT_EQ(want.size(), got.size());
    int shown = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i]) && std::isnan(got[i])) continue;
        if (zero_sign_free && want[i] == 0.0f && got[i] == 0.0f) continue;
        uint32_t a, b;
        std::memcpy(&a, &want[i], 4);
        std::memcpy(&b, &got[i], 4);
        if (a != b && shown++ < 5) ADD_FAILURE() << what << ": value " << i << " is " << got[i] << ", reference " << want[i];
    }
    EXPECT_EQ(shown, 0) << what << ": " << shown << " values differ";
}

} // namespace kiln_test
