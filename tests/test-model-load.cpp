// Model loading keeps its promises: a tensor type without a CPU kernel is refused at load with the
// tensor's name and type (not an assert at warm-up); --check-tensors finds non-finite weights and
// bad quant scales; --mlock locks the weights in RAM; no_perf leaves the counters at zero.
#include "common.h"
#include "gguf.h"
#include "llama.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

std::string temp_path(const std::string & name) { return ::testing::TempDir() + "kiln-test-model-load-" + name; }

// A copy of a shared model in which tensor `name` gets `type` and the bytes edit() leaves in a
// buffer of the new size (which starts as the tensor re-encoded from f32 when both types can).
std::string craft(const char * model, const char * name, ggml_type type,
                  const std::function<void(std::vector<uint8_t> &, int64_t ne0)> & edit) {
    ggml_context * gctx = nullptr;
    gguf_init_params params = { false, &gctx };
    gguf_context * ctx = gguf_init_from_file(kiln_test::shared_path(std::string("models/") + model).c_str(), params);
    EXPECT_NE(ctx, nullptr) << gguf_last_error();
    if (!ctx) return "";
    ggml_tensor * t = ggml_get_tensor(gctx, name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<float> f32(ggml_nelements(t));
    if (t->type == GGML_TYPE_F32) std::memcpy(f32.data(), t->data, f32.size() * sizeof(float));
    else ggml_get_type_traits(t->type)->to_float(t->data, f32.data(), (int64_t) f32.size());
    std::vector<uint8_t> data(ggml_row_size(type, t->ne[0]) * ggml_nrows(t));
    const ggml_from_float_t enc = ggml_get_type_traits(type)->from_float_ref;
    if (type == GGML_TYPE_F32) std::memcpy(data.data(), f32.data(), data.size());
    else if (enc) enc(f32.data(), data.data(), (int64_t) f32.size());
    edit(data, t->ne[0]);
    gguf_set_tensor_type(ctx, name, type);
    gguf_set_tensor_data(ctx, name, data.data());
    const std::string out = temp_path(std::string(ggml_type_name(type)) + "-" + name + ".gguf");
    EXPECT_TRUE(gguf_write_to_file(ctx, out.c_str(), false)) << gguf_last_error();
    gguf_free(ctx);
    ggml_free(gctx);
    return out;
}

void no_edit(std::vector<uint8_t> &, int64_t) {}

// Loads path; returns the error message, or "" when it loaded.
std::string load_error(const std::string & path, bool check_tensors = false, bool mlock = false) {
    llama_model_params mp = llama_model_default_params();
    mp.check_tensors = check_tensors;
    mp.use_mlock = mlock;
    llama_model * m = llama_model_load_from_file(path.c_str(), mp);
    if (m) {
        llama_model_free(m);
        return "";
    }
    return llama_last_error();
}

long vm_locked_kib() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmLck:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
}

} // namespace

TEST(ModelLoad, ActivationTypesAsWeightsAreRefusedNamingTheTensor) {
    // q8_1 (32-value blocks) in the small model; q8_K (256-value blocks) in one with wide rows
    struct cse {
        const char * model, * tensor;
        ggml_type type;
    };
    for (const cse & c : { cse{ "stories260K.gguf", "blk.0.attn_q.weight", GGML_TYPE_Q8_1 },
                           cse{ "synth-qwen3-f16.gguf", "blk.1.ffn_down.weight", GGML_TYPE_Q8_K } }) {
        const std::string path = craft(c.model, c.tensor, c.type, no_edit);
        ASSERT_FALSE(path.empty());
        const std::string err = load_error(path);
        EXPECT_NE(err.find(std::string("tensor '") + c.tensor + "' has type " + ggml_type_name(c.type)), std::string::npos)
            << err;
        EXPECT_NE(err.find("no matrix-product kernel"), std::string::npos) << err;
    }
    // the same file with a type that has a kernel loads
    EXPECT_EQ(load_error(craft("stories260K.gguf", "blk.0.attn_q.weight", GGML_TYPE_Q8_0, no_edit)), "");
}

TEST(ModelLoad, CheckTensorsFindsNonFiniteValuesAndBadScales) {
    // an f32 weight with one NaN
    const std::string nan_f32 = craft("stories260K.gguf", "blk.0.attn_k.weight", GGML_TYPE_F32, [](std::vector<uint8_t> & d, int64_t ne0) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(d.data() + (ne0 + 5) * sizeof(float), &nan, sizeof(float));   // row 1, element 5
    });
    EXPECT_EQ(load_error(nan_f32, false), "");   // loads without the check
    std::string err = load_error(nan_f32, true);
    EXPECT_NE(err.find("tensor 'blk.0.attn_k.weight' (f32) has a non-finite value (nan) in row 1 at element 5"), std::string::npos)
        << err;

    // a q8_0 weight whose second block has an infinite scale (f16 0x7c00 = +inf in its first two bytes)
    const std::string inf_scale = craft("stories260K.gguf", "blk.0.ffn_up.weight", GGML_TYPE_Q8_0, [](std::vector<uint8_t> & d, int64_t) {
        const size_t block = ggml_row_size(GGML_TYPE_Q8_0, 32);
        d[block + 0] = 0x00;
        d[block + 1] = 0x7c;
    });
    err = load_error(inf_scale, true);
    EXPECT_NE(err.find("tensor 'blk.0.ffn_up.weight' (q8_0) has a non-finite value"), std::string::npos) << err;
    EXPECT_NE(err.find("block 1"), std::string::npos) << err;

    // the shared models are clean
    for (const char * m : { "stories260K.gguf", "synth-qwen3-Q4_K_M.gguf", "synth-qwen3moe-IQ4_XS.gguf" }) {
        EXPECT_EQ(load_error(kiln_test::shared_path(std::string("models/") + m), true), "") << m;
    }
}

