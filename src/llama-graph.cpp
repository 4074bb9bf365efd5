#include "llama-graph.h"

#include "llama-all-reduce.h"

#include <cmath>

llm_graph_context::llm_graph_context(const llama_model & m, const llama_cparams & c, const llama_ubatch & u,
                                     llama_kv_cache & k, ggml_context * ctx, ggml_cgraph * g, llama_kv_cache * k_swa,
                                     llama_recurrent_state * r)
    : model(m), hp(m.hparams), cp(c), ub(u), kv(k), kv_swa(k_swa), rs(r), ctx0(ctx), gf(g) {
    n_tokens = u.n_tokens;
    n_kv = k.n_kv();
    n_kv_swa = k_swa ? k_swa->n_kv() : n_kv;
    n_outputs = (int64_t) u.out_rows.size();
    freq_base = c.rope_freq_base > 0 ? c.rope_freq_base : hp.rope_freq_base;
    freq_scale = c.rope_freq_scale > 0 ? c.rope_freq_scale : hp.rope_freq_scale;
}

ggml_tensor * llm_graph_context::build_inp_embd() {
    inp_tokens = ggml_new_tensor_1d(ctx0, GGML_TYPE_I32, n_tokens);
    ggml_set_name(inp_tokens, "inp_tokens");
    ggml_set_input(inp_tokens);
    ggml_tensor * x = ggml_get_rows(ctx0, model.tok_embd, inp_tokens);
    return hp.f_embedding_scale > 0.0f ? ggml_scale(ctx0, x, hp.f_embedding_scale) : x;
}

ggml_tensor * llm_graph_context::build_inp_pos() {
    if (!inp_pos) {
        inp_pos = ggml_new_tensor_1d(ctx0, GGML_TYPE_I32, n_tokens);
        ggml_set_name(inp_pos, "inp_pos");
        ggml_set_input(inp_pos);
    }
    return inp_pos;
}

ggml_tensor * llm_graph_context::build_norm(ggml_tensor * cur, ggml_tensor * w, ggml_tensor * b, bool rms, int il) {
    (void) il;
    cur = rms ? ggml_rms_norm(ctx0, cur, hp.f_norm_rms_eps) : ggml_norm(ctx0, cur, hp.f_norm_eps);
    if (w) cur = ggml_mul(ctx0, cur, w);
    if (b) cur = ggml_add(ctx0, cur, b);
    return cur;
}

ggml_tensor * llm_graph_context::build_inp_rs_slots() {
    GGML_ASSERT(rs && rs->active() && "build_inp_rs_slots: the context has no recurrent state");
    if (!inp_rs_slots) {
        inp_rs_slots = ggml_new_tensor_1d(ctx0, GGML_TYPE_I32, n_tokens);
        ggml_set_name(inp_rs_slots, "inp_rs_slots");
        ggml_set_input(inp_rs_slots);
    }
    return inp_rs_slots;
}

ggml_tensor * llm_graph_context::build_rope(ggml_tensor * x, int n_rot, int il) {
    if (hp.rope_type & GGML_ROPE_TYPE_MROPE) {
        if (!inp_pos_multi) {
            inp_pos_multi = ggml_new_tensor_1d(ctx0, GGML_TYPE_I32, 4 * n_tokens);
            ggml_set_name(inp_pos_multi, "inp_pos_multi");
            ggml_set_input(inp_pos_multi);
        }
        return ggml_rope_multi(ctx0, x, inp_pos_multi, nullptr, n_rot, hp.rope_sections, hp.rope_type,
                               (int) hp.n_ctx_orig_yarn, freq_base, freq_scale, hp.yarn_ext_factor, hp.yarn_attn_factor,
                               hp.yarn_beta_fast, hp.yarn_beta_slow);
    }
    // --rope-freq-base/scale override the global layers' values only, as in llama.cpp
    const bool swa = il >= 0 && hp.is_swa((uint32_t) il);
    return ggml_rope_ext(ctx0, x, build_inp_pos(), nullptr, n_rot, hp.rope_type, (int) hp.n_ctx_orig_yarn,
                         swa ? hp.rope_freq_base_swa : freq_base, swa ? hp.rope_freq_scale_swa : freq_scale,
                         hp.yarn_ext_factor, hp.yarn_attn_factor, hp.yarn_beta_fast, hp.yarn_beta_slow);
}

