// Model quantization: the file types (pure and mixes), the per-tensor recipe that picks each
// tensor's type the way ik_llama.cpp's llama-quantize does (attention V/K, ffn_down, output,
// token embeddings, first/last layers, MoE experts, fallbacks for row lengths a type's block does
// not divide), user rules (--custom-q and friends), and the quantizing writer.
//
// This is an internal C++ API of libllama used by llama-quantize and the tests: planning a
// model's types needs only its metadata, so tests call llama_quant_plan directly.
#pragma once

#include "ggml.h"
#include "gguf.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

// llama.cpp / ik_llama.cpp file type ids (the value of general.file_type).
enum llama_ftype_id : int32_t {
    LLAMA_FT_ALL_F32 = 0, LLAMA_FT_F16 = 1, LLAMA_FT_Q4_0 = 2, LLAMA_FT_Q4_1 = 3, LLAMA_FT_Q8_0 = 7,
    LLAMA_FT_Q5_0 = 8, LLAMA_FT_Q5_1 = 9, LLAMA_FT_Q2_K = 10, LLAMA_FT_Q3_K_S = 11, LLAMA_FT_Q3_K_M = 12,
    LLAMA_FT_Q3_K_L = 13, LLAMA_FT_Q4_K_S = 14, LLAMA_FT_Q4_K_M = 15, LLAMA_FT_Q5_K_S = 16, LLAMA_FT_Q5_K_M = 17,
    LLAMA_FT_Q6_K = 18, LLAMA_FT_IQ2_XXS = 19, LLAMA_FT_IQ2_XS = 20, LLAMA_FT_Q2_K_S = 21, LLAMA_FT_IQ3_XS = 22,
    LLAMA_FT_IQ3_XXS = 23, LLAMA_FT_IQ1_S = 24, LLAMA_FT_IQ4_NL = 25, LLAMA_FT_IQ3_S = 26, LLAMA_FT_IQ3_M = 27,
    LLAMA_FT_IQ2_S = 28, LLAMA_FT_IQ2_M = 29, LLAMA_FT_IQ4_XS = 30, LLAMA_FT_IQ1_M = 31, LLAMA_FT_BF16 = 32,
    LLAMA_FT_TQ1_0 = 36, LLAMA_FT_TQ2_0 = 37, LLAMA_FT_MXFP4 = 38,
    LLAMA_FT_Q6_0 = 135, LLAMA_FT_IQ1_BN = 136, LLAMA_FT_IQ2_BN = 137, LLAMA_FT_IQ2_K = 138, LLAMA_FT_IQ3_K = 139, LLAMA_FT_IQ4_K = 140, LLAMA_FT_IQ5_K = 141,
    LLAMA_FT_IQ6_K = 142, LLAMA_FT_IQ4_KS = 145, LLAMA_FT_IQ3_KL = 146, LLAMA_FT_IQ2_KS = 147, LLAMA_FT_IQ4_KSS = 148,
    LLAMA_FT_Q8_KV = 149, LLAMA_FT_IQ5_KS = 150, LLAMA_FT_IQ2_KT = 151, LLAMA_FT_IQ3_KT = 152, LLAMA_FT_IQ4_KT = 153,
    LLAMA_FT_IQ3_KS = 154, LLAMA_FT_IQ2_KL = 155, LLAMA_FT_IQ1_KT = 156,
    LLAMA_FT_Q4_0_R8 = 202, LLAMA_FT_Q8_0_R8 = 207, LLAMA_FT_Q5_0_R4 = 208, LLAMA_FT_Q2_K_R4 = 210,
    LLAMA_FT_Q3_K_R4 = 211, LLAMA_FT_Q4_K_R4 = 214, LLAMA_FT_Q5_K_R4 = 216, LLAMA_FT_Q6_K_R4 = 218,
    LLAMA_FT_IQ2_XXS_R4 = 219, LLAMA_FT_IQ2_XS_R4 = 220, LLAMA_FT_IQ3_XXS_R4 = 223, LLAMA_FT_IQ1_S_R4 = 224,
    LLAMA_FT_IQ4_NL_R4 = 225, LLAMA_FT_IQ3_S_R4 = 226, LLAMA_FT_IQ2_M_R4 = 229, LLAMA_FT_IQ4_XS_R8 = 230,
    LLAMA_FT_IQ1_M_R4 = 231, LLAMA_FT_BF16_R16 = 232, LLAMA_FT_Q6_0_R4 = 335, LLAMA_FT_IQ2_BN_R4 = 337, LLAMA_FT_IQ2_K_R4 = 338,
    LLAMA_FT_IQ3_K_R4 = 339, LLAMA_FT_IQ4_K_R4 = 340, LLAMA_FT_IQ5_K_R4 = 341, LLAMA_FT_IQ4_KS_R4 = 345,
    LLAMA_FT_IQ5_KS_R4 = 350, LLAMA_FT_MXFP4_R8 = 351, LLAMA_FT_Q8_KV_R8 = 398, LLAMA_FT_Q8_K_R8 = 399,
};

