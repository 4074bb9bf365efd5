// The vocabulary of a model and its tokenizer: SentencePiece-style (SPM, "llama"), byte-level BPE
// ("gpt2", with the pre-tokenizer family named by tokenizer.ggml.pre) and WordPiece ("bert").
// Behaviour follows llama.cpp so that token ids match the reference exactly.
//
// Internal C++ API; the C API in include/llama.h wraps it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct gguf_context;

struct llama_vocab {
    enum class kind { none, spm, bpe, wpm };

    // Pre-tokenizer families of byte-level BPE (tokenizer.ggml.pre).
    enum class pre_type {
        default_, llama3, dbrx, smaug, chatglm4, qwen2, stablelm2, deepseek_llm, deepseek_coder,
        falcon, starcoder, refact, command_r, smollm, codeshell, exaone, minerva, gpt2, mpt,
        olmo, jais, poro, bloom, gpt3_finnish, viking, deepseek_v3, tekken, gpt4o,
    };

    // Token attributes: the same bit values as llama.cpp's llama_token_attr.
    enum attr : uint32_t {
        ATTR_UNDEFINED    = 0,
        ATTR_UNKNOWN      = 1u << 0,
        ATTR_UNUSED       = 1u << 1,
        ATTR_NORMAL       = 1u << 2,
        ATTR_CONTROL      = 1u << 3,
        ATTR_USER_DEFINED = 1u << 4,
        ATTR_BYTE         = 1u << 5,
        ATTR_NORMALIZED   = 1u << 6,
        ATTR_LSTRIP       = 1u << 7,
        ATTR_RSTRIP       = 1u << 8,
        ATTR_SINGLE_WORD  = 1u << 9,
    };

    struct token_data {
        std::string text;
        float       score = 0.0f;
        uint32_t    attr  = ATTR_NORMAL;
    };

    static constexpr int32_t TOKEN_NULL = -1;

    // Read the tokenizer.ggml.* keys. On failure returns false and sets err to a message naming
    // the key (missing, wrong type, array length mismatch, unknown model / pre-tokenizer).
    bool load(const gguf_context * ctx, std::string & err);

    uint32_t n_tokens() const { return (uint32_t) id_to_token.size(); }
    kind     type() const { return type_; }
    pre_type pre() const { return pre_; }
    const std::string & model_name() const { return tokenizer_model; }   // "llama", "gpt2", "bert"
    const std::string & pre_name() const { return tokenizer_pre; }

    // Text of a token as the model outputs it: raw bytes (byte tokens give one byte, which may be
    // part of a UTF-8 sequence). Control/unknown tokens give "" unless special is true.
    // Out-of-range ids give "".
    std::string token_to_piece(int32_t id, bool special) const;

    // add_special: BOS/EOS (SPM, BPE) or CLS/SEP (WPM) as the model's metadata says.
    // parse_special: split control/unknown token texts out of the input (user-defined tokens are
    // always split out, as in llama.cpp).
    std::vector<int32_t> tokenize(const std::string & text, bool add_special, bool parse_special) const;

    // Concatenate the pieces. remove_special drops a leading BOS / trailing EOS that the model
    // adds itself; unparse_special renders control tokens as their text.
    std::string detokenize(const std::vector<int32_t> & tokens, bool remove_special, bool unparse_special) const;

    const token_data & token(int32_t id) const { return id_to_token.at(id); }
    const std::string & token_text(int32_t id) const { return id_to_token.at(id).text; }
    float    token_score(int32_t id) const { return id_to_token.at(id).score; }
    uint32_t token_attr(int32_t id) const { return valid(id) ? id_to_token[id].attr : ATTR_UNDEFINED; }
    int32_t  text_to_token(std::string_view text) const;   // TOKEN_NULL if absent

