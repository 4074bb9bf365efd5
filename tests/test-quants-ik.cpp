// ik_llama.cpp types beyond what the type-agnostic suites check (golden, simd, edge):
//   - the reference's ik-quantized synth models decode to weights close to the f16 originals
//     (every tensor of every type in those files is decodable, and decodes to the right values);
//   - an interleaved type holds exactly its base type's values (quantize both, decode both);
//   - interleaved rows work through the graph: get_rows picks single rows out of a group, and
//     mul_mat (chunked over 2 threads, odd row counts per chunk) matches the float product.
#include "testing.h"

#include "cpu-traits.h"
#include "quants/quants-ik.h"

#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

struct model_tensors {
    std::string error;
    std::map<std::string, std::pair<ggml_type, std::vector<int64_t>>> info;
    std::map<std::string, std::vector<uint8_t>> data;
};

model_tensors read_model(const std::string & path) {
    model_tensors m;
    gguf_init_params params = { /*no_alloc =*/ true, /*ctx =*/ nullptr };
    gguf_context * ctx = gguf_init_from_file(path.c_str(), params);
    if (!ctx) {
        m.error = path + ": cannot read";
        return m;
    }
    std::ifstream in(path, std::ios::binary);
    for (int64_t i = 0; i < gguf_get_n_tensors(ctx); ++i) {
        const std::string name = gguf_get_tensor_name(ctx, i);
        std::vector<int64_t> ne;
        for (int d = 0; d < gguf_get_tensor_n_dims(ctx, i); ++d) ne.push_back(gguf_get_tensor_ne(ctx, i, d));
        std::vector<uint8_t> bytes(gguf_get_tensor_size(ctx, i));
        in.seekg((std::streamoff) (gguf_get_data_offset(ctx) + gguf_get_tensor_offset(ctx, i)));
        in.read((char *) bytes.data(), (std::streamsize) bytes.size());
        m.info[name] = { gguf_get_tensor_type(ctx, i), ne };
        m.data[name] = std::move(bytes);
    }
    gguf_free(ctx);
    return m;
}

std::vector<float> decode_all(ggml_type t, const std::vector<int64_t> & ne, const std::vector<uint8_t> & bytes) {
    int64_t nrows = 1;
    for (size_t d = 1; d < ne.size(); ++d) nrows *= ne[d];
    const int64_t n = ne[0];
    std::vector<float> out(nrows * n);
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    if (t == GGML_TYPE_F32) {
        std::memcpy(out.data(), bytes.data(), out.size() * 4);
        return out;
    }
    const int64_t R = std::max(1, tt->nrows_interleaved);
    const size_t row = ggml_row_size(t, n);
    for (int64_t r = 0; r < nrows; r += R) tt->to_float(bytes.data() + r * row, out.data() + r * n, n * R);
    return out;
}

class IkModels : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(IkModels, DecodeCloseToF16Original) {
    const auto & [quant, base] = GetParam();
    const model_tensors q = read_model(kiln_test::shared_path("models/" + quant));
    const model_tensors f = read_model(kiln_test::shared_path("models/" + base));
    ASSERT_TRUE(q.error.empty() && f.error.empty()) << q.error << f.error;
    int n_ik = 0;
    for (const auto & [name, ti] : q.info) {
        const ggml_type t = ti.first;
        ASSERT_TRUE(ggml_get_type_traits(t)->to_float || t == GGML_TYPE_F32) << name << ": no decoder for " << ggml_type_name(t);
        auto it = f.info.find(name);
        if (it == f.info.end() || !ggml_is_quantized(t)) continue;
        const std::vector<float> a = decode_all(t, ti.second, q.data.at(name));
        const std::vector<float> b = decode_all(it->second.first, it->second.second, f.data.at(name));
        ASSERT_EQ(a.size(), b.size()) << name;
        double e = 0, s = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            ASSERT_TRUE(std::isfinite(a[i])) << name;
            e += ((double) a[i] - b[i]) * ((double) a[i] - b[i]);
            s += (double) b[i] * b[i];
        }
        const double rel = std::sqrt(e / s);
        // 3 bits and more: well under 0.25 on random weights; a layout mistake gives ~1 or more
        EXPECT_LT(rel, 0.25) << quant << " " << name << " (" << ggml_type_name(t) << ")";
        if (t >= GGML_TYPE_IQ2_K) ++n_ik;
    }
    EXPECT_GT(n_ik, 0) << quant << " holds no ik type";
}

