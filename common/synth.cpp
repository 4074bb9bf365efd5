// Synthetic models: presets, the tensor list of each architecture (names and shapes as llama.cpp
// writes them), and the streaming writer.
#include "synth.h"

#include "gguf.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <unistd.h>

namespace {

struct preset {
    const char * name;
    const char * desc;
    const char * arch;
    int32_t n_layer, n_embd, n_head, n_head_kv;
    int32_t head_dim_k, head_dim_v;   // deepseek2: key = qk_nope + qk_rope
    int32_t n_ff;                     // dense FFN (deepseek2: the leading dense layers)
    int32_t n_vocab, first_special;   // first_special: id of <|endoftext|>
    bool tied_output;
    float rope_base;
    int32_t n_ctx_train;
    // MoE
    int32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_expert_shared = 0, n_lead_dense = 0;
    int32_t gating_func = 0;          // 1 softmax, 2 sigmoid (deepseek2)
    float expert_weights_scale = 0.0f;
    // MLA (deepseek2); qk_rope is also the partial rotation of glm4moe (rope.dimension_count)
    int32_t q_lora = 0, kv_lora = 0, qk_rope = 0;
    // the block's variations (gemma3, glm4moe, gpt-oss)
    bool qk_norm = true;              // per-head q/k norms
    bool qkv_bias = false;            // biases on q, k, v
    bool o_bias_sinks = false;        // gpt-oss: output bias and attention sinks
    bool post_norms = false;          // gemma3: post_attention_norm and post_ffw_norm around each branch
    bool norm_is_post_attn = false;   // glm4moe, gpt-oss: the pre-FFN norm is named post_attention_norm
    bool router_f32 = false;          // glm4moe, gpt-oss: ffn_gate_inp stored as f32
    bool expert_biases = false;       // gpt-oss: router and per-expert biases
    int32_t n_swa = 0;                // attention.sliding_window
    int32_t n_nextn = 0;              // glm4moe: trailing NextN layers (counted in n_layer)
    const char * rope_scaling = nullptr;   // "linear" / "yarn"
    float rope_factor = 0.0f;
    int32_t rope_orig_ctx = 0;        // yarn
    // gated delta-net hybrids (qwen35, qwen35moe): every full_attn_interval-th layer attends (with
    // an output gate, multi-section RoPE over n_rot dims when sections are given), the others are
    // recurrent
    int32_t full_attn_interval = 0, ssm_d_conv = 0, ssm_k_heads = 0, ssm_v_heads = 0, ssm_head_dim = 0;
    int32_t n_rot = 0, rope_sections[4] = { 0, 0, 0, 0 };
    int32_t n_ff_shexp = 0;           // a shared expert beside the routed ones, gated per token
};

// Presets of the issue-14 architectures, written with designated initializers (many fields).
constexpr preset gemma3_preset(const char * name, const char * desc, int32_t n_layer, int32_t n_embd, int32_t n_head,
                               int32_t n_head_kv, int32_t head_dim, int32_t n_ff, int32_t n_vocab, int32_t first_special,
                               int32_t n_swa) {
    return { .name = name, .desc = desc, .arch = "gemma3", .n_layer = n_layer, .n_embd = n_embd, .n_head = n_head,
             .n_head_kv = n_head_kv, .head_dim_k = head_dim, .head_dim_v = head_dim, .n_ff = n_ff, .n_vocab = n_vocab,
             .first_special = first_special, .tied_output = true, .rope_base = 1e6f, .n_ctx_train = 131072,
             .post_norms = true, .n_swa = n_swa, .rope_scaling = "linear", .rope_factor = 8.0f };
}

const preset k_presets[] = {
    { "qwen3-0.6b", "Qwen3-0.6B shapes: 28 layers, n_embd 1024, 16/8 heads x 128, n_ff 3072, vocab 151936, tied output",
      "qwen3", 28, 1024, 16, 8, 128, 128, 3072, 151936, 151643, true, 1e6f, 40960 },
    { "qwen3-30b-a3b", "Qwen3-30B-A3B shapes: 48 layers, n_embd 2048, 32/4 heads x 128, 128 experts (8 used) x 768, vocab 151936",
      "qwen3moe", 48, 2048, 32, 4, 128, 128, 6144, 151936, 151643, false, 1e6f, 40960,
      128, 8, 768, 0, 0, 1, 0.0f },
    { "deepseek-v3", "DeepSeek-V3 shapes: 61 layers (3 dense), n_embd 7168, 128 heads, MLA, 256 experts (8 used) + 1 shared",
      "deepseek2", 61, 7168, 128, 128, 192, 128, 18432, 129280, 128000, false, 1e4f, 163840,
      256, 8, 2048, 1, 3, 2, 2.5f, 1536, 512, 64 },
    { "tiny-qwen3", "test model with the shapes of the reference's synth-qwen3 (2 layers, n_embd 256, vocab 4104)",
      "qwen3", 2, 256, 4, 2, 64, 64, 768, 4104, 4096, true, 1e6f, 4096 },
    { "tiny-qwen3moe", "test model with the shapes of synth-qwen3moe (2 layers, 16 experts, 4 used, expert ff 256)",
      "qwen3moe", 2, 256, 4, 2, 64, 64, 768, 4104, 4096, false, 1e6f, 4096,
      16, 4, 256, 0, 0, 1, 0.0f },
    { "tiny-deepseek2", "test model with the shapes of synth-deepseek2 (3 layers, 1 dense, MLA, 16 experts + 1 shared)",
      "deepseek2", 3, 256, 4, 4, 192, 128, 512, 4104, 4096, false, 1e4f, 4096,
      16, 4, 256, 1, 1, 2, 2.5f, 128, 512, 64 },
    gemma3_preset("tiny-gemma3", "test model with the shapes of synth-gemma3 (6 layers: 5 sliding (window 64), 1 global)",
                  6, 256, 4, 1, 128, 1024, 4104, 4096, 64),
    { .name = "tiny-glm4moe", .desc = "test model with the shapes of synth-glm4moe (1 dense, 1 MoE, 1 NextN layer; 16 experts + 1 shared)",
      .arch = "glm4moe", .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim_k = 128, .head_dim_v = 128,
      .n_ff = 768, .n_vocab = 4104, .first_special = 4096, .tied_output = false, .rope_base = 1e6f, .n_ctx_train = 4096,
      .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 128, .n_expert_shared = 1, .n_lead_dense = 1, .gating_func = 2,
      .expert_weights_scale = 2.5f, .qk_rope = 64, .qkv_bias = true, .norm_is_post_attn = true, .router_f32 = true,
      .n_nextn = 1 },
    { .name = "tiny-gpt-oss", .desc = "test model with the shapes of synth-gpt-oss (2 layers: sliding 128, full; 16 experts, 4 used)",
      .arch = "gpt-oss", .n_layer = 2, .n_embd = 256, .n_head = 8, .n_head_kv = 2, .head_dim_k = 64, .head_dim_v = 64,
      .n_ff = 256, .n_vocab = 4104, .first_special = 4096, .tied_output = false, .rope_base = 150000.0f, .n_ctx_train = 131072,
      .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .gating_func = 1, .qk_norm = false, .qkv_bias = true,
      .o_bias_sinks = true, .norm_is_post_attn = true, .router_f32 = true, .expert_biases = true, .n_swa = 128,
      .rope_scaling = "yarn", .rope_factor = 32.0f, .rope_orig_ctx = 4096 },
    { .name = "gpt-oss-20b", .desc = "gpt-oss-20b shapes: 24 layers (sliding 128 / full), n_embd 2880, 64/8 heads x 64, 32 experts (4 used) x 2880",
      .arch = "gpt-oss", .n_layer = 24, .n_embd = 2880, .n_head = 64, .n_head_kv = 8, .head_dim_k = 64, .head_dim_v = 64,
      .n_ff = 2880, .n_vocab = 201088, .first_special = 199999, .tied_output = false, .rope_base = 150000.0f,
      .n_ctx_train = 131072, .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880, .gating_func = 1, .qk_norm = false,
      .qkv_bias = true, .o_bias_sinks = true, .norm_is_post_attn = true, .router_f32 = true, .expert_biases = true,
      .n_swa = 128, .rope_scaling = "yarn", .rope_factor = 32.0f, .rope_orig_ctx = 4096 },
    { .name = "qwen3.5-35b-a3b", .desc = "Qwen3.5-35B-A3B shapes: 40 layers (3 gated delta-net : 1 attention), n_embd 2048, "
      "16/2 heads x 256, delta-net 16/32 heads x 128, 256 experts (8 used) x 512 + shared, vocab 248320",
      .arch = "qwen35moe", .n_layer = 40, .n_embd = 2048, .n_head = 16, .n_head_kv = 2, .head_dim_k = 256, .head_dim_v = 256,
      .n_ff = 0, .n_vocab = 248320, .first_special = 248044, .tied_output = false, .rope_base = 1e7f, .n_ctx_train = 262144,
      .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 512, .gating_func = 1, .norm_is_post_attn = true, .router_f32 = true,
      .full_attn_interval = 4, .ssm_d_conv = 4, .ssm_k_heads = 16, .ssm_v_heads = 32, .ssm_head_dim = 128, .n_rot = 64,
      .rope_sections = { 11, 11, 10, 0 }, .n_ff_shexp = 512 },
    { .name = "qwen3.5-27b", .desc = "Qwen3.5-27B shapes: 64 layers (3 gated delta-net : 1 attention), n_embd 5120, "
      "24/4 heads x 256, delta-net 16/48 heads x 128, n_ff 17408, vocab 248320",
      .arch = "qwen35", .n_layer = 64, .n_embd = 5120, .n_head = 24, .n_head_kv = 4, .head_dim_k = 256, .head_dim_v = 256,
      .n_ff = 17408, .n_vocab = 248320, .first_special = 248044, .tied_output = false, .rope_base = 1e7f, .n_ctx_train = 262144,
      .norm_is_post_attn = true, .full_attn_interval = 4, .ssm_d_conv = 4, .ssm_k_heads = 16, .ssm_v_heads = 48,
      .ssm_head_dim = 128, .n_rot = 64, .rope_sections = { 11, 11, 10, 0 } },
    { .name = "qwen3-next-80b-a3b", .desc = "Qwen3-Next-80B-A3B shapes: 48 layers (3 gated delta-net : 1 attention), n_embd "
      "2048, 16/2 heads x 256, delta-net 16/32 heads x 128, 512 experts (10 used) x 512 + shared, vocab 151936",
      .arch = "qwen3next", .n_layer = 48, .n_embd = 2048, .n_head = 16, .n_head_kv = 2, .head_dim_k = 256, .head_dim_v = 256,
      .n_ff = 0, .n_vocab = 151936, .first_special = 151643, .tied_output = false, .rope_base = 1e7f, .n_ctx_train = 262144,
      .n_expert = 512, .n_expert_used = 10, .n_ff_exp = 512, .gating_func = 1, .norm_is_post_attn = true, .router_f32 = true,
      .full_attn_interval = 4, .ssm_d_conv = 4, .ssm_k_heads = 16, .ssm_v_heads = 32, .ssm_head_dim = 128, .n_rot = 64,
      .n_ff_shexp = 512 },
    { .name = "tiny-qwen3next", .desc = "test model for qwen3next (4 layers: 3 delta-net with 2 value heads per key head, "
      "1 attention; 8 experts, 2 used, + shared)",
      .arch = "qwen3next", .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim_k = 64, .head_dim_v = 64,
      .n_ff = 0, .n_vocab = 4104, .first_special = 4096, .tied_output = false, .rope_base = 1e7f, .n_ctx_train = 4096,
      .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64, .gating_func = 1, .norm_is_post_attn = true, .router_f32 = true,
      .full_attn_interval = 4, .ssm_d_conv = 4, .ssm_k_heads = 2, .ssm_v_heads = 4, .ssm_head_dim = 32, .n_rot = 16,
      .n_ff_shexp = 64 },
    { .name = "tiny-qwen3next-wide", .desc = "test model for qwen3next split across devices: tiny-qwen3next with 4 key heads "
      "(8 value heads), so -sm graph has 4 units to share out",
      .arch = "qwen3next", .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim_k = 64, .head_dim_v = 64,
      .n_ff = 0, .n_vocab = 4104, .first_special = 4096, .tied_output = false, .rope_base = 1e7f, .n_ctx_train = 4096,
      .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64, .gating_func = 1, .norm_is_post_attn = true, .router_f32 = true,
      .full_attn_interval = 4, .ssm_d_conv = 4, .ssm_k_heads = 4, .ssm_v_heads = 8, .ssm_head_dim = 32, .n_rot = 16,
      .n_ff_shexp = 64 },
    { .name = "tiny-qwen35", .desc = "test model with the shapes of synth-qwen35 (4 layers: 3 delta-net, 1 attention; n_embd 256)",
      .arch = "qwen35", .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim_k = 128, .head_dim_v = 128,
      .n_ff = 768, .n_vocab = 4104, .first_special = 4096, .tied_output = true, .rope_base = 1e7f, .n_ctx_train = 4096,
      .norm_is_post_attn = true, .full_attn_interval = 4, .ssm_d_conv = 4, .ssm_k_heads = 2, .ssm_v_heads = 4,
      .ssm_head_dim = 128, .n_rot = 32, .rope_sections = { 6, 5, 5, 0 } },
    { .name = "tiny-qwen35moe", .desc = "test model with the shapes of synth-qwen35moe (3 layers, 16 experts, 4 used, ff 128, shared expert)",
      .arch = "qwen35moe", .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim_k = 128, .head_dim_v = 128,
      .n_ff = 0, .n_vocab = 4104, .first_special = 4096, .tied_output = false, .rope_base = 1e7f, .n_ctx_train = 4096,
      .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 128, .gating_func = 1, .norm_is_post_attn = true, .router_f32 = true,
      .full_attn_interval = 3, .ssm_d_conv = 4, .ssm_k_heads = 2, .ssm_v_heads = 4, .ssm_head_dim = 128, .n_rot = 32,
      .rope_sections = { 6, 5, 5, 0 }, .n_ff_shexp = 128 },
};

const preset * find_preset(const std::string & name) {
    for (const preset & p : k_presets) {
        if (name == p.name) return &p;
    }
    return nullptr;
}

// The preset with the option overrides applied.
preset resolve(const kiln_synth_options & opt) {
    preset p = *find_preset(opt.preset);
    if (opt.n_layers > 0) {
        p.n_layer = opt.n_layers;
        // keep at least one MoE layer when a model with leading dense layers is cut short
        if (p.n_lead_dense > 0) p.n_lead_dense = std::min(p.n_lead_dense, std::max(1, p.n_layer - 1));
        if (p.n_lead_dense > p.n_layer) p.n_lead_dense = p.n_layer;
        p.n_nextn = std::min(p.n_nextn, std::max(0, p.n_layer - 1));
    }
    if (opt.n_experts > 0 && p.n_expert > 0) {
        p.n_expert = opt.n_experts;
        p.n_expert_used = std::min(p.n_expert_used, p.n_expert);
    }
    return p;
}

// ones: norms; small: biases; decay: ssm_a = -exp(A_log), negative so the recurrent state decays
enum class init_kind { normal, ones, small, decay };

struct tensor_spec {
    std::string name;
    int n_dims;
    int64_t ne[3];
    init_kind init;
    bool f32 = false;   // stored as f32 whatever the type (besides every 1-D tensor)
};

bool is_hybrid(const preset & p) { return p.full_attn_interval > 0; }
bool is_recurrent_layer(const preset & p, int il) { return is_hybrid(p) && (il + 1) % p.full_attn_interval != 0; }

std::vector<tensor_spec> tensor_list(const preset & p) {
    std::vector<tensor_spec> t;
    auto mat = [&](const std::string & name, int64_t ne0, int64_t ne1) { t.push_back({ name, 2, { ne0, ne1, 1 }, init_kind::normal }); };
    auto mat3 = [&](const std::string & name, int64_t ne0, int64_t ne1, int64_t ne2) {
        t.push_back({ name, 3, { ne0, ne1, ne2 }, init_kind::normal });
    };
    auto norm = [&](const std::string & name, int64_t ne0) { t.push_back({ name, 1, { ne0, 1, 1 }, init_kind::ones }); };
    auto bias = [&](const std::string & name, int64_t ne0, int64_t ne1 = 1) {
        t.push_back({ name, ne1 > 1 ? 2 : 1, { ne0, ne1, 1 }, init_kind::small, true });
    };

    const int64_t E = p.n_embd;
    mat("token_embd.weight", E, p.n_vocab);
    norm("output_norm.weight", E);
    if (!p.tied_output) mat("output.weight", E, p.n_vocab);
    const bool mla = std::strcmp(p.arch, "deepseek2") == 0;
    for (int il = 0; il < p.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        norm(b + "attn_norm.weight", E);
        if (is_recurrent_layer(p, il)) {
            const int64_t d_k = p.ssm_head_dim, n_v = (int64_t) p.ssm_v_heads * p.ssm_head_dim;
            const int64_t n_ch = 2 * (int64_t) p.ssm_k_heads * d_k + n_v;
            const bool fused = std::strcmp(p.arch, "qwen3next") == 0;   // q, k, v, z and beta, alpha per key head
            if (fused) {
                mat(b + "ssm_in.weight", E, n_ch + n_v);
                mat(b + "ssm_ba.weight", E, 2 * (int64_t) p.ssm_v_heads);
            } else {
                mat(b + "attn_qkv.weight", E, n_ch);
                mat(b + "attn_gate.weight", E, n_v);
            }
            t.push_back({ b + "ssm_conv1d.weight", 2, { p.ssm_d_conv, n_ch, 1 }, init_kind::normal, true });
            t.push_back({ b + "ssm_dt.bias", 1, { p.ssm_v_heads, 1, 1 }, init_kind::small });
            t.push_back({ b + "ssm_a", 1, { p.ssm_v_heads, 1, 1 }, init_kind::decay });
            if (!fused) {
                mat(b + "ssm_beta.weight", E, p.ssm_v_heads);
                mat(b + "ssm_alpha.weight", E, p.ssm_v_heads);
            }
            norm(b + "ssm_norm.weight", p.ssm_head_dim);
            mat(b + "ssm_out.weight", n_v, E);
        } else if (is_hybrid(p)) {
            // attention with a sigmoid output gate: attn_q holds per head the query, then its gate
            mat(b + "attn_q.weight", E, 2 * (int64_t) p.n_head * p.head_dim_k);
            mat(b + "attn_k.weight", E, (int64_t) p.n_head_kv * p.head_dim_k);
            mat(b + "attn_v.weight", E, (int64_t) p.n_head_kv * p.head_dim_v);
            mat(b + "attn_output.weight", (int64_t) p.n_head * p.head_dim_v, E);
            norm(b + "attn_q_norm.weight", p.head_dim_k);
            norm(b + "attn_k_norm.weight", p.head_dim_k);
        } else if (mla) {
            const int64_t qk_nope = p.head_dim_k - p.qk_rope;
            mat(b + "attn_q_a.weight", E, p.q_lora);
            norm(b + "attn_q_a_norm.weight", p.q_lora);
            mat(b + "attn_q_b.weight", p.q_lora, (int64_t) p.n_head * p.head_dim_k);
            mat(b + "attn_kv_a_mqa.weight", E, p.kv_lora + p.qk_rope);
            norm(b + "attn_kv_a_norm.weight", p.kv_lora);
            mat(b + "attn_kv_b.weight", p.kv_lora, (int64_t) p.n_head * (qk_nope + p.head_dim_v));
            mat(b + "attn_output.weight", (int64_t) p.n_head * p.head_dim_v, E);
        } else {
            const int64_t n_q = (int64_t) p.n_head * p.head_dim_k, n_k = (int64_t) p.n_head_kv * p.head_dim_k;
            const int64_t n_v = (int64_t) p.n_head_kv * p.head_dim_v;
            mat(b + "attn_q.weight", E, n_q);
            mat(b + "attn_k.weight", E, n_k);
            mat(b + "attn_v.weight", E, n_v);
            if (p.qkv_bias) {
                bias(b + "attn_q.bias", n_q);
                bias(b + "attn_k.bias", n_k);
                bias(b + "attn_v.bias", n_v);
            }
            mat(b + "attn_output.weight", (int64_t) p.n_head * p.head_dim_v, E);
            if (p.o_bias_sinks) {
                bias(b + "attn_output.bias", E);
                bias(b + "attn_sinks.weight", p.n_head);
            }
            if (p.qk_norm) {
                norm(b + "attn_q_norm.weight", p.head_dim_k);
                norm(b + "attn_k_norm.weight", p.head_dim_k);
            }
        }
        if (p.post_norms) norm(b + "post_attention_norm.weight", E);
        norm(b + (p.norm_is_post_attn ? "post_attention_norm.weight" : "ffn_norm.weight"), E);
        const bool moe = p.n_expert > 0 && il >= p.n_lead_dense;
        if (!moe) {
            mat(b + "ffn_gate.weight", E, p.n_ff);
            mat(b + "ffn_up.weight", E, p.n_ff);
            mat(b + "ffn_down.weight", p.n_ff, E);
            if (p.post_norms) norm(b + "post_ffw_norm.weight", E);
            continue;
        }
        mat(b + "ffn_gate_inp.weight", E, p.n_expert);
        if (p.router_f32) t.back().f32 = true;
        // deepseek2 writes the selection bias after the router, glm4moe after the experts
        const bool probs_b = p.gating_func == 2, probs_b_first = probs_b && mla;
        if (probs_b_first) t.push_back({ b + "exp_probs_b.bias", 1, { p.n_expert, 1, 1 }, init_kind::small });
        mat3(b + "ffn_gate_exps.weight", E, p.n_ff_exp, p.n_expert);
        mat3(b + "ffn_up_exps.weight", E, p.n_ff_exp, p.n_expert);
        mat3(b + "ffn_down_exps.weight", p.n_ff_exp, E, p.n_expert);
        if (probs_b && !probs_b_first) t.push_back({ b + "exp_probs_b.bias", 1, { p.n_expert, 1, 1 }, init_kind::small });
        if (p.expert_biases) {
            bias(b + "ffn_gate_inp.bias", p.n_expert);
            bias(b + "ffn_gate_exps.bias", p.n_ff_exp, p.n_expert);
            bias(b + "ffn_up_exps.bias", p.n_ff_exp, p.n_expert);
            bias(b + "ffn_down_exps.bias", E, p.n_expert);
        }
        if (p.n_expert_shared > 0 || p.n_ff_shexp > 0) {   // qwen35moe: one gated shared expert, no count key
            const int64_t ff_sh = p.n_ff_shexp > 0 ? p.n_ff_shexp : (int64_t) p.n_ff_exp * p.n_expert_shared;
            if (p.n_ff_shexp > 0) t.push_back({ b + "ffn_gate_inp_shexp.weight", 1, { E, 1, 1 }, init_kind::normal });
            mat(b + "ffn_gate_shexp.weight", E, ff_sh);
            mat(b + "ffn_up_shexp.weight", E, ff_sh);
            mat(b + "ffn_down_shexp.weight", ff_sh, E);
        }
        if (il >= p.n_layer - p.n_nextn) {   // the NextN predictor's own pieces
            mat(b + "nextn.eh_proj.weight", 2 * E, E);
            norm(b + "nextn.enorm.weight", E);
            norm(b + "nextn.hnorm.weight", E);
            norm(b + "nextn.shared_head_norm.weight", E);
        }
    }
    return t;
}

ggml_type storage_type(const tensor_spec & s, ggml_type type) { return s.n_dims == 1 || s.f32 ? GGML_TYPE_F32 : type; }

constexpr size_t k_alignment = 32;

size_t padded(size_t n) { return (n + k_alignment - 1) / k_alignment * k_alignment; }

// xoshiro256** seeded through splitmix64: a fast generator with the same output everywhere.
struct rng {
    uint64_t s[4];

