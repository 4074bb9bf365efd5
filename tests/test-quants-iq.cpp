// The lattice i-quants IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S:
//   - grids spot-checked against llama.cpp's published values, sign tables by their rule;
//   - the reference's blocks (golden/quants.gguf) decode bit-exactly to its dequantized values;
//   - our quantizer is within 2% of the reference's (weighted) relative RMSE on the golden rows;
//   - the scalar gemm equals a float64 dot of the dequantized weights and activations, and its
//     error against the exact product of the golden dequantized weights is no worse than the
//     reference's matmul; every SIMD kernel equals the scalar one bit for bit on odd shapes at
//     token-generation column counts, and within float rounding for batches (the panels), also
//     through mul_mat and mul_mat_id;
//   - edge rows (zero, constant, outlier, non-finite) behave.
// The golden file is read with a small local GGUF parser so this suite does not depend on the
// GGUF library.
#include "testing.h"

#include "cpu-traits.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "quants/quants-common.h"
#include "quants/quants-iq.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

const ggml_type kTypes[] = { GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS,
                             GGML_TYPE_IQ3_S,   GGML_TYPE_IQ1_S,  GGML_TYPE_IQ1_M };

// ---- minimal GGUF reader (v2/v3, little endian) for the golden file --------------------------

struct gguf_tensor {
    int type = 0;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
    const float * f32() const { return (const float *) data.data(); }
};

struct byte_reader {
    const std::vector<uint8_t> & b;
    size_t off = 0;
    bool ok = true;
    template <typename T> T get() {
        T v{};
        if (off + sizeof(T) > b.size()) { ok = false; return v; }
        std::memcpy(&v, b.data() + off, sizeof(T));
        off += sizeof(T);
        return v;
    }
    std::string str() {
        const uint64_t n = get<uint64_t>();
        if (!ok || off + n > b.size()) { ok = false; return {}; }
        std::string s((const char *) b.data() + off, n);
        off += n;
        return s;
    }
    void skip_value(uint32_t t) {
        static const int sizes[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
        if (t == 8) { str(); return; }
        if (t == 9) {
            const uint32_t at = get<uint32_t>();
            const uint64_t n = get<uint64_t>();
            for (uint64_t i = 0; i < n && ok; ++i) skip_value(at);
            return;
        }
        if (t > 12) { ok = false; return; }
        off += sizes[t];
    }
};

std::map<std::string, gguf_tensor> read_golden(std::string & error) {
    std::map<std::string, gguf_tensor> out;
    const std::string path = kiln_test::shared_path("golden/quants.gguf");
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    byte_reader r{ b };
    if (b.size() < 4 || std::memcmp(b.data(), "GGUF", 4) != 0) { error = path + ": not a GGUF file"; return out; }
    r.off = 4;
    r.get<uint32_t>();
    const uint64_t n_tensors = r.get<uint64_t>(), n_kv = r.get<uint64_t>();
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv && r.ok; ++i) {
        const std::string key = r.str();
        const uint32_t t = r.get<uint32_t>();
        if (key == "general.alignment" && t == 4) alignment = r.get<uint32_t>();
        else r.skip_value(t);
    }
    struct info { std::string name; gguf_tensor t; uint64_t offset; };
    std::vector<info> infos;
    for (uint64_t i = 0; i < n_tensors && r.ok; ++i) {
        info f;
        f.name = r.str();
        const uint32_t nd = r.get<uint32_t>();
        for (uint32_t d = 0; d < nd; ++d) f.t.ne.push_back((int64_t) r.get<uint64_t>());
        f.t.type = (int) r.get<uint32_t>();
        f.offset = r.get<uint64_t>();
        infos.push_back(std::move(f));
    }
    if (!r.ok) { error = path + ": truncated header"; return out; }
    const size_t data_start = (r.off + alignment - 1) / alignment * alignment;
    for (auto & f : infos) {
        if (!ggml_type_is_valid(f.t.type)) continue;
        const auto type = (ggml_type) f.t.type;
        int64_t rows = 1;
        for (size_t d = 1; d < f.t.ne.size(); ++d) rows *= f.t.ne[d];
        const size_t size = ggml_row_size(type, f.t.ne[0]) * rows;
        if (data_start + f.offset + size > b.size()) { error = path + ": tensor " + f.name + " out of bounds"; return out; }
        f.t.data.assign(b.begin() + data_start + f.offset, b.begin() + data_start + f.offset + size);
        out[f.name] = std::move(f.t);
    }
    return out;
}

