// llama_decode behaviour: the same logits whether a prompt is decoded at once, in chunks or token
// by token; greedy generation identical across thread counts; several sequences in one batch; KV
// cache edits (remove, copy, shift); clear errors for bad batches.
#include "common.h"
#include "llama.h"
#include "model-handles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

using kiln_test::context_ptr;
using kiln_test::model_ptr;

model_ptr load(const char * name) { return kiln_test::load_shared_model(name); }

context_ptr make_ctx(llama_model * m, int n_threads, bool fa, int n_ubatch = 512, int n_seq = 1, int n_ctx = 256) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = n_ubatch;
    cp.n_seq_max = n_seq;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    return context_ptr(llama_init_from_model(m, cp));
}

std::vector<llama_token> prompt_tokens(const llama_model * m, int n) {
    const llama_vocab * v = llama_model_get_vocab(m);
    const int n_vocab = llama_vocab_n_tokens(v);
    std::vector<llama_token> t(n);
    for (int i = 0; i < n; ++i) t[i] = (llama_token) ((i * 7919 + 13) % n_vocab);
    if (llama_vocab_get_add_bos(v)) t[0] = llama_vocab_bos(v);
    return t;
}

// decode tokens [start, start + n) of seq at their positions, logits for all
void decode_range(llama_context * ctx, const std::vector<llama_token> & toks, int start, int n, llama_seq_id seq = 0) {
    ASSERT_EQ(kiln_test::decode_tokens(ctx, toks, start, n, start, seq), 0);
}

double rel_diff(const float * a, const float * b, int n) { return kiln_test::logits_rel_diff(a, b, n); }

class Decode : public ::testing::TestWithParam<std::tuple<const char *, bool>> {};

TEST_P(Decode, OneBatchChunksAndSingleTokensAgree) {
    const auto [name, fa] = GetParam();
    model_ptr m = load(name);
    ASSERT_TRUE(m) << llama_last_error();
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
    const int n = 40;
    const auto toks = prompt_tokens(m.get(), n);

    context_ptr whole = make_ctx(m.get(), 2, fa);
    decode_range(whole.get(), toks, 0, n);
    std::vector<float> ref((size_t) n * n_vocab);
    for (int i = 0; i < n; ++i) std::copy_n(llama_get_logits_ith(whole.get(), i), n_vocab, ref.begin() + (size_t) i * n_vocab);

    context_ptr chunked = make_ctx(m.get(), 2, fa);
    for (int s = 0; s < n; s += 9) {
        const int len = std::min(9, n - s);
        decode_range(chunked.get(), toks, s, len);
        for (int i = 0; i < len; ++i) {
            EXPECT_LT(rel_diff(llama_get_logits_ith(chunked.get(), i), &ref[(size_t) (s + i) * n_vocab], n_vocab), 1e-4)
                << "chunked, token " << s + i;
        }
    }

    context_ptr single = make_ctx(m.get(), 1, fa);
    for (int s = 0; s < n; ++s) {
        decode_range(single.get(), toks, s, 1);
        EXPECT_LT(rel_diff(llama_get_logits_ith(single.get(), 0), &ref[(size_t) s * n_vocab], n_vocab), 1e-4)
            << "token by token, token " << s;
    }
}

// Greedy continuation of a prompt, n tokens, with the given thread count.
std::vector<llama_token> greedy(llama_model * m, int n_threads, bool fa, int n_gen) {
    context_ptr ctx = make_ctx(m, n_threads, fa);
    auto toks = prompt_tokens(m, 12);
    decode_range(ctx.get(), toks, 0, (int) toks.size());
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    std::vector<llama_token> out;
    const float * logits = llama_get_logits_ith(ctx.get(), -1);
    for (int i = 0; i < n_gen; ++i) {
        const llama_token t = (llama_token) (std::max_element(logits, logits + n_vocab) - logits);
        out.push_back(t);
        toks.push_back(t);
        decode_range(ctx.get(), toks, (int) toks.size() - 1, 1);
        logits = llama_get_logits_ith(ctx.get(), 0);
    }
    return out;
}

TEST_P(Decode, GreedyGenerationIdenticalAcrossThreadCounts) {
    const auto [name, fa] = GetParam();
    model_ptr m = load(name);
    ASSERT_TRUE(m);
    const auto a = greedy(m.get(), 1, fa, 24);
    const auto b = greedy(m.get(), 2, fa, 24);
    const auto c = greedy(m.get(), 2, fa, 24);
    EXPECT_EQ(a, b);
    EXPECT_EQ(b, c);
}

