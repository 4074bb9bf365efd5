// Planning a quantization (every tensor's type, size and importance data) and writing it: each
// tensor is converted to f32 and quantized by all threads, streamed to a temporary file after the
// metadata, and the file is renamed into place once complete.
#include "llama-quantize.h"

#include "llama-impl.h"
#include "llama-model-loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

namespace {

int64_t get_int(const gguf_context * g, const std::string & key, int64_t fallback) {
    const int64_t id = gguf_find_key(g, key.c_str());
    if (id < 0) return fallback;
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_UINT8:  return gguf_get_val_u8(g, id);
        case GGUF_TYPE_INT8:   return gguf_get_val_i8(g, id);
        case GGUF_TYPE_UINT16: return gguf_get_val_u16(g, id);
        case GGUF_TYPE_INT16:  return gguf_get_val_i16(g, id);
        case GGUF_TYPE_UINT32: return gguf_get_val_u32(g, id);
        case GGUF_TYPE_INT32:  return gguf_get_val_i32(g, id);
        case GGUF_TYPE_UINT64: return (int64_t) gguf_get_val_u64(g, id);
        case GGUF_TYPE_INT64:  return gguf_get_val_i64(g, id);
        case GGUF_TYPE_ARRAY: {
            // per-layer values (head counts of some models): the largest one
            const size_t n = gguf_get_arr_n(g, id);
            const void * d = gguf_get_arr_data(g, id);
            int64_t best = fallback;
            for (size_t i = 0; i < n; ++i) {
                int64_t v;
                switch (gguf_get_arr_type(g, id)) {
                    case GGUF_TYPE_INT32: v = ((const int32_t *) d)[i]; break;
                    case GGUF_TYPE_UINT32: v = ((const uint32_t *) d)[i]; break;
                    default: return fallback;
                }
                best = i == 0 ? v : std::max(best, v);
            }
            return best;
        }
        default: return fallback;
    }
}

bool is_int_type(ggml_type t) {
    return t == GGML_TYPE_I8 || t == GGML_TYPE_I16 || t == GGML_TYPE_I32 || t == GGML_TYPE_I64 || t == GGML_TYPE_BF16_R16;
}

bool ends_with(const std::string & s, const char * suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool has(const std::string & s, const char * part) { return s.find(part) != std::string::npos; }

// Whether a tensor is quantized at all (the reference keeps norms, 1-d tensors, the expert
// router, positional tables and a few small SSM tensors as they are).
bool should_quantize(const llama_quant_tensor & t, const llama_quant_params & p) {
    if (is_int_type(t.src_type)) return false;
    if (!ends_with(t.name, "weight")) return false;
    if (t.n_dims < 2) return false;
    if (has(t.name, "_norm.weight")) return false;
    if (!p.quantize_output_tensor && t.name == "output.weight") return false;
    if (has(t.name, "ffn_gate_inp.weight")) return false;
    if (t.name == "position_embd.weight" || t.name == "token_types.weight") return false;
    for (const char * s : { "ssm_conv1d", "shortconv.conv", "ssm_x.weight", "ssm_dt.weight", "attn_rel_b.weight" }) {
        if (has(t.name, s)) return false;
    }
    return true;
}

bool very_low_bit(ggml_type t, llama_ftype_id ft) {
    switch (t) {
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XXS_R4: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_XS_R4:
        case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ2_S_R4: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_S_R4:
        case GGML_TYPE_IQ1_M: case GGML_TYPE_IQ1_M_R4: case GGML_TYPE_IQ1_KT: case GGML_TYPE_IQ2_KT:
            return true;
        case GGML_TYPE_Q2_K: return ft == LLAMA_FT_Q2_K_S;
        default: return ggml_quantize_requires_imatrix(t);
    }
}

} // namespace

const std::vector<float> * llama_quant_find_imatrix(const llama_imatrix_map & m, const std::string & name) {
    auto it = m.find(name);
    if (it != m.end()) return &it->second;
    // tensors that see the same input as one the imatrix does have
    const std::pair<const char *, const char *> same_input[] = {
        { "ffn_gate.weight", "ffn_up.weight" }, { "ffn_up.weight", "ffn_gate.weight" },
        { "ffn_gate_exps.weight", "ffn_up_exps.weight" }, { "ffn_up_exps.weight", "ffn_gate_exps.weight" },
        { ".attn_v_b.weight", ".attn_kv_b.weight" }, { ".attn_kv_b.weight", ".attn_v_b.weight" },
    };
    for (const auto & [a, b] : same_input) {
        const size_t pos = name.find(a);
        if (pos == std::string::npos) continue;
        it = m.find(name.substr(0, pos) + b + name.substr(pos + std::strlen(a)));
        if (it != m.end()) return &it->second;
    }
    return nullptr;
}

