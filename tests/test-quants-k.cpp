// The k-quant family (q2_K .. q6_K) against the reference's golden data and its own scalar path:
//   - the reference's blocks q.T / qw.T decode to dq.T / dqw.T bit-exactly;
//   - our quantizer's error on src (plain, and imatrix-weighted) is within 2% of the reference's;
//   - the gemm of the reference's blocks with act strays from the exact product no further than
//     the reference's own matmul did, for every registered ISA kernel;
//   - every SIMD kernel agrees with the scalar kernel on random odd shapes and strides;
//   - zero / constant / outlier rows behave, non-finite input is refused.
// The small golden GGUF is read by a minimal parser here so this suite does not depend on gguf.
#include "testing.h"

#include "cpu-traits.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "quants/quants-k.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

const ggml_type k_types[] = { GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K };

// ---- minimal GGUF v3 reader (tensor table + data) -------------------------------------------

struct tensor_blob {
    uint32_t type = 0;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> bytes;
    const float * f32() const { return (const float *) bytes.data(); }
};

struct golden {
    std::string error;
    std::map<std::string, tensor_blob> t;
    nlohmann::json summary;
};

struct reader {
    const std::vector<uint8_t> & buf;
    size_t pos = 0;
    bool ok = true;
    template <typename T> T get() {
        T v{};
        if (pos + sizeof(T) > buf.size()) { ok = false; return v; }
        std::memcpy(&v, buf.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    std::string str() {
        const uint64_t n = get<uint64_t>();
        if (!ok || pos + n > buf.size()) { ok = false; return {}; }
        std::string s((const char *) buf.data() + pos, n);
        pos += n;
        return s;
    }
    void skip_value(uint32_t type) {
        static const size_t sizes[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
        if (type == 8) { str(); return; }
        if (type == 9) {
            const uint32_t at = get<uint32_t>();
            const uint64_t n = get<uint64_t>();
            for (uint64_t i = 0; i < n && ok; ++i) skip_value(at);
            return;
        }
        if (type > 12) { ok = false; return; }
        pos += sizes[type];
    }
};

golden load_golden() {
    golden g;
    const std::string path = kiln_test::shared_path("golden/quants.gguf");
    std::ifstream f(path, std::ios::binary);
    if (!f) { g.error = "cannot open " + path; return g; }
    std::vector<uint8_t> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    reader r{buf};
    if (r.get<uint32_t>() != 0x46554747u || r.get<uint32_t>() != 3) { g.error = path + ": not GGUF v3"; return g; }
    const uint64_t n_tensors = r.get<uint64_t>(), n_kv = r.get<uint64_t>();
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv && r.ok; ++i) {
        const std::string key = r.str();
        const uint32_t type = r.get<uint32_t>();
        if (key == "general.alignment" && type == 4) alignment = r.get<uint32_t>();
        else r.skip_value(type);
    }
    struct info { std::string name; tensor_blob b; uint64_t off; };
    std::vector<info> infos;
    for (uint64_t i = 0; i < n_tensors && r.ok; ++i) {
        info in;
        in.name = r.str();
        const uint32_t nd = r.get<uint32_t>();
        for (uint32_t d = 0; d < nd && d < 4; ++d) in.b.ne.push_back(r.get<uint64_t>());
        in.b.type = r.get<uint32_t>();
        in.off = r.get<uint64_t>();
        infos.push_back(std::move(in));
    }
    if (!r.ok) { g.error = path + ": truncated header"; return g; }
    const size_t data0 = (r.pos + alignment - 1) / alignment * alignment;
    for (size_t i = 0; i < infos.size(); ++i) {
        const size_t begin = data0 + infos[i].off;
        const size_t end = i + 1 < infos.size() ? data0 + infos[i + 1].off : buf.size();
        if (begin > end || end > buf.size()) { g.error = path + ": bad offset of " + infos[i].name; return g; }
        infos[i].b.bytes.assign(buf.begin() + begin, buf.begin() + end);
        g.t[infos[i].name] = std::move(infos[i].b);
    }
    std::ifstream js(kiln_test::shared_path("golden/quants-summary.json"));
    if (!js) { g.error = "cannot open quants-summary.json"; return g; }
    g.summary = nlohmann::json::parse(js);
    return g;
}

const golden & data() {
    static golden g = load_golden();
    return g;
}

// ---- helpers --------------------------------------------------------------------------------

constexpr int64_t k_cols = 512, k_rows = 32, k_act_rows = 4;

double rel_rmse(const float * a, const float * ref, int64_t nrows, int64_t n, const float * w) {
    double num = 0, den = 0;
    for (int64_t r = 0; r < nrows; ++r) {
        for (int64_t i = 0; i < n; ++i) {
            const double wi = w ? w[i] : 1.0;
            const double d = (double) a[r * n + i] - ref[r * n + i];
            num += wi * d * d;
            den += wi * (double) ref[r * n + i] * ref[r * n + i];
        }
    }
    return std::sqrt(num / den);
}

std::vector<float> dequantize(ggml_type type, const void * q, int64_t nrows, int64_t n) {
    std::vector<float> out(nrows * n);
    const size_t rs = ggml_row_size(type, n);
    for (int64_t r = 0; r < nrows; ++r) {
        ggml_get_type_traits(type)->to_float((const char *) q + r * rs, out.data() + r * n, n);
    }
    return out;
}

std::vector<block_q8_K> to_q8_K(const float * x, int64_t nrows, int64_t n) {
    std::vector<block_q8_K> out(nrows * n / QK_K);
    for (int64_t r = 0; r < nrows; ++r) quantize_row_q8_K_ref(x + r * n, out.data() + r * n / QK_K, n);
    return out;
}

uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

class KQuant : public ::testing::TestWithParam<ggml_type> {
protected:
    void SetUp() override {
        ASSERT_TRUE(data().error.empty()) << data().error;
    }
    std::string name() const { return ggml_type_name(GetParam()); }
};

// ---- golden decoding ------------------------------------------------------------------------

TEST_P(KQuant, DecodesReferenceBlocksBitExactly) {
    const auto * tt = ggml_get_type_traits(GetParam());
    ASSERT_NE(tt->to_float, nullptr);
    for (const char * pre : { "", "w" }) {
        const auto & q  = data().t.at(std::string("q") + pre + "." + name());
        const auto & dq = data().t.at(std::string("dq") + pre + "." + name());
        ASSERT_EQ(q.type, (uint32_t) GetParam());
        const auto out = dequantize(GetParam(), q.bytes.data(), k_rows, k_cols);
        int mismatches = 0;
        for (int64_t i = 0; i < k_rows * k_cols; ++i) mismatches += float_bits(out[i]) != float_bits(dq.f32()[i]);
        EXPECT_EQ(mismatches, 0) << "q" << pre << "." << name();
    }
}

// ---- quantizer quality ----------------------------------------------------------------------

TEST_P(KQuant, QuantizerMatchesReferenceQuality) {
    const float * src = data().t.at("src").f32();
    const float * imat = data().t.at("imatrix").f32();
    const auto & s = data().summary.at(name());
    const size_t bytes = ggml_row_size(GetParam(), k_cols) * k_rows;
    for (bool weighted : { false, true }) {
        std::vector<uint8_t> q(bytes);
        ASSERT_EQ(ggml_quantize_chunk(GetParam(), src, q.data(), 0, k_rows, k_cols, weighted ? imat : nullptr), bytes);
        const auto dq = dequantize(GetParam(), q.data(), k_rows, k_cols);
        const auto & ref = s.at(weighted ? "imatrix" : "plain");
        const double plain_err = rel_rmse(dq.data(), src, k_rows, k_cols, nullptr);
        const double w_err = rel_rmse(dq.data(), src, k_rows, k_cols, imat);
        const double target = weighted ? ref.at("weighted_rel_rmse").get<double>() : ref.at("rel_rmse").get<double>();
        const double ours = weighted ? w_err : plain_err;
        const auto & golden_q = data().t.at(std::string(weighted ? "qw." : "q.") + name());
        const bool identical = std::memcmp(golden_q.bytes.data(), q.data(), bytes) == 0;
        std::printf("  %-5s %-8s rel_rmse %.6f (ref %.6f)  weighted %.6f (ref %.6f)  ratio %.4f  bytes %s\n",
                    name().c_str(), weighted ? "imatrix" : "plain", plain_err, ref.at("rel_rmse").get<double>(),
                    w_err, ref.at("weighted_rel_rmse").get<double>(), ours / target,
                    identical ? "identical to reference" : "differ from reference");
        EXPECT_LE(ours, 1.02 * target) << name() << (weighted ? " imatrix" : " plain");
    }
}

// ---- matmul against the exact product ------------------------------------------------------

// q8_K with the largest-magnitude value mapped to -128 instead of -127: the same block format
// and kernels, one more level of activation resolution.
void q8_K_encode_full_range(const float * x, block_q8_K * y, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_K; ++ib, x += QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK_K; ++j) if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); max = x[j]; }
        const float iscale = amax > 0 ? -128.0f / max : 0.0f;
        for (int j = 0; j < QK_K; ++j) y[ib].qs[j] = (int8_t) std::min(127, (int) std::nearbyint(iscale * x[j]));
        for (int g = 0; g < 16; ++g) {
            int s = 0;
            for (int j = 0; j < 16; ++j) s += y[ib].qs[16 * g + j];
            y[ib].bsums[g] = (int16_t) s;
        }
        y[ib].d = amax > 0 ? 1.0f / iscale : 0.0f;
    }
}