INSTANTIATE_TEST_SUITE_P(Synth, IkModels,
                         ::testing::Values(std::make_pair(std::string("synth-qwen3moe-IQ4_KS.gguf"), std::string("synth-qwen3moe-f16.gguf")),
                                           std::make_pair(std::string("synth-deepseek2-IQ3_K.gguf"), std::string("synth-deepseek2-f16.gguf")),
                                           std::make_pair(std::string("synth-deepseek2-IQ4_K_R4.gguf"), std::string("synth-deepseek2-f16.gguf"))));

std::vector<float> random_rows(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> v(n);
    for (auto & x : v) x = nd(rng);
    return v;
}

// An interleaved layout is a permutation of its base type's bits: same values.
void expect_same_values(ggml_type base, ggml_type woven, int64_t nrows, int64_t n) {
    const std::vector<float> x = random_rows(nrows * n, 7);
    std::vector<uint8_t> qb(nrows * ggml_row_size(base, n)), qw(nrows * ggml_row_size(woven, n));
    ASSERT_EQ(ggml_quantize_chunk(base, x.data(), qb.data(), 0, nrows, n, nullptr), qb.size());
    ASSERT_EQ(ggml_quantize_chunk(woven, x.data(), qw.data(), 0, nrows, n, nullptr), qw.size());
    const std::vector<float> a = decode_all(base, { n, nrows }, qb);
    const std::vector<float> b = decode_all(woven, { n, nrows }, qw);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << ggml_type_name(woven) << " value " << i;
}

TEST(IkInterleaved, SameValuesAsBaseType) {
    expect_same_values(GGML_TYPE_IQ4_K, GGML_TYPE_IQ4_K_R4, 8, 512);
    expect_same_values(GGML_TYPE_IQ4_KS, GGML_TYPE_IQ4_KS_R4, 8, 512);
}

// get_rows and mul_mat through the CPU backend on an interleaved weight.
void graph_check(ggml_type t, int64_t K, int64_t M, int64_t N) {
    ggml_init_params ip = { 64 * 1024 * 1024, nullptr, false };
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, t, K, M);
    const std::vector<float> wf = random_rows(K * M, 11);
    ASSERT_EQ(ggml_quantize_chunk(t, wf.data(), w->data, 0, M, K, nullptr), ggml_nbytes(w));
    std::vector<uint8_t> wbytes((uint8_t *) w->data, (uint8_t *) w->data + ggml_nbytes(w));
    const std::vector<float> wd = decode_all(t, { K, M }, wbytes);

    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    const std::vector<float> xf = random_rows(K * N, 13);
    std::memcpy(x->data, xf.data(), xf.size() * 4);
    ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3);
    const int32_t pick[3] = { (int32_t) M - 1, 1, 6 };
    std::memcpy(ids->data, pick, sizeof(pick));

    ggml_tensor * mm = ggml_mul_mat(ctx, w, x);
    ggml_tensor * rows = ggml_get_rows(ctx, w, ids);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, mm);
    ggml_build_forward_expand(g, rows);
    ASSERT_EQ(ggml_graph_compute_cpu(g, 2), GGML_STATUS_SUCCESS);

    for (int i = 0; i < 3; ++i) {
        for (int64_t k = 0; k < K; ++k) {
            ASSERT_EQ(((const float *) rows->data)[i * K + k], wd[pick[i] * K + k]) << ggml_type_name(t) << " get_rows " << i;
        }
    }
    double e = 0, s = 0;
    for (int64_t c = 0; c < N; ++c) {
        for (int64_t r = 0; r < M; ++r) {
            double exact = 0;
            for (int64_t k = 0; k < K; ++k) exact += (double) wd[r * K + k] * xf[c * K + k];
            const double got = ((const float *) mm->data)[c * M + r];
            e += (got - exact) * (got - exact);
            s += exact * exact;
        }
    }
    // q8_K activation rounding: ~0.7% on random data; a chunk cut inside a group would be ~100%
    EXPECT_LT(std::sqrt(e / s), 0.02) << ggml_type_name(t);
    ggml_free(ctx);
}

TEST(IkInterleaved, GetRowsAndMulMatThroughGraph) {
    graph_check(GGML_TYPE_IQ4_K_R4, 512, 20, 3);
    graph_check(GGML_TYPE_IQ4_KS_R4, 256, 12, 1);
}

