#include "llama-recurrent-state.h"

#include "ggml-cpu.h"
#include "llama-impl.h"
#include "llama-model-placement.h"

#include <algorithm>
#include <climits>

bool llama_recurrent_state::init(const std::vector<llama_recurrent_layer_shape> & layer_shapes, uint32_t n_seq_max,
                                 uint32_t n_ckpt, std::string & err, const std::vector<ggml_backend_buffer_type_t> * layer_buft) {
    shapes = layer_shapes;
    n_seq = n_seq_max;
    n_checkpoints = n_ckpt;
    pos_min.assign(n_seq, -1);
    pos_max.assign(n_seq, -1);
    ctx = ggml_init({ ggml_tensor_overhead() * (2 * shapes.size() + 4), nullptr, true });
    std::vector<ggml_tensor *> tensors;
    std::vector<ggml_backend_buffer_type_t> bufts;
    for (size_t il = 0; il < shapes.size(); ++il) {
        const ggml_backend_buffer_type_t where = layer_buft && il < layer_buft->size() ? (*layer_buft)[il] : nullptr;
        ggml_tensor * conv = nullptr, * ssm = nullptr;
        if (shapes[il].n_conv > 0) {
            conv = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, shapes[il].n_conv, n_seq);
            ggml_format_name(conv, "cache_conv_l%zu", il);
            tensors.push_back(conv);
            bufts.push_back(where);
        }
        if (shapes[il].n_ssm > 0) {
            ssm = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, shapes[il].n_ssm, n_seq);
            ggml_format_name(ssm, "cache_ssm_l%zu", il);
            tensors.push_back(ssm);
            bufts.push_back(where);
        }
        conv_l.push_back(conv);
        ssm_l.push_back(ssm);
    }
    // cleared: a fresh sequence starts from the zero state
    if (!llama_alloc_grouped(tensors, bufts, bufs) || bufs.empty()) {
        err = "cannot allocate the recurrent state";
        return false;
    }
    return true;
}

llama_recurrent_state::~llama_recurrent_state() {
    for (auto * b : bufs) ggml_backend_buffer_free(b);
    if (ctx) ggml_free(ctx);
}

size_t llama_recurrent_state::bytes_per_seq() const {
    size_t n = 0;
    for (const auto & s : shapes) n += (size_t) (s.n_conv + s.n_ssm) * sizeof(float);
    return n;
}

size_t llama_recurrent_state::bytes() const {
    size_t n = 0;
    for (auto * b : bufs) n += ggml_backend_buffer_get_size(b);
    return n;
}

void llama_recurrent_state::clear() {
    for (auto * b : bufs) ggml_backend_buffer_clear(b, 0);
    pos_min.assign(n_seq, -1);
    pos_max.assign(n_seq, -1);
    checkpoints.clear();
}

namespace {

// Every per-layer tensor of the state, conv and delta rows alike.
template <typename F>
void for_each_row_tensor(const std::vector<ggml_tensor *> & conv, const std::vector<ggml_tensor *> & ssm, F f) {
    for (size_t il = 0; il < conv.size(); ++il) {
        if (conv[il]) f(conv[il]);
        if (ssm[il]) f(ssm[il]);
    }
}

bool valid_seq(llama_seq_id s, uint32_t n_seq) { return s >= 0 && (uint32_t) s < n_seq; }

} // namespace

void llama_recurrent_state::clear_seq(llama_seq_id seq) {
    std::vector<float> zeros;
    for_each_row_tensor(conv_l, ssm_l, [&](ggml_tensor * t) {
        zeros.assign(t->ne[0], 0.0f);
        ggml_backend_tensor_set(t, zeros.data(), seq * t->nb[1], t->ne[0] * sizeof(float));
    });
    pos_min[seq] = pos_max[seq] = -1;
    checkpoints.erase(std::remove_if(checkpoints.begin(), checkpoints.end(), [&](const checkpoint & c) { return c.seq == seq; }),
                      checkpoints.end());
}