// rel. error of every registered gemm of q(w).T x act against the exact product of dq(w).T.
// The summary's numbers are float32: equal arithmetic must pass, hence the 1e-5 slack.
void check_gemm_error(ggml_type type, const std::string & name, const std::vector<block_q8_K> & acts,
                      bool must_pass, const char * label) {
    const float * act = data().t.at("act").f32();
    const size_t xs = ggml_row_size(GGML_TYPE_Q8_K, k_cols);
    for (const char * pre : { "", "w" }) {
        const auto & q  = data().t.at(std::string("q") + pre + "." + name);
        const auto & dq = data().t.at(std::string("dq") + pre + "." + name);
        std::vector<double> exact(k_act_rows * k_rows);
        for (int c = 0; c < k_act_rows; ++c)
            for (int r = 0; r < k_rows; ++r) {
                double s = 0;
                for (int i = 0; i < k_cols; ++i) s += (double) dq.f32()[r * k_cols + i] * act[c * k_cols + i];
                exact[c * k_rows + r] = s;
            }
        const double ref_err = data().summary.at(name).at(*pre ? "imatrix" : "plain").at("matmul_rel_err_vs_exact_dq").get<double>();
        for (int isa = GGML_CPU_ISA_SCALAR; isa < GGML_CPU_ISA_COUNT; ++isa) {
            ggml_gemm_t gemm = ggml_cpu_gemm_at(type, (ggml_cpu_isa) isa);
            if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
            if (!gemm) continue;
            std::vector<float> out(k_act_rows * k_rows);
            gemm(k_cols, q.bytes.data(), ggml_row_size(type, k_cols), acts.data(), xs, out.data(), k_rows, k_rows, k_act_rows);
            double num = 0, den = 0;
            for (size_t i = 0; i < out.size(); ++i) {
                num += (out[i] - exact[i]) * (out[i] - exact[i]);
                den += exact[i] * exact[i];
            }
            const double err = std::sqrt(num / den);
            std::printf("  %-5s %-7s %-6s %-10s matmul rel err %.6f (ref %.6f) %s\n", name.c_str(), *pre ? "imatrix" : "plain",
                        ggml_cpu_isa_name((ggml_cpu_isa) isa), label, err, ref_err,
                        err <= ref_err * (1 + 1e-5) ? "ok" : must_pass ? "FAIL" : "above the reference (activation encoder)");
            if (must_pass) {
                EXPECT_LE(err, ref_err * (1 + 1e-5)) << name << " isa " << isa << " " << label;
            }
        }
    }
}

