#include "llama-graph.h"

#include <cmath>

llm_graph_context::llm_graph_context(const llama_model & m, const llama_cparams & c, const llama_ubatch & u,
                                     llama_kv_cache & k, ggml_context * ctx, ggml_cgraph * g)
    : model(m), hp(m.hparams), cp(c), ub(u), kv(k), ctx0(ctx), gf(g) {
    n_tokens = u.n_tokens;
    n_kv = k.n_kv();
    n_outputs = (int64_t) u.out_rows.size();
    freq_base = c.rope_freq_base > 0 ? c.rope_freq_base : hp.rope_freq_base;
    freq_scale = c.rope_freq_scale > 0 ? c.rope_freq_scale : hp.rope_freq_scale;
}

ggml_tensor * llm_graph_context::build_inp_embd() {
    inp_tokens = ggml_new_tensor_1d(ctx0, GGML_TYPE_I32, n_tokens);
    ggml_set_name(inp_tokens, "inp_tokens");
    ggml_set_input(inp_tokens);
    return ggml_get_rows(ctx0, model.tok_embd, inp_tokens);
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

ggml_tensor * llm_graph_context::build_rope(ggml_tensor * x, int n_rot) {
    return ggml_rope_ext(ctx0, x, build_inp_pos(), nullptr, n_rot, hp.rope_type, (int) hp.n_ctx_orig_yarn, freq_base,
                         freq_scale, hp.yarn_ext_factor, hp.yarn_attn_factor, hp.yarn_beta_fast, hp.yarn_beta_slow);
}

ggml_tensor * llm_graph_context::build_lin(ggml_tensor * w, ggml_tensor * b, ggml_tensor * x) {
    ggml_tensor * r = ggml_mul_mat(ctx0, w, x);
    return b ? ggml_add(ctx0, r, b) : r;
}

ggml_tensor * llm_graph_context::build_attn(int il, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float kq_scale) {
    const int64_t hd_k = q->ne[0], n_head = q->ne[1];
    const int64_t hd_v = v->ne[0], n_head_kv = k->ne[1];

    if (!inp_kv_idx) {
        inp_kv_idx = ggml_new_tensor_1d(ctx0, GGML_TYPE_I64, n_tokens);
        ggml_set_name(inp_kv_idx, "inp_kv_idx");
        ggml_set_input(inp_kv_idx);
        inp_mask = ggml_new_tensor_2d(ctx0, GGML_TYPE_F32, n_kv, n_tokens);
        ggml_set_name(inp_mask, "inp_kq_mask");
        ggml_set_input(inp_mask);
    }

    // write this batch's K and V rows into their cells; views of the results order reads after writes
    ggml_tensor * k_cache = kv.k_l[il];
    ggml_tensor * v_cache = kv.v_l[il];
    if (!ggml_is_contiguous(k)) k = ggml_cont(ctx0, k);
    if (!ggml_is_contiguous(v)) v = ggml_cont(ctx0, v);
    ggml_tensor * k_written = ggml_set_rows(ctx0, k_cache, ggml_reshape_2d(ctx0, k, hd_k * n_head_kv, n_tokens), inp_kv_idx);
    ggml_tensor * v_written = ggml_set_rows(ctx0, v_cache, ggml_reshape_2d(ctx0, v, hd_v * n_head_kv, n_tokens), inp_kv_idx);
    ggml_build_forward_expand(gf, k_written);
    ggml_build_forward_expand(gf, v_written);

    ggml_tensor * kc = ggml_view_3d(ctx0, k_written, hd_k, n_kv, n_head_kv, k_cache->nb[1], ggml_row_size(k_cache->type, hd_k), 0);
    ggml_tensor * vc = ggml_view_3d(ctx0, v_written, hd_v, n_kv, n_head_kv, v_cache->nb[1], ggml_row_size(v_cache->type, hd_v), 0);
    ggml_tensor * qp = ggml_permute(ctx0, q, 0, 2, 1, 3);   // [hd, n_tokens, n_head]

    ggml_tensor * out;
    if (cp.flash_attn) {
        out = ggml_flash_attn_ext(ctx0, qp, kc, vc, inp_mask, kq_scale, 0.0f, hp.f_attn_logit_softcap);
        out = ggml_reshape_2d(ctx0, out, hd_v * n_head, n_tokens);
    } else {
        ggml_tensor * kq = ggml_mul_mat(ctx0, kc, qp);   // [n_kv, n_tokens, n_head]
        if (hp.f_attn_logit_softcap > 0) {
            kq = ggml_scale(ctx0, kq, kq_scale / hp.f_attn_logit_softcap);
            kq = ggml_tanh(ctx0, kq);
            kq = ggml_scale(ctx0, kq, hp.f_attn_logit_softcap);
            kq = ggml_soft_max_ext(ctx0, kq, inp_mask, 1.0f, 0.0f);
        } else {
            kq = ggml_soft_max_ext(ctx0, kq, inp_mask, kq_scale, 0.0f);
        }
        // V^T with contiguous rows over the cells: [n_kv, hd_v, n_head_kv]
        ggml_tensor * vt = ggml_cont(ctx0, ggml_permute(ctx0, vc, 1, 0, 2, 3));
        ggml_tensor * kqv = ggml_mul_mat(ctx0, vt, kq);  // [hd_v, n_tokens, n_head]
        out = ggml_cont_2d(ctx0, ggml_permute(ctx0, kqv, 0, 2, 1, 3), hd_v * n_head, n_tokens);
    }
    return out;
}

ggml_tensor * llm_graph_context::build_ffn_swiglu(ggml_tensor * cur, ggml_tensor * up, ggml_tensor * gate, ggml_tensor * down) {
    ggml_tensor * u = ggml_mul_mat(ctx0, up, cur);
    ggml_tensor * g = ggml_mul_mat(ctx0, gate, cur);
    return ggml_mul_mat(ctx0, down, ggml_swiglu_split(ctx0, g, u));
}

ggml_tensor * llm_graph_context::build_output(ggml_tensor * cur) {
    if (n_outputs < n_tokens) {
        inp_out_ids = ggml_new_tensor_1d(ctx0, GGML_TYPE_I32, n_outputs);
        ggml_set_name(inp_out_ids, "inp_out_ids");
        ggml_set_input(inp_out_ids);
        cur = ggml_get_rows(ctx0, cur, inp_out_ids);
    }
    cur = build_norm(cur, model.output_norm, model.output_norm_b, true);
    ggml_tensor * head = model.output ? model.output : model.tok_embd;
    cur = ggml_mul_mat(ctx0, head, cur);
    ggml_set_name(cur, "result_output");
    ggml_set_output(cur);
    return cur;
}
