#include "llama-delta-net.h"

#include <cmath>

namespace {

std::string blk(uint32_t il, const char * t) { return llama_format("blk.%u.%s", il, t); }

// per recurrent layer: the channels the convolution runs over (q, k and v)
int64_t conv_channels(const llama_hparams & hp) { return (int64_t) hp.ssm_d_inner + 2 * (int64_t) hp.ssm_n_group * hp.ssm_d_state; }
int64_t head_v_dim(const llama_hparams & hp) { return hp.ssm_d_inner / hp.ssm_dt_rank; }

} // namespace

void llm_load_delta_net_hparams(llama_model_loader & ml, llama_hparams & hp) {
    hp.ssm_d_conv = (uint32_t) ml.get_i64(ml.key("%s.ssm.conv_kernel"));
    hp.ssm_d_inner = (uint32_t) ml.get_i64(ml.key("%s.ssm.inner_size"));
    hp.ssm_d_state = (uint32_t) ml.get_i64(ml.key("%s.ssm.state_size"));
    hp.ssm_n_group = (uint32_t) ml.get_i64(ml.key("%s.ssm.group_count"));
    hp.ssm_dt_rank = (uint32_t) ml.get_i64(ml.key("%s.ssm.time_step_rank"));
    hp.full_attn_interval = (uint32_t) ml.get_i64(ml.key("%s.full_attention_interval"));
    auto bad = [&](const char * what) {
        return llama_error(llama_format("%s: %s (conv_kernel %u, inner_size %u, state_size %u, group_count %u, "
                                        "time_step_rank %u, full_attention_interval %u)", ml.path.c_str(), what, hp.ssm_d_conv,
                                        hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_n_group, hp.ssm_dt_rank, hp.full_attn_interval));
    };
    if (hp.ssm_d_conv < 1 || hp.ssm_d_conv > 64 || hp.ssm_d_state == 0 || hp.ssm_n_group == 0 || hp.ssm_dt_rank == 0 ||
        hp.full_attn_interval == 0) {
        throw bad("ssm.* sizes and full_attention_interval must be positive (conv kernel at most 64)");
    }
    if (hp.ssm_d_inner % hp.ssm_dt_rank != 0 || hp.ssm_dt_rank % hp.ssm_n_group != 0) {
        throw bad("ssm.inner_size must split into time_step_rank value heads, a multiple of group_count key heads");
    }
    // full-attention layers: multi-section RoPE when the file gives sections
    if (ml.has(ml.key("%s.rope.dimension_sections"))) {
        const std::vector<int64_t> s = ml.get_per_layer(ml.key("%s.rope.dimension_sections"), 4, 0, true);
        int64_t sum = 0;
        for (int i = 0; i < 4; ++i) {
            if (s[i] < 0 || s[i] > 4096) throw bad("rope.dimension_sections must hold four counts in [0, 4096]");
            hp.rope_sections[i] = (int32_t) s[i];
            sum += s[i];
        }
        if (sum == 0) throw bad("rope.dimension_sections are all 0");
        hp.rope_type = GGML_ROPE_TYPE_IMROPE;
    } else {
        hp.rope_type = GGML_ROPE_TYPE_NEOX;
    }
}

void llm_create_delta_net(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il, llm_delta_net_layout lay) {
    const auto & hp = m.hparams;
    auto & l = m.layers[il];
    const int64_t n_embd = hp.n_embd, n_vh = hp.ssm_dt_rank, d_inner = hp.ssm_d_inner;
    const int64_t n_ch = conv_channels(hp);
    l.attn_norm = ml.create(ctx, blk(il, "attn_norm.weight"), { n_embd });
    if (lay == llm_delta_net_layout::qwen35) {
        l.wqkv = ml.create(ctx, blk(il, "attn_qkv.weight"), { n_embd, n_ch });
        l.wqkv_gate = ml.create(ctx, blk(il, "attn_gate.weight"), { n_embd, d_inner });
        l.ssm_beta = ml.create(ctx, blk(il, "ssm_beta.weight"), { n_embd, n_vh });
        l.ssm_alpha = ml.create(ctx, blk(il, "ssm_alpha.weight"), { n_embd, n_vh });
    } else {
        l.ssm_in = ml.create(ctx, blk(il, "ssm_in.weight"), { n_embd, n_ch + d_inner });
        l.ssm_ba = ml.create(ctx, blk(il, "ssm_ba.weight"), { n_embd, 2 * n_vh });
    }
    l.ssm_conv1d = ml.create(ctx, blk(il, "ssm_conv1d.weight"), { hp.ssm_d_conv, n_ch });
    if (l.ssm_conv1d->type != GGML_TYPE_F32) {
        throw llama_error(llama_format("%s: %s is %s; the convolution reads f32 weights", ml.path.c_str(), l.ssm_conv1d->name,
                                       ggml_type_name(l.ssm_conv1d->type)));
    }
    l.ssm_dt = ml.create(ctx, blk(il, "ssm_dt.bias"), { n_vh });
    l.ssm_a = ml.create(ctx, blk(il, "ssm_a"), { n_vh });
    l.ssm_norm = ml.create(ctx, blk(il, "ssm_norm.weight"), { head_v_dim(hp) });
    l.ssm_out = ml.create(ctx, blk(il, "ssm_out.weight"), { d_inner, n_embd });
}