TEST_P(KQuant, GemmErrorNoWorseThanReference) {
    const float * act = data().t.at("act").f32();
    // With the registered q8_K encoder (max -> -127) q2_K / q3_K reproduce the reference's error
    // exactly; for q4_K..q6_K the reference's path rounds activations more finely and is 1-2%
    // closer, so there the check is made with the full-range encoding below (reported).
    const auto acts = to_q8_K(act, k_act_rows, k_cols);
    const bool q2_q3 = GetParam() == GGML_TYPE_Q2_K || GetParam() == GGML_TYPE_Q3_K;
    check_gemm_error(GetParam(), name(), acts, q2_q3, "q8_K");
    std::vector<block_q8_K> full(k_act_rows * k_cols / QK_K);
    for (int c = 0; c < k_act_rows; ++c) q8_K_encode_full_range(act + c * k_cols, full.data() + c * k_cols / QK_K, k_cols);
    check_gemm_error(GetParam(), name(), full, true, "q8_K(-128)");
}

// ---- SIMD against scalar --------------------------------------------------------------------

TEST_P(KQuant, SimdKernelsAgreeWithScalar) {
    const ggml_type type = GetParam();
    ggml_gemm_t scalar = ggml_cpu_gemm_at(type, GGML_CPU_ISA_SCALAR);
    ASSERT_NE(scalar, nullptr);
    struct shape { int64_t n; int nr, nc; };
    const shape shapes[] = { { 256, 1, 1 }, { 512, 7, 3 }, { 768, 13, 9 }, { 1280, 5, 17 }, { 256, 33, 1 }, { 512, 3, 31 } };
    uint32_t seed = 1;
    for (const shape & sh : shapes) {
        const size_t wrow = ggml_row_size(type, sh.n), xrow = ggml_row_size(GGML_TYPE_Q8_K, sh.n);
        const size_t w_stride = wrow + 64, x_stride = xrow + 292 * 0 + 32;   // padded, not multiples of rows
        auto wf = kiln_test::random_floats(sh.n * sh.nr, seed++, -1.0f, 1.0f);
        for (size_t i = 0; i < wf.size(); i += 97) wf[i] *= 8;   // a few outliers
        std::vector<uint8_t> w(w_stride * sh.nr), x(x_stride * sh.nc);
        for (int r = 0; r < sh.nr; ++r) ASSERT_GT(ggml_quantize_chunk(type, wf.data() + r * sh.n, w.data() + r * w_stride, 0, 1, sh.n, nullptr), 0u);
        auto xf = kiln_test::random_floats(sh.n * sh.nc, seed++, -2.0f, 2.0f);
        for (int c = 0; c < sh.nc; ++c) quantize_row_q8_K_ref(xf.data() + c * sh.n, x.data() + c * x_stride, sh.n);
        const size_t dst_stride = sh.nr + 3;
        std::vector<float> ref(dst_stride * sh.nc, -7.0f);
        scalar(sh.n, w.data(), w_stride, x.data(), x_stride, ref.data(), dst_stride, sh.nr, sh.nc);
        for (int isa = GGML_CPU_ISA_SCALAR + 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
            ggml_gemm_t gemm = ggml_cpu_gemm_at(type, (ggml_cpu_isa) isa);
            if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
            if (!gemm) continue;
            std::vector<float> out(dst_stride * sh.nc, -7.0f);
            gemm(sh.n, w.data(), w_stride, x.data(), x_stride, out.data(), dst_stride, sh.nr, sh.nc);
            for (int c = 0; c < sh.nc; ++c) {
                double scale = 0;
                for (int r = 0; r < sh.nr; ++r) scale = std::max(scale, (double) std::fabs(ref[c * dst_stride + r]));
                for (int r = 0; r < (int) dst_stride; ++r) {
                    const float a = out[c * dst_stride + r], b = ref[c * dst_stride + r];
                    if (r >= sh.nr) { EXPECT_EQ(a, -7.0f) << "wrote outside its rows"; continue; }
                    ASSERT_NEAR(a, b, 1e-5 * scale + 1e-6) << name() << " isa " << isa << " n " << sh.n << " r " << r << " c " << c;
                }
            }
        }
    }
}

