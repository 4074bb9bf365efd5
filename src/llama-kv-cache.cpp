#include "llama-kv-cache.h"

#include "ggml-cpu.h"
#include "llama-impl.h"
#include "llama-model.h"

#include <algorithm>
#include <climits>

std::vector<llama_kv_layer_shape> llama_kv_default_shapes(const llama_hparams & hp) {
    llama_kv_layer_shape s;
    s.n_embd_k = hp.n_embd_k_gqa();
    s.n_embd_v = hp.n_embd_v_gqa();
    s.n_head_k = hp.n_head_kv;
    s.head_dim_k = hp.n_embd_head_k;
    s.n_rot = hp.n_rot;
    return std::vector<llama_kv_layer_shape>(hp.n_layer, s);
}

bool llama_kv_cache::init(const std::vector<llama_kv_layer_shape> & layer_shapes, uint32_t n_ctx, ggml_type tk,
                          ggml_type tv, std::string & err) {
    size = n_ctx;
    type_k = tk;
    type_v = tv;
    shapes = layer_shapes;
    cells.assign(size, {});
    for (ggml_type t : { tk, tv }) {
        const ggml_type_traits * tt = ggml_get_type_traits(t);
        if (t != GGML_TYPE_F32 && (!tt->to_float || !tt->from_float_ref)) {
            err = llama_format("KV cache type %s is not supported", ggml_type_name(t));
            return false;
        }
    }
    for (size_t il = 0; il < shapes.size(); ++il) {
        const auto & s = shapes[il];
        if (s.n_embd_k % ggml_blck_size(tk) != 0 || (s.n_embd_v && s.n_embd_v % ggml_blck_size(tv) != 0) ||
            (s.n_embd_v == 0 && (s.n_rot % ggml_blck_size(tk)) != 0)) {
            err = llama_format("KV cache types %s/%s do not fit layer %zu's rows of %u/%u values", ggml_type_name(tk),
                               ggml_type_name(tv), il, s.n_embd_k, s.n_embd_v);
            return false;
        }
    }
    ctx = ggml_init({ ggml_tensor_overhead() * (2 * shapes.size() + 4), nullptr, true });
    for (size_t il = 0; il < shapes.size(); ++il) {
        if (shapes[il].n_embd_k == 0) {   // the layer lives in another cache
            k_l.push_back(nullptr);
            v_l.push_back(nullptr);
            continue;
        }
        ggml_tensor * k = ggml_new_tensor_2d(ctx, tk, shapes[il].n_embd_k, size);
        ggml_format_name(k, "cache_k_l%zu", il);
        ggml_tensor * v = nullptr;
        if (shapes[il].n_embd_v > 0) {
            v = ggml_new_tensor_2d(ctx, tv, shapes[il].n_embd_v, size);
            ggml_format_name(v, "cache_v_l%zu", il);
        }
        k_l.push_back(k);
        v_l.push_back(v);
    }
    if (!ggml_get_first_tensor(ctx)) return true;   // every layer lives in another cache: cells only
    buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type());
    if (!buf) {
        err = "cannot allocate the KV cache";
        return false;
    }
    ggml_backend_buffer_clear(buf, 0);   // never read garbage (NaN * 0 in masked cells)
    return true;
}

llama_kv_cache::~llama_kv_cache() {
    if (buf) ggml_backend_buffer_free(buf);
    if (ctx) ggml_free(ctx);
}

void llama_kv_cache::clear() {
    for (auto & c : cells) c = {};
    used = 0;
    has_shift = false;
}

bool llama_kv_cache::find_slots(uint32_t n, std::vector<uint32_t> & out) const {
    out.clear();
    for (uint32_t i = 0; i < size && out.size() < n; ++i) {
        if (cells[i].empty()) out.push_back(i);
    }
    return out.size() == n;
}

void llama_kv_cache::assign(uint32_t cell, llama_pos pos, const llama_seq_id * seq, int n_seq) {
    llama_kv_cell & c = cells[cell];
    if (c.empty()) used++;
    c.pos = pos;
    c.delta = 0;
    for (int i = 0; i < n_seq; ++i) c.seq.insert(seq[i]);
}

