// llama-quantize's recipe and writer: the type chosen for every tensor of the synth models
// equals the reference's (golden/quantize/*.types.json), quantized models run with a KL-divergence
// against the f16 base no worse than the reference's quantized files (2% with exact products on
// both, 5% slack on the kernels' noisy figure against the reference's printed one) and every tensor
// (every expert of the 3-D ones) no further from the f16 source than in the reference's file
// (2% slack), dry-run sizes
// equal the written file's, and bad recipes fail with messages naming the cause.
#include "ggml-cpu.h"
#include "kld-file.h"
#include "llama-quantize.h"
#include "llama.h"
#include "testing.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

namespace {

using split_ptr = std::unique_ptr<gguf_split, void (*)(gguf_split *)>;

split_ptr open_model(const std::string & path) { return split_ptr(gguf_split_open(path.c_str()), gguf_split_free); }

std::string model_path(const std::string & name) { return kiln_test::shared_path("models/" + name); }

std::string tmp_path(const std::string & name) { return kiln_test::binary_dir() + "/test-quantize-" + name; }

class RecipeGolden : public ::testing::TestWithParam<const char *> {};

TEST_P(RecipeGolden, EveryTensorGetsTheReferenceType) {
    const std::string model = GetParam();
    const std::string golden = kiln_test::shared_path("golden/quantize/" + model + ".types.json");
    std::ifstream f(golden);
    ASSERT_TRUE(f.good()) << golden;
    const nlohmann::json j = nlohmann::json::parse(f);
    split_ptr m = open_model(model_path(model + "-f16.gguf"));
    ASSERT_TRUE(m) << gguf_last_error();

    int n_checked = 0;
    std::string not_writable;
    for (const auto & [ftname, types] : j.items()) {
        const llama_ftype_info * ft = llama_quant_ftype_find(ftname);
        ASSERT_NE(ft, nullptr) << "file type " << ftname << " unknown to Kiln";
        llama_quant_params p;
        p.ftype = ft->id;
        p.ignore_imatrix_rules = true;
        const llama_quant_plan_result plan = llama_quant_plan(m.get(), p);
        ASSERT_EQ(plan.tensors.size(), types.size()) << ftname;
        bool writable = true;
        for (const auto & t : plan.tensors) {
            ASSERT_TRUE(types.contains(t.name)) << ftname << ": " << t.name;
            const int want = types[t.name].get<int>();
            EXPECT_EQ((int) t.new_type, want) << model << " " << ftname << " " << t.name << ": Kiln chose "
                                              << ggml_type_name(t.new_type) << ", the reference "
                                              << ggml_type_name((ggml_type) want);
            if (t.quantize && !llama_quant_type_writable(t.new_type)) writable = false;
        }
        if (!writable) not_writable += " " + ftname;
        ++n_checked;
    }
    EXPECT_GE(n_checked, model == "synth-qwen35" ? 1 : 30);   // the reference quantized synth-qwen35 to Q4_K_M only
    // every file type the reference made of this model, Kiln can write too
    EXPECT_TRUE(not_writable.empty()) << model << ": file types Kiln cannot write:" << not_writable;
}

INSTANTIATE_TEST_SUITE_P(Synth, RecipeGolden, ::testing::Values("synth-qwen3", "synth-qwen3moe", "synth-deepseek2", "synth-qwen35"));

// llama-quantize lists no file type it would then refuse to write.
TEST(Recipe, EveryListedFileTypeIsWritable) {
    for (const auto & f : llama_quant_ftypes()) {
        EXPECT_TRUE(llama_quant_type_writable(f.default_type)) << f.name << " (" << ggml_type_name(f.default_type) << ")";
    }
}

// llama-quantize writes every file type it lists: for each one, on models of every shape class
// (dense, MoE experts, MLA, rows of 64 and 172 values that fall back), every type the recipe
// plans can be written and read, and a slice of each planned (type, row length) quantizes to
// its full size and decodes nearer to the source than zero. The golden test above holds only
// the 35 file types the reference made of these models; this one covers all listed, quickly
// (two row groups per tensor shape, not the models).
TEST(Recipe, EveryListedFileTypeWritesWhatItPlans) {
    int n_quantized = 0, n_plans = 0;
    double worst = 0;
    std::string worst_what;
    for (const char * model : { "synth-qwen3-f16.gguf", "synth-qwen3moe-f16.gguf", "synth-deepseek2-f16.gguf", "stories260K.gguf" }) {
        split_ptr m = open_model(model_path(model));
        ASSERT_TRUE(m) << gguf_last_error();
        std::set<std::pair<int, int64_t>> done;   // (type, row length) already quantized
        for (const auto & f : llama_quant_ftypes()) {
            llama_quant_params p;
            p.ftype = f.id;
            p.ignore_imatrix_rules = true;
            llama_quant_plan_result plan;
            try {
                plan = llama_quant_plan(m.get(), p);
            } catch (const std::exception & e) {
                ADD_FAILURE() << model << " " << f.name << ": " << e.what();
                continue;
            }
            for (const auto & t : plan.tensors) {
                if (!t.quantize) continue;
                ASSERT_TRUE(llama_quant_type_writable(t.new_type)) << model << " " << f.name << " " << t.name << ": " << ggml_type_name(t.new_type);
                ASSERT_TRUE(llama_quant_type_readable(t.new_type)) << model << " " << f.name << " " << t.name << ": " << ggml_type_name(t.new_type);
                if (!done.insert({ (int) t.new_type, t.ne[0] }).second) continue;
                const int group = std::max(1, ggml_get_type_traits(t.new_type)->nrows_interleaved);
                ASSERT_EQ(t.ne[1] % group, 0) << f.name << " " << t.name << ": " << t.ne[1] << " rows, groups of " << group;
                const int64_t nr = std::min<int64_t>(2 * group, t.ne[1]), ne0 = t.ne[0];
                const std::vector<float> src = kiln_test::random_floats(nr * ne0, 17 + (uint32_t) t.new_type);
                const std::vector<float> ones(ne0, 1.0f);   // the very-low-bit types need importances
                std::vector<uint8_t> q(ggml_row_size(t.new_type, ne0) * nr + 64, 0xA5);
                const size_t n = ggml_quantize_chunk(t.new_type, src.data(), q.data(), 0, nr, ne0, ones.data());
                ASSERT_EQ(n, ggml_row_size(t.new_type, ne0) * nr) << f.name << " " << t.name << " " << ggml_type_name(t.new_type);
                std::vector<float> back(nr * ne0, NAN);
                if (t.new_type == GGML_TYPE_F16) ggml_fp16_to_fp32_row((const ggml_fp16_t *) q.data(), back.data(), nr * ne0);
                else if (t.new_type == GGML_TYPE_BF16) ggml_bf16_to_fp32_row((const ggml_bf16_t *) q.data(), back.data(), nr * ne0);
                else {   // a group of rows at a time: per-row scales, interleaved groups
                    const size_t row = ggml_row_size(t.new_type, ne0);
                    for (int64_t r = 0; r < nr; r += group) ggml_get_type_traits(t.new_type)->to_float(q.data() + r * row, back.data() + r * ne0, group * ne0);
                }
                double e2 = 0, s2 = 0;
                for (int64_t i = 0; i < nr * ne0; ++i) {
                    e2 += (back[i] - src[i]) * (double) (back[i] - src[i]);
                    s2 += src[i] * (double) src[i];
                }
                const double rel = std::sqrt(e2 / s2);
                EXPECT_LT(rel, 0.95) << model << " " << f.name << " " << t.name << " " << ggml_type_name(t.new_type);
                if (rel > worst) worst = rel, worst_what = std::string(model) + " " + f.name + " " + ggml_type_name(t.new_type);
                ++n_quantized;
            }
            ++n_plans;
        }
    }
    std::printf("%d plans (file type x model), %d (type, row length) slices quantized; largest error %.3f (%s)\n", n_plans,
                n_quantized, worst, worst_what.c_str());
    EXPECT_EQ(n_plans, 4 * (int) llama_quant_ftypes().size());
    EXPECT_GT(n_quantized, 60);
}

TEST(Recipe, FallbacksForRowLengths) {
    // 128 columns: super-block types cannot hold the row
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_Q4_K, 128), GGML_TYPE_Q5_0);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_Q5_K, 128), GGML_TYPE_Q6_0);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_Q6_K, 128), GGML_TYPE_Q8_0);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_Q2_K, 128), GGML_TYPE_IQ4_NL);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_IQ4_XS, 128), GGML_TYPE_IQ4_NL);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_Q4_K, 256), GGML_TYPE_Q4_K);
    // 172 columns (stories260K's n_ff): not even blocks of 32 fit
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_Q4_K, 172), GGML_TYPE_F16);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_Q4_0, 172), GGML_TYPE_F16);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_F16, 172), GGML_TYPE_F16);
}

