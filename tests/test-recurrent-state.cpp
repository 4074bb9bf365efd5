// llama_decode and the memory API on models with recurrent layers (synth-qwen35, -qwen35moe):
// a prompt decoded at once, in 7-token pieces and token by token gives the same logits; a state
// copied with seq_cp continues like a fresh run, also in a batch that mixes both sequences;
// removing positions works back to 0 or to a checkpoint and is refused otherwise (leaving the
// sequence usable); batches a state cannot take are rejected; a call whose graph fails after the
// state was written leaves the state as before it (or, for a generation step, resets it); shifting positions re-rotates the
// attention layers' IMROPE keys; the load log states the state's size.
#include "llama.h"
#include "llama-context.h"
#include "model-handles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using kiln_test::context_ptr;
using kiln_test::model_ptr;

model_ptr load(const std::string & name) { return kiln_test::load_shared_model(name); }

context_ptr make_ctx(llama_model * m, int n_threads, int n_ubatch = 512, int n_seq = 1, uint32_t n_ckpt = 0, bool fa = true) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = n_ubatch;
    cp.n_seq_max = n_seq;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.n_ctx_checkpoints = n_ckpt;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    return context_ptr(llama_init_from_model(m, cp));
}

int n_vocab_of(const llama_model * m) { return llama_vocab_n_tokens(llama_model_get_vocab(m)); }

std::vector<llama_token> tokens(const llama_model * m, int n, int salt = 0) {
    std::vector<llama_token> t(n);
    for (int i = 0; i < n; ++i) t[i] = (llama_token) (((i + salt) * 7919 + 13 * salt + 5) % 4096);
    (void) m;
    return t;
}

int decode(llama_context * ctx, const std::vector<llama_token> & toks, int start, int n, int pos0, llama_seq_id seq = 0) {
    return kiln_test::decode_tokens(ctx, toks, start, n, pos0, seq);
}

std::vector<float> logits_of(llama_context * ctx, int i, int n_vocab) {
    const float * l = llama_get_logits_ith(ctx, i);
    return l ? std::vector<float>(l, l + n_vocab) : std::vector<float>();
}

double rel_diff(const std::vector<float> & a, const std::vector<float> & b) {
    if (a.size() != b.size() || a.empty()) return INFINITY;
    return kiln_test::logits_rel_diff(a.data(), b.data(), (int) a.size());
}

class RecurrentDecode : public ::testing::TestWithParam<const char *> {};

// The chunked delta rule (whole prompt, 7-token pieces that end inside its 64-token chunks) and
// the token-by-token recurrence give the same logits at every position.
TEST_P(RecurrentDecode, OneBatchPiecesAndSingleTokensAgree) {
    model_ptr m = load(GetParam());
    ASSERT_TRUE(m) << llama_last_error();
    const int n_vocab = n_vocab_of(m.get()), n = 90;
    const auto toks = tokens(m.get(), n);

    context_ptr whole = make_ctx(m.get(), 2);
    ASSERT_TRUE(whole);
    ASSERT_EQ(decode(whole.get(), toks, 0, n, 0), 0);
    std::vector<std::vector<float>> ref;
    for (int i = 0; i < n; ++i) ref.push_back(logits_of(whole.get(), i, n_vocab));

    context_ptr pieces = make_ctx(m.get(), 2);
    for (int s = 0; s < n; s += 7) {
        const int len = std::min(7, n - s);
        ASSERT_EQ(decode(pieces.get(), toks, s, len, s), 0);
        for (int i = 0; i < len; ++i) EXPECT_LT(rel_diff(logits_of(pieces.get(), i, n_vocab), ref[s + i]), 1e-4) << "7-token pieces, token " << s + i;
    }

    context_ptr single = make_ctx(m.get(), 1);
    for (int s = 0; s < n; ++s) {
        ASSERT_EQ(decode(single.get(), toks, s, 1, s), 0);
        EXPECT_LT(rel_diff(logits_of(single.get(), 0, n_vocab), ref[s]), 1e-4) << "token by token, token " << s;
    }

    // micro-batches of 5 inside one call: the state is carried from graph to graph
    context_ptr ub5 = make_ctx(m.get(), 2, 5);
    ASSERT_EQ(decode(ub5.get(), toks, 0, n, 0), 0);
    for (int i = 0; i < n; ++i) EXPECT_LT(rel_diff(logits_of(ub5.get(), i, n_vocab), ref[i]), 1e-4) << "ubatch 5, token " << i;
}

