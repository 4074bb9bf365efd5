// Placement of a model's weights on devices, as llama.cpp users know it: -ngl counts layers from
// the last one (the output head counts as one more), -sm layer gives each device a run of
// consecutive layers in -ts proportions (by free memory when none are given), -sm none puts
// them all on -mg, and -ot REGEX=DEVICE overrides any of that per tensor, the first match winning.
#include "llama-model-placement.h"

#include "ggml-cpu.h"
#include "llama-impl.h"
#include "llama-model.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace {

constexpr size_t k_max_devices = 16;

// the devices' shares, normalized to sum 1
std::vector<double> device_shares(const std::vector<ggml_backend_dev_t> & devices, const float * tensor_split) {
    std::vector<double> w(devices.size(), 0.0);
    double sum = 0;
    for (size_t i = 0; i < devices.size() && tensor_split; ++i) sum += w[i] = tensor_split[i];
    if (sum <= 0) {
        sum = 0;
        for (size_t i = 0; i < devices.size(); ++i) {
            size_t free = 0;
            ggml_backend_dev_memory(devices[i], &free, nullptr);
            sum += w[i] = (double) free;
        }
        if (sum <= 0) w.assign(devices.size(), 1.0), sum = (double) devices.size();
    }
    for (double & x : w) x /= sum;
    return w;
}

} // namespace

long llama_layer_of_name(const char * name) {
    if (std::strncmp(name, "blk.", 4) != 0) return -1;
    char * end = nullptr;
    const long il = std::strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' ? il : -1;
}

ggml_backend_buffer_type_t llama_placement::layer_buft(uint32_t il) const {
    const int d = il < layer_device.size() ? layer_device[il] : -1;
    return d < 0 ? ggml_backend_cpu_buffer_type() : ggml_backend_dev_buffer_type(devices[d]);
}

ggml_backend_buffer_type_t llama_placement::buft_of(const char * name, const rule ** by) const {
    for (const auto & r : rules) {
        if (std::regex_search(name, r.re)) {
            if (by) *by = &r;
            return r.buft;
        }
    }
    if (by) *by = nullptr;
    const long il = llama_layer_of_name(name);
    if (il >= 0) return layer_buft((uint32_t) il);
    return main_device < 0 ? ggml_backend_cpu_buffer_type() : ggml_backend_dev_buffer_type(devices[main_device]);
}

llama_placement llama_plan_placement(const llama_hparams & hp, const llama_model_params & params, const std::string & path) {
    llama_placement p;
    if (params.devices) {
        for (ggml_backend_dev_t * d = params.devices; *d; ++d) p.devices.push_back(*d);
    } else {
        for (size_t i = 0; i < ggml_backend_dev_count(); ++i) p.devices.push_back(ggml_backend_dev_get(i));
    }
    if (p.devices.size() > k_max_devices) p.devices.resize(k_max_devices);

    for (const llama_model_tensor_buft_override * o = params.tensor_buft_overrides; o && o->pattern; ++o) {
        if (!o->buft) throw llama_error(llama_format("tensor override '%s': no buffer type given", o->pattern));
        ggml_backend_dev_t dev = ggml_backend_buft_get_device(o->buft);
        bool known = o->buft == ggml_backend_cpu_buffer_type();
        for (ggml_backend_dev_t d : p.devices) known |= d == dev;
        if (!known) {
            throw llama_error(llama_format("tensor override '%s': %s is not one of the devices in use", o->pattern,
                                           ggml_backend_buft_name(o->buft)));
        }
        try {
            p.rules.push_back({ o->pattern, std::regex(o->pattern), o->buft });
        } catch (const std::regex_error & e) {
            throw llama_error(llama_format("tensor override '%s': invalid regular expression: %s", o->pattern, e.what()));
        }
    }

    const uint32_t n_layer = hp.n_layer;
    const uint32_t n_total = n_layer + hp.n_layer_nextn;   // NextN layers load but never run: host CPU
    p.layer_device.assign(n_total, -1);
    if (p.devices.empty()) return p;

    const int n_dev = (int) p.devices.size();
    if (params.main_gpu < 0 || params.main_gpu >= n_dev) {
        throw llama_error(llama_format("%s: main device %d (-mg) is not in [0, %d): %d device(s) in use", path.c_str(),
                                       params.main_gpu, n_dev, n_dev));
    }
    if (params.split_mode == LLAMA_SPLIT_MODE_ROW) {
        throw llama_error("split mode 'row' is not supported: use -sm layer (pipeline) or -sm graph");
    }
    // the head is layer n_layer: -ngl 1 offloads it alone, -ngl n_layer + 1 everything
    const int64_t ngl = params.n_gpu_layers < 0 ? (int64_t) n_layer + 1 : std::min<int64_t>(params.n_gpu_layers, n_layer + 1);
    const uint32_t first = (uint32_t) std::max<int64_t>(0, (int64_t) n_layer + 1 - ngl);   // first offloaded layer
    if (ngl > 0) p.main_device = params.main_gpu;

    if (params.split_mode == LLAMA_SPLIT_MODE_NONE) {
        for (uint32_t il = first; il < n_layer; ++il) p.layer_device[il] = params.main_gpu;
        return p;
    }
    // layer mode: layer il goes to the device whose cumulative share passes its place among
    // the offloaded layers (graph mode: the layers it cannot cut)
    p.shares = device_shares(p.devices, params.tensor_split);
    std::vector<double> shares = p.shares;
    for (size_t d = 1; d < shares.size(); ++d) shares[d] += shares[d - 1];
    const uint32_t n_off = std::max<uint32_t>(n_layer - first, 1);
    for (uint32_t il = first; il < n_layer; ++il) {
        const double at = (il - first + 0.5) / n_off;
        int d = 0;
        while (d + 1 < n_dev && shares[d] <= at) ++d;
        p.layer_device[il] = d;
    }
    return p;
}