void llama_kv_cache::release(const std::vector<uint32_t> & cells_to_free) {
    for (uint32_t i : cells_to_free) {
        llama_kv_cell & c = cells[i];
        if (c.empty()) continue;
        c = {};
        used--;
    }
}

uint32_t llama_kv_cache::n_kv() const {
    if (reserve_full) return size;
    uint32_t last = 0;
    for (uint32_t i = size; i > 0; --i) {
        if (!cells[i - 1].empty()) {
            last = i;
            break;
        }
    }
    // pad so the graph shape (and its memory plan) changes rarely
    const uint32_t pad = 32;
    return std::min(size, (last + pad - 1) / pad * pad);
}

static bool in_range(llama_pos p, llama_pos p0, llama_pos p1) {
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    return p >= p0 && p < p1;
}

bool llama_kv_cache::seq_rm(llama_seq_id seq, llama_pos p0, llama_pos p1) {
    for (auto & c : cells) {
        if (c.empty() || !in_range(c.pos, p0, p1)) continue;
        if (seq < 0) {
            c.seq.clear();
        } else {
            c.seq.erase(seq);
        }
        if (c.empty()) {
            c.pos = -1;
            c.delta = 0;
            used--;
        }
    }
    return true;
}

void llama_kv_cache::seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    if (src == dst) return;
    for (auto & c : cells) {
        if (c.seq.count(src) && in_range(c.pos, p0, p1)) c.seq.insert(dst);
    }
}

void llama_kv_cache::seq_keep(llama_seq_id seq) {
    for (auto & c : cells) {
        if (c.empty()) continue;
        const bool had = c.seq.count(seq) > 0;
        c.seq.clear();
        if (had) {
            c.seq.insert(seq);
        } else {
            c.pos = -1;
            used--;
        }
    }
}

void llama_kv_cache::seq_add(llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta) {
    if (delta == 0) return;
    for (auto & c : cells) {
        if (c.empty() || !c.seq.count(seq) || !in_range(c.pos, p0, p1)) continue;
        has_shift = true;
        c.pos += delta;
        c.delta += delta;
        if (c.pos < 0) {   // shifted out of the context: drop
            c.seq.clear();
            c.pos = -1;
            used--;
        }
    }
}

llama_pos llama_kv_cache::seq_pos_min(llama_seq_id seq) const {
    llama_pos r = -1;
    for (const auto & c : cells) {
        if (c.seq.count(seq) && (r < 0 || c.pos < r)) r = c.pos;
    }
    return r;
}

llama_pos llama_kv_cache::seq_pos_max(llama_seq_id seq) const {
    llama_pos r = -1;
    for (const auto & c : cells) {
        if (c.seq.count(seq)) r = std::max(r, c.pos);
    }
    return r;
}

size_t llama_kv_cache::bytes() const { return buf ? ggml_backend_buffer_get_size(buf) : 0; }

void llama_kv_cache::free_outside_window(uint32_t n, uint32_t n_swa, const std::vector<llama_pos> & next) {
    auto & cand = free_scratch_;
    cand.clear();
    uint32_t n_free = size - used;
    for (uint32_t i = 0; i < size; ++i) {
        const llama_kv_cell & c = cells[i];
        if (c.empty()) continue;
        bool visible = false;
        for (llama_seq_id s : c.seq) {
            const llama_pos nx = (size_t) s < next.size() ? next[s] : -1;
            visible |= nx >= 0 && nx - c.pos < (llama_pos) n_swa;
        }
        if (!visible) cand.emplace_back(c.pos, i);
    }
    // the oldest first: the newest keep the best chance of a later rewind (llama_memory_seq_rm)
    std::sort(cand.begin(), cand.end());
    for (size_t k = 0; k < cand.size() && n_free < n; ++k, ++n_free) {
        cells[cand[k].second] = {};
        used--;
    }
}

uint32_t llama_kv_cache::seq_count(llama_seq_id seq, llama_pos p0, llama_pos p1) const {
    uint32_t n = 0;
    for (const auto & c : cells) n += !c.empty() && c.seq.count(seq) && in_range(c.pos, p0, p1);
    return n;
}
