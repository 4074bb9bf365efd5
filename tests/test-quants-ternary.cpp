// TQ1_0 / TQ2_0 (llama.cpp's ternary types, ids 34 / 35): ternary rows survive quantizing
// exactly, the packing is llama.cpp's (checked on hand-made bytes), other rows round to the
// nearest of -d, 0, d, and the product matches the decoded rows.
#include "testing.h"

#include "cpu-traits.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace {

std::vector<float> decode(ggml_type t, const std::vector<uint8_t> & q, int64_t n) {
    std::vector<float> y(n);
    ggml_get_type_traits(t)->to_float(q.data(), y.data(), n);
    return y;
}

class Ternary : public ::testing::TestWithParam<ggml_type> {};

TEST_P(Ternary, TernaryRowsRoundTripAndOthersRoundToNearest) {
    const ggml_type t = GetParam();
    ASSERT_TRUE(ggml_type_is_valid(t));
    const int64_t n = 3 * 256;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = 0.375f * (float) ((i * 7 + i / 5) % 3 - 1);
    x[5] = 0.375f;   // every block holds the scale itself
    x[256 + 5] = -0.375f;
    x[512 + 5] = 0.375f;
    std::vector<uint8_t> q(ggml_row_size(t, n));
    ASSERT_EQ(ggml_quantize_chunk(t, x.data(), q.data(), 0, 1, n, nullptr), q.size());
    EXPECT_EQ(decode(t, q, n), x);
    // noisy values: each decodes to the nearest of -d, 0, d (d = the block's largest magnitude)
    std::vector<float> r = kiln_test::random_floats(n, 3, -2.0f, 2.0f);
    ASSERT_EQ(ggml_quantize_chunk(t, r.data(), q.data(), 0, 1, n, nullptr), q.size());
    const std::vector<float> y = decode(t, q, n);
    for (int64_t b = 0; b < n / 256; ++b) {
        float d = 0;
        for (int j = 0; j < 256; ++j) d = std::max(d, std::fabs(r[256 * b + j]));
        d = ggml_fp16_to_fp32(ggml_fp32_to_fp16(d));
        for (int j = 0; j < 256; ++j) {
            const float v = r[256 * b + j], want = std::fabs(v) < 0.5f * d ? 0.f : std::copysign(d, v);
            if (std::fabs(std::fabs(v) - 0.5f * d) < 1e-3f * d) continue;   // at a rounding boundary
            EXPECT_EQ(y[256 * b + j], want) << ggml_type_name(t) << " at " << 256 * b + j;
        }
    }
}

TEST_P(Ternary, ProductMatchesDecodedRows) {
    const ggml_type t = GetParam();
    const ggml_gemm_t gemm = ggml_cpu_gemm(t);
    ASSERT_TRUE(gemm);
    const int64_t n = 512;
    const int nr = 3, nc = 2;
    const std::vector<float> w = kiln_test::random_floats(nr * n, 8, -1.0f, 1.0f);
    const size_t row = ggml_row_size(t, n);
    std::vector<uint8_t> q(nr * row);
    ASSERT_EQ(ggml_quantize_chunk(t, w.data(), q.data(), 0, nr, n, nullptr), q.size());
    const ggml_type vdt = ggml_cpu_get_type_traits(t)->vec_dot_type;
    const std::vector<float> a = kiln_test::random_floats(nc * n, 9, -1.0f, 1.0f);
    const size_t arow = ggml_row_size(vdt, n);
    std::vector<uint8_t> aq(nc * arow);
    std::vector<float> ad(nc * n);
    for (int c = 0; c < nc; ++c) {
        ggml_cpu_from_float(vdt)(a.data() + c * n, aq.data() + c * arow, n);
        ggml_get_type_traits(vdt)->to_float(aq.data() + c * arow, ad.data() + c * n, n);
    }
    std::vector<float> dst(nr * nc);
    gemm(n, q.data(), row, aq.data(), arow, dst.data(), nr, nr, nc);
    for (int r = 0; r < nr; ++r) {
        std::vector<uint8_t> one(q.begin() + r * row, q.begin() + (r + 1) * row);
        const std::vector<float> wd = decode(t, one, n);
        for (int c = 0; c < nc; ++c) {
            double e = 0, s = 0;
            for (int64_t i = 0; i < n; ++i) {
                e += (double) wd[i] * ad[c * n + i];
                s += std::fabs((double) wd[i] * ad[c * n + i]);
            }
            EXPECT_NEAR(dst[c * nr + r], e, 1e-5 * s) << ggml_type_name(t);
        }
    }
}

// llama.cpp's packing, from bytes made by hand: TQ2_0 byte m of a 32-byte run holds weights
// m + 32 l at bits 2 l (level + 1); TQ1_0 byte m of the first run holds weights m + 32 k as a
// base-3 fraction of 256, first weight most significant.
TEST(TernaryLayout, HandMadeBlocks) {
    std::vector<uint8_t> tq2(66, 0x55);                 // every weight 0 (level 1)
    tq2[3] = (uint8_t) (0x55 & ~(3 << 4)) | (2 << 4);  // weight 3 + 32 * 2 = 67 -> +1
    const ggml_fp16_t one = ggml_fp32_to_fp16(1.0f);
    std::memcpy(tq2.data() + 64, &one, 2);
    std::vector<float> y = decode(GGML_TYPE_TQ2_0, tq2, 256);
    for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], i == 67 ? 1.0f : 0.0f) << i;

    std::vector<uint8_t> tq1(54, 0);
    // trits (2, 1, 1, 1, 0) = 2*81 + 27 + 9 + 3 = 201 -> ceil(201 * 256 / 243) = 212
    for (int j = 0; j < 48; ++j) tq1[j] = 128;          // (1, 1, 1, 1, 1) = 121 -> 128: all zero weights
    tq1[48] = tq1[49] = tq1[50] = tq1[51] = 127;        // qh: (1, 1, 1, 1) then a 0 trit = 120 -> 127
    tq1[7] = 212;
    std::memcpy(tq1.data() + 52, &one, 2);
    y = decode(GGML_TYPE_TQ1_0, tq1, 256);
    for (int i = 0; i < 256; ++i) {
        const float want = i == 7 ? 1.0f : i == 7 + 128 ? -1.0f : 0.0f;
        EXPECT_EQ(y[i], want) << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Types, Ternary, ::testing::Values(GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0),
                         [](const ::testing::TestParamInfo<ggml_type> & i) { return std::string(ggml_type_name(i.param)); });

} // namespace