    bool valid(int32_t id) const { return id >= 0 && id < (int32_t) id_to_token.size(); }
    bool is_normal(int32_t id)       const { return token_attr(id) & ATTR_NORMAL; }
    bool is_control(int32_t id)      const { return token_attr(id) & ATTR_CONTROL; }
    bool is_byte(int32_t id)         const { return token_attr(id) & ATTR_BYTE; }
    bool is_user_defined(int32_t id) const { return token_attr(id) & ATTR_USER_DEFINED; }
    bool is_unknown(int32_t id)      const { return token_attr(id) & ATTR_UNKNOWN; }
    bool is_eog(int32_t id)          const { return id != TOKEN_NULL && eog_ids.count(id) > 0; }

    int32_t bos()  const { return special_bos; }
    int32_t eos()  const { return special_eos; }
    int32_t eot()  const { return special_eot; }
    int32_t eom()  const { return special_eom; }
    int32_t unk()  const { return special_unk; }
    int32_t sep()  const { return special_sep; }
    int32_t pad()  const { return special_pad; }
    int32_t cls()  const { return special_cls; }
    int32_t mask() const { return special_mask; }
    int32_t nl()   const { return linefeed; }
    int32_t fim_pre() const { return special_fim_pre; }
    int32_t fim_suf() const { return special_fim_suf; }
    int32_t fim_mid() const { return special_fim_mid; }
    int32_t fim_pad() const { return special_fim_pad; }
    int32_t fim_rep() const { return special_fim_rep; }
    int32_t fim_sep() const { return special_fim_sep; }
    const std::set<int32_t> & eog() const { return eog_ids; }

    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    bool add_sep() const { return add_sep_; }
    bool add_space_prefix() const { return add_space_prefix_; }
    bool clean_spaces() const { return clean_spaces_; }
    bool ignore_merges() const { return ignore_merges_; }
    int  max_token_len() const { return max_token_len_; }

    // Non-fatal problems seen while loading (bad special ids that fell back to defaults, ...).
    const std::vector<std::string> & warnings() const { return warnings_; }

    // Used by the tokenizer algorithms.
    int32_t find_bpe_rank(std::string_view left, std::string_view right) const;   // -1 if none
    int32_t byte_to_token(uint8_t byte) const;   // SPM <0xXX> token (or the byte itself), else unk

private:
    struct string_hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    using string_map = std::unordered_map<std::string, int32_t, string_hash, std::equal_to<>>;

    void finish_load(const gguf_context * ctx);
    void partition_special(const std::string & text, bool parse_special,
                           std::vector<std::pair<int32_t, std::pair<size_t, size_t>>> & frags) const;
    std::string piece_uncached(int32_t id) const;

    kind        type_ = kind::none;
    pre_type    pre_  = pre_type::default_;
    std::string tokenizer_model;
    std::string tokenizer_pre;

    std::vector<token_data> id_to_token;
    string_map              token_to_id;
    string_map              bpe_ranks;          // key: "left right", as stored in the merges list
    std::vector<int32_t>    special_tokens;     // control/user-defined/unknown, longest text first
    std::vector<std::string> piece_cache;       // token_to_piece(id, special = true)
    std::set<int32_t>       eog_ids;
    std::vector<std::string> warnings_;

    int32_t special_bos = TOKEN_NULL, special_eos = TOKEN_NULL, special_eot = TOKEN_NULL, special_eom = TOKEN_NULL;
    int32_t special_unk = TOKEN_NULL, special_sep = TOKEN_NULL, special_pad = TOKEN_NULL, special_cls = TOKEN_NULL;
    int32_t special_mask = TOKEN_NULL, linefeed = TOKEN_NULL;
    int32_t special_fim_pre = TOKEN_NULL, special_fim_suf = TOKEN_NULL, special_fim_mid = TOKEN_NULL;
    int32_t special_fim_pad = TOKEN_NULL, special_fim_rep = TOKEN_NULL, special_fim_sep = TOKEN_NULL;

    bool add_bos_ = false, add_eos_ = false, add_sep_ = false;
    bool add_space_prefix_ = false, clean_spaces_ = false, ignore_merges_ = false;
    bool remove_extra_whitespaces_ = false;
    int  max_token_len_ = 0;
};