// The SIMD kernels switch strategy with the column count (per-row decode with register tiles of
// up to 8 columns; a repacked 16-row panel for wide batches): the type-agnostic SIMD suite covers
// up to 17 columns, so check wide batches here against the scalar kernel.
TEST(IkKernels, WideBatchesMatchScalar) {
    const ggml_type types[] = { GGML_TYPE_IQ2_K,  GGML_TYPE_IQ3_K,  GGML_TYPE_IQ4_K,  GGML_TYPE_IQ5_K,    GGML_TYPE_IQ6_K,
                                GGML_TYPE_IQ2_KS, GGML_TYPE_IQ3_KS, GGML_TYPE_IQ4_KS, GGML_TYPE_IQ5_KS,   GGML_TYPE_IQ4_K_R4,
                                GGML_TYPE_IQ4_KS_R4 };
    const int64_t n = 512;
    const int nr = 20, col_counts[] = { 24, 33 };
    int compared = 0;
    for (ggml_type t : types) {
        const std::vector<float> wf = random_rows(nr * n, 3);
        const size_t row = ggml_row_size(t, n);
        std::vector<uint8_t> wq(nr * row);
        ASSERT_EQ(ggml_quantize_chunk(t, wf.data(), wq.data(), 0, nr, n, nullptr), wq.size()) << ggml_type_name(t);
        for (int nc : col_counts) {
            const std::vector<float> xf = random_rows(nc * n, 5 + nc);
            const size_t xrow = ggml_row_size(GGML_TYPE_Q8_K, n);
            std::vector<uint8_t> xq(nc * xrow);
            for (int c = 0; c < nc; ++c) ggml_get_type_traits(GGML_TYPE_Q8_K)->from_float_ref(xf.data() + c * n, xq.data() + c * xrow, n);
            std::vector<float> ref(nc * nr), got(nc * nr);
            ggml_cpu_gemm_at(t, GGML_CPU_ISA_SCALAR)(n, wq.data(), row, xq.data(), xrow, ref.data(), nr, nr, nc);
            for (int isa = GGML_CPU_ISA_SCALAR + 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
                const ggml_gemm_t fn = ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
                if (!fn || !ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
                fn(n, wq.data(), row, xq.data(), xrow, got.data(), nr, nr, nc);
                for (size_t i = 0; i < ref.size(); ++i) {
                    ASSERT_NEAR(got[i], ref[i], 1e-4 * (std::fabs(ref[i]) + 1.0))
                        << ggml_type_name(t) << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa) << " nc=" << nc << " output " << i;
                }
                ++compared;
            }
        }
    }
    if (compared == 0) GTEST_SKIP() << "no SIMD kernel runs on this CPU";
}

// Trellis types have no quantizer yet, but every bit pattern is a valid block: compare the SIMD
// kernels with the scalar one on random blocks (finite row scales), for several batch widths,
// and the scalar kernel with a double-precision product of the decoded rows (times the
// inference-time factor of iq2_kt / iq3_kt).
TEST(IkKernels, TrellisKernelsMatchScalarOnRandomBlocks) {
    const std::pair<ggml_type, double> types[] = { { GGML_TYPE_IQ1_KT, 1.0 }, { GGML_TYPE_IQ2_KT, 1.05 },
                                                   { GGML_TYPE_IQ3_KT, 1.01 }, { GGML_TYPE_IQ4_KT, 1.0 } };
    const int64_t n = 512;
    const int nr = 9;
    std::mt19937 rng(42);
    int compared = 0;
    for (const auto & [t, factor] : types) {
        const size_t row = ggml_row_size(t, n);
        std::vector<uint8_t> wq(nr * row);
        for (auto & b : wq) b = (uint8_t) rng();
        for (int r = 0; r < nr; ++r) {
            const float d = 0.001f * (float) (r + 1) * (r % 2 ? -1.0f : 1.0f);
            std::memcpy(wq.data() + r * row, &d, 4);
        }
        const std::vector<float> wd = decode_all(t, { n, nr }, wq);
        for (int nc : { 1, 2, 3, 5, 8, 13, 30 }) {
            const std::vector<float> xf = random_rows(nc * n, 9 + nc);
            const size_t xrow = ggml_row_size(GGML_TYPE_Q8_K, n);
            std::vector<uint8_t> xq(nc * xrow);
            std::vector<float> xd(nc * n);
            for (int c = 0; c < nc; ++c) {
                ggml_get_type_traits(GGML_TYPE_Q8_K)->from_float_ref(xf.data() + c * n, xq.data() + c * xrow, n);
                ggml_get_type_traits(GGML_TYPE_Q8_K)->to_float(xq.data() + c * xrow, xd.data() + c * n, n);
            }
            std::vector<float> ref(nc * nr), got(nc * nr);
            std::vector<double> bound(nc * nr);
            const ggml_gemm_t scalar = ggml_cpu_gemm_at(t, GGML_CPU_ISA_SCALAR);
            ASSERT_TRUE(scalar) << ggml_type_name(t);
            scalar(n, wq.data(), row, xq.data(), xrow, ref.data(), nr, nr, nc);
            for (int c = 0; c < nc; ++c) {
                for (int r = 0; r < nr; ++r) {
                    double e = 0, b = 0;
                    for (int64_t k = 0; k < n; ++k) {
                        e += (double) wd[r * n + k] * xd[c * n + k];
                        b += std::fabs((double) wd[r * n + k] * xd[c * n + k]);
                    }
                    ASSERT_NEAR(ref[c * nr + r], factor * e, 1e-5 * b + 1e-6) << ggml_type_name(t) << " scalar vs double";
                    bound[c * nr + r] = b;
                }
            }
            for (int isa = GGML_CPU_ISA_SCALAR + 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
                const ggml_gemm_t fn = ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
                if (!fn || !ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
                fn(n, wq.data(), row, xq.data(), xrow, got.data(), nr, nr, nc);
                for (size_t i = 0; i < ref.size(); ++i) {
                    ASSERT_NEAR(got[i], ref[i], 1e-5 * bound[i] + 1e-7)
                        << ggml_type_name(t) << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa) << " nc=" << nc << " output " << i;
                }
                ++compared;
            }
        }
    }
    if (compared == 0) GTEST_SKIP() << "no SIMD trellis kernel runs on this CPU";
}

