// deepseek2 (DeepSeek-V2/V2.5/V3/R1, Kimi-K2 and others with the same layout).
//
// Attention is MLA: q goes through a low rank (attn_q_a, norm, attn_q_b); keys and values come
// from a per-token compressed latent c (kv_lora_rank values, attn_kv_a_mqa then a norm) plus one
// RoPE'd key part k_pe (n_rot values) shared by all heads. Per head h,
//   k_h = [W_k,h c ; k_pe],   v_h = W_v,h c,   with attn_kv_b = [W_k,h ; W_v,h] over the heads.
// Since q_h · k_h = (W_k,hᵀ q_nope,h) · c + q_pe,h · k_pe, attention can run in latent space:
// absorb W_k into the query (attn_k_b = W_kᵀ per head), attend over the cached [k_pe ; c] rows,
// and apply W_v (attn_v_b) to the latent result. That is MLA mode 1-3 (the cache holds only
// kv_lora_rank + n_rot values per token). Modes 2 and 3 decompress the cached latent into
// per-head K/V for large batches, where fewer flops win. Mode 0 is plain attention with
// per-head K/V in the cache.
//
// The FFN is dense for the first leading_dense_block_count layers, then routed experts (softmax
// or sigmoid router; exp_probs_b biases the choice only; weights optionally renormalized and
// scaled by expert_weights_scale) plus shared experts.
#include "llama-graph.h"
#include "llama-model-loader.h"

#include <cmath>
#include <cstring>

