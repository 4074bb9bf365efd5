#include "llama-kv-cache.h"

#include "ggml-cpu.h"
#include "llama-impl.h"
#include "llama-graph.h"
#include "llama-model.h"
#include "llama-model-placement.h"

#include <algorithm>
#include <climits>
#include <cmath>

std::vector<llama_kv_layer_shape> llama_kv_default_shapes(const llama_hparams & hp) {
    llama_kv_layer_shape s;
    s.n_embd_k = hp.n_embd_k_gqa();
    s.n_embd_v = hp.n_embd_v_gqa();
    s.n_head_k = hp.n_head_kv;
    s.head_dim_k = hp.n_embd_head_k;
    s.n_rot = hp.n_rot;
    return std::vector<llama_kv_layer_shape>(hp.n_layer, s);
}

bool llama_kv_per_head_rows(ggml_type type) { return ggml_get_type_traits(type)->row_meta_size > 0; }

size_t llama_kv_cell_bytes(const ggml_tensor * cache, uint32_t n_cells) { return ggml_nbytes(cache) / n_cells; }

namespace {

// One layer's K or V cache: per-head rows for a type with a row header, else one row per cell.
ggml_tensor * new_cache_tensor(ggml_context * ctx, ggml_type type, uint32_t n_embd, uint32_t n_head, uint32_t size) {
    if (llama_kv_per_head_rows(type)) return ggml_new_tensor_3d(ctx, type, n_embd / n_head, n_head, size);
    return ggml_new_tensor_2d(ctx, type, n_embd, size);
}

} // namespace

bool llama_kv_cache::init(const std::vector<llama_kv_layer_shape> & layer_shapes, uint32_t n_ctx, uint32_t n_seq,
                          ggml_type tk, ggml_type tv, std::string & err,
                          const std::vector<ggml_backend_buffer_type_t> * layer_buft) {
    size = n_ctx;
    type_k = tk;
    type_v = tv;
    shapes = layer_shapes;
    cells.assign(size, {});
    n_seq_max = std::max<uint32_t>(1, n_seq);
    seq_words = (n_seq_max + 63) / 64;
    seq_bits.assign((size_t) size * seq_words, 0);
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
        if (s.n_embd_k == 0 || !(llama_kv_per_head_rows(tk) || llama_kv_per_head_rows(tv))) continue;
        // a header per head row: the heads must split the rows evenly, and attention must read
        // K and V as separate per-head rows (a latent row that V is a slice of has no header there)
        if (s.n_embd_v == 0) {
            err = llama_format("KV cache type %s is not supported for this model's latent (MLA) cache yet: use q8_0 or f16",
                               ggml_type_name(llama_kv_per_head_rows(tk) ? tk : tv));
            return false;
        }
        if (s.n_head_k == 0 || s.head_dim_k * s.n_head_k != s.n_embd_k || s.n_embd_v % s.n_head_k != 0) {
            err = llama_format("KV cache types %s/%s: layer %zu's rows of %u/%u values do not split into %u heads",
                               ggml_type_name(tk), ggml_type_name(tv), il, s.n_embd_k, s.n_embd_v, s.n_head_k);
            return false;
        }
    }
    ctx = ggml_init({ ggml_tensor_overhead() * (2 * shapes.size() + 4), nullptr, true });
    std::vector<ggml_tensor *> tensors;
    std::vector<ggml_backend_buffer_type_t> bufts;
    for (size_t il = 0; il < shapes.size(); ++il) {
        if (shapes[il].n_embd_k == 0) {   // the layer lives in another cache
            k_l.push_back(nullptr);
            v_l.push_back(nullptr);
            continue;
        }
        const ggml_backend_buffer_type_t where = layer_buft && il < layer_buft->size() ? (*layer_buft)[il] : nullptr;
        if (where && !ggml_backend_buft_is_host(where) && (llama_kv_per_head_rows(tk) || llama_kv_per_head_rows(tv))) {
            // as in ik_llama.cpp, the type has CPU kernels only
            err = llama_format("KV cache type %s has no GPU kernels: keep the KV cache in RAM (-nkvo) or use q8_0",
                               ggml_type_name(llama_kv_per_head_rows(tk) ? tk : tv));
            return false;
        }
        ggml_tensor * k = new_cache_tensor(ctx, tk, shapes[il].n_embd_k, shapes[il].n_head_k, size);
        ggml_format_name(k, "cache_k_l%zu", il);
        tensors.push_back(k);
        bufts.push_back(where);
        ggml_tensor * v = nullptr;
        if (shapes[il].n_embd_v > 0) {
            v = new_cache_tensor(ctx, tv, shapes[il].n_embd_v, shapes[il].n_head_k, size);
            ggml_format_name(v, "cache_v_l%zu", il);
            tensors.push_back(v);
            bufts.push_back(where);
        }
        k_l.push_back(k);
        v_l.push_back(v);
    }
    // cleared: never read garbage (NaN * 0 in masked cells)
    if (!llama_alloc_grouped(tensors, bufts, bufs)) {
        err = "cannot allocate the KV cache";
        return false;
    }
    return true;
}