// The trellis quantizers' grid search skips cells by a distance bound and must still find the
// exhaustive search's seed every time: the bytes of both agree on rows that take the targets
// everywhere in the codebook (outliers far out in the tails, an all-zero block, tiny values,
// constant runs that sit on the bins' edges, a lone non-zero), with and without an imatrix
// (weights that differ by orders of magnitude between positions). The grid search reads its
// ranges through a SIMD kernel where one exists and in plain code at the scalar cap: the same
// bytes at every level.
TEST(IkKernels, TrellisGridSearchSameBytesAsExhaustive) {
    const int64_t n = 512;
    const int nr = 3;
    std::vector<float> x = random_rows(nr * n, 91);
    for (size_t i = 0; i < x.size(); i += 37) x[i] *= 12.0f;
    for (int j = 0; j < 32; ++j) x[128 + j] = 0.0f;
    for (int j = 0; j < 32; ++j) x[n + 64 + j] *= 1e-30f;
    for (int j = 0; j < 64; ++j) x[n + 192 + j] = (j % 8 < 4 ? 0.25f : -0.25f);
    for (int j = 0; j < 32; ++j) x[2 * n + 320 + j] = j == 5 ? 3.0f : 0.0f;
    std::vector<float> imatrix = random_rows(n, 19);
    for (size_t j = 0; j < imatrix.size(); ++j) imatrix[j] = std::exp(3.0f * imatrix[j]);
    const ggml_cpu_isa cap = ggml_cpu_get_isa();
    // the exhaustive search in plain code costs minutes under emulation (tests/isa/aarch64.sh):
    // compared only where it runs in SIMD; the levels compared are those with a range kernel of
    // their own (the others run the scalar cap's plain code)
    const bool simd_exhaustive = ggml_cpu_kt_errors() != nullptr;
    std::vector<ggml_cpu_isa> kernel_levels;
    ggml_kt_range_errors_t last = nullptr;   // the scalar cap has none
    for (int isa = GGML_CPU_ISA_SCALAR + 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
        if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
        ggml_cpu_set_isa((ggml_cpu_isa) isa);
        const ggml_kt_range_errors_t k = ggml_cpu_kt_range_errors();
        if (k && k != last) kernel_levels.push_back((ggml_cpu_isa) isa);
        last = k;
    }
    ggml_cpu_set_isa(cap);
    if (kernel_levels.empty() && !simd_exhaustive) GTEST_SKIP() << "no SIMD trellis search kernel on this CPU: nothing to compare";
    int levels = 0;
    for (ggml_type t : { GGML_TYPE_IQ1_KT, GGML_TYPE_IQ2_KT, GGML_TYPE_IQ3_KT, GGML_TYPE_IQ4_KT }) {
        for (const float * im : { (const float *) nullptr, (const float *) imatrix.data() }) {
            const size_t row = ggml_row_size(t, n), bytes = nr * row;
            std::vector<uint8_t> ref(bytes), got(bytes);
            auto expect_same = [&](const char * what) {
                for (int r = 0; r < nr; ++r) {
                    EXPECT_TRUE(std::equal(got.begin() + r * row, got.begin() + (r + 1) * row, ref.begin() + r * row))
                        << ggml_type_name(t) << (im ? " (imatrix)" : "") << " row " << r << ": " << what;
                }
            };
            ggml_cpu_set_isa(GGML_CPU_ISA_SCALAR);
            ASSERT_EQ(ggml_quantize_chunk(t, x.data(), ref.data(), 0, nr, n, im), bytes);
            for (ggml_cpu_isa isa : kernel_levels) {
                ggml_cpu_set_isa(isa);
                ASSERT_EQ(ggml_quantize_chunk(t, x.data(), got.data(), 0, nr, n, im), bytes);
                expect_same(ggml_cpu_isa_name(isa));
                ++levels;
            }
            ggml_cpu_set_isa(cap);
            if (!simd_exhaustive) continue;
            ik_kt_set_exhaustive(true);
            const size_t nex = ggml_quantize_chunk(t, x.data(), got.data(), 0, nr, n, im);
            ik_kt_set_exhaustive(false);
            ASSERT_EQ(nex, bytes);
            expect_same("exhaustive search");
        }
    }
    std::printf("[ kt grid ] %d comparisons with SIMD levels%s\n", levels,
                simd_exhaustive ? " and with the exhaustive search" : "; no SIMD exhaustive search here: not compared with it");
}

