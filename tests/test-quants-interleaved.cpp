// Row-interleaved layouts (ggml/src/quants/quants-interleaved*.cpp) against their plain twins:
//   - quantizing with the interleaved type equals quantizing with the twin and weaving: both
//     decode to the same values (with and without importance weights), and repacking the
//     twin's rows (ggml_repack_rows) gives the interleaved type's bytes;
//   - the registered scalar gemm of every interleaved type with a decoder agrees with the exact
//     product of its decoded rows, whole tensors and strided row views alike;
//   - every interleaved type names a plain twin of its own block size family.
// The decode/quantize/gemm checks run for every interleaved type that has a decoder; such a type
// must also have a quantizer and a scalar gemm. iq1_s_r4 / iq1_m_r4 are quantized on their own
// (not woven): for them the error is compared with the twin's instead.
#include "testing.h"

#include "cpu-traits.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<ggml_type> interleaved_types(bool decodable_only) {
    std::vector<ggml_type> out;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (!ggml_type_is_valid(t)) continue;
        const ggml_type_traits * tt = ggml_get_type_traits((ggml_type) t);
        if (tt->nrows_interleaved > 1 && (!decodable_only || tt->to_float)) out.push_back((ggml_type) t);
    }
    return out;
}

// Rows of weights with a few outliers (what pushes scales around in real tensors).
std::vector<float> weights(int64_t nrows, int64_t ncols, uint32_t seed) {
    std::vector<float> w = kiln_test::random_floats(nrows * ncols, seed, -1.0f, 1.0f);
    for (size_t i = 0; i < w.size(); i += 97) w[i] *= 6.0f;
    return w;
}

std::vector<float> decode(ggml_type t, const std::vector<uint8_t> & q, int64_t nrows, int64_t ncols) {
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    const int64_t R = tt->nrows_interleaved;
    const size_t row = ggml_row_size(t, ncols);
    std::vector<float> out(nrows * ncols, NAN);
    for (int64_t r = 0; r < nrows; r += R) tt->to_float(q.data() + r * row, out.data() + r * ncols, R * ncols);
    return out;
}

std::vector<uint8_t> quantize(ggml_type t, const std::vector<float> & src, int64_t nrows, int64_t ncols, const float * imatrix) {
    std::vector<uint8_t> q(nrows * ggml_row_size(t, ncols));
    const size_t written = ggml_quantize_chunk(t, src.data(), q.data(), 0, nrows, ncols, imatrix);
    EXPECT_EQ(written, q.size()) << ggml_type_name(t);
    return q;
}

class InterleavedLayout : public ::testing::TestWithParam<ggml_type> {};
class Interleaved : public ::testing::TestWithParam<ggml_type> {};

TEST_P(InterleavedLayout, TwinIsPlainTypeOfSameFamily) {
    const ggml_type t = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    const ggml_type base = tt->interleaved_base;
    ASSERT_NE(base, t);
    ASSERT_TRUE(ggml_type_is_valid(base));
    EXPECT_EQ(ggml_get_type_traits(base)->nrows_interleaved, 1) << ggml_type_name(t);
    // the twin's name (any case) with an _rN suffix
    std::string name = tt->type_name, bname = ggml_type_name(base);
    for (auto * s : { &name, &bname }) {
        for (char & c : *s) c = (char) std::tolower((unsigned char) c);
    }
    EXPECT_EQ(name.compare(0, bname.size(), bname), 0) << name << " vs " << bname;
    EXPECT_EQ(name.compare(name.rfind("_r"), std::string::npos, "_r" + std::to_string(tt->nrows_interleaved)), 0) << name;
}

