// The row-interleaved layouts' shared decoders (ggml/src/quants/quants-blocks-interleaved.h, the
// functions the CUDA kernels decode _r4 / _r8 / _r16 weights with), checked on the host bit for bit:
//   - every type of KILN_INTERLEAVED_TYPES matches the type table (rows per group, row scale,
//     bytes per group);
//   - rows decoded through kiln_decode_row_chunk as a kernel reads them (row i1's pointer and
//     index, its group found from those) equal the CPU's to_float of the groups, for rows made by
//     the quantizer and for random bytes (every bit pattern of scales and quants), several groups,
//     K = 256 and 768;
//   - rows of the plain twin woven with the CPU's weaver decode to the twin's own to_float values;
//   - no interleaved type the CPU decodes lacks a shared decoder.
// This runs without a GPU: it is what keeps the device decoders of the woven layouts honest in CI.
#include "testing.h"
#include "expect-same-bits.h"

#include "ggml.h"
#include "quants/quants-blocks.h"
#include "quants/quants-common.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct woven_case {
    ggml_type type;
    size_t block_bytes;   // one woven block: R rows x qk values
    int R;
    int qk;
    int row_meta;
};

std::vector<woven_case> all_cases() {
    std::vector<woven_case> v;
#define KILN_CASE(type, block, R, qk, meta, fn) v.push_back({ type, sizeof(block), R, qk, meta });
    KILN_INTERLEAVED_TYPES(KILN_CASE)
#undef KILN_CASE
    return v;
}

std::string case_name(const ::testing::TestParamInfo<woven_case> & i) { return ggml_type_name(i.param.type); }

// gtest prints a failing parameter with this (found by argument-dependent lookup)
void PrintTo(const woven_case & c, std::ostream * os) { *os << ggml_type_name(c.type); }

using kiln_test::expect_same_values;

// nrows rows of n values through the kernels' entry point: row r starts at data + r * row_bytes,
// its index along dimension 1 is r; chunks decoded in reverse order so that no decoder can lean
// on state left by the previous chunk.
std::vector<float> decode_shared(ggml_type t, const std::vector<uint8_t> & data, int64_t n, int64_t nrows) {
    const size_t row_bytes = ggml_row_size(t, n);
    std::vector<float> y(n * nrows);
    for (int64_t r = 0; r < nrows; ++r) {
        for (int64_t ch = n / 32 - 1; ch >= 0; --ch) {
            kiln_decode_row_chunk(t, (const char *) data.data() + r * row_bytes, r, (int64_t) row_bytes, ch, y.data() + r * n + 32 * ch,
                                  /*matmul=*/false);
        }
    }
    return y;
}

// The CPU's to_float of the layout: one group of R rows per call.
std::vector<float> decode_cpu(const woven_case & c, const std::vector<uint8_t> & data, int64_t n, int64_t nrows) {
    const ggml_type_traits * tt = ggml_get_type_traits(c.type);
    const size_t row_bytes = ggml_row_size(c.type, n);
    std::vector<float> y(n * nrows);
    for (int64_t r = 0; r < nrows; r += c.R) tt->to_float(data.data() + r * row_bytes, y.data() + r * n, c.R * n);
    return y;
}

std::vector<float> test_floats(int64_t count, uint32_t seed) {
    std::vector<float> src = kiln_test::random_floats(count, seed, -2.0f, 2.0f);
    for (int64_t i = 0; i < count; ++i) src[i] *= 1.0f + (float) (i % 97) / 10.0f;   // scales over several magnitudes
    return src;
}

class QuantsBlocksInterleaved : public ::testing::TestWithParam<woven_case> {};

TEST_P(QuantsBlocksInterleaved, LayoutFactsMatchTheTypeTable) {
    const woven_case & c = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(c.type);
    ASSERT_TRUE(tt && tt->to_float) << ggml_type_name(c.type);
    EXPECT_EQ(tt->nrows_interleaved, c.R) << ggml_type_name(c.type);
    EXPECT_EQ(tt->row_meta_size, (size_t) c.row_meta) << "row scale of " << ggml_type_name(c.type);
    for (int64_t n : { 256, 768 }) {
        EXPECT_EQ(c.R * ggml_row_size(c.type, n), c.R * c.row_meta + n / c.qk * c.block_bytes) << ggml_type_name(c.type) << " n=" << n;
    }
    EXPECT_EQ(kiln_decoded_rows_per_group(c.type), c.R);
}

TEST_P(QuantsBlocksInterleaved, DecodesQuantizedRowsLikeTheCpu) {
    const woven_case & c = GetParam();
    for (int64_t n : { 256, 768 }) {
        const int64_t rows = 3 * c.R;   // three groups
        const std::vector<float> src = test_floats(n * rows, 1234 + c.type + (uint32_t) n);
        std::vector<uint8_t> q(ggml_row_size(c.type, n) * rows);
        const std::vector<float> im(ggml_quantize_requires_imatrix(c.type) ? n : 0, 1.0f);
        ASSERT_EQ(ggml_quantize_chunk(c.type, src.data(), q.data(), 0, rows, n, im.empty() ? nullptr : im.data()), q.size())
            << ggml_type_name(c.type) << " n=" << n;
        expect_same_values(decode_cpu(c, q, n, rows), decode_shared(c.type, q, n, rows),
                           std::string(ggml_type_name(c.type)) + " quantized, n=" + std::to_string(n));
    }
}

