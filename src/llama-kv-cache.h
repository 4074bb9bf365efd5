// The KV cache: per layer, K and V rows for kv_size cells. Each cell holds one token's K/V for a
// set of sequences at a position. A batch's tokens take any free cells (written with set_rows),
// so sequences interleave freely; the attention mask says which cells each token sees.
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

#include <set>
#include <string>
#include <vector>

struct llama_hparams;

struct llama_kv_layer_shape {
    uint32_t n_embd_k = 0;     // values of K per cell; 0: the layer has no attention (no K/V rows)
    uint32_t n_embd_v = 0;     // values of V per cell; 0: no V tensor (V lives in the K row)
    // the K row as heads, for shifting positions: the first n_rot values of each head are RoPE'd
    uint32_t n_head_k = 1;
    uint32_t head_dim_k = 0;
    uint32_t n_rot = 0;
};

// Plain attention: per-head K and V as the hyper-parameters say.
std::vector<llama_kv_layer_shape> llama_kv_default_shapes(const llama_hparams & hp);

struct llama_kv_cell {
    llama_pos pos = -1;
    llama_pos delta = 0;          // pending RoPE shift
    std::set<llama_seq_id> seq;
    bool empty() const { return seq.empty(); }
};

struct llama_kv_cache {
    uint32_t size = 0;
    ggml_type type_k = GGML_TYPE_F16, type_v = GGML_TYPE_F16;
    std::vector<llama_kv_cell> cells;
    std::vector<llama_kv_layer_shape> shapes;
    std::vector<ggml_tensor *> k_l, v_l;   // [n_embd_k, size], [n_embd_v, size] per layer (NULL: none)
    ggml_context * ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    bool has_shift = false;
    uint32_t used = 0;

    bool reserve_full = false;   // n_kv() reports the whole cache (sizing the worst-case graph)

    bool init(const std::vector<llama_kv_layer_shape> & layer_shapes, uint32_t n_ctx, ggml_type tk, ggml_type tv,
              std::string & err);
    ~llama_kv_cache();

    void clear();
    // Take n free cells for the tokens (pos, seq ids); returns false if there are not enough.
    bool find_slots(uint32_t n, std::vector<uint32_t> & out) const;
    void assign(uint32_t cell, llama_pos pos, const llama_seq_id * seq, int n_seq);
    // cells [0, n_kv) cover every used cell
    uint32_t n_kv() const;

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
    std::vector<std::pair<llama_pos, uint32_t>> free_scratch_;   // reused: no allocation per token
};
