#include "llama-vocab.h"
#include "llama-vocab-impl.h"
#include "unicode.h"

#include "gguf.h"

#include <algorithm>
#include <cctype>
#include <cstring>

// ---- GGUF access with type checks ----------------------------------------------------------

namespace {

struct kv_reader {
    const gguf_context * ctx;
    std::string & err;

    int64_t find(const char * key) const { return gguf_find_key(ctx, key); }

    bool fail(const std::string & msg) const {
        err = msg;
        return false;
    }

    // Optional string: true if absent or read; false (err set) on a type mismatch.
    bool get_str(const char * key, std::string & out, bool & present) const {
        const int64_t id = find(key);
        present = id >= 0;
        if (!present) return true;
        if (gguf_get_kv_type(ctx, id) != GGUF_TYPE_STRING) {
            return fail(std::string("tokenizer metadata: key '") + key + "' has type " +
                        gguf_type_name(gguf_get_kv_type(ctx, id)) + ", expected string");
        }
        out.assign(gguf_get_val_str(ctx, id), gguf_get_val_str_len(ctx, id));
        return true;
    }

    bool get_bool(const char * key, bool & out, bool & present) const {
        const int64_t id = find(key);
        present = id >= 0;
        if (!present) return true;
        if (gguf_get_kv_type(ctx, id) != GGUF_TYPE_BOOL) {
            return fail(std::string("tokenizer metadata: key '") + key + "' has type " +
                        gguf_type_name(gguf_get_kv_type(ctx, id)) + ", expected bool");
        }
        out = gguf_get_val_bool(ctx, id);
        return true;
    }

    // Any integer type; the value is widened to int64.
    bool get_int(const char * key, int64_t & out, bool & present) const {
        const int64_t id = find(key);
        present = id >= 0;
        if (!present) return true;
        switch (gguf_get_kv_type(ctx, id)) {
            case GGUF_TYPE_UINT8:  out = gguf_get_val_u8(ctx, id);  break;
            case GGUF_TYPE_INT8:   out = gguf_get_val_i8(ctx, id);  break;
            case GGUF_TYPE_UINT16: out = gguf_get_val_u16(ctx, id); break;
            case GGUF_TYPE_INT16:  out = gguf_get_val_i16(ctx, id); break;
            case GGUF_TYPE_UINT32: out = gguf_get_val_u32(ctx, id); break;
            case GGUF_TYPE_INT32:  out = gguf_get_val_i32(ctx, id); break;
            case GGUF_TYPE_UINT64: out = (int64_t) std::min<uint64_t>(gguf_get_val_u64(ctx, id), INT64_MAX); break;
            case GGUF_TYPE_INT64:  out = gguf_get_val_i64(ctx, id); break;
            default:
                return fail(std::string("tokenizer metadata: key '") + key + "' has type " +
                            gguf_type_name(gguf_get_kv_type(ctx, id)) + ", expected an integer");
        }
        return true;
    }