struct golden {
    std::string error;
    std::map<std::string, gguf_tensor> tensors;
    nlohmann::json summary;
    const gguf_tensor * find(const std::string & name) const {
        auto it = tensors.find(name);
        return it == tensors.end() ? nullptr : &it->second;
    }
};

const golden & get_golden() {
    static const golden g = [] {
        golden r;
        r.tensors = read_golden(r.error);
        std::ifstream js(kiln_test::shared_path("golden/quants-summary.json"));
        if (!js) r.error = "cannot read golden/quants-summary.json";
        else r.summary = nlohmann::json::parse(js);
        return r;
    }();
    return g;
}

// ---- helpers ------------------------------------------------------------------------------

constexpr int64_t N = 512, ROWS = 32, COLS = 4;

double rel_rmse(const float * a, const float * ref, const float * w, int64_t n, int64_t ncols) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double wi = w ? w[i % ncols] : 1.0;
        num += wi * (a[i] - ref[i]) * (a[i] - ref[i]);
        den += wi * ref[i] * ref[i];
    }
    return std::sqrt(num / den);
}

std::vector<block_q8_K> quantize_act(const float * x, int64_t n, int64_t cols) {
    std::vector<block_q8_K> q(cols * (n / QK_K));
    for (int64_t c = 0; c < cols; ++c) quantize_row_q8_K_ref(x + c * n, q.data() + c * (n / QK_K), n);
    return q;
}

std::vector<float> run_gemm(ggml_gemm_t fn, ggml_type t, const void * w, size_t w_stride, int64_t n,
                            const std::vector<block_q8_K> & act, int nr, int nc, size_t dst_stride) {
    std::vector<float> dst(dst_stride * nc, -1.0f);
    fn(n, w, w_stride, act.data(), (n / QK_K) * sizeof(block_q8_K), dst.data(), dst_stride, nr, nc);
    return dst;
}

std::vector<float> random_weights(int64_t n, uint32_t seed) {
    std::vector<float> x = kiln_test::random_floats(n, seed, -1.0f, 1.0f);
    // heavier tails than uniform, like real weights
    for (auto & v : x) v = v * v * v * 2.0f + 0.1f * v;
    return x;
}

// ---- tables -------------------------------------------------------------------------------

TEST(QuantsIQ, GridAndSignTables) {
    using namespace ggml_iq;
    // spot values as published by llama.cpp
    EXPECT_EQ(iq2xxs_grid[0], 0x0808080808080808ull);
    EXPECT_EQ(iq2xxs_grid[255], 0x2b2b2b1908081908ull);   // last entry
    EXPECT_EQ(iq2s_grid[777], 0x192b081908082b08ull);
    EXPECT_EQ(iq3s_grid[1000 % 512], 0x0f030509u);
    EXPECT_EQ(iq1s_grid[1000], 0x00000000ffff00ffull);
    EXPECT_EQ(iq1s_grid[0], 0xffffffffffffffffull);
    // every element on its level set
    for (int k = 0; k < 512; ++k) {
        for (int j = 0; j < 8; ++j) {
            const uint8_t v = grid_bytes(iq2xs_grid, k)[j];
            EXPECT_TRUE(v == 0x08 || v == 0x19 || v == 0x2b);
        }
    }
    for (int k = 0; k < 2048; ++k) {
        for (int j = 0; j < 8; ++j) {
            const int8_t v = (int8_t) grid_bytes(iq1s_grid, k)[j];
            EXPECT_TRUE(v >= -1 && v <= 1);
        }
    }
    // 7-bit sign codes: the 8th bit makes the number of set bits even
    EXPECT_EQ(expand_signs7(0), 0x00);
    EXPECT_EQ(expand_signs7(1), 0x81);
    EXPECT_EQ(expand_signs7(3), 0x03);
    EXPECT_EQ(expand_signs7(127), 0xff);
    for (uint32_t c = 0; c < 128; ++c) EXPECT_EQ(__builtin_popcount(expand_signs7(c)) % 2, 0);
}

