// The inference context: KV cache, scheduler, and llama_decode, which cuts a batch into
// micro-batches, finds KV cells for them, builds and runs each graph and keeps the logits asked for.
#include "llama-context.h"
#include "llama-all-reduce.h"
#include "llama-memory-report.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>

llama_context::~llama_context() {
    if (sched) ggml_backend_sched_free(sched);
    for (auto * b : device_backends) ggml_backend_free(b);
    if (cpu) ggml_backend_free(cpu);
}

void llama_context::pin_nodes(const llm_graph_context & g) {
    for (const auto & p : g.pinned) ggml_backend_sched_set_tensor_backend(sched, p.first, device_backends[p.second]);
}

void llama_context::set_threads(int n) {
    ggml_backend_cpu_set_n_threads(cpu, n);
    const int share = std::max(1, n / std::max(1, (int) device_backends.size()));
    for (auto * b : device_backends) {
        if (ggml_backend_is_cpu(b)) ggml_backend_cpu_set_n_threads(b, share);
    }
}

namespace {

void set_cells(llama_context & lctx, ggml_tensor * t, const std::vector<uint32_t> & cells) {
    auto & idx = lctx.scratch_i64;
    idx.assign(cells.begin(), cells.end());
    ggml_backend_tensor_set(t, idx.data(), 0, idx.size() * sizeof(int64_t));
}

void fill_inputs(llama_context & lctx, llm_graph_context & g, const llama_ubatch & ub) {
    if (g.inp_tokens) ggml_backend_tensor_set(g.inp_tokens, ub.token, 0, ub.n_tokens * sizeof(int32_t));
    if (g.inp_pos) ggml_backend_tensor_set(g.inp_pos, ub.pos, 0, ub.n_tokens * sizeof(int32_t));
    if (g.inp_pos_multi) {
        // text tokens sit at (p, p, p, 0): time, height and width all advance with the token
        auto & m = lctx.scratch_i32;
        m.assign(4 * (size_t) ub.n_tokens, 0);
        for (uint32_t i = 0; i < ub.n_tokens; ++i) m[i] = m[ub.n_tokens + i] = m[2 * ub.n_tokens + i] = ub.pos[i];
        ggml_backend_tensor_set(g.inp_pos_multi, m.data(), 0, m.size() * sizeof(int32_t));
    }
    if (g.inp_rs_slots) {
        auto & m = lctx.scratch_i32;
        m.resize(ub.n_tokens);
        for (uint32_t i = 0; i < ub.n_tokens; ++i) m[i] = ub.seq_id[i][0];   // a sequence's row is its id
        ggml_backend_tensor_set(g.inp_rs_slots, m.data(), 0, m.size() * sizeof(int32_t));
    }
    if (g.inp_kv_idx) set_cells(lctx, g.inp_kv_idx, ub.cells);
    if (g.inp_kv_idx_swa) set_cells(lctx, g.inp_kv_idx_swa, ub.cells_swa);
    const llama_pos n_swa = (llama_pos) lctx.model.hparams.n_swa;
    // the window's mask: over the window's own cache, or next to the full one over the same cells
    const bool swa_apart = g.inp_mask_swa && lctx.has_kv_swa();
    const size_t n_mask = (size_t) g.n_kv * ub.n_tokens;
    const size_t n_mask_swa = g.inp_mask_swa ? (size_t) (swa_apart ? g.n_kv_swa : g.n_kv) * ub.n_tokens : 0;
    if (g.inp_mask || g.inp_mask_swa) {
        auto & m = lctx.scratch_f32;
        m.resize(n_mask + n_mask_swa);
        float * full = g.inp_mask ? m.data() : nullptr;
        float * swa = g.inp_mask_swa ? m.data() + n_mask : nullptr;
        if (full || !swa_apart) lctx.kv.fill_mask(ub, (uint32_t) g.n_kv, full, swa_apart ? nullptr : swa, n_swa);
        if (swa_apart) lctx.kv_swa.fill_mask(ub, (uint32_t) g.n_kv_swa, nullptr, swa, n_swa);
        if (full) ggml_backend_tensor_set(g.inp_mask, full, 0, n_mask * sizeof(float));
        if (swa) ggml_backend_tensor_set(g.inp_mask_swa, swa, 0, n_mask_swa * sizeof(float));
    }
    if (g.inp_out_ids) ggml_backend_tensor_set(g.inp_out_ids, ub.out_rows.data(), 0, ub.out_rows.size() * sizeof(int32_t));
    for (const auto & c : g.const_inputs) ggml_backend_tensor_set(c.first, c.second.data(), 0, c.second.size() * sizeof(float));
}

} // namespace

