// Every quantization type against the reference's golden data (golden/quants.gguf and
// quants-summary.json, see golden/README.md):
//   - decoding the reference's blocks q.T / qw.T reproduces dq.T / dqw.T (at most 1 ulp);
//   - our quantizer's error on src is at most 2% above the reference's (plain: rel_rmse,
//     with imatrix: weighted_rel_rmse) and our blocks decode with our decoder;
//   - our matmul of q.T with act (each registered ISA kernel) strays from the exact product of
//     dq.T and act no further than the reference's matmul did (matmul_rel_err_vs_exact_dq).
// The suite is type-agnostic: a type in the golden file without a registered decoder, quantizer
// or gemm is skipped with a note, so a family is tested as soon as it registers.
#include "testing.h"
#include "golden-quants-file.h"

#include "cpu-traits.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

struct golden_data : golden_tensors {
    nlohmann::json           summary;
    std::vector<std::string> type_names;   // every T with a q.T or qw.T tensor
};

golden_data load_golden() {
    golden_data g;
    static_cast<golden_tensors &>(g) = read_golden_tensors();
    if (!g.error.empty()) return g;
    for (const auto & [name, t] : g.tensors) {
        for (const char * prefix : { "q.", "qw." }) {
            if (name.rfind(prefix, 0) == 0) {
                const std::string tn = name.substr(std::strlen(prefix));
                if (std::find(g.type_names.begin(), g.type_names.end(), tn) == g.type_names.end()) g.type_names.push_back(tn);
            }
        }
    }
    std::ifstream js(kiln_test::shared_path("golden/quants-summary.json"));
    if (!js) {
        g.error = "cannot open golden/quants-summary.json";
        return g;
    }
    g.summary = nlohmann::json::parse(js);
    return g;
}

const golden_data & golden() {
    static const golden_data g = load_golden();
    return g;
}

// One form of a type: plain (q.T, no imatrix) or weighted (qw.T, with the imatrix).
struct form {
    const char * prefix;      // "" or "w"
    const char * summary_key; // "plain" or "imatrix"
    bool         weighted;
};
constexpr form k_forms[] = { { "", "plain", false }, { "w", "imatrix", true } };

struct error_metrics {
    double rel_rmse;
    double weighted_rel_rmse;
};

// The summary's definitions (verified against the reference's own dq.T below):
// rel_rmse = sqrt(sum (q - x)^2 / sum x^2); the weighted one weights column j by imatrix[j].
error_metrics quant_error(const float * q, const float * x, const float * imatrix, int64_t nrows, int64_t ncols) {
    double e = 0, s = 0, we = 0, ws = 0;
    for (int64_t r = 0; r < nrows; ++r) {
        for (int64_t j = 0; j < ncols; ++j) {
            const double d = (double) q[r * ncols + j] - x[r * ncols + j];
            const double v = x[r * ncols + j];
            e += d * d;
            s += v * v;
            we += imatrix[j] * d * d;
            ws += imatrix[j] * v * v;
        }
    }
    return { std::sqrt(e / s), std::sqrt(we / ws) };
}

// sqrt(sum (mm - exact)^2 / sum exact^2) with exact[c][r] = dot(dq row r, act row c) in double.
double matmul_error(const float * mm, const float * dq, const float * act, int64_t nrows, int64_t ncols, int64_t nact) {
    double e = 0, s = 0;
    for (int64_t c = 0; c < nact; ++c) {
        for (int64_t r = 0; r < nrows; ++r) {
            double exact = 0;
            for (int64_t k = 0; k < ncols; ++k) exact += (double) dq[r * ncols + k] * act[c * ncols + k];
            const double d = mm[c * nrows + r] - exact;
            e += d * d;
            s += exact * exact;
        }
    }
    return std::sqrt(e / s);
}

