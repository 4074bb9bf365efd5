// The load log's memory report (issue 15: "the log lists what went where and how many MiB each"):
// once a context exists, per place (the host CPU, then each device the model uses) what it holds
// of the model and the MiB of weights, KV cache, recurrent state and compute buffer.
#pragma once

#include "llama-model-placement.h"

#include <vector>

struct llama_context;

struct llama_memory_row : llama_place_summary {
    size_t kv = 0;        // KV cache (sliding-window cache included)
    size_t state = 0;     // recurrent state and its checkpoints
    size_t compute = 0;   // the scheduler's buffer for this place's backend
    size_t total() const { return weights + kv + state + compute; }
};

// The host CPU first, then the model's devices in order.
std::vector<llama_memory_row> llama_memory_report(const llama_context & ctx);
// The report as a table in the log, one line per place that holds anything, then the totals.
void llama_log_memory_report(const llama_context & ctx);
