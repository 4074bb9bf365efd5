// Load-time checks and locking of a model's weights (see llama-model-checks.cpp). Each throws
// llama_error with a message that starts with the model's path.
#pragma once

#include <string>

struct llama_model;

// Every weight matrix has a matrix-product kernel on the backend that will run it.
void llama_check_weight_kernels(const llama_model & model, const std::string & path);
// --check-tensors: every weight decodes to finite values (float data, quant block scales).
void llama_check_weight_data(const llama_model & model, const std::string & path);
// --mlock: lock the memory holding the weights (mapped or read) in RAM with mlock(2).
void llama_lock_weights(llama_model & model, const std::string & path);
void llama_unlock_weights(llama_model & model);