llama_quant_model_info llama_quant_model_info_from(const gguf_split * model) {
    const gguf_context * g = gguf_split_part(model, 0);
    llama_quant_model_info info;
    const int64_t arch_id = gguf_find_key(g, "general.architecture");
    if (arch_id < 0 || gguf_get_kv_type(g, arch_id) != GGUF_TYPE_STRING) {
        throw std::runtime_error(std::string(gguf_split_part_path(model, 0)) + ": no general.architecture key");
    }
    info.arch = gguf_get_val_str(g, arch_id);
    const std::string a = info.arch + ".";
    info.n_layer = (int) get_int(g, a + "block_count", 0);
    info.n_head = (int) get_int(g, a + "attention.head_count", 0);
    info.n_head_kv = (int) get_int(g, a + "attention.head_count_kv", info.n_head);
    info.n_expert = (int) get_int(g, a + "expert_count", 0);
    const int64_t tok = gguf_find_key(g, "tokenizer.ggml.tokens");
    info.n_vocab = tok >= 0 && gguf_get_kv_type(g, tok) == GGUF_TYPE_ARRAY ? (int) gguf_get_arr_n(g, tok)
                                                                           : (int) get_int(g, a + "vocab_size", 0);
    int part = 0;
    info.has_output = gguf_split_find_tensor(model, "output.weight", &part) >= 0;
    // llama.cpp's size classes that the recipe looks at (LLaMA 3 8B / 70B shapes)
    if (info.arch == "llama") {
        info.is_70b = info.n_layer == 80;
        info.is_8b = info.n_layer == 32 && info.n_vocab >= 128000;
    }
    return info;
}

namespace {
// --repack: the tensor's interleaved twin when it has one, its rows group evenly (per expert too)
// and --repack-pattern (if given) selects it; the token embedding stays plain (row lookups).
void plan_repack(llama_quant_tensor & t, const llama_quant_params & params) {
    t.quantize = false;
    t.new_type = t.src_type;
    t.new_size = t.src_size;
    if (t.n_dims < 2 || !ggml_is_quantized(t.src_type) || t.name == "token_embd.weight") return;
    if (!params.repack_patterns.empty() &&
        std::none_of(params.repack_patterns.begin(), params.repack_patterns.end(),
                     [&](const llama_quant_rule & r) { return std::regex_search(t.name, r.re); })) {
        return;
    }
    const ggml_type twin = ggml_interleaved_twin(t.src_type);
    if (twin == t.src_type) return;
    const ggml_type_traits * tt = ggml_get_type_traits(twin);
    if (t.ne[1] % tt->nrows_interleaved != 0 || t.ne[0] % tt->blck_size != 0) return;
    t.new_type = twin;
    t.repack = true;
    t.new_size = (size_t) (t.ne[1] * t.ne[2] * t.ne[3]) * ggml_row_size(twin, t.ne[0]);
}
} // namespace

