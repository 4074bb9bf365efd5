// Importance matrices: what the graph callback collects equals a float64 recomputation of the
// first layer's matmul input, expert counts add up to tokens x experts used, both file formats
// round-trip, merging equals collecting over the union, and an imatrix made on the wikitext
// excerpt lowers the importance-weighted quantization error of IQ4_XS and Q4_K. An expert's means
// are drawn towards the pooled mean of all experts by its row count (rare experts mostly pooled).
#include "llama-imatrix.h"
#include "llama.h"
#include "testing.h"

#include "gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace {

std::string model_path(const std::string & n) { return kiln_test::shared_path("models/" + n); }

std::vector<llama_token> wiki_tokens(const llama_vocab * vocab, size_t max_bytes) {
    std::ifstream f(kiln_test::shared_path("text/wikitext-2-test-300k.txt"));
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str().substr(0, max_bytes);
    std::vector<llama_token> t(text.size() + 8);
    const int n = llama_tokenize(vocab, text.c_str(), (int) text.size(), t.data(), (int) t.size(), false, false);
    t.resize(std::max(0, n));
    return t;
}

// Collect over chunks [c0, c1) of n_ctx tokens.
bool collect(const std::string & model_file, int n_ctx, int c0, int c1, llama_imatrix_collector & col,
             std::vector<llama_token> * used = nullptr) {
    llama_model * model = llama_model_load_from_file(model_file.c_str(), llama_model_default_params());
    if (!model) return false;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = n_ctx;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.cb_eval = llama_imatrix_collector::callback;
    cp.cb_eval_user_data = &col;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        llama_model_free(model);
        return false;
    }
    const std::vector<llama_token> tok = wiki_tokens(llama_model_get_vocab(model), 20000);
    bool ok = (int) tok.size() >= c1 * n_ctx;
    for (int c = c0; ok && c < c1; ++c) {
        llama_memory_clear(ctx);
        std::vector<llama_token> chunk(tok.begin() + (size_t) c * n_ctx, tok.begin() + (size_t) (c + 1) * n_ctx);
        if (used) used->insert(used->end(), chunk.begin(), chunk.end());
        ok = llama_decode(ctx, llama_batch_get_one(chunk.data(), n_ctx)) == 0 && col.error.empty();
        col.data.chunk_count++;
    }
    col.data.chunk_size = n_ctx;
    llama_free(ctx);
    llama_model_free(model);
    return ok;
}

// f32 values of a tensor of a GGUF file (f32 or f16)
std::vector<float> read_tensor(const std::string & file, const char * name, int64_t * ne0 = nullptr) {
    ggml_context * ctx = nullptr;
    gguf_context * g = gguf_init_from_file(file.c_str(), { false, &ctx });
    std::vector<float> out;
    if (!g) return out;
    const ggml_tensor * t = ggml_get_tensor(ctx, name);
    if (t) {
        out.resize(ggml_nelements(t));
        if (t->type == GGML_TYPE_F32) std::memcpy(out.data(), t->data, out.size() * 4);
        else if (t->type == GGML_TYPE_F16) ggml_fp16_to_fp32_row((const ggml_fp16_t *) t->data, out.data(), out.size());
        else out.clear();
        if (ne0) *ne0 = t->ne[0];
    }
    gguf_free(g);
    ggml_free(ctx);
    return out;
}

TEST(Imatrix, FirstLayerInputMatchesFloat64) {
    const std::string mf = model_path("synth-qwen3-f16.gguf");
    llama_imatrix_collector col;
    std::vector<llama_token> used;
    ASSERT_TRUE(collect(mf, 64, 0, 2, col, &used)) << col.error;
    // attention input of layer 0: rms_norm(token embedding) * attn_norm
    int64_t n_embd = 0;
    const std::vector<float> emb = read_tensor(mf, "token_embd.weight", &n_embd);
    const std::vector<float> norm = read_tensor(mf, "blk.0.attn_norm.weight");
    ASSERT_FALSE(emb.empty());
    ASSERT_EQ((int64_t) norm.size(), n_embd);
    std::vector<double> ref(n_embd, 0.0);
    for (llama_token t : used) {
        const float * x = emb.data() + (size_t) t * n_embd;
        double ss = 0;
        for (int64_t j = 0; j < n_embd; ++j) ss += (double) x[j] * x[j];
        const double s = 1.0 / std::sqrt(ss / n_embd + 1e-6);
        for (int64_t j = 0; j < n_embd; ++j) {
            const double v = x[j] * s * norm[j];
            ref[j] += v * v;
        }
    }
    for (const char * name : { "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight" }) {
        ASSERT_TRUE(col.data.entries.count(name)) << name;
        const llama_imatrix_entry & e = col.data.entries.at(name);
        ASSERT_EQ(e.counts.size(), 1u);
        EXPECT_EQ(e.counts[0], (int64_t) used.size());
        ASSERT_EQ((int64_t) e.sums.size(), n_embd);
        double worst = 0;
        for (int64_t j = 0; j < n_embd; ++j) worst = std::max(worst, std::fabs(e.sums[j] - ref[j]) / std::max(ref[j], 1e-3));
        EXPECT_LT(worst, 2e-3) << name;
    }
    // every weight matmul of both layers was seen
    EXPECT_EQ(col.data.entries.size(), 14u);
}

