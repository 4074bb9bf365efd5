// The KV cache: per layer, K and V rows for kv_size cells. Each cell holds one token's K/V for a
// set of sequences at a position. A batch's tokens take any free cells (written with set_rows),
// so sequences interleave freely; the attention mask says which cells each token sees.
#pragma once

#include "ggml-backend.h"
#include "llama.h"

#include <set>
#include <string>
#include <vector>

struct llama_hparams;

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
    std::vector<ggml_tensor *> k_l, v_l;   // [n_embd_k_gqa, size], [n_embd_v_gqa, size] per layer
    ggml_context * ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    bool has_shift = false;
    uint32_t used = 0;

    bool init(const llama_hparams & hp, uint32_t n_ctx, ggml_type tk, ggml_type tv, std::string & err);
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
};
