// Watching the expert-routed products of a decode through cb_eval: how many experts each token
// was routed to, and whether those were every expert of the product's weights exactly once (the
// warm-up's routing, llama_set_warmup).
#pragma once

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <cstdint>
#include <vector>

namespace kiln_test {

struct routed_experts {
    std::vector<int64_t> n_used;          // per routed product: ids per token
    std::vector<bool> all_experts_once;   // its ids are a permutation of 0..n_expert-1 for every token

    // cb_eval, with a routed_experts as its user data
    static bool observe(ggml_tensor * t, bool ask, void * user) {
        const bool routed = t->op == GGML_OP_MUL_MAT_ID || t->op == GGML_OP_MOE_FUSED_UP_GATE;
        if (ask) return routed;
        auto * r = (routed_experts *) user;
        const int64_t n_expert = t->src[0]->ne[2];   // of this product's weights (a device's part of them)
        const ggml_tensor * ids = t->src[t->op == GGML_OP_MOE_FUSED_UP_GATE ? 3 : 2];
        std::vector<int32_t> v((size_t) ggml_nelements(ids));
        ggml_backend_tensor_get(ids, v.data(), 0, v.size() * sizeof(int32_t));
        bool once = ids->ne[0] == n_expert;
        for (int64_t tok = 0; once && tok < ids->ne[1]; ++tok) {
            std::vector<int> seen((size_t) n_expert, 0);
            for (int64_t i = 0; i < ids->ne[0]; ++i) {
                const int32_t e = v[(size_t) (tok * ids->ne[0] + i)];
                once = once && e >= 0 && e < n_expert && seen[(size_t) e]++ == 0;
            }
        }
        r->n_used.push_back(ids->ne[0]);
        r->all_experts_once.push_back(once);
        return true;
    }
};

} // namespace kiln_test
