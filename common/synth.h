// Synthetic benchmark models: random-weight GGUF files with the shapes of real architectures
// (qwen3, qwen3moe, deepseek2), a byte-level BPE vocabulary padded to the real vocabulary size
// and a Qwen3-style chat template. Used by `llama-gguf synth`, by the tests, and by the tools'
// --demo mode (which synthesizes a small model into a temporary file).
//
// The output depends only on the options (preset, layers, experts, seed, type): every tensor has
// its own random stream derived from the seed and the tensor's name, and the file is written
// tensor by tensor so models larger than RAM can be produced.
#pragma once

#include "ggml.h"

#include <cstdint>
#include <string>
#include <vector>

struct kiln_synth_options {
    std::string preset = "tiny-qwen3";
    int32_t n_layers  = -1;            // -1: the preset's
    int32_t n_experts = -1;            // -1: the preset's (MoE presets only)
    uint64_t seed     = 42;
    ggml_type type    = GGML_TYPE_F16; // matrices: f16, bf16 or f32 (norms and biases stay f32)
    std::string name;                  // general.name; empty: "synth-<preset>"
};

// The preset names with a one-line description each.
std::vector<std::pair<std::string, std::string>> kiln_synth_presets();

// Checks the options (preset known, counts in range, type allowed); false with err set.
bool kiln_synth_validate(const kiln_synth_options & opt, std::string & err);

// The tensors the options produce, in file order (for --dry-run and tests).
struct kiln_synth_tensor {
    std::string name;
    ggml_type type;
    int n_dims;
    int64_t ne[3];
};
std::vector<kiln_synth_tensor> kiln_synth_tensors(const kiln_synth_options & opt);

// Bytes of tensor data the options produce (for progress messages and disk-space checks).
uint64_t kiln_synth_data_size(const kiln_synth_options & opt);

// Writes the model to path (through a temporary file that is renamed at the end). progress, if
// given, is called after every tensor with the fraction written. False with err set on failure.
bool kiln_synth_write(const kiln_synth_options & opt, const std::string & path, std::string & err,
                      void (*progress)(float fraction, void * user) = nullptr, void * user = nullptr);

// The hook for the tools' --demo mode: a preset with default options.
bool kiln_synth_write(const char * preset, const char * path, std::string & err);

// The vocabulary the synthetic models carry (exposed for tests): tokens, types, merges.
struct kiln_synth_vocab {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;        // 1 normal, 3 control, 4 user-defined, 5 unused
    std::vector<std::string> merges;
    int32_t id_endoftext = -1, id_im_start = -1, id_im_end = -1;
};
// n_vocab: total size (padding tokens fill up to it); first_special: id of <|endoftext|>.
kiln_synth_vocab kiln_synth_build_vocab(int32_t n_vocab, int32_t first_special);
const char * kiln_synth_chat_template();

// For --demo: writes the tiny-qwen3 preset to a new temporary file and returns its path in
// path (the caller removes it when done). False with err set on failure.
bool kiln_synth_demo_model(std::string & path, std::string & err);