    // Array of the given element type; returns its key id, -1 if absent, -2 on error.
    int64_t get_arr(const char * key, gguf_type elem, const char * elem_name) const {
        const int64_t id = find(key);
        if (id < 0) return -1;
        if (gguf_get_kv_type(ctx, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(ctx, id) != elem) {
            fail(std::string("tokenizer metadata: key '") + key + "' must be an array of " + elem_name);
            return -2;
        }
        return id;
    }
};

const char * const KEY_MODEL       = "tokenizer.ggml.model";
const char * const KEY_PRE         = "tokenizer.ggml.pre";
const char * const KEY_TOKENS      = "tokenizer.ggml.tokens";
const char * const KEY_SCORES      = "tokenizer.ggml.scores";
const char * const KEY_TOKEN_TYPE  = "tokenizer.ggml.token_type";
const char * const KEY_MERGES      = "tokenizer.ggml.merges";

// GGUF token types (tokenizer.ggml.token_type) -> attributes
uint32_t attr_from_token_type(int32_t t) {
    switch (t) {
        case 1: return llama_vocab::ATTR_NORMAL;
        case 2: return llama_vocab::ATTR_UNKNOWN;
        case 3: return llama_vocab::ATTR_CONTROL;
        case 4: return llama_vocab::ATTR_USER_DEFINED;
        case 5: return llama_vocab::ATTR_UNUSED;
        case 6: return llama_vocab::ATTR_BYTE;
        default: return llama_vocab::ATTR_UNDEFINED;
    }
}

struct pre_name_entry {
    const char * name;
    llama_vocab::pre_type type;
};

using P = llama_vocab::pre_type;
const pre_name_entry k_pre_names[] = {
    {"default", P::default_},
    {"llama3", P::llama3}, {"llama-v3", P::llama3}, {"llama-bpe", P::llama3}, {"falcon3", P::llama3},
    {"pixtral", P::llama3},
    {"dbrx", P::dbrx}, {"smaug-bpe", P::smaug}, {"chatglm-bpe", P::chatglm4}, {"glm4", P::chatglm4},
    {"qwen2", P::qwen2}, {"deepseek-r1-qwen", P::qwen2}, {"megrez", P::qwen2}, {"stablelm2", P::stablelm2},
    {"deepseek-llm", P::deepseek_llm}, {"deepseek-coder", P::deepseek_coder},
    {"falcon", P::falcon}, {"mpt", P::mpt}, {"starcoder", P::starcoder}, {"refact", P::refact},
    {"command-r", P::command_r}, {"smollm", P::smollm}, {"codeshell", P::codeshell},
    {"exaone", P::exaone}, {"minerva-7b", P::minerva},
    {"gpt-2", P::gpt2}, {"phi-2", P::gpt2}, {"jina-es", P::gpt2}, {"jina-de", P::gpt2},
    {"jina-v2-es", P::gpt2}, {"jina-v2-de", P::gpt2}, {"jina-v1-en", P::gpt2}, {"jina-v2-code", P::gpt2},
    {"roberta-bpe", P::gpt2}, {"gigachat", P::gpt2}, {"exaone4", P::gpt2},
    {"olmo", P::olmo}, {"jais", P::jais},
    {"poro-chat", P::poro}, {"bloom", P::bloom}, {"gpt3-finnish", P::gpt3_finnish}, {"viking", P::viking},
    {"falcon-h1", P::llama3}, {"midm-2.0", P::llama3}, {"lfm2", P::llama3},
    {"hunyuan", P::qwen2}, {"grok-2", P::qwen2},
    {"a.x-4.0", P::gpt2}, {"mellum", P::gpt2}, {"trillion", P::gpt2}, {"granite-docling", P::gpt2},
    {"deepseek-v3", P::deepseek_v3}, {"hunyuan-dense", P::deepseek_v3},
    {"tekken", P::tekken}, {"gpt-4o", P::gpt4o}, {"llama4", P::gpt4o}, {"minimax-m2", P::gpt4o},
};

// Pre-tokenizer names whose detokenized text must not have spaces cleaned up.
const char * const k_no_clean_spaces[] = {
    "deepseek-llm", "deepseek-coder", "deepseek-v3", "command-r", "qwen2", "deepseek-r1-qwen", "poro-chat",
    "viking", "tekken", "smollm", "gpt-4o", "llama4", "trillion", "granite-docling", "hunyuan", "hunyuan-dense",
    "grok-2", "minimax-m2",
};

bool contains_any(const std::string & s, std::initializer_list<const char *> subs) {
    for (const char * sub : subs) {
        if (s.find(sub) != std::string::npos) return true;
    }
    return false;
}

} // namespace

// ---- loading -------------------------------------------------------------------------------

bool llama_vocab::load(const gguf_context * ctx, std::string & err) {
    *this = llama_vocab();
    if (!ctx) {
        err = "tokenizer metadata: no GGUF context";
        return false;
    }
    kv_reader kv{ctx, err};
    bool present = false;

    if (!kv.get_str(KEY_MODEL, tokenizer_model, present)) return false;
    if (!present) return kv.fail(std::string("tokenizer metadata: missing key '") + KEY_MODEL + "'");
    if (!kv.get_str(KEY_PRE, tokenizer_pre, present)) return false;

    if (tokenizer_model == "llama") {
        type_ = kind::spm;
        special_bos = 1; special_eos = 2; special_unk = 0;
        add_space_prefix_ = true;
        add_bos_ = true;
    } else if (tokenizer_model == "bert") {
        type_ = kind::wpm;
        special_bos = 101; special_unk = 100; special_sep = 102; special_pad = 0; special_mask = 103;
        special_cls = 101;
        clean_spaces_ = true;
        add_bos_ = true;
        add_sep_ = true;
    } else if (tokenizer_model == "gpt2") {
        type_ = kind::bpe;
        special_bos = 11; special_eos = 11;   // the reference's historical (Falcon) defaults
        clean_spaces_ = true;
        if (tokenizer_pre.empty()) {
            pre_ = pre_type::default_;
            warnings_.push_back("missing tokenizer.ggml.pre: using the 'default' pre-tokenizer (quality may suffer)");
        } else {
            bool known = false;
            for (const auto & e : k_pre_names) {
                if (tokenizer_pre == e.name) { pre_ = e.type; known = true; break; }
            }
            if (!known) {
                return kv.fail("tokenizer metadata: unknown pre-tokenizer '" + tokenizer_pre + "' in key '" + KEY_PRE + "'");
            }
        }
        for (const char * name : k_no_clean_spaces) {
            if (tokenizer_pre == name) clean_spaces_ = false;
        }
        if (pre_ == P::llama3 || pre_ == P::tekken) {
            ignore_merges_ = true;
            add_bos_ = true;
        }
        if (pre_ == P::chatglm4) special_bos = TOKEN_NULL;
    } else if (tokenizer_model == "no_vocab" || tokenizer_model == "none") {
        type_ = kind::none;
        return true;
    } else {
        return kv.fail("tokenizer metadata: unsupported tokenizer model '" + tokenizer_model + "' in key '" + KEY_MODEL + "'");
    }

    // tokens, scores, types
    const int64_t tok_id = kv.get_arr(KEY_TOKENS, GGUF_TYPE_STRING, "strings");
    if (tok_id == -2) return false;
    if (tok_id == -1) return kv.fail(std::string("tokenizer metadata: missing key '") + KEY_TOKENS + "'");
    const size_t n = gguf_get_arr_n(ctx, tok_id);
    if (n == 0) return kv.fail(std::string("tokenizer metadata: key '") + KEY_TOKENS + "' is empty");
    if (n > (size_t) INT32_MAX) return kv.fail(std::string("tokenizer metadata: key '") + KEY_TOKENS + "' has too many entries");

    const float * scores = nullptr;
    const int64_t sc_id = kv.get_arr(KEY_SCORES, GGUF_TYPE_FLOAT32, "float32");
    if (sc_id == -2) return false;
    if (sc_id >= 0) {
        if (gguf_get_arr_n(ctx, sc_id) != n) {
            return kv.fail(std::string("tokenizer metadata: key '") + KEY_SCORES + "' has " +
                           std::to_string(gguf_get_arr_n(ctx, sc_id)) + " entries, expected " + std::to_string(n) + " (one per token)");
        }
        scores = (const float *) gguf_get_arr_data(ctx, sc_id);
    }

    const int32_t * types = nullptr;
    {
        const int64_t id = kv.find(KEY_TOKEN_TYPE);
        if (id >= 0) {
            if (gguf_get_kv_type(ctx, id) != GGUF_TYPE_ARRAY ||
                (gguf_get_arr_type(ctx, id) != GGUF_TYPE_INT32 && gguf_get_arr_type(ctx, id) != GGUF_TYPE_UINT32)) {
                return kv.fail(std::string("tokenizer metadata: key '") + KEY_TOKEN_TYPE + "' must be an array of int32");
            }
            if (gguf_get_arr_n(ctx, id) != n) {
                return kv.fail(std::string("tokenizer metadata: key '") + KEY_TOKEN_TYPE + "' has " +
                               std::to_string(gguf_get_arr_n(ctx, id)) + " entries, expected " + std::to_string(n) + " (one per token)");
            }
            types = (const int32_t *) gguf_get_arr_data(ctx, id);
        }
    }

    id_to_token.resize(n);
    token_to_id.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        std::string word(gguf_get_arr_str(ctx, tok_id, i), gguf_get_arr_str_len(ctx, tok_id, i));
        if (word.empty()) word = "[EMPTY_" + std::to_string(i) + "]";   // keep every id reachable by text
        token_to_id[word] = (int32_t) i;   // a later duplicate wins, as in the reference
        max_token_len_ = std::max(max_token_len_, (int) word.size());
        token_data & td = id_to_token[i];
        td.text  = std::move(word);
        td.score = scores ? scores[i] : 0.0f;
        td.attr  = types ? attr_from_token_type(types[i]) : ATTR_NORMAL;
    }

