// The scheduler's copy plan without a GPU (ggml-backend-copy-plan.h), and its asynchronous path
// run by fake backends that queue work as a GPU does:
//  - strided_blocks: the 2D blocks a view's bytes form, checked byte by byte against the
//    element-by-element walk of the view, on awkward shapes (slices, permutations, quant blocks,
//    broadcast strides, empty views);
//  - hazards: a copy waits for a backend's queued compute exactly when its memory overlaps;
//  - the scheduler over two virtual CPU devices made "asynchronous" (KILN_VIRTUAL_CPU_DEVICES=2):
//    their splits are only queued, run when the host waits, and copies run as soon as the
//    backends' queues allow (before the destination's queued compute unless the plan says to
//    wait), so a copy that overwrote memory a queued split still reads, or read a source not
//    yet computed, would change the result. Results equal the host CPU's alone.
#include "ggml-alloc.h"
#include "ggml-backend-copy-plan.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "sched-cross.h"
#include "testing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

const int k_env = (setenv("KILN_VIRTUAL_CPU_DEVICES", "2", 1), 0);

using ggml_copy_plan::block;

// The byte offsets a view covers, in the order of a dense copy: element (or quant block) by
// element, i0 fastest.
std::vector<size_t> walk(const int64_t ne[4], const size_t nb[4], size_t ts, int64_t blck) {
    std::vector<size_t> out;
    for (int64_t i3 = 0; i3 < ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < ne[0] / blck; ++i0)
                    for (size_t b = 0; b < ts; ++b) out.push_back(i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3] + b);
    return out;
}

std::vector<size_t> expand(const std::vector<block> & blocks) {
    std::vector<size_t> out;
    for (const block & b : blocks) {
        if (b.height > 1) {
            EXPECT_GE(b.pitch, b.width);
        }
        for (size_t r = 0; r < b.height; ++r) {
            for (size_t c = 0; c < b.width; ++c) out.push_back(b.offset + r * b.pitch + c);
        }
    }
    return out;
}

struct shape_case {
    const char * what;
    int64_t ne[4];
    size_t nb[4];
    size_t ts;
    int64_t blck;
    size_t n_blocks;   // expected
};

TEST(CopyPlan, BlocksCoverTheViewInOrder) {
    // f32 unless said: strides in bytes
    const shape_case cases[] = {
        { "contiguous 3d", { 7, 5, 3, 1 }, { 4, 28, 140, 420 }, 4, 1, 1 },
        { "column slice of a matrix", { 5, 9, 1, 1 }, { 4, 44, 396, 396 }, 4, 1, 1 },
        { "slice of a 3d tensor, planes follow rows", { 5, 9, 4, 1 }, { 4, 44, 396, 1584 }, 4, 1, 1 },
        { "slice whose planes do not follow", { 5, 9, 4, 2 }, { 4, 44, 500, 2000 }, 4, 1, 8 },
        { "whole rows of a plane slice (rows merge, planes strided)", { 11, 3, 6, 1 }, { 4, 44, 264, 1584 }, 4, 1, 1 },
        { "planes strided, then a gap between their groups", { 11, 3, 6, 2 }, { 4, 44, 264, 3168 }, 4, 1, 2 },
        { "planes strided, groups following", { 11, 3, 6, 2 }, { 4, 44, 264, 1584 }, 4, 1, 1 },
        { "transpose", { 6, 4, 1, 1 }, { 16, 4, 96, 96 }, 4, 1, 4 },
        { "permuted heads (k cache view)", { 8, 3, 5, 2 }, { 2, 160, 16, 480 }, 2, 1, 10 },
        { "q4_0 rows with a pitch", { 64, 7, 2, 1 }, { 18, 72, 504, 1008 }, 18, 32, 1 },
        { "q4_0 plane stride apart", { 64, 7, 2, 1 }, { 18, 72, 600, 1200 }, 18, 32, 2 },
        { "one element", { 1, 1, 1, 1 }, { 4, 4, 4, 4 }, 4, 1, 1 },
        { "broadcast rows (stride 0)", { 4, 3, 1, 1 }, { 4, 0, 16, 16 }, 4, 1, 3 },
        { "ones in the middle", { 3, 1, 4, 1 }, { 4, 100, 12, 48 }, 4, 1, 1 },
    };
    for (const shape_case & c : cases) {
        SCOPED_TRACE(c.what);
        std::vector<block> blocks;
        ASSERT_TRUE(ggml_copy_plan::strided_blocks(c.ne, c.nb, c.ts, c.blck, blocks));
        EXPECT_EQ(blocks.size(), c.n_blocks);
        EXPECT_EQ(expand(blocks), walk(c.ne, c.nb, c.ts, c.blck));
    }
}