void llm_create_gated_attn(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il) {
    const auto & hp = m.hparams;
    auto & l = m.layers[il];
    const int64_t n_embd = hp.n_embd, hd = hp.n_embd_head_k;
    l.attn_norm = ml.create(ctx, blk(il, "attn_norm.weight"), { n_embd });
    l.wq = ml.create(ctx, blk(il, "attn_q.weight"), { n_embd, 2 * hd * hp.n_head });   // per head: query, then gate
    l.wk = ml.create(ctx, blk(il, "attn_k.weight"), { n_embd, (int64_t) hp.n_embd_k_gqa() });
    l.wv = ml.create(ctx, blk(il, "attn_v.weight"), { n_embd, (int64_t) hp.n_embd_v_gqa() });
    l.wo = ml.create(ctx, blk(il, "attn_output.weight"), { (int64_t) hp.n_embd_head_v * hp.n_head, n_embd });
    l.attn_q_norm = ml.create(ctx, blk(il, "attn_q_norm.weight"), { hd });
    l.attn_k_norm = ml.create(ctx, blk(il, "attn_k_norm.weight"), { hd });
}

void llm_create_hybrid_mixer(llama_model_loader & ml, llama_model & m, ggml_context * ctx, uint32_t il, llm_delta_net_layout lay) {
    if (m.hparams.is_recurrent(il)) {
        llm_create_delta_net(ml, m, ctx, il, lay);
    } else {
        llm_create_gated_attn(ml, m, ctx, il);
    }
}

void llm_delta_net_kv_shapes(const llama_model & m, const llama_cparams &, std::vector<llama_kv_layer_shape> & out) {
    out = llama_kv_default_shapes(m.hparams);
    for (uint32_t il = 0; il < m.hparams.n_layer; ++il) {
        if (m.hparams.is_recurrent(il)) out[il] = {};
    }
}

void llm_delta_net_recurrent_shapes(const llama_model & m, std::vector<llama_recurrent_layer_shape> & out) {
    const auto & hp = m.hparams;
    out.assign(hp.n_layer, {});
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        if (!hp.is_recurrent(il)) continue;
        out[il].n_conv = (uint32_t) ((hp.ssm_d_conv - 1) * conv_channels(hp));
        out[il].n_ssm = (uint32_t) ((int64_t) hp.ssm_d_state * head_v_dim(hp) * hp.ssm_dt_rank);
    }
}