    // merges (BPE)
    if (type_ == kind::bpe) {
        const int64_t m_id = kv.get_arr(KEY_MERGES, GGUF_TYPE_STRING, "strings");
        if (m_id == -2) return false;
        if (m_id == -1) return kv.fail(std::string("tokenizer metadata: missing key '") + KEY_MERGES + "' (required by gpt2 tokenizers)");
        const size_t nm = gguf_get_arr_n(ctx, m_id);
        bpe_ranks.reserve(nm);
        for (size_t i = 0; i < nm; ++i) {
            std::string merge(gguf_get_arr_str(ctx, m_id, i), gguf_get_arr_str_len(ctx, m_id, i));
            // "left right", split at the first space after the first byte; the first rank wins
            const size_t pos = merge.find(' ', 1);
            if (pos == std::string::npos) {
                warnings_.push_back("tokenizer.ggml.merges[" + std::to_string(i) + "] has no space separator: ignored");
                continue;
            }
            bpe_ranks.emplace(std::move(merge), (int32_t) i);
        }
    }

    // optional flags
    bool b = false;
    if (!kv.get_bool("tokenizer.ggml.add_space_prefix", b, present)) return false;
    if (present) add_space_prefix_ = b;
    if (!kv.get_bool("tokenizer.ggml.remove_extra_whitespaces", b, present)) return false;
    if (present) remove_extra_whitespaces_ = b;

