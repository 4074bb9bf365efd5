// Row-interleaved repacking of whole models: -rtr (llama_model_params::repack_tensors) at load and
// llama-quantize --repack / --repack-pattern on files. Both must change every weight that has an
// interleaved twin (and only those), say so, and give the logits of the original model
// (mean KL-divergence <= 1e-4 over a decoded sequence).
#include "cpu-traits.h"
#include "ggml-cpu.h"
#include "gguf.h"
#include "llama-quantize.h"
#include "llama.h"
#include "model-handles.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

std::vector<llama_token> test_tokens(int n) {
    std::vector<llama_token> t(n);
    for (int i = 0; i < n; ++i) t[i] = (llama_token) ((i * 977 + 13) % 4000 + 1);
    return t;
}

// All logits of decoding the test tokens in one batch.
std::vector<float> run_logits(const std::string & path, bool repack, int & n_vocab) {
    llama_model_params mp = llama_model_default_params();
    mp.repack_tensors = repack;
    kiln_test::model_ptr m(llama_model_load_from_file(path.c_str(), mp));
    EXPECT_TRUE(m) << path << ": " << llama_last_error();
    if (!m) return {};
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = cp.n_ubatch = 64;
    kiln_test::context_ptr ctx(llama_init_from_model(m.get(), cp));
    EXPECT_TRUE(ctx) << llama_last_error();
    if (!ctx) return {};
    const std::vector<llama_token> toks = test_tokens(48);
    EXPECT_EQ(kiln_test::decode_tokens(ctx.get(), toks, 0, (int) toks.size(), 0), 0);
    n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
    const float * l = llama_get_logits(ctx.get());
    return std::vector<float>(l, l + toks.size() * n_vocab);
}

// Mean over positions of KL(p_ref || p) of the softmaxes.
double mean_kld(const std::vector<float> & ref, const std::vector<float> & got, int n_vocab) {
    const size_t n_pos = ref.size() / n_vocab;
    double total = 0;
    for (size_t p = 0; p < n_pos; ++p) {
        const float * a = ref.data() + p * n_vocab;
        const float * b = got.data() + p * n_vocab;
        double ma = a[0], mb = b[0];
        for (int i = 1; i < n_vocab; ++i) {
            ma = std::max(ma, (double) a[i]);
            mb = std::max(mb, (double) b[i]);
        }
        double za = 0, zb = 0;
        for (int i = 0; i < n_vocab; ++i) {
            za += std::exp(a[i] - ma);
            zb += std::exp(b[i] - mb);
        }
        double kl = 0;
        for (int i = 0; i < n_vocab; ++i) {
            const double la = a[i] - ma - std::log(za), lb = b[i] - mb - std::log(zb);
            kl += std::exp(la) * (la - lb);
        }
        total += kl;
    }
    return total / (double) n_pos;
}

std::map<std::string, ggml_type> tensor_types(const std::string & path) {
    gguf_init_params gp = { true, nullptr };
    gguf_context * g = gguf_init_from_file(path.c_str(), gp);
    EXPECT_NE(g, nullptr) << path << ": " << gguf_last_error();
    std::map<std::string, ggml_type> out;
    if (!g) return out;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) out[gguf_get_tensor_name(g, i)] = gguf_get_tensor_type(g, i);
    gguf_free(g);
    return out;
}

// Log lines of a load with -rtr, to find its announcement.
std::string g_log;
void capture_log(ggml_log_level, const char * text, void *) { g_log += text; }

struct rtr_case {
    const char * model;
    ggml_type    main_type;   // the type of most of its weights
};

class RunTimeRepack : public ::testing::TestWithParam<rtr_case> {};