TEST(Recipe, NamesInAnyCase) {
    EXPECT_EQ(llama_quant_type_find("q5_k"), GGML_TYPE_Q5_K);
    EXPECT_EQ(llama_quant_type_find("Q5_K"), GGML_TYPE_Q5_K);
    EXPECT_EQ(llama_quant_type_find("iq4_xs"), GGML_TYPE_IQ4_XS);
    EXPECT_EQ(llama_quant_type_find("8"), GGML_TYPE_Q8_0);
    EXPECT_EQ(llama_quant_type_find("q9_k"), GGML_TYPE_COUNT);
    ASSERT_NE(llama_quant_ftype_find("q4_k_m"), nullptr);
    EXPECT_EQ(llama_quant_ftype_find("q4_k_m")->id, LLAMA_FT_Q4_K_M);
    EXPECT_EQ(llama_quant_ftype_find("15")->id, LLAMA_FT_Q4_K_M);
    EXPECT_EQ(llama_quant_ftype_find("Q4_K_X"), nullptr);
}

TEST(Recipe, CustomRulesFirstMatchWins) {
    std::vector<llama_quant_rule> rules;
    llama_quant_parse_rules("attn_v=q8_0, ffn_down_exps=iq4_xs\n# a comment\nblk\\.1\\..*=Q6_K # trailing", rules);
    ASSERT_EQ(rules.size(), 3u);
    EXPECT_EQ(rules[1].type, GGML_TYPE_IQ4_XS);
    split_ptr m = open_model(model_path("synth-qwen3moe-f16.gguf"));
    ASSERT_TRUE(m);
    llama_quant_params p;
    p.ftype = LLAMA_FT_Q4_K_M;
    p.custom_rules = rules;
    const auto plan = llama_quant_plan(m.get(), p);
    for (const auto & t : plan.tensors) {
        if (t.name == "blk.1.attn_v.weight") { EXPECT_EQ(t.new_type, GGML_TYPE_Q8_0); }
        if (t.name == "blk.0.ffn_down_exps.weight") { EXPECT_EQ(t.new_type, GGML_TYPE_IQ4_XS); }
        if (t.name == "blk.1.ffn_down_exps.weight") { EXPECT_EQ(t.new_type, GGML_TYPE_IQ4_XS); }   // rule 2 before rule 3
        if (t.name == "blk.1.ffn_up_exps.weight") { EXPECT_EQ(t.new_type, GGML_TYPE_Q6_K); }
        if (t.name == "blk.0.ffn_up_exps.weight") { EXPECT_EQ(t.new_type, GGML_TYPE_Q4_K); }
        if (t.name == "blk.1.attn_norm.weight") { EXPECT_EQ(t.new_type, GGML_TYPE_F32); }   // never quantized
    }
}

