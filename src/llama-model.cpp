// Model loading: metadata -> hyper-parameters, vocabulary, the architecture's tensors, and their
// data mapped from the file(s).
#include "llama-model.h"

#include "ggml-cpu.h"
#include "llama-model-checks.h"
#include "llama-model-loader.h"
#include "llama-model-placement.h"
#include "llama-model-shards.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <regex>
#include <unistd.h>

// ---- architecture registry

namespace {
std::vector<llm_arch_impl> & arch_registry() {
    static std::vector<llm_arch_impl> r;
    return r;
}
thread_local std::string g_last_error;
} // namespace

void llm_arch_register(const llm_arch_impl & impl) { arch_registry().push_back(impl); }

const llm_arch_impl * llm_arch_find(const std::string & name) {
    for (const auto & a : arch_registry()) {
        if (name == a.name) return &a;
    }
    return nullptr;
}

std::vector<std::string> llm_arch_names() {
    std::vector<std::string> out;
    for (const auto & a : arch_registry()) out.push_back(a.name);
    return out;
}

void llama_set_last_error(const std::string & msg) { g_last_error = msg; }

void llm_load_common_hparams(llama_model_loader & ml, llama_hparams & hp) {
    hp.n_ctx_train = (uint32_t) ml.get_i64(ml.key("%s.context_length"));
    hp.n_embd = (uint32_t) ml.get_i64(ml.key("%s.embedding_length"));
    hp.n_layer = (uint32_t) ml.get_i64(ml.key("%s.block_count"));
    hp.n_head = (uint32_t) ml.get_i64(ml.key("%s.attention.head_count"));
    hp.n_head_kv = (uint32_t) ml.get_i64(ml.key("%s.attention.head_count_kv"), hp.n_head);
    hp.n_ff = (uint32_t) ml.get_i64(ml.key("%s.feed_forward_length"), 0);
    if (hp.n_head == 0 || hp.n_embd == 0 || hp.n_layer == 0) {
        throw llama_error(llama_format("%s: embedding_length, block_count and head_count must be positive", ml.path.c_str()));
    }
    if (hp.n_head_kv == 0 || hp.n_head % hp.n_head_kv != 0) {
        throw llama_error(llama_format("%s: %s (%u) must divide head_count (%u)", ml.path.c_str(),
                                       ml.key("%s.attention.head_count_kv").c_str(), hp.n_head_kv, hp.n_head));
    }
    hp.n_embd_head_k = (uint32_t) ml.get_i64(ml.key("%s.attention.key_length"), hp.n_embd / hp.n_head);
    hp.n_embd_head_v = (uint32_t) ml.get_i64(ml.key("%s.attention.value_length"), hp.n_embd / hp.n_head);
    hp.n_rot = (uint32_t) ml.get_i64(ml.key("%s.rope.dimension_count"), hp.n_embd_head_k);
    if (hp.n_rot > hp.n_embd_head_k || hp.n_rot % 2 != 0) {
        throw llama_error(llama_format("%s: %s (%u) must be even and at most the head size (%u)", ml.path.c_str(),
                                       ml.key("%s.rope.dimension_count").c_str(), hp.n_rot, hp.n_embd_head_k));
    }
    hp.f_norm_rms_eps = (float) ml.get_f64(ml.key("%s.attention.layer_norm_rms_epsilon"), 1e-5);
    hp.f_norm_eps = (float) ml.get_f64(ml.key("%s.attention.layer_norm_epsilon"), 1e-5);
    hp.rope_freq_base = (float) ml.get_f64(ml.key("%s.rope.freq_base"), 10000.0);
    const std::string scaling = ml.get_str(ml.key("%s.rope.scaling.type"), "none");
    double factor = ml.get_f64(ml.key("%s.rope.scaling.factor"), 0.0);
    if (ml.has(ml.key("%s.rope.scale_linear"))) factor = ml.get_f64(ml.key("%s.rope.scale_linear"));
    hp.rope_freq_scale = (scaling != "none" && factor > 0) ? (float) (1.0 / factor) : 1.0f;
    hp.n_ctx_orig_yarn = (uint32_t) ml.get_i64(ml.key("%s.rope.scaling.original_context_length"), hp.n_ctx_train);
    hp.yarn_ext_factor = scaling == "yarn" ? 1.0f : 0.0f;
    hp.yarn_beta_fast = (float) ml.get_f64(ml.key("%s.rope.scaling.yarn_beta_fast"), 32.0);
    hp.yarn_beta_slow = (float) ml.get_f64(ml.key("%s.rope.scaling.yarn_beta_slow"), 1.0);
    hp.yarn_log_mul = (float) ml.get_f64(ml.key("%s.rope.scaling.yarn_log_multiplier"), 0.0);
    hp.f_attn_logit_softcap = (float) ml.get_f64(ml.key("%s.attn_logit_softcapping"), 0.0);
}