INSTANTIATE_TEST_SUITE_P(Models, Decode,
                         ::testing::Combine(::testing::Values("stories260K.gguf", "synth-qwen3-f16.gguf"), ::testing::Bool()));

// Two sequences decoded together give the logits each gives alone; removing and copying
// sequence ranges and shifting positions behave as the llama.cpp API promises.
TEST(DecodeSequences, InterleavedSequencesMatchSeparateRuns) {
    model_ptr m = load("synth-qwen3-f16.gguf");
    ASSERT_TRUE(m);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
    auto t0 = prompt_tokens(m.get(), 10);
    std::vector<llama_token> t1(10);
    for (int i = 0; i < 10; ++i) t1[i] = (t0[i] * 31 + 5) % n_vocab;

    context_ptr alone = make_ctx(m.get(), 2, true);
    decode_range(alone.get(), t1, 0, 10);
    std::vector<float> ref(llama_get_logits_ith(alone.get(), 9), llama_get_logits_ith(alone.get(), 9) + n_vocab);

    context_ptr both = make_ctx(m.get(), 2, true, 512, 2);
    llama_batch b = llama_batch_init(20, 0, 1);
    b.n_tokens = 20;
    for (int i = 0; i < 20; ++i) {
        const int s = i % 2, p = i / 2;
        b.token[i] = s ? t1[p] : t0[p];
        b.pos[i] = p;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = s;
        b.logits[i] = i == 19;
    }
    ASSERT_EQ(llama_decode(both.get(), b), 0);
    EXPECT_LT(rel_diff(llama_get_logits_ith(both.get(), 19), ref.data(), n_vocab), 1e-4);
    llama_batch_free(b);

    // drop sequence 0: positions of seq 1 stay
    EXPECT_EQ(llama_memory_seq_pos_max(both.get(), 0), 9);
    llama_memory_seq_rm(both.get(), 0, -1, -1);
    EXPECT_EQ(llama_memory_seq_pos_max(both.get(), 0), -1);
    EXPECT_EQ(llama_memory_seq_pos_max(both.get(), 1), 9);
    EXPECT_EQ(llama_memory_n_used(both.get()), 10);
    // a KV cache drops any suffix: a prefix resumes where it ends
    EXPECT_EQ(llama_memory_seq_pos_resume(both.get(), 1, 5), 5);
    EXPECT_FALSE(llama_model_is_hybrid(m.get()) || llama_model_is_recurrent(m.get()));

    // copy seq 1 into seq 0 and continue seq 0: same as continuing seq 1 alone
    llama_memory_seq_cp(both.get(), 1, 0, -1, -1);
    t1.push_back(7);
    decode_range(both.get(), t1, 10, 1, 0);
    decode_range(alone.get(), t1, 10, 1, 0);
    EXPECT_LT(rel_diff(llama_get_logits_ith(both.get(), 0), llama_get_logits_ith(alone.get(), 0), n_vocab), 1e-4);
}

// Shifting cached positions (context shift) re-rotates the cached keys: decoding at positions
// 0..19 and then moving them to 100..119 must equal decoding at 100..119 directly, since
// attention with RoPE depends only on relative positions. Removing a range keeps the rest.
void decode_at(llama_context * ctx, const std::vector<llama_token> & toks, int start, int n, int pos0) {
    ASSERT_EQ(kiln_test::decode_tokens(ctx, toks, start, n, pos0), 0);
}

TEST(DecodeSequences, PositionShiftMatchesDecodingAtShiftedPositions) {
    model_ptr m = load("synth-qwen3-f16.gguf");
    ASSERT_TRUE(m);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
    auto toks = prompt_tokens(m.get(), 30);

    context_ptr shifted = make_ctx(m.get(), 2, true);
    decode_at(shifted.get(), toks, 0, 20, 0);
    llama_memory_seq_add(shifted.get(), 0, 0, -1, 100);
    EXPECT_EQ(llama_memory_seq_pos_min(shifted.get(), 0), 100);
    EXPECT_EQ(llama_memory_seq_pos_max(shifted.get(), 0), 119);
    decode_at(shifted.get(), toks, 20, 5, 120);

    context_ptr direct = make_ctx(m.get(), 2, true);
    decode_at(direct.get(), toks, 0, 25, 100);
    for (int i = 0; i < 5; ++i) {
        EXPECT_LT(rel_diff(llama_get_logits_ith(shifted.get(), i), llama_get_logits_ith(direct.get(), 20 + i), n_vocab), 1e-3)
            << "token " << i;
    }

    // dropping positions 100..109 leaves 110..124 for the sequence
    llama_memory_seq_rm(shifted.get(), 0, 100, 110);
    EXPECT_EQ(llama_memory_seq_pos_min(shifted.get(), 0), 110);
    EXPECT_EQ(llama_memory_n_used(shifted.get()), 15);
}

