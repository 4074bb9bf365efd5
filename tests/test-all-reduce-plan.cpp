// The decision "NCCL or peer copies" of the all-reduce (ggml/src/cuda/all-reduce-plan.h), checked
// without a GPU: distinct GPUs take NCCL only in a build with it; virtual devices over one GPU, a
// CPU participant, an unknown GPU or a single participant take the copies, each with its reason.
#include "cuda/all-reduce-plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

all_reduce_participant gpu(int ordinal) { return { true, ordinal }; }
all_reduce_participant cpu() { return { false, -1 }; }

void expect_copies(const std::vector<all_reduce_participant> & parts, bool nccl_built, const char * why) {
    const all_reduce_choice c = choose_all_reduce(parts, nccl_built);
    EXPECT_EQ(c.method, all_reduce_method::copies) << c.reason;
    EXPECT_NE(c.reason.find(why), std::string::npos) << c.reason;
}

} // namespace

TEST(AllReducePlan, DistinctGpusTakeNccl) {
    for (int n = 2; n <= 8; ++n) {
        std::vector<all_reduce_participant> parts;
        for (int i = 0; i < n; ++i) parts.push_back(gpu(n - 1 - i));   // any order of ranks
        EXPECT_EQ(choose_all_reduce(parts, true).method, all_reduce_method::nccl) << n;
    }
    // CUDA_VISIBLE_DEVICES may leave gaps in the runtime's ordinals as Kiln sees them
    EXPECT_EQ(choose_all_reduce({ gpu(0), gpu(3), gpu(7) }, true).method, all_reduce_method::nccl);
}

TEST(AllReducePlan, WithoutNcclBuiltTakesCopies) {
    expect_copies({ gpu(0), gpu(1) }, false, "no NCCL");
    expect_copies({ gpu(0), gpu(1), gpu(2), gpu(3) }, false, "no NCCL");
}

TEST(AllReducePlan, VirtualDevicesOverOneGpuTakeCopies) {
    expect_copies({ gpu(0), gpu(0) }, true, "same GPU");
    expect_copies({ gpu(0), gpu(0), gpu(0) }, true, "participants 0 and 1");
    // a repeat anywhere in the set, not only next to its twin
    expect_copies({ gpu(2), gpu(1), gpu(0), gpu(2) }, true, "participants 0 and 3");
}

TEST(AllReducePlan, MixedCpuAndCudaTakesCopies) {
    expect_copies({ gpu(0), cpu() }, true, "participant 1 is not a CUDA device");
    expect_copies({ cpu(), gpu(0), gpu(1) }, true, "participant 0 is not a CUDA device");
    expect_copies({ cpu(), cpu() }, true, "not a CUDA device");
}

TEST(AllReducePlan, UnknownGpuOrSingleParticipantTakesCopies) {
    expect_copies({ gpu(0), gpu(-1) }, true, "participant 1 has no known GPU");
    expect_copies({ gpu(0) }, true, "fewer than two");
    expect_copies({}, true, "fewer than two");
}