// The trellis quantizers' exhaustive seed search runs in SIMD where it can, and must pick the
// seeds the plain exhaustive search picks: the bytes are the same at every ISA cap, with and without an
// imatrix, on rows with outliers, an all-zero block and tiny values.
TEST(IkKernels, TrellisQuantizerSameBytesAtEveryIsa) {
    const int64_t n = 512;
    const int nr = 2;
    std::vector<float> x = random_rows(nr * n, 77);
    for (size_t i = 0; i < x.size(); i += 61) x[i] *= 8.0f;
    for (int j = 0; j < 32; ++j) x[256 + j] = 0.0f;        // an all-zero block
    for (int j = 0; j < 32; ++j) x[n + 32 + j] *= 1e-30f;  // a tiny one
    std::vector<float> imatrix = random_rows(n, 5);
    for (float & v : imatrix) v = std::fabs(v) + 0.01f;
    const ggml_cpu_isa cap = ggml_cpu_get_isa();
    // decided before quantizing anything: the plain reference search costs minutes under
    // emulation (tests/isa/aarch64.sh), wasted where no level has a SIMD search
    bool any_simd = false;
    for (int isa = GGML_CPU_ISA_SCALAR + 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
        if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
        ggml_cpu_set_isa((ggml_cpu_isa) isa);
        any_simd |= ggml_cpu_kt_errors() != nullptr;
    }
    ggml_cpu_set_isa(cap);
    if (!any_simd) GTEST_SKIP() << "no SIMD trellis search runs on this CPU";
    ik_kt_set_exhaustive(true);   // the SIMD kernels serve the exhaustive search only
    int compared = 0;
    for (ggml_type t : { GGML_TYPE_IQ1_KT, GGML_TYPE_IQ2_KT, GGML_TYPE_IQ3_KT, GGML_TYPE_IQ4_KT }) {
        for (const float * im : { (const float *) nullptr, (const float *) imatrix.data() }) {
            const size_t bytes = nr * ggml_row_size(t, n);
            std::vector<uint8_t> ref(bytes), got(bytes);
            ggml_cpu_set_isa(GGML_CPU_ISA_SCALAR);
            ASSERT_EQ(ggml_cpu_kt_errors(), nullptr) << "the scalar cap runs the plain search";
            ASSERT_EQ(ggml_quantize_chunk(t, x.data(), ref.data(), 0, nr, n, im), bytes);
            for (int isa = GGML_CPU_ISA_SCALAR + 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
                if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
                ggml_cpu_set_isa((ggml_cpu_isa) isa);
                if (!ggml_cpu_kt_errors()) continue;
                ASSERT_EQ(ggml_quantize_chunk(t, x.data(), got.data(), 0, nr, n, im), bytes);
                EXPECT_TRUE(got == ref) << ggml_type_name(t) << (im ? " (imatrix)" : "") << " at "
                                        << ggml_cpu_isa_name((ggml_cpu_isa) isa);
                ++compared;
            }
        }
    }
    ggml_cpu_set_isa(cap);
    ik_kt_set_exhaustive(false);
    if (compared == 0) GTEST_SKIP() << "no SIMD trellis search runs on this CPU";
}

} // namespace
