// The block arithmetic shared with the CUDA kernels (ggml/src/quants/quants-blocks.h), checked on
// the host against the CPU's reference decoders and encoders, bit for bit:
//   - every type of KILN_BLOCK_TYPES decodes chunk by chunk to exactly what the type's to_float
//     gives, for rows made by the quantizer and for random bytes (every bit pattern of the row
//     scale, block scales and quants, not only those a quantizer writes);
//   - encode32_q8_0 writes the blocks quantize_row_q8_0_ref writes, with quants made with the
//     stored scale;
//   - the fp16 / bf16 conversions match the library's on special and random values.
// This runs without a GPU: it is what keeps the device decoders honest in CI.
#include "testing.h"

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

using decode_rows_fn = void (*)(const void * data, int64_t n_per_row, int64_t nrows, float * y);

// Decodes nrows rows (per-row scale, then blocks) through the shared chunk decoder of type T.
template <ggml_type T> void decode_with_traits(const void * data, int64_t n_per_row, int64_t nrows, float * y) {
    using tr = kiln_block_traits<T>;
    const size_t row_bytes = tr::row_meta + n_per_row / (32 * tr::chunks) * sizeof(typename tr::block_t);
    for (int64_t r = 0; r < nrows; ++r) {
        const char * row = (const char *) data + r * row_bytes;
        for (int64_t ch = 0; ch < n_per_row / 32; ++ch) tr::decode_row(row, ch, y + r * n_per_row + 32 * ch);
    }
}

struct block_type_case {
    ggml_type type;
    size_t block_bytes;
    int qk;
    int row_meta;
    decode_rows_fn decode;
};

std::vector<block_type_case> all_cases() {
    std::vector<block_type_case> v;
#define KILN_CASE(type, block, qk, meta, fn) v.push_back({ type, sizeof(block), qk, meta, decode_with_traits<type> });
    KILN_BLOCK_TYPES(KILN_CASE)
#undef KILN_CASE
    return v;
}

// Equal bits, or both NaN (random fp16 scales include NaNs, whose payload may differ).
void expect_same_values(const std::vector<float> & want, const std::vector<float> & got, const std::string & what) {
    ASSERT_EQ(want.size(), got.size());
    int shown = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i]) && std::isnan(got[i])) continue;
        uint32_t a, b;
        std::memcpy(&a, &want[i], 4);
        std::memcpy(&b, &got[i], 4);
        if (a != b && shown++ < 5) ADD_FAILURE() << what << ": value " << i << " is " << got[i] << ", reference " << want[i];
    }
    EXPECT_EQ(shown, 0) << what << ": " << shown << " values differ";
}

class QuantsBlocks : public ::testing::TestWithParam<block_type_case> {};

TEST_P(QuantsBlocks, DecodesQuantizedRowsLikeTheCpu) {
    const block_type_case & c = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(c.type);
    ASSERT_TRUE(tt && tt->to_float) << ggml_type_name(c.type);
    ASSERT_EQ(tt->type_size, c.block_bytes) << "block size of " << ggml_type_name(c.type);
    ASSERT_EQ(tt->blck_size, c.qk) << "values per block of " << ggml_type_name(c.type);
    ASSERT_EQ(tt->row_meta_size, (size_t) c.row_meta) << "row scale of " << ggml_type_name(c.type);
    // 3 rows of 7 super-blocks: an odd count, with scales ranging over several magnitudes
    const int64_t n = 7 * QK_K, rows = 3;
    std::vector<float> src = kiln_test::random_floats(n * rows, 1234 + c.type, -2.0f, 2.0f);
    for (int64_t i = 0; i < n * rows; ++i) src[i] *= 1.0f + (float) (i % 97) / 10.0f;
    const size_t row_bytes = ggml_row_size(c.type, n);
    std::vector<uint8_t> q(row_bytes * rows);
    ASSERT_GT(ggml_quantize_chunk(c.type, src.data(), q.data(), 0, rows, n, nullptr), 0u);
    std::vector<float> want(n * rows), got(n * rows);
    for (int64_t r = 0; r < rows; ++r) tt->to_float(q.data() + r * row_bytes, want.data() + r * n, n);   // one row at a time
    c.decode(q.data(), n, rows, got.data());
    expect_same_values(want, got, std::string(ggml_type_name(c.type)) + " quantized");
}

TEST_P(QuantsBlocks, DecodesRandomBytesLikeTheCpu) {
    const block_type_case & c = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(c.type);
    const int64_t n_blocks = 64;   // one row
    std::mt19937 rng(99 + c.type);
    std::vector<uint8_t> bytes(c.row_meta + n_blocks * c.block_bytes);
    for (auto & b : bytes) b = (uint8_t) rng();
    std::vector<float> want(n_blocks * c.qk), got(n_blocks * c.qk);
    tt->to_float(bytes.data(), want.data(), (int64_t) want.size());
    c.decode(bytes.data(), (int64_t) got.size(), 1, got.data());
    expect_same_values(want, got, std::string(ggml_type_name(c.type)) + " random bytes");
}

INSTANTIATE_TEST_SUITE_P(AllSharedTypes, QuantsBlocks, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<block_type_case> & i) {
                             return std::string(ggml_type_name(i.param.type));
                         });