ggml_tensor * llm_graph_context::build_lin(ggml_tensor * w, ggml_tensor * b, ggml_tensor * x) {
    ggml_tensor * r = ggml_mul_mat(ctx0, w, x);
    return b ? ggml_add(ctx0, r, b) : r;
}

ggml_tensor * llm_graph_context::build_const(std::vector<float> data, int64_t ne0, int64_t ne1, int64_t ne2) {
    GGML_ASSERT((int64_t) data.size() == ne0 * ne1 * ne2);
    ggml_tensor * t = ggml_new_tensor_3d(ctx0, GGML_TYPE_F32, ne0, ne1, ne2);
    ggml_set_input(t);
    const_inputs.emplace_back(t, std::move(data));
    return t;
}

ggml_tensor * llm_graph_context::build_kv_store(ggml_tensor * cache, ggml_tensor * rows, bool swa_cache) {
    if (swa_cache && !inp_kv_idx_swa) {
        inp_kv_idx_swa = ggml_new_tensor_1d(ctx0, GGML_TYPE_I64, n_tokens);
        ggml_set_name(inp_kv_idx_swa, "inp_kv_idx_swa");
        ggml_set_input(inp_kv_idx_swa);
    }
    if (!inp_kv_idx) {
        inp_kv_idx = ggml_new_tensor_1d(ctx0, GGML_TYPE_I64, n_tokens);
        ggml_set_name(inp_kv_idx, "inp_kv_idx");
        ggml_set_input(inp_kv_idx);
        inp_mask = ggml_new_tensor_2d(ctx0, GGML_TYPE_F32, n_kv, n_tokens);
        ggml_set_name(inp_mask, "inp_kq_mask");
        ggml_set_input(inp_mask);
    }
    if (!ggml_is_contiguous(rows)) rows = ggml_cont(ctx0, rows);
    ggml_tensor * idx = swa_cache ? inp_kv_idx_swa : inp_kv_idx;
    ggml_tensor * written;
    if (llama_kv_per_head_rows(cache->type)) {
        // [head_dim, n_head, cells] as [head_dim, cells, n_head]: each head's row of a token is
        // written (and quantized, header included) on its own, all heads at the token's cell
        const int64_t hd = cache->ne[0], nh = cache->ne[1];
        ggml_tensor * dst = ggml_view_3d(ctx0, cache, hd, cache->ne[2], nh, cache->nb[2], cache->nb[1], 0);
        ggml_tensor * src = ggml_permute(ctx0, ggml_reshape_3d(ctx0, rows, hd, nh, n_tokens), 0, 2, 1, 3);
        written = ggml_set_rows(ctx0, dst, src, idx);
    } else {
        written = ggml_set_rows(ctx0, cache, ggml_reshape_2d(ctx0, rows, cache->ne[0], n_tokens), idx);
    }
    ggml_build_forward_expand(gf, written);
    return written;
}

ggml_tensor * llm_graph_context::build_attn(int il, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float kq_scale,
                                            ggml_tensor * sinks) {
    const int64_t hd_k = q->ne[0], n_head = q->ne[1];
    const int64_t hd_v = v->ne[0], n_head_kv = k->ne[1];
    const bool swa = hp.is_swa((uint32_t) il);
    const bool own_cache = swa && kv_swa;
    llama_kv_cache & cache = own_cache ? *kv_swa : kv;
    const int64_t n_cells = own_cache ? n_kv_swa : n_kv;
    const int slot = shard ? (int) shard->kv_slot : il;   // a shard's heads have their own cache entry
    ggml_tensor * k_cache = cache.k_l[slot];
    ggml_tensor * v_cache = cache.v_l[slot];
    GGML_ASSERT(v_cache && "build_attn: this layer's cache has no V rows");
    // views of the written caches order the reads after the writes
    ggml_tensor * k_written = build_kv_store(k_cache, k, own_cache);
    ggml_tensor * v_written = build_kv_store(v_cache, v, own_cache);
    const uint32_t size = cache.size;
    ggml_tensor * kc = ggml_view_3d(ctx0, k_written, hd_k, n_cells, n_head_kv, llama_kv_cell_bytes(k_cache, size),
                                    ggml_row_size(k_cache->type, hd_k), 0);
    ggml_tensor * vc = ggml_view_3d(ctx0, v_written, hd_v, n_cells, n_head_kv, llama_kv_cell_bytes(v_cache, size),
                                    ggml_row_size(v_cache->type, hd_v), 0);
    ggml_tensor * mask = nullptr;
    if (swa) {
        if (!inp_mask_swa) {
            inp_mask_swa = ggml_new_tensor_2d(ctx0, GGML_TYPE_F32, n_cells, n_tokens);
            ggml_set_name(inp_mask_swa, "inp_kq_mask_swa");
            ggml_set_input(inp_mask_swa);
        }
        mask = inp_mask_swa;
    }
    ggml_tensor * qp = ggml_permute(ctx0, q, 0, 2, 1, 3);   // [hd, n_tokens, n_head]
    ggml_tensor * out = build_attn_core(qp, kc, vc, kq_scale, nullptr, nullptr, false, mask, sinks);
    return ggml_reshape_2d(ctx0, out, hd_v * n_head, n_tokens);
}

