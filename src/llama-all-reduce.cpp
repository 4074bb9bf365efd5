#include "llama-all-reduce.h"

#include <algorithm>

namespace {

struct reducer {
    ggml_context * ctx;
    const llama_all_reduce_options & opt;
    std::vector<std::pair<ggml_tensor *, int>> & pinned;

    ggml_tensor * on(ggml_tensor * t, int device) {
        if (device >= 0) pinned.emplace_back(t, device);
        return t;
    }
    bool converts() const { return opt.wire_type != GGML_TYPE_F32; }
    // x as it leaves `device` for another: in the wire type (contiguous either way)
    ggml_tensor * send(ggml_tensor * x, int device) {
        return on(converts() ? ggml_cast(ctx, x, opt.wire_type) : ggml_cont(ctx, x), device);
    }
    // what arrived on `device`, back in f32
    ggml_tensor * receive(ggml_tensor * x, int device) { return converts() ? on(ggml_cast(ctx, x, GGML_TYPE_F32), device) : x; }

    ggml_tensor * gather(const std::vector<std::pair<ggml_tensor *, int>> & partials) {
        const int main = opt.main_device;
        ggml_tensor * sum = nullptr;
        for (const auto & [x, device] : partials) {
            // the main device's own partial crosses no link
            ggml_tensor * y = x;
            if (converts() && device != main) y = receive(send(x, device), main);
            sum = sum ? on(ggml_add(ctx, sum, y), main) : y;
        }
        return sum;
    }

    ggml_tensor * ring(const std::vector<std::pair<ggml_tensor *, int>> & partials) {
        const int64_t n = partials[0].first->ne[0], P = (int64_t) partials.size();
        const int main = opt.main_device;
        ggml_tensor * out = nullptr;
        for (int64_t c = 0; c < P; ++c) {
            // chunk c: rows [a, b) of every partial, summed around the ring, ending on part c
            const int64_t a = n * c / P, b = n * (c + 1) / P;
            auto rows = [&](int64_t part) {
                ggml_tensor * x = partials[(size_t) part].first;
                return ggml_view_2d(ctx, x, b - a, x->ne[1], x->nb[1], a * ggml_element_size(x));
            };
            int64_t part = (c + 1) % P;
            ggml_tensor * acc = nullptr;
            for (int64_t hop = 0; hop < P; ++hop, part = (part + 1) % P) {
                const int device = partials[(size_t) part].second;
                ggml_tensor * mine = rows(part);
                acc = acc ? on(ggml_add(ctx, receive(acc, device), mine), device) : mine;
                if (hop + 1 < P) acc = send(acc, device);
            }
            // part c's device holds the chunk's sum; -mg joins the chunks
            const int device = partials[(size_t) c].second;
            ggml_tensor * piece = device == main ? on(ggml_cont(ctx, acc), device) : receive(send(acc, device), main);
            out = out ? on(ggml_concat(ctx, out, piece, 0), main) : piece;
        }
        return out;
    }

    // One collective node (ggml_all_reduce) over the parts in the wire type, each computed on its
    // device: the scheduler runs it as one step of the devices' backends and copies none of them;
    // afterwards every part holds the sum, and the node is -mg's (or the first device's, when -mg
    // holds no part), back in f32 there. The parts are written in place, so each is a fresh node
    // of its own: a cast to the wire type, or the partial itself when it is already a contiguous
    // f32 result (not a view of memory something else reads).
    ggml_tensor * collective(const std::vector<std::pair<ggml_tensor *, int>> & partials) {
        std::vector<ggml_tensor *> parts;
        int rank = 0;
        for (size_t i = 0; i < partials.size(); ++i) {
            const auto & [x, device] = partials[i];
            const bool fresh = !converts() && ggml_is_contiguous(x) && !x->view_src && x->op != GGML_OP_NONE;
            parts.push_back(fresh ? on(x, device) : send(x, device));
            if (device == opt.main_device) rank = (int) i;
        }
        const int device = partials[(size_t) rank].second;
        ggml_tensor * sum = on(ggml_all_reduce(ctx, parts.data(), (int) parts.size(), rank), device);
        return receive(sum, device);
    }
};

} // namespace

ggml_tensor * llama_build_all_reduce(ggml_context * ctx, const std::vector<std::pair<ggml_tensor *, int>> & partials,
                                     const llama_all_reduce_options & opt, std::vector<std::pair<ggml_tensor *, int>> & pinned) {
    reducer r{ ctx, opt, pinned };
    if (partials.size() == 1) return partials[0].first;
    // more parts than a node has sources (GGML_MAX_SRC): gathered
    if (opt.form == LLAMA_GRAPH_REDUCE_COLLECTIVE && partials.size() <= GGML_MAX_SRC) return r.collective(partials);
    // a ring needs a few rows per chunk; narrower results are gathered
    const bool ring = opt.form == LLAMA_GRAPH_REDUCE_RING && partials[0].first->ne[0] >= 4 * (int64_t) partials.size();
    return ring ? r.ring(partials) : r.gather(partials);
}

const char * llama_graph_reduce_form_name(llama_graph_reduce_form form) {
    switch (form) {
        case LLAMA_GRAPH_REDUCE_RING:       return "ring";
        case LLAMA_GRAPH_REDUCE_COLLECTIVE: return "collective";
        case LLAMA_GRAPH_REDUCE_AUTO:       return "auto";
        default:                            return "gather";
    }
}