TEST(Recipe, BadRulesNameTheCause) {
    std::vector<llama_quant_rule> rules;
    try {
        llama_quant_parse_rules("attn_v=q8_0,ffn_(down=q4_k", rules);
        FAIL() << "bad regex accepted";
    } catch (const std::runtime_error & e) {
        EXPECT_NE(std::string(e.what()).find("ffn_(down"), std::string::npos) << e.what();
    }
    try {
        llama_quant_parse_rules("attn_v=q9_k", rules);
        FAIL() << "unknown type accepted";
    } catch (const std::runtime_error & e) {
        EXPECT_NE(std::string(e.what()).find("q9_k"), std::string::npos) << e.what();
    }
    EXPECT_THROW(llama_quant_parse_rules("attn_v", rules), std::runtime_error);
    EXPECT_THROW(llama_quant_parse_kv_override("a.b=int:x"), std::runtime_error);
    EXPECT_EQ(llama_quant_parse_kv_override("a.b=int:42").i, 42);
}

TEST(Recipe, VeryLowBitNeedsImatrix) {
    split_ptr m = open_model(model_path("synth-qwen3-f16.gguf"));
    ASSERT_TRUE(m);
    llama_quant_params p;
    p.ftype = LLAMA_FT_IQ2_XXS;
    try {
        llama_quant_plan(m.get(), p);
        FAIL() << "IQ2_XXS without an imatrix accepted";
    } catch (const std::runtime_error & e) {
        EXPECT_NE(std::string(e.what()).find("blk.0."), std::string::npos) << e.what();
    }
    // an imatrix lacking one tensor names that tensor
    llama_imatrix_map im;
    for (int il = 0; il < 2; ++il) {
        for (const char * n : { "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up" }) {
            const int64_t ne0 = std::string(n) == "attn_output" ? 256 : 256;
            im["blk." + std::to_string(il) + "." + n + ".weight"] = std::vector<float>(ne0, 1.0f);
        }
    }
    p.imatrix = &im;
    try {
        llama_quant_plan(m.get(), p);
        FAIL() << "missing ffn_down accepted";
    } catch (const std::runtime_error & e) {
        EXPECT_NE(std::string(e.what()).find("ffn_down"), std::string::npos) << e.what();
    }
}

// ---- quantize, then run -------------------------------------------------------------------------

double run_kld(const std::string & path, const kiln_test::kld_base & base, double * same_top_out) {
    llama_model_params mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(path.c_str(), mp);
    if (!model) return NAN;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = base.n_ctx;
    cp.n_threads = cp.n_threads_batch = 2;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        llama_model_free(model);
        return NAN;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    llama_batch batch = llama_batch_init(base.n_ctx, 0, 1);
    double sum = 0;
    size_t n = 0, same = 0;
    std::vector<double> lp;
    for (int c = 0; c < base.n_chunk; ++c) {
        llama_memory_clear(ctx);
        batch.n_tokens = base.n_ctx;
        for (int i = 0; i < base.n_ctx; ++i) {
            batch.token[i] = base.tokens[(size_t) c * base.n_ctx + i];
            batch.pos[i] = i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = i >= base.n_ctx / 2;
        }
        if (llama_vocab_get_add_bos(vocab)) batch.token[0] = llama_vocab_bos(vocab);
        EXPECT_EQ(llama_decode(ctx, batch), 0);
        for (size_t k = 0; k < base.n_scored(); ++k) {
            base.log_probs(c, k, lp);
            bool top = false;
            sum += kiln_test::kld_against(lp, llama_get_logits_ith(ctx, base.n_ctx / 2 + (int) k), base.n_vocab, top);
            same += top;
            ++n;
        }
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    if (same_top_out) *same_top_out = (double) same / n;
    return sum / n;
}

// "Mean    KLD:   0.130336 ±   0.007594" from the reference's report
double golden_kld(const std::string & path) {
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
        const size_t p = line.find("Mean    KLD:");
        if (p != std::string::npos) return std::atof(line.c_str() + p + 12);
    }
    return NAN;
}