TEST(Imatrix, ExpertCountsAddUp) {
    llama_imatrix_collector col;
    const int n_ctx = 64;
    ASSERT_TRUE(collect(model_path("synth-qwen3moe-f16.gguf"), n_ctx, 0, 1, col)) << "qwen3moe does not load: " << llama_last_error();
    for (const char * n : { "blk.0.ffn_up_exps.weight", "blk.0.ffn_gate_exps.weight", "blk.1.ffn_down_exps.weight" }) {
        ASSERT_TRUE(col.data.entries.count(n)) << n;
        const auto & e = col.data.entries.at(n);
        ASSERT_EQ(e.counts.size(), 16u) << n;
        int64_t total = 0;
        for (int64_t c : e.counts) total += c;
        EXPECT_EQ(total, 4 * n_ctx) << n;   // 4 experts used per token
        EXPECT_EQ(e.sums.size(), 16u * 256u) << n;
    }
    ASSERT_TRUE(col.data.entries.count("blk.0.ffn_gate_inp.weight"));
    EXPECT_EQ(col.data.entries.at("blk.0.ffn_gate_inp.weight").counts[0], n_ctx);
}

void expect_same_means(const llama_imatrix & a, const llama_imatrix & b, double tol) {
    const auto ma = a.means(), mb = b.means();
    ASSERT_EQ(ma.size(), mb.size());
    for (const auto & [name, va] : ma) {
        ASSERT_TRUE(mb.count(name)) << name;
        const auto & vb = mb.at(name);
        ASSERT_EQ(va.size(), vb.size()) << name;
        for (size_t i = 0; i < va.size(); ++i) {
            ASSERT_NEAR(va[i], vb[i], tol * std::max(1e-6f, std::fabs(va[i]))) << name << "[" << i << "]";
        }
    }
}

TEST(Imatrix, FormatsRoundTripAndMergeWeightsByCounts) {
    const std::string mf = model_path("synth-qwen3moe-f16.gguf");
    llama_imatrix_collector all, first, second;
    ASSERT_TRUE(collect(mf, 64, 0, 3, all)) << "qwen3moe does not load: " << llama_last_error();
    ASSERT_TRUE(collect(mf, 64, 0, 1, first));
    ASSERT_TRUE(collect(mf, 64, 1, 3, second));
    const std::string g = kiln_test::binary_dir() + "/test-imatrix.gguf", d = kiln_test::binary_dir() + "/test-imatrix.dat";
    std::string err;
    all.data.datasets = { "wiki" };
    ASSERT_TRUE(llama_imatrix_save_gguf(g, all.data, err)) << err;
    ASSERT_TRUE(llama_imatrix_save_dat(d, all.data, err)) << err;
    llama_imatrix rg, rd;
    ASSERT_TRUE(llama_imatrix_load(g, rg, err)) << err;
    ASSERT_TRUE(llama_imatrix_load(d, rd, err, 64)) << err;
    EXPECT_EQ(rg.chunk_count, 3);
    EXPECT_EQ(rd.chunk_count, 3);
    ASSERT_EQ(rg.datasets.size(), 1u);
    EXPECT_EQ(rd.datasets.at(0), "wiki");
    for (const auto & [name, e] : all.data.entries) EXPECT_EQ(rg.entries.at(name).counts, e.counts) << name;
    expect_same_means(all.data, rg, 1e-6);
    // the legacy format keeps one call count per tensor: dense tensors round-trip exactly, expert
    // tensors as the means the quantizers use (each expert's drawn towards the pooled one)
    int n_experts = 0;
    for (const auto & [name, e] : all.data.entries) {
        n_experts += e.counts.size() > 1;
        const auto a = all.data.means().at(name), b = rd.means().at(name);
        for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * std::fabs(a[i])) << name;
    }
    EXPECT_GT(n_experts, 0) << "no expert tensor collected from qwen3moe";
    llama_imatrix merged = first.data;
    ASSERT_TRUE(merged.merge(second.data, err)) << err;
    EXPECT_EQ(merged.chunk_count, 3);
    expect_same_means(all.data, merged, 1e-5);
    // a malformed file names itself
    { std::ofstream bad(d, std::ios::binary); bad << "xyz"; }
    llama_imatrix rb;
    EXPECT_FALSE(llama_imatrix_load(d, rb, err));
    EXPECT_NE(err.find(d), std::string::npos) << err;
    std::remove(g.c_str());
    std::remove(d.c_str());
}

