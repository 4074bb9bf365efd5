// The file types and the per-tensor recipe of llama-quantize. The rules reproduce the choices of
// ik_llama.cpp's quantizer (checked against ../shared/golden/quantize/*.types.json): which
// tensors get more bits (attention V and K, ffn_down of the first and last layers, the output
// head, attention output of MoE models), which get fewer, and what a type falls back to when the
// row length is not a multiple of its block.
#include "llama-quantize.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace {

using T = ggml_type;

const std::vector<llama_ftype_info> k_ftypes = {
    { "Q4_0",       LLAMA_FT_Q4_0,       GGML_TYPE_Q4_0,     " 4.50 bpw, legacy 4-bit, one scale per 32" },
    { "Q4_1",       LLAMA_FT_Q4_1,       GGML_TYPE_Q4_1,     " 5.00 bpw, legacy 4-bit with a minimum" },
    { "Q5_0",       LLAMA_FT_Q5_0,       GGML_TYPE_Q5_0,     " 5.50 bpw, legacy 5-bit" },
    { "Q5_1",       LLAMA_FT_Q5_1,       GGML_TYPE_Q5_1,     " 6.00 bpw, legacy 5-bit with a minimum" },
    { "Q6_0",       LLAMA_FT_Q6_0,       GGML_TYPE_Q6_0,     " 6.50 bpw, 6-bit blocks of 32" },
    { "Q8_0",       LLAMA_FT_Q8_0,       GGML_TYPE_Q8_0,     " 8.50 bpw, 8-bit, nearly lossless" },
    { "Q2_K",       LLAMA_FT_Q2_K,       GGML_TYPE_Q2_K,     " 2.63 bpw mix, ffn_down/attn_v in Q3_K" },
    { "Q2_K_S",     LLAMA_FT_Q2_K_S,     GGML_TYPE_Q2_K,     " 2.63 bpw, mostly Q2_K (needs an imatrix)" },
    { "Q3_K_S",     LLAMA_FT_Q3_K_S,     GGML_TYPE_Q3_K,     " 3.44 bpw, Q3_K everywhere but the output" },
    { "Q3_K_M",     LLAMA_FT_Q3_K_M,     GGML_TYPE_Q3_K,     " 3.44 bpw mix, attn_v/ffn_down/attn_output higher" },
    { "Q3_K_L",     LLAMA_FT_Q3_K_L,     GGML_TYPE_Q3_K,     " 3.44 bpw mix, attn_v/ffn_down/attn_output in Q5_K" },
    { "Q4_K_S",     LLAMA_FT_Q4_K_S,     GGML_TYPE_Q4_K,     " 4.50 bpw, Q4_K with a few Q5_K" },
    { "Q4_K_M",     LLAMA_FT_Q4_K_M,     GGML_TYPE_Q4_K,     " 4.50 bpw mix, half of attn_v/ffn_down in Q6_K" },
    { "Q5_K_S",     LLAMA_FT_Q5_K_S,     GGML_TYPE_Q5_K,     " 5.50 bpw, Q5_K everywhere but the output" },
    { "Q5_K_M",     LLAMA_FT_Q5_K_M,     GGML_TYPE_Q5_K,     " 5.50 bpw mix, half of attn_v/ffn_down in Q6_K" },
    { "Q6_K",       LLAMA_FT_Q6_K,       GGML_TYPE_Q6_K,     " 6.56 bpw, 6-bit super-blocks" },
    { "IQ2_XXS",    LLAMA_FT_IQ2_XXS,    GGML_TYPE_IQ2_XXS,  " 2.06 bpw i-quant (needs an imatrix)" },
    { "IQ2_XS",     LLAMA_FT_IQ2_XS,     GGML_TYPE_IQ2_XS,   " 2.31 bpw i-quant (needs an imatrix)" },
    { "IQ2_S",      LLAMA_FT_IQ2_S,      GGML_TYPE_IQ2_XS,   " 2.5 bpw i-quant mix (needs an imatrix)" },
    { "IQ2_M",      LLAMA_FT_IQ2_M,      GGML_TYPE_IQ2_S,    " 2.7 bpw i-quant mix (needs an imatrix)" },
    { "IQ1_S",      LLAMA_FT_IQ1_S,      GGML_TYPE_IQ1_S,    " 1.56 bpw i-quant (needs an imatrix)" },
    { "IQ1_M",      LLAMA_FT_IQ1_M,      GGML_TYPE_IQ1_M,    " 1.75 bpw i-quant (needs an imatrix)" },
    { "IQ3_XXS",    LLAMA_FT_IQ3_XXS,    GGML_TYPE_IQ3_XXS,  " 3.06 bpw i-quant" },
    { "IQ3_XS",     LLAMA_FT_IQ3_XS,     GGML_TYPE_IQ3_S,    " 3.3 bpw i-quant mix" },
    { "IQ3_S",      LLAMA_FT_IQ3_S,      GGML_TYPE_IQ3_S,    " 3.44 bpw i-quant" },
    { "IQ3_M",      LLAMA_FT_IQ3_M,      GGML_TYPE_IQ3_S,    " 3.66 bpw i-quant mix" },
    { "IQ4_NL",     LLAMA_FT_IQ4_NL,     GGML_TYPE_IQ4_NL,   " 4.50 bpw non-linear, blocks of 32" },
    { "IQ4_XS",     LLAMA_FT_IQ4_XS,     GGML_TYPE_IQ4_XS,   " 4.25 bpw non-linear" },
    { "TQ1_0",      LLAMA_FT_TQ1_0,      GGML_TYPE_TQ1_0,    " 1.69 bpw ternary (BitNet b1.58 / TriLM models)" },
    { "TQ2_0",      LLAMA_FT_TQ2_0,      GGML_TYPE_TQ2_0,    " 2.06 bpw ternary (BitNet b1.58 / TriLM models)" },
    { "IQ1_BN",     LLAMA_FT_IQ1_BN,     GGML_TYPE_IQ1_BN,   " 1.62 bpw ternary with a row scale (ik, BitNet b1.58)" },
    { "IQ2_BN",     LLAMA_FT_IQ2_BN,     GGML_TYPE_IQ2_BN,   " 2.00 bpw ternary with a row scale (ik, BitNet b1.58)" },
    { "MXFP4",      LLAMA_FT_MXFP4,      GGML_TYPE_MXFP4,    " 4.25 bpw microscaling FP4" },
    { "IQ2_K",      LLAMA_FT_IQ2_K,      GGML_TYPE_IQ2_K,    " 2.38 bpw non-linear (ik)" },
    { "IQ2_KS",     LLAMA_FT_IQ2_KS,     GGML_TYPE_IQ2_KS,   " 2.19 bpw non-linear (ik)" },
    { "IQ2_KL",     LLAMA_FT_IQ2_KL,     GGML_TYPE_IQ2_KL,   " 2.69 bpw non-linear (ik)" },
    { "IQ2_KT",     LLAMA_FT_IQ2_KT,     GGML_TYPE_IQ2_KT,   " 2.13 bpw trellis (ik)" },
    { "IQ1_KT",     LLAMA_FT_IQ1_KT,     GGML_TYPE_IQ1_KT,   " 1.75 bpw trellis (ik)" },
    { "IQ3_K",      LLAMA_FT_IQ3_K,      GGML_TYPE_IQ3_K,    " 3.44 bpw non-linear (ik)" },
    { "IQ3_KS",     LLAMA_FT_IQ3_KS,     GGML_TYPE_IQ3_KS,   " 3.19 bpw non-linear (ik)" },
    { "IQ3_KL",     LLAMA_FT_IQ3_KL,     GGML_TYPE_IQ3_K,    " 4 bpw non-linear mix (ik)" },
    { "IQ3_KT",     LLAMA_FT_IQ3_KT,     GGML_TYPE_IQ3_KT,   " 3.13 bpw trellis (ik)" },
    { "IQ4_K",      LLAMA_FT_IQ4_K,      GGML_TYPE_IQ4_K,    " 4.50 bpw non-linear (ik)" },
    { "IQ4_KS",     LLAMA_FT_IQ4_KS,     GGML_TYPE_IQ4_KS,   " 4.25 bpw non-linear, row scales (ik)" },
    { "IQ4_KSS",    LLAMA_FT_IQ4_KSS,    GGML_TYPE_IQ4_KSS,  " 4.00 bpw non-linear (ik)" },
    { "IQ4_KT",     LLAMA_FT_IQ4_KT,     GGML_TYPE_IQ4_KT,   " 4.00 bpw trellis (ik)" },
    { "IQ5_K",      LLAMA_FT_IQ5_K,      GGML_TYPE_IQ5_K,    " 5.50 bpw non-linear (ik)" },
    { "IQ5_KS",     LLAMA_FT_IQ5_KS,     GGML_TYPE_IQ5_KS,   " 5.25 bpw non-linear, row scales (ik)" },
    { "IQ6_K",      LLAMA_FT_IQ6_K,      GGML_TYPE_IQ6_K,    " 6.63 bpw non-linear (ik)" },
    { "Q8_KV",      LLAMA_FT_Q8_KV,      GGML_TYPE_Q8_KV,    " 8.00 bpw, 8-bit with a row scale (ik)" },
    { "Q4_0_R8",    LLAMA_FT_Q4_0_R8,    GGML_TYPE_Q4_0_R8,  " Q4_0, 8 rows interleaved" },
    { "Q5_0_R4",    LLAMA_FT_Q5_0_R4,    GGML_TYPE_Q5_0_R4,  " Q5_0, 4 rows interleaved" },
    { "Q6_0_R4",    LLAMA_FT_Q6_0_R4,    GGML_TYPE_Q6_0_R4,  " Q6_0, 4 rows interleaved" },
    { "Q8_0_R8",    LLAMA_FT_Q8_0_R8,    GGML_TYPE_Q8_0_R8,  " Q8_0, 8 rows interleaved" },
    { "Q2_K_R4",    LLAMA_FT_Q2_K_R4,    GGML_TYPE_Q2_K_R4,  " Q2_K, 4 rows interleaved" },
    { "Q3_K_R4",    LLAMA_FT_Q3_K_R4,    GGML_TYPE_Q3_K_R4,  " Q3_K, 4 rows interleaved" },
    { "Q4_K_R4",    LLAMA_FT_Q4_K_R4,    GGML_TYPE_Q4_K_R4,  " Q4_K, 4 rows interleaved" },
    { "Q5_K_R4",    LLAMA_FT_Q5_K_R4,    GGML_TYPE_Q5_K_R4,  " Q5_K, 4 rows interleaved" },
    { "Q6_K_R4",    LLAMA_FT_Q6_K_R4,    GGML_TYPE_Q6_K_R4,  " Q6_K, 4 rows interleaved" },
    { "Q8_K_R8",    LLAMA_FT_Q8_K_R8,    GGML_TYPE_Q8_K_R8,  " 8-bit super-blocks, 8 rows interleaved" },
    { "Q8_KV_R8",   LLAMA_FT_Q8_KV_R8,   GGML_TYPE_Q8_KV_R8, " Q8_KV, 8 rows interleaved" },
    { "IQ2_BN_R4",  LLAMA_FT_IQ2_BN_R4,  GGML_TYPE_IQ2_BN_R4, " IQ2_BN, 4 rows interleaved" },
    { "IQ2_XXS_R4", LLAMA_FT_IQ2_XXS_R4, GGML_TYPE_IQ2_XXS_R4, " IQ2_XXS, 4 rows interleaved" },
    { "IQ2_XS_R4",  LLAMA_FT_IQ2_XS_R4,  GGML_TYPE_IQ2_XS_R4, " IQ2_XS, 4 rows interleaved" },
    { "IQ2_M_R4",   LLAMA_FT_IQ2_M_R4,   GGML_TYPE_IQ2_S_R4, " IQ2_M, 4 rows interleaved" },
    { "IQ3_XXS_R4", LLAMA_FT_IQ3_XXS_R4, GGML_TYPE_IQ3_XXS_R4, " IQ3_XXS, 4 rows interleaved" },
    { "IQ3_S_R4",   LLAMA_FT_IQ3_S_R4,   GGML_TYPE_IQ3_S_R4, " IQ3_S, 4 rows interleaved" },
    { "IQ1_S_R4",   LLAMA_FT_IQ1_S_R4,   GGML_TYPE_IQ1_S_R4, " IQ1_S, 4 rows interleaved" },
    { "IQ1_M_R4",   LLAMA_FT_IQ1_M_R4,   GGML_TYPE_IQ1_M_R4, " IQ1_M, 4 rows interleaved" },
    { "IQ4_NL_R4",  LLAMA_FT_IQ4_NL_R4,  GGML_TYPE_IQ4_NL_R4, " IQ4_NL, 4 rows interleaved" },
    { "IQ4_XS_R8",  LLAMA_FT_IQ4_XS_R8,  GGML_TYPE_IQ4_XS_R8, " IQ4_XS, 8 rows interleaved" },
    { "IQ2_K_R4",   LLAMA_FT_IQ2_K_R4,   GGML_TYPE_IQ2_K_R4, " IQ2_K, 4 rows interleaved" },
    { "IQ3_K_R4",   LLAMA_FT_IQ3_K_R4,   GGML_TYPE_IQ3_K_R4, " IQ3_K, 4 rows interleaved" },
    { "IQ4_K_R4",   LLAMA_FT_IQ4_K_R4,   GGML_TYPE_IQ4_K_R4, " IQ4_K, 4 rows interleaved" },
    { "IQ5_K_R4",   LLAMA_FT_IQ5_K_R4,   GGML_TYPE_IQ5_K_R4, " IQ5_K, 4 rows interleaved" },
    { "IQ4_KS_R4",  LLAMA_FT_IQ4_KS_R4,  GGML_TYPE_IQ4_KS_R4, " IQ4_KS, 4 rows interleaved" },
    { "IQ5_KS_R4",  LLAMA_FT_IQ5_KS_R4,  GGML_TYPE_IQ5_KS_R4, " IQ5_KS, 4 rows interleaved" },
    { "MXFP4_R8",   LLAMA_FT_MXFP4_R8,   GGML_TYPE_MXFP4_R8, " MXFP4, 8 rows interleaved" },
    { "BF16_R16",   LLAMA_FT_BF16_R16,   GGML_TYPE_BF16_R16, "16.00 bpw bf16, 16 rows interleaved" },
    { "F16",        LLAMA_FT_F16,        GGML_TYPE_F16,      "16.00 bpw half precision" },
    { "BF16",       LLAMA_FT_BF16,       GGML_TYPE_BF16,     "16.00 bpw bfloat16" },
    { "F32",        LLAMA_FT_ALL_F32,    GGML_TYPE_F32,      "32.00 bpw, no quantization" },
};