// One tensor of a GGUF file decoded to f32 (f16 or any quantized type; interleaved groups whole).
std::vector<float> read_f32(const std::string & path, const gguf_context * g, int64_t id) {
    const ggml_type t = gguf_get_tensor_type(g, id);
    const int64_t ne0 = gguf_get_tensor_ne(g, id, 0);
    std::vector<uint8_t> raw(gguf_get_tensor_size(g, id));
    std::ifstream f(path, std::ios::binary);
    f.seekg((std::streamoff) (gguf_get_data_offset(g) + gguf_get_tensor_offset(g, id)));
    f.read((char *) raw.data(), (std::streamsize) raw.size());
    const size_t row = ggml_row_size(t, ne0);
    const int64_t nrows = (int64_t) (raw.size() / row);
    const int group = std::max(1, ggml_get_type_traits(t)->nrows_interleaved);
    std::vector<float> out(nrows * ne0);
    for (int64_t r = 0; r < nrows; r += group) ggml_get_type_traits(t)->to_float(raw.data() + r * row, out.data() + r * ne0, group * ne0);
    return out;
}

// Every tensor the reference quantized, Kiln quantized to the same type with no more error
// against the f16 source than the reference's file has: per expert for the 3-D expert tensors
// (each expert slice is a separate quantization problem). Deterministic where the KLD is not:
// on these random models another rounding of equally good weights moves the KLD by a few percent.
void expect_tensors_no_worse_than_reference(const std::string & src, const std::string & ours, const std::string & ref) {
    split_ptr fs = open_model(src), fo = open_model(ours), fr = open_model(ref);
    ASSERT_TRUE(fs && fo && fr) << gguf_last_error();
    const gguf_context * gs = gguf_split_part(fs.get(), 0), * go = gguf_split_part(fo.get(), 0), * gr = gguf_split_part(fr.get(), 0);
    int compared = 0;
    double worst = 0;
    std::string worst_name;
    for (int64_t ir = 0; ir < gguf_get_n_tensors(gr); ++ir) {
        const char * name = gguf_get_tensor_name(gr, ir);
        const ggml_type t = gguf_get_tensor_type(gr, ir);
        if (t == GGML_TYPE_F32 || t == GGML_TYPE_F16) continue;
        const int64_t is = gguf_find_tensor(gs, name), io = gguf_find_tensor(go, name);
        ASSERT_TRUE(is >= 0 && io >= 0) << name;
        ASSERT_EQ(gguf_get_tensor_type(go, io), t) << name;
        const std::vector<float> x = read_f32(src, gs, is), yo = read_f32(ours, go, io), yr = read_f32(ref, gr, ir);
        ASSERT_TRUE(x.size() == yo.size() && x.size() == yr.size()) << name;
        const int64_t nslice = gguf_get_tensor_n_dims(gr, ir) > 2 ? gguf_get_tensor_ne(gr, ir, 2) : 1;
        const size_t per = x.size() / nslice;
        for (int64_t sl = 0; sl < nslice; ++sl) {
            double eo = 0, er = 0;
            for (size_t i = sl * per; i < (sl + 1) * per; ++i) {
                eo += (yo[i] - x[i]) * (double) (yo[i] - x[i]);
                er += (yr[i] - x[i]) * (double) (yr[i] - x[i]);
            }
            const double ratio = std::sqrt(eo / std::max(er, 1e-30));
            if (ratio > worst) {
                worst = ratio;
                worst_name = std::string(name) + (nslice > 1 ? " expert " + std::to_string(sl) : "");
            }
            EXPECT_LE(eo, 1.02 * 1.02 * er + 1e-12) << name << " (" << ggml_type_name(t) << ") slice " << sl << ": rmse "
                                                    << std::sqrt(eo / per) << ", the reference's " << std::sqrt(er / per);
        }
        ++compared;
    }
    std::printf("  %d tensors; largest error ratio to the reference's file %.4f (%s)\n", compared, worst, worst_name.c_str());
    EXPECT_GT(compared, 0);
}

struct quant_case {
    const char * model;
    const char * ftype;
};

class QuantizeRun : public ::testing::TestWithParam<quant_case> {};

