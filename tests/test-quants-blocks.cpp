// The block arithmetic shared with the CUDA kernels (ggml/src/quants/quants-blocks.h and its
// sibling headers), checked on the host, bit for bit:
//   - every type of KILN_BLOCK_TYPES decodes the reference's own blocks of golden/quants.gguf
//     (q.T, qw.T) to exactly the reference's dequantized values (dq.T, dqw.T);
//   - where the CPU decodes a type with its own loops, the shared decoder gives exactly what the
//     type's to_float gives, for rows made by the quantizer and for random bytes (every bit
//     pattern of the row scale, block scales and quants, not only those a quantizer writes);
//   - where the CPU's to_float is the shared decoder (the lattice and ternary types), random
//     bytes decode to the values of the integer form the CPU's dot products use (lattice), and
//     ternary values survive the reference encoder exactly;
//   - the trellis types' matrix-product values (row scale times the reference's factor) are the
//     CPU gemm's;
//   - encode32_q8_0 writes the blocks quantize_row_q8_0_ref writes, with quants made with the
//     stored scale;
//   - the other KV-cache encoders (q4_0, q4_1, q5_0, q5_1, q6_0, iq4_nl blocks, q8_KV rows: the
//     GPU's cache writes) write the bytes the CPU's from_float writes;
//   - the fp16 / bf16 conversions match the library's on special and random values.
// This runs without a GPU: it is what keeps the device decoders honest in CI.
#include "testing.h"
#include "expect-same-bits.h"

#include "golden-quants-file.h"

#include "ggml.h"
#include "quants/quants-blocks.h"
#include "quants/quants-common.h"
#include "quants/quants-ik.h"
#include "quants/quants-iq.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
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

// The types whose CPU to_float is the shared decoder run over a row (kiln_row_to_float): comparing
// the two would compare a function with itself, so these are checked against independent forms
// (iq1_bn / iq2_bn: test-quants-bitnet's decoders written from the reference's layout).
bool cpu_decodes_with_shared(ggml_type t) {
    switch (t) {
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_M: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ3_S: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0:
        case GGML_TYPE_IQ1_BN: case GGML_TYPE_IQ2_BN: return true;
        default: return false;
    }
}

std::vector<block_type_case> all_cases() {
    std::vector<block_type_case> v;
#define KILN_CASE(type, block, qk, meta, fn) v.push_back({ type, sizeof(block), qk, meta, decode_with_traits<type> });
    KILN_BLOCK_TYPES(KILN_CASE)
#undef KILN_CASE
    return v;
}

std::vector<block_type_case> cases_with_own_cpu_decoder() {
    std::vector<block_type_case> v;
    for (const auto & c : all_cases()) {
        if (!cpu_decodes_with_shared(c.type)) v.push_back(c);
    }
    return v;
}

std::string case_name(const ::testing::TestParamInfo<block_type_case> & i) { return ggml_type_name(i.param.type); }

// (GoogleTest prints a parameter with its test; the type's name says it all)
void PrintTo(const block_type_case & c, std::ostream * os) { *os << ggml_type_name(c.type); }

using kiln_test::expect_same_values;

class QuantsBlocks : public ::testing::TestWithParam<block_type_case> {};

TEST_P(QuantsBlocks, LayoutFactsMatchTheTypeTable) {
    const block_type_case & c = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(c.type);
    ASSERT_TRUE(tt && tt->to_float) << ggml_type_name(c.type);
    EXPECT_EQ(tt->type_size, c.block_bytes) << "block size of " << ggml_type_name(c.type);
    EXPECT_EQ(tt->blck_size, c.qk) << "values per block of " << ggml_type_name(c.type);
    EXPECT_EQ(tt->row_meta_size, (size_t) c.row_meta) << "row scale of " << ggml_type_name(c.type);
    EXPECT_EQ(tt->nrows_interleaved, 1) << ggml_type_name(c.type);
}

// The shared decoder agrees with the CPU's own loops (types the CPU decodes without it).
class QuantsBlocksOwnCpu : public ::testing::TestWithParam<block_type_case> {};