// seq_cp copies the state: two continuations of one prompt, decoded together in one batch that
// interleaves their tokens, equal two fresh runs of prompt + continuation.
TEST_P(RecurrentDecode, SeqCpThenDivergingContinuationsEqualFreshRuns) {
    model_ptr m = load(GetParam());
    ASSERT_TRUE(m);
    const int n_vocab = n_vocab_of(m.get()), n_prompt = 20, n_cont = 6;
    const auto prompt = tokens(m.get(), n_prompt);
    const auto a = tokens(m.get(), n_cont, 1), b = tokens(m.get(), n_cont, 2);

    context_ptr ctx = make_ctx(m.get(), 2, 512, 2);
    ASSERT_EQ(decode(ctx.get(), prompt, 0, n_prompt, 0, 0), 0);
    llama_memory_seq_cp(ctx.get(), 0, 1, -1, -1);
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 1), n_prompt - 1);
    llama_batch bt = llama_batch_init(2 * n_cont, 0, 1);
    bt.n_tokens = 2 * n_cont;
    for (int i = 0; i < 2 * n_cont; ++i) {
        const int s = i % 2, p = i / 2;
        bt.token[i] = s ? b[p] : a[p];
        bt.pos[i] = n_prompt + p;
        bt.n_seq_id[i] = 1;
        bt.seq_id[i][0] = s;
        bt.logits[i] = 1;
    }
    ASSERT_EQ(llama_decode(ctx.get(), bt), 0);
    llama_batch_free(bt);

    for (int s = 0; s < 2; ++s) {
        const auto & cont = s ? b : a;
        std::vector<llama_token> all(prompt);
        all.insert(all.end(), cont.begin(), cont.end());
        context_ptr fresh = make_ctx(m.get(), 2);
        ASSERT_EQ(decode(fresh.get(), all, 0, n_prompt + n_cont, 0), 0);
        for (int p = 0; p < n_cont; ++p) {
            EXPECT_LT(rel_diff(logits_of(ctx.get(), 2 * p + s, n_vocab), logits_of(fresh.get(), n_prompt + p, n_vocab)), 1e-4)
                << "sequence " << s << ", continuation token " << p;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Models, RecurrentDecode, ::testing::Values("synth-qwen35-f16.gguf", "synth-qwen35moe-f16.gguf"),
                         [](const ::testing::TestParamInfo<const char *> & i) {
                             return std::string(std::string(i.param).find("moe") != std::string::npos ? "qwen35moe" : "qwen35");
                         });

// Without checkpoints a state can only be removed whole; a refused removal changes nothing.
TEST(RecurrentMemory, RemovalBackToZeroOnlyWithoutCheckpoints) {
    model_ptr m = load("synth-qwen35-f16.gguf");
    ASSERT_TRUE(m);
    const int n_vocab = n_vocab_of(m.get());
    const auto toks = tokens(m.get(), 30);
    context_ptr ctx = make_ctx(m.get(), 2);
    ASSERT_EQ(decode(ctx.get(), toks, 0, 20, 0), 0);
    const auto first = logits_of(ctx.get(), 19, n_vocab);

    EXPECT_FALSE(llama_memory_seq_rm(ctx.get(), 0, 10, -1));   // a suffix: no checkpoint to go back to
    EXPECT_FALSE(llama_memory_seq_rm(ctx.get(), 0, 5, 8));     // a middle range: never
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 0), 19);     // both left the sequence as it was
    EXPECT_TRUE(llama_memory_seq_rm(ctx.get(), 0, 20, -1));    // nothing there to remove
    ASSERT_EQ(decode(ctx.get(), toks, 20, 1, 20), 0);          // still continues

    EXPECT_TRUE(llama_memory_seq_rm(ctx.get(), 0, -1, -1));    // the whole sequence
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 0), -1);
    ASSERT_EQ(decode(ctx.get(), toks, 0, 20, 0), 0);            // starts again from the zero state
    EXPECT_LT(rel_diff(logits_of(ctx.get(), 19, n_vocab), first), 1e-6);
}