    static uint64_t splitmix(uint64_t & x) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    explicit rng(uint64_t seed) {
        for (uint64_t & v : s) v = splitmix(seed);
    }
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t next() {
        const uint64_t r = rotl(s[1] * 5, 7) * 9;
        const uint64_t t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = rotl(s[3], 45);
        return r;
    }
    // Mean 0, variance 1: the sum of four 16-bit uniforms (close enough to a normal for random
    // weights, and one generator call per value).
    float standard() {
        const uint64_t x = next();
        const float sum = (float) (x & 0xffff) + (float) ((x >> 16) & 0xffff) + (float) ((x >> 32) & 0xffff) +
                          (float) (x >> 48);
        return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
    }
};

uint64_t name_hash(const std::string & name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

void fill(const tensor_spec & s, rng & r, float * out, int64_t n) {
    switch (s.init) {
        case init_kind::ones:
            std::fill(out, out + n, 1.0f);
            break;
        case init_kind::small:
            for (int64_t i = 0; i < n; ++i) out[i] = 0.05f * r.standard();
            break;
        case init_kind::decay:
            for (int64_t i = 0; i < n; ++i) out[i] = -std::exp(0.5f * r.standard());
            break;
        case init_kind::normal: {
            // weights ~ N(0, 1/fan_in) keep every matmul output at unit scale
            const float scale = 1.0f / std::sqrt((float) s.ne[0]);
            for (int64_t i = 0; i < n; ++i) out[i] = scale * r.standard();
            break;
        }
    }
}

void set_kv(gguf_context * g, const preset & p, const kiln_synth_options & opt) {
    const std::string a = p.arch;
    auto key = [&](const char * k) { return a + "." + k; };
    gguf_set_val_u32(g, "general.alignment", (uint32_t) k_alignment);
    gguf_set_val_str(g, "general.architecture", p.arch);
    const std::string name = opt.name.empty() ? "synth-" + opt.preset : opt.name;
    gguf_set_val_str(g, "general.name", name.c_str());
    const uint32_t ftype = opt.type == GGML_TYPE_F32 ? 0 : opt.type == GGML_TYPE_F16 ? 1 : 32;
    gguf_set_val_u32(g, "general.file_type", ftype);
    gguf_set_val_u32(g, key("context_length").c_str(), (uint32_t) p.n_ctx_train);
    gguf_set_val_u32(g, key("embedding_length").c_str(), (uint32_t) p.n_embd);
    gguf_set_val_u32(g, key("block_count").c_str(), (uint32_t) p.n_layer);
    gguf_set_val_u32(g, key("attention.head_count").c_str(), (uint32_t) p.n_head);
    gguf_set_val_u32(g, key("attention.head_count_kv").c_str(), (uint32_t) p.n_head_kv);
    gguf_set_val_f32(g, key("attention.layer_norm_rms_epsilon").c_str(), 1e-6f);
    gguf_set_val_f32(g, key("rope.freq_base").c_str(), p.rope_base);
    if (p.qk_rope > 0) gguf_set_val_u32(g, key("rope.dimension_count").c_str(), (uint32_t) p.qk_rope);
    if (p.n_rot > 0) gguf_set_val_u32(g, key("rope.dimension_count").c_str(), (uint32_t) p.n_rot);
    if (is_hybrid(p)) {
        if (p.rope_sections[0] + p.rope_sections[1] + p.rope_sections[2] + p.rope_sections[3] > 0) {
            gguf_set_arr_data(g, key("rope.dimension_sections").c_str(), GGUF_TYPE_INT32, p.rope_sections, 4);
        }
        gguf_set_val_u32(g, key("ssm.conv_kernel").c_str(), (uint32_t) p.ssm_d_conv);
        gguf_set_val_u32(g, key("ssm.state_size").c_str(), (uint32_t) p.ssm_head_dim);
        gguf_set_val_u32(g, key("ssm.group_count").c_str(), (uint32_t) p.ssm_k_heads);
        gguf_set_val_u32(g, key("ssm.time_step_rank").c_str(), (uint32_t) p.ssm_v_heads);
        gguf_set_val_u32(g, key("ssm.inner_size").c_str(), (uint32_t) (p.ssm_v_heads * p.ssm_head_dim));
        gguf_set_val_u32(g, key("full_attention_interval").c_str(), (uint32_t) p.full_attn_interval);
    }
    if (p.rope_scaling) {
        gguf_set_val_str(g, key("rope.scaling.type").c_str(), p.rope_scaling);
        gguf_set_val_f32(g, key("rope.scaling.factor").c_str(), p.rope_factor);
        if (p.rope_orig_ctx > 0) gguf_set_val_u32(g, key("rope.scaling.original_context_length").c_str(), (uint32_t) p.rope_orig_ctx);
    }
    if (p.n_swa > 0) gguf_set_val_u32(g, key("attention.sliding_window").c_str(), (uint32_t) p.n_swa);
    if (p.n_nextn > 0) gguf_set_val_u32(g, key("nextn_predict_layers").c_str(), (uint32_t) p.n_nextn);
    gguf_set_val_u32(g, key("attention.key_length").c_str(), (uint32_t) p.head_dim_k);
    gguf_set_val_u32(g, key("attention.value_length").c_str(), (uint32_t) p.head_dim_v);
    if (p.q_lora > 0) gguf_set_val_u32(g, key("attention.q_lora_rank").c_str(), (uint32_t) p.q_lora);
    if (p.kv_lora > 0) gguf_set_val_u32(g, key("attention.kv_lora_rank").c_str(), (uint32_t) p.kv_lora);
    if (p.n_ff > 0) gguf_set_val_u32(g, key("feed_forward_length").c_str(), (uint32_t) p.n_ff);   // none in qwen35moe files
    if (p.n_expert > 0) {
        if (p.n_lead_dense > 0) gguf_set_val_u32(g, key("leading_dense_block_count").c_str(), (uint32_t) p.n_lead_dense);
        gguf_set_val_u32(g, key("expert_count").c_str(), (uint32_t) p.n_expert);
        gguf_set_val_u32(g, key("expert_used_count").c_str(), (uint32_t) p.n_expert_used);
        if (p.n_expert_shared > 0) gguf_set_val_u32(g, key("expert_shared_count").c_str(), (uint32_t) p.n_expert_shared);
        gguf_set_val_u32(g, key("expert_feed_forward_length").c_str(), (uint32_t) p.n_ff_exp);
        if (p.n_ff_shexp > 0) gguf_set_val_u32(g, key("expert_shared_feed_forward_length").c_str(), (uint32_t) p.n_ff_shexp);
        if (p.gating_func == 2) {
            gguf_set_val_f32(g, key("expert_weights_scale").c_str(), p.expert_weights_scale);
            gguf_set_val_bool(g, key("expert_weights_norm").c_str(), true);
            gguf_set_val_u32(g, key("expert_gating_func").c_str(), 2);
        }
    }

    const kiln_synth_vocab v = kiln_synth_build_vocab(p.n_vocab, p.first_special);
    std::vector<const char *> tokens, merges;
    for (const std::string & s : v.tokens) tokens.push_back(s.c_str());
    for (const std::string & s : v.merges) merges.push_back(s.c_str());
    gguf_set_val_str(g, "tokenizer.ggml.model", "gpt2");
    gguf_set_val_str(g, "tokenizer.ggml.pre", "qwen2");
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", tokens.data(), tokens.size());
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v.types.data(), v.types.size());
    gguf_set_arr_str(g, "tokenizer.ggml.merges", merges.data(), merges.size());
    gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", (uint32_t) v.id_im_end);
    gguf_set_val_u32(g, "tokenizer.ggml.padding_token_id", (uint32_t) v.id_endoftext);
    gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", (uint32_t) v.id_endoftext);
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", false);
    gguf_set_val_str(g, "tokenizer.chat_template", kiln_synth_chat_template());
}

struct file_closer {
    void operator()(FILE * f) const {
        if (f) std::fclose(f);
    }
};

} // namespace