llama_quant_plan_result llama_quant_plan(const gguf_split * model, const llama_quant_params & params) {
    const llama_ftype_info * fti = llama_quant_ftype_by_id(params.ftype);
    if (!fti) throw std::runtime_error("unknown file type " + std::to_string((int) params.ftype));
    const ggml_type default_type = fti->default_type;

    llama_quant_plan_result res;
    res.info = llama_quant_model_info_from(model);
    for (int p = 0; p < gguf_split_n_parts(model); ++p) {
        const gguf_context * g = gguf_split_part(model, p);
        for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
            llama_quant_tensor t;
            t.name = gguf_get_tensor_name(g, i);
            t.part = p;
            t.id = i;
            t.src_type = gguf_get_tensor_type(g, i);
            t.n_dims = gguf_get_tensor_n_dims(g, i);
            for (int d = 0; d < GGML_MAX_DIMS; ++d) t.ne[d] = d < t.n_dims ? gguf_get_tensor_ne(g, i, d) : 1;
            t.src_size = gguf_get_tensor_size(g, i);
            res.tensors.push_back(std::move(t));
        }
    }

    llama_quant_state st;
    st.has_imatrix = params.imatrix != nullptr;
    for (const auto & t : res.tensors) {
        if (has(t.name, "attn_v.weight") || has(t.name, "attn_qkv.weight")) ++st.n_attention_wv;
    }
    st.n_ffn_down = st.n_ffn_gate = st.n_ffn_up = res.info.n_layer;

    auto apply_custom = [&](llama_quant_tensor & t, ggml_type type) {
        for (const auto & r : params.custom_rules) {
            if (std::regex_search(t.name, r.re)) {
                t.custom = true;
                return r.type;
            }
        }
        return type;
    };

    if (params.repack) {
        for (auto & t : res.tensors) plan_repack(t, params);
        return res;
    }
    for (auto & t : res.tensors) {
        t.quantize = should_quantize(t, params);
        t.new_type = t.src_type;
        if (!t.quantize) {
            t.new_size = t.src_size;
            continue;
        }
        ggml_type type = default_type;
        if (params.pure) {
            type = apply_custom(t, type);
        } else if (ggml_is_quantized(default_type)) {
            type = llama_quant_recipe_type(res.info, st, params.ftype, type, t.name, t.ne);
            type = apply_custom(t, type);
        }
        const ggml_type fitted = llama_quant_fallback_type(type, t.ne[0]);
        if (fitted != type) {
            t.fallback = true;
            ++res.n_fallback;
            type = fitted;
        }
        if (params.token_embedding_type != GGML_TYPE_COUNT && t.name == "token_embd.weight") type = params.token_embedding_type;
        if (params.output_tensor_type != GGML_TYPE_COUNT && t.name == "output.weight") type = params.output_tensor_type;
        // token embeddings are read row by row (get_rows): no interleaved layouts
        if (t.name == "token_embd.weight") type = llama_quant_interleave_base(type, nullptr);
        int group = 1;
        const ggml_type base = llama_quant_interleave_base(type, &group);
        if (group > 1 && t.ne[1] % group != 0) type = base;
        if (t.ne[0] % ggml_blck_size(type) != 0) {
            throw std::runtime_error(llama_format("tensor %s: row length %lld is not a multiple of the block size %lld of %s",
                                                  t.name.c_str(), (long long) t.ne[0], (long long) ggml_blck_size(type),
                                                  ggml_type_name(type)));
        }
        t.new_type = type;
        if (type == t.src_type) {
            t.quantize = false;
            t.new_size = t.src_size;
            continue;
        }
        t.new_size = (size_t) (t.ne[1] * t.ne[2] * t.ne[3]) * ggml_row_size(type, t.ne[0]);

        if (ggml_is_quantized(t.src_type) && !params.allow_requantize) {
            throw std::runtime_error(llama_format("tensor %s is already quantized (%s): requantizing is disabled, use --allow-requantize",
                                                  t.name.c_str(), ggml_type_name(t.src_type)));
        }
        if (!llama_quant_type_readable(t.src_type)) {
            throw std::runtime_error(llama_format("tensor %s: cannot read type %s", t.name.c_str(), ggml_type_name(t.src_type)));
        }
        if (params.imatrix) {
            t.imatrix = llama_quant_find_imatrix(*params.imatrix, t.name);
            if (t.imatrix && t.imatrix->size() != (size_t) (t.ne[0] * t.ne[2])) {
                if (t.name != "token_embd.weight") {
                    throw std::runtime_error(llama_format("imatrix has %zu values for tensor %s, which needs %lld",
                                                          t.imatrix->size(), t.name.c_str(), (long long) (t.ne[0] * t.ne[2])));
                }
                t.imatrix = nullptr;
            }
        }
        if (!t.imatrix && !params.ignore_imatrix_rules && very_low_bit(type, params.ftype) && t.name != "token_embd.weight" &&
            t.name != "output.weight") {
            throw std::runtime_error(llama_format("missing importance matrix for tensor %s (%s needs one): pass --imatrix",
                                                  t.name.c_str(), ggml_type_name(type)));
        }
    }
    return res;
}

