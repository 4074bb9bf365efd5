// The host half of the batched expert products (ops-experts.cu): which (slot, token) pairs each
// expert computes, in what order, and where each result row goes. Plain C++ with no CUDA types, so
// the CPU-only build compiles it and tests/test-expert-plan.cpp checks it without a GPU.
//
// A pair is (slot s, token t) of ids [n_used, n_tokens], numbered p = s + n_used * t as the ids
// lie. The plan is a counting sort of the kept pairs by expert: expert e's rows of the gathered
// matrices are [offsets[e], offsets[e + 1]), in increasing pair order (so results do not depend on
// timing), pair_of_row says which pair a gathered row holds (gather), and row_of_pair the inverse,
// -1 for a pair the keep mask drops (scatter writes a zero row for it and nothing reads its
// expert's weights on its behalf).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct expert_plan {
    std::vector<int32_t> offsets;       // n_expert + 1
    std::vector<int32_t> pair_of_row;   // kept pairs, grouped by expert
    std::vector<int32_t> row_of_pair;   // n_used * n_tokens; -1: dropped
    int64_t n_active = 0;               // experts with at least one row
};

// Batched expert products pay for decoding each chosen expert's weights to f16 once and a GEMM per
// expert; the per-pair kernel re-reads an expert's rows for every pair that chose it. The batched
// path is taken from 8 tokens on when the experts get at least one pair each on average (Qwen3-30B-A3B,
// 128 experts, 8 used: from 16 tokens; DeepSeek-V3, 256 and 8: from 32). Not measured yet (no GPU
// in the session that wrote it): the first GPU session should sweep it.
constexpr int64_t k_expert_batched_min_tokens = 8;

inline bool expert_products_batched(int64_t n_tokens, int64_t n_used, int64_t n_expert) {
    if (n_tokens < k_expert_batched_min_tokens || n_used < 1 || n_expert < 1) return false;
    // the plan's rows are int32 (and cuBLAS takes int sizes)
    if (n_used > INT32_MAX / n_tokens) return false;
    return n_tokens * n_used >= n_expert;
}

// ids: n_used * n_tokens expert numbers (slot fastest); keep: the same shape, 0 = pair dropped, or
// null (none dropped). Returns false with a message in *error for an expert number outside
// [0, n_expert) in a kept pair (the CPU asserts on one; a dropped pair's id is never read, as on the CPU).
inline bool expert_plan_build(const int32_t * ids, const float * keep, int64_t n_used, int64_t n_tokens, int64_t n_expert,
                              expert_plan & plan, std::string * error) {
    if (n_used < 0 || n_tokens < 0 || n_expert < 1 || (n_tokens > 0 && n_used > INT32_MAX / n_tokens) || n_expert >= INT32_MAX) {
        if (error) *error = "expert plan: bad shape (n_used " + std::to_string(n_used) + ", n_tokens " + std::to_string(n_tokens) +
                            ", n_expert " + std::to_string(n_expert) + ")";
        return false;
    }
    const int64_t n_pairs = n_used * n_tokens;
    plan.offsets.assign((size_t) n_expert + 1, 0);
    plan.row_of_pair.assign((size_t) n_pairs, -1);
    plan.pair_of_row.clear();
    plan.n_active = 0;
    // count per expert (into offsets[e + 1]), then prefix sums, then place in pair order
    for (int64_t p = 0; p < n_pairs; ++p) {
        if (keep && keep[p] == 0.0f) continue;
        const int32_t e = ids[p];
        if (e < 0 || e >= n_expert) {
            if (error) {
                *error = "expert plan: expert id " + std::to_string(e) + " of slot " + std::to_string(p % n_used) + ", token " +
                         std::to_string(p / n_used) + " is outside [0, " + std::to_string(n_expert) + ")";
            }
            return false;
        }
        ++plan.offsets[(size_t) e + 1];
    }
    for (int64_t e = 0; e < n_expert; ++e) {
        plan.n_active += plan.offsets[(size_t) e + 1] > 0;
        plan.offsets[(size_t) e + 1] += plan.offsets[(size_t) e];
    }
    plan.pair_of_row.resize((size_t) plan.offsets[(size_t) n_expert]);
    std::vector<int32_t> next(plan.offsets.begin(), plan.offsets.end() - 1);
    for (int64_t p = 0; p < n_pairs; ++p) {
        if (keep && keep[p] == 0.0f) continue;
        const int32_t row = next[(size_t) ids[p]]++;
        plan.pair_of_row[(size_t) row] = (int32_t) p;
        plan.row_of_pair[(size_t) p] = row;
    }
    return true;
}