TEST(QuantsIQ, Registered) {
    for (ggml_type t : kTypes) {
        const auto * tt = ggml_get_type_traits(t);
        EXPECT_TRUE(tt->to_float && tt->quantize && tt->from_float_ref) << ggml_type_name(t);
        EXPECT_EQ(ggml_cpu_get_type_traits(t)->vec_dot_type, GGML_TYPE_Q8_K) << ggml_type_name(t);
        EXPECT_TRUE(ggml_cpu_gemm_at(t, GGML_CPU_ISA_SCALAR)) << ggml_type_name(t);
    }
    EXPECT_TRUE(ggml_quantize_requires_imatrix(GGML_TYPE_IQ2_XXS));
    EXPECT_TRUE(ggml_quantize_requires_imatrix(GGML_TYPE_IQ2_XS));
    EXPECT_TRUE(ggml_quantize_requires_imatrix(GGML_TYPE_IQ1_S));
    EXPECT_FALSE(ggml_quantize_requires_imatrix(GGML_TYPE_IQ1_M));
    EXPECT_FALSE(ggml_quantize_requires_imatrix(GGML_TYPE_IQ2_S));
    EXPECT_FALSE(ggml_quantize_requires_imatrix(GGML_TYPE_IQ3_XXS));
    EXPECT_FALSE(ggml_quantize_requires_imatrix(GGML_TYPE_IQ3_S));
}

// ---- golden data --------------------------------------------------------------------------

TEST(QuantsIQ, GoldenDecodeBitExact) {
    const golden & g = get_golden();
    ASSERT_TRUE(g.error.empty()) << g.error;
    int checked = 0;
    for (ggml_type t : kTypes) {
        const std::string name = ggml_type_name(t);
        for (const char * form : { "", "w" }) {
            const gguf_tensor * q = g.find(std::string("q") + form + "." + name);
            const gguf_tensor * dq = g.find(std::string("dq") + form + "." + name);
            if (!q || !dq) continue;
            ASSERT_EQ(q->type, (int) t);
            std::vector<float> out(ROWS * N);
            const size_t row_size = ggml_row_size(t, N);
            for (int64_t r = 0; r < ROWS; ++r) {
                ggml_get_type_traits(t)->to_float(q->data.data() + r * row_size, out.data() + r * N, N);
            }
            int mismatches = 0;
            for (int64_t i = 0; i < ROWS * N; ++i) {
                if (std::memcmp(&out[i], &dq->f32()[i], sizeof(float)) != 0 && ++mismatches <= 3) {
                    ADD_FAILURE() << name << form << " element " << i << ": " << out[i] << " vs " << dq->f32()[i];
                }
            }
            EXPECT_EQ(mismatches, 0) << name << form;
            ++checked;
        }
    }
    EXPECT_EQ(checked, 11);   // 4 types with both forms, 3 imatrix-only
}