// Least-squares factor s with mm ~ s * (dq . act): the reference scales some types' products at
// inference time (iq2_kt x 1.05, iq3_kt x 1.01; summary "matmul_scale_vs_dq").
double matmul_scale(const float * mm, const float * dq, const float * act, int64_t nrows, int64_t ncols, int64_t nact) {
    double num = 0, den = 0;
    for (int64_t c = 0; c < nact; ++c) {
        for (int64_t r = 0; r < nrows; ++r) {
            double exact = 0;
            for (int64_t k = 0; k < ncols; ++k) exact += (double) dq[r * ncols + k] * act[c * ncols + k];
            num += mm[c * nrows + r] * exact;
            den += exact * exact;
        }
    }
    return den > 0 ? num / den : 1.0;
}

// matmul_error against the scaled exact product s * (dq . act).
double matmul_error_scaled(const float * mm, const float * dq, const float * act, int64_t nrows, int64_t ncols, int64_t nact,
                           double scale) {
    std::vector<float> unscaled(nrows * nact);
    for (size_t i = 0; i < unscaled.size(); ++i) unscaled[i] = (float) (mm[i] / scale);
    return matmul_error(unscaled.data(), dq, act, nrows, ncols, nact);
}

int64_t ulp_distance(float a, float b) {
    int32_t ia, ib;
    std::memcpy(&ia, &a, 4);
    std::memcpy(&ib, &b, 4);
    if (ia < 0) ia = (int32_t) (0x80000000u - (uint32_t) ia);
    if (ib < 0) ib = (int32_t) (0x80000000u - (uint32_t) ib);
    return std::llabs((long long) ia - (long long) ib);
}

ggml_type type_of(const std::string & name) {
    const golden_data & g = golden();
    for (const char * prefix : { "q.", "qw." }) {
        if (const golden_tensor * t = g.find(prefix + name)) return t->type;
    }
    return GGML_TYPE_COUNT;
}

// Decode nrows rows of type t; interleaved types decode groups of nrows_interleaved rows.
bool decode_rows(ggml_type t, const uint8_t * data, int64_t nrows, int64_t ncols, std::vector<float> & out) {
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    if (!tt->to_float) return false;
    const int64_t group = tt->nrows_interleaved > 1 ? tt->nrows_interleaved : 1;
    const size_t row_size = ggml_row_size(t, ncols);
    out.assign(nrows * ncols, NAN);
    for (int64_t r = 0; r < nrows; r += group) {
        tt->to_float(data + r * row_size, out.data() + r * ncols, ncols * group);
    }
    return true;
}

// The summary row that holds type tn's reference numbers: its own, or for an interleaved layout
// the reference did not list, its plain twin's (weaving rows changes neither values nor products).
std::string summary_name(const golden_data & g, const std::string & tn) {
    if (g.summary.contains(tn)) return tn;
    const ggml_type_traits * tt = ggml_get_type_traits(type_of(tn));
    return tt->nrows_interleaved > 1 ? ggml_type_name(tt->interleaved_base) : tn;
}

// An interleaved layout stored without its decoded values (bf16_r16: the reference converts by
// truncation there, so its values are not the twin's): our decode of q.T must stay within four
// times the twin's worst error relative to the row's largest magnitude (truncation errs up to a
// whole unit of the last place, rounding up to half of one, at other positions). A wrong weave
// puts values in the wrong rows and columns: errors of the order of the values themselves.
bool decode_close_to_twin(const golden_data & g, const std::string & prefix, const std::string & tn, const golden_tensor & q) {
    const ggml_type t = type_of(tn);
    const std::string twin = ggml_type_name(ggml_get_type_traits(t)->interleaved_base);
    const golden_tensor * tdq = g.find("dq" + prefix + "." + twin);
    const golden_tensor * src = g.find("src");
    if (!tdq || !src) return false;
    const int64_t ncols = q.ne[0], nrows = q.ne[1];
    std::vector<float> out;
    if (!decode_rows(t, q.data.data(), nrows, ncols, out)) return false;
    double worst_ours = 0, worst_twin = 0;
    for (int64_t r = 0; r < nrows; ++r) {
        double amax = 1e-30;
        for (int64_t c = 0; c < ncols; ++c) amax = std::max(amax, (double) std::fabs(src->f32()[r * ncols + c]));
        for (int64_t c = 0; c < ncols; ++c) {
            const int64_t i = r * ncols + c;
            const double ours = std::isfinite(out[i]) ? std::fabs(out[i] - src->f32()[i]) / amax : 1e30;
            worst_ours = std::max(worst_ours, ours);
            worst_twin = std::max(worst_twin, std::fabs(tdq->f32()[i] - src->f32()[i]) / amax);
        }
    }
    EXPECT_LE(worst_ours, 4 * worst_twin + 1e-7) << tn << ": decoded reference blocks stray from src (twin " << twin << "): "
                                                 << worst_ours << " vs " << worst_twin;
    return true;
}