// The same with a quantized K cache: the shifted keys are decoded, rotated and encoded again.
TEST(DecodeSequences, PositionShiftWithQuantizedKCache) {
    model_ptr m = load("synth-qwen3-f16.gguf");
    ASSERT_TRUE(m);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
    auto toks = prompt_tokens(m.get(), 30);
    // q8_KV: whole head rows decoded, rotated and encoded again with a new row scale
    for (ggml_type tk : { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q8_KV }) {
        auto make = [&] {
            llama_context_params cp = llama_context_default_params();
            cp.n_ctx = cp.n_batch = 256;
            cp.n_threads = cp.n_threads_batch = 2;
            cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
            cp.type_k = tk;
            return context_ptr(llama_init_from_model(m.get(), cp));
        };
        context_ptr shifted = make(), direct = make(), unshifted = make();
        ASSERT_TRUE(shifted && direct && unshifted) << ggml_type_name(tk);
        decode_at(shifted.get(), toks, 0, 20, 0);
        llama_memory_seq_add(shifted.get(), 0, 0, -1, 100);
        decode_at(shifted.get(), toks, 20, 5, 120);
        decode_at(direct.get(), toks, 0, 25, 100);
        // keys left at positions 0..19: what a shift that did nothing would give
        decode_at(unshifted.get(), toks, 0, 20, 0);
        decode_at(unshifted.get(), toks, 20, 5, 120);
        double worst = 0, control = 0;
        for (int i = 0; i < 5; ++i) {
            const float * want = llama_get_logits_ith(direct.get(), 20 + i);
            worst = std::max(worst, rel_diff(llama_get_logits_ith(shifted.get(), i), want, n_vocab));
            control = std::max(control, rel_diff(llama_get_logits_ith(unshifted.get(), i), want, n_vocab));
        }
        // the shifted keys were quantized twice: close to the direct run, far closer than no shift
        std::printf("%s K cache: shifted vs direct %.4f, unshifted vs direct %.4f\n", ggml_type_name(tk), worst, control);
        EXPECT_LT(worst, tk == GGML_TYPE_Q4_0 ? 2e-1 : 2e-2) << ggml_type_name(tk);
        EXPECT_LT(worst * 4, control) << ggml_type_name(tk);
    }
}

