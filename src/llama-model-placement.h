// Where a model's weights go: which device holds each layer (split mode, -ngl, -ts, -mg), and
// the -ot rules that override it per tensor. The KV cache and recurrent state of a layer follow
// its weights (llama_model::layer_buft).
#pragma once

#include "ggml-backend.h"
#include "llama.h"

#include <regex>
#include <string>
#include <vector>

struct llama_hparams;

struct llama_placement {
    std::vector<ggml_backend_dev_t> devices;   // the devices the model may use, in -ts order
    std::vector<int> layer_device;             // per layer: index in devices; -1: the host CPU
    int main_device = -1;                      // embeddings and output head (-1: host CPU)
    std::vector<double> shares;                // per device, summing to 1 (-ts, or by free memory)
    struct rule {
        std::string pattern;
        std::regex re;
        ggml_backend_buffer_type_t buft;
    };
    std::vector<rule> rules;                   // -ot, first match wins

    // the buffer type of the tensor with this name (host CPU: ggml_backend_cpu_buffer_type()),
    // and the rule that chose it (NULL: the layer plan)
    ggml_backend_buffer_type_t buft_of(const char * name, const rule ** by = nullptr) const;
    ggml_backend_buffer_type_t layer_buft(uint32_t il) const;
};

// Throws llama_error naming the parameter when the request cannot be met (an unknown device,
// a split mode Kiln does not do, a bad -ot rule).
llama_placement llama_plan_placement(const llama_hparams & hp, const llama_model_params & params, const std::string & path);

// il of a "blk.<il>.*" tensor name, -1 for other names
long llama_layer_of_name(const char * name);

// Layer numbers as ranges, "0-3, 7" (for the load log).
std::string llama_format_layers(const std::vector<uint32_t> & layers);

// What one place (the host CPU or a device) holds of a model: whole layers, parts of cut layers
// (-sm graph) and the bytes of weights.
struct llama_place_summary {
    ggml_backend_buffer_type_t buft = nullptr;
    std::vector<uint32_t> layers;   // whole layers
    std::vector<uint32_t> cut;      // layers it holds parts of
    uint32_t heads = 0, cols = 0;   // heads (query heads; a delta-net's value heads) and FFN columns of those parts
    uint32_t experts = 0;           // routed experts held whole (--moe-split experts)
    size_t weights = 0;
    std::string describe_layers() const;   // "0-3, parts of 4-9 (16 heads, 2048 FFN columns in all)"
};
struct llama_model;
// The host CPU first, then the model's devices in order.
std::vector<llama_place_summary> llama_place_summaries(const llama_model & m);
// The row of memory of this buffer type: its device's, else the host CPU's (0).
size_t llama_place_of(const std::vector<llama_place_summary> & rows, ggml_backend_buffer_type_t buft);
// The load log's split: per device (and the host CPU), the layers and the MiB of weights held.
void llama_log_placement(const llama_model & m);

// Allocate each tensor in a buffer of its buffer type (one buffer per type, appended to out,
// cleared to 0). NULL types mean the host CPU's. False if an allocation failed.
bool llama_alloc_grouped(const std::vector<ggml_tensor *> & tensors, const std::vector<ggml_backend_buffer_type_t> & bufts,
                         std::vector<ggml_backend_buffer_t> & out);
