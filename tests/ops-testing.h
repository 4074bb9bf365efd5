// Shared by the op test files (test-ops.cpp, test-ops-recurrent.cpp): element access in logical
// order for any layout, random inputs in several layouts, comparison against double-precision
// references, and the Ops fixture that runs a graph under every ISA level and thread count.
#pragma once

#include "testing.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "ops-common.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace ops_testing {

using ref_t = std::vector<double>;

inline std::vector<ggml_cpu_isa> isas_here() {
    std::vector<ggml_cpu_isa> out = { GGML_CPU_ISA_SCALAR };
    for (int i = GGML_CPU_ISA_SCALAR + 1; i < GGML_CPU_ISA_COUNT; ++i) {
        if (ggml_cpu_isa_runs_here((ggml_cpu_isa) i)) out.push_back((ggml_cpu_isa) i);
    }
    return out;
}

// ---- element access in logical order, any layout

inline double get(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char * p = (const char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    switch (t->type) {
        case GGML_TYPE_F32:  return *(const float *) p;
        case GGML_TYPE_F16:  return ggml_fp16_to_fp32(*(const uint16_t *) p);
        case GGML_TYPE_BF16: return ggml_bf16_to_fp32(*(const uint16_t *) p);
        case GGML_TYPE_I32:  return *(const int32_t *) p;
        case GGML_TYPE_I64:  return (double) *(const int64_t *) p;
        default: break;
    }
    ADD_FAILURE() << "get: unsupported type " << ggml_type_name(t->type);
    return 0;
}

inline void set(ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v) {
    char * p = (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    switch (t->type) {
        case GGML_TYPE_F32:  *(float *) p = (float) v; break;
        case GGML_TYPE_F16:  *(uint16_t *) p = ggml_fp32_to_fp16((float) v); break;
        case GGML_TYPE_BF16: *(uint16_t *) p = ggml_fp32_to_bf16((float) v); break;
        case GGML_TYPE_I32:  *(int32_t *) p = (int32_t) v; break;
        case GGML_TYPE_I64:  *(int64_t *) p = (int64_t) v; break;
        default: ADD_FAILURE() << "set: unsupported type " << ggml_type_name(t->type);
    }
}

template <typename F>
inline void for_each(const ggml_tensor * t, F f) {
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) f(i0, i1, i2, i3);
}

// The values of t in logical order (quantized rows decoded with the type's to_float).
inline ref_t values(const ggml_tensor * t) {
    ref_t out;
    out.reserve(ggml_nelements(t));
    if (ggml_is_quantized(t->type)) {
        std::vector<float> row(t->ne[0]);
        for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
            for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                    ggml_get_type_traits(t->type)->to_float(
                        (const char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], row.data(), t->ne[0]);
                    for (float x : row) out.push_back(x);
                }
        return out;
    }
    for_each(t, [&](int64_t a, int64_t b, int64_t c, int64_t d) { out.push_back(get(t, a, b, c, d)); });
    return out;
}

inline void fill_random(ggml_tensor * t, uint32_t seed, double lo = -1.0, double hi = 1.0) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    for_each(t, [&](int64_t a, int64_t b, int64_t c, int64_t e) { set(t, a, b, c, e, d(rng)); });
}

// How an input tensor of a given logical shape is laid out in memory.
enum class layout { contiguous, transposed, permuted, sliced };
inline const char * layout_name(layout l) {
    switch (l) {
        case layout::contiguous: return "contiguous";
        case layout::transposed: return "transposed";
        case layout::permuted:   return "permuted";
        case layout::sliced:     return "sliced";
    }
    return "?";
}
inline const layout k_layouts[] = { layout::contiguous, layout::transposed, layout::permuted, layout::sliced };