class QuantGolden : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        ASSERT_TRUE(golden().error.empty()) << "golden data unavailable: " << golden().error;
    }
};

std::vector<std::string> golden_type_names() {
    const golden_data & g = golden();
    if (!g.error.empty()) return { "unavailable" };
    return g.type_names;
}

TEST(QuantGoldenFile, HasInputsAndSummaryDefinitionsHold) {
    const golden_data & g = golden();
    ASSERT_TRUE(g.error.empty()) << g.error;
    const golden_tensor * src = g.find("src");
    const golden_tensor * im  = g.find("imatrix");
    const golden_tensor * act = g.find("act");
    ASSERT_TRUE(src && im && act);
    ASSERT_EQ(src->ne, (std::vector<int64_t>{ 512, 32 }));
    ASSERT_EQ(im->ne[0], 512);
    ASSERT_EQ(act->ne[0], 512);
    ASSERT_GE(g.type_names.size(), 20u);
    // Recompute the reference's own metrics from its dq/mm tensors: this pins down the definitions
    // used by the per-type checks.
    int checked = 0;
    for (const std::string & tn : g.type_names) {
        for (const form & f : k_forms) {
            const golden_tensor * dq = g.find(std::string("dq") + f.prefix + "." + tn);
            const golden_tensor * mm = g.find(std::string("mm") + f.prefix + "." + tn);
            if (!dq || !mm || !g.summary.contains(tn) || !g.summary[tn].contains(f.summary_key)) continue;
            const auto & s = g.summary[tn][f.summary_key];
            const error_metrics m = quant_error(dq->f32(), src->f32(), im->f32(), 32, 512);
            EXPECT_NEAR(m.rel_rmse, s["rel_rmse"].get<double>(), 1e-5 * s["rel_rmse"].get<double>() + 1e-9) << tn;
            EXPECT_NEAR(m.weighted_rel_rmse, s["weighted_rel_rmse"].get<double>(),
                        1e-5 * s["weighted_rel_rmse"].get<double>() + 1e-9) << tn;
            const double me = matmul_error(mm->f32(), dq->f32(), act->f32(), 32, 512, act->ne[1]);
            const double ref = s["matmul_rel_err_vs_exact_dq"].get<double>();
            // the reference computed its "exact" product in float (about 5e-7 of noise, visible for f16)
            EXPECT_NEAR(me, ref, 1e-3 * ref + 1e-6) << tn << " " << f.summary_key;
            if (s.contains("matmul_scale_vs_dq")) {
                EXPECT_NEAR(matmul_scale(mm->f32(), dq->f32(), act->f32(), 32, 512, act->ne[1]), s["matmul_scale_vs_dq"].get<double>(), 1e-4)
                    << tn << " " << f.summary_key;
            }
            ++checked;
        }
    }
    EXPECT_GE(checked, 20);
}