ggml_tensor * llama_model::new_derived(ggml_type type, std::initializer_list<int64_t> ne, const std::string & name,
                                       std::function<void(ggml_tensor *)> fill) {
    if (!ctx_derived) ctx_derived = ggml_init({ ggml_tensor_overhead() * (4 * layers.size() + 16), nullptr, true });
    int64_t dims[GGML_MAX_DIMS] = { 1, 1, 1, 1 };
    int n = 0;
    for (int64_t v : ne) dims[n++] = v;
    ggml_tensor * t = ggml_new_tensor(ctx_derived, type, n, dims);
    ggml_set_name(t, name.c_str());
    derived.push_back({ t, std::move(fill) });
    return t;
}

llama_model::~llama_model() {
    llama_unlock_weights(*this);
    for (auto * b : buffers) ggml_backend_buffer_free(b);
    if (ctx) ggml_free(ctx);
    if (ctx_derived) ggml_free(ctx_derived);
    if (ctx_shards) ggml_free(ctx_shards);
    for (auto * b : backends) ggml_backend_free(b);
}

// ---- loading

namespace {

std::string kv_to_string(const gguf_context * g, int64_t id) {
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_STRING: return std::string(gguf_get_val_str(g, id), gguf_get_val_str_len(g, id));
        case GGUF_TYPE_ARRAY: return llama_format("[array of %zu]", gguf_get_arr_n(g, id));
        case GGUF_TYPE_FLOAT32: return llama_format("%g", gguf_get_val_f32(g, id));
        case GGUF_TYPE_FLOAT64: return llama_format("%g", gguf_get_val_f64(g, id));
        case GGUF_TYPE_BOOL: return gguf_get_val_bool(g, id) ? "true" : "false";
        case GGUF_TYPE_UINT8: return std::to_string(gguf_get_val_u8(g, id));
        case GGUF_TYPE_INT8: return std::to_string(gguf_get_val_i8(g, id));
        case GGUF_TYPE_UINT16: return std::to_string(gguf_get_val_u16(g, id));
        case GGUF_TYPE_INT16: return std::to_string(gguf_get_val_i16(g, id));
        case GGUF_TYPE_UINT32: return std::to_string(gguf_get_val_u32(g, id));
        case GGUF_TYPE_INT32: return std::to_string(gguf_get_val_i32(g, id));
        case GGUF_TYPE_UINT64: return std::to_string(gguf_get_val_u64(g, id));
        case GGUF_TYPE_INT64: return std::to_string(gguf_get_val_i64(g, id));
        default: return "?";
    }
}