void llama_recurrent_state::read_rows(llama_seq_id seq, std::vector<float> & out) const {
    out.resize(bytes_per_seq() / sizeof(float));
    size_t at = 0;
    for_each_row_tensor(conv_l, ssm_l, [&](ggml_tensor * t) {
        ggml_backend_tensor_get(t, out.data() + at, seq * t->nb[1], t->ne[0] * sizeof(float));
        at += t->ne[0];
    });
}

void llama_recurrent_state::write_rows(llama_seq_id seq, const std::vector<float> & in) {
    size_t at = 0;
    for_each_row_tensor(conv_l, ssm_l, [&](ggml_tensor * t) {
        ggml_backend_tensor_set(t, in.data() + at, seq * t->nb[1], t->ne[0] * sizeof(float));
        at += t->ne[0];
    });
}

void llama_recurrent_state::copy_rows(llama_seq_id src, llama_seq_id dst) {
    std::vector<float> rows;
    read_rows(src, rows);
    write_rows(dst, rows);
}

const llama_recurrent_state::checkpoint * llama_recurrent_state::find_checkpoint(llama_seq_id seq, llama_pos pmax) const {
    for (const auto & c : checkpoints) {
        if (c.seq == seq && c.pos_max == pmax) return &c;
    }
    return nullptr;
}

bool llama_recurrent_state::check_next(llama_seq_id seq, llama_pos pos, std::string & err) const {
    if (!valid_seq(seq, n_seq)) {
        err = llama_format("sequence id %d is not in [0, %u)", seq, n_seq);
        return false;
    }
    if (pos <= pos_max[seq]) {
        err = llama_format("sequence %d: position %d does not follow its recurrent state, which already holds positions "
                           "up to %d (remove back to a checkpoint or to 0 with llama_memory_seq_rm first)",
                           seq, pos, pos_max[seq]);
        return false;
    }
    return true;
}

void llama_recurrent_state::advance(llama_seq_id seq, llama_pos pos) {
    if (pos_min[seq] < 0) pos_min[seq] = pos;
    pos_max[seq] = std::max(pos_max[seq], pos);
}

void llama_recurrent_state::undo_take(const std::vector<uint8_t> & touched) {
    n_undo_ = 0;
    for (uint32_t s = 0; s < n_seq && s < touched.size(); ++s) {
        if (!touched[s]) continue;
        if (n_undo_ == undo_.size()) undo_.emplace_back();
        undo_row & u = undo_[n_undo_++];
        u.seq = (llama_seq_id) s;
        u.pos_min = pos_min[s];
        u.pos_max = pos_max[s];
        read_rows(u.seq, u.data);
    }
}

void llama_recurrent_state::undo_restore() {
    for (size_t i = 0; i < n_undo_; ++i) {
        const undo_row & u = undo_[i];
        write_rows(u.seq, u.data);
        pos_min[u.seq] = u.pos_min;
        pos_max[u.seq] = u.pos_max;
    }
    n_undo_ = 0;
}

void llama_recurrent_state::save_checkpoint(llama_seq_id seq) {
    if (n_checkpoints == 0 || !valid_seq(seq, n_seq) || pos_max[seq] < 0 || find_checkpoint(seq, pos_max[seq])) return;
    // reuse the oldest of this sequence's checkpoints once it has its quota (no allocation in steady state)
    checkpoint * slot = nullptr;
    size_t n_have = 0;
    for (auto & c : checkpoints) {
        if (c.seq != seq) continue;
        ++n_have;
        if (!slot || c.pos_max < slot->pos_max) slot = &c;
    }
    if (n_have < n_checkpoints) {
        checkpoints.emplace_back();
        slot = &checkpoints.back();
    }
    slot->seq = seq;
    slot->pos_min = pos_min[seq];
    slot->pos_max = pos_max[seq];
    read_rows(seq, slot->data);
}

llama_pos llama_recurrent_state::resume_pos(llama_seq_id seq, llama_pos p) const {
    if (!valid_seq(seq, n_seq) || p <= 0) return 0;
    if (pos_max[seq] < 0 || p > pos_max[seq] || p <= pos_min[seq]) return p;
    llama_pos best = 0;
    for (const auto & c : checkpoints) {
        if (c.seq == seq && c.pos_max + 1 <= p) best = std::max(best, c.pos_max + 1);
    }
    return best;
}

