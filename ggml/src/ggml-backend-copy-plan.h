// The scheduler's copy plan, as plain functions the tests check without a GPU:
//  - which 2D blocks a (possibly strided) view's bytes form, so that a backend copies a view in
//    a few cudaMemcpy2DAsync calls instead of one blocking copy per row;
//  - when a copy queued on a backend's copy stream must wait for the work already queued on its
//    compute stream: when the planner gave the copy memory that a split still in flight reads
//    or writes (gallocr reuses memory as soon as its last reader is *planned*, not run).
// Internal to the tensor library (ggml-backend-sched.cpp); header-only so tests include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ggml_copy_plan {

// height rows of width bytes, pitch bytes apart, from offset bytes into the source view; the
// destination is dense (block after block).
struct block {
    size_t offset, pitch, width, height;
};

// The blocks of a view with ne[4] elements and byte strides nb[4], whose elements (or quant
// blocks of blck elements) take ts bytes each. Dimensions whose rows follow each other are
// merged, so a contiguous view is one block and a row-strided matrix (a column slice, a
// permuted head dimension) is one block of ne[1] rows; only dimensions that neither merge nor
// form the block's rows are enumerated. Returns false for a shape it cannot describe (ne[0] not a
// whole number of blocks, negative sizes).
inline bool strided_blocks(const int64_t ne[4], const size_t nb[4], size_t ts, int64_t blck, std::vector<block> & out) {
    out.clear();
    if (ts == 0 || blck <= 0 || ne[0] % blck != 0) return false;
    for (int d = 0; d < 4; ++d) {
        if (ne[d] < 0) return false;
        if (ne[d] == 0) return true;   // nothing to copy
    }
    struct dim { int64_t n; size_t s; };
    dim dims[4];
    int nd = 0;
    const int64_t n0 = ne[0] / blck;
    if (n0 > 1) dims[nd++] = { n0, nb[0] };
    for (int d = 1; d < 4; ++d) {
        if (ne[d] > 1) dims[nd++] = { ne[d], nb[d] };
    }
    int k = 0;
    size_t width = ts;
    while (k < nd && dims[k].s == width) width *= (size_t) dims[k++].n;   // contiguous so far
    size_t height = 1, pitch = width;
    if (k < nd && dims[k].s >= width) {   // rows (a pitch below the width would overlap them)
        height = (size_t) dims[k].n;
        pitch = dims[k++].s;
        while (k < nd && dims[k].s == pitch * height) height *= (size_t) dims[k++].n;
    }
    // the dimensions left, outermost last, enumerated
    int64_t idx[4] = { 0, 0, 0, 0 };
    for (;;) {
        size_t offset = 0;
        for (int d = k; d < nd; ++d) offset += (size_t) idx[d] * dims[d].s;
        out.push_back({ offset, pitch, width, height });
        int d = k;
        while (d < nd && ++idx[d] == dims[d].n) idx[d++] = 0;
        if (d == nd) break;
    }
    return true;
}

// Byte ranges [begin, end) of one backend's memory.
struct range {
    uintptr_t begin, end;
};

inline bool overlaps(const range & a, const range & b) { return a.begin < b.end && b.begin < a.end; }

// What each backend's compute stream may still be touching. The scheduler replays its order of
// work: begin_split() and enqueued() as a split is queued (its nodes' and inputs' memory),
// synchronized() when the host waited for the backend; copy_must_wait() before a copy into the
// backend is queued on its copy stream. It answers -1 when the copy's destination overlaps no
// queued split's memory, else k >= 0: the copy must wait for the compute queued up to the last
// overlapping split, which k splits queued after it need not finish (0: all queued so far). The
// splits waited for are then no longer in flight for later copies.
class hazards {
public:
    explicit hazards(size_t n_backends = 0) { reset(n_backends); }
    void reset(size_t n_backends) {
        busy_.resize(n_backends);
        n_splits_.assign(n_backends, 0);
        for (auto & b : busy_) b.clear();
    }
    void begin_split(size_t backend) { ++n_splits_[backend]; }
    void enqueued(size_t backend, const range & r) {
        if (r.end > r.begin) busy_[backend].push_back({ n_splits_[backend] - 1, r });
    }
    void synchronized(size_t backend) { busy_[backend].clear(); }
    int copy_must_wait(size_t backend, const range & dst) {
        int64_t last = -1;
        for (const auto & [split, r] : busy_[backend]) {
            if (overlaps(r, dst) && split > last) last = split;
        }
        if (last < 0) return -1;
        auto & busy = busy_[backend];
        size_t kept = 0;
        for (const auto & e : busy) {
            if (e.first > last) busy[kept++] = e;
        }
        busy.resize(kept);
        return (int) (n_splits_[backend] - 1 - last);
    }
    size_t in_flight(size_t backend) const { return busy_[backend].size(); }

private:
    std::vector<std::vector<std::pair<int64_t, range>>> busy_;   // (split index, memory) per backend
    std::vector<int64_t> n_splits_;                              // splits queued per backend
};

} // namespace ggml_copy_plan