namespace {

// Run fn(i) for i in [0, n) on nthread threads (work taken one index at a time).
template <typename Fn>
void parallel_for(int nthread, int64_t n, Fn && fn) {
    if (n <= 0) return;
    const int nt = (int) std::max<int64_t>(1, std::min<int64_t>(nthread, n));
    std::atomic<int64_t> next{ 0 };
    auto work = [&]() {
        for (int64_t i; (i = next.fetch_add(1)) < n;) fn(i);
    };
    std::vector<std::thread> th;
    th.reserve(nt - 1);
    for (int k = 1; k < nt; ++k) th.emplace_back(work);
    work();
    for (auto & t : th) t.join();
}

// Source tensor data (any readable type) as f32 rows.
void to_f32(const llama_quant_tensor & t, const uint8_t * src, float * dst, int nthread) {
    const int64_t ne0 = t.ne[0];
    const int64_t nrows = t.ne[1] * t.ne[2] * t.ne[3];
    int group = 1;
    llama_quant_interleave_base(t.src_type, &group);
    const size_t row_size = ggml_row_size(t.src_type, ne0);
    const int64_t ngroups = (nrows + group - 1) / group;
    const int64_t per_item = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, ne0 * group));
    const ggml_type_traits * tt = ggml_get_type_traits(t.src_type);
    parallel_for(nthread, (ngroups + per_item - 1) / per_item, [&](int64_t item) {
        const int64_t g0 = item * per_item, g1 = std::min(ngroups, g0 + per_item);
        const int64_t r0 = g0 * group, r1 = std::min(nrows, g1 * group);
        const uint8_t * x = src + r0 * row_size;
        float * y = dst + r0 * ne0;
        const int64_t n = (r1 - r0) * ne0;
        switch (t.src_type) {
            case GGML_TYPE_F32: std::memcpy(y, x, n * sizeof(float)); break;
            case GGML_TYPE_F16: ggml_fp16_to_fp32_row((const ggml_fp16_t *) x, y, n); break;
            case GGML_TYPE_BF16: ggml_bf16_to_fp32_row((const ggml_bf16_t *) x, y, n); break;
            default:
                for (int64_t r = r0; r < r1; r += group) {
                    tt->to_float(src + r * row_size, dst + r * ne0, group * ne0);
                }
        }
    });
}

// Quantize the f32 tensor into dst; every expert slice with its own importance vector.
void quantize_tensor(const llama_quant_tensor & t, const float * f32, uint8_t * dst, int nthread) {
    const int64_t ne0 = t.ne[0], ne1 = t.ne[1], nslice = t.ne[2] * t.ne[3];
    int group = 1;
    llama_quant_interleave_base(t.new_type, &group);
    const size_t row_size = ggml_row_size(t.new_type, ne0);
    // chunks of about 16k values, whole interleave groups
    int64_t rows_per_chunk = std::max<int64_t>(1, (32 * 512 + ne0 - 1) / ne0);
    rows_per_chunk = (rows_per_chunk + group - 1) / group * group;
    const int64_t chunks_per_slice = (ne1 + rows_per_chunk - 1) / rows_per_chunk;
    std::atomic<bool> failed{ false };
    parallel_for(nthread, nslice * chunks_per_slice, [&](int64_t item) {
        const int64_t s = item / chunks_per_slice;
        const int64_t r0 = (item % chunks_per_slice) * rows_per_chunk;
        const int64_t nr = std::min(rows_per_chunk, ne1 - r0);
        const float * imat = t.imatrix ? t.imatrix->data() + s * ne0 : nullptr;
        const size_t n = ggml_quantize_chunk(t.new_type, f32 + s * ne0 * ne1, dst + s * ne1 * row_size, r0 * ne0, nr, ne0, imat);
        if (n != (size_t) nr * row_size) failed = true;
    });
    if (failed) {
        throw std::runtime_error(llama_format("tensor %s: quantization to %s failed (non-finite values?)", t.name.c_str(),
                                              ggml_type_name(t.new_type)));
    }
}

