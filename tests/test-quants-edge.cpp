// Quantize-then-dequantize of awkward rows, for every quantized type with a quantizer and a
// decoder: all zeros, constants, one huge outlier, tiny (subnormal) values must decode to finite,
// sensible values; rows containing inf or NaN must be refused (ggml_quantize_chunk returns 0)
// without writing past the destination. Type-agnostic: new families are tested on registration.
#include "testing.h"

#include "ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr int64_t k_n = 512;   // a multiple of every block size

struct quant_type {
    ggml_type type;
    const ggml_type_traits * tt;
};

std::vector<quant_type> quantizable_types() {
    std::vector<quant_type> out;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (!ggml_type_is_valid(t)) continue;
        const ggml_type_traits * tt = ggml_get_type_traits((ggml_type) t);
        if (!tt->is_quantized || !tt->to_float || (!tt->quantize && !tt->from_float_ref)) continue;
        out.push_back({ (ggml_type) t, tt });
    }
    return out;
}

std::vector<float> test_imatrix() {
    std::vector<float> w(k_n);
    for (int64_t j = 0; j < k_n; ++j) w[j] = 0.25f + (float) ((j * 13) % 7);
    return w;
}

// Quantize nrows rows (imatrix when the type needs one) and decode them; returns the byte count.
size_t round_trip(const quant_type & q, const std::vector<float> & src, int64_t nrows, std::vector<float> & out,
                  bool use_imatrix) {
    static const std::vector<float> imatrix = test_imatrix();
    const int64_t group = q.tt->nrows_interleaved > 1 ? q.tt->nrows_interleaved : 1;
    const int64_t padded_rows = (nrows + group - 1) / group * group;
    std::vector<float> in(padded_rows * k_n, 0.0f);
    std::copy(src.begin(), src.end(), in.begin());
    const size_t row = ggml_row_size(q.type, k_n);
    std::vector<uint8_t> buf(padded_rows * row + 32, 0x5A);
    const size_t written = ggml_quantize_chunk(q.type, in.data(), buf.data(), 0, padded_rows, k_n,
                                               use_imatrix || q.tt->requires_imatrix ? imatrix.data() : nullptr);
    for (size_t i = padded_rows * row; i < buf.size(); ++i) {
        EXPECT_EQ(buf[i], 0x5A) << ggml_type_name(q.type) << ": quantizer wrote past the destination";
        if (buf[i] != 0x5A) break;
    }
    if (written == 0) return 0;
    EXPECT_EQ(written, padded_rows * row) << ggml_type_name(q.type);
    out.assign(padded_rows * k_n, NAN);
    for (int64_t r = 0; r < padded_rows; r += group) q.tt->to_float(buf.data() + r * row, out.data() + r * k_n, k_n * group);
    out.resize(nrows * k_n);
    return written;
}

double rel_rmse(const std::vector<float> & y, const std::vector<float> & x) {
    double e = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        e += ((double) y[i] - x[i]) * ((double) y[i] - x[i]);
        s += (double) x[i] * x[i];
    }
    return s > 0 ? std::sqrt(e / s) : std::sqrt(e);
}

class QuantEdge : public ::testing::Test {
protected:
    void SetUp() override {
        types = quantizable_types();
        ASSERT_FALSE(types.empty()) << "no quantized type registered";
        std::string names;
        for (auto & q : types) names += std::string(" ") + ggml_type_name(q.type);
        std::printf("[ types    ]%s\n", names.c_str());
    }
    std::vector<quant_type> types;
};

TEST_F(QuantEdge, AllZeroRowDecodesToZero) {
    for (auto & q : types) {
        for (bool imx : { false, true }) {
            std::vector<float> out;
            const std::vector<float> src(k_n, 0.0f);
            ASSERT_GT(round_trip(q, src, 1, out, imx), 0u) << ggml_type_name(q.type);
            for (int64_t i = 0; i < k_n; ++i) ASSERT_EQ(out[i], 0.0f) << ggml_type_name(q.type) << " at " << i;
        }
    }
}

TEST_F(QuantEdge, ConstantRowsStayFiniteAndClose) {
    for (auto & q : types) {
        for (float c : { 0.37f, -2.5f, 1000.0f }) {
            std::vector<float> out;
            const std::vector<float> src(k_n, c);
            ASSERT_GT(round_trip(q, src, 1, out, false), 0u) << ggml_type_name(q.type);
            for (float v : out) ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(q.type) << " constant " << c;
            // every format can hold a constant to within a coarse grid step, except that iq1_kt's
            // 8192 pseudo-random runs of 8 (1.75 bpw) hold none close to a constant run, and that
            // iq1_s_r4's row scale sits 1/16 above its largest block scale (the reference's recipe:
            // a constant row decodes 6% high on top of the grid's error)
            const double bound = q.type == GGML_TYPE_IQ1_KT ? 0.5 : q.type == GGML_TYPE_IQ1_S_R4 ? 0.4 : 0.35;
            EXPECT_LT(rel_rmse(out, src), bound) << ggml_type_name(q.type) << " constant " << c;
        }
    }
}

TEST_F(QuantEdge, OneHugeOutlierSurvives) {
    for (auto & q : types) {
        std::vector<float> src = kiln_test::random_floats(2 * k_n, 5, -1.0f, 1.0f);
        src[100] = 3.0e4f;            // inside fp16 range once divided by any block's max level
        src[k_n + 300] = -3.0e4f;
        for (bool imx : { false, true }) {
            std::vector<float> out;
            ASSERT_GT(round_trip(q, src, 2, out, imx), 0u) << ggml_type_name(q.type);
            for (float v : out) ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(q.type);
            EXPECT_NEAR(out[100], 3.0e4f, 0.5 * 3.0e4) << ggml_type_name(q.type) << (imx ? " imatrix" : "");
            EXPECT_NEAR(out[k_n + 300], -3.0e4f, 0.5 * 3.0e4) << ggml_type_name(q.type) << (imx ? " imatrix" : "");
        }
    }
}

TEST_F(QuantEdge, TinyValuesStayFinite) {
    for (auto & q : types) {
        std::vector<float> src = kiln_test::random_floats(k_n, 6, -1.0f, 1.0f);
        for (auto & v : src) v *= 1e-39f;   // subnormal floats: scales underflow
        std::vector<float> out;
        ASSERT_GT(round_trip(q, src, 1, out, false), 0u) << ggml_type_name(q.type);
        for (float v : out) {
            ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(q.type);
            ASSERT_LE(std::fabs(v), 1e-30f) << ggml_type_name(q.type);
        }
    }
}

TEST_F(QuantEdge, NonFiniteInputIsRefused) {
    const float bad[] = { std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity() };
    for (auto & q : types) {
        for (float b : bad) {
            for (bool imx : { false, true }) {
                std::vector<float> src = kiln_test::random_floats(2 * k_n, 7, -1.0f, 1.0f);
                src[k_n + 77] = b;   // the second row is bad
                std::vector<float> out;
                EXPECT_EQ(round_trip(q, src, 2, out, imx), 0u)
                    << ggml_type_name(q.type) << ": accepted a row containing " << b << (imx ? " (imatrix)" : "");
            }
        }
    }
}

} // namespace