std::string upper(std::string s) {
    for (char & c : s) c = (char) std::toupper((unsigned char) c);
    return s;
}

bool parse_int(const std::string & s, long & v) {
    if (s.empty()) return false;
    char * end = nullptr;
    v = std::strtol(s.c_str(), &end, 10);
    return end && *end == 0;
}

bool has(const std::string & s, const char * part) { return s.find(part) != std::string::npos; }

template <typename X>
bool in(X x, std::initializer_list<X> set) {
    return std::find(set.begin(), set.end(), x) != set.end();
}

// The base type and rows per group of a row-interleaved type (the type itself and 1 otherwise).
ggml_type interleave_base(ggml_type t, int * nrows) {
    struct entry { ggml_type t, base; int n; };
    static const entry k[] = {
        { GGML_TYPE_Q4_0_R8, GGML_TYPE_Q4_0, 8 }, { GGML_TYPE_Q5_0_R4, GGML_TYPE_Q5_0, 4 },
        { GGML_TYPE_Q6_0_R4, GGML_TYPE_Q6_0, 4 }, { GGML_TYPE_Q8_0_R8, GGML_TYPE_Q8_0, 8 },
        { GGML_TYPE_Q2_K_R4, GGML_TYPE_Q2_K, 4 }, { GGML_TYPE_Q3_K_R4, GGML_TYPE_Q3_K, 4 },
        { GGML_TYPE_Q4_K_R4, GGML_TYPE_Q4_K, 4 }, { GGML_TYPE_Q5_K_R4, GGML_TYPE_Q5_K, 4 },
        { GGML_TYPE_Q6_K_R4, GGML_TYPE_Q6_K, 4 }, { GGML_TYPE_IQ2_XXS_R4, GGML_TYPE_IQ2_XXS, 4 },
        { GGML_TYPE_IQ2_XS_R4, GGML_TYPE_IQ2_XS, 4 }, { GGML_TYPE_IQ2_S_R4, GGML_TYPE_IQ2_S, 4 },
        { GGML_TYPE_IQ3_XXS_R4, GGML_TYPE_IQ3_XXS, 4 }, { GGML_TYPE_IQ3_S_R4, GGML_TYPE_IQ3_S, 4 },
        { GGML_TYPE_IQ4_XS_R8, GGML_TYPE_IQ4_XS, 8 }, { GGML_TYPE_IQ4_NL_R4, GGML_TYPE_IQ4_NL, 4 },
        { GGML_TYPE_IQ1_S_R4, GGML_TYPE_IQ1_S, 4 }, { GGML_TYPE_IQ1_M_R4, GGML_TYPE_IQ1_M, 4 },
        { GGML_TYPE_IQ2_K_R4, GGML_TYPE_IQ2_K, 4 }, { GGML_TYPE_IQ3_K_R4, GGML_TYPE_IQ3_K, 4 },
        { GGML_TYPE_IQ4_K_R4, GGML_TYPE_IQ4_K, 4 }, { GGML_TYPE_IQ5_K_R4, GGML_TYPE_IQ5_K, 4 },
        { GGML_TYPE_IQ4_KS_R4, GGML_TYPE_IQ4_KS, 4 }, { GGML_TYPE_IQ5_KS_R4, GGML_TYPE_IQ5_KS, 4 },
        { GGML_TYPE_MXFP4_R8, GGML_TYPE_MXFP4, 8 }, { GGML_TYPE_Q8_KV_R8, GGML_TYPE_Q8_KV, 8 },
        { GGML_TYPE_Q8_K_R8, GGML_TYPE_Q8_0, 8 }, { GGML_TYPE_BF16_R16, GGML_TYPE_BF16, 16 },
        { GGML_TYPE_IQ2_BN_R4, GGML_TYPE_IQ2_BN, 4 },
    };
    for (const entry & e : k) {
        if (e.t == t) {
            if (nrows) *nrows = e.n;
            return e.base;
        }
    }
    if (nrows) *nrows = 1;
    return t;
}

} // namespace