TEST(QuantsIQ, GoldenQuantizerError) {
    const golden & g = get_golden();
    ASSERT_TRUE(g.error.empty()) << g.error;
    const float * src = g.find("src")->f32();
    const float * imatrix = g.find("imatrix")->f32();
    for (ggml_type t : kTypes) {
        const std::string name = ggml_type_name(t);
        const auto * tt = ggml_get_type_traits(t);
        for (const char * form : { "plain", "imatrix" }) {
            if (!g.summary[name].contains(form)) continue;
            const bool with_im = std::string(form) == "imatrix";
            std::vector<uint8_t> q(ggml_row_size(t, N) * ROWS);
            ASSERT_EQ(tt->quantize(src, q.data(), ROWS, N, with_im ? imatrix : nullptr), q.size()) << name;
            std::vector<float> dq(ROWS * N);
            for (int64_t r = 0; r < ROWS; ++r) tt->to_float(q.data() + r * ggml_row_size(t, N), dq.data() + r * N, N);
            const double ours = with_im ? rel_rmse(dq.data(), src, imatrix, ROWS * N, N) : rel_rmse(dq.data(), src, nullptr, ROWS * N, N);
            const double ref = g.summary[name][form][with_im ? "weighted_rel_rmse" : "rel_rmse"].get<double>();
            EXPECT_LE(ours, 1.02 * ref) << name << " " << form;
            std::printf("  %-8s %-8s rel_rmse %.5f (reference %.5f)\n", name.c_str(), form, ours, ref);
        }
    }
}

TEST(QuantsIQ, GoldenMatmul) {
    const golden & g = get_golden();
    ASSERT_TRUE(g.error.empty()) << g.error;
    const float * act = g.find("act")->f32();
    const auto q8 = quantize_act(act, N, COLS);
    for (ggml_type t : kTypes) {
        const std::string name = ggml_type_name(t);
        for (const char * form : { "", "w" }) {
            const gguf_tensor * q = g.find(std::string("q") + form + "." + name);
            const gguf_tensor * dq = g.find(std::string("dq") + form + "." + name);
            if (!q || !dq) continue;
            const char * key = *form ? "imatrix" : "plain";
            const double ref_err = g.summary[name][key]["matmul_rel_err_vs_exact_dq"].get<double>();
            for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
                ggml_gemm_t fn = ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
                if (!fn || !ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
                const auto mm = run_gemm(fn, t, q->data.data(), ggml_row_size(t, N), N, q8, ROWS, COLS, ROWS);
                double num = 0, den = 0;
                for (int c = 0; c < COLS; ++c) {
                    for (int r = 0; r < ROWS; ++r) {
                        double exact = 0;
                        for (int k = 0; k < N; ++k) exact += (double) dq->f32()[r * N + k] * act[c * N + k];
                        num += (mm[c * ROWS + r] - exact) * (mm[c * ROWS + r] - exact);
                        den += exact * exact;
                    }
                }
                const double err = std::sqrt(num / den);
                EXPECT_LE(err, ref_err * 1.0001) << name << form << " isa " << isa;
                if (isa == 0) std::printf("  %-8s %-8s matmul err %.6f (reference %.6f)\n", name.c_str(), key, err, ref_err);
            }
        }
    }
}

// ---- gemm correctness ------------------------------------------------------------------------

// The scalar gemm is the exact sum of the decoded products (within float accumulation).
TEST(QuantsIQ, ScalarGemmMatchesDequantizedDot) {
    const int64_t n = 768, rows = 5, cols = 3;
    const auto w = random_weights(rows * n, 11);
    const auto a = kiln_test::random_floats(cols * n, 12);
    const auto imatrix = kiln_test::random_floats(n, 13, 0.1f, 2.0f);
    const auto q8 = quantize_act(a.data(), n, cols);
    std::vector<float> a_dq(cols * n);
    for (int64_t c = 0; c < cols; ++c) {
        for (int64_t i = 0; i < n; ++i) a_dq[c * n + i] = q8[c * (n / QK_K) + i / QK_K].d * q8[c * (n / QK_K) + i / QK_K].qs[i % QK_K];
    }
    for (ggml_type t : kTypes) {
        const auto * tt = ggml_get_type_traits(t);
        const size_t rs = ggml_row_size(t, n);
        std::vector<uint8_t> q(rs * rows);
        ASSERT_EQ(tt->quantize(w.data(), q.data(), rows, n, imatrix.data()), q.size());
        std::vector<float> wdq(rows * n);
        for (int64_t r = 0; r < rows; ++r) tt->to_float(q.data() + r * rs, wdq.data() + r * n, n);
        const auto mm = run_gemm(ggml_cpu_gemm_at(t, GGML_CPU_ISA_SCALAR), t, q.data(), rs, n, q8, rows, cols, rows);
        for (int64_t c = 0; c < cols; ++c) {
            for (int64_t r = 0; r < rows; ++r) {
                double exact = 0, mag = 0;
                for (int64_t k = 0; k < n; ++k) {
                    exact += (double) wdq[r * n + k] * a_dq[c * n + k];
                    mag += std::fabs((double) wdq[r * n + k] * a_dq[c * n + k]);
                }
                EXPECT_NEAR(mm[c * rows + r], exact, 1e-5 * mag + 1e-6) << ggml_type_name(t) << " r" << r << " c" << c;
            }
        }
    }
}

