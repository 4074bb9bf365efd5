// IQ1_BN / IQ2_BN / IQ2_BN_R4 (ik_llama.cpp's BitNet b1.58 types, ids 134 / 135 / 335): the
// decoders against plain decoders written here from the reference's layout (random bytes, awkward
// row lengths), the quantizer against an encoder written here (byte for byte) and its error bound,
// the 4-row weave, and the products at every ISA level against a double-precision product of the
// decoded operands. Also the removed and placeholder type ids and their messages.
#include "testing.h"

#include "cpu-traits.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int64_t kBlock = 64;
const int64_t kRowLengths[] = { 64, 192, 320, 1088 };

size_t header_bytes(ggml_type t) { return t == GGML_TYPE_IQ1_BN ? 2 : 4; }

double header_scale(ggml_type t, const uint8_t * row) {
    if (t == GGML_TYPE_IQ1_BN) {
        ggml_fp16_t h;
        std::memcpy(&h, row, 2);
        return ggml_fp16_to_fp32(h);
    }
    float d;
    std::memcpy(&d, row, 4);
    return d;
}

// The level (-1, 0, +1; iq2_bn's unused code 3 reads +2) of value v of a block, from the layout as
// the reference documents it: iq1_bn packs five values per byte as a base-3 number idx (first value
// least significant) stored as ceil(256 idx / 243), so idx = floor(byte * 243 / 256).
int ref_level(ggml_type t, const uint8_t * block, int v) {
    if (t == GGML_TYPE_IQ2_BN) return ((block[v % 16] >> (2 * (v / 16))) & 3) - 1;
    const int g = v / 16, p = v % 16;
    const int byte = p == 15 ? block[12] : block[3 * g + p / 5];
    const int idx = (byte * 243) >> 8;
    const int digit = p == 15 ? g : p % 5;
    int x = idx;
    for (int i = 0; i < digit; ++i) x /= 3;
    return x % 3 - 1;
}

std::vector<double> ref_decode_row(ggml_type t, const uint8_t * row, int64_t n) {
    const double d = header_scale(t, row);
    const size_t bs = ggml_type_size(t);
    std::vector<double> y(n);
    for (int64_t i = 0; i < n; ++i) y[i] = d * ref_level(t, row + header_bytes(t) + (i / kBlock) * bs, (int) (i % kBlock));
    return y;
}

// iq2_bn_r4: the four f32 row scales, then per 64 values a 64-byte block in which value
// 16 l + 4 m + i of row k sits at bits 2 m of byte 16 l + 4 k + i (the reference's repack_iq2_bn).
std::vector<double> ref_decode_r4_group(const uint8_t * group, int64_t n) {
    std::vector<double> y(4 * n);
    for (int k = 0; k < 4; ++k) {
        float d;
        std::memcpy(&d, group + 4 * k, 4);
        for (int64_t i = 0; i < n; ++i) {
            const uint8_t * b = group + 16 + 64 * (i / kBlock);
            const int v = (int) (i % kBlock), l = v / 16, m = (v % 16) / 4, j = v % 4;
            y[k * n + i] = (double) d * (((b[16 * l + 4 * k + j] >> (2 * m)) & 3) - 1);
        }
    }
    return y;
}