TEST_P(QuantGolden, DequantizeMatchesReference) {
    const std::string tn = GetParam();
    const ggml_type t = type_of(tn);
    const golden_data & g = golden();
    ASSERT_TRUE(ggml_get_type_traits(t)->to_float) << tn << ": no decoder (to_float) registered: not implemented";
    int compared = 0;
    for (const form & f : k_forms) {
        const golden_tensor * q  = g.find(std::string("q") + f.prefix + "." + tn);
        const golden_tensor * dq = g.find(std::string("dq") + f.prefix + "." + tn);
        if (q && !dq && ggml_get_type_traits(t)->nrows_interleaved > 1) {
            compared += decode_close_to_twin(g, f.prefix, tn, *q);
            continue;
        }
        if (!q || !dq) continue;
        ++compared;
        const int64_t ncols = q->ne[0], nrows = q->ne[1];
        ASSERT_EQ(q->data.size(), (size_t) nrows * ggml_row_size(t, ncols)) << tn;
        std::vector<float> out;
        ASSERT_TRUE(decode_rows(t, q->data.data(), nrows, ncols, out));
        int64_t worst = 0, worst_i = 0, n_off = 0;
        for (int64_t i = 0; i < nrows * ncols; ++i) {
            const float ref = dq->f32()[i];
            const int64_t u = std::isnan(out[i]) ? INT64_MAX : ulp_distance(out[i], ref);
            if (u > 0) ++n_off;
            if (u > worst) { worst = u; worst_i = i; }
        }
        EXPECT_LE(worst, 1) << tn << (f.weighted ? " (qw)" : " (q)") << ": " << n_off << " values differ; worst at row "
                            << worst_i / ncols << " col " << worst_i % ncols << ": " << out[worst_i] << " vs "
                            << dq->f32()[worst_i];
    }
    EXPECT_GT(compared, 0) << tn << ": no decoded reference values to compare with";
}

TEST_P(QuantGolden, QuantizeErrorNoWorseThanReference) {
    const std::string tn = GetParam();
    const ggml_type t = type_of(tn);
    const golden_data & g = golden();
    const ggml_type_traits * tt = ggml_get_type_traits(t);
    ASSERT_TRUE(tt->to_float) << tn << ": no decoder (to_float) registered: not implemented";
    ASSERT_TRUE(tt->quantize || tt->from_float_ref) << tn << ": no quantizer registered: not implemented";
    const golden_tensor * src = g.find("src");
    const golden_tensor * im  = g.find("imatrix");
    const int64_t ncols = src->ne[0], nrows = src->ne[1];
    const size_t row_size = ggml_row_size(t, ncols);
    const std::string sn = summary_name(g, tn);
    ASSERT_TRUE(g.summary.contains(sn)) << tn << ": no reference numbers";
    for (const form & f : k_forms) {
        if (!g.summary.contains(sn) || !g.summary[sn].contains(f.summary_key)) continue;
        if (!f.weighted && tt->requires_imatrix) continue;
        std::vector<uint8_t> q(nrows * row_size + 64, 0xA5);
        const size_t written = ggml_quantize_chunk(t, src->f32(), q.data(), 0, nrows, ncols, f.weighted ? im->f32() : nullptr);
        ASSERT_EQ(written, nrows * row_size) << tn;
        for (size_t i = written; i < q.size(); ++i) ASSERT_EQ(q[i], 0xA5) << tn << ": quantizer wrote past its rows";
        std::vector<float> out;
        ASSERT_TRUE(decode_rows(t, q.data(), nrows, ncols, out));
        for (float v : out) ASSERT_TRUE(std::isfinite(v)) << tn << ": our blocks decode to non-finite values";
        const error_metrics m = quant_error(out.data(), src->f32(), im->f32(), nrows, ncols);
        const auto & s = g.summary[sn][f.summary_key];
        // plain quantization is judged by the plain error, imatrix quantization by the weighted one
        const double ours = f.weighted ? m.weighted_rel_rmse : m.rel_rmse;
        const double ref  = s[f.weighted ? "weighted_rel_rmse" : "rel_rmse"].get<double>();
        std::printf("[ quant    ] %-10s %-7s ours %.6f ref %.6f ratio %.4f (other metric: ours %.6f ref %.6f)\n",
                    tn.c_str(), f.summary_key, ours, ref, ours / ref, f.weighted ? m.rel_rmse : m.weighted_rel_rmse,
                    s[f.weighted ? "rel_rmse" : "weighted_rel_rmse"].get<double>());
        EXPECT_LE(ours, 1.02 * ref + 1e-7) << tn << " " << f.summary_key;
    }
}