void read_exact(const std::string & path, size_t offs, void * dst, size_t size) {
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) throw llama_error(llama_format("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
    size_t done = 0;
    while (done < size) {
        const ssize_t n = pread(fd, (char *) dst + done, size - done, (off_t) (offs + done));
        if (n <= 0) {
            close(fd);
            throw llama_error(llama_format("%s: read failed at offset %zu", path.c_str(), offs + done));
        }
        done += (size_t) n;
    }
    close(fd);
}

// The interleaved twin a weight can be repacked into by -rtr, or its own type: quantized 2-d+
// weights whose rows group evenly (per expert too: R divides ne[1]), as the reference does; the
// token embedding stays plain (it is read by row lookups, not products). -rtr then takes it only
// where the twin's kernels are at least as fast as the plain ones on this CPU
// (ggml_cpu_repack_pays), so that -rtr never slows a model down.
ggml_type repack_candidate(const ggml_tensor * t) {
    if (!ggml_is_quantized(t->type) || std::strcmp(t->name, "token_embd.weight") == 0) return t->type;
    const ggml_type twin = ggml_interleaved_twin(t->type);
    if (twin == t->type) return t->type;
    const ggml_type_traits * tt = ggml_get_type_traits(twin);
    if (t->ne[1] % tt->nrows_interleaved != 0 || t->ne[0] % tt->blck_size != 0) return t->type;
    return twin;
}

void load_model(llama_model & model, const std::string & path, const llama_model_params & params) {
    const int64_t t0 = ggml_time_us();
    llama_model_loader ml(path);
    model.arch_name = ml.arch_name;
    model.arch = llm_arch_find(ml.arch_name);
    if (!model.arch) {
        std::string known;
        for (const auto & n : llm_arch_names()) known += (known.empty() ? "" : ", ") + n;
        throw llama_error(llama_format("%s: unknown model architecture '%s' (Kiln knows: %s)", path.c_str(),
                                       ml.arch_name.c_str(), known.c_str()));
    }
    model.name = ml.get_str("general.name", "");
    model.chat_template = ml.get_str("tokenizer.chat_template", "");
    for (int64_t i = 0; i < gguf_get_n_kv(ml.meta); ++i) {
        model.meta.emplace_back(gguf_get_key(ml.meta, i), kv_to_string(ml.meta, i));
    }

    std::string err;
    if (!model.vocab.load(ml.meta, err)) throw llama_error(llama_format("%s: %s", path.c_str(), err.c_str()));

    llama_hparams & hp = model.hparams;
    model.arch->load_hparams(ml, hp);
    hp.n_vocab = model.vocab.n_tokens();

    const size_t n_tensors = ml.tensors.size();
    model.ctx = ggml_init({ ggml_tensor_overhead() * (n_tensors + 16), nullptr, true });
    model.layers.resize(hp.n_layer);
    model.arch->create_tensors(ml, model, model.ctx);
    for (const auto & name : ml.unused()) {
        LLAMA_LOG_WARN("%s: tensor %s is not used by the %s architecture\n", path.c_str(), name.c_str(), ml.arch_name.c_str());
    }
    llama_check_weight_kernels(model, path);   // before any data is read

    std::map<ggml_type, int> type_counts;
    // placement: -ot rules (first match wins), else the layer's device; what stays on the host
    // CPU is mapped from the file (mmap) or read into CPU memory
    const llama_placement plan = llama_plan_placement(hp, params, path);
    model.devices = plan.devices;
    model.main_device = plan.main_device;
    // -sm graph: the offloaded layers that can be cut keep their norms whole on -mg; the rest of
    // their weights stays in host memory, the source the devices' parts are cut from. -ot wins
    // over the cut: a part (attention, FFN) with a tensor a rule places is not cut, its tensors
    // going where the rules and the layer plan say.
    llama_shard_plan cuts;
    bool any_cut = false;
    if (params.split_mode == LLAMA_SPLIT_MODE_GRAPH && !plan.devices.empty()) {
        cuts = llama_plan_shards(model, plan.shares, params.split_experts, [&](const ggml_tensor * t) {
            const llama_placement::rule * rule = nullptr;
            plan.buft_of(t->name, &rule);
            return rule != nullptr;
        });
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            if (plan.layer_device[il] < 0) cuts.heads_kv[il].clear(), cuts.ff[il].clear(), cuts.by_expert[il] = false;
            any_cut |= cuts.split(il);
        }
    }
    const ggml_backend_buffer_type_t main_buft =
        plan.main_device < 0 ? ggml_backend_cpu_buffer_type() : ggml_backend_dev_buffer_type(plan.devices[plan.main_device]);
    for (uint32_t il = 0; il < hp.n_layer; ++il) model.layer_buft.push_back(plan.layer_buft(il));
    std::vector<std::pair<ggml_backend_buffer_type_t, std::vector<ggml_tensor *>>> groups;
    auto group_of = [&](ggml_backend_buffer_type_t buft) -> std::vector<ggml_tensor *> & {
        for (auto & g : groups) {
            if (g.first == buft) return g.second;
        }
        groups.emplace_back(buft, std::vector<ggml_tensor *>());
        return groups.back().second;
    };
    // where each weight lives: its -ot rule's device, else its layer's, else (a graph-split layer's
    // tensors outside the whole part) the main device or the CPU
    auto placement_of = [&](const ggml_tensor * t, const llama_placement::rule ** rule) {
        ggml_backend_buffer_type_t buft = plan.buft_of(t->name, rule);
        const long il = llama_layer_of_name(t->name);
        if (!*rule && il >= 0 && cuts.split((uint32_t) il) && !cuts.in_whole_part(model.layers[il], (uint32_t) il, t)) {
            buft = llama_shard_keeps_whole(model.layers[il], t) ? main_buft : ggml_backend_cpu_buffer_type();
        }
        return buft;
    };
    // -rtr: weights whose type has an interleaved twin take it now (allocation follows the new
    // type); their file bytes are read and repacked below instead of being mapped. Only weights in
    // host memory (the CPU and virtual CPU devices): a GPU decodes the interleaved layouts too, but
    // its kernels gain nothing from the weave.
    std::map<const ggml_tensor *, ggml_type> repacked_from;
    if (params.repack_tensors) {
        size_t bytes = 0;
        int on_device = 0;
        std::map<std::pair<ggml_type, ggml_type>, int> moves;   // (from, to) -> tensors
        std::map<ggml_type, int> kept;                           // types with a twin left plain
        for (ggml_tensor * t = ggml_get_first_tensor(model.ctx); t; t = ggml_get_next_tensor(model.ctx, t)) {
            const ggml_type twin = repack_candidate(t);
            if (twin == t->type) continue;
            const llama_placement::rule * rule = nullptr;
            if (!ggml_backend_buft_is_host(placement_of(t, &rule))) {
                ++on_device;
                continue;
            }
            if (!ggml_cpu_repack_pays(twin)) {
                kept[t->type]++;
                continue;
            }
            repacked_from[t] = t->type;
            moves[{ t->type, twin }]++;
            t->type = twin;
            t->nb[0] = ggml_type_size(twin);
            t->nb[1] = ggml_row_size(twin, t->ne[0]);
            for (int i = 2; i < GGML_MAX_DIMS; ++i) t->nb[i] = t->nb[i - 1] * t->ne[i - 1];
            bytes += ggml_nbytes(t);
        }
        LLAMA_LOG_INFO("llama_model_load: -rtr: %zu tensors (%.2f MiB) repacked into interleaved layouts at load, "
                       "read instead of mapped\n", repacked_from.size(), bytes / 1048576.0);
        for (const auto & [m, n] : moves) {
            LLAMA_LOG_INFO("llama_model_load: -rtr: %d %s tensors -> %s\n", n, ggml_type_name(m.first), ggml_type_name(m.second));
        }
        if (on_device > 0) {
            LLAMA_LOG_INFO("llama_model_load: -rtr: %d tensors on a GPU kept plain (the interleaved layouts speed up only the CPU)\n",
                           on_device);
        }
        for (const auto & [type, n] : kept) {
            // said plainly because users pass -rtr for speed
            LLAMA_LOG_INFO("llama_model_load: -rtr: %d %s tensors kept plain: %s is not faster on this CPU (%s kernels)\n", n,
                           ggml_type_name(type), ggml_type_name(ggml_interleaved_twin(type)),
                           ggml_cpu_isa_name(ggml_cpu_get_isa()));
        }
    }
    // weights kept in host memory and read (not mapped) go to the first device's page-locked host
    // memory if it has one: the hybrid rule copies them to the device for every prompt batch
    ggml_backend_buffer_type_t host_buft = ggml_backend_cpu_buffer_type();
    for (ggml_backend_dev_t d : plan.devices) {
        if (ggml_backend_buffer_type_t h = ggml_backend_dev_host_buffer_type(d)) {
            host_buft = h;
            break;
        }
    }
    std::vector<ggml_tensor *> mapped;
    size_t n_overridden = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(model.ctx); t; t = ggml_get_next_tensor(model.ctx, t)) {
        const llama_placement::rule * rule = nullptr;
        const ggml_backend_buffer_type_t buft = placement_of(t, &rule);
        if (rule) {
            LLAMA_LOG_INFO("llama_model_load: tensor override: %s (%s, %.2f MiB) -> %s (pattern '%s')\n", t->name,
                           ggml_type_name(t->type), ggml_nbytes(t) / 1048576.0, ggml_backend_buft_name(buft),
                           rule->pattern.c_str());
            ++n_overridden;
        }
        if (buft == ggml_backend_cpu_buffer_type() && params.use_mmap && !repacked_from.count(t)) {
            mapped.push_back(t);
        } else {
            group_of(buft == ggml_backend_cpu_buffer_type() ? host_buft : buft).push_back(t);
        }
    }
    if (!plan.rules.empty()) {
        LLAMA_LOG_INFO("llama_model_load: %zu tensors overridden by %zu rule(s)\n", n_overridden, plan.rules.size());
    }

    size_t total = 0, done = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(model.ctx); t; t = ggml_get_next_tensor(model.ctx, t)) total += ggml_nbytes(t);
    if (!mapped.empty()) {
        std::vector<ggml_backend_buffer_t> part_buf(ml.part_paths.size(), nullptr);
        for (size_t p = 0; p < ml.part_paths.size(); ++p) {
            model.mmaps.push_back(std::make_unique<llama_mmap>(ml.part_paths[p], /*populate=*/true));
            auto & mm = *model.mmaps.back();
            part_buf[p] = ggml_backend_cpu_buffer_from_ptr(mm.addr, mm.size);
            ggml_backend_buffer_set_usage(part_buf[p], GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
            model.buffers.push_back(part_buf[p]);
        }
        for (ggml_tensor * t : mapped) {
            const auto * ti = ml.find(t->name);
            GGML_ASSERT(ti);
            t->buffer = part_buf[ti->part];
            t->data = (char *) model.mmaps[ti->part]->addr + ti->offs;
            done += ggml_nbytes(t);
        }
    }
    std::vector<uint8_t> staging, repacked;
    for (auto & g : groups) {
        ggml_backend_buffer_t buf = ggml_backend_alloc_tensors_from_buft(g.first, g.second.data(), g.second.size());
        if (!buf) {
            size_t size = 0;
            for (ggml_tensor * t : g.second) size += ggml_backend_buft_get_alloc_size(g.first, t);
            throw llama_error(llama_format("%s: cannot allocate %.2f MiB of %s memory for the weights", path.c_str(),
                                           size / 1048576.0, ggml_backend_buft_name(g.first)));
        }
        ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        model.buffers.push_back(buf);
        for (ggml_tensor * t : g.second) {
            const auto * ti = ml.find(t->name);
            const auto rp = repacked_from.find(t);
            const ggml_type file_type = rp == repacked_from.end() ? t->type : rp->second;
            staging.resize(ggml_row_size(file_type, t->ne[0]) * ggml_nrows(t));
            read_exact(ml.part_paths[ti->part], ti->offs, staging.data(), staging.size());
            if (file_type != t->type) {
                repacked.resize(ggml_nbytes(t));
                if (ggml_repack_rows(t->type, staging.data(), repacked.data(), ggml_nrows(t), t->ne[0]) != repacked.size()) {
                    throw llama_error(llama_format("%s: tensor %s: cannot repack %s into %s", path.c_str(), t->name,
                                                   ggml_type_name(file_type), ggml_type_name(t->type)));
                }
                staging.swap(repacked);
            }
            ggml_backend_tensor_set(t, staging.data(), 0, staging.size());
            done += ggml_nbytes(t);
            if (params.progress_callback) params.progress_callback((float) done / total, params.progress_callback_user_data);
        }
    }

    // weights derived from others, now that their sources are in place; each goes where its
    // name says (its layer's device), filled in host memory first when that device's is not
    if (model.ctx_derived) {
        std::vector<std::pair<ggml_backend_buffer_type_t, std::vector<ggml_tensor *>>> dgroups;
        for (auto & d : model.derived) {
            ggml_backend_buffer_type_t buft = plan.buft_of(d.t->name);
            const long il = llama_layer_of_name(d.t->name);
            if (il >= 0 && cuts.split((uint32_t) il) && !cuts.in_whole_part(model.layers[il], (uint32_t) il, d.t)) {
                buft = ggml_backend_cpu_buffer_type();   // a source of the cut
            }
            auto it = std::find_if(dgroups.begin(), dgroups.end(), [&](const auto & g) { return g.first == buft; });
            if (it == dgroups.end()) it = dgroups.insert(dgroups.end(), { buft, {} });
            it->second.push_back(d.t);
        }
        for (auto & g : dgroups) {
            ggml_backend_buffer_t buf = ggml_backend_alloc_tensors_from_buft(g.first, g.second.data(), g.second.size());
            if (!buf) throw llama_error(llama_format("%s: cannot allocate memory for derived weights", path.c_str()));
            ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
            model.buffers.push_back(buf);
        }
        size_t bytes = 0;
        for (auto & d : model.derived) {
            if (ggml_backend_buffer_is_host(d.t->buffer)) {
                d.fill(d.t);
            } else {
                ggml_tensor host = *d.t;
                staging.resize(ggml_nbytes(d.t));
                host.buffer = nullptr;
                host.data = staging.data();
                d.fill(&host);
                ggml_backend_tensor_set(d.t, staging.data(), 0, staging.size());
            }
            bytes += ggml_nbytes(d.t);
            type_counts[d.t->type]++;
            model.n_bytes += ggml_nbytes(d.t);
            model.n_elements += ggml_nelements(d.t);
        }
        LLAMA_LOG_INFO("llama_model_load: computed %zu tensors at load (%.2f MiB), e.g. %s %s\n", model.derived.size(),
                       bytes / 1048576.0, model.derived[0].t->name, ggml_type_name(model.derived[0].t->type));
    }
    if (any_cut) llama_make_shards(model, cuts);
    if (params.check_tensors) llama_check_weight_data(model, path);
    if (params.use_mlock) llama_lock_weights(model, path);
    for (ggml_tensor * t = ggml_get_first_tensor(model.ctx); t; t = ggml_get_next_tensor(model.ctx, t)) {
        type_counts[t->type]++;
        model.n_bytes += ggml_nbytes(t);
        model.n_elements += ggml_nelements(t);
    }
    model.t_load_us = ggml_time_us() - t0;

    LLAMA_LOG_INFO("llama_model_load: %s: arch = %s, %u layers, n_embd = %u, n_head = %u, n_head_kv = %u, n_vocab = %u\n",
                   path.c_str(), ml.arch_name.c_str(), hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.n_vocab);
    if (hp.n_expert > 0) {
        LLAMA_LOG_INFO("llama_model_load: experts: %u, used per token: %u, shared: %u, expert n_ff = %u, leading dense layers: %u, "
                       "gating: %s%s, weights scale %g\n",
                       hp.n_expert, hp.n_expert_used, hp.n_expert_shared, hp.n_ff_exp, hp.n_layer_dense_lead,
                       hp.expert_gating_func == 2 ? "sigmoid" : "softmax", hp.expert_weights_norm ? " (normalized)" : "",
                       hp.expert_weights_scale);
    }
    if (hp.n_lora_kv > 0) {
        LLAMA_LOG_INFO("llama_model_load: MLA: q_lora_rank = %u, kv_lora_rank = %u, rope dims = %u, key length %u, value length %u\n",
                       hp.n_lora_q, hp.n_lora_kv, hp.n_rot, hp.n_embd_head_k, hp.n_embd_head_v);
    }
    for (const auto & tc : type_counts) {
        LLAMA_LOG_INFO("llama_model_load: - type %6s: %4d tensors\n", ggml_type_name(tc.first), tc.second);
    }
    LLAMA_LOG_INFO("llama_model_load: model size = %.2f MiB (%.2f BPW), %.2f M parameters, %s\n",
                   model.n_bytes / 1048576.0, 8.0 * model.n_bytes / std::max<uint64_t>(model.n_elements, 1),
                   model.n_elements / 1e6, params.use_mmap ? "mmap" : "read");
    if (!model.devices.empty()) llama_log_placement(model);
}

} // namespace