TEST_P(Interleaved, QuantizeEqualsTwinThenWeave) {
    const ggml_type t = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    ASSERT_TRUE(tt->quantize) << ggml_type_name(t) << ": decodes but has no quantizer";
    const ggml_type base = tt->interleaved_base;
    const int64_t ncols = 512, nrows = 2 * tt->nrows_interleaved;
    const std::vector<float> src = weights(nrows, ncols, 1234 + t);
    std::vector<float> imatrix = kiln_test::random_floats(ncols, 99, 0.05f, 2.0f);
    for (const float * im : { (const float *) nullptr, (const float *) imatrix.data() }) {
        if (!im && ggml_quantize_requires_imatrix(base)) continue;
        const std::vector<float> ours = decode(t, quantize(t, src, nrows, ncols, im), nrows, ncols);
        const std::vector<float> twin = decode(base, quantize(base, src, nrows, ncols, im), nrows, ncols);
        if (!tt->weave) {
            // quantized on its own (iq1_s_r4, iq1_m_r4: 32-value blocks, a scale per row): its
            // error must stay close to the twin's
            auto err = [&](const std::vector<float> & q) {
                double e = 0, s2 = 0;
                for (size_t i = 0; i < q.size(); ++i) {
                    const double w = im ? im[i % ncols] : 1.0;
                    e += w * (q[i] - src[i]) * (q[i] - src[i]);
                    s2 += w * src[i] * src[i];
                }
                return std::sqrt(e / s2);
            };
            EXPECT_LE(err(ours), 1.1 * err(twin)) << ggml_type_name(t) << (im ? " (imatrix)" : "") << " vs twin " << err(twin);
            continue;
        }
        // q8_k_r8/r16 keep the twin's f32 row scale as fp16 (the reference's layout): equal up
        // to that rounding. Everything else decodes to the same values (+0 and -0 alike: the
        // reference's r4 decoders write d * q - 16 d where the plain ones write (q - 16) * d).
        const bool fp16_scale = base == GGML_TYPE_Q8_K;
        int64_t diff = 0, first = -1;
        for (size_t i = 0; i < ours.size(); ++i) {
            const bool same = fp16_scale ? std::fabs(ours[i] - twin[i]) <= std::ldexp(std::fabs(twin[i]), -11)
                                         : ours[i] == twin[i];
            if (!same) {
                if (first < 0) first = (int64_t) i;
                ++diff;
            }
        }
        EXPECT_EQ(diff, 0) << ggml_type_name(t) << (im ? " (imatrix)" : "") << ": first at row " << first / ncols
                           << " col " << first % ncols << ": " << ours[first] << " vs twin " << twin[first];
    }
}

// --repack and -rtr turn stored rows of the twin into the interleaved layout: the bytes must be
// those the interleaved quantizer writes, and the twin must name this type back.
TEST_P(Interleaved, RepackOfTwinRowsEqualsQuantize) {
    const ggml_type t = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    const ggml_type base = tt->interleaved_base;
    const int64_t ncols = 512, nrows = 3 * tt->nrows_interleaved;
    const std::vector<float> src = weights(nrows, ncols, 4321 + t);
    std::vector<float> imatrix = kiln_test::random_floats(ncols, 7, 0.05f, 2.0f);
    const float * im = ggml_quantize_requires_imatrix(base) ? imatrix.data() : nullptr;
    if (!tt->weave) {
        // quantized on its own (iq1_s_r4, iq1_m_r4): no repacking from the plain type
        std::vector<uint8_t> plain = quantize(base, src, nrows, ncols, im), out(nrows * ggml_row_size(t, ncols));
        EXPECT_EQ(ggml_repack_rows(t, plain.data(), out.data(), nrows, ncols), 0u);
        EXPECT_NE(ggml_interleaved_twin(base), t);
        return;
    }
    const std::vector<uint8_t> direct = quantize(t, src, nrows, ncols, im);
    const std::vector<uint8_t> plain = quantize(base, src, nrows, ncols, im);
    std::vector<uint8_t> repacked(direct.size(), 0xAB);
    ASSERT_EQ(ggml_repack_rows(t, plain.data(), repacked.data(), nrows, ncols), direct.size()) << ggml_type_name(t);
    EXPECT_TRUE(repacked == direct) << ggml_type_name(t);
    EXPECT_EQ(ggml_repack_rows(t, plain.data(), repacked.data(), nrows - 1, ncols), 0u) << "partial group accepted";
    // every plain type with a weavable twin maps to exactly one of them
    const ggml_type twin = ggml_interleaved_twin(base);
    EXPECT_EQ(ggml_get_type_traits(twin)->interleaved_base, base) << ggml_type_name(base);
    EXPECT_NE(twin, base) << ggml_type_name(base) << " has no twin although " << ggml_type_name(t) << " weaves it";
}

