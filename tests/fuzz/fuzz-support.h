// Shared by the libFuzzer targets (tests/fuzz/fuzz-*.cpp): the vocabularies and chat template
// they read from ../shared, once per process, and the rule every target enforces — input may be
// refused with the documented error, anything else (another exception, a crash, a sanitizer
// report) is a finding, so it aborts and libFuzzer keeps the input.
#pragma once

#include "gguf.h"
#include "llama-vocab.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace kiln_fuzz {

inline std::string shared_path(const std::string & rel) { return std::string(KILN_SHARED_DIR) + "/" + rel; }

[[noreturn]] inline void finding(const char * what, const std::string & detail) {
    std::fprintf(stderr, "FUZZ FINDING: %s: %s\n", what, detail.c_str());
    std::abort();
}

// The metadata of a GGUF file in ../shared (no tensor data); exits when it cannot be read,
// because a target without its input would fuzz nothing.
inline gguf_context * open_shared_gguf(const std::string & rel) {
    gguf_init_params params{};
    params.no_alloc = true;
    gguf_context * ctx = gguf_init_from_file(shared_path(rel).c_str(), params);
    if (!ctx) {
        std::fprintf(stderr, "fuzz set-up: cannot read %s: %s\n", shared_path(rel).c_str(), gguf_last_error());
        std::exit(2);
    }
    return ctx;
}

inline std::unique_ptr<llama_vocab> load_shared_vocab(const std::string & rel) {
    gguf_context * ctx = open_shared_gguf(rel);
    auto vocab = std::make_unique<llama_vocab>();
    std::string err;
    const bool ok = vocab->load(ctx, err);
    gguf_free(ctx);
    if (!ok) {
        std::fprintf(stderr, "fuzz set-up: the vocabulary of %s does not load: %s\n", rel.c_str(), err.c_str());
        std::exit(2);
    }
    return vocab;
}

// Splits an input at its first NUL byte: the part before (a template, a grammar) and after.
inline void split_at_nul(const uint8_t * data, size_t size, std::string & head, std::string & tail) {
    const std::string all(reinterpret_cast<const char *>(data), size);
    const size_t nul = all.find('\0');
    head = all.substr(0, nul);
    tail = nul == std::string::npos ? std::string() : all.substr(nul + 1);
}

// JSON text, or a discarded value when it does not parse or nests deeper than the server accepts
// (64 levels: examples/server/server-utils.h, parse_request_json).
inline nlohmann::ordered_json parse_json_bounded(const std::string & text) {
    bool too_deep = false;
    auto limit = [&](int depth, nlohmann::ordered_json::parse_event_t, nlohmann::ordered_json &) {
        if (depth > 64) too_deep = true;
        return !too_deep;
    };
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, limit, false);
    return too_deep ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded) : j;
}

} // namespace kiln_fuzz