TEST_P(QuantizeRun, KldNoWorseThanReference) {
    const quant_case qc = GetParam();
    const llama_ftype_info * ft = llama_quant_ftype_find(qc.ftype);
    ASSERT_NE(ft, nullptr);
    const std::string in = model_path(std::string(qc.model) + "-f16.gguf");
    const std::string out = tmp_path(std::string(qc.model) + "-" + qc.ftype + ".gguf");

    llama_quant_params p;
    p.ftype = ft->id;
    p.nthread = 2;
    llama_quant_plan_result plan;
    try {
        p.dry_run = true;
        llama_quant_plan_result dry;
        const llama_quant_stats ds = llama_quant_model(in, out, p, &dry);
        for (const auto & t : dry.tensors) {
            if (t.quantize && !llama_quant_type_writable(t.new_type)) {
                FAIL() << qc.ftype << ": Kiln cannot write " << ggml_type_name(t.new_type) << ": not implemented";
            }
        }
        p.dry_run = false;
        const llama_quant_stats ws = llama_quant_model(in, out, p, &plan);
        EXPECT_EQ(ds.size_new, ws.size_new);
    } catch (const std::exception & e) {
        FAIL() << e.what();
    }

    // the written file: the planned types and sizes, the quantization keys
    split_ptr q = open_model(out);
    ASSERT_TRUE(q) << gguf_last_error();
    const gguf_context * g = gguf_split_part(q.get(), 0);
    ASSERT_EQ(gguf_get_n_tensors(g), (int64_t) plan.tensors.size());
    size_t data = 0;
    for (const auto & t : plan.tensors) {
        const int64_t id = gguf_find_tensor(g, t.name.c_str());
        ASSERT_GE(id, 0) << t.name;
        EXPECT_EQ(gguf_get_tensor_type(g, id), t.new_type) << t.name;
        EXPECT_EQ(gguf_get_tensor_size(g, id), t.new_size) << t.name;
        data += (t.new_size + gguf_get_alignment(g) - 1) / gguf_get_alignment(g) * gguf_get_alignment(g);
    }
    EXPECT_EQ(gguf_get_file_size(g), gguf_get_data_offset(g) + data);
    const int64_t kft = gguf_find_key(g, "general.file_type");
    ASSERT_GE(kft, 0);
    EXPECT_EQ(gguf_get_val_u32(g, kft), (uint32_t) ft->id);
    const int64_t kqv = gguf_find_key(g, "general.quantization_version");
    ASSERT_GE(kqv, 0);
    EXPECT_EQ(gguf_get_val_u32(g, kqv), 2u);

    const std::string base_path = kiln_test::shared_path(std::string("golden/ppl/") + qc.model + "-f16.kld");
    kiln_test::kld_base base;
    std::string err;
    ASSERT_TRUE(base.load(base_path, err)) << err;
    double same_top = 0;
    const double kld = run_kld(out, base, &same_top);
    const std::string ref_file = model_path(std::string(qc.model) + "-" + qc.ftype + ".gguf");
    // The same comparison without product noise: both files run with exact products (ggml-cpu.h),
    // so the pair differs by its weights alone. The kernels' activation rounding moves a random
    // model's KLD by ~1% per product path (synth-deepseek2 Q4_K_M: ours 0.4479 against the
    // reference's printed 0.4311 with kernels, 1.039x; 0.4389 against 0.4340 exact, 1.011x):
    // the 1.02 bound holds here, the noisy figure below only within 1.05.
    double exact_ours = NAN, exact_ref = NAN;
    if (std::ifstream(ref_file).good()) {
        expect_tensors_no_worse_than_reference(in, out, ref_file);
        ggml_cpu_set_exact_products(true);
        exact_ours = run_kld(out, base, nullptr);
        exact_ref = run_kld(ref_file, base, nullptr);
        ggml_cpu_set_exact_products(false);
        std::printf("%s %s with exact products: KLD %.6f, the reference's file %.6f (%.4fx)\n", qc.model, qc.ftype, exact_ours,
                    exact_ref, exact_ours / exact_ref);
        EXPECT_LE(exact_ours, 1.02 * exact_ref) << qc.model << " " << qc.ftype << " with exact products";
    }
    std::remove(out.c_str());
    ASSERT_FALSE(std::isnan(kld)) << qc.model << " " << qc.ftype << " does not load in Kiln: " << llama_last_error();
    const std::string ref_txt = kiln_test::shared_path(std::string("golden/ppl/") + qc.model + "-" + qc.ftype + ".txt");
    const double ref = golden_kld(ref_txt);
    std::printf("%s %s: KLD %.6f (reference %.6f), same top %.2f%%\n", qc.model, qc.ftype, kld, ref, 100 * same_top);
    if (std::isnan(ref)) {
        // no reference file of this type: it must at least beat a coarser type's reference
        const double q4 = golden_kld(kiln_test::shared_path(std::string("golden/ppl/") + qc.model + "-Q4_K_M.txt"));
        ASSERT_FALSE(std::isnan(q4));
        EXPECT_LE(kld, q4 * 1.5);
    } else {
        EXPECT_LE(kld, ref * 1.05);
    }
}