bool llama_apply_kv_shift(llama_context & lctx) {
    const llama_hparams & hp = lctx.model.hparams;
    ggml_context * ctx = ggml_init({ lctx.graph_mem.size(), lctx.graph_mem.data(), true });
    // a few nodes per cache entry: a -sm graph model has one per layer part besides the layers'
    const size_t n_entries = lctx.kv.k_l.size() + lctx.kv_swa.k_l.size();
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 8 * n_entries + 16, false);
    const float base = lctx.cparams.rope_freq_base > 0 ? lctx.cparams.rope_freq_base : hp.rope_freq_base;
    const float scale = lctx.cparams.rope_freq_scale > 0 ? lctx.cparams.rope_freq_scale : hp.rope_freq_scale;
    // every cache's cells carry their own pending shifts; multi-section RoPE takes (d, d, d, 0)
    const bool multi = (hp.rope_type & GGML_ROPE_TYPE_MROPE) != 0;
    std::vector<std::pair<llama_kv_cache *, ggml_tensor *>> caches;
    for (llama_kv_cache * kv : { &lctx.kv, &lctx.kv_swa }) {
        if (kv->size == 0) continue;
        ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, (multi ? 4 : 1) * kv->size);
        ggml_set_input(pos);
        caches.emplace_back(kv, pos);
        for (size_t il = 0; il < kv->k_l.size(); ++il) {
            const llama_kv_layer_shape & sh = kv->shapes[il];
            ggml_tensor * k = kv->k_l[il];
            if (sh.n_rot == 0 || !k) continue;
            // the RoPE'd leading part of every head, as [n_rot, n_head, cells]; a type with a row
            // header takes whole head rows, requantized with a new scale after the rotation
            const int64_t n_view = llama_kv_per_head_rows(k->type) ? sh.head_dim_k : sh.n_rot;
            ggml_tensor * kv3 = ggml_view_3d(ctx, k, n_view, sh.n_head_k, kv->size, ggml_row_size(k->type, sh.head_dim_k),
                                             llama_kv_cell_bytes(k, kv->size), 0);
            ggml_tensor * f = ggml_cast(ctx, kv3, GGML_TYPE_F32);
            const bool swa = hp.is_swa((uint32_t) (sh.layer >= 0 ? sh.layer : (int) il));
            // each pair's angle is linear in its position, so rotating by the shift moves the key there
            ggml_tensor * r = multi ? ggml_rope_multi(ctx, f, pos, nullptr, sh.n_rot, hp.rope_sections, hp.rope_type,
                                                      (int) hp.n_ctx_orig_yarn, base, scale, hp.yarn_ext_factor,
                                                      hp.yarn_attn_factor, hp.yarn_beta_fast, hp.yarn_beta_slow)
                                    : ggml_rope_ext(ctx, f, pos, nullptr, sh.n_rot, hp.rope_type, (int) hp.n_ctx_orig_yarn,
                                                    swa ? hp.rope_freq_base_swa : base, swa ? hp.rope_freq_scale_swa : scale,
                                                    hp.yarn_ext_factor, hp.yarn_attn_factor, hp.yarn_beta_fast,
                                                    hp.yarn_beta_slow);
            ggml_build_forward_expand(gf, ggml_cpy(ctx, r, kv3));
        }
    }
    ggml_backend_sched_reset(lctx.sched);
    bool ok = ggml_backend_sched_alloc_graph(lctx.sched, gf);
    if (ok) {
        for (auto & c : caches) {
            const uint32_t n = c.first->size;
            std::vector<int32_t> d((multi ? 4 : 1) * n, 0);
            for (uint32_t i = 0; i < n; ++i) {
                for (int k = 0; k < (multi ? 3 : 1); ++k) d[k * n + i] = c.first->cells[i].delta;
            }
            ggml_backend_tensor_set(c.second, d.data(), 0, d.size() * sizeof(int32_t));
        }
        lctx.set_threads(lctx.cparams.n_threads_batch);
        ok = ggml_backend_sched_graph_compute(lctx.sched, gf) == GGML_STATUS_SUCCESS;
    }
    ggml_free(ctx);
    for (auto & c : caches) {
        for (auto & cell : c.first->cells) cell.delta = 0;
        c.first->has_shift = false;
    }
    return ok;
}

namespace {

// values per cell of a latent cache (the first layer that has one: -sm graph leaves a cut layer's own entry empty)
uint32_t latent_row(const std::vector<llama_kv_layer_shape> & shapes) {
    for (const auto & s : shapes) {
        if (s.n_embd_k > 0) return s.n_embd_k;
    }
    return 0;
}

// A recurrent state folds in one sequence's tokens in order and cannot rewind: each token of the
// batch belongs to one sequence and comes after everything that sequence's state already holds.
bool check_recurrent_batch(const llama_recurrent_state & rs, int32_t n, const llama_pos * pos, const int32_t * n_seq_id,
                           const llama_seq_id * const * seq_id) {
    std::vector<llama_pos> last(rs.pos_max);
    for (int32_t i = 0; i < n; ++i) {
        if (n_seq_id[i] != 1) {
            LLAMA_LOG_ERROR("llama_decode: token %d belongs to %d sequences; a model with recurrent layers needs one per "
                            "token (decode a shared prompt once, then llama_memory_seq_cp)\n", i, n_seq_id[i]);
            return false;
        }
        const llama_seq_id s = seq_id[i][0];
        if (pos[i] <= last[s]) {
            LLAMA_LOG_ERROR("llama_decode: token %d: sequence %d at position %d, but its recurrent state already holds "
                            "positions up to %d (remove back to a checkpoint or to 0 with llama_memory_seq_rm first)\n",
                            i, s, pos[i], last[s]);
            return false;
        }
        last[s] = pos[i];
    }
    return true;
}

} // namespace

namespace {

// Graph observation for cb_eval. The CPU backend runs a whole graph at once and the planner
// reuses an intermediate's memory after its last consumer, so the nodes the callback asks for
// (and the tensors their sources view) are flagged as outputs before allocation; once the graph
// has run, every asked-for node is reported with its inputs intact.
void observe_mark(llama_context & lctx, ggml_cgraph * gf) {
    lctx.observed.clear();
    const int n = ggml_graph_n_nodes(gf);
    for (int i = 0; i < n; ++i) {
        ggml_tensor * node = ggml_graph_node(gf, i);
        if (!lctx.cb_eval(node, true, lctx.cb_eval_user_data)) continue;
        lctx.observed.push_back(node);
        ggml_set_output(node);
        for (ggml_tensor * s : node->src) {
            if (!s) continue;
            while (s->view_src) s = s->view_src;
            if (s->op != GGML_OP_NONE) ggml_set_output(s);   // weights and inputs keep their memory anyway
        }
    }
}

void observe_report(llama_context & lctx) {
    for (ggml_tensor * node : lctx.observed) {
        if (!lctx.cb_eval(node, false, lctx.cb_eval_user_data)) break;
    }
    lctx.observed.clear();
}

} // namespace

namespace {

// Everything llama_decode reads from a batch, checked before anything is read by index: "" when
// the batch is good, else what is wrong with which entry.
std::string batch_error(const llama_batch & batch, uint32_t n_vocab, uint32_t n_seq_max) {
    const int32_t n = batch.n_tokens;
    if (n <= 0) return "empty batch (n_tokens = " + std::to_string(n) + ")";
    if (!batch.token) return "embeddings input is not supported (batch.token is NULL)";
    if (batch.seq_id && !batch.n_seq_id) return "batch.seq_id is given without batch.n_seq_id";
    for (int32_t i = 0; i < n; ++i) {
        const std::string at = " at index " + std::to_string(i);
        if (batch.token[i] < 0 || (uint32_t) batch.token[i] >= n_vocab) {
            return "token " + std::to_string(batch.token[i]) + at + " is out of the vocabulary (" + std::to_string(n_vocab) + ")";
        }
        if (batch.pos && (batch.pos[i] < 0 || batch.pos[i] > INT32_MAX / 2)) {
            return "position " + std::to_string(batch.pos[i]) + at + " is negative or too large";
        }
        if (!batch.seq_id) continue;
        if (batch.n_seq_id[i] < 1 || (uint32_t) batch.n_seq_id[i] > n_seq_max) {
            return "n_seq_id " + std::to_string(batch.n_seq_id[i]) + at + " is not in [1, " + std::to_string(n_seq_max) + "]";
        }
        if (!batch.seq_id[i]) return "seq_id" + at + " is NULL";
        for (int32_t s = 0; s < batch.n_seq_id[i]; ++s) {
            if (batch.seq_id[i][s] < 0 || (uint32_t) batch.seq_id[i][s] >= n_seq_max) {
                return "sequence id " + std::to_string(batch.seq_id[i][s]) + at + " is not in [0, " + std::to_string(n_seq_max) + ")";
            }
        }
    }
    return "";
}

int32_t decode_error(int32_t code, const std::string & msg) {
    LLAMA_LOG_ERROR("llama_decode: %s\n", msg.c_str());
    llama_set_last_error("llama_decode: " + msg);
    return code;
}

} // namespace