    // special token ids: an out-of-range id keeps the default (the reference does the same)
    const std::pair<const char *, int32_t *> ids[] = {
        {"tokenizer.ggml.bos_token_id", &special_bos},
        {"tokenizer.ggml.eos_token_id", &special_eos},
        {"tokenizer.ggml.eot_token_id", &special_eot},
        {"tokenizer.ggml.eom_token_id", &special_eom},
        {"tokenizer.ggml.unknown_token_id", &special_unk},
        {"tokenizer.ggml.seperator_token_id", &special_sep},
        {"tokenizer.ggml.padding_token_id", &special_pad},
        {"tokenizer.ggml.cls_token_id", &special_cls},
        {"tokenizer.ggml.mask_token_id", &special_mask},
        {"tokenizer.ggml.fim_pre_token_id", &special_fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &special_fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &special_fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &special_fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &special_fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &special_fim_sep},
        {"tokenizer.ggml.prefix_token_id", &special_fim_pre},
        {"tokenizer.ggml.suffix_token_id", &special_fim_suf},
        {"tokenizer.ggml.middle_token_id", &special_fim_mid},
    };
    for (const auto & [key, dst] : ids) {
        int64_t v = 0;
        if (!kv.get_int(key, v, present)) return false;
        if (!present) continue;
        if (v < 0 || v >= (int64_t) n) {
            warnings_.push_back(std::string("bad special token: '") + key + "' = " + std::to_string(v) +
                                ", using default id " + std::to_string(*dst));
            continue;
        }
        *dst = (int32_t) v;
    }
    if (type_ == kind::wpm && kv.find("tokenizer.ggml.bos_token_id") < 0 && special_cls != TOKEN_NULL) {
        special_bos = special_cls;   // BERT starts a sequence with [CLS]
    }
    // A default id (BERT's [UNK] is 100) may lie outside a small vocabulary: then there is no such
    // token, rather than an id that tokenize would emit and every reader index out of bounds.
    // (found by fuzz-gguf: a bert vocabulary of 8 tokens without unknown_token_id)
    for (const auto & [key, dst] : ids) {
        if (*dst != TOKEN_NULL && (*dst < 0 || *dst >= (int32_t) n)) {
            warnings_.push_back(std::string("no token for '") + key + "': the default id " + std::to_string(*dst) +
                                " is outside the vocabulary of " + std::to_string(n) + " tokens");
            *dst = TOKEN_NULL;
        }
    }