inline ggml_tensor * new_input(ggml_context * ctx, ggml_type type, const int64_t ne[4], layout l) {
    switch (l) {
        case layout::contiguous: return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
        case layout::transposed: {
            ggml_tensor * base = ggml_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3]);
            return ggml_transpose(ctx, base);
        }
        case layout::permuted: {
            ggml_tensor * base = ggml_new_tensor_4d(ctx, type, ne[0], ne[2], ne[1], ne[3]);
            return ggml_permute(ctx, base, 0, 2, 1, 3);
        }
        case layout::sliced: {
            ggml_tensor * base = ggml_new_tensor_4d(ctx, type, ne[0] + 3, ne[1] + 1, ne[2], ne[3]);
            return ggml_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], base->nb[1], base->nb[2], base->nb[3],
                                base->nb[1] + ggml_type_size(type));
        }
    }
    return nullptr;
}

inline std::string shape_str(const ggml_tensor * t) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "[%lld,%lld,%lld,%lld] %s", (long long) t->ne[0], (long long) t->ne[1],
                  (long long) t->ne[2], (long long) t->ne[3], ggml_type_name(t->type));
    return buf;
}

// |got - want| <= atol + rtol*|want| everywhere (NaN fails); reports the first offender.
inline ::testing::AssertionResult close_to(const ggml_tensor * out, const ref_t & want, double atol, double rtol) {
    const ref_t got = values(out);
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure() << "size " << got.size() << " vs reference " << want.size();
    }
    for (size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(got[i] - want[i]);
        const bool both_inf = std::isinf(got[i]) && std::isinf(want[i]) && (got[i] > 0) == (want[i] > 0);
        if (!both_inf && !(err <= atol + rtol * std::fabs(want[i]))) {
            return ::testing::AssertionFailure() << shape_str(out) << " element " << i << ": got " << got[i]
                                                 << ", want " << want[i];
        }
    }
    return ::testing::AssertionSuccess();
}

// NaN in float outputs, -1 in integer ones (no kernel here produces either on purpose)
inline void poison(ggml_tensor * t) {
    if (t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_BF16) {
        for_each(t, [&](int64_t a, int64_t b, int64_t c, int64_t d) { set(t, a, b, c, d, NAN); });
    } else {
        std::memset(t->data, 0xff, ggml_nbytes(t));
    }
}

class Ops : public ::testing::Test {
protected:
    ggml_context * ctx = nullptr;
    ggml_backend_t backend = nullptr;

    void SetUp() override {
        ggml_init_params ip = { size_t(192) << 20, nullptr, false };
        ctx = ggml_init(ip);
        ASSERT_NE(ctx, nullptr);
        backend = ggml_backend_cpu_init();
    }
    void TearDown() override {
        ggml_cpu_set_isa(ggml_cpu_detected_isa());
        ggml_backend_free(backend);
        ggml_free(ctx);
    }

    void compute(ggml_tensor * out, int nth) {
        ggml_cgraph * g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, out);
        compute_graph(g, nth);
    }
    void compute_graph(ggml_cgraph * g, int nth) {
        ggml_backend_cpu_set_n_threads(backend, nth);
        ASSERT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_SUCCESS);
    }

    // Computes out under every (ISA level, thread count) and runs check each time; reset (if
    // given) restores inputs that an in-place op overwrote.
    void each_config(ggml_tensor * out, const std::function<void(const std::string &)> & check,
                     const std::function<void()> & reset = nullptr) {
        // one graph for every configuration: the context's memory does not grow with the number
        // of ISA levels (arm64 has four)
        ggml_cgraph * g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, out);
        for (ggml_cpu_isa isa : isas_here()) {
            for (int nth : { 1, 2 }) {
                if (reset) reset();
                ggml_cpu_set_isa(isa);
                // poison the output so a kernel that skips rows cannot pass on stale results
                // (outputs that are views of another tensor are reset by the test itself)
                if (!out->view_src) poison(out);
                compute_graph(g, nth);
                const std::string where = std::string(ggml_cpu_isa_name(isa)) + ", " + std::to_string(nth) + " thread(s)";
                SCOPED_TRACE(where);
                check(where);
            }
        }
    }
};

} // namespace ops_testing