int32_t llama_context::decode(const llama_batch & batch) {
    const llama_hparams & hp = model.hparams;
    const int32_t n = batch.n_tokens;
    const std::string bad = batch_error(batch, hp.n_vocab, cparams.n_seq_max);
    if (!bad.empty()) return decode_error(-1, bad);
    // room for the whole batch up front, so that "no room" (1) leaves the cache as it was
    if (kv.size - kv.used < (uint32_t) n) {
        LLAMA_LOG_WARN("llama_decode: no room in the KV cache for %d tokens (%u of %u cells used)\n", n, kv.used, kv.size);
        return 1;
    }
    if ((kv.has_shift || kv_swa.has_shift) && !llama_apply_kv_shift(*this)) {
        return decode_error(-3, "shifting the cached positions failed");
    }

    // positions and sequences, filled in when the batch leaves them out (sequence 0)
    static const llama_seq_id k_seq0 = 0;
    const int32_t * n_seq_id = batch.n_seq_id;
    const llama_seq_id * const * seq_id = batch.seq_id;
    if (!batch.seq_id) {
        n_seq_scratch.assign(n, 1);
        seq_scratch.assign(n, &k_seq0);
        n_seq_id = n_seq_scratch.data();
        seq_id = seq_scratch.data();
    }
    const llama_pos * pos = batch.pos;
    if (!batch.pos) {
        pos_scratch.resize(n);
        next_pos_scratch.assign(cparams.n_seq_max, -1);
        for (int32_t i = 0; i < n; ++i) {
            const llama_seq_id s = seq_id[i][0];
            llama_pos & np = next_pos_scratch[s];
            if (np < 0) np = std::max(kv.seq_pos_max(s), rs.active() ? rs.pos_max[s] : -1) + 1;
            pos_scratch[i] = np++;
        }
        pos = pos_scratch.data();
    }
    if (rs.active() && !check_recurrent_batch(rs, n, pos, n_seq_id, seq_id)) return -1;
    // The recurrent state changes in place as each micro-batch runs (see undo_take). A call that
    // carries a prompt piece or spans several micro-batches copies its sequences' rows first,
    // once per call; a step of one token per sequence in one micro-batch (generation) does not,
    // as copying a large state per token would cost more than the step, and if its graph fails
    // its sequences are reset instead (state and cells), which the error says.
    bool state_undo = false;
    if (rs.active()) {
        std::vector<int32_t> & n_of = seq_tokens_scratch;
        n_of.assign(cparams.n_seq_max, 0);
        bool piece = false;
        for (int32_t i = 0; i < n; ++i) piece |= ++n_of[seq_id[i][0]] > 1;
        state_undo = piece || n > (int32_t) cparams.n_ubatch;
        if (state_undo) {
            seq_touched_scratch.assign(cparams.n_seq_max, 0);
            for (uint32_t s = 0; s < cparams.n_seq_max; ++s) seq_touched_scratch[s] = n_of[s] > 0;
            rs.undo_take(seq_touched_scratch);
        }
    }
    // outputs
    std::vector<int32_t> & out_idx = out_idx_scratch;
    out_idx.clear();
    for (int32_t i = 0; i < n; ++i) {
        const bool want = batch.logits ? batch.logits[i] != 0 : i == n - 1;
        if (want) out_idx.push_back(i);
    }
    // an embedding context outputs hidden states (n_embd per row) instead of logits
    const size_t n_vocab = cparams.embeddings ? (size_t) hp.n_embd : (size_t) hp.n_vocab;
    std::vector<float> & out_rows = cparams.embeddings ? embd : logits;
    out_rows.resize(out_idx.size() * n_vocab);
    output_of.assign(n, -1);
    for (size_t k = 0; k < out_idx.size(); ++k) output_of[out_idx[k]] = (int32_t) k;
    n_outputs = (int32_t) out_idx.size();

    const int64_t t_start = ggml_time_us();
    int32_t out_done = 0;
    // a failed micro-batch takes the cells of the whole call back: the cache is as before the call
    std::vector<uint32_t> & taken = cells_taken;
    std::vector<uint32_t> & taken_swa = cells_taken_swa;
    taken.clear();
    taken_swa.clear();
    bool state_written = false;   // a graph has run (or started) on the recurrent state in this call
    auto fail = [&](int32_t code, const char * what) {
        kv.release(taken);
        kv_swa.release(taken_swa);
        if (!rs.active() || !state_written) return decode_error(code, what);
        if (state_undo) {
            rs.undo_restore();
            return decode_error(code, what);
        }
        for (int32_t i = 0; i < n; ++i) llama_memory_seq_rm(this, seq_id[i][0], -1, -1);
        return decode_error(code, std::string(what) + "; the recurrent state of this step's sequences was reset "
                                  "(they hold nothing now)");
    };
    for (int32_t i0 = 0; i0 < n; i0 += (int32_t) cparams.n_ubatch) {
        const int32_t nt = std::min<int32_t>((int32_t) cparams.n_ubatch, n - i0);
        llama_ubatch ub;
        ub.n_tokens = nt;
        ub.token = batch.token + i0;
        ub.pos = pos + i0;
        ub.n_seq_id = n_seq_id + i0;
        ub.seq_id = seq_id + i0;
        for (int32_t i = 0; i < nt; ++i) {
            if (output_of[i0 + i] >= 0) ub.out_rows.push_back(i);
        }
        if (!kv.find_slots(nt, ub.cells)) return fail(-2, "the KV cache lost free cells during the call");
        for (int32_t i = 0; i < nt; ++i) kv.assign(ub.cells[i], ub.pos[i], ub.seq_id[i], ub.n_seq_id[i]);
        taken.insert(taken.end(), ub.cells.begin(), ub.cells.end());
        if (has_kv_swa()) {
            if (!place_in_window(ub)) {
                LLAMA_LOG_WARN("llama_decode: no room in the sliding-window cache for %d tokens (%u of %u cells used)\n", nt,
                               kv_swa.used, kv_swa.size);
                kv.release(taken);
                kv_swa.release(taken_swa);
                return 1;
            }
            taken_swa.insert(taken_swa.end(), ub.cells_swa.begin(), ub.cells_swa.end());
        }

        ggml_context * ctx0 = ggml_init({ graph_mem.size(), graph_mem.data(), true });
        ggml_cgraph * gf = ggml_new_graph_custom(ctx0, graph_size, false);
        llm_graph_context g(model, cparams, ub, kv, ctx0, gf, has_kv_swa() ? &kv_swa : nullptr, rs.active() ? &rs : nullptr);
        ggml_tensor * out = model.arch->build_graph(g);
        ggml_build_forward_expand(gf, out);
        if (cb_eval) observe_mark(*this, gf);

        ggml_backend_sched_reset(sched);
        pin_nodes(g);
        if (!ggml_backend_sched_alloc_graph(sched, gf)) {
            ggml_free(ctx0);
            return fail(-2, "failed to allocate the compute graph");
        }
        fill_inputs(*this, g, ub);
        set_threads(nt == 1 ? cparams.n_threads : cparams.n_threads_batch);
        state_written = true;
        const bool computed = ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS;
        if (!computed || i0 / (int32_t) cparams.n_ubatch == fail_ubatch_for_test) {
            ggml_free(ctx0);
            return fail(-3, "graph computation failed");
        }
        if (cb_eval) observe_report(*this);
        if (rs.active()) {
            for (int32_t i = 0; i < nt; ++i) rs.advance(ub.seq_id[i][0], ub.pos[i]);
        }
        const size_t n_out = ub.out_rows.size();
        if (n_out > 0) {
            ggml_backend_tensor_get(out, out_rows.data() + out_done * n_vocab, 0, n_out * n_vocab * sizeof(float));
            out_done += (int32_t) n_out;
        }
        ggml_free(ctx0);
    }
    if (rs.active() && rs.n_checkpoints > 0) {
        // a prompt piece (more than one token of a sequence) ends in a state worth keeping:
        // a later request sharing that prefix resumes there (llama_memory_seq_rm to it)
        for (uint32_t s = 0; s < cparams.n_seq_max; ++s) {
            if (seq_tokens_scratch[s] > 1) rs.save_checkpoint((llama_seq_id) s);
        }
    }
    const int64_t t_us = ggml_time_us() - t_start;
    if (no_perf) {
        // timings not collected (llama_perf_context reports zeros)
    } else if (n == 1) {
        t_eval_us += t_us;
        n_eval += 1;
    } else {
        t_p_eval_us += t_us;
        n_p_eval += n;
    }
    return 0;
}