TEST(CopyPlan, EmptyAndMalformedViews) {
    std::vector<block> blocks = { { 1, 1, 1, 1 } };
    const int64_t empty[4] = { 4, 0, 3, 1 };
    const size_t nb[4] = { 4, 16, 16, 48 };
    EXPECT_TRUE(ggml_copy_plan::strided_blocks(empty, nb, 4, 1, blocks));
    EXPECT_TRUE(blocks.empty());
    const int64_t partial[4] = { 40, 2, 1, 1 };   // not a whole number of 32-value blocks
    EXPECT_FALSE(ggml_copy_plan::strided_blocks(partial, nb, 18, 32, blocks));
    const int64_t negative[4] = { 4, -1, 1, 1 };
    EXPECT_FALSE(ggml_copy_plan::strided_blocks(negative, nb, 4, 1, blocks));
    EXPECT_FALSE(ggml_copy_plan::strided_blocks(empty, nb, 0, 1, blocks));
}

TEST(CopyPlan, CopiesWaitOnlyForTheLastOverlappingSplitInFlight) {
    ggml_copy_plan::hazards h(2);
    EXPECT_EQ(h.copy_must_wait(0, { 0, 100 }), -1);   // nothing queued
    h.begin_split(0);                                  // split 0 of backend 0
    h.enqueued(0, { 100, 200 });
    h.begin_split(0);                                  // split 1
    h.enqueued(0, { 300, 400 });
    h.enqueued(0, { 500, 600 });
    h.begin_split(1);
    h.enqueued(1, { 0, 1000 });                        // another backend's memory
    EXPECT_EQ(h.copy_must_wait(0, { 0, 100 }), -1);    // touches 100 without overlapping
    EXPECT_EQ(h.copy_must_wait(0, { 200, 300 }), -1);
    EXPECT_EQ(h.in_flight(0), 3u);
    EXPECT_EQ(h.copy_must_wait(0, { 150, 160 }), 1);   // split 0: the one after it may still run
    EXPECT_EQ(h.in_flight(0), 2u);                     // split 0 done for later copies
    EXPECT_EQ(h.copy_must_wait(0, { 150, 160 }), -1);
    h.begin_split(0);                                  // split 2
    h.enqueued(0, { 100, 200 });
    EXPECT_EQ(h.copy_must_wait(0, { 399, 520 }), 1);   // split 1's two ranges: wait for split 1
    EXPECT_EQ(h.in_flight(0), 1u);
    h.begin_split(0);                                  // split 3
    h.enqueued(0, { 700, 800 });
    EXPECT_EQ(h.copy_must_wait(0, { 150, 750 }), 0);   // splits 2 and 3: wait for 3, the last queued
    EXPECT_EQ(h.in_flight(0), 0u);
    EXPECT_EQ(h.in_flight(1), 1u);
    h.synchronized(1);
    EXPECT_EQ(h.copy_must_wait(1, { 0, 1000 }), -1);
    h.begin_split(1);
    h.enqueued(1, { 5, 5 });                           // empty: nothing in flight
    EXPECT_EQ(h.in_flight(1), 0u);
    h.reset(3);
    EXPECT_EQ(h.in_flight(2), 0u);
}

// ---------------------------------------------------------------------------------------------
// Fake asynchronous backends: a virtual CPU device whose graph_enqueue only queues, whose
// synchronize runs the queue, and whose copy_async runs at once after the waits it was told
// about (the source backend's queue; its own but the last wait_back graphs), i.e. as early as a
// GPU's copy stream could.

struct fake_state {
    ggml_backend_t inner;
    std::vector<ggml_cgraph *> queue;
    int copies = 0, blocks = 0, waits_own = 0, strided = 0;
    std::vector<int> wait_back;   // per copy queued on this backend
    bool failed = false;
};

std::map<ggml_backend_t, fake_state> & fakes() {
    static std::map<ggml_backend_t, fake_state> m;
    return m;
}

void fake_run_queue(ggml_backend_t b) {
    fake_state & f = fakes().at(b);
    for (ggml_cgraph * g : f.queue) f.failed |= f.inner->iface.graph_compute(f.inner, g) != GGML_STATUS_SUCCESS;
    f.queue.clear();
}

