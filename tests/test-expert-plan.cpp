// The host half of the CUDA batched expert products (ggml/src/cuda/expert-plan.h): the grouping of
// (slot, token) pairs by expert, checked without a GPU against a plain recount of the ids, on
// awkward routings: experts no token chose, every pair on one expert, a keep mask (-ser), ids out
// of range (an error naming the pair; a dropped pair's id is never read), and the batch threshold.
#include "cuda/expert-plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

// What any correct plan satisfies, recomputed the obvious way: every kept pair exactly once, in
// its expert's range, those ranges in expert order and each in increasing pair order; dropped
// pairs nowhere; row_of_pair the inverse of pair_of_row.
void expect_plan_of(const std::vector<int32_t> & ids, const std::vector<float> & keep, int64_t n_used, int64_t n_expert,
                    const expert_plan & plan) {
    const int64_t n_pairs = (int64_t) ids.size();
    ASSERT_EQ(plan.offsets.size(), (size_t) n_expert + 1);
    ASSERT_EQ(plan.row_of_pair.size(), (size_t) n_pairs);
    EXPECT_EQ(plan.offsets[0], 0);
    int64_t n_kept = 0, n_active = 0;
    for (int64_t e = 0; e < n_expert; ++e) {
        std::vector<int32_t> want;   // the pairs of e, in order
        for (int64_t p = 0; p < n_pairs; ++p) {
            if (ids[(size_t) p] == e && (keep.empty() || keep[(size_t) p] != 0.0f)) want.push_back((int32_t) p);
        }
        ASSERT_EQ(plan.offsets[(size_t) e + 1] - plan.offsets[(size_t) e], (int32_t) want.size()) << "expert " << e;
        for (size_t i = 0; i < want.size(); ++i) {
            const int32_t row = plan.offsets[(size_t) e] + (int32_t) i;
            EXPECT_EQ(plan.pair_of_row[(size_t) row], want[i]) << "expert " << e << ", row " << row;
            EXPECT_EQ(plan.row_of_pair[(size_t) want[i]], row) << "pair " << want[i];
        }
        n_kept += (int64_t) want.size();
        n_active += !want.empty();
    }
    EXPECT_EQ((int64_t) plan.pair_of_row.size(), n_kept);
    EXPECT_EQ(plan.offsets[(size_t) n_expert], n_kept);
    EXPECT_EQ(plan.n_active, n_active);
    for (int64_t p = 0; p < n_pairs; ++p) {
        if (!keep.empty() && keep[(size_t) p] == 0.0f) EXPECT_EQ(plan.row_of_pair[(size_t) p], -1) << "dropped pair " << p;
    }
    (void) n_used;
}

expert_plan build_ok(const std::vector<int32_t> & ids, const std::vector<float> & keep, int64_t n_used, int64_t n_expert) {
    expert_plan plan;
    std::string error;
    const int64_t n_tokens = (int64_t) ids.size() / n_used;
    EXPECT_TRUE(expert_plan_build(ids.data(), keep.empty() ? nullptr : keep.data(), n_used, n_tokens, n_expert, plan, &error)) << error;
    expect_plan_of(ids, keep, n_used, n_expert, plan);
    return plan;
}

} // namespace

TEST(ExpertPlan, RoutedBatchWithIdleExperts) {
    // 37 tokens, 3 slots, 11 experts: distinct experts per token, experts 4 and 9 chosen by none
    const int64_t n_used = 3, n_tokens = 37, n_expert = 11;
    const int32_t pool[] = { 0, 1, 2, 3, 5, 6, 7, 8, 10 };
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t s = 0; s < n_used; ++s) ids.push_back(pool[(t * 5 + s * 4) % 9]);
    }
    const expert_plan plan = build_ok(ids, {}, n_used, n_expert);
    EXPECT_EQ(plan.offsets[5] - plan.offsets[4], 0);
    EXPECT_EQ(plan.offsets[10] - plan.offsets[9], 0);
    EXPECT_EQ(plan.n_active, 9);
    EXPECT_EQ(plan.pair_of_row.size(), (size_t) (n_used * n_tokens));
}

