// The recurrent state of the gated delta-net layers, kept next to the KV cache of the attention
// layers: per layer, one row per sequence holding the short convolution's window and one holding
// the delta rule's state matrices (both f32, updated in place by the graph's ops, see
// ggml_ssm_conv / ggml_gated_delta_net). The row of sequence s is row s.
//
// A state summarises every token of its sequence at once, so it cannot forget a suffix the way
// a KV cache drops cells: removing positions works back to the start (clearing the row) or to a
// checkpoint, a copy of the rows taken after some position (`--ctx-checkpoints N` keeps the last
// N per sequence). Anything else is refused with a message, and the caller re-processes.
#pragma once

#include "ggml-backend.h"
#include "llama.h"

#include <string>
#include <vector>

struct llama_recurrent_layer_shape {
    uint32_t n_conv = 0;   // floats of the convolution window per sequence (0 with n_ssm 0: not recurrent)
    uint32_t n_ssm = 0;    // floats of the delta-rule state per sequence
};

struct llama_recurrent_state {
    uint32_t n_seq = 0;
    std::vector<llama_recurrent_layer_shape> shapes;
    std::vector<ggml_tensor *> conv_l, ssm_l;   // per layer [n_conv, n_seq], [n_ssm, n_seq] f32; NULL: not recurrent
    // per sequence: the positions folded into its state (-1: none)
    std::vector<llama_pos> pos_min, pos_max;
    ggml_context * ctx = nullptr;
    std::vector<ggml_backend_buffer_t> bufs;   // one per device holding recurrent layers

    // A copy of one sequence's rows after it took the tokens up to position pos_max.
    struct checkpoint {
        llama_seq_id seq = -1;
        llama_pos pos_min = -1, pos_max = -1;
        std::vector<float> data;
    };
    uint32_t n_checkpoints = 0;   // kept per sequence (0: none)
    std::vector<checkpoint> checkpoints;

    // layer_buft: where each layer's rows live (NULL or empty: the host CPU)
    bool init(const std::vector<llama_recurrent_layer_shape> & layer_shapes, uint32_t n_seq_max, uint32_t n_ckpt,
              std::string & err, const std::vector<ggml_backend_buffer_type_t> * layer_buft = nullptr);
    ~llama_recurrent_state();

    bool active() const { return !bufs.empty(); }
    size_t bytes_per_seq() const;
    size_t bytes() const;

    void clear();
    // Whether seq can take a token at pos (positions only grow: a state cannot rewind).
    bool check_next(llama_seq_id seq, llama_pos pos, std::string & err) const;
    // seq's state now includes the token at pos.
    void advance(llama_seq_id seq, llama_pos pos);
    // Store a checkpoint of seq's current state (dropping its oldest beyond n_checkpoints).
    void save_checkpoint(llama_seq_id seq);

    // the largest p' <= p with seq_rm(seq, p', -1) possible (see llama_memory_seq_pos_resume)
    llama_pos resume_pos(llama_seq_id seq, llama_pos p) const;
    bool seq_rm(llama_seq_id seq, llama_pos p0, llama_pos p1);
    bool seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1);
    void seq_keep(llama_seq_id seq);
    void seq_add(llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta);

    // Undo of one llama_decode call. The graph updates the rows in place, so a micro-batch that
    // fails after an earlier one ran (or after its own graph started) would leave the state ahead
    // of the KV cache, whose cells the call gives back. undo_take copies the rows and positions of
    // the sequences with touched[s] != 0 before the call changes them; undo_restore writes them
    // back. The copies reuse their memory from call to call.
    void undo_take(const std::vector<uint8_t> & touched);
    void undo_restore();

private:
    struct undo_row {
        llama_seq_id seq = -1;
        llama_pos pos_min = -1, pos_max = -1;
        std::vector<float> data;
    };
    std::vector<undo_row> undo_;
    size_t n_undo_ = 0;

    void clear_seq(llama_seq_id seq);
    void copy_rows(llama_seq_id src, llama_seq_id dst);
    void read_rows(llama_seq_id seq, std::vector<float> & out) const;
    void write_rows(llama_seq_id seq, const std::vector<float> & in);
    const checkpoint * find_checkpoint(llama_seq_id seq, llama_pos pos_max) const;
};