// The CPU decodes iq3_kt through the integer form its gemm uses, which writes +0 where the
// reference (and the shared decoder) write -0: a zero magnitude with its sign bit set. Products
// are the same; everything else must match bit for bit.
bool cpu_zero_sign_differs(ggml_type t) { return t == GGML_TYPE_IQ3_KT; }

TEST_P(QuantsBlocksOwnCpu, DecodesQuantizedRowsLikeTheCpu) {
    const block_type_case & c = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(c.type);
    ASSERT_TRUE(tt && tt->to_float) << ggml_type_name(c.type);
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
    expect_same_values(want, got, std::string(ggml_type_name(c.type)) + " quantized", cpu_zero_sign_differs(c.type));
}

TEST_P(QuantsBlocksOwnCpu, DecodesRandomBytesLikeTheCpu) {
    const block_type_case & c = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(c.type);
    const int64_t n_blocks = 64;   // one row
    std::mt19937 rng(99 + c.type);
    std::vector<uint8_t> bytes(c.row_meta + n_blocks * c.block_bytes);
    for (auto & b : bytes) b = (uint8_t) rng();
    std::vector<float> want(n_blocks * c.qk), got(n_blocks * c.qk);
    tt->to_float(bytes.data(), want.data(), (int64_t) want.size());
    c.decode(bytes.data(), (int64_t) got.size(), 1, got.data());
    expect_same_values(want, got, std::string(ggml_type_name(c.type)) + " random bytes", cpu_zero_sign_differs(c.type));
}