INSTANTIATE_TEST_SUITE_P(Synth, QuantizeRun,
                         ::testing::Values(quant_case{ "synth-qwen3", "Q4_K_M" }, quant_case{ "synth-qwen3", "Q8_0" },
                                           quant_case{ "synth-qwen3", "IQ4_XS" }, quant_case{ "synth-qwen3moe", "Q4_K_M" },
                                           quant_case{ "synth-qwen3moe", "IQ4_XS" }, quant_case{ "synth-qwen3moe", "IQ4_KS" },
                                           quant_case{ "synth-deepseek2", "Q4_K_M" }),
                         [](const auto & info) {
                             std::string s = std::string(info.param.model) + "_" + info.param.ftype;
                             for (char & c : s) if (c == '-') c = '_';
                             return s;
                         });

// in quantized to out as file type ft on two threads, the plan kept; false (with the error
// reported) when the quantizer refuses
static bool quantize_as(const std::string & in, const std::string & out, const llama_ftype_info & ft,
                        llama_quant_plan_result & plan) {
    llama_quant_params p;
    p.ftype = ft.id;
    p.nthread = 2;
    try {
        llama_quant_model(in, out, p, &plan);
    } catch (const std::exception & e) {
        ADD_FAILURE() << ft.name << ": " << e.what();
        return false;
    }
    return true;
}

// llama.cpp's ternary file types: the layers' weights in TQ1_0 / TQ2_0, the embeddings in Q4_K and
// the output in Q6_K (as llama.cpp chooses), and the written model runs.
TEST(Quantize, TernaryFileTypes) {
    for (const char * ftname : { "TQ1_0", "TQ2_0" }) {
        const llama_ftype_info * ft = llama_quant_ftype_find(ftname);
        ASSERT_NE(ft, nullptr) << ftname;
        const ggml_type tq = ft->default_type;
        const std::string in = model_path("synth-qwen3moe-f16.gguf");
        const std::string out = tmp_path(std::string("qwen3moe-") + ftname + ".gguf");
        llama_quant_plan_result plan;
        ASSERT_TRUE(quantize_as(in, out, *ft, plan));
        int n_tq = 0;
        for (const auto & t : plan.tensors) {
            if (!t.quantize) continue;
            if (t.name == "output.weight") EXPECT_EQ(t.new_type, GGML_TYPE_Q6_K) << ftname;
            else if (t.name == "token_embd.weight") EXPECT_EQ(t.new_type, GGML_TYPE_Q4_K) << ftname;
            else if (t.name.find("attn_") != std::string::npos || t.name.find("ffn_") != std::string::npos) {
                EXPECT_TRUE(t.new_type == tq || t.new_type == GGML_TYPE_Q8_0) << ftname << " " << t.name << ": " << ggml_type_name(t.new_type);
                n_tq += t.new_type == tq;
            }
        }
        EXPECT_GE(n_tq, 8) << ftname;
        kiln_test::kld_base base;
        std::string err;
        ASSERT_TRUE(base.load(kiln_test::shared_path("golden/ppl/synth-qwen3moe-f16.kld"), err)) << err;
        const double kld = run_kld(out, base, nullptr);
        std::remove(out.c_str());
        std::printf("synth-qwen3moe %s: KLD %.4f\n", ftname, kld);
        EXPECT_TRUE(std::isfinite(kld) && kld > 0) << ftname << ": " << llama_last_error();
    }
    // rows the ternary blocks (256) cannot hold fall back to Q4_0, as in llama.cpp
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_TQ1_0, 288), GGML_TYPE_Q4_0);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_TQ2_0, 288), GGML_TYPE_Q4_0);
}