TEST(QuantsIQ, SimdMatchesScalarOnOddShapes) {
    const int64_t n = 3 * QK_K;
    const int nr = 7, nc = 5;
    const size_t dst_stride = nr + 3;
    const auto w = random_weights(nr * n, 21);
    const auto a = kiln_test::random_floats(nc * n, 22, -3.0f, 3.0f);
    const auto imatrix = kiln_test::random_floats(n, 23, 0.1f, 2.0f);
    const auto q8 = quantize_act(a.data(), n, nc);
    int compared = 0;
    for (ggml_type t : kTypes) {
        const auto * tt = ggml_get_type_traits(t);
        const size_t rs = ggml_row_size(t, n), w_stride = rs + 40;   // padded rows
        std::vector<uint8_t> q(w_stride * nr, 0xcd);
        for (int r = 0; r < nr; ++r) ASSERT_EQ(tt->quantize(w.data() + r * n, q.data() + r * w_stride, 1, n, imatrix.data()), rs);
        const auto ref = run_gemm(ggml_cpu_gemm_at(t, GGML_CPU_ISA_SCALAR), t, q.data(), w_stride, n, q8, nr, nc, dst_stride);
        for (int isa = 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
            ggml_gemm_t fn = ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
            if (!fn || !ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
            for (int sub_nr : { nr, 1, 3 }) {
                for (int sub_nc : { nc, 1 }) {
                    const auto got = run_gemm(fn, t, q.data(), w_stride, n, q8, sub_nr, sub_nc, dst_stride);
                    for (int c = 0; c < sub_nc; ++c) {
                        for (int r = 0; r < sub_nr; ++r) {
                            ASSERT_EQ(std::memcmp(&got[c * dst_stride + r], &ref[c * dst_stride + r], sizeof(float)), 0)
                                << ggml_type_name(t) << " isa " << isa << " r" << r << " c" << c << ": "
                                << got[c * dst_stride + r] << " vs " << ref[c * dst_stride + r];
                        }
                        for (size_t r = sub_nr; r < dst_stride; ++r) ASSERT_EQ(got[c * dst_stride + r], -1.0f) << "wrote outside the tile";
                    }
                }
            }
            ++compared;
        }
    }
    if (ggml_cpu_isa_runs_here(GGML_CPU_ISA_AVX2)) { EXPECT_GE(compared, 7); }   // x86: every IQ type has AVX2 kernels
}

// Blocks of arbitrary bytes (every grid index, sign code, scale and delta bit pattern, not only
// those the quantizer picks; the super-scale set to a finite fp16): the token-generation kernels
// of every SIMD level this CPU runs equal the scalar kernel bit for bit. Run once more with
// KILN_CPU_VBMI=0 (ctest prefix novbmi.), so both the VBMI and the plain AVX512 decoders are held
// to it where the CPU has VBMI.
TEST(QuantsIQ, SimdMatchesScalarOnArbitraryBlocks) {
    const int64_t n = 4 * QK_K;
    const int nr = 9, nc = 2;
    const auto a = kiln_test::random_floats(nc * n, 61, -3.0f, 3.0f);
    const auto q8 = quantize_act(a.data(), n, nc);
    std::mt19937 rng(62);
    int compared = 0;
    for (ggml_type t : kTypes) {
        const size_t rs = ggml_row_size(t, n), bs = rs / (n / QK_K);
        std::vector<uint8_t> q(rs * nr);
        for (auto & v : q) v = (uint8_t) rng();
        for (size_t o = 0; o < q.size(); o += bs) {
            // fp16 super-scales between 1/16 and 1 (exponent 11..15, random mantissa)
            const uint16_t d = (uint16_t) ((11 + rng() % 5) << 10 | (rng() & 0x3FF));
            if (t == GGML_TYPE_IQ1_M) {
                // iq1_m: the fp16 lies in the top nibbles of its four 16-bit scale words
                uint8_t * sc = q.data() + o + offsetof(ggml_iq::block_iq1_m, scales);
                for (int w = 0; w < 4; ++w) sc[2 * w + 1] = (uint8_t) ((sc[2 * w + 1] & 0x0F) | ((d >> 4 * w) & 0xF) << 4);
            } else {
                std::memcpy(q.data() + o, &d, 2);   // every other lattice block starts with d
            }
        }
        const auto ref = run_gemm(ggml_cpu_gemm_at(t, GGML_CPU_ISA_SCALAR), t, q.data(), rs, n, q8, nr, nc, nr);
        for (float v : ref) ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(t);
        for (int isa = 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
            ggml_gemm_t fn = ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
            if (!fn || !ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
            const auto got = run_gemm(fn, t, q.data(), rs, n, q8, nr, nc, nr);
            for (size_t j = 0; j < got.size(); ++j) {
                ASSERT_EQ(std::memcmp(&got[j], &ref[j], sizeof(float)), 0)
                    << ggml_type_name(t) << " isa " << isa << " output " << j << ": " << got[j] << " vs " << ref[j];
            }
            ++compared;
        }
    }
    if (ggml_cpu_isa_runs_here(GGML_CPU_ISA_AVX2)) { EXPECT_GE(compared, 7); }
}

// Batches through the graph: mul_mat, and the expert-routed mul_mat_id where one expert gets
// fewer tokens than a panel takes, at every ISA level this CPU runs. From kiln_panel::kMinCols
// columns the SIMD levels take the panel gemms (weights repacked, float sums per sub-block),
// below that the block loop: both agree with the scalar level within float rounding,
// 1e-5 of sum |w x| over the decoded weights. K = 256 and 512 (one and two blocks; strided
// rows), 21 rows (partial row groups of 8 and 16), 21 columns (whole column tiles and a tail at
// both levels).
TEST(QuantsIQ, BatchProductsMatchScalarLevel) {
    // rows quantized once at K = 512; the K = 256 products read their first blocks (strided rows)
    const int64_t M = 21, ncols = 21, n_expert = 3, n_used = 2, ntok = 19, KQ = 512;
    const ggml_cpu_isa cap = ggml_cpu_get_isa();
    const auto wf = random_weights(n_expert * M * KQ, 51);
    const auto imatrix = kiln_test::random_floats(KQ, 52, 0.1f, 2.0f);
    const auto xf = kiln_test::random_floats(ncols * KQ, 53, -2.0f, 2.0f);
    const auto bf = kiln_test::random_floats(ntok * KQ, 54, -2.0f, 2.0f);
    // token t: expert 0, and expert 1 (tokens 0..3: a block-loop call) or 2
    std::vector<int32_t> route(n_used * ntok);
    for (int64_t t = 0; t < ntok; ++t) route[t * n_used] = 0, route[t * n_used + 1] = t < 4 ? 1 : 2;
    int compared = 0;
    for (ggml_type t : kTypes) {
        const auto * tt = ggml_get_type_traits(t);
        const size_t rs = ggml_row_size(t, KQ);
        ggml_init_params ip = { n_expert * M * rs + 4 * sizeof(float) * KQ * (ncols + ntok) + (1 << 20), nullptr, false };
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * as = ggml_new_tensor_3d(ctx, t, KQ, M, n_expert);
        ASSERT_EQ(tt->quantize(wf.data(), (uint8_t *) as->data, n_expert * M, KQ, imatrix.data()), n_expert * M * rs);
        std::vector<float> wdq(n_expert * M * KQ);
        tt->to_float(as->data, wdq.data(), n_expert * M * KQ);
        for (const int64_t K : { 256, 512 }) {
            ggml_tensor * w = ggml_view_3d(ctx, as, K, M, n_expert, as->nb[1], as->nb[2], 0);
            ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, ncols);
            ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, 1, ntok);
            ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n_used, ntok);
            for (int64_t c = 0; c < ncols; ++c) std::memcpy((float *) x->data + c * K, xf.data() + c * KQ, K * sizeof(float));
            for (int64_t c = 0; c < ntok; ++c) std::memcpy((float *) b->data + c * K, bf.data() + c * KQ, K * sizeof(float));
            std::memcpy(ids->data, route.data(), route.size() * sizeof(int32_t));
            ggml_tensor * mm = ggml_mul_mat(ctx, ggml_view_2d(ctx, as, K, M, as->nb[1], 0), x);
            ggml_tensor * id = ggml_mul_mat_id(ctx, w, b, ids);
            ggml_cgraph * g = ggml_new_graph(ctx);
            ggml_build_forward_expand(g, mm);
            ggml_build_forward_expand(g, id);
            // per output: sum |w x| (mul_mat outputs, then mul_mat_id's)
            std::vector<double> bound;
            auto magnitude = [&](int64_t e, int64_t r, const float * v) {
                double m = 0;
                for (int64_t k = 0; k < K; ++k) m += std::fabs((double) wdq[(e * M + r) * KQ + k] * v[k]);
                return m;
            };
            for (int64_t c = 0; c < ncols; ++c)
                for (int64_t r = 0; r < M; ++r) bound.push_back(magnitude(0, r, xf.data() + c * KQ));
            for (int64_t tok = 0; tok < ntok; ++tok)
                for (int64_t i = 0; i < n_used; ++i)
                    for (int64_t r = 0; r < M; ++r) bound.push_back(magnitude(route[tok * n_used + i], r, bf.data() + tok * KQ));
            std::vector<float> ref;
            for (int isa = GGML_CPU_ISA_SCALAR; isa < GGML_CPU_ISA_COUNT; ++isa) {
                if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
                ggml_cpu_set_isa((ggml_cpu_isa) isa);
                ASSERT_EQ(ggml_graph_compute_cpu(g, 2), GGML_STATUS_SUCCESS);
                std::vector<float> got((const float *) mm->data, (const float *) mm->data + M * ncols);
                got.insert(got.end(), (const float *) id->data, (const float *) id->data + M * n_used * ntok);
                ASSERT_EQ(got.size(), bound.size());
                if (isa == GGML_CPU_ISA_SCALAR) {
                    ref = got;
                    continue;
                }
                for (size_t j = 0; j < got.size(); ++j) {
                    ASSERT_NEAR(got[j], ref[j], 1e-5 * bound[j] + 1e-6)
                        << ggml_type_name(t) << " K=" << K << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa)
                        << (j < (size_t) (M * ncols) ? " mul_mat" : " mul_mat_id") << " output " << j;
                }
                ++compared;
            }
            ggml_cpu_set_isa(cap);
        }
        ggml_free(ctx);
    }
    if (ggml_cpu_isa_runs_here(GGML_CPU_ISA_AVX2)) { EXPECT_GE(compared, 14); }   // x86: every type at K = 256 and 512
}