ggml_tensor * llm_graph_context::build_attn_core(ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float kq_scale,
                                                 ggml_tensor * q2, ggml_tensor * k2, bool force_explicit,
                                                 ggml_tensor * mask, ggml_tensor * sinks) {
    const int64_t hd_v = v->ne[0];
    const int64_t n_head = q->ne[2], n_head_kv = k->ne[2];
    if (!mask) mask = inp_mask;
    if (cp.flash_attn && !q2 && !force_explicit) {
        ggml_tensor * out = ggml_flash_attn_ext(ctx0, q, k, v, mask, kq_scale, 0.0f, hp.f_attn_logit_softcap);
        ggml_flash_attn_ext_add_sinks(out, sinks);
        return out;   // [hd_v, n_head, n_tokens]
    }

    // Explicit scores, softmax, weighted values. Heads are processed in groups so the score
    // buffer (n_kv x n_tokens x heads floats) stays under -amb MiB; a group spans whole KV heads.
    const int64_t G = n_head_kv == 1 ? 1 : n_head / n_head_kv;
    int64_t per_group = n_head;
    if (cp.attn_max_batch > 0) {
        const double head_bytes = (double) n_kv * n_tokens * sizeof(float);
        const double cap = (double) cp.attn_max_batch * 1024.0 * 1024.0;
        if (head_bytes * n_head > cap) per_group = std::max<int64_t>(G, (int64_t) (cap / head_bytes) / G * G);
    }
    // V^T with contiguous rows over the cells: [n_kv, hd_v, n_head_kv]
    ggml_tensor * vt = ggml_cont(ctx0, ggml_permute(ctx0, v, 1, 0, 2, 3));
    auto head_view = [&](ggml_tensor * t, int64_t h0, int64_t nh) {
        if (t->ne[2] == 1) return t;   // shared by every head (MQA / MLA latent)
        return ggml_view_3d(ctx0, t, t->ne[0], t->ne[1], nh, t->nb[1], t->nb[2], h0 * t->nb[2]);
    };
    ggml_tensor * out = nullptr;
    for (int64_t h0 = 0; h0 < n_head; h0 += per_group) {
        const int64_t nh = std::min(per_group, n_head - h0);
        const int64_t hk0 = n_head_kv == 1 ? 0 : h0 / G, nhk = n_head_kv == 1 ? 1 : nh / G;
        ggml_tensor * kq = ggml_mul_mat(ctx0, head_view(k, hk0, nhk), per_group == n_head ? q : head_view(q, h0, nh));
        if (q2) kq = ggml_add(ctx0, kq, ggml_mul_mat(ctx0, head_view(k2, hk0, nhk), per_group == n_head ? q2 : head_view(q2, h0, nh)));
        if (hp.f_attn_logit_softcap > 0) {
            kq = ggml_scale(ctx0, kq, kq_scale / hp.f_attn_logit_softcap);
            kq = ggml_tanh(ctx0, kq);
            kq = ggml_scale(ctx0, kq, hp.f_attn_logit_softcap);
            kq = ggml_soft_max_ext(ctx0, kq, mask, 1.0f, 0.0f);
        } else {
            kq = ggml_soft_max_ext(ctx0, kq, mask, kq_scale, 0.0f);
        }
        if (sinks) ggml_soft_max_add_sinks(kq, nh == n_head ? sinks : ggml_view_1d(ctx0, sinks, nh, h0 * sinks->nb[0]));
        ggml_tensor * kqv = ggml_mul_mat(ctx0, head_view(vt, hk0, nhk), kq);   // [hd_v, n_tokens, nh]
        out = out ? ggml_concat(ctx0, out, kqv, 2) : kqv;
    }
    return ggml_cont_3d(ctx0, ggml_permute(ctx0, out, 0, 2, 1, 3), hd_v, n_head, n_tokens);
}