INSTANTIATE_TEST_SUITE_P(AllSharedTypes, QuantsBlocks, ::testing::ValuesIn(all_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(CpuOwnDecoder, QuantsBlocksOwnCpu, ::testing::ValuesIn(cases_with_own_cpu_decoder()), case_name);

const golden_tensors & golden() {
    static const golden_tensors g = read_golden_tensors();
    return g;
}

// The reference's blocks decode to the reference's values, bit for bit (golden/README.md allows
// 1 ulp for arithmetic that is not plain float; every shared decoder reproduces it exactly).
TEST_P(QuantsBlocks, DecodesTheReferenceBlocksExactly) {
    const block_type_case & c = GetParam();
    const golden_tensors & g = golden();
    ASSERT_TRUE(g.error.empty()) << g.error;
    const std::string name = ggml_type_name(c.type);
    int forms = 0;
    for (const std::string form : { "", "w" }) {
        const std::string q_name = "q" + form + "." + name, dq_name = "dq" + form + "." + name;
        const golden_tensor * q = g.find(q_name);
        const golden_tensor * dq = g.find(dq_name);
        if (!q) continue;
        ASSERT_TRUE(dq) << q_name << " without its dequantized values";
        ASSERT_EQ(q->type, c.type);
        ASSERT_EQ(q->ne.size(), 2u);
        const int64_t n = q->ne[0], rows = q->ne[1];
        ASSERT_EQ(q->data.size(), ggml_row_size(c.type, n) * rows);
        std::vector<float> got(n * rows);
        c.decode(q->data.data(), n, rows, got.data());
        expect_same_values(std::vector<float>(dq->f32(), dq->f32() + n * rows), got, q_name);
        std::printf("%s: %lld blocks of %s decoded as %s\n", name.c_str(), (long long) (n / c.qk * rows), q_name.c_str(),
                    dq_name.c_str());
        ++forms;
    }
    if (forms == 0) GTEST_SKIP() << "golden/quants.gguf holds no q." << name << " or qw." << name;
}

// Every quantized type the CPU decodes is in the list, save the row-interleaved layouts (their own
// list, KILN_INTERLEAVED_TYPES, checked by test-quants-blocks-interleaved) and the activation types
// q8_1 / q8_K (never in model files): a type added to the CPU without a shared decoder fails here.
TEST(QuantsBlocksList, CoversEveryPlainTypeTheCpuDecodes) {
    const auto cases = all_cases();
    int covered = 0;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (!ggml_type_is_valid(t)) continue;
        const ggml_type_traits * tt = ggml_get_type_traits((ggml_type) t);
        if (!tt->is_quantized || !tt->to_float || tt->nrows_interleaved > 1) continue;
        if (t == GGML_TYPE_Q8_1 || t == GGML_TYPE_Q8_K) continue;
        bool found = false;
        for (const auto & c : cases) found = found || c.type == t;
        EXPECT_TRUE(found) << ggml_type_name((ggml_type) t) << " has a CPU decoder but no shared one";
        covered += found;
    }
    EXPECT_EQ(covered, (int) cases.size());
}

// ---- the lattice types: random bytes against the integer form of the CPU's dot products

// value = d * factor * sc[i / 16] * q[i], exact in double (at most 22 significant bits); the float
// decoders round twice (the sub-block scale, then the value).
struct lattice_case {
    ggml_type type;
    void (*decode)(const void * block, ggml_iq::decoded_block & out);
    float factor;
};

template <typename Block, void (*fn)(const Block &, ggml_iq::decoded_block &)>
void decode_int_form(const void * b, ggml_iq::decoded_block & out) {
    fn(*(const Block *) b, out);
}

TEST(QuantsBlocksLattice, RandomBytesDecodeToTheIntegerForm) {
    using namespace ggml_iq;
    const lattice_case lattice[] = {
        { GGML_TYPE_IQ2_XXS, decode_int_form<block_iq2_xxs, decode_iq2_xxs>, IQ2_DOT_FACTOR },
        { GGML_TYPE_IQ2_XS, decode_int_form<block_iq2_xs, decode_iq2_xs>, IQ2_DOT_FACTOR },
        { GGML_TYPE_IQ2_S, decode_int_form<block_iq2_s, decode_iq2_s>, IQ2_DOT_FACTOR },
        { GGML_TYPE_IQ3_XXS, decode_int_form<block_iq3_xxs, decode_iq3_xxs>, IQ3XXS_DOT_FACTOR },
        { GGML_TYPE_IQ3_S, decode_int_form<block_iq3_s, decode_iq3_s>, IQ3S_DOT_FACTOR },
        { GGML_TYPE_IQ1_S, decode_int_form<block_iq1_s, decode_iq1_s>, IQ1_DOT_FACTOR },
        { GGML_TYPE_IQ1_M, decode_int_form<block_iq1_m, decode_iq1_m>, IQ1_DOT_FACTOR },
    };
    const auto cases = all_cases();
    for (const lattice_case & l : lattice) {
        const block_type_case * c = nullptr;
        for (const auto & k : cases) c = k.type == l.type ? &k : c;
        ASSERT_TRUE(c) << ggml_type_name(l.type);
        std::mt19937 rng(17 + l.type);
        const int n_blocks = 512;
        std::vector<uint8_t> bytes(n_blocks * c->block_bytes);
        for (auto & b : bytes) b = (uint8_t) rng();
        std::vector<float> got(n_blocks * QK_K);
        c->decode(bytes.data(), (int64_t) got.size(), 1, got.data());
        int bad = 0, checked = 0;
        for (int ib = 0; ib < n_blocks; ++ib) {
            decoded_block db;
            l.decode(bytes.data() + ib * c->block_bytes, db);
            if (!std::isfinite(db.d)) continue;   // NaN / inf scales: nothing to compare with
            for (int i = 0; i < QK_K; ++i) {
                const double want = (double) db.d * l.factor * db.sc[i / 16] * db.q[i];
                const float y = got[ib * QK_K + i];
                // two roundings of a float, or of a subnormal (absolute 2^-149 each)
                const double tol = 2.5 * std::ldexp(std::fabs(want), -24) + 2 * std::ldexp(1.0, -149);
                if (!(std::fabs(y - want) <= tol) && bad++ < 5) {
                    ADD_FAILURE() << ggml_type_name(l.type) << " block " << ib << " value " << i << ": " << y << ", integer form " << want;
                }
                ++checked;
            }
        }
        EXPECT_EQ(bad, 0) << ggml_type_name(l.type);
        EXPECT_GT(checked, n_blocks * QK_K / 2) << ggml_type_name(l.type);
    }
}

// ---- the ternary types: the reference encoder's blocks decode to exactly what it encoded

TEST(QuantsBlocksTernary, EncodedTritsDecodeExactly) {
    for (ggml_type t : { GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0 }) {
        const int64_t n_blocks = 40;
        std::mt19937 rng(3 + t);
        std::vector<float> x(n_blocks * QK_K);
        for (int64_t ib = 0; ib < n_blocks; ++ib) {
            const float scale = std::ldexp(1.0f, (int) (rng() % 21) - 10);   // exact in fp16
            for (int j = 0; j < QK_K; ++j) x[ib * QK_K + j] = scale * (float) ((int) (rng() % 3) - 1);
            x[ib * QK_K + rng() % QK_K] = rng() % 2 ? scale : -scale;       // the block's max is the scale
        }
        std::vector<uint8_t> q(ggml_row_size(t, (int64_t) x.size()));
        ASSERT_GT(ggml_quantize_chunk(t, x.data(), q.data(), 0, 1, (int64_t) x.size(), nullptr), 0u);
        std::vector<float> got(x.size());
        if (t == GGML_TYPE_TQ1_0) kiln_row_to_float<GGML_TYPE_TQ1_0>(q.data(), got.data(), (int64_t) x.size());
        else kiln_row_to_float<GGML_TYPE_TQ2_0>(q.data(), got.data(), (int64_t) x.size());
        expect_same_values(x, got, ggml_type_name(t));
    }
}

// ---- the trellis types: matrix products scale the row by the reference's factor, as the CPU gemm

TEST(QuantsBlocksTrellis, MatmulValuesAreTheCpuGemms) {
    struct kt_case { ggml_type type; size_t bytes; void (*gemm_decode)(const void *, float, ik_decoded &); float factor; };
    const kt_case kts[] = {
        { GGML_TYPE_IQ1_KT, sizeof(block_iq1_kt), ik_decode_iq1_kt, kiln_block_traits<GGML_TYPE_IQ1_KT>::matmul_factor },
        { GGML_TYPE_IQ2_KT, sizeof(block_iq2_kt), ik_decode_iq2_kt_gemm, kiln_block_traits<GGML_TYPE_IQ2_KT>::matmul_factor },
        { GGML_TYPE_IQ3_KT, sizeof(block_iq3_kt), ik_decode_iq3_kt_gemm, kiln_block_traits<GGML_TYPE_IQ3_KT>::matmul_factor },
        { GGML_TYPE_IQ4_KT, sizeof(block_iq4_kt), ik_decode_iq4_kt, kiln_block_traits<GGML_TYPE_IQ4_KT>::matmul_factor },
    };
    EXPECT_EQ(kts[1].factor, 1.05f);   // golden/README.md: the reference's inference-time factors
    EXPECT_EQ(kts[2].factor, 1.01f);
    EXPECT_EQ(kts[0].factor, 1.0f);
    EXPECT_EQ(kts[3].factor, 1.0f);
    for (const kt_case & k : kts) {
        const int n_blocks = 16;
        std::mt19937 rng(40 + k.type);
        std::vector<uint8_t> row(4 + n_blocks * k.bytes);
        for (auto & b : row) b = (uint8_t) rng();
        const float row_d = 0.0123f;
        std::memcpy(row.data(), &row_d, 4);
        std::vector<float> want(n_blocks * QK_K), got(n_blocks * QK_K);
        ik_decoded db;
        for (int ib = 0; ib < n_blocks; ++ib) {
            k.gemm_decode(row.data() + 4 + ib * k.bytes, row_d, db);
            for (int i = 0; i < QK_K; ++i) want[ib * QK_K + i] = db.d * (float) db.sc[i / 16] * (float) db.q[i];
        }
        for (int64_t ch = 0; ch < n_blocks * QK_K / 32; ++ch) {
            switch (k.type) {
#define KILN_KT_CASE(T) \
    case T: kiln_block_traits<T>::decode_row((const char *) row.data(), ch, got.data() + 32 * ch, kiln_block_traits<T>::matmul_factor); break;
                KILN_KT_CASE(GGML_TYPE_IQ1_KT)
                KILN_KT_CASE(GGML_TYPE_IQ2_KT)
                KILN_KT_CASE(GGML_TYPE_IQ3_KT)
                KILN_KT_CASE(GGML_TYPE_IQ4_KT)
#undef KILN_KT_CASE
                default: FAIL();
            }
        }
        expect_same_values(want, got, std::string(ggml_type_name(k.type)) + " matmul values", cpu_zero_sign_differs(k.type));
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

// Rows that make the encoders' branches and roundings happen: blocks of every magnitude (a
// random one per block, 1e-7 .. 1e4), an all-zero block, a constant block (q4_1/q5_1: d = 0), a
// subnormal block (no inverse scale), a block below iq4_nl's 1e-15 cut, one of equal magnitudes
// (the first one's sign wins), and values on the grid's half steps (the + 0.5 truncation).
std::vector<float> kv_encoder_rows(int64_t n, uint32_t seed) {
    std::vector<float> x = kiln_test::random_floats(n, seed, -1.0f, 1.0f);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> lg(-7.0f, 4.0f);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float s = std::pow(10.0f, lg(rng));
        for (int j = 0; j < 32; ++j) x[32 * ib + j] *= s;
    }
    auto block = [&](int64_t ib) { return x.data() + 32 * (ib % (n / 32)); };
    for (int j = 0; j < 32; ++j) block(1)[j] = 0.0f;
    for (int j = 0; j < 32; ++j) block(2)[j] = 0.75f;
    for (int j = 0; j < 32; ++j) block(3)[j] = (j % 3 ? 1e-40f : -2e-40f);
    for (int j = 0; j < 32; ++j) block(4)[j] = (j % 2 ? 1e-16f : -3e-16f);
    for (int j = 0; j < 32; ++j) block(5)[j] = (j % 2 ? 2.0f : -2.0f);
    for (int j = 0; j < 32; ++j) block(6)[j] = -8.0f + 0.5f * (float) (j % 33);
    for (int j = 0; j < 32; ++j) block(7)[j] = 16.0f - 1.0f * (float) j;
    return x;
}

// A block whose values sit where level = (x - sub) * id + c truncates differently when the
// product is rounded first (what the CPU computes) and when it is fused into one FMA (what nvcc
// makes of a plain a * b + c): the shared encoders must round the product first (kiln_mul_rn).
// `first` and `second` are the block's extremes (they fix d); the others are searched near each
// level boundary. Counts the values found in `sensitive`.
std::vector<float> fma_boundary_block(float first, float second, float id, float c, float sub, int top, int & sensitive) {
    std::vector<float> b(32);
    b[0] = first;
    b[1] = second;
    for (int j = 2; j < 32; ++j) {
        const int k = 1 + j % (top - 1);
        const float x0 = ((float) k - c) / id + sub;
        b[j] = x0;
        float x = x0;
        for (int step = 0; step < 400; ++step) {
            x = std::nextafter(x, step % 2 ? 1e30f : -1e30f);
            const float y = step % 2 ? x : std::nextafter(x0, -1e30f);
            const volatile float prod = (y - sub) * id;   // rounded, never fused
            if ((int) (prod + c) != (int) std::fma(y - sub, id, c)) {
                b[j] = y;
                ++sensitive;
                break;
            }
        }
    }
    return b;
}

// The legacy formats' reference encoders written plainly, as ggml defines them, each product
// rounded to float before the add (volatile: never fused). The CPU's quantizers and the GPU's
// cache writes are one function (quants-blocks.h), so this is what both are checked against.
struct plain_levels {
    float d = 0.0f, m = 0.0f;
    uint8_t L[32];
};

plain_levels plain_symmetric(const float * x, int half) {
    plain_levels r;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    r.d = max / (float) -half;
    const float id = std::fabs(r.d) >= FLT_MIN ? 1.0f / r.d : 0.0f;
    for (int j = 0; j < 32; ++j) {
        const volatile float p = x[j] * id;
        r.L[j] = (uint8_t) std::min(2 * half - 1, (int) (p + ((float) half + 0.5f)));
    }
    return r;
}

plain_levels plain_offset(const float * x, int top) {
    plain_levels r;
    float mn = FLT_MAX, mx = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
        mn = std::min(mn, x[j]);
        mx = std::max(mx, x[j]);
    }
    r.d = (mx - mn) / (float) top;
    r.m = mn;
    const float id = std::fabs(r.d) >= FLT_MIN ? 1.0f / r.d : 0.0f;
    for (int j = 0; j < 32; ++j) {
        const volatile float p = (x[j] - mn) * id;
        r.L[j] = (uint8_t) std::min(top, (int) (p + 0.5f));
    }
    return r;
}

// n values of type t as the reference writes them: the plain encoders above for the legacy
// formats, the CPU's own reference quantizer for the others (q8_0, iq4_nl).
void reference_blocks(ggml_type t, const float * x, int64_t n, void * out) {
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float * xb = x + 32 * ib;
        switch (t) {
            case GGML_TYPE_Q4_0: {
                const plain_levels r = plain_symmetric(xb, 8);
                auto & b = ((block_q4_0 *) out)[ib];
                b.d = ggml_fp32_to_fp16(r.d);
                kiln_pack_nibbles32(r.L, b.qs);
                break;
            }
            case GGML_TYPE_Q5_0: {
                const plain_levels r = plain_symmetric(xb, 16);
                auto & b = ((block_q5_0 *) out)[ib];
                b.d = ggml_fp32_to_fp16(r.d);
                kiln_pack_q5(r.L, b.qs, b.qh);
                break;
            }
            case GGML_TYPE_Q6_0: {
                const plain_levels r = plain_symmetric(xb, 32);
                auto & b = ((block_q6_0 *) out)[ib];
                b.d = ggml_fp32_to_fp16(r.d);
                kiln_pack_q6(r.L, b.qs, b.qh);
                break;
            }
            case GGML_TYPE_Q4_1: {
                const plain_levels r = plain_offset(xb, 15);
                auto & b = ((block_q4_1 *) out)[ib];
                b.d = ggml_fp32_to_fp16(r.d);
                b.m = ggml_fp32_to_fp16(r.m);
                kiln_pack_nibbles32(r.L, b.qs);
                break;
            }
            case GGML_TYPE_Q5_1: {
                const plain_levels r = plain_offset(xb, 31);
                auto & b = ((block_q5_1 *) out)[ib];
                b.d = ggml_fp32_to_fp16(r.d);
                b.m = ggml_fp32_to_fp16(r.m);
                kiln_pack_q5(r.L, b.qs, b.qh);
                break;
            }
            default:
                ggml_get_type_traits(t)->from_float_ref(x, out, n);
                return;
        }
    }
}