TEST_P(Interleaved, ScalarGemmMatchesDecodedProduct) {
    const ggml_type t = GetParam();
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    const ggml_gemm_t gemm = ggml_cpu_gemm_at(t, GGML_CPU_ISA_SCALAR);
    ASSERT_TRUE(tt->quantize && gemm) << ggml_type_name(t) << ": decodes but has no quantizer or scalar gemm";
    // 512, and where the layout's blocks are shorter than 256 a row that is not whole 256-value
    // blocks (iq1_s_r4 / iq1_m_r4 have 32-value blocks over twins of 256)
    std::vector<int64_t> lengths = { 512 };
    if (tt->blck_size < 256) lengths.push_back(512 + 256 - tt->blck_size);
    for (const int64_t ncols : lengths) {
    SCOPED_TRACE("row length " + std::to_string(ncols));
    const int64_t R = tt->nrows_interleaved, nrows = 2 * R;
    const int nact = 3;
    const std::vector<uint8_t> q = quantize(t, weights(nrows, ncols, 77 + t), nrows, ncols, nullptr);
    const std::vector<float> w = decode(t, q, nrows, ncols);
    const std::vector<float> act = kiln_test::random_floats(nact * ncols, 5);
    const ggml_type vdt = ggml_cpu_get_type_traits(t)->vec_dot_type;
    ggml_from_float_t enc = ggml_cpu_from_float_at(vdt, GGML_CPU_ISA_SCALAR);
    if (!enc) enc = ggml_get_type_traits(vdt)->from_float_ref;
    ASSERT_TRUE(enc);
    const size_t act_row = ggml_row_size(vdt, ncols), row = ggml_row_size(t, ncols);
    std::vector<uint8_t> xq(nact * act_row);
    for (int c = 0; c < nact; ++c) enc(act.data() + c * ncols, xq.data() + c * act_row, ncols);
    // the whole tensor, then its second group through a strided copy (rows 2 row sizes apart)
    std::vector<float> dst(nact * nrows, NAN);
    gemm(ncols, q.data(), row, xq.data(), act_row, dst.data(), nrows, (int) nrows, nact);
    std::vector<uint8_t> spread(2 * R * row);
    for (int64_t k = 0; k < R; ++k) std::memcpy(spread.data() + 2 * k * row, q.data() + (R + k) * row, row);
    std::vector<float> dst2(nact * R, NAN);
    gemm(ncols, spread.data(), 2 * row, xq.data(), act_row, dst2.data(), R, (int) R, nact);
    for (int c = 0; c < nact; ++c) {
        double norm = 0;
        for (int64_t i = 0; i < ncols; ++i) norm += std::fabs(act[c * ncols + i]);
        for (int64_t r = 0; r < nrows; ++r) {
            double exact = 0, scale = 0;
            for (int64_t i = 0; i < ncols; ++i) {
                exact += (double) w[r * ncols + i] * act[c * ncols + i];
                scale = std::max(scale, (double) std::fabs(w[r * ncols + i]));
            }
            // activation rounding (8-bit types) bounds the error by ~1% of |w|max * sum|a|
            const double tol = (vdt == GGML_TYPE_F32 ? 1e-5 : 1e-2) * scale * norm + 1e-6;
            EXPECT_NEAR(dst[c * nrows + r], exact, tol) << ggml_type_name(t) << " row " << r << " col " << c;
            if (r >= R) { EXPECT_EQ(dst2[c * R + r - R], dst[c * nrows + r]) << ggml_type_name(t) << ": strided rows"; }
        }
    }}
}