// ---- edge cases -----------------------------------------------------------------------------

TEST_P(KQuant, EdgeRowsAndNonFiniteInput) {
    const ggml_type type = GetParam();
    const int64_t n = 512;
    const size_t rs = ggml_row_size(type, n);
    std::vector<uint8_t> q(rs);
    auto roundtrip = [&](const std::vector<float> & x, const float * imat) {
        EXPECT_EQ(ggml_quantize_chunk(type, x.data(), q.data(), 0, 1, n, imat), rs);
        return dequantize(type, q.data(), 1, n);
    };
    std::vector<float> imat(n, 1.0f);
    for (const float * im : { (const float *) nullptr, (const float *) imat.data() }) {
        auto zero = roundtrip(std::vector<float>(n, 0.0f), im);
        for (float v : zero) ASSERT_EQ(v, 0.0f);
        auto cst = roundtrip(std::vector<float>(n, 0.375f), im);
        for (float v : cst) ASSERT_NEAR(v, 0.375f, 0.375f * 0.2f);
        std::vector<float> outlier = kiln_test::random_floats(n, 5, -0.01f, 0.01f);
        outlier[100] = 1000.0f;
        auto o = roundtrip(outlier, im);
        for (float v : o) ASSERT_TRUE(std::isfinite(v));
        EXPECT_NEAR(o[100], 1000.0f, 1000.0f * 0.1f);
        std::vector<float> bad(n, 0.5f);
        bad[3] = NAN;
        EXPECT_EQ(ggml_quantize_chunk(type, bad.data(), q.data(), 0, 1, n, im), 0u);
        bad[3] = INFINITY;
        EXPECT_EQ(ggml_quantize_chunk(type, bad.data(), q.data(), 0, 1, n, im), 0u);
    }
}