struct llama_ftype_info {
    const char * name;          // "Q4_K_M"
    llama_ftype_id id;
    ggml_type default_type;     // the type most tensors get
    const char * desc;          // one line for --help
};

// Every file type llama-quantize accepts, in --help order.
const std::vector<llama_ftype_info> & llama_quant_ftypes();
// By name (any case) or by number; nullptr if unknown.
const llama_ftype_info * llama_quant_ftype_find(const std::string & name_or_id);
const llama_ftype_info * llama_quant_ftype_by_id(int32_t id);
// A tensor type by ggml name in any case ("q5_k", "Q5_K", "iq4_xs", "f16") or number;
// GGML_TYPE_COUNT if unknown.
ggml_type llama_quant_type_find(const std::string & name_or_id);
// Can Kiln write this type (a quantizer or converter is registered)?
bool llama_quant_type_writable(ggml_type type);
// Can Kiln read this type back to f32?
bool llama_quant_type_readable(ggml_type type);

// What the recipe needs to know about the model, read from its metadata.
struct llama_quant_model_info {
    std::string arch;
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int n_expert = 0;
    int n_vocab = 0;
    bool has_output = false;        // output.weight exists (else the LM head is tied to token_embd)
    bool is_70b = false;            // llama.cpp's MODEL_70B / MODEL_8B size classes
    bool is_8b = false;
    int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 1; }
};

// One --custom-q rule: tensors whose name matches (regex search) get the type.
struct llama_quant_rule {
    std::string pattern;
    std::regex re;
    ggml_type type;
};

// Parse "regex=type,regex=type" (also one rule per line with # comments when read from a file).
// Throws std::runtime_error naming the rule on a bad regex or an unknown type.
void llama_quant_parse_rules(const std::string & text, std::vector<llama_quant_rule> & out);

// Per-column importance (mean squared activation) per tensor name; expert tensors hold
// n_expert blocks of ne[0] values.
using llama_imatrix_map = std::map<std::string, std::vector<float>>;

// The imatrix entry a tensor is quantized with: its own, or that of a tensor that sees the same
// input (ffn_gate / ffn_up, attn_kv_b / attn_v_b); NULL when there is none.
const std::vector<float> * llama_quant_find_imatrix(const llama_imatrix_map & m, const std::string & name);

struct llama_quant_kv_override {
    std::string key;
    enum { INT, FLOAT, BOOL, STR } tag;
    int64_t i = 0;
    double f = 0;
    bool b = false;
    std::string s;
};
// "KEY=TYPE:VALUE" with TYPE int, float, bool or str; throws naming the override.
llama_quant_kv_override llama_quant_parse_kv_override(const std::string & text);