// ik_llama.cpp's BitNet file types (general.file_type 136 / 137 / 337): the layers' weights in
// IQ1_BN / IQ2_BN / IQ2_BN_R4, the token embeddings in IQ4_NL (the reference's choice), the output
// in Q6_K. The synth model is not ternary, so its KLD is large: the written model must load and give
// finite logits, and every BitNet tensor must decode to what the quantizer makes of the source.
TEST(Quantize, BitnetFileTypes) {
    for (const char * ftname : { "IQ1_BN", "IQ2_BN", "IQ2_BN_R4" }) {
        const llama_ftype_info * ft = llama_quant_ftype_find(ftname);
        ASSERT_NE(ft, nullptr) << ftname;
        const ggml_type bn = ft->default_type;
        const std::string in = model_path("synth-qwen3-f16.gguf");
        const std::string out = tmp_path(std::string("qwen3-") + ftname + ".gguf");
        llama_quant_plan_result plan;
        ASSERT_TRUE(quantize_as(in, out, *ft, plan));
        split_ptr fs = open_model(in), fo = open_model(out);
        ASSERT_TRUE(fs && fo) << gguf_last_error();
        const gguf_context * gs = gguf_split_part(fs.get(), 0), * go = gguf_split_part(fo.get(), 0);
        int n_bn = 0;
        bool has_output = false;
        for (const auto & t : plan.tensors) has_output |= t.name == "output.weight";
        for (const auto & t : plan.tensors) {
            if (!t.quantize) continue;
            if (t.name == "output.weight") {
                EXPECT_EQ(t.new_type, GGML_TYPE_Q6_K) << ftname;
            } else if (t.name == "token_embd.weight") {
                // (a tied embedding is the output head: Q6_K)
                EXPECT_EQ(t.new_type, has_output ? GGML_TYPE_IQ4_NL : GGML_TYPE_Q6_K) << ftname;
            }
            if (t.new_type != bn) continue;
            ++n_bn;
            const int64_t is = gguf_find_tensor(gs, t.name.c_str()), io = gguf_find_tensor(go, t.name.c_str());
            ASSERT_GE(is, 0);
            ASSERT_GE(io, 0);
            const int64_t ne0 = gguf_get_tensor_ne(gs, is, 0);
            const std::vector<float> src = read_f32(in, gs, is), got = read_f32(out, go, io);
            const int64_t nrows = (int64_t) src.size() / ne0;
            std::vector<uint8_t> q(nrows * ggml_row_size(bn, ne0));
            ASSERT_EQ(ggml_quantize_chunk(bn, src.data(), q.data(), 0, nrows, ne0, nullptr), q.size()) << t.name;
            std::vector<float> want(src.size());
            const int group = std::max(1, ggml_get_type_traits(bn)->nrows_interleaved);
            for (int64_t r = 0; r < nrows; r += group) {
                ggml_get_type_traits(bn)->to_float(q.data() + r * ggml_row_size(bn, ne0), want.data() + r * ne0, group * ne0);
            }
            ASSERT_EQ(got, want) << ftname << " " << t.name;
        }
        EXPECT_GE(n_bn, 8) << ftname;
        kiln_test::kld_base base;
        std::string err;
        ASSERT_TRUE(base.load(kiln_test::shared_path("golden/ppl/synth-qwen3-f16.kld"), err)) << err;
        const double kld = run_kld(out, base, nullptr);
        std::remove(out.c_str());
        std::printf("synth-qwen3 %s: KLD %.4f\n", ftname, kld);
        EXPECT_TRUE(std::isfinite(kld) && kld > 0) << ftname << ": " << llama_last_error();
    }
    // rows the 64-blocks cannot hold fall back to IQ4_NL
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_IQ1_BN, 96), GGML_TYPE_IQ4_NL);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_IQ2_BN_R4, 96), GGML_TYPE_IQ4_NL);
    EXPECT_EQ(llama_quant_fallback_type(GGML_TYPE_IQ2_BN, 128), GGML_TYPE_IQ2_BN);
}

// ik_llama.cpp's MXFP4_R8 file type (general.file_type 351): the tensors MXFP4 would write in
// MXFP4 come out as its 8-row weave, and since the weave only moves bits, the model gives MXFP4's
// logits up to float summation order.
TEST(Quantize, Mxfp4R8FileType) {
    const llama_ftype_info * ft = llama_quant_ftype_find("MXFP4_R8");
    ASSERT_NE(ft, nullptr);
    EXPECT_EQ(ft->id, 351);
    EXPECT_EQ(llama_quant_ftype_find("351"), ft);
    EXPECT_EQ(ft->default_type, GGML_TYPE_MXFP4_R8);
    const std::string in = model_path("synth-qwen3-f16.gguf");
    kiln_test::kld_base base;
    std::string err;
    ASSERT_TRUE(base.load(kiln_test::shared_path("golden/ppl/synth-qwen3-f16.kld"), err)) << err;
    double kld[2];
    std::vector<llama_quant_plan_result> plans(2);
    const char * names[2] = { "MXFP4", "MXFP4_R8" };
    for (int i = 0; i < 2; ++i) {
        const std::string out = tmp_path(std::string("qwen3-") + names[i] + ".gguf");
        llama_quant_params p;
        p.ftype = llama_quant_ftype_find(names[i])->id;
        p.nthread = 2;
        try {
            llama_quant_model(in, out, p, &plans[i]);
        } catch (const std::exception & e) {
            FAIL() << names[i] << ": " << e.what();
        }
        kld[i] = run_kld(out, base, nullptr);
        std::remove(out.c_str());
        std::printf("synth-qwen3 %s: KLD %.5f\n", names[i], kld[i]);
    }
    ASSERT_EQ(plans[0].tensors.size(), plans[1].tensors.size());
    int n_r8 = 0;
    for (size_t k = 0; k < plans[0].tensors.size(); ++k) {
        const auto & a = plans[0].tensors[k];
        const auto & b = plans[1].tensors[k];
        ASSERT_EQ(a.name, b.name);
        if (a.new_type == GGML_TYPE_MXFP4) {
            EXPECT_EQ(b.new_type, GGML_TYPE_MXFP4_R8) << b.name;
            n_r8 += b.new_type == GGML_TYPE_MXFP4_R8;
        } else {
            EXPECT_EQ(b.new_type, a.new_type) << b.name;
        }
    }
    EXPECT_GE(n_r8, 8);
    ASSERT_TRUE(std::isfinite(kld[0]) && kld[0] > 0) << llama_last_error();
    EXPECT_NEAR(kld[1], kld[0], 0.01 * kld[0]);
}

TEST(Quantize, InputAndOutputTheSameFileIsRefused) {
    const std::string in = model_path("synth-qwen3-f16.gguf");
    llama_quant_params p;
    p.ftype = LLAMA_FT_Q8_0;
    try {
        llama_quant_model(in, in, p);
        FAIL() << "accepted";
    } catch (const std::runtime_error & e) {
        EXPECT_NE(std::string(e.what()).find("same file"), std::string::npos) << e.what();
    }
}