// The reference's encoder, written out: threshold half the row's largest magnitude.
std::vector<uint8_t> ref_encode_row(ggml_type t, const float * x, int64_t n) {
    float max = 0;
    for (int64_t i = 0; i < n; ++i) max = std::max(max, std::fabs(x[i]));
    const float thr = 0.5f * max;
    auto level = [&](float v) { return std::fabs(v) < thr ? 1 : v < 0 ? 0 : 2; };
    std::vector<uint8_t> out(ggml_row_size(t, n));
    if (t == GGML_TYPE_IQ1_BN) {
        const ggml_fp16_t h = ggml_fp32_to_fp16(max);
        std::memcpy(out.data(), &h, 2);
    } else {
        std::memcpy(out.data(), &max, 4);
    }
    for (int64_t ib = 0; ib < n / kBlock; ++ib) {
        uint8_t * b = out.data() + header_bytes(t) + ib * ggml_type_size(t);
        const float * xb = x + ib * kBlock;
        if (t == GGML_TYPE_IQ2_BN) {
            for (int v = 0; v < kBlock; ++v) b[v % 16] |= (uint8_t) (level(xb[v]) << (2 * (v / 16)));
            continue;
        }
        auto pack = [](const int * q, int count) {
            int idx = 0;
            for (int j = count - 1; j >= 0; --j) idx = 3 * idx + q[j];
            return (uint8_t) ((256 * idx + 242) / 243);
        };
        int last[4];
        for (int g = 0; g < 4; ++g) {
            for (int k = 0; k < 3; ++k) {
                int q[5];
                for (int j = 0; j < 5; ++j) q[j] = level(xb[16 * g + 5 * k + j]);
                b[3 * g + k] = pack(q, 5);
            }
            last[g] = level(xb[16 * g + 15]);
        }
        b[12] = pack(last, 4);
    }
    return out;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> b(n);
    for (auto & v : b) v = (uint8_t) (rng() & 0xFF);
    return b;
}

class Bitnet : public ::testing::TestWithParam<ggml_type> {};

TEST_P(Bitnet, DecodeMatchesReferenceOnRandomBytes) {
    const ggml_type t = GetParam();
    ASSERT_TRUE(ggml_type_is_valid(t));
    EXPECT_EQ(ggml_blck_size(t), 64);
    EXPECT_EQ(ggml_type_size(t), t == GGML_TYPE_IQ1_BN ? 13u : 16u);
    for (int64_t n : kRowLengths) {
        EXPECT_EQ(ggml_row_size(t, n), header_bytes(t) + (size_t) (n / 64) * ggml_type_size(t));
        std::vector<uint8_t> row = random_bytes(ggml_row_size(t, n), (uint32_t) n);
        const float d = -0.3125f;   // exact in fp16; a negative scale flips every level
        if (t == GGML_TYPE_IQ1_BN) {
            const ggml_fp16_t h = ggml_fp32_to_fp16(d);
            std::memcpy(row.data(), &h, 2);
        } else {
            std::memcpy(row.data(), &d, 4);
        }
        std::vector<float> y(n);
        ggml_get_type_traits(t)->to_float(row.data(), y.data(), n);
        const std::vector<double> want = ref_decode_row(t, row.data(), n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ((double) y[i], want[i]) << ggml_type_name(t) << " n=" << n << " at " << i;
    }
}

// Each value in a place of its own, from bytes made by hand.
TEST(Bitnet, HandMadeBytes) {
    // iq1_bn: idx of (0, 0, 0, +1, 0) (levels 1 1 1 2 1, first least significant) = 1+3+9+54+81 = 148
    // -> byte ceil(148 * 256 / 243) = 156; all-zero bytes (idx 121) are 128, and the 4-trit extra
    // all zero is idx 40 -> 43.
    std::vector<uint8_t> q1(2 + 2 * 13, 128);
    const ggml_fp16_t h = ggml_fp32_to_fp16(0.5f);
    std::memcpy(q1.data(), &h, 2);
    q1[2 + 13 + 12] = 43;
    q1[2 + 13 + 3 * 1 + 2] = 156;   // block 1, group 1, byte 2, trit 3: value 64 + 16 + 10 + 3 = 93
    q1[2 + 12] = 52;                // block 0's extra, trit 2 (value 47) at level 2: idx 40 + 9 = 49 -> 52
    std::vector<float> y(128);
    ggml_get_type_traits(GGML_TYPE_IQ1_BN)->to_float(q1.data(), y.data(), 128);
    for (int i = 0; i < 128; ++i) EXPECT_EQ(y[i], i == 93 || i == 47 ? 0.5f : 0.0f) << "iq1_bn value " << i;
    // iq2_bn: byte 5 bits 4-5 is value 5 + 32; code 0 is -1
    std::vector<uint8_t> q2(4 + 16, 0x55);
    const float d = 2.0f;
    std::memcpy(q2.data(), &d, 4);
    q2[4 + 5] = (uint8_t) ((0x55 & ~(3 << 4)) | (0 << 4));
    y.assign(64, 0);
    ggml_get_type_traits(GGML_TYPE_IQ2_BN)->to_float(q2.data(), y.data(), 64);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], i == 37 ? -2.0f : 0.0f) << "iq2_bn value " << i;
}