    if (!kv.get_bool("tokenizer.ggml.add_bos_token", b, present)) return false;
    if (present) add_bos_ = b;
    if (!kv.get_bool("tokenizer.ggml.add_eos_token", b, present)) return false;
    if (present) add_eos_ = b;
    if (!kv.get_bool("tokenizer.ggml.add_sep_token", b, present)) return false;
    if (present) add_sep_ = b;

    if (type_ == kind::bpe && !llama_bpe_pretok_supported(pre_)) {
        return kv.fail("tokenizer metadata: pre-tokenizer '" + tokenizer_pre + "' is not supported");
    }

    finish_load(ctx);
    return true;
}

// Derived state: special tokens recognized by their text, end-of-generation set, the list of
// texts split out before tokenization, the piece cache and per-model token attributes.
void llama_vocab::finish_load(const gguf_context * ctx) {
    const int32_t n = (int32_t) id_to_token.size();

    auto force_control = [&](int32_t id) {
        if (!(id_to_token[id].attr & ATTR_CONTROL)) {
            warnings_.push_back("control-looking token " + std::to_string(id) + " '" + id_to_token[id].text +
                                "' was not control-type; treating it as control");
            id_to_token[id].attr = ATTR_CONTROL;
        }
    };
    // the first text of the list present in the vocabulary fills an unset slot
    auto detect = [&](int32_t & slot, std::initializer_list<const char *> texts) {
        if (slot != TOKEN_NULL) return;
        for (const char * t : texts) {
            const int32_t id = text_to_token(t);
            if (id == TOKEN_NULL) continue;
            slot = id;
            force_control(id);
            return;
        }
    };
    detect(special_eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
                         "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "<end_of_utterance>"});
    detect(special_eom, {"<|eom_id|>"});
    detect(special_fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
                             "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>"});
    detect(special_fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
                             "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>"});
    detect(special_fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
                             "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>"});
    detect(special_fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"});
    detect(special_fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
    detect(special_fim_sep, {"<|file_sep|>"});

    eog_ids.clear();
    for (int32_t id : {special_fim_pad, special_fim_rep, special_fim_sep}) {
        if (id != TOKEN_NULL) eog_ids.insert(id);
    }
    static const char * const k_eog_texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
        "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
    };
    for (const char * t : k_eog_texts) {
        const int32_t id = text_to_token(t);
        if (id == TOKEN_NULL) continue;
        eog_ids.insert(id);
        force_control(id);
    }
    for (int32_t id : {special_eos, special_eot, special_eom}) {
        if (id != TOKEN_NULL) eog_ids.insert(id);
    }

    // texts split out of the input before tokenization, longest first
    special_tokens.clear();
    for (int32_t id = 0; id < n; ++id) {
        if (id_to_token[id].attr & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) special_tokens.push_back(id);
    }
    std::stable_sort(special_tokens.begin(), special_tokens.end(), [&](int32_t a, int32_t b) {
        return id_to_token[a].text.size() > id_to_token[b].text.size();
    });

    piece_cache.assign(n, std::string());
    for (int32_t id = 0; id < n; ++id) piece_cache[id] = piece_uncached(id);

    // Attributes the reference sets by model name (they are not stored in GGUF files).
    std::string name, arch;
    {
        bool present = false;
        std::string dummy_err;
        kv_reader kv{ctx, dummy_err};
        kv.get_str("general.name", name, present);
        kv.get_str("general.architecture", arch, present);
    }
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return (char) std::tolower(c); });
    if (contains_any(tokenizer_pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
        contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
        const int32_t id = text_to_token("<mask>");
        if (id != TOKEN_NULL) id_to_token[id].attr |= ATTR_LSTRIP;
    } else if (contains_any(name, {"phi-3", "phi3"})) {
        for (int32_t id : special_tokens) id_to_token[id].attr |= ATTR_RSTRIP;
        if (int32_t id = text_to_token("</s>"); id != TOKEN_NULL) id_to_token[id].attr |= ATTR_RSTRIP;
        for (const char * t : {"<unk>", "<s>", "<|endoftext|>"}) {
            if (int32_t id = text_to_token(t); id != TOKEN_NULL) id_to_token[id].attr &= ~(uint32_t) ATTR_RSTRIP;
        }
    }

    // newline token
    if (type_ == kind::spm) {
        linefeed = byte_to_token('\n');
    } else if (type_ == kind::wpm) {
        linefeed = special_pad;
    } else {
        const std::vector<int32_t> ids = tokenize("\n", false, false);
        linefeed = ids.empty() ? special_pad : ids[0];
    }
}