ggml_type llama_quant_interleave_base(ggml_type t, int * nrows) { return interleave_base(t, nrows); }

const std::vector<llama_ftype_info> & llama_quant_ftypes() { return k_ftypes; }

const llama_ftype_info * llama_quant_ftype_by_id(int32_t id) {
    for (const auto & f : k_ftypes) {
        if (f.id == id) return &f;
    }
    return nullptr;
}

const llama_ftype_info * llama_quant_ftype_find(const std::string & s) {
    long v;
    if (parse_int(s, v)) return llama_quant_ftype_by_id((int32_t) v);
    const std::string u = upper(s);
    for (const auto & f : k_ftypes) {
        if (u == f.name) return &f;
    }
    return nullptr;
}

ggml_type llama_quant_type_find(const std::string & s) {
    long v;
    if (parse_int(s, v)) return (v >= 0 && v < GGML_TYPE_COUNT && ggml_type_is_valid((int) v)) ? (ggml_type) v : GGML_TYPE_COUNT;
    const std::string u = upper(s);
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (!ggml_type_is_valid(t)) continue;
        const char * n = ggml_type_name((ggml_type) t);
        if (n && upper(n) == u) return (ggml_type) t;
    }
    return GGML_TYPE_COUNT;
}

bool llama_quant_type_writable(ggml_type type) {
    if (type == GGML_TYPE_F32) return true;
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    return tt && tt->known && (tt->quantize || tt->from_float_ref);
}