ggml_status fake_enqueue(ggml_backend_t b, ggml_cgraph * g) {
    fakes().at(b).queue.push_back(g);
    return GGML_STATUS_SUCCESS;
}

ggml_status fake_compute(ggml_backend_t b, ggml_cgraph * g) {
    fake_run_queue(b);
    fake_state & f = fakes().at(b);
    return f.inner->iface.graph_compute(f.inner, g);
}

void fake_synchronize(ggml_backend_t b) { fake_run_queue(b); }

bool fake_copy(ggml_backend_t b, ggml_backend_t src_b, const ggml_tensor * src, ggml_tensor * dst, const block * blocks,
               size_t n, int wait_back) {
    if (src_b) fake_run_queue(src_b);
    fake_state & f = fakes().at(b);
    f.wait_back.push_back(wait_back);
    if (wait_back >= 0) {   // all but the last wait_back queued graphs
        EXPECT_LE((size_t) wait_back, f.queue.size());
        const size_t run = f.queue.size() - std::min(f.queue.size(), (size_t) wait_back);
        for (size_t i = 0; i < run; ++i) f.failed |= f.inner->iface.graph_compute(f.inner, f.queue[i]) != GGML_STATUS_SUCCESS;
        f.queue.erase(f.queue.begin(), f.queue.begin() + run);
        ++f.waits_own;
    }
    char * out = (char *) dst->data;
    for (size_t i = 0; i < n; ++i) {
        for (size_t r = 0; r < blocks[i].height; ++r, out += blocks[i].width) {
            std::memcpy(out, (const char *) src->data + blocks[i].offset + r * blocks[i].pitch, blocks[i].width);
        }
    }
    EXPECT_EQ(out, (char *) dst->data + ggml_nbytes(dst));
    ++f.copies;
    f.blocks += (int) n;
    f.strided += !ggml_is_contiguous(src);
    return true;
}

ggml_backend_t fake_new(ggml_backend_t inner) {
    auto * b = new ggml_backend{ inner->iface, inner->context };
    b->iface.graph_compute = fake_compute;
    b->iface.synchronize = fake_synchronize;
    b->iface.graph_enqueue = fake_enqueue;
    b->iface.copy_async = fake_copy;
    fake_state st;
    st.inner = inner;
    fakes()[b] = st;
    return b;
}

void fake_free(ggml_backend_t b) {
    EXPECT_TRUE(fakes().at(b).queue.empty()) << "work left queued after the scheduler returned";
    ggml_backend_free(fakes().at(b).inner);
    fakes().erase(b);
    delete b;
}