TEST_P(QuantGolden, MatmulNoFurtherFromExactThanReference) {
    const std::string tn = GetParam();
    const ggml_type t = type_of(tn);
    const golden_data & g = golden();
    const golden_tensor * act = g.find("act");
    const ggml_cpu_type_traits * ct = ggml_cpu_get_type_traits(t);
    int ran = 0;
    for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
        const ggml_gemm_t gemm = ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
        if (!gemm) continue;
        if (!ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
        const ggml_type vdt = ct->vec_dot_type;
        ggml_from_float_t enc = ggml_cpu_from_float_at(vdt, (ggml_cpu_isa) isa);
        if (!enc) enc = ggml_get_type_traits(vdt)->from_float_ref;
        ASSERT_TRUE(enc) << tn << ": activation type " << ggml_type_name(vdt) << " has no encoder";
        const int64_t ncols = act->ne[0], nact = act->ne[1];
        const size_t act_row = ggml_row_size(vdt, ncols);
        std::vector<uint8_t> xq(nact * act_row);
        for (int64_t c = 0; c < nact; ++c) enc(act->f32() + c * ncols, xq.data() + c * act_row, ncols);
        const std::string sn = summary_name(g, tn);
        for (const form & f : k_forms) {
            const golden_tensor * q  = g.find(std::string("q") + f.prefix + "." + tn);
            golden_tensor decoded;
            std::vector<float> mine;
            const golden_tensor * dq = g.find(std::string("dq") + f.prefix + "." + tn);
            if (q && !dq && decode_rows(t, q->data.data(), q->ne[1], q->ne[0], mine)) {
                // no reference values (bf16_r16): ours, checked against src by DequantizeMatchesReference
                decoded.data.assign((const uint8_t *) mine.data(), (const uint8_t *) (mine.data() + mine.size()));
                dq = &decoded;
            }
            if (!q || !dq || !g.summary.contains(sn) || !g.summary[sn].contains(f.summary_key)) continue;
            const int64_t nrows = q->ne[1];
            std::vector<float> mm(nact * nrows, NAN);
            gemm(ncols, q->data.data(), ggml_row_size(t, ncols), xq.data(), act_row, mm.data(), nrows, (int) nrows, (int) nact);
            double ours = matmul_error(mm.data(), dq->f32(), act->f32(), nrows, ncols, nact);
            double ref  = g.summary[sn][f.summary_key]["matmul_rel_err_vs_exact_dq"].get<double>();
            const auto & sm = g.summary[sn][f.summary_key];
            const double ref_scale = sm.contains("matmul_scale_vs_dq") ? sm["matmul_scale_vs_dq"].get<double>() : 1.0;
            const golden_tensor * ref_mm = g.find(std::string("mm") + f.prefix + "." + tn);
            // (other types' products stray from 1 by up to ~0.5%: activation rounding noise)
            const bool scaled = std::fabs(ref_scale - 1.0) > 0.0075 && ref_mm;
            if (scaled) {
                // a product scaled at inference time (iq2_kt, iq3_kt): ours must carry the same factor,
                // and both errors are measured against the scaled exact product
                const double our_scale = matmul_scale(mm.data(), dq->f32(), act->f32(), nrows, ncols, nact);
                EXPECT_NEAR(our_scale, ref_scale, 0.005) << tn << " " << f.summary_key << ": inference-time scale";
                ours = matmul_error_scaled(mm.data(), dq->f32(), act->f32(), nrows, ncols, nact, our_scale);
                ref = matmul_error_scaled(ref_mm->f32(), dq->f32(), act->f32(), nrows, ncols, nact, ref_scale);
            }
            std::printf("[ matmul   ] %-10s %-7s %-6s (x %s) ours %.3g ref %.3g ratio %.3f\n", tn.c_str(), f.summary_key,
                        ggml_cpu_isa_name((ggml_cpu_isa) isa), ggml_type_name(vdt), ours, ref, ours / ref);
            // The reference feeds the trellis types per-32 activation blocks (q8_2); ours are q8_K
            // (per 256), a little coarser: allow that margin there.
            const double margin = scaled ? 1.2 : 1.1;
            EXPECT_LE(ours, margin * ref + 1e-6) << tn << " " << f.summary_key << " on " << ggml_cpu_isa_name((ggml_cpu_isa) isa);
            ++ran;
        }
    }
    EXPECT_GT(ran, 0) << tn << ": no gemm registered for any ISA: not implemented";
}