bool llama_quant_type_readable(ggml_type type) {
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) return true;
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    return tt && tt->known && tt->to_float;
}

ggml_type llama_quant_fallback_type(ggml_type type, int64_t ne0) {
    const int64_t blck = ggml_blck_size(type);
    if (blck <= 1 || ne0 % blck == 0) return type;
    ggml_type t;
    // Types of 4 bits or fewer go to IQ4_NL (blocks of 32); the 4/5/6-bit super-block types to
    // the legacy type one bit up, which keeps the quality at a small cost in size.
    if (in<T>(type, { GGML_TYPE_Q4_K, GGML_TYPE_IQ4_K, GGML_TYPE_Q4_K_R4, GGML_TYPE_IQ4_K_R4, GGML_TYPE_IQ5_KS,
                      GGML_TYPE_IQ5_KS_R4 })) {
        t = GGML_TYPE_Q5_0;
    } else if (in<T>(type, { GGML_TYPE_Q5_K, GGML_TYPE_IQ5_K, GGML_TYPE_Q5_K_R4, GGML_TYPE_IQ5_K_R4 })) {
        t = GGML_TYPE_Q6_0;
    } else if (in<T>(type, { GGML_TYPE_Q6_K, GGML_TYPE_IQ6_K, GGML_TYPE_Q6_K_R4, GGML_TYPE_Q8_K_R8 })) {
        t = GGML_TYPE_Q8_0;
    } else if (in<T>(type, { GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0 })) {
        t = GGML_TYPE_Q4_0;   // as llama.cpp does: ternary weights have no use for IQ4_NL's non-linear grid
    } else if (blck == 256 || in<T>(type, { GGML_TYPE_IQ1_BN, GGML_TYPE_IQ2_BN, GGML_TYPE_IQ2_BN_R4 })) {
        t = GGML_TYPE_IQ4_NL;   // the BitNet types (64-blocks) too, like the other types of 4 bits or fewer
    } else {
        t = GGML_TYPE_F16;   // a blocks-of-32 type on a row of another length
    }
    if (ne0 % ggml_blck_size(t) != 0) t = GGML_TYPE_F16;
    return t;
}