// ---- C API

namespace {
// how many of the model's layers keep a recurrent state
uint32_t n_recurrent_layers(const llama_model * model) {
    uint32_t n = 0;
    for (uint32_t il = 0; il < model->hparams.n_layer; ++il) n += model->hparams.is_recurrent(il) ? 1 : 0;
    return model->arch->recurrent_shapes ? n : 0;
}
} // namespace

extern "C" {

const char * llama_last_error(void) { return g_last_error.c_str(); }

// Filling the device registry here puts the line that says whether a GPU was found (or why none
// is usable: no driver, no device, no kernels for its architecture) at the top of the log.
void llama_backend_init(void) { ggml_backend_dev_count(); }
void llama_backend_free(void) {}
void llama_log_set(ggml_log_callback cb, void * user_data) { ggml_log_set(cb, user_data); }

llama_model_params llama_model_default_params(void) {
    llama_model_params p{};
    p.n_gpu_layers = -1;
    p.split_mode = LLAMA_SPLIT_MODE_LAYER;
    p.split_experts = false;
    p.use_mmap = true;
    return p;
}

llama_model * llama_model_load_from_file(const char * path, llama_model_params params) {
    auto * model = new llama_model;
    try {
        load_model(*model, path, params);
        return model;
    } catch (const std::exception & e) {
        llama_set_last_error(e.what());
        LLAMA_LOG_ERROR("error loading model: %s\n", e.what());
        delete model;
        return nullptr;
    }
}

void llama_model_free(llama_model * model) { delete model; }

const llama_vocab * llama_model_get_vocab(const llama_model * model) { return &model->vocab; }
int32_t  llama_model_n_embd(const llama_model * model) { return (int32_t) model->hparams.n_embd; }
int32_t  llama_model_n_layer(const llama_model * model) { return (int32_t) model->hparams.n_layer; }
int32_t  llama_model_n_head(const llama_model * model) { return (int32_t) model->hparams.n_head; }
int32_t  llama_model_n_ctx_train(const llama_model * model) { return (int32_t) model->hparams.n_ctx_train; }
uint64_t llama_model_size(const llama_model * model) { return model->n_bytes; }
uint64_t llama_model_n_params(const llama_model * model) { return model->n_elements; }
bool     llama_model_has_encoder(const llama_model *) { return false; }

bool llama_model_is_recurrent(const llama_model * model) {
    const uint32_t n = n_recurrent_layers(model);
    return n > 0 && n == model->hparams.n_layer;
}
bool llama_model_is_hybrid(const llama_model * model) {
    const uint32_t n = n_recurrent_layers(model);
    return n > 0 && n < model->hparams.n_layer;
}

int32_t llama_model_desc(const llama_model * model, char * buf, size_t buf_size) {
    const char * ftype = "?";
    for (const auto & kv : model->meta) {
        if (kv.first == "general.file_type") ftype = kv.second.c_str();
    }
    const double params = model->n_elements / 1e9;
    return std::snprintf(buf, buf_size, "%s %s%.2fB ftype %s", model->arch_name.c_str(), params < 1 ? "" : "",
                         params, ftype);
}

const char * llama_model_chat_template(const llama_model * model, const char * name) {
    (void) name;
    return model->chat_template.empty() ? nullptr : model->chat_template.c_str();
}

int32_t llama_model_meta_val_str(const llama_model * model, const char * key, char * buf, size_t buf_size) {
    for (const auto & kv : model->meta) {
        if (kv.first == key) return std::snprintf(buf, buf_size, "%s", kv.second.c_str());
    }
    if (buf_size > 0) buf[0] = '\0';
    return -1;
}

const char * llama_print_system_info(void) { return ggml_cpu_features(); }

// Devices besides the host CPU: GPUs, or virtual CPU devices (KILN_VIRTUAL_CPU_DEVICES).
bool llama_supports_gpu_offload(void) { return ggml_backend_dev_count() > 0; }

size_t llama_max_devices(void) { return 16; }

} // extern "C"