TEST(QuantsBlocksKvEncoders, BlocksAreTheCpuQuantizers) {
    // many blocks: a scale that differs in its last float bit shows only where the fp16 rounding of
    // d or a level's rounding sits near a boundary
    std::vector<float> x = kv_encoder_rows(32 * 40000, 21);
    int sensitive = 0;
    for (int rep = 0; rep < 8; ++rep) {
        const float e = -3.3f - 0.37f * (float) rep;
        for (int half : { 8, 16, 32 }) {   // q4_0, q5_0, q6_0: d = extreme / -half
            const std::vector<float> b = fma_boundary_block(e, 0.1f, 1.0f / (e / (float) -half), (float) half + 0.5f, 0.0f,
                                                            2 * half, sensitive);
            x.insert(x.end(), b.begin(), b.end());
        }
        const float mn = -1.7f - 0.13f * (float) rep, mx = 2.9f + 0.21f * (float) rep;
        for (int top : { 15, 31 }) {   // q4_1, q5_1: d = (max - min) / top
            const std::vector<float> b = fma_boundary_block(mn, mx, 1.0f / ((mx - mn) / (float) top), 0.5f, mn, top, sensitive);
            x.insert(x.end(), b.begin(), b.end());
        }
    }
    EXPECT_GT(sensitive, 100) << "too few values on which fusing the multiply-add changes a level";
    const int64_t n = (int64_t) x.size();
    int checked = 0;
#define KILN_KV_CASE(t, block, fn)                                                                              \
    {                                                                                                           \
        SCOPED_TRACE(ggml_type_name(t));                                                                        \
        ASSERT_NE(ggml_get_type_traits(t)->from_float_ref, nullptr);                                            \
        std::vector<block> want(n / 32), got(n / 32);                                                           \
        std::memset(want.data(), 0x5a, want.size() * sizeof(block));                                          \
        std::memset(got.data(), 0xa5, got.size() * sizeof(block));                                             \
        reference_blocks(t, x.data(), n, want.data());                                                          \
        for (int64_t ib = 0; ib < n / 32; ++ib) {                                                               \
            ASSERT_TRUE(kiln_encode_kv_block(t, x.data() + 32 * ib, (char *) got.data(), ib));                  \
        }                                                                                                       \
        int bad = 0;                                                                                            \
        for (int64_t ib = 0; ib < n / 32; ++ib) {                                                               \
            if (std::memcmp(&want[ib], &got[ib], sizeof(block)) != 0 && bad++ < 5) ADD_FAILURE() << "block " << ib; \
        }                                                                                                       \
        EXPECT_EQ(bad, 0);                                                                                      \
        ++checked;                                                                                              \
    }
    KILN_KV_BLOCK_TYPES(KILN_KV_CASE)
#undef KILN_KV_CASE
    EXPECT_EQ(checked, 7);
    EXPECT_FALSE(kiln_encode_kv_block(GGML_TYPE_Q4_K, x.data(), nullptr, 0));
    EXPECT_TRUE(kiln_kv_quant_type(GGML_TYPE_Q8_KV));
    EXPECT_FALSE(kiln_kv_quant_type(GGML_TYPE_F16));
}