ggml_type llama_quant_recipe_type(const llama_quant_model_info & info, llama_quant_state & st, llama_ftype_id ft,
                                  ggml_type new_type, const std::string & name, const int64_t * ne) {
    using F = llama_ftype_id;
    const int n_expert = info.n_expert;
    const int gqa = info.n_gqa();
    const bool falcon = info.arch == "falcon";

    auto use_more_bits = [](int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; };
    // Layer of an ffn tensor: MoE models store experts in any order, so the name tells.
    auto layer_of = [&](int counter, int n_layer) -> std::pair<int, int> {
        if (n_expert > 1) {
            int il = -1;
            if (std::sscanf(name.c_str(), "blk.%d.", &il) != 1) {
                throw std::runtime_error("cannot determine the layer of tensor " + name);
            }
            if (il < 0 || il >= n_layer) {
                throw std::runtime_error("tensor " + name + " is in layer " + std::to_string(il) + ", but the model has " +
                                         std::to_string(n_layer));
            }
            return { il, n_layer };
        }
        return { counter, n_layer };
    };

    if (name == "output.weight" || (!info.has_output && name == "token_embd.weight")) {
        if (falcon || ne[0] % 256 != 0) {
            new_type = GGML_TYPE_Q8_0;
        } else if (in<F>(ft, { LLAMA_FT_IQ2_XXS, LLAMA_FT_IQ2_XS, LLAMA_FT_IQ3_XXS, LLAMA_FT_IQ1_S, LLAMA_FT_IQ2_S,
                               LLAMA_FT_IQ2_M, LLAMA_FT_IQ1_M, LLAMA_FT_IQ2_K, LLAMA_FT_IQ3_K, LLAMA_FT_IQ2_KS,
                               LLAMA_FT_IQ3_K_R4, LLAMA_FT_IQ3_KS, LLAMA_FT_IQ2_K_R4, LLAMA_FT_IQ3_XXS_R4,
                               LLAMA_FT_IQ2_KL, LLAMA_FT_IQ2_M_R4, LLAMA_FT_IQ1_S_R4, LLAMA_FT_IQ1_M_R4,
                               LLAMA_FT_IQ2_KT, LLAMA_FT_IQ3_KT, LLAMA_FT_IQ1_KT })) {
            new_type = !info.has_output ? GGML_TYPE_IQ4_K : GGML_TYPE_Q5_K;
        } else if (in<F>(ft, { LLAMA_FT_IQ2_XXS_R4, LLAMA_FT_IQ2_XS_R4 })) {
            new_type = !info.has_output ? GGML_TYPE_IQ4_K_R4 : GGML_TYPE_Q5_K_R4;
        } else if (!info.has_output &&
                   in<F>(ft, { LLAMA_FT_IQ3_S, LLAMA_FT_IQ3_M, LLAMA_FT_IQ3_KL, LLAMA_FT_IQ4_XS, LLAMA_FT_IQ3_S_R4,
                               LLAMA_FT_IQ4_KS, LLAMA_FT_IQ4_KSS, LLAMA_FT_IQ4_KS_R4 })) {
            new_type = GGML_TYPE_IQ5_K;
        } else if (!in<T>(new_type, { GGML_TYPE_Q8_0, GGML_TYPE_Q8_0_R8, GGML_TYPE_IQ6_K, GGML_TYPE_Q6_K_R4,
                                      GGML_TYPE_Q8_K_R8, GGML_TYPE_Q8_KV, GGML_TYPE_Q8_KV_R8 })) {
            new_type = GGML_TYPE_Q6_K;
        }
    } else if (name == "token_embd.weight") {
        if (in<F>(ft, { LLAMA_FT_IQ2_XXS, LLAMA_FT_IQ2_XS, LLAMA_FT_IQ1_S, LLAMA_FT_IQ1_M, LLAMA_FT_IQ2_XXS_R4,
                        LLAMA_FT_IQ2_XS_R4, LLAMA_FT_IQ1_S_R4, LLAMA_FT_IQ1_M_R4 })) {
            new_type = GGML_TYPE_Q2_K;
        } else if (in<F>(ft, { LLAMA_FT_IQ2_S, LLAMA_FT_IQ2_M, LLAMA_FT_IQ2_M_R4, LLAMA_FT_IQ3_XXS, LLAMA_FT_IQ3_KT })) {
            new_type = GGML_TYPE_IQ3_S;
        } else if (ft == LLAMA_FT_IQ3_XXS_R4) {
            new_type = GGML_TYPE_IQ3_K;
        } else if (in<F>(ft, { LLAMA_FT_TQ1_0, LLAMA_FT_TQ2_0 })) {
            new_type = GGML_TYPE_Q4_K;   // llama.cpp's choice: the embeddings are not ternary
        } else if (in<F>(ft, { LLAMA_FT_IQ1_BN, LLAMA_FT_IQ2_BN, LLAMA_FT_IQ2_BN_R4 })) {
            new_type = GGML_TYPE_IQ4_NL;   // ik_llama.cpp's choice for its ternary file types
        }
    } else if (in<F>(ft, { LLAMA_FT_IQ1_S_R4, LLAMA_FT_IQ1_M_R4, LLAMA_FT_IQ2_KT })) {
        // The lowest-bit mixes: the same shape of recipe, in row-interleaved types for the _R4 ones.
        const bool r4 = ft != LLAMA_FT_IQ2_KT;
        const T t_v_hi = r4 ? GGML_TYPE_IQ4_K_R4 : GGML_TYPE_IQ4_K;
        const T t_3k = r4 ? GGML_TYPE_IQ3_K_R4 : GGML_TYPE_IQ3_K;
        const T t_q4k = r4 ? GGML_TYPE_Q4_K_R4 : GGML_TYPE_Q4_K;
        if (has(name, "attn_v.weight")) {
            if (n_expert >= 4 || gqa >= 4) new_type = t_v_hi;
            else if (gqa >= 2) new_type = t_3k;
            else new_type = r4 ? GGML_TYPE_Q2_K_R4 : GGML_TYPE_Q2_K;
            ++st.i_attention_wv;
        } else if (n_expert >= 8 && has(name, "attn_k")) {
            new_type = t_q4k;
        } else if (n_expert >= 8 && (has(name, "blk.0.ffn_down") || has(name, "blk.0.ffn_gate") || has(name, "blk.0.ffn_up"))) {
            new_type = t_3k;
        } else if (n_expert >= 8 && has(name, "attn_q")) {
            new_type = t_q4k;
        } else if (has(name, "attn_qkv.weight")) {
            new_type = r4 ? GGML_TYPE_IQ2_K_R4 : GGML_TYPE_IQ3_K;
        } else if (has(name, "_shexp.weight")) {
            new_type = t_v_hi;
        } else if (has(name, "ffn_down")) {
            auto [il, nl] = layer_of(st.i_ffn_down, st.n_ffn_down);
            if (il < nl / 8) new_type = r4 ? GGML_TYPE_Q2_K_R4 : GGML_TYPE_IQ3_K;
            ++st.i_ffn_down;
        } else if (has(name, "attn_output.weight")) {
            new_type = n_expert >= 4 ? (r4 ? GGML_TYPE_Q5_K_R4 : GGML_TYPE_Q5_K) : (r4 ? GGML_TYPE_IQ2_K_R4 : GGML_TYPE_IQ3_K);
        }
    } else if (in<F>(ft, { LLAMA_FT_IQ2_XXS, LLAMA_FT_IQ2_XS, LLAMA_FT_IQ1_S, LLAMA_FT_IQ2_S, LLAMA_FT_IQ2_M,
                           LLAMA_FT_IQ1_M, LLAMA_FT_IQ2_KS, LLAMA_FT_IQ2_XXS_R4, LLAMA_FT_IQ2_XS_R4, LLAMA_FT_IQ2_M_R4 })) {
        const bool s_or_m = in<F>(ft, { LLAMA_FT_IQ2_S, LLAMA_FT_IQ2_M, LLAMA_FT_IQ2_M_R4 });
        if (has(name, "attn_v.weight")) {
            if (gqa >= 4 || n_expert >= 4) new_type = GGML_TYPE_IQ4_K;
            else if (gqa >= 2 || n_expert >= 2) new_type = GGML_TYPE_IQ3_K;
            else new_type = s_or_m ? GGML_TYPE_IQ3_S : GGML_TYPE_Q2_K;
            ++st.i_attention_wv;
        } else if (n_expert >= 8 && (has(name, "attn_k") || has(name, "attn_q"))) {
            new_type = GGML_TYPE_Q4_K;
        } else if (has(name, "attn_qkv.weight")) {
            new_type = s_or_m ? GGML_TYPE_IQ3_XXS : GGML_TYPE_IQ2_K;
        } else if (has(name, "ffn_down")) {
            if (st.i_ffn_down < st.n_ffn_down / 8) new_type = s_or_m ? GGML_TYPE_IQ3_S : GGML_TYPE_Q2_K;
            ++st.i_ffn_down;
        } else if (has(name, "attn_output.weight")) {
            if (n_expert >= 4) new_type = GGML_TYPE_Q5_K;
            else if (ft == LLAMA_FT_IQ1_S || ft == LLAMA_FT_IQ1_M) new_type = GGML_TYPE_IQ2_K;
            else if (s_or_m) new_type = GGML_TYPE_IQ3_S;
        }
    } else if (has(name, "attn_v.weight")) {
        if (n_expert >= 4) {
            // experts dominate the size: a high-precision V costs next to nothing
            new_type = GGML_TYPE_Q8_0;
        } else if (info.is_70b) {
            if (new_type == GGML_TYPE_Q3_K || new_type == GGML_TYPE_Q4_K) new_type = GGML_TYPE_Q5_K;
            if (new_type == GGML_TYPE_IQ3_K) new_type = GGML_TYPE_IQ5_K;
        } else if (ft == LLAMA_FT_Q2_K) {
            new_type = gqa >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
        } else if (ft == LLAMA_FT_IQ2_K) {
            new_type = gqa >= 2 ? GGML_TYPE_IQ4_K : GGML_TYPE_IQ3_K;
        } else if (ft == LLAMA_FT_IQ2_K_R4) {
            new_type = gqa >= 2 ? GGML_TYPE_IQ4_K_R4 : GGML_TYPE_IQ3_K_R4;
        } else if (ft == LLAMA_FT_Q2_K_S && gqa >= 4) {
            new_type = GGML_TYPE_Q4_K;
        } else if (ft == LLAMA_FT_Q2_K_R4 && gqa >= 4) {
            new_type = GGML_TYPE_Q4_K_R4;
        } else if (ft == LLAMA_FT_IQ3_XXS) {
            new_type = gqa >= 4 ? GGML_TYPE_Q4_K : gqa >= 2 ? GGML_TYPE_IQ3_K : !st.has_imatrix ? GGML_TYPE_IQ3_S : GGML_TYPE_IQ3_XXS;
        } else if (ft == LLAMA_FT_IQ3_KT) {
            new_type = gqa >= 4 ? GGML_TYPE_IQ4_K : GGML_TYPE_IQ3_K;
        } else if (ft == LLAMA_FT_IQ4_KT) {
            new_type = gqa >= 4 ? GGML_TYPE_IQ5_K : GGML_TYPE_IQ4_K;
        } else if (ft == LLAMA_FT_IQ3_XXS_R4) {
            new_type = gqa >= 4 ? GGML_TYPE_Q4_K_R4 : gqa >= 2 ? GGML_TYPE_IQ3_K_R4 : !st.has_imatrix ? GGML_TYPE_IQ3_K_R4 : GGML_TYPE_IQ3_XXS_R4;
        } else if ((ft == LLAMA_FT_IQ3_XS || ft == LLAMA_FT_IQ3_S || ft == LLAMA_FT_IQ3_K) && gqa >= 2) {
            new_type = GGML_TYPE_IQ4_K;
        } else if ((ft == LLAMA_FT_IQ3_S_R4 || ft == LLAMA_FT_IQ3_K_R4) && gqa >= 2) {
            new_type = GGML_TYPE_IQ4_K_R4;
        } else if ((ft == LLAMA_FT_IQ3_KS || ft == LLAMA_FT_IQ2_KL) && gqa >= 2) {
            new_type = GGML_TYPE_IQ4_KS;
        } else if (ft == LLAMA_FT_IQ3_KL || ft == LLAMA_FT_IQ3_M) {
            new_type = gqa >= 2 ? GGML_TYPE_IQ5_K : GGML_TYPE_IQ4_K;
        } else if (ft == LLAMA_FT_Q3_K_M) {
            new_type = st.i_attention_wv < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
        } else if (ft == LLAMA_FT_Q3_K_L) {
            new_type = GGML_TYPE_Q5_K;
        } else if (in<F>(ft, { LLAMA_FT_IQ4_NL, LLAMA_FT_IQ4_XS, LLAMA_FT_IQ4_NL_R4, LLAMA_FT_IQ4_XS_R8, LLAMA_FT_IQ4_KS,
                               LLAMA_FT_IQ4_KSS, LLAMA_FT_IQ4_K, LLAMA_FT_IQ4_K_R4 }) && gqa >= 2) {
            new_type = GGML_TYPE_IQ5_K;
        } else if (ft == LLAMA_FT_IQ4_KS_R4 && gqa >= 2) {
            new_type = GGML_TYPE_IQ5_K_R4;
        } else if ((ft == LLAMA_FT_Q4_K_M || ft == LLAMA_FT_Q5_K_M) && use_more_bits(st.i_attention_wv, st.n_attention_wv)) {
            new_type = GGML_TYPE_Q6_K;
        } else if ((ft == LLAMA_FT_Q4_K_S || ft == LLAMA_FT_Q4_K_R4) && st.i_attention_wv < 4) {
            new_type = GGML_TYPE_Q5_K;
        } else if (ft == LLAMA_FT_Q5_K_S) {
            if (info.n_vocab >= 127999 && (info.is_8b || info.is_70b)) new_type = GGML_TYPE_Q6_K;
        } else if (ft == LLAMA_FT_IQ5_K || ft == LLAMA_FT_IQ5_KS) {
            if (info.n_vocab >= 127999 && (info.is_8b || info.is_70b)) new_type = GGML_TYPE_IQ6_K;
        } else if (gqa >= 4) {
            // K/V heads shared by 4+ query heads: V is small, one step up is nearly free
            switch (new_type) {
                case GGML_TYPE_Q2_K: case GGML_TYPE_IQ3_XXS: new_type = GGML_TYPE_IQ3_S; break;
                case GGML_TYPE_Q2_K_R4: case GGML_TYPE_IQ3_XXS_R4: new_type = GGML_TYPE_IQ3_K_R4; break;
                case GGML_TYPE_Q3_K: case GGML_TYPE_IQ3_S: new_type = GGML_TYPE_Q4_K; break;
                case GGML_TYPE_IQ3_K: new_type = GGML_TYPE_IQ4_K; break;
                case GGML_TYPE_IQ3_KS: case GGML_TYPE_IQ2_KL: new_type = GGML_TYPE_IQ4_KS; break;
                case GGML_TYPE_IQ3_S_R4: case GGML_TYPE_Q3_K_R4: new_type = GGML_TYPE_Q4_K_R4; break;
                case GGML_TYPE_Q4_K: case GGML_TYPE_IQ4_XS: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_NL_R4:
                case GGML_TYPE_IQ4_XS_R8: new_type = GGML_TYPE_Q5_K; break;
                case GGML_TYPE_IQ4_K: case GGML_TYPE_IQ4_KS: new_type = GGML_TYPE_IQ5_K; break;
                case GGML_TYPE_Q5_K: new_type = GGML_TYPE_Q6_K; break;
                case GGML_TYPE_IQ5_K: case GGML_TYPE_IQ5_KS: new_type = GGML_TYPE_IQ6_K; break;
                default: break;
            }
        }
        ++st.i_attention_wv;
    } else if (has(name, "attn_k")) {
        if (n_expert >= 4) new_type = GGML_TYPE_Q8_0;
        else if (ft == LLAMA_FT_IQ3_XS) new_type = GGML_TYPE_IQ3_XXS;
        else if (ft == LLAMA_FT_IQ3_XXS || ft == LLAMA_FT_IQ3_XXS_R4) new_type = GGML_TYPE_IQ2_S;
    } else if (has(name, "attn_q")) {
        const bool big_vocab_model = info.n_vocab >= 127999 && (info.is_8b || info.is_70b);
        if (ft == LLAMA_FT_IQ3_XS) new_type = GGML_TYPE_IQ3_XXS;
        else if (ft == LLAMA_FT_IQ3_XXS || ft == LLAMA_FT_IQ3_XXS_R4) new_type = GGML_TYPE_IQ2_S;
        else if (ft == LLAMA_FT_Q5_K_S) { if (big_vocab_model) new_type = GGML_TYPE_Q4_K; }
        else if (ft == LLAMA_FT_IQ5_K) { if (big_vocab_model) new_type = GGML_TYPE_IQ4_K; }
        else if (ft == LLAMA_FT_IQ5_KS) { if (big_vocab_model) new_type = GGML_TYPE_IQ4_KS; }
    } else if (has(name, "ffn_down")) {
        auto [il, nl] = layer_of(st.i_ffn_down, st.n_ffn_down);
        const bool first = il < nl / 8;
        if (ft == LLAMA_FT_Q2_K) new_type = GGML_TYPE_Q3_K;
        else if (ft == LLAMA_FT_Q2_K_S) { if (first) new_type = GGML_TYPE_Q4_K; }
        else if (ft == LLAMA_FT_Q2_K_R4) { if (first) new_type = GGML_TYPE_Q4_K_R4; }
        else if (ft == LLAMA_FT_IQ3_XXS && !st.has_imatrix) new_type = first ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
        else if (ft == LLAMA_FT_IQ3_KT && !st.has_imatrix) new_type = first ? GGML_TYPE_IQ4_K : GGML_TYPE_IQ3_K;
        else if (ft == LLAMA_FT_IQ3_XXS_R4 && !st.has_imatrix) new_type = first ? GGML_TYPE_Q4_K_R4 : GGML_TYPE_IQ3_K_R4;
        else if (ft == LLAMA_FT_Q3_K_M) {
            new_type = il < nl / 16 ? GGML_TYPE_Q5_K : !falcon || use_more_bits(il, nl) ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
        } else if (ft == LLAMA_FT_IQ3_M && (first || (n_expert >= 4 && use_more_bits(il, nl)))) {
            new_type = GGML_TYPE_IQ4_K;
        } else if (ft == LLAMA_FT_Q3_K_L) {
            new_type = falcon ? GGML_TYPE_Q4_K : GGML_TYPE_Q5_K;
        } else if (ft == LLAMA_FT_IQ3_KL) {
            new_type = use_more_bits(il, nl) ? GGML_TYPE_IQ4_KS : GGML_TYPE_IQ3_K;
        } else if (ft == LLAMA_FT_Q4_K_M) {
            if (falcon) {
                new_type = il < nl / 16 ? GGML_TYPE_Q6_K : use_more_bits(il, nl) ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
            } else if (use_more_bits(il, nl)) {
                new_type = GGML_TYPE_Q6_K;
            }
        } else if (first && !st.has_imatrix &&
                   in<F>(ft, { LLAMA_FT_IQ4_NL, LLAMA_FT_IQ4_XS, LLAMA_FT_IQ4_KS, LLAMA_FT_IQ4_KSS, LLAMA_FT_IQ4_NL_R4,
                               LLAMA_FT_IQ4_XS_R8 })) {
            new_type = GGML_TYPE_Q5_K;
        } else if (ft == LLAMA_FT_IQ4_KS_R4 && first && !st.has_imatrix) {
            new_type = GGML_TYPE_Q5_K_R4;
        } else if (ft == LLAMA_FT_Q5_K_M && use_more_bits(il, nl)) {
            new_type = GGML_TYPE_Q6_K;
        } else if ((ft == LLAMA_FT_Q4_K_S || ft == LLAMA_FT_Q4_K_R4) && !falcon && first) {
            new_type = GGML_TYPE_Q5_K;
        } else if ((ft == LLAMA_FT_Q4_0 || ft == LLAMA_FT_Q5_0) && st.has_imatrix && first) {
            // the first ffn_down layers can go wild in Q4_0/Q5_0 even with an imatrix
            new_type = ft == LLAMA_FT_Q4_0 ? GGML_TYPE_Q4_1 : GGML_TYPE_Q5_1;
        } else if (ft == LLAMA_FT_Q4_0_R8 && st.has_imatrix && first) {
            new_type = GGML_TYPE_IQ4_NL_R4;
        }
        ++st.i_ffn_down;
    } else if (has(name, "attn_output.weight")) {
        if (!falcon) {
            if (n_expert >= 4) {
                if (in<F>(ft, { LLAMA_FT_Q2_K, LLAMA_FT_IQ3_XS, LLAMA_FT_IQ3_XXS, LLAMA_FT_Q3_K_S, LLAMA_FT_Q3_K_M,
                                LLAMA_FT_IQ4_NL, LLAMA_FT_Q4_K_S, LLAMA_FT_Q4_K_M, LLAMA_FT_IQ3_S, LLAMA_FT_IQ3_M,
                                LLAMA_FT_IQ4_XS, LLAMA_FT_IQ4_K, LLAMA_FT_IQ4_KSS, LLAMA_FT_IQ4_KS, LLAMA_FT_IQ4_KS_R4,
                                LLAMA_FT_IQ5_KS, LLAMA_FT_IQ5_KS_R4, LLAMA_FT_IQ2_K, LLAMA_FT_IQ3_K, LLAMA_FT_IQ3_KL,
                                LLAMA_FT_Q4_K_R4, LLAMA_FT_IQ4_NL_R4, LLAMA_FT_IQ4_XS_R8, LLAMA_FT_Q3_K_R4,
                                LLAMA_FT_IQ3_KT, LLAMA_FT_IQ3_KS, LLAMA_FT_Q2_K_R4, LLAMA_FT_IQ4_K_R4,
                                LLAMA_FT_IQ3_K_R4, LLAMA_FT_IQ2_K_R4, LLAMA_FT_IQ3_XXS_R4, LLAMA_FT_IQ3_S_R4 })) {
                    new_type = GGML_TYPE_Q5_K;
                } else if (ft == LLAMA_FT_IQ2_KL) {
                    new_type = GGML_TYPE_IQ4_KS;
                }
            } else {
                switch (ft) {
                    case LLAMA_FT_Q2_K: new_type = GGML_TYPE_Q3_K; break;
                    case LLAMA_FT_IQ3_XXS: new_type = GGML_TYPE_IQ3_S; break;
                    case LLAMA_FT_IQ3_KT: if (gqa >= 4) new_type = GGML_TYPE_IQ3_K; break;
                    case LLAMA_FT_IQ3_XXS_R4: new_type = GGML_TYPE_IQ3_K_R4; break;
                    case LLAMA_FT_Q3_K_M: new_type = GGML_TYPE_Q4_K; break;
                    case LLAMA_FT_Q3_K_L: new_type = GGML_TYPE_Q5_K; break;
                    case LLAMA_FT_IQ3_M: new_type = GGML_TYPE_IQ4_K; break;
                    case LLAMA_FT_IQ2_K: new_type = GGML_TYPE_IQ3_K; break;
                    case LLAMA_FT_IQ2_K_R4: new_type = GGML_TYPE_IQ3_K_R4; break;
                    case LLAMA_FT_IQ3_KL: new_type = GGML_TYPE_IQ4_KS; break;
                    default: break;
                }
            }
        } else if (ft == LLAMA_FT_Q3_K_L) {
            new_type = GGML_TYPE_Q4_K;
        }
    } else if (has(name, "attn_qkv.weight")) {
        if (ft == LLAMA_FT_Q3_K_M || ft == LLAMA_FT_Q3_K_L) new_type = GGML_TYPE_Q4_K;
        else if (ft == LLAMA_FT_IQ3_M) new_type = GGML_TYPE_IQ4_K;
        else if (ft == LLAMA_FT_Q4_K_M) new_type = GGML_TYPE_Q5_K;
        else if (ft == LLAMA_FT_Q5_K_M) new_type = GGML_TYPE_Q6_K;
    } else if (has(name, "ffn_gate") || has(name, "ffn_up")) {
        const bool gate = has(name, "ffn_gate");
        int & counter = gate ? st.i_ffn_gate : st.i_ffn_up;
        auto [il, nl] = layer_of(counter, gate ? st.n_ffn_gate : st.n_ffn_up);
        if (ft == LLAMA_FT_IQ3_XS && il >= nl / 8 && il < 7 * nl / 8) new_type = GGML_TYPE_IQ3_XXS;
        else if (ft == LLAMA_FT_IQ3_KL && use_more_bits(il, nl)) new_type = GGML_TYPE_IQ4_KS;
        ++counter;
    }
    return new_type;
}