bool llama_context::place_in_window(llama_ubatch & ub) {
    if (!kv_swa.find_slots(ub.n_tokens, ub.cells_swa)) {
        // Room is made lazily, only when needed, so that rewinds stay possible as long as can be:
        // cells before the window of each sequence's next token (this micro-batch's first, or
        // the one after its last cached position) are freed, the oldest first, a micro-batch's
        // worth at a time so that generation does not scan the cache for every token. Every
        // sequence's newest positions are in the window's cache, so it alone says where each is.
        auto & next = window_next_;
        next.assign(cparams.n_seq_max, -1);
        for (uint32_t j = 0; j < kv_swa.size; ++j) {
            const llama_pos p = kv_swa.cells[j].pos;
            kv_swa.for_each_seq(j, [&](llama_seq_id s) { next[s] = std::max(next[s], p + 1); });
        }
        for (uint32_t i = 0; i < ub.n_tokens; ++i) {
            for (int32_t k = 0; k < ub.n_seq_id[i]; ++k) {
                const llama_seq_id s = ub.seq_id[i][k];
                if (next[s] < 0 || ub.pos[i] < next[s]) next[s] = ub.pos[i];
            }
        }
        kv_swa.free_outside_window(std::max(ub.n_tokens, cparams.n_ubatch), model.hparams.n_swa, next);
        if (!kv_swa.find_slots(ub.n_tokens, ub.cells_swa)) return false;
    }
    for (uint32_t i = 0; i < ub.n_tokens; ++i) kv_swa.assign(ub.cells_swa[i], ub.pos[i], ub.seq_id[i], ub.n_seq_id[i]);
    return true;
}

bool llama_context::reserve() {
    const uint32_t nt = cparams.n_ubatch;
    std::vector<llama_token> tokens(nt, 0);
    std::vector<llama_pos> pos(nt);
    llama_ubatch ub;
    ub.n_tokens = nt;
    ub.token = tokens.data();
    for (uint32_t i = 0; i < nt; ++i) pos[i] = (llama_pos) i;
    ub.pos = pos.data();
    static const llama_seq_id k_seq0 = 0;
    std::vector<int32_t> n_seq(nt, 1);
    std::vector<const llama_seq_id *> seqs(nt, &k_seq0);
    ub.n_seq_id = n_seq.data();
    ub.seq_id = seqs.data();
    for (uint32_t i = 0; i < nt; ++i) ub.out_rows.push_back((int32_t) i);
    ub.cells.resize(nt);
    ub.cells_swa.resize(nt);
    kv.reserve_full = kv_swa.reserve_full = true;
    ggml_context * ctx0 = ggml_init({ graph_mem.size(), graph_mem.data(), true });
    ggml_cgraph * gf = ggml_new_graph_custom(ctx0, graph_size, false);
    llm_graph_context g(model, cparams, ub, kv, ctx0, gf, has_kv_swa() ? &kv_swa : nullptr, rs.active() ? &rs : nullptr);
    ggml_build_forward_expand(gf, model.arch->build_graph(g));
    ggml_backend_sched_reset(sched);
    pin_nodes(g);
    const bool ok = ggml_backend_sched_reserve(sched, gf);
    kv.reserve_full = kv_swa.reserve_full = false;
    ggml_free(ctx0);
    return ok;
}

// ---- C API