// gcc says __SANITIZE_ADDRESS__, clang __has_feature(address_sanitizer)
#if defined(__SANITIZE_ADDRESS__)
#define KILN_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_TEST_ASAN 1
#endif
#endif
#ifndef KILN_TEST_ASAN
#define KILN_TEST_ASAN 0
#endif

TEST(ModelLoad, MlockLocksTheWeights) {
    const std::string path = kiln_test::shared_path("models/stories260K.gguf");
    const long before = vm_locked_kib();
    ASSERT_GE(before, 0) << "no VmLck in /proc/self/status";
    llama_model_params mp = llama_model_default_params();
    for (bool mmap : { true, false }) {
        mp.use_mmap = mmap;
        mp.use_mlock = true;
        llama_model * m = llama_model_load_from_file(path.c_str(), mp);
        ASSERT_NE(m, nullptr) << llama_last_error();
#if !KILN_TEST_ASAN   // AddressSanitizer replaces mlock with a no-op
        const long size_kib = (long) (llama_model_size(m) / 1024);
        EXPECT_GE(vm_locked_kib() - before, size_kib) << (mmap ? "mmap" : "read");
#endif
        llama_model_free(m);
        EXPECT_EQ(vm_locked_kib(), before) << "unlocked when the model is freed";
    }
}

// -ctk / -ctv offer exactly the types a context can be made with.
TEST(ModelLoad, EveryOfferedCacheTypeMakesAContext) {
    llama_model * m = llama_model_load_from_file(kiln_test::shared_path("models/synth-qwen3-f16.gguf").c_str(),
                                                 llama_model_default_params());
    ASSERT_NE(m, nullptr);
    std::string names = common_kv_cache_type_names() + ", ";
    int n = 0;
    for (size_t at = 0; (at = names.find(", ")) != std::string::npos; names.erase(0, at + 2)) {
        const std::string name = names.substr(0, at);
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 64;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
        cp.type_k = cp.type_v = common_kv_cache_type_from_str(name);
        llama_context * ctx = llama_init_from_model(m, cp);
        EXPECT_NE(ctx, nullptr) << name << ": " << llama_last_error();
        if (ctx) {
            llama_token t = 1;
            EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(&t, 1)), 0) << name;
            llama_free(ctx);
        }
        ++n;
    }
    EXPECT_GE(n, 10);
    llama_model_free(m);
}

// q8_KV keeps a header per head row; an MLA latent row, which V is a slice of, cannot give V one:
// refused by name with MLA, accepted by the same model's plain attention (-mla 0).
TEST(ModelLoad, Q8KvCacheOnALatentCacheIsRefusedByName) {
    llama_model * m = llama_model_load_from_file(kiln_test::shared_path("models/synth-deepseek2-f16.gguf").c_str(),
                                                 llama_model_default_params());
    ASSERT_NE(m, nullptr);
    for (int mla : { 0, 3 }) {
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 64;
        cp.mla = mla;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
        cp.type_k = cp.type_v = GGML_TYPE_Q8_KV;
        llama_context * ctx = llama_init_from_model(m, cp);
        if (mla == 0) {
            ASSERT_NE(ctx, nullptr) << llama_last_error();
            llama_token t = 1;
            EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(&t, 1)), 0);
            llama_free(ctx);
        } else {
            EXPECT_EQ(ctx, nullptr);
            const std::string err = llama_last_error();
            EXPECT_NE(err.find("q8_KV"), std::string::npos) << err;
            EXPECT_NE(err.find("MLA"), std::string::npos) << err;
        }
    }
    llama_model_free(m);
}

TEST(ModelLoad, NoPerfLeavesTheCountersAtZero) {
    llama_model_params mp = llama_model_default_params();
    llama_model * m = llama_model_load_from_file(kiln_test::shared_path("models/stories260K.gguf").c_str(), mp);
    ASSERT_NE(m, nullptr);
    for (bool no_perf : { false, true }) {
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 64;
        cp.no_perf = no_perf;
        llama_context * ctx = llama_init_from_model(m, cp);
        ASSERT_NE(ctx, nullptr);
        llama_token toks[4] = { 1, 2, 3, 4 };
        ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(toks, 4)), 0);
        ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(toks, 1)), 0);
        const llama_perf_context_data d = llama_perf_context(ctx);
        EXPECT_EQ(d.n_p_eval, no_perf ? 0 : 4);
        EXPECT_EQ(d.n_eval, no_perf ? 0 : 1);
        llama_free(ctx);
    }
    llama_model_free(m);
}