// q8_KV written plainly: f32 d = max|x| / 127, q = x / d rounded to nearest, ties to even
// (nearbyint in the default rounding mode), the i32 sum of the quants before them.
void plain_q8_kv_row(const float * x, int64_t n, char * row) {
    float amax = 0.0f;
    for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax == 0.0f ? 0.0f : amax / 127.0f;
    const float id = amax == 0.0f ? 0.0f : 1.0f / d;
    int32_t sum = 0;
    for (int64_t j = 0; j < n; ++j) {
        const volatile float p = x[j] * id;
        const int q = std::max(-127, std::min(127, (int) std::nearbyint((float) p)));
        row[8 + j] = (char) (int8_t) q;
        sum += q;
    }
    std::memcpy(row, &d, 4);
    std::memcpy(row + 4, &sum, 4);
}

TEST(QuantsBlocksKvEncoders, Q8KvRowsAreTheCpuQuantizer) {
    const ggml_from_float_t cpu = ggml_get_type_traits(GGML_TYPE_Q8_KV)->from_float_ref;
    ASSERT_NE(cpu, nullptr);
    for (int64_t n : { 32, 64, 128, 576 }) {
        for (uint32_t seed = 0; seed < 40; ++seed) {
            std::vector<float> x = kiln_test::random_floats(n, 100 + seed, -1.0f, 1.0f);
            const float s = std::pow(10.0f, (float) (seed % 11) - 6.0f);
            for (float & v : x) v *= s;
            if (seed == 1) std::fill(x.begin(), x.end(), 0.0f);
            if (seed == 2) {   // d = 1 exactly: every other value a tie (x.5), both signs
                for (int64_t j = 0; j < n; ++j) x[j] = (float) (j % 40) - 19.5f;
                x[n / 2] = -127.0f;
            }
            const size_t bytes = ggml_row_size(GGML_TYPE_Q8_KV, n);
            ASSERT_EQ(bytes, 8 + (size_t) n);
            std::vector<char> want(bytes, 0x5a), got(bytes, (char) 0xa5);
            plain_q8_kv_row(x.data(), n, want.data());
            cpu(x.data(), got.data(), n);   // the CPU's quantizer is the shared encoder
            EXPECT_EQ(0, std::memcmp(want.data(), got.data(), bytes)) << "n " << n << " seed " << seed;
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