extern "C" {

llama_context_params llama_context_default_params(void) {
    llama_context_params p{};
    p.n_ctx = 4096;
    p.n_batch = 2048;
    p.n_ubatch = 512;
    p.n_seq_max = 1;
    p.n_threads = 4;
    p.n_threads_batch = 4;
    p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    p.type_k = GGML_TYPE_F16;
    p.type_v = GGML_TYPE_F16;
    p.mla = -1;
    p.fused_moe = true;
    p.graph_reduce_type = GGML_TYPE_F32;
    p.graph_reduce_form = LLAMA_GRAPH_REDUCE_AUTO;
    p.offload_kqv = true;
    p.op_offload = true;
    p.op_offload_min_batch = 32;
    return p;
}

llama_context * llama_init_from_model(llama_model * model, llama_context_params params) {
    const llama_hparams & hp = model->hparams;
    auto * ctx = new llama_context(*model);
    llama_cparams & cp = ctx->cparams;
    cp.n_ctx = params.n_ctx ? params.n_ctx : hp.n_ctx_train;
    cp.n_seq_max = std::max<uint32_t>(1, params.n_seq_max);
    cp.n_batch = std::max<uint32_t>(1, std::min(params.n_batch, cp.n_ctx));
    cp.n_ubatch = std::max<uint32_t>(1, std::min(params.n_ubatch, cp.n_batch));
    cp.n_threads = std::max(1, params.n_threads);
    cp.n_threads_batch = std::max(1, params.n_threads_batch);
    cp.flash_attn = params.flash_attn_type != LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.fused_moe = params.fused_moe;
    cp.mla = params.mla < 0 ? 3 : params.mla;
    cp.attn_max_batch = params.attn_max_batch;
    cp.ser_n_min = params.ser_n_min;
    cp.ser_threshold = params.ser_threshold;
    cp.rope_freq_base = params.rope_freq_base;
    cp.rope_freq_scale = params.rope_freq_scale;
    cp.swa_full = params.swa_full;
    cp.reduce_type = params.graph_reduce_type;
    if (cp.reduce_type != GGML_TYPE_F32 && cp.reduce_type != GGML_TYPE_F16 && cp.reduce_type != GGML_TYPE_BF16) {
        delete ctx;
        llama_set_last_error("graph_reduce_type must be f32, f16 or bf16");
        LLAMA_LOG_ERROR("llama_init_from_model: graph_reduce_type must be f32, f16 or bf16\n");
        return nullptr;
    }
    cp.reduce_form = params.graph_reduce_form;
    if (cp.reduce_form != LLAMA_GRAPH_REDUCE_GATHER && cp.reduce_form != LLAMA_GRAPH_REDUCE_RING &&
        cp.reduce_form != LLAMA_GRAPH_REDUCE_COLLECTIVE && cp.reduce_form != LLAMA_GRAPH_REDUCE_AUTO) {
        delete ctx;
        llama_set_last_error("graph_reduce_form must be auto, collective, gather or ring");
        LLAMA_LOG_ERROR("llama_init_from_model: graph_reduce_form must be auto, collective, gather or ring\n");
        return nullptr;
    }
    if (params.op_offload && params.op_offload_min_batch < 1) {
        delete ctx;
        llama_set_last_error("op_offload_min_batch (--op-offload-min-batch) must be at least 1");
        LLAMA_LOG_ERROR("llama_init_from_model: op_offload_min_batch (--op-offload-min-batch) must be at least 1, not %d\n",
                        params.op_offload_min_batch);
        return nullptr;
    }
    for (const auto & parts : model->shards) {
        for (const llama_layer_shard & s : parts) {
            if (cp.ser_n_min > 0 && s.w.ffn_up_exps && s.w.ffn_up_exps->ne[2] < (int64_t) hp.n_expert) {
                delete ctx;
                llama_set_last_error("-ser (smart expert reduction) cannot be combined with experts split whole across devices "
                                     "(--moe-split experts)");
                LLAMA_LOG_ERROR("llama_init_from_model: %s\n", llama_last_error());
                return nullptr;
            }
        }
    }
    ctx->no_perf = params.no_perf;
    cp.embeddings = params.embeddings;
    ctx->cb_eval = params.cb_eval;
    ctx->cb_eval_user_data = params.cb_eval_user_data;

    if (model->arch->adjust_cparams) model->arch->adjust_cparams(*model, cp);
    std::vector<llama_kv_layer_shape> shapes;
    if (model->arch->kv_shapes) {
        model->arch->kv_shapes(*model, cp, shapes);
    } else {
        shapes = llama_kv_default_shapes(hp);
    }
    bool has_v = false;
    for (const auto & s : shapes) has_v |= s.n_embd_v > 0;
    auto fail = [&](const std::string & msg) {
        llama_set_last_error(msg);
        LLAMA_LOG_ERROR("llama_init_from_model: %s\n", msg.c_str());
        delete ctx;
        return nullptr;
    };
    if (has_v && !cp.flash_attn && ggml_is_quantized(params.type_v)) {
        return fail(llama_format("a quantized V cache (%s) needs flash attention (-fa on)", ggml_type_name(params.type_v)));
    }
    if (!has_v && !cp.flash_attn && ggml_is_quantized(params.type_k)) {
        return fail(llama_format("this model reads V from the K cache: a quantized K cache (%s) needs flash attention (-fa on)",
                                 ggml_type_name(params.type_k)));
    }
    if (has_v && (hp.n_embd_head_k % ggml_blck_size(params.type_k) != 0 || hp.n_embd_head_v % ggml_blck_size(params.type_v) != 0)) {
        return fail(llama_format("KV cache types %s/%s need head sizes that are multiples of their block (heads are %u/%u)",
                                 ggml_type_name(params.type_k), ggml_type_name(params.type_v), hp.n_embd_head_k, hp.n_embd_head_v));
    }
    // Sliding-window layers get a cache of their own holding each sequence's window and a
    // micro-batch, when that is smaller than the context (and --swa-full does not ask for all).
    uint32_t n_swa_layers = 0;
    for (uint32_t il = 0; il < hp.n_layer; ++il) n_swa_layers += hp.is_swa(il);
    const uint32_t swa_cells = (uint32_t) std::min<uint64_t>(cp.n_ctx, ((uint64_t) cp.n_seq_max * hp.n_swa + cp.n_ubatch + 31) / 32 * 32);
    std::string err;
    // each layer's cache and state live with its weights; a cut layer's heads with their shard
    std::vector<ggml_backend_buffer_type_t> layer_buft = model->layer_buft;
    if (!model->shards.empty()) {
        if (shapes.size() != hp.n_layer) return fail("-sm graph: the KV cache does not have one entry per layer");
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            const auto & parts = model->shards[il];
            // a layer whose attention an -ot rule kept whole keeps its own entry
            if (std::none_of(parts.begin(), parts.end(), [](const llama_layer_shard & s) { return s.n_head_kv > 0; })) continue;
            const llama_kv_layer_shape whole = shapes[il];
            shapes[il] = llama_kv_layer_shape{};
            for (const llama_layer_shard & s : model->shards[il]) {
                if (s.n_head_kv == 0) continue;
                llama_kv_layer_shape part = whole;
                if (whole.n_embd_v > 0 || whole.n_head_k > 1) {   // per-head rows: the part's heads; a shared latent row: all of it
                    part.n_embd_k = s.n_head_kv * whole.head_dim_k;
                    part.n_embd_v = whole.n_embd_v / whole.n_head_k * s.n_head_kv;
                    part.n_head_k = s.n_head_kv;
                }
                part.layer = (int32_t) il;
                GGML_ASSERT(shapes.size() == s.kv_slot);
                shapes.push_back(part);
                layer_buft.push_back(ggml_backend_dev_buffer_type(model->devices[s.device]));
            }
        }
    }
    const std::vector<ggml_backend_buffer_type_t> * where = model->devices.empty() || !params.offload_kqv ? nullptr : &layer_buft;
    if (n_swa_layers > 0 && !cp.swa_full && swa_cells < cp.n_ctx) {
        std::vector<llama_kv_layer_shape> global = shapes, window = shapes;
        for (size_t i = 0; i < shapes.size(); ++i) {
            (hp.is_swa(shapes[i].layer >= 0 ? (uint32_t) shapes[i].layer : (uint32_t) i) ? global : window)[i] = llama_kv_layer_shape{};
        }
        if (!ctx->kv.init(global, cp.n_ctx, cp.n_seq_max, params.type_k, params.type_v, err, where)) return fail(err);
        if (!ctx->kv_swa.init(window, swa_cells, cp.n_seq_max, params.type_k, params.type_v, err, where)) return fail(err);
    } else if (!ctx->kv.init(shapes, cp.n_ctx, cp.n_seq_max, params.type_k, params.type_v, err, where)) {
        return fail(err);
    }
    if (model->arch->recurrent_shapes) {
        std::vector<llama_recurrent_layer_shape> rshapes;
        model->arch->recurrent_shapes(*model, rshapes);
        // a cut delta-net layer's state lives with its parts, each with its value heads' rows
        std::vector<ggml_backend_buffer_type_t> rs_buft = model->layer_buft;
        for (uint32_t il = 0; il < hp.n_layer && !model->shards.empty(); ++il) {
            const auto & parts = model->shards[il];
            if (rshapes[il].n_ssm == 0 || std::none_of(parts.begin(), parts.end(), [](const llama_layer_shard & s) { return s.n_head > 0; })) {
                continue;
            }
            const llama_recurrent_layer_shape whole = rshapes[il];
            rshapes[il] = {};
            for (const llama_layer_shard & s : model->shards[il]) {
                if (s.n_head == 0) continue;
                // the convolution window of the part's channels (its conv1d rows)
                llama_recurrent_layer_shape part;
                part.n_conv = (uint32_t) ((hp.ssm_d_conv - 1) * s.w.ssm_conv1d->ne[1]);
                part.n_ssm = whole.n_ssm / hp.ssm_dt_rank * s.n_head;
                GGML_ASSERT(rshapes.size() == s.rs_slot);
                rshapes.push_back(part);
                rs_buft.push_back(ggml_backend_dev_buffer_type(model->devices[s.device]));
            }
        }
        cp.n_ctx_checkpoints = params.n_ctx_checkpoints;
        if (!ctx->rs.init(rshapes, cp.n_seq_max, cp.n_ctx_checkpoints, err, where ? &rs_buft : nullptr)) return fail(err);
    }
    ctx->cpu = ggml_backend_cpu_init();
    std::vector<ggml_backend_t> backends;
    for (ggml_backend_dev_t d : model->devices) {
        ggml_backend_t b = ggml_backend_dev_init(d);
        if (!b) return fail(llama_format("cannot start a backend on device %s", ggml_backend_dev_name(d)));
        ctx->device_backends.push_back(b);
        backends.push_back(b);
    }
    backends.push_back(ctx->cpu);
    ctx->set_threads(cp.n_threads);
    // -sm graph's all-reduce: the devices' collective when their backends offer one (auto), else
    // the gather form; the collective asked for where there is none is refused
    if (cp.reduce_form == LLAMA_GRAPH_REDUCE_AUTO || cp.reduce_form == LLAMA_GRAPH_REDUCE_COLLECTIVE) {
        const bool offered = ctx->device_backends.size() >= 2 &&
                             ggml_backend_all_reduce_supported(ctx->device_backends.data(), (int) ctx->device_backends.size());
        if (cp.reduce_form == LLAMA_GRAPH_REDUCE_COLLECTIVE && !offered && !model->shards.empty()) {
            return fail("graph_reduce_form collective: the devices' backends offer no all-reduce (CPU devices, or distinct "
                        "GPUs in a KILN_NCCL build, have one); use gather or ring");
        }
        cp.reduce_form = offered ? LLAMA_GRAPH_REDUCE_COLLECTIVE : LLAMA_GRAPH_REDUCE_GATHER;
    }
    ctx->graph_size = std::max<size_t>(GGML_DEFAULT_GRAPH_SIZE, 96 * hp.n_layer + 256);
    if (!model->shards.empty()) {
        // two all-reduces per cut layer; the ring form takes about 8 nodes per device and chunk
        const size_t P = model->devices.size();
        ctx->graph_size += (size_t) hp.n_layer * 2 * 8 * P * P;
    }
    // the warm-up (llama_set_warmup) routes to every expert: each MoE layer's weighted sum is a
    // chain of n_expert adds, on every device of a -sm graph split
    ctx->graph_size += (size_t) hp.n_layer * hp.n_expert * (model->shards.empty() ? 1 : model->devices.size());
    ctx->sched = ggml_backend_sched_new(backends.data(), (int) backends.size(), ctx->graph_size);
    if (params.op_offload && !ctx->device_backends.empty()) {
        // the reference's hybrid rule: from 32 tokens on (by default), copying an expert tensor to
        // the GPU costs less than the CPU's product; below, the CPU computes where the weights are.
        // Where the break-even lies depends on the bus, the GPU and the CPU, hence the parameter.
        const int main = std::max(model->main_device, 0);
        ggml_backend_sched_set_offload(ctx->sched, ctx->device_backends[main], params.op_offload_min_batch);
        LLAMA_LOG_INFO("llama_init_from_model: products of weights in host memory run on %s for batches of %d tokens or "
                       "more (--op-offload-min-batch), on the CPU below\n",
                       ggml_backend_name(ctx->device_backends[main]), params.op_offload_min_batch);
    }
    ctx->graph_mem.resize(ggml_tensor_overhead() * ctx->graph_size + ggml_graph_overhead_custom(ctx->graph_size) + 4096);

    LLAMA_LOG_INFO("llama_init_from_model: n_ctx = %u, n_batch = %u, n_ubatch = %u, flash_attn = %d, n_seq_max = %u\n",
                   cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.flash_attn ? 1 : 0, cp.n_seq_max);
    if (!model->shards.empty() && model->main_device >= 0) {
        const char * mg = ggml_backend_dev_name(model->devices[model->main_device]);
        std::string how;
        if (cp.reduce_form == LLAMA_GRAPH_REDUCE_COLLECTIVE) {
            how = llama_format("collective, %s: every device holds the sum, read on %s",
                               ggml_backend_is_cpu(ctx->device_backends[0]) ? "the CPU's sum over CPU devices" : "NCCL over distinct GPUs", mg);
        } else if (cp.reduce_form == LLAMA_GRAPH_REDUCE_RING) {
            how = llama_format("ring: reduced around the devices, the pieces gathered on %s", mg);
        } else {
            how = llama_format("gather: the partial sums copied to %s and added there%s", mg,
                               params.graph_reduce_form == LLAMA_GRAPH_REDUCE_AUTO ? " (the devices offer no collective)" : "");
        }
        LLAMA_LOG_INFO("llama_init_from_model: -sm graph all-reduce: %s; %s on the wire\n", how.c_str(), ggml_type_name(cp.reduce_type));
    }
    if (hp.n_expert > 0) {
        if (cp.ser_n_min > 0) {
            LLAMA_LOG_INFO("llama_init_from_model: fused_moe = %d, smart expert reduction: at least %d of %u experts, "
                           "threshold %g\n", cp.fused_moe ? 1 : 0, cp.ser_n_min, hp.n_expert_used, cp.ser_threshold);
        } else {
            LLAMA_LOG_INFO("llama_init_from_model: fused_moe = %d, smart expert reduction off\n", cp.fused_moe ? 1 : 0);
        }
    }
    if (!has_v) {
        LLAMA_LOG_INFO("llama_init_from_model: KV cache %s, MLA mode %d: latent cache of %u values per token and layer, "
                       "%.2f MiB (%.1f KiB per token)\n",
                       ggml_type_name(params.type_k), cp.mla, latent_row(shapes), ctx->kv.bytes() / 1048576.0,
                       ctx->kv.bytes() / 1024.0 / std::max<uint32_t>(cp.n_ctx, 1));
    } else {
        LLAMA_LOG_INFO("llama_init_from_model: KV cache %s/%s, %.2f MiB (%.1f KiB per token)\n", ggml_type_name(params.type_k),
                       ggml_type_name(params.type_v), (ctx->kv.bytes() + ctx->kv_swa.bytes()) / 1048576.0,
                       (ctx->kv.bytes() + ctx->kv_swa.bytes()) / 1024.0 / std::max<uint32_t>(cp.n_ctx, 1));
    }
    if (n_swa_layers > 0) {
        // what keeping only the window saves: the window layers' rows for the cells it drops
        const double swa_full_mib = ctx->has_kv_swa() ? ctx->kv_swa.bytes() / 1048576.0 * cp.n_ctx / ctx->kv_swa.size : 0.0;
        if (ctx->has_kv_swa()) {
            LLAMA_LOG_INFO("llama_init_from_model: sliding window %u: %u of %u layers keep %u cells (%.2f MiB instead of "
                           "%.2f MiB with --swa-full), the others %u\n", hp.n_swa, n_swa_layers, hp.n_layer,
                           ctx->kv_swa.size, ctx->kv_swa.bytes() / 1048576.0, swa_full_mib, cp.n_ctx);
        } else {
            LLAMA_LOG_INFO("llama_init_from_model: sliding window %u: %u of %u layers keep every cell (%s)\n", hp.n_swa,
                           n_swa_layers, hp.n_layer, cp.swa_full ? "--swa-full" : "the window and a batch fill the context");
        }
    }
    if (ctx->rs.active()) {
        size_t conv = 0, ssm = 0;
        for (const auto & sh : ctx->rs.shapes) {
            conv += sh.n_conv * sizeof(float);
            ssm += sh.n_ssm * sizeof(float);
        }
        LLAMA_LOG_INFO("llama_init_from_model: recurrent state f32, %.2f MiB per sequence (convolution %.1f KiB, delta rule "
                       "%.1f KiB), %.2f MiB for %u sequence(s); %u checkpoint(s) per sequence\n",
                       ctx->rs.bytes_per_seq() / 1048576.0, conv / 1024.0, ssm / 1024.0, ctx->rs.bytes() / 1048576.0,
                       cp.n_seq_max, cp.n_ctx_checkpoints);
    }
    // size the compute buffer with the worst case: a full micro-batch attending to the whole cache
    if (!ctx->reserve()) return fail("cannot allocate the compute buffer");
    llama_log_memory_report(*ctx);
    ctx->t_start_us = ggml_time_us();
    return ctx;
}