// Dense (q4_K, q6_K; q8_0), MoE experts (3-d iq4_xs) and MLA (iq3_k with derived attention
// weights). -rtr repacks only the weights whose interleaved kernels pay on this CPU
// (ggml_cpu_repack_pays), says how many and which, and names the types it kept plain.
TEST_P(RunTimeRepack, GivesTheOriginalLogitsAndSaysSo) {
    const rtr_case c = GetParam();
    const std::string path = kiln_test::shared_path(std::string("models/") + c.model);
    int nv0 = 0, nv1 = 0;
    const std::vector<float> plain = run_logits(path, false, nv0);
    g_log.clear();
    llama_log_set(capture_log, nullptr);
    const std::vector<float> repacked = run_logits(path, true, nv1);
    llama_log_set(nullptr, nullptr);
    ASSERT_FALSE(plain.empty());
    ASSERT_EQ(plain.size(), repacked.size());
    const double kld = mean_kld(plain, repacked, nv0);
    EXPECT_LE(kld, 1e-4) << c.model;
    const size_t at = g_log.find("-rtr: ");
    ASSERT_NE(at, std::string::npos) << "no -rtr line in the load log";
    const ggml_type twin = ggml_interleaved_twin(c.main_type);
    const std::string to = std::string(" ") + ggml_type_name(c.main_type) + " tensors -> " + ggml_type_name(twin);
    const std::string kept = std::string(" ") + ggml_type_name(c.main_type) + " tensors kept plain: " + ggml_type_name(twin);
    if (ggml_cpu_repack_pays(twin)) {
        EXPECT_NE(g_log.compare(at, 8, "-rtr: 0 "), 0) << g_log.substr(at, 80);
        EXPECT_NE(g_log.find(to), std::string::npos) << g_log;
        EXPECT_EQ(g_log.find(kept), std::string::npos) << g_log;
    } else {
        EXPECT_EQ(g_log.find(to), std::string::npos) << g_log;
        EXPECT_NE(g_log.find(kept), std::string::npos) << g_log;
    }
    std::printf("%s at %s: -rtr mean KLD %.3g (%s)\n", c.model, ggml_cpu_isa_name(ggml_cpu_get_isa()), kld,
                g_log.substr(at, g_log.find('\n', at) - at).c_str());
}

// The policy itself: only layouts with kernels of their own at this level can pay.
TEST(RunTimeRepackPolicy, OnlyLayoutsWithKernelsOfTheirOwn) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (!ggml_type_is_valid(t) || ggml_get_type_traits((ggml_type) t)->nrows_interleaved <= 1) continue;
        if (!ggml_cpu_repack_pays((ggml_type) t)) continue;
        EXPECT_NE(ggml_cpu_get_isa(), GGML_CPU_ISA_SCALAR) << ggml_type_name((ggml_type) t) << ": scalar kernels never pay";
        EXPECT_NE(ggml_cpu_gemm_at((ggml_type) t, ggml_cpu_get_isa()), nullptr)
            << ggml_type_name((ggml_type) t) << " pays at " << ggml_cpu_isa_name(ggml_cpu_get_isa()) << " without a kernel there";
    }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, RunTimeRepack,
                         ::testing::Values(rtr_case{ "synth-qwen3-Q4_K_M.gguf", GGML_TYPE_Q4_K },
                                           rtr_case{ "synth-qwen3-Q8_0.gguf", GGML_TYPE_Q8_0 },
                                           rtr_case{ "synth-qwen3moe-IQ4_XS.gguf", GGML_TYPE_IQ4_XS },
                                           rtr_case{ "synth-deepseek2-IQ3_K.gguf", GGML_TYPE_IQ3_K }),
                         [](const ::testing::TestParamInfo<rtr_case> & info) {
                             std::string n = info.param.model;
                             n = n.substr(0, n.find('.'));
                             for (char & ch : n) if (!std::isalnum((unsigned char) ch)) ch = '_';
                             return n;
                         });

// --repack on the reference's quantized files: k-quants and q6_K/q8_0 of a MoE model, iq4_xs and
// iq4_ks experts, q8_0 everywhere, and MLA's iq3_k / iq4_k / iq4_nl mix, so that every twin these
// files hold goes through the file path too (not only -rtr's, which repacks only the layouts
// that pay on this CPU).
class QuantizeRepackFile : public ::testing::TestWithParam<const char *> {};