llama_kv_cache::~llama_kv_cache() {
    for (auto * b : bufs) ggml_backend_buffer_free(b);
    if (ctx) ggml_free(ctx);
}

void llama_kv_cache::clear() {
    for (auto & c : cells) c = {};
    std::fill(seq_bits.begin(), seq_bits.end(), 0);
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

bool llama_kv_cache::has_seq(uint32_t cell, llama_seq_id seq) const {
    return valid_seq(seq) && ((seq_bits[(size_t) cell * seq_words + seq / 64] >> (seq % 64)) & 1) != 0;
}

void llama_kv_cache::add_seq(uint32_t cell, llama_seq_id seq) {
    if (!valid_seq(seq) || has_seq(cell, seq)) return;
    llama_kv_cell & c = cells[cell];
    if (c.empty()) used++;
    c.n_seq++;
    seq_bits[(size_t) cell * seq_words + seq / 64] |= uint64_t(1) << (seq % 64);
}

void llama_kv_cache::drop_seq(uint32_t cell, llama_seq_id seq) {
    if (!has_seq(cell, seq)) return;
    if (cells[cell].n_seq == 1) {
        free_cell(cell);
        return;
    }
    cells[cell].n_seq--;
    seq_bits[(size_t) cell * seq_words + seq / 64] &= ~(uint64_t(1) << (seq % 64));
}

void llama_kv_cache::free_cell(uint32_t cell) {
    if (!cells[cell].empty()) used--;
    std::fill_n(seq_bits.begin() + (ptrdiff_t) cell * seq_words, seq_words, 0);
    cells[cell] = {};
}

void llama_kv_cache::assign(uint32_t cell, llama_pos pos, const llama_seq_id * seq, int n_seq) {
    llama_kv_cell & c = cells[cell];
    c.pos = pos;
    c.delta = 0;
    for (int i = 0; i < n_seq; ++i) add_seq(cell, seq[i]);
}

void llama_kv_cache::release(const std::vector<uint32_t> & cells_to_free) {
    for (uint32_t i : cells_to_free) free_cell(i);
}

void llama_kv_cache::fill_mask(const llama_ubatch & ub, uint32_t n_kv, float * full, float * swa, llama_pos n_swa) const {
    // Token i sees cell j if j holds one of i's sequences at a position <= i's position. For a
    // set of sequences, its visibility row holds at j cell j's position if j holds one of them
    // (an empty cell holds none) and "never" otherwise; each mask row is then one comparison per
    // cell. Building a visibility row reads every cell's bits, so the rows of the last few
    // distinct sets are kept: a micro-batch that interleaves the tokens of several sequences
    // (continuous batching) builds each row once, as a grouped one does.
    const uint32_t W = seq_words;
    token_bits_.resize(W);
    vis_keys_.resize((size_t) k_vis_rows * W);
    uint32_t n_rows = 0, next_victim = 0, cur = UINT32_MAX;
    for (uint32_t i = 0; i < ub.n_tokens; ++i) {
        std::fill(token_bits_.begin(), token_bits_.end(), 0);
        for (int32_t k = 0; k < ub.n_seq_id[i]; ++k) {
            const llama_seq_id s = ub.seq_id[i][k];
            if (valid_seq(s)) token_bits_[s / 64] |= uint64_t(1) << (s % 64);
        }
        auto same_key = [&](uint32_t r) { return std::equal(token_bits_.begin(), token_bits_.end(), vis_keys_.begin() + (ptrdiff_t) r * W); };
        if (cur == UINT32_MAX || !same_key(cur)) {
            cur = UINT32_MAX;
            for (uint32_t r = 0; r < n_rows && cur == UINT32_MAX; ++r) {
                if (same_key(r)) cur = r;
            }
        }
        if (cur == UINT32_MAX) {   // a set not seen yet in this micro-batch: build its row
            if (n_rows < k_vis_rows) {
                cur = n_rows++;
            } else {
                cur = next_victim;
                next_victim = (next_victim + 1) % k_vis_rows;
            }
            std::copy(token_bits_.begin(), token_bits_.end(), vis_keys_.begin() + (ptrdiff_t) cur * W);
            // grown as sets appear (one row for the usual single-sequence batch), kept across calls
            if (vis_rows_.size() < (size_t) (cur + 1) * n_kv) vis_rows_.resize((size_t) (cur + 1) * n_kv);
            llama_pos * vis = vis_rows_.data() + (size_t) cur * n_kv;
            for (uint32_t j = 0; j < n_kv; ++j) {
                const uint64_t * b = seq_bits.data() + (size_t) j * W;
                uint64_t any = 0;
                for (uint32_t w = 0; w < W; ++w) any |= b[w] & token_bits_[w];
                vis[j] = any != 0 ? cells[j].pos : INT32_MAX;
            }
        }
        const llama_pos p = ub.pos[i];
        const llama_pos * vis = vis_rows_.data() + (size_t) cur * n_kv;
        if (full) {
            float * row = full + (size_t) i * n_kv;
            for (uint32_t j = 0; j < n_kv; ++j) row[j] = vis[j] <= p ? 0.0f : -INFINITY;
        }
        if (swa) {   // the sliding window: also p - pos < n_swa
            float * row = swa + (size_t) i * n_kv;
            const llama_pos lo = p - n_swa;
            for (uint32_t j = 0; j < n_kv; ++j) row[j] = vis[j] <= p && vis[j] > lo ? 0.0f : -INFINITY;
        }
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
    if (seq >= 0 && !valid_seq(seq)) return false;
    for (uint32_t i = 0; i < size; ++i) {
        if (cells[i].empty() || !in_range(cells[i].pos, p0, p1)) continue;
        if (seq < 0) free_cell(i);
        else drop_seq(i, seq);
    }
    return true;
}

void llama_kv_cache::seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    if (src == dst || !valid_seq(src) || !valid_seq(dst)) return;
    for (uint32_t i = 0; i < size; ++i) {
        if (has_seq(i, src) && in_range(cells[i].pos, p0, p1)) add_seq(i, dst);
    }
}

void llama_kv_cache::seq_keep(llama_seq_id seq) {
    for (uint32_t i = 0; i < size; ++i) {
        if (cells[i].empty()) continue;
        if (!has_seq(i, seq)) {
            free_cell(i);
            continue;
        }
        std::fill_n(seq_bits.begin() + (ptrdiff_t) i * seq_words, seq_words, 0);
        seq_bits[(size_t) i * seq_words + seq / 64] |= uint64_t(1) << (seq % 64);
        cells[i].n_seq = 1;
    }
}

void llama_kv_cache::seq_add(llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta) {
    if (delta == 0 || !valid_seq(seq)) return;
    for (uint32_t i = 0; i < size; ++i) {
        llama_kv_cell & c = cells[i];
        if (!has_seq(i, seq) || !in_range(c.pos, p0, p1)) continue;
        has_shift = true;
        c.pos += delta;
        c.delta += delta;
        if (c.pos < 0) free_cell(i);   // shifted out of the context: drop
    }
}

llama_pos llama_kv_cache::seq_pos_min(llama_seq_id seq) const {
    llama_pos r = -1;
    for (uint32_t i = 0; i < size; ++i) {
        if (has_seq(i, seq) && (r < 0 || cells[i].pos < r)) r = cells[i].pos;
    }
    return r;
}

llama_pos llama_kv_cache::seq_pos_max(llama_seq_id seq) const {
    llama_pos r = -1;
    for (uint32_t i = 0; i < size; ++i) {
        if (has_seq(i, seq)) r = std::max(r, cells[i].pos);
    }
    return r;
}

size_t llama_kv_cache::bytes() const {
    size_t n = 0;
    for (auto * b : bufs) n += ggml_backend_buffer_get_size(b);
    return n;
}

void llama_kv_cache::free_outside_window(uint32_t n, uint32_t n_swa, const std::vector<llama_pos> & next) {
    auto & cand = free_scratch_;
    cand.clear();
    uint32_t n_free = size - used;
    for (uint32_t i = 0; i < size; ++i) {
        const llama_kv_cell & c = cells[i];
        if (c.empty()) continue;
        bool visible = false;
        for_each_seq(i, [&](llama_seq_id s) {
            const llama_pos nx = (size_t) s < next.size() ? next[s] : -1;
            visible |= nx >= 0 && nx - c.pos < (llama_pos) n_swa;
        });
        if (!visible) cand.emplace_back(c.pos, i);
    }
    // the oldest first: the newest keep the best chance of a later rewind (llama_memory_seq_rm)
    std::sort(cand.begin(), cand.end());
    for (size_t k = 0; k < cand.size() && n_free < n; ++k, ++n_free) free_cell(cand[k].second);
}

uint32_t llama_kv_cache::seq_count(llama_seq_id seq, llama_pos p0, llama_pos p1) const {
    uint32_t n = 0;
    for (uint32_t i = 0; i < size; ++i) n += has_seq(i, seq) && in_range(cells[i].pos, p0, p1);
    return n;
}