namespace {

// batches of at least this many tokens attend over decompressed K/V in MLA modes 2 and 3
constexpr int64_t k_decompress_min_tokens = 32;

void load_hparams(llama_model_loader & ml, llama_hparams & hp) {
    llm_load_common_hparams(ml, hp);
    hp.rope_type = GGML_ROPE_TYPE_NORMAL;
    hp.n_lora_q = (uint32_t) ml.get_i64(ml.key("%s.attention.q_lora_rank"), 0);
    hp.n_lora_kv = (uint32_t) ml.get_i64(ml.key("%s.attention.kv_lora_rank"));
    hp.n_layer_dense_lead = (uint32_t) ml.get_i64(ml.key("%s.leading_dense_block_count"), 0);
    hp.n_expert = (uint32_t) ml.get_i64(ml.key("%s.expert_count"), 0);
    hp.n_expert_used = (uint32_t) ml.get_i64(ml.key("%s.expert_used_count"), 0);
    hp.n_expert_shared = (uint32_t) ml.get_i64(ml.key("%s.expert_shared_count"), 0);
    hp.n_ff_exp = (uint32_t) ml.get_i64(ml.key("%s.expert_feed_forward_length"), 0);
    hp.n_ff_shexp = hp.n_ff_exp * hp.n_expert_shared;
    hp.expert_weights_scale = (float) ml.get_f64(ml.key("%s.expert_weights_scale"), 1.0);
    hp.expert_weights_norm = ml.get_bool(ml.key("%s.expert_weights_norm"), false);
    hp.expert_gating_func = (int) ml.get_i64(ml.key("%s.expert_gating_func"), llm_graph_context::MOE_GATING_SOFTMAX);
    const std::string path = ml.path;
    if (hp.expert_gating_func != llm_graph_context::MOE_GATING_SOFTMAX &&
        hp.expert_gating_func != llm_graph_context::MOE_GATING_SIGMOID) {
        throw llama_error(llama_format("%s: %s = %d is not 1 (softmax) or 2 (sigmoid)", path.c_str(),
                                       ml.key("%s.expert_gating_func").c_str(), hp.expert_gating_func));
    }
    if (hp.n_layer_dense_lead < hp.n_layer &&
        (hp.n_expert == 0 || hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert || hp.n_ff_exp == 0)) {
        throw llama_error(llama_format("%s: expert_count (%u), expert_used_count (%u) and expert_feed_forward_length (%u) "
                                       "must describe at least one used expert",
                                       path.c_str(), hp.n_expert, hp.n_expert_used, hp.n_ff_exp));
    }
    if (hp.n_rot == 0 || hp.n_rot >= hp.n_embd_head_k || hp.n_lora_kv == 0) {
        throw llama_error(llama_format("%s: MLA needs rope.dimension_count (%u) below attention.key_length (%u) and a "
                                       "positive attention.kv_lora_rank (%u)",
                                       path.c_str(), hp.n_rot, hp.n_embd_head_k, hp.n_lora_kv));
    }
    // YaRN: the RoPE itself is left unscaled (its magnitude factor cancelled here) and the
    // attention scale carries mscale² instead (see kq_scale_of).
    if (hp.rope_freq_scale > 0 && hp.rope_freq_scale != 1.0f) {
        hp.yarn_attn_factor = 1.0f / (1.0f + 0.1f * std::log(1.0f / hp.rope_freq_scale));
    }
}

float kq_scale_of(const llm_graph_context & g) {
    const float mscale = 1.0f + g.hp.yarn_log_mul * std::log(1.0f / g.freq_scale);
    return mscale * mscale / std::sqrt((float) g.hp.n_embd_head_k);
}

// ---- attn_k_b / attn_v_b <-> attn_kv_b

bool is_float_type(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

// The type of a derived weight: the source's if it is a float type, else Q8_0 (transposing
// needs the values decoded; Q8_0 keeps them nearly exact), else f16 for rows Q8_0 cannot hold.
ggml_type derived_type(ggml_type src, int64_t row) {
    if (is_float_type(src)) return src;
    return row % ggml_blck_size(GGML_TYPE_Q8_0) == 0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F16;
}

std::vector<float> decode(const ggml_tensor * t) {
    const int64_t ne0 = t->ne[0], nrows = ggml_nrows(t);
    std::vector<float> out((size_t) (ne0 * nrows));
    if (t->type == GGML_TYPE_F32) {
        std::memcpy(out.data(), t->data, out.size() * sizeof(float));
        return out;
    }
    const ggml_type_traits * tr = ggml_get_type_traits(t->type);
    const int64_t group = std::max(1, tr->nrows_interleaved);
    const size_t row_bytes = ggml_row_size(t->type, ne0);
    for (int64_t r = 0; r < nrows; r += group) tr->to_float((const char *) t->data + r * row_bytes, out.data() + r * ne0, group * ne0);
    return out;
}

void encode(const std::vector<float> & src, ggml_tensor * dst) {
    const size_t n = ggml_quantize_chunk(dst->type, src.data(), dst->data, 0, ggml_nrows(dst), dst->ne[0], nullptr);
    if (n == 0) throw llama_error(llama_format("cannot encode derived tensor %s (non-finite values?)", dst->name));
}

// Index maps between attn_kv_b rows (per head: n_nope K rows then n_v V rows, kv_lora values
// each) and attn_k_b [n_nope, kv_lora, n_head] / attn_v_b [kv_lora, n_v, n_head].
struct mla_dims {
    int64_t n_head, n_nope, n_v, kv_lora;
    size_t kvb(int64_t h, int64_t row, int64_t j) const { return (size_t) ((h * (n_nope + n_v) + row) * kv_lora + j); }
    size_t kb(int64_t h, int64_t i, int64_t j) const { return (size_t) ((h * kv_lora + j) * n_nope + i); }
    size_t vb(int64_t h, int64_t i, int64_t j) const { return (size_t) ((h * n_v + i) * kv_lora + j); }
};

void create_tensors(llama_model_loader & ml, llama_model & m, ggml_context * ctx) {
    const auto & hp = m.hparams;
    const int64_t n_embd = hp.n_embd, n_vocab = hp.n_vocab, n_head = hp.n_head;
    const int64_t n_rot = hp.n_rot, n_nope = hp.n_embd_head_k - hp.n_rot, n_v = hp.n_embd_head_v;
    const int64_t kv_lora = hp.n_lora_kv, q_lora = hp.n_lora_q;
    const int64_t n_expert = hp.n_expert, n_ff_exp = hp.n_ff_exp;
    const mla_dims d{ n_head, n_nope, n_v, kv_lora };

    m.tok_embd = ml.create(ctx, "token_embd.weight", { n_embd, n_vocab });
    m.output_norm = ml.create(ctx, "output_norm.weight", { n_embd });
    m.output = ml.create(ctx, "output.weight", { n_embd, n_vocab }, true);
    for (uint32_t i = 0; i < hp.n_layer; ++i) {
        auto & l = m.layers[i];
        auto name = [i](const char * t) { return llama_format("blk.%u.%s", i, t); };
        l.attn_norm = ml.create(ctx, name("attn_norm.weight"), { n_embd });
        if (q_lora > 0) {
            l.wq_a = ml.create(ctx, name("attn_q_a.weight"), { n_embd, q_lora });
            l.attn_q_a_norm = ml.create(ctx, name("attn_q_a_norm.weight"), { q_lora });
            l.wq_b = ml.create(ctx, name("attn_q_b.weight"), { q_lora, n_head * hp.n_embd_head_k });
        } else {
            l.wq = ml.create(ctx, name("attn_q.weight"), { n_embd, n_head * hp.n_embd_head_k });
        }
        l.wkv_a_mqa = ml.create(ctx, name("attn_kv_a_mqa.weight"), { n_embd, kv_lora + n_rot });
        l.attn_kv_a_norm = ml.create(ctx, name("attn_kv_a_norm.weight"), { kv_lora });
        l.wkv_b = ml.create(ctx, name("attn_kv_b.weight"), { kv_lora, n_head * (n_nope + n_v) }, true);
        l.wk_b = ml.create_as(ctx, name("attn_k_b.weight"), { n_nope, kv_lora, n_head }, true);
        l.wv_b = ml.create_as(ctx, name("attn_v_b.weight"), { kv_lora, n_v, n_head }, true);
        if (!l.wkv_b && !(l.wk_b && l.wv_b)) {
            throw llama_error(llama_format("%s: layer %u needs attn_kv_b, or attn_k_b and attn_v_b", ml.path.c_str(), i));
        }
        // whichever form is missing is computed from the other once the weights are loaded
        if (l.wkv_b && !l.wk_b) {
            const ggml_tensor * src = l.wkv_b;
            l.wk_b = m.new_derived(derived_type(src->type, n_nope), { n_nope, kv_lora, n_head }, name("attn_k_b.weight"),
                                   [src, d](ggml_tensor * dst) {
                                       const std::vector<float> kvb = decode(src);
                                       std::vector<float> out(kvb.size() / (d.n_nope + d.n_v) * d.n_nope);
                                       for (int64_t h = 0; h < d.n_head; ++h)
                                           for (int64_t i = 0; i < d.n_nope; ++i)
                                               for (int64_t j = 0; j < d.kv_lora; ++j) out[d.kb(h, i, j)] = kvb[d.kvb(h, i, j)];
                                       encode(out, dst);
                                   });
        }
        if (l.wkv_b && !l.wv_b) {
            // W_v's rows are rows of attn_kv_b: copied as they are unless the type interleaves rows
            const ggml_tensor * src = l.wkv_b;
            const bool raw = ggml_get_type_traits(src->type)->nrows_interleaved <= 1;
            l.wv_b = m.new_derived(raw ? src->type : derived_type(src->type, kv_lora), { kv_lora, n_v, n_head },
                                   name("attn_v_b.weight"), [src, d, raw](ggml_tensor * dst) {
                                       if (raw) {
                                           const size_t rs = src->nb[1];
                                           for (int64_t h = 0; h < d.n_head; ++h) {
                                               std::memcpy((char *) dst->data + h * d.n_v * rs,
                                                           (const char *) src->data + (h * (d.n_nope + d.n_v) + d.n_nope) * rs, d.n_v * rs);
                                           }
                                           return;
                                       }
                                       const std::vector<float> kvb = decode(src);
                                       std::vector<float> out(kvb.size() / (d.n_nope + d.n_v) * d.n_v);
                                       for (int64_t h = 0; h < d.n_head; ++h)
                                           for (int64_t i = 0; i < d.n_v; ++i)
                                               for (int64_t j = 0; j < d.kv_lora; ++j) out[d.vb(h, i, j)] = kvb[d.kvb(h, d.n_nope + i, j)];
                                       encode(out, dst);
                                   });
        }
        if (!l.wkv_b) {
            const ggml_tensor * kb = l.wk_b;
            const ggml_tensor * vb = l.wv_b;
            const ggml_type t = kb->type == vb->type ? derived_type(kb->type, kv_lora) : derived_type(GGML_TYPE_Q8_0, kv_lora);
            l.wkv_b = m.new_derived(t, { kv_lora, n_head * (n_nope + n_v) }, name("attn_kv_b.weight"), [kb, vb, d](ggml_tensor * dst) {
                const std::vector<float> k = decode(kb), v = decode(vb);
                std::vector<float> out((size_t) (d.n_head * (d.n_nope + d.n_v) * d.kv_lora));
                for (int64_t h = 0; h < d.n_head; ++h) {
                    for (int64_t j = 0; j < d.kv_lora; ++j) {
                        for (int64_t i = 0; i < d.n_nope; ++i) out[d.kvb(h, i, j)] = k[d.kb(h, i, j)];
                        for (int64_t i = 0; i < d.n_v; ++i) out[d.kvb(h, d.n_nope + i, j)] = v[d.vb(h, i, j)];
                    }
                }
                encode(out, dst);
            });
        }
        l.wo = ml.create(ctx, name("attn_output.weight"), { n_head * n_v, n_embd });
        l.ffn_norm = ml.create(ctx, name("ffn_norm.weight"), { n_embd });
        if (i < hp.n_layer_dense_lead) {
            l.ffn_gate = ml.create(ctx, name("ffn_gate.weight"), { n_embd, hp.n_ff });
            l.ffn_up = ml.create(ctx, name("ffn_up.weight"), { n_embd, hp.n_ff });
            l.ffn_down = ml.create(ctx, name("ffn_down.weight"), { hp.n_ff, n_embd });
            continue;
        }
        l.ffn_gate_inp = ml.create(ctx, name("ffn_gate_inp.weight"), { n_embd, n_expert });
        l.ffn_exp_probs_b = ml.create(ctx, name("exp_probs_b.bias"), { n_expert }, true);
        l.ffn_gate_exps = ml.create(ctx, name("ffn_gate_exps.weight"), { n_embd, n_ff_exp, n_expert });
        l.ffn_up_exps = ml.create(ctx, name("ffn_up_exps.weight"), { n_embd, n_ff_exp, n_expert });
        l.ffn_down_exps = ml.create(ctx, name("ffn_down_exps.weight"), { n_ff_exp, n_embd, n_expert });
        if (hp.n_expert_shared > 0) {
            const int64_t n_ff_sh = hp.n_ff_shexp;
            l.ffn_gate_shexp = ml.create(ctx, name("ffn_gate_shexp.weight"), { n_embd, n_ff_sh });
            l.ffn_up_shexp = ml.create(ctx, name("ffn_up_shexp.weight"), { n_embd, n_ff_sh });
            l.ffn_down_shexp = ml.create(ctx, name("ffn_down_shexp.weight"), { n_ff_sh, n_embd });
        }
    }
}

void adjust_cparams(const llama_model &, llama_cparams & cp) {
    if (cp.mla < 0 || cp.mla > 3) {
        LLAMA_LOG_WARN("deepseek2: MLA mode %d is not 0..3; using 3\n", cp.mla);
        cp.mla = 3;
    }
}

void kv_shapes(const llama_model & m, const llama_cparams & cp, std::vector<llama_kv_layer_shape> & out) {
    const auto & hp = m.hparams;
    if (cp.mla == 0) {
        out = llama_kv_default_shapes(hp);
        return;
    }
    // one row per token: [k_pe (n_rot) ; c (kv_lora)], the RoPE'd part first
    llama_kv_layer_shape s;
    s.n_embd_k = hp.n_lora_kv + hp.n_rot;
    s.n_embd_v = 0;
    s.n_head_k = 1;
    s.head_dim_k = s.n_embd_k;
    s.n_rot = hp.n_rot;
    out.assign(hp.n_layer, s);
}

ggml_tensor * build_mla(llm_graph_context & g, int il, ggml_tensor * x) {
    const auto & hp = g.hp;
    const auto & l = g.layer(il);
    ggml_context * ctx = g.ctx0;
    const int64_t n_tokens = g.n_tokens, n_rot = hp.n_rot;
    const int64_t n_nope = hp.n_embd_head_k - n_rot, n_v = hp.n_embd_head_v, kv_lora = hp.n_lora_kv;
    const int64_t n_head = l.wkv_b->ne[1] / (n_nope + n_v);   // a -sm graph part holds some of the heads
    const float kq_scale = kq_scale_of(g);

    ggml_tensor * q;
    if (l.wq_a) {
        q = g.build_norm(ggml_mul_mat(ctx, l.wq_a, x), l.attn_q_a_norm, nullptr, true, il);
        q = ggml_mul_mat(ctx, l.wq_b, q);
    } else {
        q = ggml_mul_mat(ctx, l.wq, x);
    }
    q = ggml_reshape_3d(ctx, q, hp.n_embd_head_k, n_head, n_tokens);
    ggml_tensor * q_nope = ggml_view_3d(ctx, q, n_nope, n_head, n_tokens, q->nb[1], q->nb[2], 0);
    ggml_tensor * q_pe = ggml_view_3d(ctx, q, n_rot, n_head, n_tokens, q->nb[1], q->nb[2], n_nope * q->nb[0]);
    q_pe = g.build_rope(ggml_cont(ctx, q_pe), (int) n_rot);   // [n_rot, n_head, n_tokens]

    ggml_tensor * kv_a = ggml_mul_mat(ctx, l.wkv_a_mqa, x);   // [kv_lora + n_rot, n_tokens]
    ggml_tensor * c = ggml_view_2d(ctx, kv_a, kv_lora, n_tokens, kv_a->nb[1], 0);
    c = g.build_norm(ggml_cont(ctx, c), l.attn_kv_a_norm, nullptr, true, il);
    ggml_tensor * k_pe = ggml_view_3d(ctx, kv_a, n_rot, 1, n_tokens, kv_a->nb[1], kv_a->nb[1], kv_lora * kv_a->nb[0]);
    k_pe = g.build_rope(ggml_cont(ctx, k_pe), (int) n_rot);   // [n_rot, 1, n_tokens]

    if (g.cp.mla == 0) {
        // plain attention over per-head K = [k_pe ; k_nope] (RoPE'd part first) and V
        ggml_tensor * kv = ggml_mul_mat(ctx, l.wkv_b, c);   // [n_head * (n_nope + n_v), n_tokens]
        const size_t es = kv->nb[0];
        ggml_tensor * k_nope = ggml_view_3d(ctx, kv, n_nope, n_head, n_tokens, (n_nope + n_v) * es, kv->nb[1], 0);
        ggml_tensor * v = ggml_view_3d(ctx, kv, n_v, n_head, n_tokens, (n_nope + n_v) * es, kv->nb[1], n_nope * es);
        ggml_tensor * zeros = g.build_const(std::vector<float>((size_t) (n_rot * n_head * n_tokens), 0.0f), n_rot, n_head, n_tokens);
        ggml_tensor * k = ggml_concat(ctx, ggml_add(ctx, zeros, k_pe), ggml_cont(ctx, k_nope), 0);
        ggml_tensor * qf = ggml_concat(ctx, q_pe, ggml_cont(ctx, q_nope), 0);
        return g.build_attn(il, qf, k, ggml_cont(ctx, v), kq_scale);
    }

    // latent cache rows [k_pe ; c]
    ggml_tensor * cache = g.kv.k_l[g.shard ? g.shard->kv_slot : il];   // a part's own copy of the latent cache
    ggml_tensor * row = ggml_concat(ctx, ggml_reshape_2d(ctx, k_pe, n_rot, n_tokens), c, 0);
    ggml_tensor * written = g.build_kv_store(cache, row);
    const int64_t n_kv = g.n_kv;
    const size_t rb = cache->nb[1];
    const size_t pe_bytes = ggml_row_size(cache->type, n_rot);
    ggml_tensor * kc_full = ggml_view_3d(ctx, written, kv_lora + n_rot, n_kv, 1, rb, rb * n_kv, 0);
    ggml_tensor * kc_pe = ggml_view_3d(ctx, written, n_rot, n_kv, 1, rb, rb * n_kv, 0);
    ggml_tensor * kc_c = ggml_view_3d(ctx, written, kv_lora, n_kv, 1, rb, rb * n_kv, pe_bytes);

    ggml_tensor * q_nope_t = ggml_permute(ctx, q_nope, 0, 2, 1, 3);   // [n_nope, n_tokens, n_head]
    ggml_tensor * q_pe_t = ggml_permute(ctx, q_pe, 0, 2, 1, 3);       // [n_rot, n_tokens, n_head]

    if (g.cp.mla >= 2 && n_tokens >= k_decompress_min_tokens) {
        // decompress the cached latents into per-head K (no-RoPE part) and V. The latents are the
        // product's activations, read as f32: a matrix product takes f32 activations on every
        // backend (the CPU's also f16/bf16, but no quantized cache type such as -ctk q8_0, which
        // aborted; the GPU's only f32, which sent this product of every layer to the CPU). The
        // f16/bf16 -> f32 step is exact, and the n_kv x kv_lora copy is small next to the product.
        ggml_tensor * lat_c = ggml_view_2d(ctx, written, kv_lora, n_kv, rb, pe_bytes);
        if (lat_c->type != GGML_TYPE_F32) lat_c = ggml_cast(ctx, lat_c, GGML_TYPE_F32);
        ggml_tensor * kvd = ggml_mul_mat(ctx, l.wkv_b, lat_c);
        const size_t es = kvd->nb[0];
        ggml_tensor * k_nope = ggml_view_3d(ctx, kvd, n_nope, n_kv, n_head, kvd->nb[1], (n_nope + n_v) * es, 0);
        ggml_tensor * v = ggml_view_3d(ctx, kvd, n_v, n_kv, n_head, kvd->nb[1], (n_nope + n_v) * es, n_nope * es);
        ggml_tensor * out = g.build_attn_core(q_nope_t, k_nope, v, kq_scale, q_pe_t, kc_pe);   // [n_v, n_head, n_tokens]
        return ggml_reshape_2d(ctx, out, n_v * n_head, n_tokens);
    }

    // attention in latent space: the query absorbs W_k, the result is expanded by W_v
    ggml_tensor * q_abs = ggml_mul_mat(ctx, l.wk_b, q_nope_t);   // [kv_lora, n_tokens, n_head]
    ggml_tensor * lat;
    if (g.cp.flash_attn) {
        ggml_tensor * qf = ggml_concat(ctx, q_pe_t, q_abs, 0);   // [n_rot + kv_lora, n_tokens, n_head]
        lat = g.build_attn_core(qf, kc_full, kc_c, kq_scale);
    } else {
        lat = g.build_attn_core(q_abs, kc_c, kc_c, kq_scale, q_pe_t, kc_pe);
    }
    // lat [kv_lora, n_head, n_tokens] -> per head [kv_lora, n_tokens] -> W_v
    ggml_tensor * o = ggml_mul_mat(ctx, l.wv_b, ggml_permute(ctx, lat, 0, 2, 1, 3));   // [n_v, n_tokens, n_head]
    return ggml_cont_2d(ctx, ggml_permute(ctx, o, 0, 2, 1, 3), n_v * n_head, n_tokens);
}

ggml_tensor * build_graph(llm_graph_context & g) {
    const auto & hp = g.hp;
    const auto & m = g.model;
    ggml_context * ctx = g.ctx0;
    ggml_tensor * cur = g.build_inp_embd();
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const auto & l = m.layers[il];
        const int i = (int) il;
        ggml_tensor * x = g.build_norm(cur, l.attn_norm, nullptr, true, il);
        cur = ggml_add(ctx, cur, g.build_split(i, true, [&] { return ggml_mul_mat(ctx, g.layer(i).wo, build_mla(g, i, x)); }));
        x = g.build_norm(cur, l.ffn_norm, nullptr, true, il);
        cur = ggml_add(ctx, cur, g.build_split(i, false, [&] {
            const auto & lp = g.layer(i);
            if (il < hp.n_layer_dense_lead) return g.build_ffn_swiglu(x, lp.ffn_up, lp.ffn_gate, lp.ffn_down);
            ggml_tensor * ffn = g.build_moe_ffn(x, lp.ffn_gate_inp, lp.ffn_up_exps, lp.ffn_gate_exps, lp.ffn_down_exps,
                                                lp.ffn_exp_probs_b, hp.n_expert, hp.n_expert_used,
                                                (llm_graph_context::moe_gating) hp.expert_gating_func, hp.expert_weights_norm,
                                                hp.expert_weights_scale);
            if (lp.ffn_up_shexp) ffn = ggml_add(ctx, ffn, g.build_ffn_swiglu(x, lp.ffn_up_shexp, lp.ffn_gate_shexp, lp.ffn_down_shexp));
            return ffn;
        }));
    }
    return g.build_output(cur);
}

void register_arch() {
    llm_arch_impl impl{ "deepseek2", load_hparams, create_tensors, build_graph };
    impl.kv_shapes = kv_shapes;
    impl.adjust_cparams = adjust_cparams;
    impl.tensor_parallel = true;
    llm_arch_register(impl);
}
const int registered = (register_arch(), 0);

} // namespace
