// Small graphs for the scheduler's copy tests (test-sched-copy-plan with fake queueing backends,
// test-cuda-sched on GPUs), weights placed in the buffer types the test names:
//  - run(): x -> on A: y = W_a x -> on B: z = W_b (the first k rows of y, a strided view) -> on
//    A: u = W_c (z transposed, a permuted view) -> a head reading u transposed, in bh's memory;
//  - run_graph(): any graph the caller builds, its inputs (leaves flagged input) filled with
//    random values; both compute twice (the second run reuses the plan and memory) and return
//    the two outputs one after the other.
#pragma once

#include "ggml-backend.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace kiln_test {

struct cross_graph {
    std::vector<ggml_context *> wctx;   // one per weight: each in its own buffer type
    std::vector<ggml_backend_buffer_t> bufs;
    ggml_tensor *wa, *wb, *wc, *wh;
    int n_embd = 13, n_mid = 10, k = 7, n_tok = 5;

    ggml_tensor * weight(ggml_backend_buffer_type_t buft, int64_t ne0, int64_t ne1) {
        wctx.push_back(ggml_init({ ggml_tensor_overhead() * 2, nullptr, true }));
        ggml_tensor * t = ggml_new_tensor_2d(wctx.back(), GGML_TYPE_F32, ne0, ne1);
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(wctx.back(), buft);
        EXPECT_NE(buf, nullptr);
        ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        bufs.push_back(buf);
        const auto v = random_floats(ggml_nelements(t), 5 + (uint32_t) bufs.size());
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        return t;
    }

    cross_graph(ggml_backend_buffer_type_t ba, ggml_backend_buffer_type_t bb, ggml_backend_buffer_type_t bh) {
        wa = weight(ba, n_embd, n_mid);
        wb = weight(bb, k, n_mid);
        wc = weight(ba, n_tok, 6);
        wh = weight(bh, n_mid, 3);
    }
    ~cross_graph() {
        for (auto * b : bufs) ggml_backend_buffer_free(b);
        for (auto * c : wctx) ggml_free(c);
    }

    std::vector<float> run(std::vector<ggml_backend_t> backends, int * n_copies = nullptr) const {
        return run_graph(backends, n_copies, nullptr, [&](ggml_context * ctx, ggml_tensor * x, ggml_cgraph * gf) {
            ggml_tensor * y = ggml_mul_mat(ctx, wa, x);                                // [n_mid, n_tok]
            ggml_tensor * top = ggml_view_2d(ctx, y, k, n_tok, y->nb[1], 0);            // first k rows
            ggml_tensor * z = ggml_mul_mat(ctx, wb, top);                              // [n_mid, n_tok]
            ggml_tensor * u = ggml_mul_mat(ctx, wc, ggml_transpose(ctx, z));           // [6, n_mid]
            ggml_tensor * out = ggml_mul_mat(ctx, wh, ggml_transpose(ctx, u));        // [3, 6]
            ggml_build_forward_expand(gf, out);
            return out;
        });
    }

    // A's split t1 = W1 x, t2 = W2 t1; B's v = Wv x2 (its own input); then on A (with the
    // scheduler's offload set to A: the host weight's product is moved there) Wh t2 + v. With
    // n_embd 13 and n_tok 5, t1 is [12, 5] and Wh [6, 10]: the planner gives Wh's copy on A the
    // memory of t1, dead once t2 is planned, while A's first split may still be queued.
    using build_fn = std::function<ggml_tensor *(ggml_context *, ggml_tensor * x, ggml_cgraph *)>;
    build_fn queued_split_graph(ggml_backend_buffer_type_t ba, ggml_backend_buffer_type_t bb, ggml_backend_buffer_type_t bh) {
        ggml_tensor * w1 = weight(ba, n_embd, 12);
        ggml_tensor * w2 = weight(ba, 12, 6);
        ggml_tensor * wh2 = weight(bh, 6, 10);
        ggml_tensor * wv = weight(bb, 4, 10);
        const int nt = n_tok;
        return [=](ggml_context * ctx, ggml_tensor * x, ggml_cgraph * gf) {
            ggml_tensor * t2 = ggml_mul_mat(ctx, w2, ggml_mul_mat(ctx, w1, x));
            ggml_build_forward_expand(gf, t2);
            ggml_tensor * x2 = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, nt);
            ggml_set_input(x2);
            ggml_tensor * v = ggml_mul_mat(ctx, wv, x2);
            ggml_build_forward_expand(gf, v);
            return ggml_add(ctx, ggml_mul_mat(ctx, wh2, t2), v);
        };
    }

    std::vector<float> run_graph(std::vector<ggml_backend_t> backends, int * n_copies,
                                 const std::function<void(ggml_backend_sched_t)> & setup, const build_fn & build,
                                 int * n_splits = nullptr) const {
        std::vector<char> mem(ggml_tensor_overhead() * 32 + ggml_graph_overhead());
        ggml_context * ctx = ggml_init({ mem.size(), mem.data(), true });
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_embd, n_tok);
        ggml_set_input(x);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_tensor * out = build(ctx, x, gf);
        ggml_set_output(out);
        ggml_build_forward_expand(gf, out);
        std::vector<float> r;
        ggml_backend_sched_t s = ggml_backend_sched_new(backends.data(), (int) backends.size(), 64);
        if (setup) setup(s);
        if (ggml_backend_sched_alloc_graph(s, gf)) {
            for (int rep = 0; rep < 2; ++rep) {   // twice: the second run reuses the plan and memory
                for (int i = 0; i < ggml_graph_n_leafs(gf); ++i) {   // x and any other input
                    ggml_tensor * in = ggml_graph_leaf(gf, i);
                    if (!(in->flags & GGML_TENSOR_FLAG_INPUT)) continue;
                    const auto v = random_floats(ggml_nelements(in), 77 + 10 * rep + i);
                    ggml_backend_tensor_set(in, v.data(), 0, ggml_nbytes(in));
                }
                if (ggml_backend_sched_graph_compute(s, gf) != GGML_STATUS_SUCCESS) break;
                const size_t at = r.size();
                r.resize(at + ggml_nelements(out));
                ggml_backend_tensor_get(out, r.data() + at, 0, ggml_nbytes(out));
            }
            if (n_copies) *n_copies = ggml_backend_sched_get_n_copies(s);
            if (n_splits) *n_splits = ggml_backend_sched_get_n_splits(s);
        }
        ggml_backend_sched_free(s);
        ggml_free(ctx);
        return r;
    }
};

} // namespace kiln_test