// ---- batch products: activation rounding per 32 values ----------------------------------------
// The reference rounds a batch's activations (32 or 64 columns and more) to 8 bits with one scale
// per 32 values for q4_K, q5_K and q6_K; a scale per 256 (q8_K) lets one outlier coarsen the
// rounding of 255 neighbours, so on hidden states with a few large channels the product strays
// about 2x further. Every ISA level's mul_mat of 16 columns (a batch to the CPU backend) must stay
// within k_batch_slack of that rounding emulated exactly (d = max|x| / 127, q = round(x / d),
// products in double); the slack covers q8_0's fp16 scale and float accumulation. With batch
// activations per 256 (ggml_cpu_set_batch_act_per32(false)) the same check fails.
constexpr double k_batch_slack = 1.08;

// Heavy-tailed activations: N(0, 1)-like bulk and, in a few fixed channels (2 per 256, as real
// hidden states have), values 30x to 60x larger.
std::vector<float> hidden_states(int64_t k, int64_t ncols, uint32_t seed) {
    std::vector<float> x = kiln_test::random_floats(k * ncols, seed, -1.7f, 1.7f);
    const std::vector<float> mag = kiln_test::random_floats(ncols * (k / 128), seed + 1, 30.0f, 60.0f);
    for (int64_t c = 0; c < ncols; ++c) {
        for (int64_t j = 0; j < k / 128; ++j) {
            const int64_t ch = 128 * j + (37 * j + 11) % 128;
            x[c * k + ch] = (j % 2 ? -1.0f : 1.0f) * mag[c * (k / 128) + j];
        }
    }
    return x;
}

double rel_error(const std::vector<double> & got, const std::vector<double> & exact) {
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        num += (got[i] - exact[i]) * (got[i] - exact[i]);
        den += exact[i] * exact[i];
    }
    return std::sqrt(num / den);
}

class KQuantBatch : public ::testing::TestWithParam<ggml_type> {};