// A context shift drops the oldest tokens and moves the rest down (common_context_shift). What
// stays was computed with the dropped tokens in view, so the exact reference is the same cache
// with the tokens dropped but not moved: attention with RoPE sees only relative positions, so new
// tokens decoded after the moved keys must give the logits they give after the unmoved ones.
// For plain and quantized K caches, with and without flash attention; n_keep 0 makes the drop
// and the move cover whole ranges (with n_keep > 0 the kept head moves closer to the rest, and
// no decode without a shift reproduces that).
TEST(DecodeSequences, ContextShiftMatchesDroppingWithoutMoving) {
    for (const char * name : { "stories260K.gguf", "synth-qwen3-f16.gguf" }) {
        model_ptr m = load(name);
        ASSERT_TRUE(m) << name;
        const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
        const int n_past = 40, n_new = 5;
        auto toks = prompt_tokens(m.get(), n_past + n_new);
        for (ggml_type tk : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q8_KV }) {
            // stories260K's heads (8 values) are shorter than a 32-value block
            if (ggml_is_quantized(tk) && std::string(name) == "stories260K.gguf") continue;
            for (bool fa : { false, true }) {
                const std::string what = std::string(name) + " " + ggml_type_name(tk) + (fa ? " fa" : "");
                auto make = [&] {
                    llama_context_params cp = llama_context_default_params();
                    cp.n_ctx = cp.n_batch = 64;
                    cp.n_threads = cp.n_threads_batch = 2;
                    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
                    cp.type_k = tk;
                    return context_ptr(llama_init_from_model(m.get(), cp));
                };
                context_ptr shifted = make(), dropped = make(), unrotated = make();
                ASSERT_TRUE(shifted && dropped && unrotated) << what;
                ASSERT_TRUE(llama_memory_can_shift(shifted.get(), nullptr)) << what;
                for (llama_context * c : { shifted.get(), dropped.get(), unrotated.get() }) decode_at(c, toks, 0, n_past, 0);

                const int n_dropped = common_context_shift(shifted.get(), 0, n_past, 0);
                ASSERT_EQ(n_dropped, n_past / 2) << what;
                EXPECT_EQ(llama_memory_seq_pos_min(shifted.get(), 0), 0) << what;
                EXPECT_EQ(llama_memory_seq_pos_max(shifted.get(), 0), n_past - n_dropped - 1) << what;
                decode_at(shifted.get(), toks, n_past, n_new, n_past - n_dropped);

                llama_memory_seq_rm(dropped.get(), 0, 0, n_dropped);
                decode_at(dropped.get(), toks, n_past, n_new, n_past);
                // control: the new tokens at the moved positions next to keys never rotated
                llama_memory_seq_rm(unrotated.get(), 0, 0, n_dropped);
                decode_at(unrotated.get(), toks, n_past, n_new, n_past - n_dropped);

                double worst = 0, control = 0;
                for (int i = 0; i < n_new; ++i) {
                    const float * want = llama_get_logits_ith(dropped.get(), i);
                    worst = std::max(worst, rel_diff(llama_get_logits_ith(shifted.get(), i), want, n_vocab));
                    control = std::max(control, rel_diff(llama_get_logits_ith(unrotated.get(), i), want, n_vocab));
                }
                // the moved keys are rounded to the cache type once more
                const double tol = tk == GGML_TYPE_F32 ? 1e-4 : tk == GGML_TYPE_F16 ? 5e-3 : tk == GGML_TYPE_Q4_0 ? 2e-1 : 2e-2;
                std::printf("%s: shifted vs dropped %.2e, unrotated vs dropped %.2e\n", what.c_str(), worst, control);
                EXPECT_LT(worst, tol) << what;
                EXPECT_LT(worst * 4, control) << what;
            }
        }
    }
}

// The kept head stays where it is: with n_keep tokens kept, positions 0..n_keep-1 are untouched
// and the rest follow them without a gap.
TEST(DecodeSequences, ContextShiftKeepsTheHead) {
    model_ptr m = load("stories260K.gguf");
    ASSERT_TRUE(m);
    auto toks = prompt_tokens(m.get(), 40);
    context_ptr ctx = make_ctx(m.get(), 2, true, 512, 1, 64);
    ASSERT_TRUE(ctx);
    decode_at(ctx.get(), toks, 0, 40, 0);
    EXPECT_EQ(common_context_shift(ctx.get(), 0, 40, 6), 17);
    EXPECT_EQ(llama_memory_n_used(ctx.get()), 23);
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 0), 22);
    // nothing left to drop: no change
    EXPECT_EQ(common_context_shift(ctx.get(), 0, 23, 22), 0);
    EXPECT_EQ(llama_memory_n_used(ctx.get()), 23);
    // n_keep counts the BOS on top, and -1 keeps the whole prompt
    const llama_vocab * v = llama_model_get_vocab(m.get());
    std::vector<llama_token> prompt = { llama_vocab_bos(v), 10, 11, 12 };
    EXPECT_EQ(common_context_shift_keep(v, prompt, 2), 3);
    EXPECT_EQ(common_context_shift_keep(v, prompt, -1), 4);
    EXPECT_EQ(common_context_shift_keep(v, prompt, 9), 4);
    prompt[0] = 10;
    EXPECT_EQ(common_context_shift_keep(v, prompt, 2), 2);
}