struct llama_quant_params {
    llama_ftype_id ftype = LLAMA_FT_Q4_K_M;
    int nthread = 0;                                // <= 0: all cores
    ggml_type output_tensor_type = GGML_TYPE_COUNT;
    ggml_type token_embedding_type = GGML_TYPE_COUNT;
    bool pure = false;                              // default type everywhere (fallbacks only)
    bool quantize_output_tensor = true;             // false: --leave-output-tensor
    bool allow_requantize = false;
    bool keep_split = false;
    bool dry_run = false;
    bool ignore_imatrix_rules = false;
    std::vector<llama_quant_rule> custom_rules;
    // --repack: no quantizing; every quantized tensor with an interleaved twin is repacked into
    // it (those whose name matches one of repack_patterns, when any are given)
    bool repack = false;
    std::vector<llama_quant_rule> repack_patterns;  // type unused
    std::vector<llama_quant_kv_override> kv_overrides;
    const llama_imatrix_map * imatrix = nullptr;    // already filtered by include/exclude
    std::string imatrix_file;
    std::string imatrix_dataset;
    int imatrix_chunks = 0;
    // called after each tensor is written (or planned, with dry_run): index, count, the tensor
    std::function<void(int, int, const struct llama_quant_tensor &)> progress;
};

struct llama_quant_tensor {
    std::string name;
    int part = 0;               // input split part
    int64_t id = 0;             // tensor id in its part
    ggml_type src_type = GGML_TYPE_F32;
    ggml_type new_type = GGML_TYPE_F32;
    int n_dims = 0;
    int64_t ne[GGML_MAX_DIMS] = { 1, 1, 1, 1 };
    size_t src_size = 0;
    size_t new_size = 0;
    bool quantize = false;      // converted (false: copied as is)
    bool fallback = false;      // the recipe's type did not fit the row length
    bool custom = false;        // a --custom-q rule chose the type
    bool repack = false;        // --repack: rows woven into the interleaved twin new_type
    const std::vector<float> * imatrix = nullptr;   // importance per column (x n_expert slices)
    int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

struct llama_quant_plan_result {
    llama_quant_model_info info;
    std::vector<llama_quant_tensor> tensors;
    int n_fallback = 0;
};

// Model info from a parsed model (first part holds the metadata).
llama_quant_model_info llama_quant_model_info_from(const gguf_split * model);

// Choose every tensor's type. Throws std::runtime_error with a message naming the cause.
llama_quant_plan_result llama_quant_plan(const gguf_split * model, const llama_quant_params & params);

// The type the recipe picks for one tensor (counters in state advance as the reference's do,
// so call it for the tensors in file order). Exposed for the tests.
struct llama_quant_state {
    int n_attention_wv = 0, i_attention_wv = 0;
    int n_ffn_down = 0, i_ffn_down = 0;
    int n_ffn_gate = 0, i_ffn_gate = 0;
    int n_ffn_up = 0, i_ffn_up = 0;
    bool has_imatrix = false;
};
ggml_type llama_quant_recipe_type(const llama_quant_model_info & info, llama_quant_state & st, llama_ftype_id ftype,
                                  ggml_type default_type, const std::string & name, const int64_t * ne);
// The base type of a row-interleaved type and its rows per group (the type itself and 1 otherwise).
ggml_type llama_quant_interleave_base(ggml_type type, int * nrows);
// The fallback for a row length the type's block does not divide (the type itself if it fits).
ggml_type llama_quant_fallback_type(ggml_type type, int64_t ne0);

struct llama_quant_stats {
    size_t size_org = 0;
    size_t size_new = 0;
    int n_tensors = 0;
    int n_quantized = 0;
};

// Quantize fname_in (a split model's first part or an unsplit file) into fname_out. With
// dry_run nothing is written. Throws std::runtime_error on failure (the output is not left
// behind: it is written to a temporary name and renamed at the end).
llama_quant_stats llama_quant_model(const std::string & fname_in, const std::string & fname_out,
                                    const llama_quant_params & params, llama_quant_plan_result * plan_out = nullptr);