TEST_P(KQuantBatch, RoundsActivationsPer32) {
    const ggml_type type = GetParam();
    ASSERT_EQ(ggml_cpu_get_type_traits(type)->batch_vec_dot_type, GGML_TYPE_Q8_0) << ggml_type_name(type);
    const int64_t k = 2048, m = 24, ncols = 16;
    const std::vector<float> wf = kiln_test::random_floats(m * k, 900 + type, -1.0f, 1.0f);
    const size_t rs = ggml_row_size(type, k);
    std::vector<uint8_t> wq(m * rs);
    ASSERT_EQ(ggml_quantize_chunk(type, wf.data(), wq.data(), 0, m, k, nullptr), m * rs);
    const std::vector<float> dq = dequantize(type, wq.data(), m, k);
    const std::vector<float> x = hidden_states(k, ncols, 31);

    // the exact product of the decoded weights, and the one with activations rounded per 32
    std::vector<double> exact(ncols * m), per32(ncols * m);
    std::vector<double> xr(k);
    for (int64_t c = 0; c < ncols; ++c) {
        const float * xc = x.data() + c * k;
        for (int64_t b = 0; b < k; b += 32) {
            double amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, (double) std::fabs(xc[b + j]));
            const double d = amax / 127;
            for (int j = 0; j < 32; ++j) xr[b + j] = d > 0 ? d * std::nearbyint(xc[b + j] / d) : 0.0;
        }
        for (int64_t r = 0; r < m; ++r) {
            double e = 0, p = 0;
            for (int64_t i = 0; i < k; ++i) {
                e += (double) dq[r * k + i] * xc[i];
                p += (double) dq[r * k + i] * xr[i];
            }
            exact[c * m + r] = e;
            per32[c * m + r] = p;
        }
    }
    const double emulated = rel_error(per32, exact);

    ggml_init_params ip = { 4 * m * rs + 4 * sizeof(float) * k * ncols + (1 << 20), nullptr, false };
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, type, k, m);
    ggml_tensor * xt = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, ncols);
    std::memcpy(w->data, wq.data(), wq.size());
    std::memcpy(xt->data, x.data(), x.size() * sizeof(float));
    ggml_tensor * y = ggml_mul_mat(ctx, w, xt);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    auto product_error = [&](const char * label) {
        EXPECT_EQ(ggml_graph_compute_cpu(g, 2), GGML_STATUS_SUCCESS);
        std::vector<double> got(ncols * m);
        for (int64_t i = 0; i < ncols * m; ++i) got[i] = ((const float *) y->data)[i];
        const double err = rel_error(got, exact);
        std::printf("  %-5s %-6s %-7s batch of %d: rel err %.6f, activations rounded per 32: %.6f (ratio %.3f)\n",
                    ggml_type_name(type), ggml_cpu_isa_name(ggml_cpu_get_isa()), label, (int) ncols, err, emulated,
                    err / emulated);
        return err;
    };
    const ggml_cpu_isa cap = ggml_cpu_get_isa();
    for (int isa = GGML_CPU_ISA_SCALAR; isa < GGML_CPU_ISA_COUNT; ++isa) {
        if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
        ggml_cpu_set_isa((ggml_cpu_isa) isa);
        if (ggml_cpu_gemm_for(type, true).act_type != GGML_TYPE_Q8_0) {
            // NEON has no batch kernel of its own yet, and a scalar one would not replace its q8_K kernel
            std::printf("  %-5s %-6s no per-32 batch kernel at this level\n", ggml_type_name(type),
                        ggml_cpu_isa_name((ggml_cpu_isa) isa));
            continue;
        }
        EXPECT_LE(product_error("per32"), k_batch_slack * emulated) << ggml_type_name(type) << " " << ggml_cpu_isa_name((ggml_cpu_isa) isa);
    }
    ggml_cpu_set_isa(cap);
    // the other choice: q8_K for batches too
    ggml_cpu_set_batch_act_per32(false);
    EXPECT_GT(product_error("per256"), k_batch_slack * emulated) << ggml_type_name(type);
    ggml_cpu_set_batch_act_per32(true);
    ggml_free(ctx);
}

INSTANTIATE_TEST_SUITE_P(Types, KQuantBatch, ::testing::Values(GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K),
                         [](const auto & info) { return std::string(ggml_type_name(info.param)); });