// ---- edge rows ------------------------------------------------------------------------------

TEST(QuantsIQ, EdgeRows) {
    const int64_t n = QK_K * 2;
    const auto imatrix = kiln_test::random_floats(n, 31, 0.5f, 1.5f);
    for (ggml_type t : kTypes) {
        const auto * tt = ggml_get_type_traits(t);
        const size_t rs = ggml_row_size(t, n);
        std::vector<uint8_t> q(rs);
        std::vector<float> out(n);
        const std::string name = ggml_type_name(t);

        std::vector<float> zero(n, 0.0f);
        ASSERT_EQ(tt->quantize(zero.data(), q.data(), 1, n, imatrix.data()), rs) << name;
        tt->to_float(q.data(), out.data(), n);
        for (float v : out) ASSERT_EQ(v, 0.0f) << name << " zero row";

        std::vector<float> constant(n, 0.37f);
        ASSERT_EQ(tt->quantize(constant.data(), q.data(), 1, n, imatrix.data()), rs) << name;
        tt->to_float(q.data(), out.data(), n);
        double err = 0;
        for (float v : out) { ASSERT_TRUE(std::isfinite(v)) << name; err += (v - 0.37) * (v - 0.37); }
        EXPECT_LT(std::sqrt(err / n), 0.37 * 0.6) << name << " constant row";

        auto outlier = random_weights(n, 32);
        outlier[77] = 1000.0f;
        ASSERT_EQ(tt->quantize(outlier.data(), q.data(), 1, n, imatrix.data()), rs) << name;
        tt->to_float(q.data(), out.data(), n);
        for (float v : out) ASSERT_TRUE(std::isfinite(v)) << name << " outlier row";
        EXPECT_GT(out[77], 200.0f) << name << " outlier kept its sign and magnitude";

        for (float bad : { NAN, INFINITY, -INFINITY }) {
            auto row = random_weights(n, 33);
            row[100] = bad;
            EXPECT_EQ(tt->quantize(row.data(), q.data(), 1, n, imatrix.data()), 0u) << name << " non-finite input";
        }
        // a row length the format cannot hold
        std::vector<float> odd(QK_K + 32, 0.5f);
        EXPECT_EQ(tt->quantize(odd.data(), q.data(), 1, QK_K + 32, nullptr), 0u) << name;
    }
}