void llama_free(llama_context * ctx) { delete ctx; }

uint32_t llama_n_ctx(const llama_context * ctx) { return ctx->cparams.n_ctx; }
uint32_t llama_n_batch(const llama_context * ctx) { return ctx->cparams.n_batch; }
uint32_t llama_n_ubatch(const llama_context * ctx) { return ctx->cparams.n_ubatch; }
uint32_t llama_n_seq_max(const llama_context * ctx) { return ctx->cparams.n_seq_max; }
const llama_model * llama_get_model(const llama_context * ctx) { return &ctx->model; }

void llama_set_n_threads(llama_context * ctx, int32_t n_threads, int32_t n_threads_batch) {
    ctx->cparams.n_threads = std::max(1, n_threads);
    ctx->cparams.n_threads_batch = std::max(1, n_threads_batch);
}

void llama_set_warmup(llama_context * ctx, bool warmup) { ctx->cparams.warmup = warmup; }

llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max) {
    llama_batch b{};
    if (embd) {
        b.embd = (float *) std::calloc((size_t) n_tokens * embd, sizeof(float));
    } else {
        b.token = (llama_token *) std::calloc(n_tokens, sizeof(llama_token));
    }
    b.pos = (llama_pos *) std::calloc(n_tokens, sizeof(llama_pos));
    b.n_seq_id = (int32_t *) std::calloc(n_tokens, sizeof(int32_t));
    b.seq_id = (llama_seq_id **) std::calloc(n_tokens + 1, sizeof(llama_seq_id *));
    for (int32_t i = 0; i < n_tokens; ++i) b.seq_id[i] = (llama_seq_id *) std::calloc(n_seq_max, sizeof(llama_seq_id));
    b.logits = (int8_t *) std::calloc(n_tokens, 1);
    return b;
}