TEST_P(Bitnet, QuantizerWritesTheReferenceBytesAndRoundsToNearestLevel) {
    const ggml_type t = GetParam();
    for (int64_t n : kRowLengths) {
        const int nrows = 3;
        std::vector<float> x = kiln_test::random_floats(nrows * n, 11 + (uint32_t) n, -2.0f, 2.0f);
        for (int64_t i = 0; i < n; ++i) x[i] = 0.375f * (float) ((i * 7 + i / 5) % 3 - 1);   // a ternary row
        const size_t row = ggml_row_size(t, n);
        std::vector<uint8_t> q(nrows * row);
        ASSERT_EQ(ggml_quantize_chunk(t, x.data(), q.data(), 0, nrows, n, nullptr), q.size());
        for (int r = 0; r < nrows; ++r) {
            const std::vector<uint8_t> want = ref_encode_row(t, x.data() + r * n, n);
            ASSERT_EQ(std::vector<uint8_t>(q.begin() + r * row, q.begin() + (r + 1) * row), want)
                << ggml_type_name(t) << " n=" << n << " row " << r;
            std::vector<float> y(n);
            ggml_get_type_traits(t)->to_float(q.data() + r * row, y.data(), n);
            float max = 0;
            for (int64_t i = 0; i < n; ++i) max = std::max(max, std::fabs(x[r * n + i]));
            const double d = header_scale(t, q.data() + r * row);
            for (int64_t i = 0; i < n; ++i) {
                const float v = x[r * n + i];
                if (r == 0) {
                    ASSERT_EQ(y[i], v) << "ternary rows survive exactly";
                    continue;
                }
                // the nearest of -d, 0, +d: within half the scale (plus iq1_bn's fp16 rounding of it)
                ASSERT_LE(std::fabs((double) y[i] - v), 0.5 * max + std::fabs(d - max)) << ggml_type_name(t) << " at " << i;
                if (std::fabs(std::fabs(v) - 0.5f * max) > 1e-6f) {
                    ASSERT_EQ(y[i], std::fabs(v) < 0.5f * max ? 0.0f : (float) std::copysign(d, v));
                }
            }
        }
        // an all-zero row gives zeros (not NaN), and the imatrix changes nothing (the reference ignores it)
        std::vector<float> zero(n, 0.0f), y(n, 1.0f), w(n, 3.0f);
        std::vector<uint8_t> qz(row), qw(nrows * row);
        ASSERT_EQ(ggml_quantize_chunk(t, zero.data(), qz.data(), 0, 1, n, nullptr), row);
        ggml_get_type_traits(t)->to_float(qz.data(), y.data(), n);
        for (float v : y) ASSERT_EQ(v, 0.0f);
        ASSERT_EQ(ggml_quantize_chunk(t, x.data(), qw.data(), 0, nrows, n, w.data()), qw.size());
        EXPECT_EQ(qw, q);
    }
    // non-finite input is refused
    std::vector<float> bad(64, 1.0f);
    bad[7] = NAN;
    std::vector<uint8_t> qb(ggml_row_size(t, 64));
    EXPECT_EQ(ggml_quantize_chunk(t, bad.data(), qb.data(), 0, 1, 64, nullptr), 0u);
}