// Quantizing without an imatrix works for every type (types that need one for quality still
// produce a usable approximation), and the lazy search tables tolerate concurrent first use.
TEST(QuantsIQ, NoImatrixAndConcurrentInit) {
    const int64_t n = QK_K;
    const auto x = random_weights(4 * n, 41);
    std::vector<std::thread> threads;
    std::vector<double> errs(std::size(kTypes) * 2);
    for (size_t ti = 0; ti < std::size(kTypes); ++ti) {
        for (int rep = 0; rep < 2; ++rep) {
            threads.emplace_back([&, ti, rep] {
                const ggml_type t = kTypes[ti];
                const auto * tt = ggml_get_type_traits(t);
                std::vector<uint8_t> q(ggml_row_size(t, n) * 4);
                std::vector<float> out(4 * n);
                if (tt->quantize(x.data(), q.data(), 4, n, nullptr) != q.size()) { errs[2 * ti + rep] = 1e9; return; }
                for (int r = 0; r < 4; ++r) tt->to_float(q.data() + r * ggml_row_size(t, n), out.data() + r * n, n);
                errs[2 * ti + rep] = rel_rmse(out.data(), x.data(), nullptr, 4 * n, n);
            });
        }
    }
    for (auto & th : threads) th.join();
    for (size_t ti = 0; ti < std::size(kTypes); ++ti) {
        EXPECT_LT(errs[2 * ti], 0.8) << ggml_type_name(kTypes[ti]);
        EXPECT_EQ(errs[2 * ti], errs[2 * ti + 1]) << ggml_type_name(kTypes[ti]) << " deterministic";
    }
}

} // namespace