void llama_quant_parse_rules(const std::string & text, std::vector<llama_quant_rule> & out) {
    // split on commas and newlines; '#' starts a comment that runs to the end of the line
    std::vector<std::string> items;
    std::string cur;
    bool comment = false;
    for (char c : text) {
        if (c == '\n' || c == '\r') {
            comment = false;
            items.push_back(cur);
            cur.clear();
        } else if (comment) {
        } else if (c == '#') {
            comment = true;
        } else if (c == ',') {
            items.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    items.push_back(cur);
    for (std::string item : items) {
        while (!item.empty() && std::isspace((unsigned char) item.back())) item.pop_back();
        size_t b = 0;
        while (b < item.size() && std::isspace((unsigned char) item[b])) ++b;
        item = item.substr(b);
        if (item.empty()) continue;
        const size_t eq = item.rfind('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
            throw std::runtime_error("custom quantization rule '" + item + "' is not of the form regex=type");
        }
        llama_quant_rule r;
        r.pattern = item.substr(0, eq);
        const std::string tname = item.substr(eq + 1);
        r.type = llama_quant_type_find(tname);
        if (r.type == GGML_TYPE_COUNT) {
            throw std::runtime_error("custom quantization rule '" + item + "': unknown type '" + tname + "'");
        }
        try {
            r.re = std::regex(r.pattern);
        } catch (const std::regex_error & e) {
            throw std::runtime_error("custom quantization rule '" + item + "': bad regex '" + r.pattern + "': " + e.what());
        }
        out.push_back(std::move(r));
    }
}

llama_quant_kv_override llama_quant_parse_kv_override(const std::string & text) {
    const size_t eq = text.find('=');
    const size_t colon = eq == std::string::npos ? std::string::npos : text.find(':', eq);
    if (eq == std::string::npos || eq == 0 || colon == std::string::npos) {
        throw std::runtime_error("override '" + text + "' is not of the form KEY=TYPE:VALUE (TYPE int, float, bool or str)");
    }
    llama_quant_kv_override o;
    o.key = text.substr(0, eq);
    if (o.key.size() >= 128) throw std::runtime_error("override '" + text + "': key too long");
    const std::string type = text.substr(eq + 1, colon - eq - 1);
    const std::string val = text.substr(colon + 1);
    char * end = nullptr;
    if (type == "int") {
        o.tag = llama_quant_kv_override::INT;
        o.i = std::strtoll(val.c_str(), &end, 10);
        if (val.empty() || *end) throw std::runtime_error("override '" + text + "': '" + val + "' is not an integer");
    } else if (type == "float") {
        o.tag = llama_quant_kv_override::FLOAT;
        o.f = std::strtod(val.c_str(), &end);
        if (val.empty() || *end) throw std::runtime_error("override '" + text + "': '" + val + "' is not a number");
    } else if (type == "bool") {
        o.tag = llama_quant_kv_override::BOOL;
        if (val == "true") o.b = true;
        else if (val == "false") o.b = false;
        else throw std::runtime_error("override '" + text + "': '" + val + "' is not true or false");
    } else if (type == "str") {
        o.tag = llama_quant_kv_override::STR;
        o.s = val;
    } else {
        throw std::runtime_error("override '" + text + "': unknown type '" + type + "' (int, float, bool or str)");
    }
    return o;
}