INSTANTIATE_TEST_SUITE_P(Types, Bitnet, ::testing::Values(GGML_TYPE_IQ1_BN, GGML_TYPE_IQ2_BN),
                         [](const auto & info) { return std::string(ggml_type_name(info.param)); });

TEST(Bitnet, Iq2BnR4IsTheReferenceWeave) {
    const ggml_type t = GGML_TYPE_IQ2_BN_R4;
    ASSERT_TRUE(ggml_type_is_valid(t));
    EXPECT_EQ(ggml_get_type_traits(t)->nrows_interleaved, 4);
    EXPECT_EQ(ggml_get_type_traits(t)->interleaved_base, GGML_TYPE_IQ2_BN);
    EXPECT_EQ(ggml_interleaved_twin(GGML_TYPE_IQ2_BN), t);
    for (int64_t n : kRowLengths) {
        ASSERT_EQ(ggml_row_size(t, n), ggml_row_size(GGML_TYPE_IQ2_BN, n));
        const int nrows = 8;
        const std::vector<float> x = kiln_test::random_floats(nrows * n, 21 + (uint32_t) n, -1.0f, 1.0f);
        const size_t row = ggml_row_size(t, n);
        std::vector<uint8_t> plain(nrows * row), woven(nrows * row), repacked(nrows * row);
        ASSERT_EQ(ggml_quantize_chunk(GGML_TYPE_IQ2_BN, x.data(), plain.data(), 0, nrows, n, nullptr), plain.size());
        ASSERT_EQ(ggml_quantize_chunk(t, x.data(), woven.data(), 0, nrows, n, nullptr), woven.size());
        ASSERT_EQ(ggml_repack_rows(t, plain.data(), repacked.data(), nrows, n), repacked.size());
        EXPECT_EQ(woven, repacked);
        for (int g = 0; g < nrows / 4; ++g) {
            const uint8_t * group = woven.data() + 4 * g * row;
            std::vector<float> y(4 * n);
            ggml_get_type_traits(t)->to_float(group, y.data(), 4 * n);
            const std::vector<double> want = ref_decode_r4_group(group, n);
            for (int k = 0; k < 4; ++k) {
                const std::vector<double> twin = ref_decode_row(GGML_TYPE_IQ2_BN, plain.data() + (4 * g + k) * row, n);
                for (int64_t i = 0; i < n; ++i) {
                    ASSERT_EQ((double) y[k * n + i], want[k * n + i]) << "n=" << n << " row " << 4 * g + k << " at " << i;
                    ASSERT_EQ(want[k * n + i], twin[i]) << "the weave moves values: n=" << n << " row " << 4 * g + k;
                }
            }
        }
    }
    // random bytes too (code 3 included)
    std::vector<uint8_t> group = random_bytes(4 * ggml_row_size(t, 192), 5);
    for (int k = 0; k < 4; ++k) {
        const float d = 0.25f * (float) (k + 1);
        std::memcpy(group.data() + 4 * k, &d, 4);
    }
    std::vector<float> y(4 * 192);
    ggml_get_type_traits(t)->to_float(group.data(), y.data(), 4 * 192);
    const std::vector<double> want = ref_decode_r4_group(group.data(), 192);
    for (int i = 0; i < 4 * 192; ++i) ASSERT_EQ((double) y[i], want[i]) << i;
}