TEST_P(QuantsBlocksInterleaved, DecodesRandomBytesLikeTheCpu) {
    const woven_case & c = GetParam();
    for (int64_t n : { 256, 768 }) {
        const int64_t rows = 2 * c.R;
        std::mt19937 rng(99 + c.type + (uint32_t) n);
        std::vector<uint8_t> bytes(ggml_row_size(c.type, n) * rows);
        for (auto & b : bytes) b = (uint8_t) rng();
        expect_same_values(decode_cpu(c, bytes, n, rows), decode_shared(c.type, bytes, n, rows),
                           std::string(ggml_type_name(c.type)) + " random bytes, n=" + std::to_string(n));
    }
}

// Rows of the plain twin, woven by the CPU's weaver (what -rtr and the quantizer write), decode to
// exactly the twin's values: the shared decoder reads the weave as the CPU writes it, independently
// of the CPU's decoder of the layout.
TEST_P(QuantsBlocksInterleaved, DecodesWovenTwinRowsToTheTwinsValues) {
    const woven_case & c = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(c.type);
    const ggml_type base = tt->interleaved_base;
    if (!tt->weave) GTEST_SKIP() << ggml_type_name(c.type) << " is quantized on its own, not woven from " << ggml_type_name(base);
    const ggml_type_traits * bt = ggml_get_type_traits(base);
    ASSERT_TRUE(bt->to_float) << ggml_type_name(base);
    for (int64_t n : { 256, 768 }) {
        const int64_t rows = 3 * c.R;
        const std::vector<float> src = test_floats(n * rows, 777 + c.type + (uint32_t) n);
        const size_t twin_row = ggml_row_size(base, n), woven_row = ggml_row_size(c.type, n);
        std::vector<uint8_t> twin(twin_row * rows);
        if (base == GGML_TYPE_BF16) {
            for (int64_t i = 0; i < n * rows; ++i) ((ggml_bf16_t *) twin.data())[i] = kiln_f32_to_bf16(src[i]);
        } else {
            const std::vector<float> im(ggml_quantize_requires_imatrix(base) ? n : 0, 1.0f);
            ASSERT_EQ(ggml_quantize_chunk(base, src.data(), twin.data(), 0, rows, n, im.empty() ? nullptr : im.data()), twin.size())
                << ggml_type_name(base);
        }
        std::vector<float> want(n * rows);
        for (int64_t r = 0; r < rows; ++r) bt->to_float(twin.data() + r * twin_row, want.data() + r * n, n);
        std::vector<uint8_t> woven(woven_row * rows, 0);
        std::vector<const char *> group_rows(c.R);
        for (int64_t r0 = 0; r0 < rows; r0 += c.R) {
            for (int k = 0; k < c.R; ++k) group_rows[k] = (const char *) twin.data() + (r0 + k) * twin_row;
            tt->weave(group_rows.data(), n, (char *) woven.data() + r0 * woven_row);
        }
        const std::vector<float> got = decode_shared(c.type, woven, n, rows);
        const std::string what = std::string(ggml_type_name(c.type)) + " woven from " + ggml_type_name(base) + ", n=" + std::to_string(n);
        if (base == GGML_TYPE_Q8_K) {
            // q8_k_r8 / q8_k_r16 keep q8_K's f32 scale as fp16: each value within that rounding
            int bad = 0;
            for (size_t i = 0; i < want.size(); ++i) bad += !(std::fabs(got[i] - want[i]) <= std::ldexp(std::fabs(want[i]), -11));
            EXPECT_EQ(bad, 0) << what << ": values beyond the fp16 rounding of the row scale";
            continue;
        }
        // q5_0_r4 / q6_0_r4 decode as the reference writes them, d * q - 16 d (32 d), which gives
        // +0 where the plain types' (q - 16) * d gives -0 for a negative d: the same products
        const bool zero_sign_free = c.type == GGML_TYPE_Q5_0_R4 || c.type == GGML_TYPE_Q6_0_R4;
        expect_same_values(want, got, what, zero_sign_free);
    }
}

INSTANTIATE_TEST_SUITE_P(AllWovenTypes, QuantsBlocksInterleaved, ::testing::ValuesIn(all_cases()), case_name);

TEST(QuantsBlocksInterleavedList, CoversEveryInterleavedTypeTheCpuDecodes) {
    const auto cases = all_cases();
    int covered = 0;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (!ggml_type_is_valid(t)) continue;
        const ggml_type_traits * tt = ggml_get_type_traits((ggml_type) t);
        if (tt->nrows_interleaved <= 1 || !tt->to_float) continue;
        bool found = false;
        for (const auto & c : cases) found = found || c.type == t;
        EXPECT_TRUE(found) << ggml_type_name((ggml_type) t) << " has a CPU decoder but no shared one";
        covered += found;
    }
    EXPECT_EQ(covered, (int) cases.size());
    EXPECT_GE(covered, 29);   // the layouts of the type table (ggml-types.cpp)
}

} // namespace