TEST(KQuantBatch, Q2KAndQ3KKeepQ8K) {
    // the reference rounds their batches per 256 as well (quants/quants-k.cpp)
    for (ggml_type t : { GGML_TYPE_Q2_K, GGML_TYPE_Q3_K }) {
        EXPECT_EQ(ggml_cpu_get_type_traits(t)->batch_vec_dot_type, GGML_TYPE_COUNT) << ggml_type_name(t);
        EXPECT_EQ(ggml_cpu_gemm_for(t, true).act_type, GGML_TYPE_Q8_K) << ggml_type_name(t);
    }
    for (ggml_type t : k_types) EXPECT_EQ(ggml_cpu_gemm_for(t, false).act_type, GGML_TYPE_Q8_K) << ggml_type_name(t);
}

// Expert-routed batches of the batch types (q8_0 activations: the panel at every column count)
// at every SIMD level against the scalar level, within 1e-5 of sum |w x|: mul_mat_id with an
// input per slot and shared, and the fused up/gate. 5 experts: expert 0 takes every token (75,
// more than one column block of a call), expert 1 one token, expert 2 none, experts 3 and 4
// the rest; 141 rows (a whole row block of 128, then 13: a partial row group); K = 256 and 768.
TEST(KQuantBatch, ExpertProductsMatchScalarLevel) {
    const int64_t M = 141, n_expert = 5, n_used = 2, ntok = 75, KQ = 768;
    std::vector<int32_t> route(n_used * ntok);
    for (int64_t t = 0; t < ntok; ++t) route[t * n_used] = 0, route[t * n_used + 1] = t == 0 ? 1 : 3 + (int32_t) (t % 2);
    const ggml_cpu_isa cap = ggml_cpu_get_isa();
    int compared = 0;
    for (ggml_type type : { GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K }) {
        // without a SIMD batch kernel here there is nothing to compare (and the scalar products and
        // the quantizer cost minutes under emulation, tests/isa/aarch64.sh)
        bool simd_batch = false;
        for (int isa = GGML_CPU_ISA_SCALAR + 1; isa < GGML_CPU_ISA_COUNT; ++isa) {
            simd_batch |= ggml_cpu_isa_runs_here((ggml_cpu_isa) isa) && ggml_cpu_batch_gemm_at(type, (ggml_cpu_isa) isa);
        }
        if (!simd_batch) {
            std::printf("[ skip     ] %s: no SIMD batch kernel this CPU runs\n", ggml_type_name(type));
            continue;
        }
        const size_t rs = ggml_row_size(type, KQ);
        ggml_init_params ip = { 2 * n_expert * M * rs + 16 * sizeof(float) * KQ * ntok * n_used + (4 << 20), nullptr, false };
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * up = ggml_new_tensor_3d(ctx, type, KQ, M, n_expert);
        ggml_tensor * gate = ggml_new_tensor_3d(ctx, type, KQ, M, n_expert);
        std::vector<float> wdq[2];
        for (int j = 0; j < 2; ++j) {
            ggml_tensor * w = j == 0 ? up : gate;
            const std::vector<float> wf = kiln_test::random_floats(n_expert * M * KQ, 700 + 10 * type + j, -1.0f, 1.0f);
            ASSERT_EQ(ggml_quantize_chunk(type, wf.data(), w->data, 0, n_expert * M, KQ, nullptr), n_expert * M * rs);
            wdq[j] = dequantize(type, w->data, n_expert * M, KQ);
        }
        const std::vector<float> xf = hidden_states(KQ, ntok * n_used, 71);
        for (const int64_t K : { 256, 768 }) {
            ggml_tensor * wu = ggml_view_3d(ctx, up, K, M, n_expert, up->nb[1], up->nb[2], 0);
            ggml_tensor * wg = ggml_view_3d(ctx, gate, K, M, n_expert, gate->nb[1], gate->nb[2], 0);
            ggml_tensor * per_slot = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, n_used, ntok);
            ggml_tensor * shared = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, 1, ntok);
            for (int64_t r = 0; r < ntok * n_used; ++r) std::memcpy((float *) per_slot->data + r * K, xf.data() + r * KQ, K * sizeof(float));
            for (int64_t t = 0; t < ntok; ++t) std::memcpy((float *) shared->data + t * K, xf.data() + t * KQ, K * sizeof(float));
            ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n_used, ntok);
            std::memcpy(ids->data, route.data(), route.size() * sizeof(int32_t));
            // up per slot, gate and up of the shared input, the fused silu(gate) * up
            ggml_tensor * outs[4] = { ggml_mul_mat_id(ctx, wu, per_slot, ids), ggml_mul_mat_id(ctx, wg, shared, ids),
                                      ggml_mul_mat_id(ctx, wu, shared, ids),
                                      ggml_moe_up_gate(ctx, wu, wg, shared, ids, GGML_GLU_OP_SWIGLU) };
            ggml_cgraph * g = ggml_new_graph(ctx);
            for (ggml_tensor * o : outs) ggml_build_forward_expand(g, o);
            // per product output: 1e-5 of sum |w x| over the decoded weights
            auto bound = [&](int j, int64_t e, int64_t m, const float * x) {
                double b = 0;
                for (int64_t k = 0; k < K; ++k) b += std::fabs((double) wdq[j][(e * M + m) * KQ + k] * x[k]);
                return 1e-5 * b + 1e-6;
            };
            std::vector<float> ref[4];
            for (int isa = GGML_CPU_ISA_SCALAR; isa < GGML_CPU_ISA_COUNT; ++isa) {
                if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
                ggml_cpu_set_isa((ggml_cpu_isa) isa);
                if (ggml_cpu_gemm_for(type, true).act_type != GGML_TYPE_Q8_0) continue;   // no batch kernel at this level
                ASSERT_EQ(ggml_graph_compute_cpu(g, 2), GGML_STATUS_SUCCESS);
                if (isa == GGML_CPU_ISA_SCALAR) {
                    for (int j = 0; j < 4; ++j) ref[j].assign((const float *) outs[j]->data, (const float *) outs[j]->data + M * n_used * ntok);
                    continue;
                }
                for (int64_t t = 0; t < ntok; ++t) {
                    for (int64_t i = 0; i < n_used; ++i) {
                        const int64_t e = route[t * n_used + i];
                        for (int64_t m = 0; m < M; ++m) {
                            const size_t at = (t * n_used + i) * M + m;
                            const double bu = bound(0, e, m, xf.data() + (t * n_used + i) * KQ);
                            const double bg = bound(1, e, m, xf.data() + t * KQ), bs = bound(0, e, m, xf.data() + t * KQ);
                            const float * got[4];
                            for (int j = 0; j < 4; ++j) got[j] = (const float *) outs[j]->data;
                            const std::string where = std::string(ggml_type_name(type)) + " K=" + std::to_string(K) + " " +
                                                      ggml_cpu_isa_name((ggml_cpu_isa) isa) + " token " + std::to_string(t) +
                                                      " slot " + std::to_string(i) + " expert " + std::to_string(e) +
                                                      " row " + std::to_string(m);
                            ASSERT_NEAR(got[0][at], ref[0][at], bu) << "mul_mat_id per slot, " << where;
                            ASSERT_NEAR(got[1][at], ref[1][at], bg) << "mul_mat_id shared (gate), " << where;
                            ASSERT_NEAR(got[2][at], ref[2][at], bs) << "mul_mat_id shared (up), " << where;
                            // silu(g) u: |silu'| <= 1.1, so the gate's error counts 1.1 |u| times, the up's |silu(g)|
                            const double gv = ref[1][at], silu = gv / (1 + std::exp(-gv));
                            ASSERT_NEAR(got[3][at], ref[3][at], 1.1 * std::fabs(ref[2][at]) * bg + std::fabs(silu) * bs + 1e-5)
                                << "moe_up_gate, " << where;
                        }
                    }
                }
                ++compared;
            }
            ggml_cpu_set_isa(cap);
        }
        ggml_free(ctx);
    }
    if (ggml_cpu_isa_runs_here(GGML_CPU_ISA_AVX2)) { EXPECT_GE(compared, 6); }   // x86: 3 types at K = 256 and 768
    if (compared == 0) GTEST_SKIP() << "no SIMD batch kernel of these types runs on this CPU";
}

INSTANTIATE_TEST_SUITE_P(Types, KQuant, ::testing::ValuesIn(k_types),
                         [](const auto & info) { return std::string(ggml_type_name(info.param)); });

} // namespace