TEST(ExpertPlan, EveryPairOnOneExpert) {
    const int64_t n_used = 2, n_tokens = 50, n_expert = 64;
    const std::vector<int32_t> ids((size_t) (n_used * n_tokens), 63);   // the last expert
    const expert_plan plan = build_ok(ids, {}, n_used, n_expert);
    EXPECT_EQ(plan.n_active, 1);
    EXPECT_EQ(plan.offsets[63], 0);
    EXPECT_EQ(plan.offsets[64], 100);
    for (int32_t r = 0; r < 100; ++r) EXPECT_EQ(plan.pair_of_row[(size_t) r], r);
}

TEST(ExpertPlan, KeepMaskDropsPairsAndTheirIdsAreNotRead) {
    const int64_t n_used = 4, n_tokens = 9, n_expert = 6;
    std::vector<int32_t> ids;
    std::vector<float> keep;
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t s = 0; s < n_used; ++s) {
            const bool dropped = (t + 2 * s) % 3 == 0;
            // a dropped pair's id may be anything: here out of range, which must not be an error
            ids.push_back(dropped ? 1000 + (int32_t) t : (int32_t) ((t + s) % n_expert));
            keep.push_back(dropped ? 0.0f : 0.25f);
        }
    }
    const expert_plan plan = build_ok(ids, keep, n_used, n_expert);
    EXPECT_LT(plan.pair_of_row.size(), ids.size());
    // every pair dropped: no rows, every pair -1
    const std::vector<float> none(ids.size(), 0.0f);
    const expert_plan empty = build_ok(ids, none, n_used, n_expert);
    EXPECT_TRUE(empty.pair_of_row.empty());
    EXPECT_EQ(empty.n_active, 0);
}

TEST(ExpertPlan, IdOutOfRangeIsAnErrorNamingThePair) {
    const int64_t n_used = 2, n_tokens = 10, n_expert = 8;
    for (int32_t bad : { -1, 8, 1 << 30 }) {
        std::vector<int32_t> ids((size_t) (n_used * n_tokens), 3);
        ids[2 * 7 + 1] = bad;   // slot 1 of token 7
        expert_plan plan;
        std::string error;
        EXPECT_FALSE(expert_plan_build(ids.data(), nullptr, n_used, n_tokens, n_expert, plan, &error)) << bad;
        EXPECT_NE(error.find("expert id " + std::to_string(bad)), std::string::npos) << error;
        EXPECT_NE(error.find("slot 1, token 7"), std::string::npos) << error;
        // a message needs no buffer
        EXPECT_FALSE(expert_plan_build(ids.data(), nullptr, n_used, n_tokens, n_expert, plan, nullptr));
    }
    // a bad shape is refused too
    const int32_t one = 0;
    expert_plan plan;
    std::string error;
    EXPECT_FALSE(expert_plan_build(&one, nullptr, 1, 1, 0, plan, &error));
    EXPECT_NE(error.find("bad shape"), std::string::npos) << error;
}

TEST(ExpertPlan, RebuildingReplacesTheOldPlan) {
    expert_plan plan;
    const std::vector<int32_t> first(24, 2), second = { 0, 1, 1, 0, 3, 3, 0, 2 };
    ASSERT_TRUE(expert_plan_build(first.data(), nullptr, 3, 8, 4, plan, nullptr));
    ASSERT_TRUE(expert_plan_build(second.data(), nullptr, 2, 4, 5, plan, nullptr));
    expect_plan_of(second, {}, 2, 5, plan);
}

TEST(ExpertPlan, BatchedFromEightTokensWhenExpertsAverageAPair) {
    EXPECT_FALSE(expert_products_batched(1, 8, 128));     // token generation
    EXPECT_FALSE(expert_products_batched(7, 8, 8));       // below 8 tokens
    EXPECT_FALSE(expert_products_batched(15, 8, 128));    // 120 pairs over 128 experts
    EXPECT_TRUE(expert_products_batched(16, 8, 128));     // Qwen3-30B-A3B from 16 tokens
    EXPECT_FALSE(expert_products_batched(31, 8, 256));
    EXPECT_TRUE(expert_products_batched(32, 8, 256));     // DeepSeek-V3 from 32
    EXPECT_TRUE(expert_products_batched(8, 2, 16));
    EXPECT_TRUE(expert_products_batched(512, 8, 128));
    EXPECT_FALSE(expert_products_batched(1 << 20, 1 << 12, 8));   // pairs beyond int32
    EXPECT_FALSE(expert_products_batched(64, 0, 8));
}