TEST(QuantsBlocksList, CoversTheTypesTheGpuDecodes) {
    // the kernels' first list (issue 15): the layouts must be among the shared ones
    const ggml_type needed[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
                                 GGML_TYPE_IQ4_XS, GGML_TYPE_IQ4_NL };
    const auto cases = all_cases();
    for (ggml_type t : needed) {
        bool found = false;
        for (const auto & c : cases) found = found || c.type == t;
        EXPECT_TRUE(found) << ggml_type_name(t);
    }
}

TEST(QuantsBlocksQ8, EncodesLikeTheReference) {
    const int64_t n = 32 * 41;
    std::vector<float> x = kiln_test::random_floats(n, 7, -3.0f, 3.0f);
    for (int j = 0; j < 32; ++j) x[j] = 0.0f;              // an all-zero block
    for (int j = 32; j < 64; ++j) x[j] = 1e-40f;           // subnormal: d has no inverse
    for (int j = 64; j < 96; ++j) x[j] = (j % 2 ? 0.5f : -0.5f) * 127.0f / 2.0f;   // ties at .5
    std::vector<block_q8_0> want(n / 32), got(n / 32);
    quantize_row_q8_0_ref(x.data(), want.data(), n);
    for (int64_t ib = 0; ib < n / 32; ++ib) encode32_q8_0(x.data() + 32 * ib, got[ib]);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        EXPECT_EQ(want[ib].d, got[ib].d) << "block " << ib;
        EXPECT_EQ(0, std::memcmp(want[ib].qs, got[ib].qs, 32)) << "block " << ib;
    }
}

// The quants are made with the scale as stored: every value decodes to within half a stored
// step, also where fp16 has few bits left for the scale (blocks of max |x| down to 1e-6), and the
// largest value never leaves [-127, 127].
// Blocks whose scale would be a subnormal fp16 (amax < ~7.8e-3) are quantized with the scale as
// stored; larger ones exactly as ggml's reference does (q = round(x * 127 / amax), d = fp16 of it).
TEST(QuantsBlocksQ8, QuantsUseTheStoredScale) {
    for (float amax : { 1e-6f, 3e-5f, 1e-4f, 7e-4f, 0.01f, 1.0f, 300.0f }) {
        std::vector<float> x = kiln_test::random_floats(32 * 64, 11, -amax, amax);
        for (int64_t ib = 0; ib < 64; ++ib) x[32 * ib + ib % 32] = ib % 2 ? amax : -amax;   // the block's max
        std::vector<block_q8_0> q(64);
        quantize_row_q8_0_ref(x.data(), q.data(), (int64_t) x.size());
        const bool subnormal = amax / 127.0f < 6.103515625e-5f;
        for (int64_t ib = 0; ib < 64; ++ib) {
            const float d = kiln_fp16_to_f32(q[ib].d);
            if (!subnormal) {
                ASSERT_EQ(q[ib].d, kiln_f32_to_fp16(amax / 127.0f)) << "amax " << amax << " block " << ib;
                for (int j = 0; j < 32; ++j) {
                    ASSERT_EQ(q[ib].qs[j], (int8_t) std::roundf(x[32 * ib + j] * (1.0f / (amax / 127.0f))))
                        << "amax " << amax << " block " << ib << " elem " << j;
                }
                continue;
            }
            ASSERT_GE(d * 127.0f, amax) << "block " << ib << " scale " << d << " cannot reach " << amax;
            for (int j = 0; j < 32; ++j) {
                const float y = q[ib].qs[j] * d;
                ASSERT_LE(std::fabs(y - x[32 * ib + j]), 0.5f * d * (1 + 1e-5f)) << "amax " << amax << " block " << ib << " elem " << j;
                ASSERT_GE(q[ib].qs[j], -127);
            }
        }
    }
}

TEST(QuantsBlocksScalars, HalfConversionsMatchTheLibrary) {
    std::vector<float> xs = { 0.0f, -0.0f, 1.0f, -1.5f, 65504.0f, 65520.0f, 1e-8f, 6.1e-5f, 3.0e-8f, INFINITY, -INFINITY, NAN };
    std::mt19937 rng(5);
    for (int i = 0; i < 20000; ++i) {
        uint32_t bits = rng();
        float f;
        std::memcpy(&f, &bits, 4);
        xs.push_back(f);
    }
    for (float f : xs) {
        EXPECT_EQ(ggml_fp32_to_fp16(f), kiln_f32_to_fp16(f)) << f;
        EXPECT_EQ(ggml_fp32_to_bf16(f), kiln_f32_to_bf16(f)) << f;
    }
    for (uint32_t h = 0; h < 65536; ++h) {
        const float a = ggml_fp16_to_fp32((ggml_fp16_t) h), b = kiln_fp16_to_f32((ggml_fp16_t) h);
        const float c = ggml_bf16_to_fp32((ggml_bf16_t) h), d = kiln_bf16_to_f32((ggml_bf16_t) h);
        EXPECT_TRUE(std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b))) << h;
        EXPECT_TRUE(std::memcmp(&c, &d, 4) == 0 || (std::isnan(c) && std::isnan(d))) << h;
    }
}

} // namespace