ggml_tensor * llm_build_delta_net(llm_graph_context & g, int il, ggml_tensor * x, llm_delta_net_layout lay) {
    const auto & hp = g.hp;
    const auto & l = g.layer(il);
    ggml_context * ctx = g.ctx0;
    // a -sm graph part holds some of the value heads: with qwen35's layout, and every key head; with
    // qwen3next's, whole key heads with their value heads
    const int64_t T = g.n_tokens, d_k = hp.ssm_d_state, n_vh = l.ssm_dt->ne[0];
    const int64_t n_kh = lay == llm_delta_net_layout::qwen3next ? n_vh / (hp.ssm_dt_rank / hp.ssm_n_group) : hp.ssm_n_group;
    const int64_t d_v = head_v_dim(hp), n_ch = 2 * n_kh * d_k + n_vh * d_v;
    const int slot = g.shard ? (int) g.shard->rs_slot : il;
    const float eps = hp.f_norm_rms_eps;

    ggml_tensor * qkv, * z, * beta, * alpha;
    if (lay == llm_delta_net_layout::qwen35) {
        qkv = ggml_mul_mat(ctx, l.wqkv, x);          // [n_ch, T]: q heads, k heads, v heads
        z = ggml_mul_mat(ctx, l.wqkv_gate, x);       // [d_inner, T]
        beta = ggml_mul_mat(ctx, l.ssm_beta, x);     // [n_vh, T]
        alpha = ggml_mul_mat(ctx, l.ssm_alpha, x);
    } else {
        // per key head: q (d_k), k (d_k), its value heads' v, then their z; and betas, alphas
        const int64_t r = n_vh / n_kh;
        ggml_tensor * qkvz = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.ssm_in, x), 2 * d_k + 2 * r * d_v, n_kh, T);
        const size_t es = sizeof(float);
        auto part = [&](int64_t offs, int64_t n) {
            return ggml_cont_3d(ctx, ggml_view_3d(ctx, qkvz, n, n_kh, T, qkvz->nb[1], qkvz->nb[2], offs * es), n * n_kh, T, 1);
        };
        qkv = ggml_concat(ctx, ggml_concat(ctx, part(0, d_k), part(d_k, d_k), 0), part(2 * d_k, r * d_v), 0);
        qkv = ggml_reshape_2d(ctx, qkv, n_ch, T);
        z = ggml_reshape_2d(ctx, part(2 * d_k + r * d_v, r * d_v), n_vh * d_v, T);
        ggml_tensor * ba = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.ssm_ba, x), 2 * r, n_kh, T);
        beta = ggml_cont_2d(ctx, ggml_view_3d(ctx, ba, r, n_kh, T, ba->nb[1], ba->nb[2], 0), n_vh, T);
        alpha = ggml_cont_2d(ctx, ggml_view_3d(ctx, ba, r, n_kh, T, ba->nb[1], ba->nb[2], r * es), n_vh, T);
    }
    beta = ggml_sigmoid(ctx, beta);
    // log-decay per value head: -exp(A_log) * softplus(alpha + dt_bias); ssm_a holds -exp(A_log)
    ggml_tensor * decay = ggml_mul(ctx, ggml_softplus(ctx, ggml_add(ctx, alpha, l.ssm_dt)), l.ssm_a);

    ggml_tensor * slots = g.build_inp_rs_slots();
    ggml_tensor * conv = ggml_silu(ctx, ggml_ssm_conv(ctx, qkv, l.ssm_conv1d, g.rs->conv_l[slot], slots));   // [n_ch, T]
    const size_t es = ggml_element_size(conv);
    ggml_tensor * q = ggml_view_3d(ctx, conv, d_k, n_kh, T, d_k * es, conv->nb[1], 0);
    ggml_tensor * k = ggml_view_3d(ctx, conv, d_k, n_kh, T, d_k * es, conv->nb[1], d_k * n_kh * es);
    ggml_tensor * v = ggml_view_3d(ctx, conv, d_v, n_vh, T, d_v * es, conv->nb[1], 2 * d_k * n_kh * es);
    q = ggml_l2_norm(ctx, q, eps);
    k = ggml_l2_norm(ctx, k, eps);
    // The kernel pairs value head h with key head h % n_kh, the order qwen35 files store. Qwen3-Next
    // keeps a key head's value heads together (h = kh * r + j): transpose that r x n_kh grid of
    // heads on the way in (v, decay, beta) and back on the way out.
    const int64_t r = n_vh / n_kh;
    const bool regroup = lay == llm_delta_net_layout::qwen3next && r > 1 && n_kh > 1;
    if (regroup) {
        ggml_tensor * v4 = ggml_view_4d(ctx, conv, d_v, r, n_kh, T, d_v * es, r * d_v * es, conv->nb[1], 2 * d_k * n_kh * es);
        v = ggml_reshape_3d(ctx, ggml_cont(ctx, ggml_permute(ctx, v4, 0, 2, 1, 3)), d_v, n_vh, T);
        auto heads_tiled = [&](ggml_tensor * t) {   // [n_vh, T] grouped -> tiled
            return ggml_reshape_2d(ctx, ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_3d(ctx, t, r, n_kh, T), 1, 0, 2, 3)), n_vh, T);
        };
        decay = heads_tiled(decay);
        beta = heads_tiled(beta);
    }
    // the chunked form for prompt pieces, the recurrence for single tokens (the kernel picks per sequence)
    const int chunk = 64;
    ggml_tensor * o = ggml_gated_delta_net(ctx, q, k, v, decay, beta, g.rs->ssm_l[slot], slots, 1.0f / std::sqrt((float) d_k),
                                           chunk);   // [d_v, n_vh, T]
    if (regroup) o = ggml_reshape_3d(ctx, ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, o, d_v, n_kh, r, T), 0, 2, 1, 3)), d_v, n_vh, T);
    // gated RMS norm: norm(o) * w * silu(z), per value head
    o = g.build_norm(o, l.ssm_norm, nullptr, true, il);
    o = ggml_mul(ctx, o, ggml_silu(ctx, ggml_reshape_3d(ctx, z, d_v, n_vh, T)));
    return ggml_mul_mat(ctx, l.ssm_out, ggml_reshape_2d(ctx, o, d_v * n_vh, T));
}

