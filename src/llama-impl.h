// Internal helpers of libllama: logging, errors, string formatting.
#pragma once

#include "ggml.h"

#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

std::string llama_format(const char * fmt, ...) __attribute__((format(printf, 1, 2)));

// Errors the user can cause (bad file, bad parameters): caught at the C API boundary, logged,
// and returned as NULL / error codes with llama_last_error() set.
struct llama_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

#define LLAMA_LOG_INFO(...)  ggml_log(GGML_LOG_LEVEL_INFO, __VA_ARGS__)
#define LLAMA_LOG_WARN(...)  ggml_log(GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define LLAMA_LOG_ERROR(...) ggml_log(GGML_LOG_LEVEL_ERROR, __VA_ARGS__)
#define LLAMA_LOG_DEBUG(...) ggml_log(GGML_LOG_LEVEL_DEBUG, __VA_ARGS__)

void llama_set_last_error(const std::string & msg);