// A repacked (--repack, -rtr) model must give its original's logits, so an interleaved layout
// whose twin has a batch pair (q4_K / q5_K / q6_K: per-32 q8_0 activations, cpu-traits.h) has
// the same pair at the same levels, and its batch products are the twin's bit for bit at every
// level this CPU runs: row counts that are not whole panels (4, 20, 36 rows), column counts below
// and above the panels' tiles, one, three and 25 super-blocks (there the AVX2 panels cut K into
// slabs of unequal length, kSlabBytes), strided rows.
// The products of layout t and of its twin by the kernels ours and twin, bit for bit: woven from
// the twin's rows (40 bytes of gap between rows), n in {256, 768, 6400}, R, 5 R and 9 R of 9 R
// rows (R: the layout's rows per group), each column count of ncs; activations of type vdt.
// Returns the products compared.
int expect_twin_bits(ggml_type t, ggml_gemm_t ours, ggml_gemm_t twin, ggml_type vdt, const std::vector<int> & ncs,
                     const char * isa) {
    const ggml_type base = ggml_get_type_traits(t)->interleaved_base;
    const int R = ggml_get_type_traits(t)->nrows_interleaved, nr = 9 * R;
    int compared = 0;
    for (const int64_t n : { 256, 768, 6400 }) {
        const size_t prow = ggml_row_size(base, n), wrow = ggml_row_size(t, n);
        const std::vector<uint8_t> plain = quantize(base, weights(nr, n, 55 + t), nr, n, nullptr);
        std::vector<uint8_t> woven(nr * wrow);
        EXPECT_EQ(ggml_repack_rows(t, plain.data(), woven.data(), nr, n), woven.size()) << ggml_type_name(t);
        if (::testing::Test::HasFailure()) return compared;
        // rows 40 bytes further apart than their size
        std::vector<uint8_t> ps(nr * (prow + 40), 0xCD), ws(nr * (wrow + 40), 0xCD);
        for (int r = 0; r < nr; ++r) {
            std::memcpy(ps.data() + r * (prow + 40), plain.data() + r * prow, prow);
            std::memcpy(ws.data() + r * (wrow + 40), woven.data() + r * wrow, wrow);
        }
        const int ncmax = *std::max_element(ncs.begin(), ncs.end());
        const size_t xrow = ggml_row_size(vdt, n);
        const std::vector<float> act = kiln_test::random_floats(ncmax * n, 31 + (uint32_t) n, -2.0f, 2.0f);
        std::vector<uint8_t> xq(ncmax * xrow);
        for (int c = 0; c < ncmax; ++c) ggml_get_type_traits(vdt)->from_float_ref(act.data() + c * n, xq.data() + c * xrow, n);
        for (const int rows : { R, 5 * R, 9 * R }) {
            for (const int nc : ncs) {
                std::vector<float> a(nc * nr, -7.0f), b(nc * nr, -9.0f);
                twin(n, ps.data(), prow + 40, xq.data(), xrow, a.data(), nr, rows, nc);
                ours(n, ws.data(), wrow + 40, xq.data(), xrow, b.data(), nr, rows, nc);
                for (int c = 0; c < nc; ++c) {
                    for (int r = 0; r < nr; ++r) {
                        const float want = r < rows ? a[c * nr + r] : -9.0f;
                        EXPECT_EQ(std::memcmp(&want, &b[c * nr + r], 4), 0)
                            << ggml_type_name(t) << " " << isa << " n=" << n << " rows=" << rows << " nc=" << nc << ": row " << r
                            << " col " << c << ": " << b[c * nr + r] << ", twin " << want;
                        if (::testing::Test::HasFailure()) return compared;
                    }
                }
                ++compared;
            }
        }
    }
    return compared;
}

TEST(InterleavedBatch, ProductsAreTheTwinsBitForBit) {
    int types = 0, compared = 0;
    for (ggml_type t : interleaved_types(true)) {
        const ggml_cpu_type_traits * ct = ggml_cpu_get_type_traits(t);
        const ggml_type base = ggml_get_type_traits(t)->interleaved_base;
        const ggml_cpu_type_traits * bt = ggml_cpu_get_type_traits(base);
        EXPECT_EQ(ct->batch_vec_dot_type, bt->batch_vec_dot_type) << ggml_type_name(t) << " vs " << ggml_type_name(base);
        if (bt->batch_vec_dot_type == GGML_TYPE_COUNT || !ggml_get_type_traits(t)->weave) continue;
        ++types;
        for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
            const ggml_gemm_t ours = ggml_cpu_batch_gemm_at(t, (ggml_cpu_isa) isa), twin = ggml_cpu_batch_gemm_at(base, (ggml_cpu_isa) isa);
            EXPECT_EQ(ours != nullptr, twin != nullptr) << ggml_type_name(t) << " at " << ggml_cpu_isa_name((ggml_cpu_isa) isa);
            if (!ours || !twin || !ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
            compared += expect_twin_bits(t, ours, twin, bt->batch_vec_dot_type, { 1, 2, 5, 6, 7, 9, 17 },
                                         ggml_cpu_isa_name((ggml_cpu_isa) isa));
            if (HasFailure()) return;
        }
    }
    EXPECT_GE(types, 3) << "q4_k_r4, q5_k_r4 and q6_k_r4 take their twins' batch pair";
    EXPECT_GT(compared, 0);
    std::printf("[ compared ] %d interleaved types with batch pairs, %d products\n", types, compared);
}