bool same_file(const std::string & a, const std::string & b) {
    struct stat sa, sb;
    if (stat(a.c_str(), &sa) != 0 || stat(b.c_str(), &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

struct tmp_file_guard {
    std::string path;
    FILE * f = nullptr;
    ~tmp_file_guard() {
        if (f) std::fclose(f);
        if (!path.empty()) std::remove(path.c_str());
    }
};

void write_all(FILE * f, const void * data, size_t n, const std::string & path) {
    if (n && std::fwrite(data, 1, n, f) != n) {
        throw std::runtime_error(path + ": write failed: " + std::strerror(errno));
    }
}

} // namespace

llama_quant_stats llama_quant_model(const std::string & fname_in, const std::string & fname_out,
                                    const llama_quant_params & params, llama_quant_plan_result * plan_out) {
    if (!params.dry_run && (fname_in == fname_out || same_file(fname_in, fname_out))) {
        throw std::runtime_error("input and output are the same file: " + fname_out);
    }
    std::unique_ptr<gguf_split, void (*)(gguf_split *)> model(gguf_split_open(fname_in.c_str()), gguf_split_free);
    if (!model) throw std::runtime_error(gguf_last_error());

    llama_quant_plan_result plan = llama_quant_plan(model.get(), params);
    const int n_parts = gguf_split_n_parts(model.get());
    const int n_out = params.keep_split ? n_parts : 1;
    const int nthread = params.nthread > 0 ? params.nthread : (int) std::max(1u, std::thread::hardware_concurrency());

    llama_quant_stats stats;
    stats.n_tensors = (int) plan.tensors.size();
    for (const auto & t : plan.tensors) {
        stats.size_org += t.src_size;
        stats.size_new += t.new_size;
        stats.n_quantized += t.quantize || t.repack ? 1 : 0;
        if (t.quantize && !params.dry_run && !llama_quant_type_writable(t.new_type)) {
            throw std::runtime_error(llama_format("tensor %s: Kiln cannot write type %s yet", t.name.c_str(), ggml_type_name(t.new_type)));
        }
    }
    if (params.dry_run) {
        for (size_t i = 0; i < plan.tensors.size(); ++i) {
            if (params.progress) params.progress((int) i, (int) plan.tensors.size(), plan.tensors[i]);
        }
        if (plan_out) *plan_out = std::move(plan);
        return stats;
    }

    // output metadata: the input's keys with the quantization's, one context per output file
    std::vector<gguf_context *> outs(n_out, nullptr);
    struct ctx_list_free {
        std::vector<gguf_context *> & v;
        ~ctx_list_free() { for (auto * c : v) if (c) gguf_free(c); }
    } free_outs{ outs };
    for (int i = 0; i < n_out; ++i) outs[i] = gguf_init_empty();
    gguf_context * meta = outs[0];
    gguf_set_kv(meta, gguf_split_part(model.get(), 0));
    gguf_set_val_u32(meta, "general.quantization_version", 2);
    if (!params.repack) gguf_set_val_u32(meta, "general.file_type", (uint32_t) params.ftype);
    gguf_remove_key(meta, GGUF_KEY_SPLIT_NO);
    gguf_remove_key(meta, GGUF_KEY_SPLIT_COUNT);
    gguf_remove_key(meta, GGUF_KEY_SPLIT_TENSORS_COUNT);
    for (const auto & o : params.kv_overrides) {
        switch (o.tag) {
            case llama_quant_kv_override::INT: gguf_set_val_i32(meta, o.key.c_str(), (int32_t) o.i); break;
            case llama_quant_kv_override::FLOAT: gguf_set_val_f32(meta, o.key.c_str(), (float) o.f); break;
            case llama_quant_kv_override::BOOL: gguf_set_val_bool(meta, o.key.c_str(), o.b); break;
            case llama_quant_kv_override::STR: gguf_set_val_str(meta, o.key.c_str(), o.s.c_str()); break;
        }
    }
    if (params.imatrix) {
        if (!params.imatrix_file.empty()) gguf_set_val_str(meta, "quantize.imatrix.file", params.imatrix_file.c_str());
        if (!params.imatrix_dataset.empty()) gguf_set_val_str(meta, "quantize.imatrix.dataset", params.imatrix_dataset.c_str());
        gguf_set_val_i32(meta, "quantize.imatrix.entries_count", (int32_t) params.imatrix->size());
        if (params.imatrix_chunks > 0) gguf_set_val_i32(meta, "quantize.imatrix.chunks_count", params.imatrix_chunks);
    }
    if (n_out > 1) {
        for (int i = 0; i < n_out; ++i) {
            gguf_set_val_u16(outs[i], GGUF_KEY_SPLIT_NO, (uint16_t) i);
            gguf_set_val_u16(outs[i], GGUF_KEY_SPLIT_COUNT, (uint16_t) n_out);
            gguf_set_val_i32(outs[i], GGUF_KEY_SPLIT_TENSORS_COUNT, (int32_t) plan.tensors.size());
        }
    }
    ggml_context * tctx = ggml_init({ plan.tensors.size() * ggml_tensor_overhead() + 1024, nullptr, true });
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> tctx_guard(tctx, ggml_free);
    for (const auto & t : plan.tensors) {
        ggml_tensor * gt = ggml_new_tensor(tctx, t.new_type, std::max(1, t.n_dims), t.ne);
        ggml_set_name(gt, t.name.c_str());
        gguf_add_tensor(outs[params.keep_split ? t.part : 0], gt);
    }

    std::vector<std::unique_ptr<llama_mmap>> maps;
    for (int p = 0; p < n_parts; ++p) maps.push_back(std::make_unique<llama_mmap>(gguf_split_part_path(model.get(), p)));

    std::vector<float> f32;
    std::vector<uint8_t> qbuf;
    static const uint8_t zeros[256] = {};
    int done = 0;
    for (int o = 0; o < n_out; ++o) {
        std::string path = fname_out;
        if (n_out > 1) {
            char buf[4096];
            std::string prefix = fname_out;
            if (ends_with(prefix, ".gguf")) prefix.resize(prefix.size() - 5);
            gguf_split_path(buf, sizeof(buf), prefix.c_str(), o, n_out);
            path = buf;
        }
        tmp_file_guard tmp;
        tmp.path = path + ".tmp";
        tmp.f = std::fopen(tmp.path.c_str(), "wb");
        if (!tmp.f) throw std::runtime_error(tmp.path + ": cannot create: " + std::strerror(errno));
        std::vector<uint8_t> head(gguf_get_meta_size(outs[o]));
        gguf_get_meta_data(outs[o], head.data());
        write_all(tmp.f, head.data(), head.size(), tmp.path);
        const size_t align = gguf_get_alignment(outs[o]);

        for (auto & t : plan.tensors) {
            if ((params.keep_split ? t.part : 0) != o) continue;
            const gguf_context * g = gguf_split_part(model.get(), t.part);
            const size_t offs = gguf_get_data_offset(g) + gguf_get_tensor_offset(g, t.id);
            if (offs + t.src_size > maps[t.part]->size) {
                throw std::runtime_error(llama_format("%s: tensor %s runs past the end of the file",
                                                      gguf_split_part_path(model.get(), t.part), t.name.c_str()));
            }
            const uint8_t * src = (const uint8_t *) maps[t.part]->addr + offs;
            if (t.repack) {
                if (qbuf.size() < t.new_size) qbuf.resize(t.new_size);
                if (ggml_repack_rows(t.new_type, src, qbuf.data(), t.ne[1] * t.ne[2] * t.ne[3], t.ne[0]) != t.new_size) {
                    throw std::runtime_error(llama_format("tensor %s: cannot repack %s into %s", t.name.c_str(),
                                                          ggml_type_name(t.src_type), ggml_type_name(t.new_type)));
                }
                write_all(tmp.f, qbuf.data(), t.new_size, tmp.path);
            } else if (!t.quantize) {
                write_all(tmp.f, src, t.src_size, tmp.path);
            } else {
                const size_t nel = (size_t) t.nelements();
                const float * x;
                if (t.src_type == GGML_TYPE_F32) {
                    x = (const float *) src;
                } else {
                    if (f32.size() < nel) f32.resize(nel);
                    to_f32(t, src, f32.data(), nthread);
                    x = f32.data();
                }
                if (qbuf.size() < t.new_size) qbuf.resize(t.new_size);
                quantize_tensor(t, x, qbuf.data(), nthread);
                write_all(tmp.f, qbuf.data(), t.new_size, tmp.path);
            }
            const size_t pad = ((t.new_size + align - 1) / align) * align - t.new_size;
            for (size_t left = pad; left > 0;) {
                const size_t n = std::min(left, sizeof(zeros));
                write_all(tmp.f, zeros, n, tmp.path);
                left -= n;
            }
            if (params.progress) params.progress(done, (int) plan.tensors.size(), t);
            ++done;
        }
        const int rc = std::fclose(tmp.f);
        tmp.f = nullptr;
        if (rc != 0) throw std::runtime_error(tmp.path + ": write failed: " + std::strerror(errno));
        if (std::rename(tmp.path.c_str(), path.c_str()) != 0) {
            throw std::runtime_error(path + ": cannot rename " + tmp.path + " to it: " + std::strerror(errno));
        }
        tmp.path.clear();
    }
    if (plan_out) *plan_out = std::move(plan);
    return stats;
}
