// The KV cache: per layer, K and V rows for kv_size cells. Each cell holds one token's K/V for a
// set of sequences at a position. A batch's tokens take any free cells (written with set_rows),
// so sequences interleave freely; the attention mask says which cells each token sees. Which
// sequences hold a cell is a bit set (seq_words 64-bit words per cell, in one flat array), so the
// mask is built with a bit test per cell rather than a set lookup.
//
// What a row holds is up to the architecture (llama_kv_layer_shape): per-head K and V for plain
// attention, or one shared row (MLA's compressed latent with its RoPE key) and no V tensor, in
// which case attention reads V out of the K row.
//
// Sliding-window layers may get a cache of their own (llama_context::kv_swa), smaller than the
// context: a layer whose shape has no values (n_embd_k 0) has no tensors in a cache, and the
// window's cache frees the cells no sequence can see again when it needs room.
#pragma once

#include "ggml-backend.h"
#include "llama.h"

#include <cstdint>
#include <string>
#include <vector>

struct llama_hparams;
struct llama_ubatch;

struct llama_kv_layer_shape {
    uint32_t n_embd_k = 0;     // values of K per cell; 0: the layer has no attention (no K/V rows)
    uint32_t n_embd_v = 0;     // values of V per cell; 0: no V tensor (V lives in the K row)
    // the K row as heads, for shifting positions: the first n_rot values of each head are RoPE'd
    uint32_t n_head_k = 1;
    uint32_t head_dim_k = 0;
    uint32_t n_rot = 0;
    int32_t layer = -1;        // the model layer of an extra entry (a -sm graph shard's heads); -1: its index
};

// Plain attention: per-head K and V as the hyper-parameters say.
std::vector<llama_kv_layer_shape> llama_kv_default_shapes(const llama_hparams & hp);

// Whether a cache tensor keeps one row per (cell, head), [head_dim, n_head, size], instead of one
// row per cell, [n_embd, size]. Types with a per-row header (q8_KV: f32 scale, i32 sum) need it:
// a head's view must be a row of its type, header first. Both layouts hold a cell's heads one
// after another, so only the cell stride (llama_kv_cell_bytes) tells them apart to readers.
bool llama_kv_per_head_rows(ggml_type type);
// Bytes of one cell (all its heads) in a K or V cache tensor of n_cells cells.
size_t llama_kv_cell_bytes(const ggml_tensor * cache, uint32_t n_cells);

struct llama_kv_cell {
    llama_pos pos = -1;
    llama_pos delta = 0;          // pending RoPE shift
    uint32_t n_seq = 0;           // sequences holding the cell (its bits in llama_kv_cache::seq_bits)
    bool empty() const { return n_seq == 0; }
};

struct llama_kv_cache {
    uint32_t size = 0;
    ggml_type type_k = GGML_TYPE_F16, type_v = GGML_TYPE_F16;
    std::vector<llama_kv_cell> cells;
    uint32_t n_seq_max = 1;
    uint32_t seq_words = 1;             // 64-bit words of sequence bits per cell
    std::vector<uint64_t> seq_bits;     // [size][seq_words]
    std::vector<llama_kv_layer_shape> shapes;
    // per layer (NULL: none): [n_embd_k, size], [n_embd_v, size], or per head (llama_kv_per_head_rows)
    // [head_dim_k, n_head_k, size], [n_embd_v / n_head_k, n_head_k, size]
    std::vector<ggml_tensor *> k_l, v_l;
    ggml_context * ctx = nullptr;
    std::vector<ggml_backend_buffer_t> bufs;   // one per device holding layers
    bool has_shift = false;
    uint32_t used = 0;

    bool reserve_full = false;   // n_kv() reports the whole cache (sizing the worst-case graph)

    // layer_buft: where each layer's rows live (NULL or empty: the host CPU)
    bool init(const std::vector<llama_kv_layer_shape> & layer_shapes, uint32_t n_ctx, uint32_t n_seq, ggml_type tk,
              ggml_type tv, std::string & err, const std::vector<ggml_backend_buffer_type_t> * layer_buft = nullptr);
    ~llama_kv_cache();

    void clear();
    // Take n free cells for the tokens (pos, seq ids); returns false if there are not enough.
    bool find_slots(uint32_t n, std::vector<uint32_t> & out) const;
    void assign(uint32_t cell, llama_pos pos, const llama_seq_id * seq, int n_seq);
    // Whether the cell holds the sequence (false for ids outside [0, n_seq_max)).
    bool has_seq(uint32_t cell, llama_seq_id seq) const;
    // Empty these cells again (a decode that failed after taking them).
    void release(const std::vector<uint32_t> & cells_to_free);
    // cells [0, n_kv) cover every used cell
    uint32_t n_kv() const;
    // The attention masks of a micro-batch over cells [0, n_kv), [n_tokens][n_kv]: 0 where token
    // i may see cell j (j holds one of i's sequences at a position <= i's), -inf elsewhere; in
    // the sliding-window mask also only while i's position - j's < n_swa. Either may be NULL.
    void fill_mask(const llama_ubatch & ub, uint32_t n_kv, float * full, float * swa = nullptr, llama_pos n_swa = 0) const;
    // Calls f(seq) for every sequence the cell holds.
    template <typename F> void for_each_seq(uint32_t cell, F && f) const {
        for (uint32_t w = 0; w < seq_words; ++w) {
            for (uint64_t b = seq_bits[(size_t) cell * seq_words + w]; b != 0; b &= b - 1) {
                f((llama_seq_id) (w * 64 + (uint32_t) __builtin_ctzll(b)));
            }
        }
    }

    bool seq_rm(llama_seq_id seq, llama_pos p0, llama_pos p1);
    void seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1);
    void seq_keep(llama_seq_id seq);
    void seq_add(llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta);
    llama_pos seq_pos_min(llama_seq_id seq) const;
    llama_pos seq_pos_max(llama_seq_id seq) const;
    size_t bytes() const;

    // Free cells that no sequence can see again, the oldest first, until n cells are free (or
    // none is left to free): a cell at position p stays visible to sequence s while
    // next[s] - p < n_swa, next[s] being the position of s's next token (-1: s has none).
    void free_outside_window(uint32_t n, uint32_t n_swa, const std::vector<llama_pos> & next);
    // Cells of seq with positions in [p0, p1)
    uint32_t seq_count(llama_seq_id seq, llama_pos p0, llama_pos p1) const;

private:
    bool valid_seq(llama_seq_id seq) const { return seq >= 0 && (uint32_t) seq < n_seq_max; }
    void add_seq(uint32_t cell, llama_seq_id seq);
    void drop_seq(uint32_t cell, llama_seq_id seq);
    void free_cell(uint32_t cell);
    std::vector<std::pair<llama_pos, uint32_t>> free_scratch_;   // reused: no allocation per token
    // fill_mask's scratch: one token's sequences, and the visibility rows of the last
    // k_vis_rows distinct sequence sets of the micro-batch (vis_keys_[r]: row r's set; per cell,
    // the position at which the set sees it)
    static constexpr uint32_t k_vis_rows = 8;
    mutable std::vector<uint64_t> token_bits_, vis_keys_;
    mutable std::vector<llama_pos> vis_rows_;
};
