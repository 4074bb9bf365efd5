// A small stack of "layers" for scheduler tests, with each layer's weights in the buffer type the
// test names: per layer x += W * (rms_norm(x) * g), then a head. Run through a scheduler over
// any backends, it shows where ops ran, how many splits and copies the scheduler made, and
// gives the output to compare with the same stack on the host CPU alone.
#pragma once

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "testing.h"

#include <functional>
#include <map>
#include <vector>

namespace kiln_test {

class sched_chain {
public:
    struct result {
        std::vector<float> out;
        int n_splits = 0, n_copies = 0;
    };
    // called after the compute with the scheduler, the layers' matmul nodes and the head's
    using inspect_fn = std::function<void(ggml_backend_sched_t, const std::vector<ggml_tensor *> & matmuls, ggml_tensor * head)>;

    sched_chain(int n_embd, const std::vector<ggml_backend_buffer_type_t> & layer_buft, ggml_backend_buffer_type_t head_buft,
                int n_out = 11)
        : n_embd_(n_embd), n_layer_((int) layer_buft.size()) {
        for (int l = 0; l < n_layer_; ++l) {
            w_.push_back(ggml_new_tensor_2d(ctx_of(layer_buft[l]), GGML_TYPE_F32, n_embd, n_embd));
            g_.push_back(ggml_new_tensor_1d(ctx_of(layer_buft[l]), GGML_TYPE_F32, n_embd));
        }
        head_ = ggml_new_tensor_2d(ctx_of(head_buft), GGML_TYPE_F32, n_embd, n_out);
        for (auto & kv : ctxs_) {
            ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors_from_buft(kv.second, kv.first);
            ok_ = ok_ && b != nullptr;
            if (!b) continue;
            ggml_backend_buffer_set_usage(b, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
            bufs_.push_back(b);
        }
        if (!ok_) return;
        uint32_t seed = 1;
        std::vector<ggml_tensor *> all = w_;
        all.insert(all.end(), g_.begin(), g_.end());
        all.push_back(head_);
        for (ggml_tensor * t : all) {
            const auto v = random_floats(ggml_nelements(t), seed++, -0.5f, 0.5f);
            ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        }
    }
    ~sched_chain() {
        for (auto * b : bufs_) ggml_backend_buffer_free(b);
        for (auto & kv : ctxs_) ggml_free(kv.second);
    }
    sched_chain(const sched_chain &) = delete;
    sched_chain & operator=(const sched_chain &) = delete;

    bool ok() const { return ok_; }   // every weight buffer was allocated

    using setup_fn = std::function<void(ggml_backend_sched_t)>;   // called on the new scheduler

    // backends in the scheduler's priority order, the host CPU last
    result run(std::vector<ggml_backend_t> backends, int n_tokens, const inspect_fn & inspect = nullptr,
               const setup_fn & setup = nullptr) const {
        result r;
        std::vector<char> mem(ggml_tensor_overhead() * (8 * n_layer_ + 16) + ggml_graph_overhead());
        ggml_context * ctx = ggml_init({ mem.size(), mem.data(), true });
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_embd_, n_tokens);
        ggml_set_input(x);
        ggml_tensor * cur = x;
        std::vector<ggml_tensor *> matmuls;
        for (int l = 0; l < n_layer_; ++l) {
            ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, cur, 1e-5f), g_[l]);
            matmuls.push_back(ggml_mul_mat(ctx, w_[l], h));
            cur = ggml_add(ctx, cur, matmuls.back());
        }
        ggml_tensor * out = ggml_mul_mat(ctx, head_, ggml_rms_norm(ctx, cur, 1e-5f));
        ggml_set_output(out);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        ggml_backend_sched_t s = ggml_backend_sched_new(backends.data(), (int) backends.size(), 256);
        if (setup) setup(s);
        if (ggml_backend_sched_alloc_graph(s, gf)) {
            const auto xin = random_floats((size_t) n_embd_ * n_tokens, 99);
            ggml_backend_tensor_set(x, xin.data(), 0, ggml_nbytes(x));
            if (ggml_backend_sched_graph_compute(s, gf) == GGML_STATUS_SUCCESS) {
                r.out.resize(ggml_nelements(out));
                ggml_backend_tensor_get(out, r.out.data(), 0, ggml_nbytes(out));
            }
            r.n_splits = ggml_backend_sched_get_n_splits(s);
            r.n_copies = ggml_backend_sched_get_n_copies(s);
            if (inspect) inspect(s, matmuls, out);
        }
        ggml_backend_sched_free(s);
        ggml_free(ctx);
        return r;
    }

private:
    ggml_context * ctx_of(ggml_backend_buffer_type_t buft) {
        ggml_context *& c = ctxs_[buft];
        if (!c) c = ggml_init({ ggml_tensor_overhead() * (2 * 64 + 4), nullptr, true });
        return c;
    }

    int n_embd_, n_layer_;
    bool ok_ = true;
    std::map<ggml_backend_buffer_type_t, ggml_context *> ctxs_;
    std::vector<ggml_backend_buffer_t> bufs_;
    std::vector<ggml_tensor *> w_, g_;
    ggml_tensor * head_ = nullptr;
};

} // namespace kiln_test