// With --ctx-checkpoints every prompt piece leaves a checkpoint: removing back to one restores
// the state there, and continuing equals a fresh run; the oldest checkpoints make room.
TEST(RecurrentMemory, RemovalBackToCheckpoint) {
    model_ptr m = load("synth-qwen35-f16.gguf");
    ASSERT_TRUE(m);
    const int n_vocab = n_vocab_of(m.get());
    const auto toks = tokens(m.get(), 40);
    auto other = toks;
    other[20] = (other[20] + 1) % 4096;

    context_ptr ctx = make_ctx(m.get(), 2, 512, 1, 3);
    for (int p = 0; p < 20; p += 5) ASSERT_EQ(decode(ctx.get(), toks, p, 5, p), 0);   // checkpoints at 4, 9, 14, 19
    for (int p = 20; p < 25; ++p) ASSERT_EQ(decode(ctx.get(), toks, p, 1, p), 0);    // single tokens: none
    EXPECT_FALSE(llama_memory_seq_rm(ctx.get(), 0, 22, -1));
    EXPECT_FALSE(llama_memory_seq_rm(ctx.get(), 0, 5, -1));    // 3 kept: the one at 4 made room
    // where a prefix can be resumed: one past the latest checkpoint before it, else 0
    EXPECT_EQ(llama_memory_seq_pos_resume(ctx.get(), 0, 22), 20);
    EXPECT_EQ(llama_memory_seq_pos_resume(ctx.get(), 0, 14), 10);
    EXPECT_EQ(llama_memory_seq_pos_resume(ctx.get(), 0, 7), 0);
    EXPECT_EQ(llama_memory_seq_pos_resume(ctx.get(), 0, 25), 25);   // nothing held from 25 on
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 0), 24);
    EXPECT_TRUE(llama_memory_seq_rm(ctx.get(), 0, 20, -1));
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 0), 19);
    ASSERT_EQ(decode(ctx.get(), other, 20, 3, 20), 0);          // a checkpoint at 22 (the one at 9 goes)

    context_ptr fresh = make_ctx(m.get(), 2);
    ASSERT_EQ(decode(fresh.get(), other, 0, 23, 0), 0);
    for (int i = 0; i < 3; ++i) {
        EXPECT_LT(rel_diff(logits_of(ctx.get(), i, n_vocab), logits_of(fresh.get(), 20 + i, n_vocab)), 1e-4) << "token " << 20 + i;
    }
    // back to the checkpoint at 14: those at 19 and 22 describe a future that is gone
    EXPECT_TRUE(llama_memory_seq_rm(ctx.get(), 0, 15, -1));
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 0), 14);
    EXPECT_FALSE(llama_memory_seq_rm(ctx.get(), 0, 10, -1));
    ASSERT_EQ(decode(ctx.get(), toks, 15, 5, 15), 0);
    EXPECT_LT(rel_diff(logits_of(ctx.get(), 4, n_vocab), logits_of(fresh.get(), 19, n_vocab)), 1e-4);
}