// ---- lookups -------------------------------------------------------------------------------

int32_t llama_vocab::text_to_token(std::string_view text) const {
    const auto it = token_to_id.find(text);
    return it == token_to_id.end() ? TOKEN_NULL : it->second;
}

int32_t llama_vocab::find_bpe_rank(std::string_view left, std::string_view right) const {
    // merges are keyed by "left right"; a left part containing a space could alias another pair
    if (left.find(' ') != std::string_view::npos) return -1;
    thread_local std::string key;
    key.assign(left);
    key += ' ';
    key.append(right);
    const auto it = bpe_ranks.find(std::string_view(key));
    return it == bpe_ranks.end() ? -1 : it->second;
}

int32_t llama_vocab::byte_to_token(uint8_t byte) const {
    static const char hex[] = "0123456789ABCDEF";
    if (type_ == kind::spm) {
        const char buf[6] = {'<', '0', 'x', hex[byte >> 4], hex[byte & 15], '>'};
        int32_t id = text_to_token(std::string_view(buf, 6));
        if (id == TOKEN_NULL) id = text_to_token(std::string_view((const char *) &byte, 1));
        return id != TOKEN_NULL ? id : special_unk;
    }
    const int32_t id = text_to_token(unicode_byte_to_utf8(byte));
    return id != TOKEN_NULL ? id : special_unk;
}

// ---- pieces --------------------------------------------------------------------------------

namespace {

void replace_all(std::string & s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    for (;;) {
        const size_t hit = s.find(from, pos);
        if (hit == std::string::npos) break;
        out.append(s, pos, hit - pos);
        out.append(to);
        pos = hit + from.size();
    }
    out.append(s, pos, std::string::npos);
    s.swap(out);
}

// Byte-level BPE text back to bytes. A code point outside the byte map (added tokens stored as
// normal tokens) is kept as its UTF-8.
std::string bpe_decode_text(const std::string & text) {
    std::string out;
    size_t off = 0;
    while (off < text.size()) {
        const size_t start = off;
        const uint32_t cpt = unicode_cpt_from_utf8(text, off);
        uint8_t byte;
        if (unicode_utf8_to_byte(cpt, byte)) {
            out += (char) byte;
        } else {
            out.append(text, start, off - start);
        }
    }
    return out;
}

} // namespace