bool llama_recurrent_state::seq_rm(llama_seq_id seq, llama_pos p0, llama_pos p1) {
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT_MAX;
    if (seq >= 0 && !valid_seq(seq, n_seq)) return false;
    // decide for every affected sequence first: either all of them can, or nothing changes
    enum class action { none, clear, restore, refuse };
    std::vector<action> plan(n_seq, action::none);
    for (llama_seq_id s = 0; s < (llama_seq_id) n_seq; ++s) {
        if (seq >= 0 && s != seq) continue;
        if (pos_max[s] < 0 || p0 > pos_max[s] || p1 <= pos_min[s] || p0 >= p1) continue;
        if (p0 <= pos_min[s] && p1 > pos_max[s]) {
            plan[s] = action::clear;
        } else if (p1 > pos_max[s] && find_checkpoint(s, p0 - 1)) {
            plan[s] = action::restore;
        } else {
            LLAMA_LOG_WARN("llama_memory_seq_rm: sequence %d holds positions %d..%d in a recurrent state; removing [%d, %d) "
                           "needs a checkpoint at position %d (none kept): refused\n",
                           s, pos_min[s], pos_max[s], p0, p1 == INT_MAX ? -1 : p1, p0 - 1);
            return false;
        }
    }
    for (llama_seq_id s = 0; s < (llama_seq_id) n_seq; ++s) {
        if (plan[s] == action::clear) {
            clear_seq(s);
        } else if (plan[s] == action::restore) {
            const checkpoint c = *find_checkpoint(s, p0 - 1);
            write_rows(s, c.data);
            pos_min[s] = c.pos_min;
            pos_max[s] = c.pos_max;
            // checkpoints past the new end describe a future that is gone
            checkpoints.erase(std::remove_if(checkpoints.begin(), checkpoints.end(),
                                             [&](const checkpoint & k) { return k.seq == s && k.pos_max > c.pos_max; }),
                              checkpoints.end());
        }
    }
    return true;
}

bool llama_recurrent_state::seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    if (!valid_seq(src, n_seq) || !valid_seq(dst, n_seq)) return false;
    if (src == dst) return true;
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT_MAX;
    if (pos_max[src] < 0) {
        clear_seq(dst);
        return true;
    }
    if (p0 <= pos_min[src] && p1 > pos_max[src]) {
        clear_seq(dst);
        copy_rows(src, dst);
        pos_min[dst] = pos_min[src];
        pos_max[dst] = pos_max[src];
        std::vector<checkpoint> copies;
        for (const auto & c : checkpoints) {
            if (c.seq == src) copies.push_back(c);
        }
        for (auto & c : copies) {
            c.seq = dst;
            checkpoints.push_back(std::move(c));
        }
        return true;
    }
    if (p0 <= pos_min[src]) {
        if (const checkpoint * c = find_checkpoint(src, p1 - 1)) {
            const checkpoint copy = *c;
            clear_seq(dst);
            write_rows(dst, copy.data);
            pos_min[dst] = copy.pos_min;
            pos_max[dst] = copy.pos_max;
            return true;
        }
    }
    LLAMA_LOG_WARN("llama_memory_seq_cp: sequence %d holds positions %d..%d in a recurrent state; copying [%d, %d) needs "
                   "the whole sequence or a checkpoint at position %d: refused\n",
                   src, pos_min[src], pos_max[src], p0, p1 == INT_MAX ? -1 : p1, p1 - 1);
    return false;
}

void llama_recurrent_state::seq_keep(llama_seq_id seq) {
    for (llama_seq_id s = 0; s < (llama_seq_id) n_seq; ++s) {
        if (s != seq && pos_max[s] >= 0) clear_seq(s);
    }
}

void llama_recurrent_state::seq_add(llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta) {
    if (!valid_seq(seq, n_seq) || delta == 0) return;
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT_MAX;
    auto shift = [&](llama_pos & p) {
        if (p >= p0 && p < p1) p += delta;
    };
    // the state itself does not depend on positions: only its bookkeeping moves
    shift(pos_min[seq]);
    shift(pos_max[seq]);
    for (auto & c : checkpoints) {
        if (c.seq != seq) continue;
        shift(c.pos_min);
        shift(c.pos_max);
    }
}
