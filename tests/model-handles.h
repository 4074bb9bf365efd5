// Owning handles for libllama models and contexts in tests, loading a model from
// ../shared/models by file name, decoding a run of tokens, comparing logits.
#pragma once

#include "llama.h"
#include "testing.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace kiln_test {

struct model_deleter {
    void operator()(llama_model * m) const { llama_model_free(m); }
};
struct context_deleter {
    void operator()(llama_context * c) const { llama_free(c); }
};
using model_ptr = std::unique_ptr<llama_model, model_deleter>;
using context_ptr = std::unique_ptr<llama_context, context_deleter>;

// KILN_TEST_SPLIT_MODE=layer|graph and KILN_TEST_TENSOR_SPLIT=a,b,... (with
// KILN_VIRTUAL_CPU_DEVICES) run a suite's models split across devices: tests/CMakeLists.txt runs
// test-decode's consistency checks that way.
inline model_ptr load_shared_model(const std::string & name) {
    llama_model_params mp = llama_model_default_params();
    const char * mode = std::getenv("KILN_TEST_SPLIT_MODE");
    if (mode && std::string(mode) == "graph") mp.split_mode = LLAMA_SPLIT_MODE_GRAPH;
    static std::vector<float> shares;
    if (const char * ts = std::getenv("KILN_TEST_TENSOR_SPLIT")) {
        shares.assign(llama_max_devices(), 0.0f);
        char * end = nullptr;
        for (size_t i = 0; i < shares.size() && *ts; ++i, ts = *end ? end + 1 : end) shares[i] = std::strtof(ts, &end);
        mp.tensor_split = shares.data();
    }
    return model_ptr(llama_model_load_from_file(shared_path("models/" + name).c_str(), mp));
}

// A context of n_ctx cells on n_threads threads (the other parameters at their defaults).
inline context_ptr small_context(llama_model * model, uint32_t n_ctx, int n_threads = 2) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = cp.n_threads_batch = n_threads;
    return context_ptr(llama_init_from_model(model, cp));
}

// Decode toks[start, start + n) as sequence seq at positions pos0 + i, logits for every token;
// returns llama_decode's code.
inline int decode_tokens(llama_context * ctx, const std::vector<llama_token> & toks, int start, int n, int pos0,
                         llama_seq_id seq = 0) {
    llama_batch b = llama_batch_init(n, 0, 1);
    b.n_tokens = n;
    for (int i = 0; i < n; ++i) {
        b.token[i] = toks[start + i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = 1;
    }
    const int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

// max |a - b| / max |b| over n values
inline double logits_rel_diff(const float * a, const float * b, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; ++i) {
        num = std::max(num, (double) std::fabs(a[i] - b[i]));
        den = std::max(den, (double) std::fabs(b[i]));
    }
    return num / std::max(den, 1e-12);
}

} // namespace kiln_test