TEST(RecurrentMemory, BatchesAStateCannotTakeAreRejected) {
    model_ptr m = load("synth-qwen35-f16.gguf");
    ASSERT_TRUE(m);
    const auto toks = tokens(m.get(), 10);
    context_ptr ctx = make_ctx(m.get(), 1, 512, 2);
    ASSERT_EQ(decode(ctx.get(), toks, 0, 10, 0), 0);
    EXPECT_LT(decode(ctx.get(), toks, 0, 1, 5), 0);    // position 5 is already in the state
    EXPECT_LT(decode(ctx.get(), toks, 0, 1, 9), 0);
    llama_batch b = llama_batch_init(1, 0, 2);   // one token in two sequences
    b.n_tokens = 1;
    b.token[0] = toks[0];
    b.pos[0] = 10;
    b.n_seq_id[0] = 2;
    b.seq_id[0][0] = 0;
    b.seq_id[0][1] = 1;
    b.logits[0] = 1;
    EXPECT_LT(llama_decode(ctx.get(), b), 0);
    llama_batch_free(b);
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 0), 9);   // nothing was decoded
    EXPECT_EQ(decode(ctx.get(), toks, 0, 1, 10), 0);
}

// A prompt piece whose second micro-batch fails after the first one ran: the state must be as
// before the call (positions and rows), so the same piece decoded again continues exactly like a
// run that never failed. Two sequences, so the one whose tokens all ran is restored too.
TEST(RecurrentMemory, FailedLaterMicroBatchRestoresTheState) {
    model_ptr m = load("synth-qwen35-f16.gguf");
    ASSERT_TRUE(m);
    const int n_vocab = n_vocab_of(m.get());
    const auto toks = tokens(m.get(), 30);
    const auto other = tokens(m.get(), 30, 3);
    context_ptr ctx = make_ctx(m.get(), 1, 8, 2);
    context_ptr ref = make_ctx(m.get(), 1, 8, 2);
    for (llama_context * c : { ctx.get(), ref.get() }) {
        ASSERT_EQ(decode(c, toks, 0, 10, 0, 0), 0);
        ASSERT_EQ(decode(c, other, 0, 4, 0, 1), 0);
    }
    const int32_t used = llama_memory_n_used(ctx.get());

    // sequence 1's 4 tokens and 4 of sequence 0's run in micro-batch 0; micro-batch 1 fails
    auto piece = [&](llama_context * c) {
        llama_batch b = llama_batch_init(20, 0, 1);
        b.n_tokens = 20;
        for (int i = 0; i < 20; ++i) {
            const bool seq1 = i < 4;
            b.token[i] = seq1 ? other[4 + i] : toks[10 + i - 4];
            b.pos[i] = seq1 ? 4 + i : 10 + i - 4;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = seq1 ? 1 : 0;
            b.logits[i] = i == 3 || i == 19;
        }
        const int rc = llama_decode(c, b);
        llama_batch_free(b);
        return rc;
    };
    ctx->fail_ubatch_for_test = 1;
    EXPECT_LT(piece(ctx.get()), 0);
    ctx->fail_ubatch_for_test = -1;
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 0), 9);
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 1), 3);
    EXPECT_EQ(llama_memory_n_used(ctx.get()), used);

    ASSERT_EQ(piece(ctx.get()), 0);
    ASSERT_EQ(piece(ref.get()), 0);
    EXPECT_LT(rel_diff(logits_of(ctx.get(), 3, n_vocab), logits_of(ref.get(), 3, n_vocab)), 1e-5) << "sequence 1";
    EXPECT_LT(rel_diff(logits_of(ctx.get(), 19, n_vocab), logits_of(ref.get(), 19, n_vocab)), 1e-5) << "sequence 0";
}