// importance-weighted squared error of quantizing rows with and without the importance
double weighted_err(ggml_type type, const std::vector<float> & w, int64_t ne0, const std::vector<float> & imp, bool use) {
    const int64_t nrows = (int64_t) w.size() / ne0;
    std::vector<uint8_t> q(ggml_row_size(type, ne0) * nrows);
    std::vector<float> dq(w.size());
    const size_t n = ggml_quantize_chunk(type, w.data(), q.data(), 0, nrows, ne0, use ? imp.data() : nullptr);
    EXPECT_EQ(n, q.size());
    const size_t rs = ggml_row_size(type, ne0);
    for (int64_t r = 0; r < nrows; ++r) ggml_get_type_traits(type)->to_float(q.data() + r * rs, dq.data() + r * ne0, ne0);
    double e = 0;
    for (size_t i = 0; i < w.size(); ++i) e += imp[i % ne0] * (double) (w[i] - dq[i]) * (w[i] - dq[i]);
    return e;
}

TEST(Imatrix, LowersWeightedQuantizationError) {
    const std::string mf = model_path("synth-qwen3-f16.gguf");
    llama_imatrix_collector col;
    ASSERT_TRUE(collect(mf, 128, 0, 4, col));
    const auto means = col.data.means();
    for (ggml_type type : { GGML_TYPE_IQ4_XS, GGML_TYPE_Q4_K }) {
        double with = 0, without = 0;
        int n_better = 0, n = 0;
        for (const char * name : { "blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.1.attn_output.weight", "blk.1.ffn_gate.weight" }) {
            int64_t ne0 = 0;
            const std::vector<float> w = read_tensor(mf, name, &ne0);
            ASSERT_FALSE(w.empty()) << name;
            const std::vector<float> & imp = means.at(name);
            ASSERT_EQ((int64_t) imp.size(), ne0);
            const double a = weighted_err(type, w, ne0, imp, true), b = weighted_err(type, w, ne0, imp, false);
            with += a;
            without += b;
            n_better += a < b;
            ++n;
        }
        std::printf("%s: weighted error with imatrix %.6g, without %.6g (%d of %d tensors better)\n", ggml_type_name(type),
                    with, without, n_better, n);
        // a margin, not only "lower": the imatrix must buy a clear gain. 1%, because the quantizers'
        // own search (scale refinement) already removes much of the error without one; how good
        // the imatrix result is in absolute terms is checked against the reference's errors in
        // test-quants-golden
        EXPECT_LT(with, without * 0.99) << ggml_type_name(type);
        EXPECT_GE(n_better, n - 1) << ggml_type_name(type);
    }
}

// Per-expert means: each expert's mean is (sums + prior * pooled) / (count + prior), with the
// pooled mean over all experts (sum of sums / sum of counts); an expert without rows gets the
// pooled mean; prior 0 gives the raw means; a tensor with one matrix keeps its raw means.
TEST(Imatrix, ExpertMeansDrawnTowardsPooledByCount) {
    llama_imatrix m;
    llama_imatrix_entry & ex = m.entries["blk.0.ffn_up_exps.weight"];
    const int K = 4;
    const double a[K] = { 1, 2, 3, 4 }, b[K] = { 10, 10, 10, 10 };
    ex.counts = { 1000, 0, 2 };
    ex.sums.assign(3 * K, 0.0);
    for (int j = 0; j < K; ++j) {
        ex.sums[0 * K + j] = 1000 * a[j];
        ex.sums[2 * K + j] = 2 * b[j];
    }
    llama_imatrix_entry & dense = m.entries["blk.0.ffn_up.weight"];
    dense.counts = { 5 };
    dense.sums = { 5, 10, 15, 20 };

    const double prior = llama_imatrix::k_expert_prior_rows;
    const auto shrunk = m.means(), raw = m.means(0);
    const std::vector<float> & s = shrunk.at("blk.0.ffn_up_exps.weight");
    const std::vector<float> & r = raw.at("blk.0.ffn_up_exps.weight");
    ASSERT_EQ(s.size(), (size_t) 3 * K);
    for (int j = 0; j < K; ++j) {
        const double pooled = (1000 * a[j] + 2 * b[j]) / 1002;
        EXPECT_NEAR(r[0 * K + j], a[j], 1e-6);
        EXPECT_NEAR(r[1 * K + j], pooled, 1e-5) << "an expert without rows gets the pooled mean";
        EXPECT_NEAR(r[2 * K + j], b[j], 1e-6);
        EXPECT_NEAR(s[0 * K + j], (1000 * a[j] + prior * pooled) / (1000 + prior), 1e-5);
        EXPECT_NEAR(s[1 * K + j], pooled, 1e-5);
        EXPECT_NEAR(s[2 * K + j], (2 * b[j] + prior * pooled) / (2 + prior), 1e-5);
        // a well-sampled expert keeps nearly its own mean, a rare one is mostly the pooled one
        EXPECT_LT(std::fabs(s[0 * K + j] - a[j]), 0.05 * std::fabs(pooled - a[j]) + 1e-6);
        EXPECT_LT(std::fabs(s[2 * K + j] - pooled), 0.1 * std::fabs(b[j] - pooled));
    }
    const std::vector<float> & d = shrunk.at("blk.0.ffn_up.weight");
    for (int j = 0; j < K; ++j) EXPECT_FLOAT_EQ(d[j], (float) (j + 1));
}

} // namespace