TEST(Quantize, RowLengthFallbackOnStories) {
    // n_ff 172: ffn_down rows fit no quant block, they stay f16; the rest is Q4_0
    const std::string out = tmp_path("stories-q4_0.gguf");
    llama_quant_params p;
    p.ftype = LLAMA_FT_Q4_0;
    p.nthread = 2;
    llama_quant_plan_result plan;
    ASSERT_NO_THROW(llama_quant_model(model_path("stories260K.gguf"), out, p, &plan));
    int n_fallback = 0;
    for (const auto & t : plan.tensors) {
        if (t.name.find("ffn_down") != std::string::npos) {
            EXPECT_EQ(t.new_type, GGML_TYPE_F16) << t.name;
            ++n_fallback;
        }
    }
    EXPECT_EQ(n_fallback, 5);
    llama_model * m = llama_model_load_from_file(out.c_str(), llama_model_default_params());
    EXPECT_NE(m, nullptr) << llama_last_error();
    if (m) llama_model_free(m);
    std::remove(out.c_str());
}

} // namespace

namespace {

// Write the model as two split parts (metadata in both, tensors halved) for --keep-split.
bool write_split(const std::string & src, const std::string & prefix) {
    ggml_context * ctx = nullptr;
    gguf_context * g = gguf_init_from_file(src.c_str(), { false, &ctx });
    if (!g) return false;
    const int64_t n = gguf_get_n_tensors(g);
    bool ok = true;
    for (int part = 0; part < 2 && ok; ++part) {
        gguf_context * o = gguf_init_empty();
        gguf_set_kv(o, g);
        gguf_set_val_u16(o, GGUF_KEY_SPLIT_NO, (uint16_t) part);
        gguf_set_val_u16(o, GGUF_KEY_SPLIT_COUNT, 2);
        gguf_set_val_i32(o, GGUF_KEY_SPLIT_TENSORS_COUNT, (int32_t) n);
        for (int64_t i = part == 0 ? 0 : n / 2; i < (part == 0 ? n / 2 : n); ++i) {
            gguf_add_tensor(o, ggml_get_tensor(ctx, gguf_get_tensor_name(g, i)));
        }
        char path[4096];
        gguf_split_path(path, sizeof(path), prefix.c_str(), part, 2);
        ok = gguf_write_to_file(o, path, false);
        gguf_free(o);
    }
    gguf_free(g);
    ggml_free(ctx);
    return ok;
}

TEST(Quantize, KeepSplitWritesOnePartPerInputPart) {
    const std::string in_prefix = tmp_path("split-in");
    ASSERT_TRUE(write_split(model_path("synth-qwen3-f16.gguf"), in_prefix)) << gguf_last_error();
    char first[4096];
    gguf_split_path(first, sizeof(first), in_prefix.c_str(), 0, 2);
    llama_quant_params p;
    p.ftype = LLAMA_FT_Q8_0;
    p.nthread = 2;
    // merged into one file
    const std::string one = tmp_path("split-merged.gguf");
    ASSERT_NO_THROW(llama_quant_model(first, one, p));
    split_ptr m1 = open_model(one);
    ASSERT_TRUE(m1) << gguf_last_error();
    EXPECT_EQ(gguf_split_n_parts(m1.get()), 1);
    EXPECT_LT(gguf_find_key(gguf_split_part(m1.get(), 0), GGUF_KEY_SPLIT_COUNT), 0);
    llama_model * lm = llama_model_load_from_file(one.c_str(), llama_model_default_params());
    EXPECT_NE(lm, nullptr) << llama_last_error();
    if (lm) llama_model_free(lm);
    // one part per input part
    p.keep_split = true;
    const std::string out_prefix = tmp_path("split-out");
    ASSERT_NO_THROW(llama_quant_model(first, out_prefix + ".gguf", p));
    char out_first[4096], out_second[4096];
    gguf_split_path(out_first, sizeof(out_first), out_prefix.c_str(), 0, 2);
    gguf_split_path(out_second, sizeof(out_second), out_prefix.c_str(), 1, 2);
    split_ptr m2 = open_model(out_first);
    ASSERT_TRUE(m2) << gguf_last_error();
    EXPECT_EQ(gguf_split_n_parts(m2.get()), 2);
    EXPECT_EQ(gguf_split_n_tensors(m2.get()), gguf_get_n_tensors(gguf_split_part(m1.get(), 0)));
    int part = -1;
    EXPECT_GE(gguf_split_find_tensor(m2.get(), "blk.1.ffn_down.weight", &part), 0);
    EXPECT_EQ(part, 1);
    for (const char * f : { (const char *) first, one.c_str(), (const char *) out_first, (const char *) out_second }) std::remove(f);
    char second[4096];
    gguf_split_path(second, sizeof(second), in_prefix.c_str(), 1, 2);
    std::remove(second);
}

} // namespace