TEST(DecodeErrors, BadBatchesAreRejected) {
    model_ptr m = load("stories260K.gguf");
    ASSERT_TRUE(m);
    context_ptr ctx = make_ctx(m.get(), 1, true, 512, 1, 32);
    llama_token bad = 1 << 20;
    EXPECT_LT(llama_decode(ctx.get(), llama_batch_get_one(&bad, 1)), 0);   // token out of range
    EXPECT_LT(llama_decode(ctx.get(), llama_batch_get_one(&bad, 0)), 0);   // empty batch
    // more tokens than the cache holds: 1 (no slot), not a crash
    std::vector<llama_token> many(40, 1);
    EXPECT_EQ(llama_decode(ctx.get(), llama_batch_get_one(many.data(), 32)), 0);
    EXPECT_EQ(llama_decode(ctx.get(), llama_batch_get_one(many.data(), 8)), 1);
    // a batch that does not fit leaves the cache as it was (no micro-batch keeps its cells)
    context_ptr small = make_ctx(m.get(), 1, true, 4, 1, 32);
    ASSERT_EQ(llama_decode(small.get(), llama_batch_get_one(many.data(), 28)), 0);
    EXPECT_EQ(llama_memory_n_used(small.get()), 28);
    EXPECT_EQ(llama_decode(small.get(), llama_batch_get_one(many.data(), 8)), 1);
    EXPECT_EQ(llama_memory_n_used(small.get()), 28);
    EXPECT_EQ(llama_decode(small.get(), llama_batch_get_one(many.data(), 4)), 0);
    EXPECT_EQ(llama_memory_n_used(small.get()), 32);
    // a model file that does not exist
    llama_model_params mp = llama_model_default_params();
    EXPECT_EQ(llama_model_load_from_file("/nonexistent/model.gguf", mp), nullptr);
    EXPECT_NE(std::string(llama_last_error()).find("/nonexistent/model.gguf"), std::string::npos);
}

} // namespace

// Every field llama_decode indexes with is checked first: a bad entry is an error code and a
// message naming the entry, never a read out of bounds, and the cache is left as it was.
TEST(DecodeErrors, BatchFieldsAreValidated) {
    model_ptr m = load("stories260K.gguf");
    ASSERT_TRUE(m);
    context_ptr ctx = make_ctx(m.get(), 1, true, 512, 2, 64);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
    struct bad_case {
        const char * what;     // in llama_last_error()
        void (*spoil)(llama_batch & b, int n_vocab);
    };
    const bad_case cases[] = {
        { "n_seq_id 0 at index 2", [](llama_batch & b, int) { b.n_seq_id[2] = 0; } },
        { "n_seq_id -1 at index 0", [](llama_batch & b, int) { b.n_seq_id[0] = -1; } },
        { "n_seq_id 3 at index 1", [](llama_batch & b, int) { b.n_seq_id[1] = 3; } },
        { "sequence id 2 at index 3", [](llama_batch & b, int) { b.seq_id[3][0] = 2; } },
        { "sequence id -4 at index 0", [](llama_batch & b, int) { b.seq_id[0][0] = -4; } },
        { "position -1 at index 1", [](llama_batch & b, int) { b.pos[1] = -1; } },
        { "out of the vocabulary", [](llama_batch & b, int n) { b.token[2] = n; } },
        { "out of the vocabulary", [](llama_batch & b, int) { b.token[0] = -7; } },
        { "seq_id at index 1 is NULL", [](llama_batch & b, int) { b.seq_id[1] = nullptr; } },
    };
    // a good batch first: 2 tokens of sequence 0
    {
        llama_batch b = llama_batch_init(2, 0, 2);
        b.n_tokens = 2;
        for (int i = 0; i < 2; ++i) {
            b.token[i] = 1 + i;
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = i == 1;
        }
        ASSERT_EQ(llama_decode(ctx.get(), b), 0);
        llama_batch_free(b);
    }
    for (const bad_case & c : cases) {
        llama_batch b = llama_batch_init(4, 0, 2);
        llama_seq_id * seq1 = b.seq_id[1];   // llama_batch_free frees what init allocated
        b.n_tokens = 4;
        for (int i = 0; i < 4; ++i) {
            b.token[i] = 3 + i;
            b.pos[i] = 2 + i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = i % 2;
            b.logits[i] = 1;
        }
        c.spoil(b, n_vocab);
        EXPECT_LT(llama_decode(ctx.get(), b), 0) << c.what;
        EXPECT_NE(std::string(llama_last_error()).find(c.what), std::string::npos) << llama_last_error();
        EXPECT_EQ(llama_memory_n_used(ctx.get()), 2) << c.what;
        b.seq_id[1] = seq1;
        llama_batch_free(b);
    }
    // seq_id without n_seq_id
    llama_token t = 1;
    llama_batch b = llama_batch_get_one(&t, 1);
    llama_seq_id s0 = 0, * sp = &s0;
    b.seq_id = &sp;
    EXPECT_LT(llama_decode(ctx.get(), b), 0);
    EXPECT_EQ(llama_memory_n_used(ctx.get()), 2);
}