// A generation step (one token per sequence, one micro-batch) keeps no copy of the state: when
// its graph fails the sequence is reset, says so, and starts again from the zero state.
TEST(RecurrentMemory, FailedGenerationStepResetsItsSequence) {
    model_ptr m = load("synth-qwen35-f16.gguf");
    ASSERT_TRUE(m);
    const int n_vocab = n_vocab_of(m.get());
    const auto toks = tokens(m.get(), 12);
    context_ptr ctx = make_ctx(m.get(), 1);
    ASSERT_EQ(decode(ctx.get(), toks, 0, 10, 0), 0);
    const auto first = logits_of(ctx.get(), 9, n_vocab);
    ctx->fail_ubatch_for_test = 0;
    EXPECT_LT(decode(ctx.get(), toks, 10, 1, 10), 0);
    ctx->fail_ubatch_for_test = -1;
    EXPECT_NE(std::string(llama_last_error()).find("reset"), std::string::npos) << llama_last_error();
    EXPECT_EQ(llama_memory_seq_pos_max(ctx.get(), 0), -1);
    EXPECT_EQ(llama_memory_n_used(ctx.get()), 0);
    ASSERT_EQ(decode(ctx.get(), toks, 0, 10, 0), 0);
    EXPECT_LT(rel_diff(logits_of(ctx.get(), 9, n_vocab), first), 1e-6);
}

// Shifting positions moves the attention layers' keys (IMROPE over (p, p, p, 0)); the recurrent
// state does not depend on positions. Decoding at 0.. then shifting by 100 equals decoding at 100..
TEST(RecurrentMemory, PositionShiftMatchesDecodingAtShiftedPositions) {
    model_ptr m = load("synth-qwen35-f16.gguf");
    ASSERT_TRUE(m);
    const int n_vocab = n_vocab_of(m.get());
    const auto toks = tokens(m.get(), 30);
    context_ptr shifted = make_ctx(m.get(), 2);
    ASSERT_EQ(decode(shifted.get(), toks, 0, 20, 0), 0);
    llama_memory_seq_add(shifted.get(), 0, 0, -1, 100);
    EXPECT_EQ(llama_memory_seq_pos_max(shifted.get(), 0), 119);
    ASSERT_EQ(decode(shifted.get(), toks, 20, 5, 120), 0);
    context_ptr direct = make_ctx(m.get(), 2);
    ASSERT_EQ(decode(direct.get(), toks, 0, 25, 100), 0);
    context_ptr unshifted = make_ctx(m.get(), 2);
    ASSERT_EQ(decode(unshifted.get(), toks, 0, 20, 0), 0);
    ASSERT_EQ(decode(unshifted.get(), toks, 20, 5, 120), 0);   // keys left at 0..19: wrong distances
    double d = 0, d_none = 0;
    for (int i = 0; i < 5; ++i) {
        d = std::max(d, rel_diff(logits_of(shifted.get(), i, n_vocab), logits_of(direct.get(), 20 + i, n_vocab)));
        d_none = std::max(d_none, rel_diff(logits_of(unshifted.get(), i, n_vocab), logits_of(direct.get(), 20 + i, n_vocab)));
    }
    EXPECT_LT(d, 2e-2);   // the f16 cache rounds the keys before and after the rotation
    EXPECT_GT(d_none, 10 * d);
}

TEST(RecurrentMemory, LoadLogStatesStateSize) {
    static std::string log;
    log.clear();
    llama_log_set([](ggml_log_level, const char * text, void *) { log += text; }, nullptr);
    model_ptr m = load("synth-qwen35-f16.gguf");
    ASSERT_TRUE(m);
    context_ptr ctx = make_ctx(m.get(), 1, 512, 3);
    llama_log_set(nullptr, nullptr);
    ASSERT_TRUE(ctx);
    EXPECT_TRUE(llama_model_is_hybrid(m.get()));
    EXPECT_FALSE(llama_model_is_recurrent(m.get()));
    // 3 delta-net layers: conv window 3 x 1024 channels, delta state 128 x 128 x 4 heads, f32
    EXPECT_NE(log.find("recurrent state f32, 0.79 MiB per sequence (convolution 36.0 KiB, delta rule 768.0 KiB), "
                       "2.36 MiB for 3 sequence(s)"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("KV cache f16/f16"), std::string::npos);
    EXPECT_EQ(llama_memory_size_bytes(ctx.get()), (size_t) 256 * 1024 + 3 * 3 * (3 * 1024 + 128 * 128 * 4) * 4);
}

} // namespace
