// Which all-reduce a set of partials takes (issue 16): NCCL when this build has it and every
// participant is a distinct physical GPU; the peer copies and sums of src/llama-all-reduce.cpp
// otherwise. Plain C++ with no CUDA types, so tests/test-all-reduce-plan.cpp checks the decision
// in the CPU-only build.
//
// NCCL gives each rank its own GPU: virtual devices over one GPU (KILN_VIRTUAL_CUDA_DEVICES) would
// be two ranks on one device, which ncclCommInitAll refuses; a CPU participant has no NCCL rank.
#pragma once

#include <string>
#include <vector>

struct all_reduce_participant {
    bool cuda = false;   // a CUDA device (false: a CPU device, or another backend)
    int ordinal = -1;    // the runtime's device ordinal (physical GPU); -1: unknown
};

enum class all_reduce_method { copies, nccl };

struct all_reduce_choice {
    all_reduce_method method = all_reduce_method::copies;
    std::string reason;   // why (for the log line)
};

inline all_reduce_choice choose_all_reduce(const std::vector<all_reduce_participant> & parts, bool nccl_built) {
    auto copies = [](std::string why) { return all_reduce_choice{ all_reduce_method::copies, std::move(why) }; };
    if (parts.size() < 2) return copies("fewer than two participants");
    if (!nccl_built) return copies("this build has no NCCL (configure with -DKILN_NCCL=ON)");
    for (size_t i = 0; i < parts.size(); ++i) {
        if (!parts[i].cuda) return copies("participant " + std::to_string(i) + " is not a CUDA device");
        if (parts[i].ordinal < 0) return copies("participant " + std::to_string(i) + " has no known GPU");
        for (size_t j = 0; j < i; ++j) {
            if (parts[j].ordinal == parts[i].ordinal) {
                return copies("participants " + std::to_string(j) + " and " + std::to_string(i) + " are the same GPU (" +
                              std::to_string(parts[i].ordinal) + "): virtual devices");
            }
        }
    }
    return { all_reduce_method::nccl, "distinct GPUs" };
}