std::string llama_vocab::piece_uncached(int32_t id) const {
    const token_data & td = id_to_token[id];
    if (td.attr & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) return td.text;
    switch (type_) {
        case kind::spm:
        case kind::wpm:
            if (td.attr & ATTR_NORMAL) {
                std::string s = td.text;
                replace_all(s, "\xE2\x96\x81", " ");
                return s;
            }
            if (td.attr & ATTR_BYTE) {
                // "<0xXX>"
                if (td.text.size() == 6 && td.text.compare(0, 3, "<0x") == 0) {
                    return std::string(1, (char) std::strtol(td.text.substr(3, 2).c_str(), nullptr, 16));
                }
                return td.text;
            }
            return std::string();
        case kind::bpe:
            if (td.attr & ATTR_NORMAL) return bpe_decode_text(td.text);
            return std::string();
        case kind::none:
            break;
    }
    return std::string();
}

std::string llama_vocab::token_to_piece(int32_t id, bool special) const {
    if (!valid(id)) return std::string();
    if (!special && (id_to_token[id].attr & (ATTR_UNKNOWN | ATTR_CONTROL))) return std::string();
    return piece_cache[id];
}

// ---- tokenize ------------------------------------------------------------------------------

// Split the special-token texts out of `text`. Output fragments: (token id, {0, 0}) or
// (TOKEN_NULL, {offset, length}) for raw text. Each special text is processed in turn (longest
// first) over all remaining raw fragments, which is the reference's order of precedence.
void llama_vocab::partition_special(const std::string & text, bool parse_special,
                                    std::vector<std::pair<int32_t, std::pair<size_t, size_t>>> & frags) const {
    frags.clear();
    frags.push_back({TOKEN_NULL, {0, text.size()}});
    std::vector<std::pair<int32_t, std::pair<size_t, size_t>>> next;

    for (int32_t id : special_tokens) {
        const token_data & td = id_to_token[id];
        if (!parse_special && (td.attr & (ATTR_CONTROL | ATTR_UNKNOWN))) continue;   // user-defined always apply
        const std::string & tok = td.text;
        if (text.find(tok) == std::string::npos) continue;   // cheap reject for the common case

        next.clear();
        for (const auto & fr : frags) {
            if (fr.first != TOKEN_NULL) { next.push_back(fr); continue; }
            size_t off = fr.second.first;
            size_t len = fr.second.second;
            for (;;) {
                const size_t hit = std::string_view(text.data(), off + len).find(tok, off);
                if (hit == std::string_view::npos) {
                    if (len > 0) next.push_back({TOKEN_NULL, {off, len}});
                    break;
                }
                if (hit > off) {
                    size_t left_len = hit - off;
                    if (td.attr & ATTR_LSTRIP) {
                        while (left_len > 0 && std::isspace((unsigned char) text[off + left_len - 1])) --left_len;
                    }
                    if (left_len > 0) next.push_back({TOKEN_NULL, {off, left_len}});
                }
                next.push_back({id, {0, 0}});
                size_t r_off = hit + tok.size();
                size_t r_len = off + len - r_off;
                if (td.attr & ATTR_RSTRIP) {
                    while (r_len > 0 && std::isspace((unsigned char) text[r_off])) { ++r_off; --r_len; }
                }
                if (r_len == 0) break;
                off = r_off;
                len = r_len;
            }
        }
        frags.swap(next);
    }
}