// Products at every level that has a kernel and runs here against the double product of the
// decoded weights (decoders above) and the decoded activations (of the kernel's activation type).
TEST(Bitnet, ProductsMatchDoubleReferenceAtEveryIsa) {
    int checked = 0;
    for (ggml_type t : { GGML_TYPE_IQ1_BN, GGML_TYPE_IQ2_BN, GGML_TYPE_IQ2_BN_R4 }) {
        const ggml_type vdt = ggml_cpu_get_type_traits(t)->vec_dot_type;
        ASSERT_TRUE(ggml_cpu_gemm_at(t, GGML_CPU_ISA_SCALAR)) << ggml_type_name(t);
        for (int64_t n : { (int64_t) 64, (int64_t) 320, (int64_t) 2560 }) {
            for (int nc : { 1, 3, 8, 19 }) {
                const int nr = 8;
                const std::vector<float> w = kiln_test::random_floats(nr * n, 31 + (uint32_t) n, -1.0f, 1.0f);
                const size_t row = ggml_row_size(t, n);
                std::vector<uint8_t> q(nr * row);
                ASSERT_EQ(ggml_quantize_chunk(t, w.data(), q.data(), 0, nr, n, nullptr), q.size());
                std::vector<double> wd(nr * n);
                for (int r = 0; r < nr; ++r) {
                    if (t == GGML_TYPE_IQ2_BN_R4) {
                        if (r % 4) continue;
                        const std::vector<double> g = ref_decode_r4_group(q.data() + r * row, n);
                        std::copy(g.begin(), g.end(), wd.begin() + r * n);
                    } else {
                        const std::vector<double> one = ref_decode_row(t, q.data() + r * row, n);
                        std::copy(one.begin(), one.end(), wd.begin() + r * n);
                    }
                }
                const std::vector<float> a = kiln_test::random_floats(nc * n, 41 + (uint32_t) (n + nc), -1.0f, 1.0f);
                const size_t arow = ggml_row_size(vdt, n);
                std::vector<uint8_t> aq(nc * arow);
                std::vector<float> ad(nc * n);
                for (int c = 0; c < nc; ++c) {
                    ggml_cpu_from_float(vdt)(a.data() + c * n, aq.data() + c * arow, n);
                    ggml_get_type_traits(vdt)->to_float(aq.data() + c * arow, ad.data() + c * n, n);
                }
                for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
                    for (bool batch : { false, true }) {
                        const ggml_gemm_t fn = batch ? ggml_cpu_batch_gemm_at(t, (ggml_cpu_isa) isa) : ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
                        if (!fn || !ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
                        std::vector<float> dst(nr * nc, NAN);
                        fn(n, q.data(), row, aq.data(), arow, dst.data(), nr, nr, nc);
                        for (int r = 0; r < nr; ++r) {
                            for (int c = 0; c < nc; ++c) {
                                double e = 0, s = 0;
                                for (int64_t i = 0; i < n; ++i) {
                                    e += wd[r * n + i] * ad[c * n + i];
                                    s += std::fabs(wd[r * n + i] * ad[c * n + i]);
                                }
                                ASSERT_NEAR(dst[c * nr + r], e, 2e-6 * s + 1e-30)
                                    << ggml_type_name(t) << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa) << (batch ? " batch" : "")
                                    << " n=" << n << " nc=" << nc << " row " << r << " col " << c;
                            }
                        }
                        ++checked;
                    }
                }
            }
        }
    }
    EXPECT_GT(checked, 0);
}

// Ids the reference projects define but Kiln does not read: each has a message that names it and
// what to do.
TEST(Bitnet, RemovedAndPlaceholderIdsExplainThemselves) {
    for (int id : { 31, 32, 33 }) {
        EXPECT_FALSE(ggml_type_is_valid(id));
        const char * why = ggml_type_unsupported_reason(id);
        ASSERT_NE(why, nullptr) << id;
        EXPECT_NE(std::string(why).find("removed ARM layout"), std::string::npos) << why;
        EXPECT_NE(std::string(why).find("requantize"), std::string::npos) << why;
    }
    EXPECT_FALSE(ggml_type_is_valid(36));
    ASSERT_NE(ggml_type_unsupported_reason(36), nullptr);
    EXPECT_NE(std::string(ggml_type_unsupported_reason(36)).find("I2_S"), std::string::npos);
    EXPECT_EQ(ggml_type_unsupported_reason(5), nullptr);
    EXPECT_EQ(ggml_type_unsupported_reason(GGML_TYPE_IQ1_BN), nullptr);
}

} // namespace