ggml_tensor * llm_build_gated_attn(llm_graph_context & g, int il, ggml_tensor * x) {
    const auto & hp = g.hp;
    const auto & l = g.layer(il);
    ggml_context * ctx = g.ctx0;
    const int64_t hd = hp.n_embd_head_k, T = g.n_tokens;
    const int64_t n_head = l.wq->ne[1] / (2 * hd), n_head_kv = l.wk->ne[1] / hd;   // a -sm graph part: some of the heads
    ggml_tensor * qg = ggml_mul_mat(ctx, l.wq, x);   // [2 * hd * n_head, T]
    const size_t es = ggml_element_size(qg);
    ggml_tensor * q = ggml_view_3d(ctx, qg, hd, n_head, T, 2 * hd * es, qg->nb[1], 0);
    ggml_tensor * gate = ggml_view_3d(ctx, qg, hd, n_head, T, 2 * hd * es, qg->nb[1], hd * es);
    ggml_tensor * k = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.wk, x), hd, n_head_kv, T);
    ggml_tensor * v = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.wv, x), hp.n_embd_head_v, n_head_kv, T);
    q = g.build_rope(g.build_norm(q, l.attn_q_norm, nullptr, true, il), hp.n_rot);
    k = g.build_rope(g.build_norm(k, l.attn_k_norm, nullptr, true, il), hp.n_rot);
    ggml_tensor * attn = g.build_attn(il, q, k, v, 1.0f / std::sqrt((float) hd));   // [hd_v * n_head, T]
    attn = ggml_mul(ctx, attn, ggml_sigmoid(ctx, ggml_cont_2d(ctx, gate, hd * n_head, T)));
    return ggml_mul_mat(ctx, l.wo, attn);
}

void llm_load_delta_net_moe_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    llm_load_delta_net_hparams(ml, hp);
    llm_load_moe_hparams(ml, hp, 0);
    hp.n_ff_shexp = (uint32_t) ml.get_i64(ml.key("%s.expert_shared_feed_forward_length"), hp.n_ff_exp);
    hp.n_expert_shared = 1;
    hp.expert_weights_norm = true;
    hp.expert_gating_func = llm_graph_context::MOE_GATING_SOFTMAX;
}

void llm_create_delta_net_moe(llama_model_loader & ml, llama_model & m, ggml_context * ctx, llm_delta_net_layout lay) {
    llm_create_embd_output(ml, m, ctx);
    for (uint32_t il = 0; il < m.hparams.n_layer; ++il) {
        llm_create_hybrid_mixer(ml, m, ctx, il, lay);
        llm_create_moe(ml, m, ctx, il, "post_attention_norm.weight");
        llm_create_gated_shexp(ml, m, ctx, il);
    }
}

ggml_tensor * llm_build_delta_net_moe(llm_graph_context & g, llm_delta_net_layout lay) {
    return llm_build_delta_net_hybrid(g, lay, [](llm_graph_context & g, uint32_t il, ggml_tensor * x) {
        return llm_build_moe_gated_shexp(g, (int) il, x, true);
    });
}