std::vector<std::pair<std::string, std::string>> kiln_synth_presets() {
    std::vector<std::pair<std::string, std::string>> out;
    for (const preset & p : k_presets) out.emplace_back(p.name, p.desc);
    return out;
}

bool kiln_synth_validate(const kiln_synth_options & opt, std::string & err) {
    const preset * p = find_preset(opt.preset);
    if (!p) {
        err = "unknown preset '" + opt.preset + "' (known:";
        for (const preset & q : k_presets) err += std::string(" ") + q.name;
        err += ")";
        return false;
    }
    if (opt.n_layers == 0 || opt.n_layers < -1 || opt.n_layers > 1000) {
        err = "--layers must be between 1 and 1000";
        return false;
    }
    if (opt.n_experts != -1) {
        if (p->n_expert == 0) {
            err = "--experts: preset '" + opt.preset + "' is not a mixture-of-experts model";
            return false;
        }
        if (opt.n_experts < 1 || opt.n_experts > 4096) {
            err = "--experts must be between 1 and 4096";
            return false;
        }
    }
    if (opt.type != GGML_TYPE_F16 && opt.type != GGML_TYPE_BF16 && opt.type != GGML_TYPE_F32) {
        err = "--type must be f16, bf16 or f32";
        return false;
    }
    return true;
}