// Block-scaled activations (q8_0, q8_1: fp16 scales; q8_K: f32) must not lose precision when the
// activations are small: real models have layers whose inputs are ~1e-3 and below, where an fp16
// scale has few significant bits left. The product's relative error against the exact product of
// the decoded weights may grow by the rounding of the stored scale only (a fraction of a percent
// at 3e-4), not by a bias that every quant of a block shares.
void expect_error_independent_of_activation_scale(const golden_data & g, const std::string & tn, ggml_type vdt) {
    const ggml_type t = type_of(tn);
    const golden_tensor * act = g.find("act");
    const golden_tensor * q = g.find("q." + tn);
    if (!q) q = g.find("qw." + tn);
    ASSERT_TRUE(q) << tn;
    const int64_t ncols = act->ne[0], nact = act->ne[1], nrows = q->ne[1];
    std::vector<float> dq;
    ASSERT_TRUE(decode_rows(t, q->data.data(), nrows, ncols, dq));
    float amax = 0;
    for (int64_t i = 0; i < ncols * nact; ++i) amax = std::max(amax, std::fabs(act->f32()[i]));
    ASSERT_GT(amax, 0.0f);
    int ran = 0;
    for (int isa = 0; isa < GGML_CPU_ISA_COUNT; ++isa) {
        const ggml_gemm_t gemm = ggml_cpu_gemm_at(t, (ggml_cpu_isa) isa);
        if (!gemm || !ggml_cpu_isa_runs_here((ggml_cpu_isa) isa)) continue;
        ggml_from_float_t enc = ggml_cpu_from_float_at(vdt, (ggml_cpu_isa) isa);
        if (!enc) enc = ggml_get_type_traits(vdt)->from_float_ref;
        double err[2];
        const float scales[2] = { 1.0f, 3e-4f / amax };
        for (int k = 0; k < 2; ++k) {
            std::vector<float> x(act->f32(), act->f32() + ncols * nact);
            for (float & v : x) v *= scales[k];
            const size_t act_row = ggml_row_size(vdt, ncols);
            std::vector<uint8_t> xq(nact * act_row);
            for (int64_t c = 0; c < nact; ++c) enc(x.data() + c * ncols, xq.data() + c * act_row, ncols);
            std::vector<float> mm(nact * nrows, NAN);
            gemm(ncols, q->data.data(), ggml_row_size(t, ncols), xq.data(), act_row, mm.data(), nrows, (int) nrows, (int) nact);
            err[k] = matmul_error(mm.data(), dq.data(), x.data(), nrows, ncols, nact);
        }
        std::printf("[ act scale] %-10s %-6s (x %s) rel err %.4g, with max|x| = 3e-4: %.4g (ratio %.3f)\n", tn.c_str(),
                    ggml_cpu_isa_name((ggml_cpu_isa) isa), ggml_type_name(vdt), err[0], err[1], err[1] / err[0]);
        EXPECT_LE(err[1], 1.1 * err[0] + 1e-6) << tn << " on " << ggml_cpu_isa_name((ggml_cpu_isa) isa);
        ++ran;
    }
    EXPECT_GT(ran, 0) << tn << ": no gemm registered for any ISA: not implemented";
}

TEST(QuantGoldenFile, MatmulErrorIndependentOfActivationScale) {
    const golden_data & g = golden();
    ASSERT_TRUE(g.error.empty()) << g.error;
    int checked = 0;
    for (const std::string & tn : g.type_names) {
        const ggml_type vdt = ggml_cpu_get_type_traits(type_of(tn))->vec_dot_type;
        if (vdt != GGML_TYPE_Q8_0 && vdt != GGML_TYPE_Q8_1 && vdt != GGML_TYPE_Q8_K) continue;   // float activations
        expect_error_independent_of_activation_scale(g, tn, vdt);
        ++checked;
    }
    EXPECT_GE(checked, 40);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantGolden, ::testing::ValuesIn(golden_type_names()),
                         [](const ::testing::TestParamInfo<std::string> & info) { return info.param; });

} // namespace