std::vector<int32_t> llama_vocab::tokenize(const std::string & text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    if (type_ == kind::none) return out;

    std::vector<std::pair<int32_t, std::pair<size_t, size_t>>> frags;
    if (!text.empty()) partition_special(text, parse_special, frags);

    switch (type_) {
        case kind::spm: {
            bool prev_special = true;   // the first fragment gets the space prefix
            if (add_special && add_bos_ && special_bos != TOKEN_NULL) out.push_back(special_bos);
            for (const auto & fr : frags) {
                if (fr.first != TOKEN_NULL) {
                    out.push_back(fr.first);
                    prev_special = true;
                    continue;
                }
                std::string piece;
                if (add_space_prefix_ && prev_special) piece = " ";
                piece.append(text, fr.second.first, fr.second.second);
                replace_all(piece, " ", "\xE2\x96\x81");
                llama_tokenize_spm(*this, piece, out);
                prev_special = false;
            }
            if (add_special && add_eos_ && special_eos != TOKEN_NULL) out.push_back(special_eos);
            break;
        }
        case kind::bpe: {
            if (add_special && add_bos_ && special_bos != TOKEN_NULL) out.push_back(special_bos);
            for (const auto & fr : frags) {
                if (fr.first != TOKEN_NULL) { out.push_back(fr.first); continue; }
                llama_tokenize_bpe(*this, text.substr(fr.second.first, fr.second.second), out);
            }
            if (add_special && add_eos_ && special_eos != TOKEN_NULL) out.push_back(special_eos);
            break;
        }
        case kind::wpm: {
            if (add_special && special_bos != TOKEN_NULL) out.push_back(special_bos);
            for (const auto & fr : frags) {
                if (fr.first != TOKEN_NULL) { out.push_back(fr.first); continue; }
                llama_tokenize_wpm(*this, text.substr(fr.second.first, fr.second.second), out);
            }
            if (add_special && special_sep != TOKEN_NULL) out.push_back(special_sep);
            break;
        }
        case kind::none:
            break;
    }
    return out;
}

// ---- detokenize ----------------------------------------------------------------------------

std::string llama_vocab::detokenize(const std::vector<int32_t> & tokens, bool remove_special, bool unparse_special) const {
    std::string out;
    if (type_ == kind::none) return out;

    size_t first = 0, last = tokens.size();
    bool strip_space = add_space_prefix_;   // undo the prefix space SPM adds to the first piece
    if (remove_special && add_bos_ && last > first && tokens[first] == special_bos) {
        strip_space = false;   // the reference keeps the space after a removed BOS
        ++first;
    }
    if (remove_special && add_eos_ && last > first && tokens[last - 1] == special_eos) --last;

    for (size_t i = first; i < last; ++i) {
        std::string piece = token_to_piece(tokens[i], unparse_special);
        if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
        strip_space = false;
        out += piece;
    }

    if (clean_spaces_ && !out.empty()) {
        // 1) drop the space before ? ! . ,
        std::string a;
        a.reserve(out.size());
        a += out[0];
        for (size_t i = 1; i < out.size(); ++i) {
            const char x = out[i];
            if (out[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
            a += x;
        }
        // 2) " ' " -> "'"
        std::string b;
        b.reserve(a.size());
        b += a[0];
        for (size_t i = 1; i < a.size(); ++i) {
            const char x = a[i];
            if (x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
                b.pop_back();
                b += x;
                a[++i] = '\0';   // drop the space after; it no longer counts as a space before the next char
                continue;
            }
            b += x;
        }
        // 3) contractions: " 's", " 'm", " 're", " 've" lose their space
        std::string c;
        c.reserve(b.size());
        c += b[0];
        for (size_t i = 1; i < b.size(); ++i) {
            const char x = b[i];
            if (b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
                const char x1 = b[i + 1];
                if (x1 == 's' || x1 == 'm') {
                    c.pop_back();
                } else if (i + 2 < b.size() && ((x1 == 'r' && b[i + 2] == 'e') || (x1 == 'v' && b[i + 2] == 'e'))) {
                    c.pop_back();
                }
            }
            c += x;
        }
        out.swap(c);
    }
    return out;
}