TEST_P(QuantizeRepackFile, RepacksEveryWeightWithATwinAndKeepsTheLogits) {
    const std::string in = kiln_test::shared_path(std::string("models/") + GetParam());
    const std::string out = ::testing::TempDir() + "kiln-test-repack-" + GetParam();
    llama_quant_params params;
    params.repack = true;
    llama_quant_model(in, out, params);
    const auto before = tensor_types(in), after = tensor_types(out);
    ASSERT_EQ(before.size(), after.size());
    int n_repacked = 0;
    for (const auto & [name, type] : before) {
        const ggml_type twin = ggml_interleaved_twin(type);
        const bool expect = name != "token_embd.weight" && ggml_is_quantized(type) && twin != type;
        EXPECT_EQ(after.at(name), expect ? twin : type) << name << " (" << ggml_type_name(type) << ")";
        n_repacked += after.at(name) != type;
    }
    EXPECT_GT(n_repacked, 10);
    int nv0 = 0, nv1 = 0;
    const std::vector<float> ref = run_logits(in, false, nv0);
    const std::vector<float> got = run_logits(out, false, nv1);
    ASSERT_EQ(ref.size(), got.size());
    const double kld = mean_kld(ref, got, nv0);
    EXPECT_LE(kld, 1e-4);
    std::map<std::string, int> twins;
    for (const auto & [name, type] : after) twins[ggml_type_name(type)] += type != before.at(name);
    std::string list;
    for (const auto & [name, count] : twins) if (count) list += " " + name + " x" + std::to_string(count);
    std::printf("%s: %d tensors repacked (%s), mean KLD %.3g\n", GetParam(), n_repacked, list.c_str(), kld);
    std::remove(out.c_str());
}

INSTANTIATE_TEST_SUITE_P(SharedModels, QuantizeRepackFile,
                         ::testing::Values("synth-qwen3moe-Q4_K_M.gguf", "synth-qwen3moe-IQ4_XS.gguf", "synth-qwen3moe-IQ4_KS.gguf",
                                           "synth-qwen3-Q8_0.gguf", "synth-deepseek2-IQ3_K.gguf"),
                         [](const ::testing::TestParamInfo<const char *> & info) {
                             std::string n = info.param;
                             n = n.substr(0, n.find('.'));
                             for (char & ch : n) if (!std::isalnum((unsigned char) ch)) ch = '_';
                             return n;
                         });

// MXFP4 (gpt-oss's experts) -> mxfp4_r8: quantized here first, then repacked; decoded by the
// scalar path of the woven layout (no SIMD kernel yet), the logits must not move.
TEST(QuantizeRepack, Mxfp4RepacksToMxfp4R8AndKeepsTheLogits) {
    const std::string src = kiln_test::shared_path("models/synth-gpt-oss-f16.gguf");
    const std::string q = ::testing::TempDir() + "kiln-test-repack-mxfp4.gguf";
    const std::string out = ::testing::TempDir() + "kiln-test-repack-mxfp4-r8.gguf";
    llama_quant_params qp;
    qp.ftype = LLAMA_FT_MXFP4;
    qp.pure = true;
    llama_quant_model(src, q, qp);
    llama_quant_params params;
    params.repack = true;
    llama_quant_model(q, out, params);
    const auto before = tensor_types(q), after = tensor_types(out);
    int n_r8 = 0;
    for (const auto & [name, type] : before) {
        if (type != GGML_TYPE_MXFP4) continue;
        if (after.at(name) == GGML_TYPE_MXFP4_R8) ++n_r8;
    }
    EXPECT_GT(n_r8, 4);
    int nv0 = 0, nv1 = 0;
    const std::vector<float> ref = run_logits(q, false, nv0);
    const std::vector<float> got = run_logits(out, false, nv1);
    ASSERT_EQ(ref.size(), got.size());
    EXPECT_LE(mean_kld(ref, got, nv0), 1e-4);
    std::remove(q.c_str());
    std::remove(out.c_str());
}

TEST(QuantizeRepack, PatternsSelectTheTensors) {
    const std::string in = kiln_test::shared_path("models/synth-qwen3-Q4_K_M.gguf");
    const std::string out = ::testing::TempDir() + "kiln-test-repack-pattern.gguf";
    llama_quant_params params;
    params.repack = true;
    params.repack_patterns.push_back({ "ffn_down", std::regex("ffn_down"), GGML_TYPE_COUNT });
    llama_quant_model(in, out, params);
    const auto before = tensor_types(in), after = tensor_types(out);
    int n_repacked = 0;
    for (const auto & [name, type] : before) {
        if (after.at(name) == type) continue;
        ++n_repacked;
        EXPECT_NE(name.find("ffn_down"), std::string::npos) << name << " repacked without matching the pattern";
    }
    EXPECT_GT(n_repacked, 0);
    int nv0 = 0, nv1 = 0;
    const std::vector<float> ref = run_logits(in, false, nv0);
    const std::vector<float> got = run_logits(out, false, nv1);
    ASSERT_EQ(ref.size(), got.size());
    EXPECT_LE(mean_kld(ref, got, nv0), 1e-4);
    std::remove(out.c_str());
}

} // namespace