void llama_batch_free(llama_batch b) {
    std::free(b.token);
    std::free(b.embd);
    std::free(b.pos);
    std::free(b.n_seq_id);
    if (b.seq_id) {
        for (int32_t i = 0; b.seq_id[i]; ++i) std::free(b.seq_id[i]);
        std::free(b.seq_id);
    }
    std::free(b.logits);
}

llama_batch llama_batch_get_one(llama_token * tokens, int32_t n_tokens) {
    llama_batch b{};
    b.n_tokens = n_tokens;
    b.token = tokens;
    return b;
}

int32_t llama_decode(llama_context * ctx, llama_batch batch) {
    try {
        return ctx->decode(batch);
    } catch (const std::exception & e) {
        LLAMA_LOG_ERROR("llama_decode: %s\n", e.what());
        return -1;
    }
}

float * llama_get_logits(llama_context * ctx) { return ctx->logits.empty() ? nullptr : ctx->logits.data(); }

// Row of batch index i (negative: from the end) among the last batch's outputs; -1 if none.
static int32_t output_row(const llama_context * ctx, int32_t i, const char * who) {
    const int32_t n_batch = (int32_t) ctx->output_of.size();
    if (i < 0) return ctx->n_outputs + i >= 0 ? ctx->n_outputs + i : -1;
    if (i >= n_batch || ctx->output_of[i] < 0) {
        LLAMA_LOG_ERROR("%s: no output for batch index %d\n", who, i);
        return -1;
    }
    return ctx->output_of[i];
}