ggml_tensor * llm_graph_context::build_ffn_swiglu(ggml_tensor * cur, ggml_tensor * up, ggml_tensor * gate, ggml_tensor * down) {
    return build_ffn_glu(cur, up, gate, down, GGML_GLU_OP_SWIGLU);
}

ggml_tensor * llm_graph_context::build_ffn_glu(ggml_tensor * cur, ggml_tensor * up, ggml_tensor * gate, ggml_tensor * down,
                                               ggml_glu_op op) {
    ggml_tensor * u = ggml_mul_mat(ctx0, up, cur);
    ggml_tensor * g = ggml_mul_mat(ctx0, gate, cur);
    return ggml_mul_mat(ctx0, down, ggml_glu_split(ctx0, g, u, op));
}

ggml_tensor * llm_graph_context::build_moe_ffn(ggml_tensor * cur, ggml_tensor * gate_inp, ggml_tensor * up_exps,
                                               ggml_tensor * gate_exps, ggml_tensor * down_exps, ggml_tensor * probs_bias,
                                               int64_t n_expert, int64_t n_used, moe_gating gating, bool norm_w,
                                               float w_scale, const moe_extras * ex) {
    const int64_t n_embd = cur->ne[0];
    const moe_extras none;
    if (!ex) ex = &none;
    // warm-up (llama_set_warmup): every expert is chosen, so that one token touches all the
    // weights the later tokens will read; nothing is dropped by smart expert reduction
    if (cp.warmup) n_used = n_expert;
    ggml_tensor * logits = build_lin(gate_inp, ex->gate_inp_b, cur);   // [n_expert, n_tokens]
    ggml_tensor * probs = logits;
    if (gating == MOE_GATING_SIGMOID) probs = ggml_sigmoid(ctx0, logits);
    if (gating == MOE_GATING_SOFTMAX) probs = ggml_soft_max(ctx0, logits);
    // the bias steers the choice only; the weights come from the unbiased probabilities
    ggml_tensor * choice = probs_bias ? ggml_add(ctx0, probs, probs_bias) : probs;
    ggml_tensor * ids = ggml_top_k(ctx0, choice, (int) n_used);   // I32 [n_used, n_tokens]
    ggml_tensor * w = ggml_get_rows(ctx0, ggml_reshape_3d(ctx0, probs, 1, n_expert, n_tokens), ids);   // [1, n_used, n_tokens]
    if (gating == MOE_GATING_SOFTMAX_WEIGHT) {
        w = ggml_reshape_3d(ctx0, ggml_soft_max(ctx0, ggml_reshape_2d(ctx0, w, n_used, n_tokens)), 1, n_used, n_tokens);
    }
    ggml_tensor * w_sum = nullptr;   // [1, n_tokens]: what norm_w divides by
    if (norm_w) {
        ggml_tensor * w2 = ggml_reshape_2d(ctx0, w, n_used, n_tokens);
        w_sum = ggml_clamp(ctx0, ggml_sum_rows(ctx0, w2), 6.103515625e-5f, INFINITY);   // no 0/0
        w = ggml_reshape_3d(ctx0, ggml_div(ctx0, w2, w_sum), 1, n_used, n_tokens);
    }
    if (w_scale != 0.0f && w_scale != 1.0f) w = ggml_scale(ctx0, w, w_scale);

    // smart expert reduction: beyond the ser_n_min strongest experts, drop every expert whose
    // weight together with all weaker ones' is below ser_threshold of the total. Dropped experts
    // get weight 0, and the expert products skip them (ggml_mul_mat_id_set_keep).
    ggml_tensor * keep = nullptr;   // F32 [n_used, n_tokens]: 1 computed, 0 dropped
    if (cp.ser_n_min > 0 && cp.ser_n_min < n_used && !cp.warmup) {
        const float big = 1e30f;
        auto step = [&](ggml_tensor * x) {   // 1 where x >= 0, else 0
            return ggml_clamp(ctx0, ggml_scale_bias(ctx0, x, big, 1.0f), 0.0f, 1.0f);
        };
        ggml_tensor * wj = ggml_reshape_3d(ctx0, w, n_used, 1, n_tokens);   // w[j] along dim 0
        ggml_tensor * zeros = build_const(std::vector<float>((size_t) (n_used * n_used * n_tokens), 0.0f), n_used, n_used, n_tokens);
        // le[j, i] = 1 when w[j] <= w[i]
        ggml_tensor * le = step(ggml_sub(ctx0, ggml_neg(ctx0, ggml_add(ctx0, zeros, wj)), ggml_neg(ctx0, w)));
        ggml_tensor * tail = ggml_sum_rows(ctx0, ggml_mul(ctx0, le, wj));            // [1, n_used, n_tokens]
        ggml_tensor * n_le = ggml_sum_rows(ctx0, le);                                 // how many are not stronger
        ggml_tensor * total = ggml_sum_rows(ctx0, ggml_reshape_2d(ctx0, w, n_used, n_tokens));   // [1, n_tokens]
        ggml_tensor * rel = ggml_div(ctx0, ggml_reshape_2d(ctx0, tail, n_used, n_tokens), total);
        ggml_tensor * keep_mass = step(ggml_scale_bias(ctx0, rel, 1.0f, -cp.ser_threshold));
        // rank from the top = n_used - n_le; among the first ser_n_min when n_le > n_used - ser_n_min
        ggml_tensor * keep_rank = step(ggml_scale_bias(ctx0, ggml_reshape_2d(ctx0, n_le, n_used, n_tokens), 1.0f,
                                                       -(float) (n_used - cp.ser_n_min) - 0.5f));
        keep = ggml_clamp(ctx0, ggml_add(ctx0, keep_mass, keep_rank), 0.0f, 1.0f);
        w = ggml_mul(ctx0, w, ggml_reshape_3d(ctx0, keep, 1, n_used, n_tokens));
    }
    if (up_exps->ne[2] < n_expert) {
        // A -sm graph part holding whole experts e0.. (--moe-split experts): of the experts the
        // router chose (the n_used largest scores), those in its range are the largest scores of
        // its range that reach the n_used-th score of all. Its ids are the top of its own range
        // (local numbers), kept where they reach that score; their weights are normalized by
        // the sum over all the chosen, as above. Pairs not kept weigh 0 and are not computed.
        GGML_ASSERT(gating != MOE_GATING_SOFTMAX_WEIGHT && "an expert split needs weights that do not depend on the other chosen");
        const int64_t e0 = shard ? shard->expert0 : 0, n_local = up_exps->ne[2], k = std::min(n_used, n_local);
        auto local = [&](ggml_tensor * t) {   // rows e0.. of [n_expert, n_tokens] as [1, n_local, n_tokens]
            return ggml_reshape_3d(ctx0, ggml_cont(ctx0, ggml_view_2d(ctx0, t, n_local, n_tokens, t->nb[1], e0 * t->nb[0])), 1,
                                   n_local, n_tokens);
        };
        ggml_tensor * choice_l = local(choice);
        ggml_tensor * ids_l = ggml_top_k(ctx0, ggml_reshape_2d(ctx0, choice_l, n_local, n_tokens), (int) k);   // [k, n_tokens]
        ggml_tensor * chosen = ggml_get_rows(ctx0, ggml_reshape_3d(ctx0, choice, 1, n_expert, n_tokens), ids);   // [1, n_used, T]
        ggml_tensor * last = ggml_cont(ctx0, ggml_view_3d(ctx0, chosen, 1, 1, n_tokens, chosen->nb[1], chosen->nb[2],
                                                          (n_used - 1) * chosen->nb[1]));
        ggml_tensor * margin = ggml_sub(ctx0, ggml_get_rows(ctx0, choice_l, ids_l), last);   // >= 0: chosen
        ggml_tensor * kept = ggml_clamp(ctx0, ggml_scale_bias(ctx0, margin, 1e30f, 1.0f), 0.0f, 1.0f);   // [1, k, T]
        ggml_tensor * w_l = ggml_get_rows(ctx0, local(probs), ids_l);
        if (w_sum) w_l = ggml_div(ctx0, ggml_reshape_2d(ctx0, w_l, k, n_tokens), w_sum);
        if (w_scale != 0.0f && w_scale != 1.0f) w_l = ggml_scale(ctx0, w_l, w_scale);
        GGML_ASSERT(!keep && "smart expert reduction with an expert split is refused at context creation");
        ids = ids_l;
        n_used = k;
        w = ggml_mul(ctx0, ggml_reshape_3d(ctx0, w_l, 1, k, n_tokens), kept);
        keep = ggml_reshape_2d(ctx0, kept, k, n_tokens);
    }
    auto routed = [&](ggml_tensor * product) {
        if (keep) ggml_mul_mat_id_set_keep(product, keep);
        return product;
    };

    // each chosen expert's bias row, [n, n_used, n_tokens]
    ggml_tensor * ids_flat = nullptr;
    auto add_expert_bias = [&](ggml_tensor * y, ggml_tensor * b) {
        if (!b) return y;
        if (!ids_flat) ids_flat = ggml_reshape_1d(ctx0, ids, n_used * n_tokens);
        return ggml_add(ctx0, y, ggml_reshape_3d(ctx0, ggml_get_rows(ctx0, b, ids_flat), b->ne[0], n_used, n_tokens));
    };
    const bool plain = !ex->up_b && !ex->gate_b && ex->swiglu_alpha == 0.0f;
    ggml_tensor * x = ggml_reshape_3d(ctx0, cur, n_embd, 1, n_tokens);
    ggml_tensor * par;
    if (cp.fused_moe && plain) {
        par = routed(ggml_moe_up_gate(ctx0, up_exps, gate_exps, x, ids, GGML_GLU_OP_SWIGLU));   // [n_ff, n_used, n_tokens]
    } else {
        ggml_tensor * up = add_expert_bias(routed(ggml_mul_mat_id(ctx0, up_exps, x, ids)), ex->up_b);
        ggml_tensor * gate = add_expert_bias(routed(ggml_mul_mat_id(ctx0, gate_exps, x, ids)), ex->gate_b);
        if (ex->swiglu_alpha != 0.0f) {
            const float lim = ex->swiglu_limit;
            gate = ggml_clamp(ctx0, gate, -INFINITY, lim);
            up = ggml_scale_bias(ctx0, ggml_clamp(ctx0, up, -lim, lim), 1.0f, 1.0f);
            par = ggml_mul(ctx0, ggml_mul(ctx0, gate, ggml_sigmoid(ctx0, ggml_scale(ctx0, gate, ex->swiglu_alpha))), up);
        } else {
            par = ggml_swiglu_split(ctx0, gate, up);
        }
    }
    ggml_tensor * experts = add_expert_bias(routed(ggml_mul_mat_id(ctx0, down_exps, par, ids)), ex->down_b);   // [n_embd, n_used, n_tokens]
    experts = ggml_mul(ctx0, experts, w);
    ggml_tensor * out = nullptr;
    for (int64_t i = 0; i < n_used; ++i) {
        ggml_tensor * e = ggml_view_2d(ctx0, experts, n_embd, n_tokens, experts->nb[2], i * experts->nb[1]);
        out = out ? ggml_add(ctx0, out, e) : e;
    }
    if (n_used == 1) out = ggml_cont(ctx0, out);
    return out;
}