std::string llama_format_layers(const std::vector<uint32_t> & layers) {
    std::string out;
    for (size_t i = 0; i < layers.size();) {
        size_t j = i;
        while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
        if (!out.empty()) out += ", ";
        out += j == i ? llama_format("%u", layers[i]) : llama_format("%u-%u", layers[i], layers[j]);
        i = j + 1;
    }
    return out.empty() ? "none" : out;
}

size_t llama_place_of(const std::vector<llama_place_summary> & rows, ggml_backend_buffer_type_t buft) {
    for (size_t i = 1; i < rows.size(); ++i) {
        if (rows[i].buft == buft) return i;
    }
    return 0;   // the host CPU's own, a device's page-locked host memory, or none
}

std::vector<llama_place_summary> llama_place_summaries(const llama_model & m) {
    std::vector<llama_place_summary> rows(1 + m.devices.size());
    rows[0].buft = ggml_backend_cpu_buffer_type();
    for (size_t i = 0; i < m.devices.size(); ++i) rows[i + 1].buft = ggml_backend_dev_buffer_type(m.devices[i]);
    auto count = [&](const ggml_tensor * t) {
        rows[llama_place_of(rows, t->buffer ? ggml_backend_buffer_get_type(t->buffer) : nullptr)].weights += ggml_nbytes(t);
    };
    for (ggml_tensor * t = ggml_get_first_tensor(m.ctx); t; t = ggml_get_next_tensor(m.ctx, t)) count(t);
    for (const auto & d : m.derived) count(d.t);
    if (m.ctx_shards) {
        for (ggml_tensor * t = ggml_get_first_tensor(m.ctx_shards); t; t = ggml_get_next_tensor(m.ctx_shards, t)) count(t);
    }
    // -sm graph: what each device holds of the cut layers
    for (uint32_t il = 0; il < m.shards.size(); ++il) {
        for (const auto & s : m.shards[il]) {
            llama_place_summary & r = rows[s.device + 1];
            r.cut.push_back(il);
            r.heads += s.n_head;
            const ggml_tensor * up = s.w.ffn_up_exps ? s.w.ffn_up_exps : s.w.ffn_up;
            if (up && up == s.w.ffn_up_exps && up->ne[2] < (int64_t) m.hparams.n_expert) {
                r.experts += (uint32_t) up->ne[2];
                up = s.w.ffn_up_shexp;   // the shared expert is still cut by columns
            }
            r.cols += up ? (uint32_t) up->ne[1] : 0;
        }
    }
    for (llama_place_summary & r : rows) {
        for (uint32_t il = 0; il < m.layer_buft.size(); ++il) {
            if (m.layer_buft[il] == r.buft && (m.shards.empty() || m.shards[il].empty())) r.layers.push_back(il);
        }
    }
    return rows;
}

std::string llama_place_summary::describe_layers() const {
    std::string out = llama_format_layers(layers);
    if (!cut.empty()) {
        out += llama_format(", parts of %s (%u heads, %u FFN columns%s in all)", llama_format_layers(cut).c_str(), heads, cols,
                            experts ? llama_format(", %u whole experts", experts).c_str() : "");
    }
    return out;
}

void llama_log_placement(const llama_model & m) {
    const std::vector<llama_place_summary> rows = llama_place_summaries(m);
    for (size_t i = 0; i < rows.size(); ++i) {
        const llama_place_summary & r = rows[i];
        if (r.layers.empty() && r.weights == 0 && r.cut.empty()) continue;
        LLAMA_LOG_INFO("llama_model_load: %-5s %s: layers %s, %.2f MiB of weights\n", ggml_backend_buft_name(r.buft),
                       i == 0 ? "(host)" : "      ", r.describe_layers().c_str(), r.weights / 1048576.0);
    }
}

bool llama_alloc_grouped(const std::vector<ggml_tensor *> & tensors, const std::vector<ggml_backend_buffer_type_t> & bufts,
                         std::vector<ggml_backend_buffer_t> & out) {
    std::vector<ggml_backend_buffer_type_t> kinds;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const ggml_backend_buffer_type_t b = bufts[i] ? bufts[i] : ggml_backend_cpu_buffer_type();
        if (std::find(kinds.begin(), kinds.end(), b) == kinds.end()) kinds.push_back(b);
    }
    std::vector<ggml_tensor *> group;
    for (ggml_backend_buffer_type_t k : kinds) {
        group.clear();
        for (size_t i = 0; i < tensors.size(); ++i) {
            if ((bufts[i] ? bufts[i] : ggml_backend_cpu_buffer_type()) == k) group.push_back(tensors[i]);
        }
        ggml_backend_buffer_t buf = ggml_backend_alloc_tensors_from_buft(k, group.data(), group.size());
        if (!buf) return false;
        ggml_backend_buffer_clear(buf, 0);
        out.push_back(buf);
    }
    return true;
}
