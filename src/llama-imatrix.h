// Importance matrices: per weight tensor, the sum of squared activations of every input column
// and how many activation rows were summed (per expert for expert tensors). Collected from the
// matmul inputs during decode (llama-imatrix), read and written in llama.cpp's two formats, the
// legacy .dat and GGUF (<name>.in_sum2 / <name>.counts), merged weighted by their counts, and
// turned into the per-column means the quantizers weight their error with.
//
// Internal C++ API of libllama, used by llama-imatrix, llama-quantize and the tests.
#pragma once

#include "ggml.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

struct llama_imatrix_entry {
    std::vector<double> sums;     // n_mat blocks of n_per_row sums of x^2
    std::vector<int64_t> counts;  // n_mat: activation rows summed into each block
};

struct llama_imatrix {
    std::map<std::string, llama_imatrix_entry> entries;   // by weight tensor name
    std::vector<std::string> datasets;
    int32_t chunk_count = 0;   // chunks of text processed
    int32_t chunk_size = 0;    // tokens per chunk (n_ctx)

    // Add another matrix: sums and counts add, so means are weighted by the counts.
    // Returns false (err names the tensor) when the shapes of a tensor differ.
    bool merge(const llama_imatrix & other, std::string & err);

    // Per-column means, the form the quantizers take. An expert tensor's experts each have their
    // own means, from however few rows the router sent them: each is drawn towards the mean over
    // all experts as if prior_rows rows of that pooled mean had been added (a count-weighted
    // shrinkage estimate; 0: raw means). A mean of x^2 over n rows is uncertain by about
    // sqrt(2 / n) of itself for Gaussian-like inputs: 50% at 8 rows, 25% at 32; the quantizers'
    // weighting then follows sampling noise rather than the expert's inputs. Blocks without
    // data get the pooled mean (1 when the whole tensor has none).
    static constexpr double k_expert_prior_rows = 32;
    std::map<std::string, std::vector<float>> means(double prior_rows = k_expert_prior_rows) const;
};

// Load either format (GGUF files start with "GGUF"). A legacy file stores mean * ncall with
// ncall in chunks; chunk_size_hint (> 0) converts those to token counts so the result merges
// with GGUF data (otherwise counts are taken as ncall). false + err naming file and field.
bool llama_imatrix_load(const std::string & path, llama_imatrix & out, std::string & err, int32_t chunk_size_hint = 0);
bool llama_imatrix_save_gguf(const std::string & path, const llama_imatrix & m, std::string & err);
bool llama_imatrix_save_dat(const std::string & path, const llama_imatrix & m, std::string & err);

// Observer for llama_context_params.cb_eval: accumulates the inputs of every matmul whose
// weight is a model tensor (blk.*, and output.weight with process_output).
struct llama_imatrix_collector {
    llama_imatrix data;
    bool process_output = false;
    std::string error;   // set (and collection stops) on inconsistent shapes or non-finite values

    bool ask(const ggml_tensor * t) const;
    void observe(const ggml_tensor * t);

    // the cb_eval function; user_data is the collector
    static bool callback(ggml_tensor * t, bool ask, void * user_data);

private:
    std::vector<float> row_;   // one f32 activation row (reused)
    void accumulate(const ggml_tensor * w, const ggml_tensor * x, const ggml_tensor * ids, int64_t n_mat);
};