ggml_tensor * llm_graph_context::build_all_reduce(const std::vector<std::pair<ggml_tensor *, int>> & partials) {
    llama_all_reduce_options opt;
    opt.main_device = model.main_device;
    opt.wire_type = cp.reduce_type;
    opt.form = cp.reduce_form;
    return llama_build_all_reduce(ctx0, partials, opt, pinned);
}

ggml_tensor * llm_graph_context::build_output(ggml_tensor * cur) {
    if (n_outputs < n_tokens) {
        inp_out_ids = ggml_new_tensor_1d(ctx0, GGML_TYPE_I32, n_outputs);
        ggml_set_name(inp_out_ids, "inp_out_ids");
        ggml_set_input(inp_out_ids);
        cur = ggml_get_rows(ctx0, cur, inp_out_ids);
    }
    cur = build_norm(cur, model.output_norm, model.output_norm_b, true);
    if (cp.embeddings) {
        // an embedding context wants the hidden states: the head (n_vocab wide) would be wasted work
        ggml_set_name(cur, "result_norm");
        ggml_set_output(cur);
        return cur;
    }
    ggml_tensor * head = model.output ? model.output : model.tok_embd;
    cur = ggml_mul_mat(ctx0, head, cur);
    ggml_set_name(cur, "result_output");
    ggml_set_output(cur);
    return cur;
}