float * llama_get_embeddings_ith(llama_context * ctx, int32_t i) {
    if (!ctx->cparams.embeddings) {
        LLAMA_LOG_ERROR("llama_get_embeddings_ith: the context was not created with embeddings on\n");
        return nullptr;
    }
    const int32_t row = output_row(ctx, i, "llama_get_embeddings_ith");
    if (row < 0) return nullptr;
    return ctx->embd.data() + (size_t) row * ctx->model.hparams.n_embd;
}

float * llama_get_logits_ith(llama_context * ctx, int32_t i) {
    if (ctx->cparams.embeddings) return nullptr;
    const int32_t row = output_row(ctx, i, "llama_get_logits_ith");
    if (row < 0) return nullptr;
    return ctx->logits.data() + (size_t) row * ctx->model.hparams.n_vocab;
}

// The recurrent state (when the model has one) decides whether an edit is possible: it refuses
// what it cannot do, and then the KV caches are left as they were too.
void llama_memory_clear(llama_context * ctx) {
    ctx->kv.clear();
    ctx->kv_swa.clear();
    if (ctx->rs.active()) ctx->rs.clear();
}

bool llama_memory_seq_rm(llama_context * ctx, llama_seq_id seq, llama_pos p0, llama_pos p1) {
    if (ctx->has_kv_swa() && p0 > 0) {
        // what stays must still hold the window before p0 for every sliding-window layer: a
        // cell freed there cannot be brought back
        const llama_pos lo = std::max<llama_pos>(0, p0 - (llama_pos) ctx->model.hparams.n_swa + 1);
        for (llama_seq_id s = seq < 0 ? 0 : seq; s < (seq < 0 ? (llama_seq_id) ctx->cparams.n_seq_max : seq + 1); ++s) {
            if (ctx->kv_swa.seq_count(s, lo, p0) != ctx->kv.seq_count(s, lo, p0)) {
                LLAMA_LOG_WARN("llama_memory_seq_rm: sequence %d cannot go back to position %d: the sliding-window layers "
                               "no longer hold positions before it (--swa-full keeps them)\n", s, p0);
                return false;
            }
        }
    }
    if (ctx->rs.active() && !ctx->rs.seq_rm(seq, p0, p1)) return false;
    ctx->kv_swa.seq_rm(seq, p0, p1);
    return ctx->kv.seq_rm(seq, p0, p1);
}

void llama_memory_seq_cp(llama_context * ctx, llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    if (ctx->rs.active() && !ctx->rs.seq_cp(src, dst, p0, p1)) return;
    ctx->kv.seq_cp(src, dst, p0, p1);
    ctx->kv_swa.seq_cp(src, dst, p0, p1);
}

void llama_memory_seq_keep(llama_context * ctx, llama_seq_id seq) {
    ctx->kv.seq_keep(seq);
    ctx->kv_swa.seq_keep(seq);
    if (ctx->rs.active()) ctx->rs.seq_keep(seq);
}

void llama_memory_seq_add(llama_context * ctx, llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta) {
    ctx->kv.seq_add(seq, p0, p1, delta);
    ctx->kv_swa.seq_add(seq, p0, p1, delta);
    if (ctx->rs.active()) ctx->rs.seq_add(seq, p0, p1, delta);
}
bool llama_memory_can_shift(const llama_context * ctx, const char ** why) {
    const char * reason = nullptr;
    if (ctx->rs.active()) {
        reason = "the model keeps a recurrent state, which cannot forget the dropped tokens";
    } else {
        for (const llama_kv_cache * kv : { &ctx->kv, &ctx->kv_swa }) {
            for (size_t il = 0; il < kv->shapes.size() && il < kv->k_l.size() && !reason; ++il) {
                // a row with keys but no RoPE'd part: its positions cannot be rotated
                if (kv->k_l[il] && kv->shapes[il].n_rot == 0) reason = "the cached keys have no RoPE'd part to shift";
            }
        }
    }
    if (why) *why = reason ? reason : "";
    return reason == nullptr;
}
llama_pos llama_memory_seq_pos_resume(llama_context * ctx, llama_seq_id seq, llama_pos p) {
    return ctx->rs.active() ? ctx->rs.resume_pos(seq, p) : std::max<llama_pos>(p, 0);
}
llama_pos llama_memory_seq_pos_min(llama_context * ctx, llama_seq_id seq) { return ctx->kv.seq_pos_min(seq); }
llama_pos llama_memory_seq_pos_max(llama_context * ctx, llama_seq_id seq) { return ctx->kv.seq_pos_max(seq); }
int32_t llama_memory_n_used(llama_context * ctx) { return (int32_t) ctx->kv.used; }
size_t  llama_memory_size_bytes(llama_context * ctx) { return ctx->kv.bytes() + ctx->kv_swa.bytes() + ctx->rs.bytes(); }

llama_perf_context_data llama_perf_context(const llama_context * ctx) {
    llama_perf_context_data d{};
    d.t_start_ms = ctx->t_start_us / 1000.0;
    d.t_load_ms = ctx->model.t_load_us / 1000.0;
    d.t_p_eval_ms = ctx->t_p_eval_us / 1000.0;
    d.t_eval_ms = ctx->t_eval_us / 1000.0;
    d.n_p_eval = ctx->n_p_eval;
    d.n_eval = ctx->n_eval;
    return d;
}

void llama_perf_context_reset(llama_context * ctx) {
    ctx->t_p_eval_us = ctx->t_eval_us = 0;
    ctx->n_p_eval = ctx->n_eval = 0;
}

} // extern "C"