// At AVX2 the batches (6 columns and more, kiln_panel::kMinCols) of the non-linear ik r4 layouts
// and iq4_xs_r8 pack their twins' folded super-block records (avx2/panel-r8-fold.h): their
// products are the twins' bit for bit.
TEST(InterleavedBatch, Avx2FoldedBatchesAreTheTwinsBitForBit) {
    if (!ggml_cpu_isa_runs_here(GGML_CPU_ISA_AVX2)) GTEST_SKIP() << "no AVX2 here";
    int compared = 0;
    for (ggml_type t : { GGML_TYPE_IQ2_K_R4, GGML_TYPE_IQ3_K_R4, GGML_TYPE_IQ4_K_R4, GGML_TYPE_IQ5_K_R4, GGML_TYPE_IQ4_KS_R4,
                         GGML_TYPE_IQ5_KS_R4, GGML_TYPE_IQ4_XS_R8 }) {
        const ggml_type base = ggml_get_type_traits(t)->interleaved_base;
        const ggml_gemm_t ours = ggml_cpu_gemm_at(t, GGML_CPU_ISA_AVX2), twin = ggml_cpu_gemm_at(base, GGML_CPU_ISA_AVX2);
        ASSERT_TRUE(ours && twin) << ggml_type_name(t);
        compared += expect_twin_bits(t, ours, twin, GGML_TYPE_Q8_K, { 6, 7, 9, 17 }, "avx2");
        if (HasFailure()) return;
    }
    EXPECT_EQ(compared, 7 * 3 * 3 * 4);
}

// Token generation cuts a product by rows (threads, -sm graph) and calls a kernel with the few
// columns a step has: for the q8_K kernels of q2_k_r4 .. q6_k_r4, iq2_k_r4 .. iq5_ks_r4, iq4_xs_r8
// and iq2_xxs_r4 .. iq3_s_r4, and the q8_0 ones of iq4_nl_r4, q5_0_r4, q6_0_r4, q4_0_r8, q8_0_r8, mxfp4_r8,
// iq1_s_r4, iq1_m_r4 at every level
// this CPU runs, 3 R rows x 5 columns in one call give bit for bit what row groups [0,R), [R,3R)
// one column at a time give (their token-generation loop, gemv-interleaved-loop.h, tiles columns
// differently per count).
TEST(InterleavedTokenGeneration, ProductDoesNotDependOnTheCut) {
    const int64_t n = 768;
    const int nc = 5;
    int compared = 0;
    for (ggml_type t : { GGML_TYPE_Q2_K_R4, GGML_TYPE_Q3_K_R4, GGML_TYPE_Q4_K_R4, GGML_TYPE_Q5_K_R4, GGML_TYPE_Q6_K_R4,
                         GGML_TYPE_IQ2_K_R4, GGML_TYPE_IQ3_K_R4, GGML_TYPE_IQ4_K_R4, GGML_TYPE_IQ5_K_R4, GGML_TYPE_IQ4_KS_R4,
                         GGML_TYPE_IQ5_KS_R4, GGML_TYPE_IQ4_NL_R4, GGML_TYPE_Q5_0_R4, GGML_TYPE_Q6_0_R4, GGML_TYPE_Q4_0_R8,
                         GGML_TYPE_Q8_0_R8, GGML_TYPE_MXFP4_R8, GGML_TYPE_IQ4_XS_R8, GGML_TYPE_IQ2_XXS_R4, GGML_TYPE_IQ2_XS_R4,
                         GGML_TYPE_IQ2_S_R4, GGML_TYPE_IQ3_XXS_R4, GGML_TYPE_IQ3_S_R4, GGML_TYPE_IQ1_S_R4,
                         GGML_TYPE_IQ1_M_R4 }) {
        const int R = ggml_get_type_traits(t)->nrows_interleaved, nr = 3 * R;   // 12 or 24 rows, cut at R
        const size_t row = ggml_row_size(t, n);
        const std::vector<uint8_t> q = quantize(t, weights(nr, n, 900 + t), nr, n, nullptr);
        const ggml_type vdt = ggml_cpu_get_type_traits(t)->vec_dot_type;
        ASSERT_TRUE(vdt == GGML_TYPE_Q8_K || vdt == GGML_TYPE_Q8_0) << ggml_type_name(t);
        const size_t xrow = ggml_row_size(vdt, n);
        const std::vector<float> act = kiln_test::random_floats(nc * n, 17, -2.0f, 2.0f);
        std::vector<uint8_t> xq(nc * xrow);
        for (int c = 0; c < nc; ++c) ggml_get_type_traits(vdt)->from_float_ref(act.data() + c * n, xq.data() + c * xrow, n);
        for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
            const ggml_gemm_t fn = ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
            if (!fn || !ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
            std::vector<float> whole(nc * nr, -7.0f), cut(nc * nr, -9.0f);
            fn(n, q.data(), row, xq.data(), xrow, whole.data(), nr, nr, nc);
            const int cuts[] = { 0, R, nr };
            for (int p = 0; p < 2; ++p) {
                for (int c = 0; c < nc; ++c) {
                    fn(n, q.data() + cuts[p] * row, row, xq.data() + c * xrow, xrow, cut.data() + c * nr + cuts[p], nr,
                       cuts[p + 1] - cuts[p], 1);
                }
            }
            for (int i = 0; i < nc * nr; ++i) {
                ASSERT_EQ(std::memcmp(&whole[i], &cut[i], 4), 0) << ggml_type_name(t) << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa)
                                                                << ": row " << i % nr << " column " << i / nr << ": " << whole[i]
                                                                << " in one call, " << cut[i] << " cut";
            }
            ++compared;
        }
    }
    EXPECT_GT(compared, 0);
}