std::vector<kiln_synth_tensor> kiln_synth_tensors(const kiln_synth_options & opt) {
    std::vector<kiln_synth_tensor> out;
    std::string err;
    if (!kiln_synth_validate(opt, err)) return out;
    for (const tensor_spec & s : tensor_list(resolve(opt))) {
        out.push_back({ s.name, storage_type(s, opt.type), s.n_dims, { s.ne[0], s.ne[1], s.ne[2] } });
    }
    return out;
}

uint64_t kiln_synth_data_size(const kiln_synth_options & opt) {
    std::string err;
    if (!kiln_synth_validate(opt, err)) return 0;
    uint64_t total = 0;
    for (const tensor_spec & s : tensor_list(resolve(opt))) {
        total += padded(ggml_row_size(storage_type(s, opt.type), s.ne[0]) * (size_t) (s.ne[1] * s.ne[2]));
    }
    return total;
}

bool kiln_synth_write(const kiln_synth_options & opt, const std::string & path, std::string & err,
                      void (*progress)(float, void *), void * user) {
    if (!kiln_synth_validate(opt, err)) return false;
    const preset p = resolve(opt);
    const std::vector<tensor_spec> specs = tensor_list(p);

    // tensor descriptors only: the data is generated while writing
    ggml_init_params ip = { ggml_tensor_overhead() * (specs.size() + 1), nullptr, true };
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> ctx(ggml_init(ip), ggml_free);
    std::unique_ptr<gguf_context, void (*)(gguf_context *)> g(gguf_init_empty(), gguf_free);
    if (!ctx || !g) {
        err = "out of memory";
        return false;
    }
    set_kv(g.get(), p, opt);
    for (const tensor_spec & s : specs) {
        const ggml_type type = storage_type(s, opt.type);
        ggml_tensor * t = s.n_dims == 1   ? ggml_new_tensor_1d(ctx.get(), type, s.ne[0])
                          : s.n_dims == 2 ? ggml_new_tensor_2d(ctx.get(), type, s.ne[0], s.ne[1])
                                          : ggml_new_tensor_3d(ctx.get(), type, s.ne[0], s.ne[1], s.ne[2]);
        ggml_set_name(t, s.name.c_str());
        gguf_add_tensor(g.get(), t);
    }

    const std::string tmp = path + ".tmp";
    std::unique_ptr<FILE, file_closer> f(std::fopen(tmp.c_str(), "wb"));
    if (!f) {
        err = "cannot open " + tmp + " for writing: " + std::strerror(errno);
        return false;
    }
    auto fail_io = [&](const char * what) {
        err = std::string(what) + " " + tmp + ": " + std::strerror(errno);
        f.reset();
        std::remove(tmp.c_str());
        return false;
    };

    std::vector<uint8_t> meta(gguf_get_meta_size(g.get()));
    gguf_get_meta_data(g.get(), meta.data());
    if (std::fwrite(meta.data(), 1, meta.size(), f.get()) != meta.size()) return fail_io("cannot write");

    uint64_t written = 0;
    const uint64_t total = kiln_synth_data_size(opt);
    std::vector<float> buf;
    std::vector<uint8_t> conv;
    const uint8_t zeros[k_alignment] = {};
    for (size_t i = 0; i < specs.size(); ++i) {
        const tensor_spec & s = specs[i];
        const ggml_type type = storage_type(s, opt.type);
        if (written != gguf_get_tensor_offset(g.get(), (int64_t) i)) {
            err = "internal error: tensor " + s.name + " at an unexpected offset";
            f.reset();
            std::remove(tmp.c_str());
            return false;
        }
        rng r(opt.seed ^ name_hash(s.name));
        // a few MiB at a time, in whole rows
        const int64_t row = s.ne[0];
        const int64_t n_rows = s.ne[1] * s.ne[2];
        const int64_t rows_per_chunk = std::max<int64_t>(1, (1 << 20) / row);
        for (int64_t r0 = 0; r0 < n_rows; r0 += rows_per_chunk) {
            const int64_t nr = std::min(rows_per_chunk, n_rows - r0);
            const int64_t n = nr * row;
            buf.resize((size_t) n);
            fill(s, r, buf.data(), n);
            const void * data = buf.data();
            size_t bytes = (size_t) n * sizeof(float);
            if (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) {
                conv.resize((size_t) n * 2);
                if (type == GGML_TYPE_F16) ggml_fp32_to_fp16_row(buf.data(), (ggml_fp16_t *) conv.data(), n);
                else ggml_fp32_to_bf16_row(buf.data(), (ggml_bf16_t *) conv.data(), n);
                data = conv.data();
                bytes = (size_t) n * 2;
            }
            if (std::fwrite(data, 1, bytes, f.get()) != bytes) return fail_io("cannot write");
            written += bytes;
        }
        const size_t pad = padded(written) - written;
        if (pad && std::fwrite(zeros, 1, pad, f.get()) != pad) return fail_io("cannot write");
        written += pad;
        if (progress) progress(total ? (float) ((double) written / total) : 1.0f, user);
    }
    if (std::fflush(f.get()) != 0) return fail_io("cannot write");
    f.reset();
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        err = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

bool kiln_synth_write(const char * preset_name, const char * path, std::string & err) {
    kiln_synth_options opt;
    opt.preset = preset_name ? preset_name : "tiny-qwen3";
    return kiln_synth_write(opt, path ? path : "", err);
}

bool kiln_synth_demo_model(std::string & path, std::string & err) {
    const char * dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/kiln-demo-XXXXXX";
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back(0);
    const int fd = mkstemp(name.data());
    if (fd < 0) {
        err = "cannot create a temporary file in " + tmpl.substr(0, tmpl.rfind('/')) + ": " + std::strerror(errno);
        return false;
    }
    close(fd);
    path = name.data();
    if (!kiln_synth_write("tiny-qwen3", path.c_str(), err)) {
        std::remove(path.c_str());
        return false;
    }
    return true;
}