TEST(AsyncSched, StridedCrossingsMatchTheHostCpu) {
    ASSERT_EQ(k_env, 0);
    ASSERT_GE(ggml_backend_dev_count(), 2u);
    ggml_backend_dev_t d0 = ggml_backend_dev_get(0), d1 = ggml_backend_dev_get(1);
    ggml_backend_t a = fake_new(ggml_backend_dev_init(d0)), b = fake_new(ggml_backend_dev_init(d1));
    ggml_backend_t cpu = ggml_backend_cpu_init();
    const kiln_test::cross_graph g(ggml_backend_dev_buffer_type(d0), ggml_backend_dev_buffer_type(d1), ggml_backend_cpu_buffer_type());
    int n_copies = 0;
    const auto split = g.run({ a, b, cpu }, &n_copies);
    const auto one = g.run({ cpu });
    ASSERT_FALSE(one.empty());
    ASSERT_EQ(split.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(split[i], one[i], 1e-5f * (1 + std::fabs(one[i])));
    // x lives on A (its first consumer's); the slice A -> B and z^T B -> A are copied, both
    // queued on a fake; the host CPU reads u^T where it is (the fakes' memory is host memory)
    EXPECT_EQ(n_copies, 2);
    const fake_state & fa = fakes().at(a), & fb = fakes().at(b);
    EXPECT_EQ(fa.copies + fb.copies, 2 * 2);
    EXPECT_EQ(fa.strided + fb.strided, 2 * 2);
    // the slice is one block of n_tok rows; the transpose one block per row of z
    EXPECT_EQ(fa.blocks + fb.blocks, 2 * (1 + g.n_mid));
    EXPECT_FALSE(fa.failed || fb.failed);
    fake_free(a);
    fake_free(b);
    ggml_backend_free(cpu);
}

// A's first split (t1 = W1 x, t2 = W2 t1) is still queued when the next A split's input copies
// are: the weight kept in host memory (its product offloaded to A) gets t1's memory, dead once
// t2 is planned. Copied before the queued split ran, it would be overwritten by t1 (or t1 read
// as the weight): the plan makes that copy wait. B's split in between reads nothing of A's.
// The graph ends on A: the result is there only if the scheduler waits for A at the end.
TEST(AsyncSched, CopyIntoMemoryOfAQueuedSplitWaitsForIt) {
    ggml_backend_dev_t d0 = ggml_backend_dev_get(0), d1 = ggml_backend_dev_get(1);
    ggml_backend_t a = fake_new(ggml_backend_dev_init(d0)), b = fake_new(ggml_backend_dev_init(d1));
    ggml_backend_t cpu = ggml_backend_cpu_init();
    kiln_test::cross_graph g(ggml_backend_dev_buffer_type(d0), ggml_backend_dev_buffer_type(d1), ggml_backend_cpu_buffer_type());
    const auto build = g.queued_split_graph(ggml_backend_dev_buffer_type(d0), ggml_backend_dev_buffer_type(d1),
                                            ggml_backend_cpu_buffer_type());
    int n_copies = 0;
    auto offload = [&](ggml_backend_sched_t s) { ggml_backend_sched_set_offload(s, a, 1); };
    const auto split = g.run_graph({ a, b, cpu }, &n_copies, offload, build);
    const auto one = g.run_graph({ cpu }, nullptr, nullptr, build);
    ASSERT_FALSE(one.empty());
    ASSERT_EQ(split.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(split[i], one[i], 1e-5f * (1 + std::fabs(one[i])));
    EXPECT_EQ(n_copies, 2);   // the host weight and v into A
    const fake_state & fa = fakes().at(a);
    EXPECT_EQ(fa.copies, 2 * 2);
    EXPECT_EQ(fa.waits_own, 2);   // the weight's copy, once per run
    EXPECT_FALSE(fa.failed || fakes().at(b).failed);
    fake_free(a);
    fake_free(b);
    ggml_backend_free(cpu);
}

// The prompt offload: every layer's weight in host memory, its product moved to A. Each product
// starts a split of its own, and the weights a split copies are planned before the split ahead
// of it, so the copy of layer l+1's weight never waits for the split just queued (layer l's),
// only for older ones: it runs while layer l computes. Results equal the host CPU's.
TEST(AsyncSched, HostWeightCopiesOverlapTheSplitBefore) {
    ggml_backend_dev_t d0 = ggml_backend_dev_get(0), d1 = ggml_backend_dev_get(1);
    ggml_backend_t a = fake_new(ggml_backend_dev_init(d0));
    ggml_backend_t cpu = ggml_backend_cpu_init();
    kiln_test::cross_graph g(ggml_backend_dev_buffer_type(d0), ggml_backend_dev_buffer_type(d1), ggml_backend_cpu_buffer_type());
    const int n_layer = 5;
    std::vector<ggml_tensor *> w;
    for (int l = 0; l < n_layer; ++l) w.push_back(g.weight(ggml_backend_cpu_buffer_type(), g.n_embd, g.n_embd));
    auto build = [&](ggml_context * ctx, ggml_tensor * x, ggml_cgraph *) {
        ggml_tensor * cur = x;
        for (int l = 0; l < n_layer; ++l) cur = ggml_add(ctx, cur, ggml_mul_mat(ctx, w[l], ggml_rms_norm(ctx, cur, 1e-5f)));
        return cur;
    };
    int n_copies = 0, n_splits = 0;
    auto offload = [&](ggml_backend_sched_t s) { ggml_backend_sched_set_offload(s, a, 1); };
    const auto split = g.run_graph({ a, cpu }, &n_copies, offload, build, &n_splits);
    const auto one = g.run_graph({ cpu }, nullptr, nullptr, build);
    ASSERT_FALSE(one.empty());
    ASSERT_EQ(split.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(split[i], one[i], 1e-5f * (1 + std::fabs(one[i])));
    EXPECT_EQ(n_copies, n_layer);
    EXPECT_EQ(n_splits, 1 + n_layer);   // the first norm, then from each product on
    const fake_state & fa = fakes().at(a);
    ASSERT_EQ(fa.wait_back.size(), 2u * n_layer);
    std::string seq;
    for (int k : fa.wait_back) seq += std::to_string(k) + " ";
    SCOPED_TRACE("wait_back per copy: " + seq);
    for (int k : fa.wait_back) EXPECT_NE(k, 0) << "a copy waited for the split just queued";
    EXPECT_FALSE(fa.failed);
    fake_free(a);
    ggml_backend_free(cpu);
}

} // namespace