// bf16_r16 weaves pairs of values, so a row of odd length has no layout: the type's blocks are two
// values long, and repacking such rows is refused rather than dropping the last column.
TEST(InterleavedBytes, Bf16R16RowsAreWholePairs) {
    EXPECT_EQ(ggml_blck_size(GGML_TYPE_BF16_R16), 2);
    EXPECT_EQ(ggml_row_size(GGML_TYPE_BF16_R16, 778), ggml_row_size(GGML_TYPE_BF16, 778));
    std::vector<uint8_t> src(16 * ggml_row_size(GGML_TYPE_BF16, 778)), dst(src.size());
    EXPECT_EQ(ggml_repack_rows(GGML_TYPE_BF16_R16, src.data(), dst.data(), 16, 777), 0u);
    EXPECT_EQ(ggml_repack_rows(GGML_TYPE_BF16_R16, src.data(), dst.data(), 16, 778), dst.size());
}

// mxfp4_r8's bytes as the reference's kernels read them (its CUDA vec_dot_mxfp4_r8_q8_1 takes
// row r's exponent from e[r] and 32-bit words qs[4 r + 32 j] holding values 4 j.. (low nibbles)
// and 16 + 4 j.. (high)): 8 exponents, then per quarter j the four qs bytes of rows 0..7.
TEST(InterleavedBytes, Mxfp4R8IsEightExponentsThenFourByteRunsOfEachRow) {
    const int64_t ncols = 64;   // two blocks per row
    const size_t row = ggml_row_size(GGML_TYPE_MXFP4, ncols);
    std::vector<uint8_t> rows(8 * row);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = (uint8_t) (i * 37 + 11);
    std::vector<uint8_t> woven(8 * ggml_row_size(GGML_TYPE_MXFP4_R8, ncols));
    ASSERT_EQ(ggml_repack_rows(GGML_TYPE_MXFP4_R8, rows.data(), woven.data(), 8, ncols), woven.size());
    for (int64_t ib = 0; ib < ncols / 32; ++ib) {
        const uint8_t * g = woven.data() + 136 * ib;
        for (int k = 0; k < 8; ++k) {
            const uint8_t * b = rows.data() + k * row + 17 * ib;   // e, then qs[16]
            EXPECT_EQ(g[k], b[0]) << "block " << ib << " row " << k;
            for (int j = 0; j < 4; ++j)
                for (int i = 0; i < 4; ++i) EXPECT_EQ(g[8 + 32 * j + 4 * k + i], b[1 + 4 * j + i]) << ib << " " << k << " " << j;
        }
    }
}

std::string type_param_name(const ::testing::TestParamInfo<ggml_type> & info) { return ggml_type_name(info.param); }

INSTANTIATE_TEST_SUITE_P(AllInterleaved, InterleavedLayout, ::testing::ValuesIn(interleaved_types(false)), type_param_name);
INSTANTIATE_TEST_SUITE_P(Decodable, Interleaved, ::testing::ValuesIn(interleaved_types(true)), type_param_name);

} // namespace
