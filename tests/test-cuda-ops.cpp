// Every CUDA kernel against the CPU backend, on random data of awkward shapes (odd sizes,
// broadcasts, permuted and strided views, partial rotations, masked rows). Each case builds the
// same graph twice, runs it on the CPU and on CUDA0 with the same inputs, and compares the
// outputs by normalised mean squared error (exactly for indices).
//
// Needs a GPU: on a machine without one every test is reported as skipped (not run) with the
// reason, never as passed. CTest label: cuda.
#include "testing.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "ggml.h"
#include "cuda/expert-plan.h"
#include "quants/quants-blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

// How a case fills its inputs: floats (converted or quantized to the tensor's type) or indices.
// Returning false leaves the default: uniform random floats in [-1, 1), zero indices.
using fill_floats_fn = std::function<bool(const ggml_tensor *, std::vector<float> &)>;
using fill_ints_fn = std::function<bool(const ggml_tensor *, std::vector<int64_t> &)>;

struct op_case {
    std::string name;
    std::function<ggml_tensor *(ggml_context *)> build;   // makes the inputs and returns the output
    double max_nmse = 1e-7;
    fill_floats_fn fill_floats = nullptr;
    fill_ints_fn fill_ints = nullptr;
};

bool is_leaf(const ggml_tensor * t) { return t->op == GGML_OP_NONE && t->view_src == nullptr; }

// The bytes of every leaf, in creation order (the same order on both backends).
std::vector<std::vector<uint8_t>> make_inputs(ggml_context * ctx, const op_case & c) {
    std::vector<std::vector<uint8_t>> all;
    uint32_t seed = 17;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (!is_leaf(t)) continue;
        const int64_t n = ggml_nelements(t);
        std::vector<uint8_t> bytes(ggml_nbytes(t));
        if (t->type == GGML_TYPE_I32 || t->type == GGML_TYPE_I64) {
            std::vector<int64_t> v(n, 0);
            if (c.fill_ints) c.fill_ints(t, v);
            for (int64_t i = 0; i < n; ++i) {
                if (t->type == GGML_TYPE_I32) ((int32_t *) bytes.data())[i] = (int32_t) v[i];
                else ((int64_t *) bytes.data())[i] = v[i];
            }
        } else {
            std::vector<float> v;
            if (!c.fill_floats || !c.fill_floats(t, v)) v = kiln_test::random_floats(n, seed++);
            switch (t->type) {
                case GGML_TYPE_F32: std::memcpy(bytes.data(), v.data(), n * sizeof(float)); break;
                case GGML_TYPE_F16: ggml_fp32_to_fp16_row(v.data(), (ggml_fp16_t *) bytes.data(), n); break;
                case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(v.data(), (ggml_bf16_t *) bytes.data(), n); break;
                default: {
                    // types that require an importance matrix get a uniform one
                    const std::vector<float> im(ggml_quantize_requires_imatrix(t->type) ? t->ne[0] : 0, 1.0f);
                    EXPECT_GT(ggml_quantize_chunk(t->type, v.data(), bytes.data(), 0, n / t->ne[0], t->ne[0], im.empty() ? nullptr : im.data()),
                              0u);
                    break;
                }
            }
        }
        all.push_back(std::move(bytes));
    }
    return all;
}

std::vector<double> as_doubles(const ggml_tensor * out, const std::vector<uint8_t> & bytes) {
    const int64_t n = ggml_nelements(out);
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) {
        switch (out->type) {
            case GGML_TYPE_F32: v[i] = ((const float *) bytes.data())[i]; break;
            case GGML_TYPE_F16: v[i] = ggml_fp16_to_fp32(((const ggml_fp16_t *) bytes.data())[i]); break;
            case GGML_TYPE_BF16: v[i] = ggml_bf16_to_fp32(((const ggml_bf16_t *) bytes.data())[i]); break;
            case GGML_TYPE_I32: v[i] = ((const int32_t *) bytes.data())[i]; break;
            default: ADD_FAILURE() << "output type " << ggml_type_name(out->type); return v;
        }
    }
    return v;
}

// Quantized outputs (a q8_0 copy) are compared after decoding.
std::vector<double> output_values(const ggml_tensor * out, const std::vector<uint8_t> & bytes) {
    if (!ggml_is_quantized(out->type)) return as_doubles(out, bytes);
    std::vector<float> f(ggml_nelements(out));
    ggml_get_type_traits(out->type)->to_float(bytes.data(), f.data(), (int64_t) f.size());
    return std::vector<double>(f.begin(), f.end());
}

std::vector<uint8_t> run_cpu(const op_case & c, const std::vector<std::vector<uint8_t>> * inputs,
                             std::vector<std::vector<uint8_t>> * made, ggml_type & out_type) {
    ggml_context * ctx = ggml_init({ size_t(64) << 20, nullptr, false });
    ggml_tensor * out = c.build(ctx);
    if (made) *made = make_inputs(ctx, c);
    size_t k = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (is_leaf(t)) std::memcpy(t->data, (inputs ? *inputs : *made)[k++].data(), ggml_nbytes(t));
    }
    ggml_cgraph * g = ggml_new_graph_custom(ctx, 4096, false);
    ggml_build_forward_expand(g, out);
    EXPECT_EQ(ggml_graph_compute_cpu(g, 2), GGML_STATUS_SUCCESS);
    std::vector<uint8_t> result(ggml_nbytes(out));
    std::memcpy(result.data(), out->data, result.size());
    out_type = out->type;
    ggml_free(ctx);
    return result;
}

std::vector<uint8_t> run_cuda(ggml_backend_t be, const op_case & c, const std::vector<std::vector<uint8_t>> & inputs) {
    ggml_context * ctx = ggml_init({ size_t(64) << 20, nullptr, true });
    ggml_tensor * out = c.build(ctx);
    ggml_cgraph * g = ggml_new_graph_custom(ctx, 4096, false);
    ggml_build_forward_expand(g, out);
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        ggml_tensor * n = ggml_graph_node(g, i);
        EXPECT_TRUE(ggml_backend_supports_op(be, n)) << c.name << ": CUDA does not take " << ggml_op_desc(n) << " ("
                                                     << n->name << ")";
    }
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_get_default_buffer_type(be));
    EXPECT_NE(buf, nullptr);
    std::vector<uint8_t> result;
    if (buf) {
        size_t k = 0;
        for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
            if (is_leaf(t)) ggml_backend_tensor_set(t, inputs[k++].data(), 0, ggml_nbytes(t));
        }
        EXPECT_EQ(ggml_backend_graph_compute(be, g), GGML_STATUS_SUCCESS) << c.name;
        result.resize(ggml_nbytes(out));
        ggml_backend_tensor_get(out, result.data(), 0, result.size());
        ggml_backend_buffer_free(buf);
    }
    ggml_free(ctx);
    return result;
}

class CudaOps : public ::testing::Test {
protected:
    static ggml_backend_t be;
    static void SetUpTestSuite() {
        if (ggml_backend_cuda_get_device_count() > 0) be = ggml_backend_cuda_init(0);
    }
    static void TearDownTestSuite() {
        ggml_backend_free(be);
        be = nullptr;
    }
    void SetUp() override {
        if (ggml_backend_cuda_get_device_count() == 0) {
            GTEST_SKIP() << (ggml_cuda_compiled() ? "no usable CUDA device on this machine (see the log line above)"
                                                  : "this build has no CUDA backend (KILN_CUDA=OFF)");
        }
        ASSERT_NE(be, nullptr);
    }

    void check(const op_case & c) {
        SCOPED_TRACE(c.name);
        std::vector<std::vector<uint8_t>> inputs;
        ggml_type out_type;
        const std::vector<uint8_t> want_bytes = run_cpu(c, nullptr, &inputs, out_type);
        const std::vector<uint8_t> got_bytes = run_cuda(be, c, inputs);
        ASSERT_EQ(want_bytes.size(), got_bytes.size());
        ggml_context * ctx = ggml_init({ size_t(1) << 20, nullptr, true });
        ggml_tensor * out = c.build(ctx);   // for the output's shape only
        const std::vector<double> want = output_values(out, want_bytes);
        const std::vector<double> got = output_values(out, got_bytes);
        ggml_free(ctx);
        double err = 0.0, ref = 0.0;
        int64_t mismatched_nan = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            if (std::isnan(want[i]) || std::isnan(got[i])) {
                mismatched_nan += std::isnan(want[i]) != std::isnan(got[i]);
                continue;
            }
            if (std::isinf(want[i]) || std::isinf(got[i])) {
                mismatched_nan += want[i] != got[i];
                continue;
            }
            err += (want[i] - got[i]) * (want[i] - got[i]);
            ref += want[i] * want[i];
        }
        EXPECT_EQ(mismatched_nan, 0) << c.name << ": non-finite values differ";
        const double nmse = ref > 0.0 ? err / ref : err;
        EXPECT_LE(nmse, c.max_nmse) << c.name << ": normalised squared error " << nmse;
    }
};
ggml_backend_t CudaOps::be = nullptr;

// ---- element-wise

TEST_F(CudaOps, BinaryOpsBroadcastOverViews) {
    using mk = ggml_tensor * (*) (ggml_context *, ggml_tensor *, ggml_tensor *);
    const std::pair<const char *, mk> ops[] = { { "add", ggml_add }, { "sub", ggml_sub }, { "mul", ggml_mul }, { "div", ggml_div } };
    for (const auto & [name, fn] : ops) {
        check({ std::string(name) + " broadcast", [fn](ggml_context * ctx) {
                   ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 13, 5, 3, 2);
                   ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 13, 1, 3, 1);
                   return fn(ctx, a, b);
               } });
        check({ std::string(name) + " row vector, permuted a", [fn](ggml_context * ctx) {
                   ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 7, 11, 3);
                   ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 11);
                   return fn(ctx, ggml_permute(ctx, a, 1, 0, 2, 3), b);
               } });
    }
    check({ "add f16 + f32", [](ggml_context * ctx) {
               ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 33, 4);
               ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 33, 4);
               return ggml_add(ctx, a, b);
           }, 1e-6 });
}

TEST_F(CudaOps, UnaryOpsAndScale) {
    const ggml_unary_op ops[] = { GGML_UNARY_OP_SILU, GGML_UNARY_OP_GELU, GGML_UNARY_OP_SIGMOID, GGML_UNARY_OP_SOFTPLUS,
                                  GGML_UNARY_OP_RELU, GGML_UNARY_OP_TANH, GGML_UNARY_OP_NEG, GGML_UNARY_OP_EXP };
    const auto wide = [](const ggml_tensor * t, std::vector<float> & v) {
        v = kiln_test::random_floats(ggml_nelements(t), 3, -8.0f, 8.0f);
        return true;
    };
    for (ggml_unary_op op : ops) {
        check({ ggml_unary_op_name(op), [op](ggml_context * ctx) {
                   ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 37, 9, 2);
                   return ggml_unary(ctx, ggml_view_3d(ctx, a, 30, 9, 2, a->nb[1], a->nb[2], 4 * sizeof(float)), op);
               }, 1e-8, wide });   // the CPU's SIMD exp/tanh are approximations
    }
    check({ "scale_bias", [](ggml_context * ctx) { return ggml_scale_bias(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 41, 3), 0.7f, -0.2f); } });
    check({ "clamp", [](ggml_context * ctx) { return ggml_clamp(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 41, 3), -0.3f, 0.5f); } });
    check({ "sqrt(sqr)", [](ggml_context * ctx) { return ggml_sqrt(ctx, ggml_sqr(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 41, 3))); } });
}

TEST_F(CudaOps, GatedUnits) {
    for (ggml_glu_op op : { GGML_GLU_OP_SWIGLU, GGML_GLU_OP_GEGLU }) {
        check({ op == GGML_GLU_OP_SWIGLU ? "swiglu" : "geglu", [op](ggml_context * ctx) {
                   ggml_tensor * gu = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2 * 45, 7);
                   // gate and up as the two halves of one row, as fused gate/up weights give them
                   ggml_tensor * g = ggml_view_2d(ctx, gu, 45, 7, gu->nb[1], 0);
                   ggml_tensor * u = ggml_view_2d(ctx, gu, 45, 7, gu->nb[1], 45 * sizeof(float));
                   return ggml_glu_split(ctx, g, u, op);
               }, 1e-8 });
    }
}

TEST_F(CudaOps, RowReductions) {
    check({ "sum_rows", [](ggml_context * ctx) { return ggml_sum_rows(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 301, 5, 3)); }, 1e-10 });
    check({ "mean", [](ggml_context * ctx) { return ggml_mean(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 301, 5, 3)); }, 1e-10 });
    check({ "argmax", [](ggml_context * ctx) { return ggml_argmax(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1000, 7)); }, 0.0 });
}

// ---- norms, softmax, rope

TEST_F(CudaOps, Norms) {
    using mk = ggml_tensor * (*) (ggml_context *, ggml_tensor *, float);
    const std::pair<const char *, mk> ops[] = { { "rms_norm", ggml_rms_norm }, { "norm", ggml_norm }, { "l2_norm", ggml_l2_norm } };
    for (const auto & [name, fn] : ops) {
        check({ name, [fn](ggml_context * ctx) { return fn(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4099, 3, 2), 1e-6f); }, 1e-10 });
        check({ std::string(name) + " on a transposed view", [fn](ggml_context * ctx) {
                   return fn(ctx, ggml_transpose(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 67)), 1e-5f);
               }, 1e-10 });
    }
}

// A causal mask with padding rows: -inf above the diagonal of an n_kv x n_q block.
fill_floats_fn causal_mask(int64_t n_past) {
    return [n_past](const ggml_tensor * t, std::vector<float> & v) {
        if (std::string(t->name) != "mask") return false;
        v.assign(ggml_nelements(t), 0.0f);
        for (int64_t r = 0; r < t->ne[1] * t->ne[2] * t->ne[3]; ++r) {
            for (int64_t i = 0; i < t->ne[0]; ++i) {
                v[r * t->ne[0] + i] = i > n_past + r % t->ne[1] ? -INFINITY : 0.1f * (float) ((i * 7 + r) % 5);
            }
        }
        if (t->ne[1] > 2) {
            for (int64_t i = 0; i < t->ne[0]; ++i) v[2 * t->ne[0] + i] = -INFINITY;   // a fully masked row
        }
        return true;
    };
}

TEST_F(CudaOps, SoftmaxWithMaskAlibiAndSinks) {
    for (ggml_type mt : { GGML_TYPE_F32, GGML_TYPE_F16 }) {
        for (float max_bias : { 0.0f, 8.0f }) {
            for (bool sinks : { false, true }) {
                const std::string name = std::string("soft_max mask ") + ggml_type_name(mt) + (max_bias > 0 ? " alibi" : "") +
                                         (sinks ? " sinks" : "");
                check({ name, [=](ggml_context * ctx) {
                           ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 77, 6, 5);
                           ggml_tensor * m = ggml_new_tensor_2d(ctx, mt, 77, 8);
                           ggml_set_name(m, "mask");
                           ggml_tensor * r = ggml_soft_max_ext(ctx, a, m, 0.37f, max_bias);
                           if (sinks) ggml_soft_max_add_sinks(r, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 5));
                           return r;
                       }, 1e-8, causal_mask(70) });
            }
        }
    }
    check({ "soft_max plain, long rows", [](ggml_context * ctx) { return ggml_soft_max(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5003, 3)); }, 1e-8 });
}

fill_ints_fn positions(int64_t base) {
    return [base](const ggml_tensor *, std::vector<int64_t> & v) {
        for (size_t i = 0; i < v.size(); ++i) v[i] = base + (int64_t) (i * 37 % 101);
        return true;
    };
}

TEST_F(CudaOps, Rope) {
    struct variant { const char * name; int mode; int n_dims; float freq_scale, ext_factor; bool ff; };
    const variant vs[] = {
        { "normal", GGML_ROPE_TYPE_NORMAL, 64, 1.0f, 0.0f, false },
        { "neox", GGML_ROPE_TYPE_NEOX, 64, 1.0f, 0.0f, false },
        { "partial normal", GGML_ROPE_TYPE_NORMAL, 32, 1.0f, 0.0f, false },
        { "partial neox", GGML_ROPE_TYPE_NEOX, 24, 1.0f, 0.0f, false },
        { "yarn neox", GGML_ROPE_TYPE_NEOX, 64, 0.25f, 1.0f, false },
        { "yarn normal, freq factors", GGML_ROPE_TYPE_NORMAL, 64, 0.125f, 1.0f, true },
    };
    for (const variant & v : vs) {
        check({ std::string("rope ") + v.name, [v](ggml_context * ctx) {
                   ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 64, 5, 9);
                   ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 9);
                   ggml_tensor * ff = v.ff ? ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 32) : nullptr;
                   return ggml_rope_ext(ctx, a, pos, ff, v.n_dims, v.mode, 4096, 10000.0f, v.freq_scale, v.ext_factor, 1.0f,
                                        32.0f, 1.0f);
               }, 1e-10, [](const ggml_tensor * t, std::vector<float> & f) {
                   if (t->ne[0] != 32 || t->ne[1] != 1) return false;   // frequency factors: positive
                   f = kiln_test::random_floats(32, 9, 1.0f, 4.0f);
                   return true;
               }, positions(30000) });
    }
    check({ "rope mrope", [](ggml_context * ctx) {
               ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 64, 4, 7);
               ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 4 * 7);
               const int sections[4] = { 8, 12, 12, 0 };
               return ggml_rope_multi(ctx, a, pos, nullptr, 64, sections, GGML_ROPE_TYPE_MROPE, 4096, 1e6f, 1.0f, 0.0f, 1.0f,
                                      32.0f, 1.0f);
           }, 1e-10, nullptr, positions(5) });
}

// ---- copies, rows, concat

TEST_F(CudaOps, CopiesConvertTypes) {
    const std::pair<ggml_type, ggml_type> pairs[] = {
        { GGML_TYPE_F32, GGML_TYPE_F16 }, { GGML_TYPE_F32, GGML_TYPE_BF16 }, { GGML_TYPE_F16, GGML_TYPE_F32 },
        { GGML_TYPE_BF16, GGML_TYPE_F32 }, { GGML_TYPE_F32, GGML_TYPE_Q8_0 }, { GGML_TYPE_Q8_0, GGML_TYPE_F32 },
        { GGML_TYPE_Q4_K, GGML_TYPE_F32 },   { GGML_TYPE_F32, GGML_TYPE_Q4_0 },  { GGML_TYPE_F32, GGML_TYPE_Q4_1 },
        { GGML_TYPE_F32, GGML_TYPE_Q5_0 },   { GGML_TYPE_F32, GGML_TYPE_Q5_1 },  { GGML_TYPE_F32, GGML_TYPE_Q6_0 },
        { GGML_TYPE_F32, GGML_TYPE_IQ4_NL }, { GGML_TYPE_F32, GGML_TYPE_Q8_KV }, { GGML_TYPE_F16, GGML_TYPE_Q4_0 },
    };
    for (const auto & [from, to] : pairs) {
        check({ std::string("cpy ") + ggml_type_name(from) + " -> " + ggml_type_name(to), [from, to](ggml_context * ctx) {
                   ggml_tensor * a = ggml_new_tensor_3d(ctx, from, 256, 3, 5);
                   return ggml_cpy(ctx, a, ggml_new_tensor_3d(ctx, to, 256, 3, 5));
               }, 1e-12 });
    }
    check({ "cont of a permuted view", [](ggml_context * ctx) {
               return ggml_cont(ctx, ggml_permute(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 7, 5, 3), 2, 0, 1, 3));
           }, 0.0 });
    check({ "cpy f32 view -> f16 reshaped", [](ggml_context * ctx) {
               ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 12, 10);
               return ggml_cpy(ctx, ggml_transpose(ctx, a), ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 5, 2, 12));
           }, 0.0 });
}

fill_ints_fn row_ids(int64_t n_rows) {
    return [n_rows](const ggml_tensor *, std::vector<int64_t> & v) {
        for (size_t i = 0; i < v.size(); ++i) v[i] = (int64_t) ((i * 7 + 3) % n_rows);
        return true;
    };
}

// Every weight type the GPU decodes (KILN_BLOCK_TYPES, quants-blocks.h) after the float types: a
// type added to the list is tested here without being named.
std::vector<ggml_type> gpu_weight_types() {
    std::vector<ggml_type> v = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };
#define KILN_GPU_TYPE(T, B, QK, META, FN) v.push_back(T);
    KILN_BLOCK_TYPES(KILN_GPU_TYPE)
#undef KILN_GPU_TYPE
    return v;
}

TEST_F(CudaOps, GetRowsDecodesEveryWeightType) {
    const std::vector<ggml_type> types = gpu_weight_types();
    for (ggml_type t : types) {
        check({ std::string("get_rows ") + ggml_type_name(t), [t](ggml_context * ctx) {
                   ggml_tensor * a = ggml_new_tensor_3d(ctx, t, 512, 19, 2);
                   ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 6, 2);
                   return ggml_get_rows(ctx, a, ids);
               }, 1e-12, nullptr, row_ids(19) });   // device decoders may fuse multiply-adds
    }
}

// Every row-interleaved layout the GPU decodes (KILN_INTERLEAVED_TYPES, quants-blocks-interleaved.h):
// their tensors hold whole groups of rows (R up to 16), so the shapes differ from the plain types'.
std::vector<ggml_type> gpu_interleaved_types() {
    std::vector<ggml_type> v;
#define KILN_GPU_WOVEN(T, B, R, QK, META, FN) v.push_back(T);
    KILN_INTERLEAVED_TYPES(KILN_GPU_WOVEN)
#undef KILN_GPU_WOVEN
    return v;
}

TEST_F(CudaOps, GetRowsDecodesEveryInterleavedType) {
    for (ggml_type t : gpu_interleaved_types()) {
        check({ std::string("get_rows ") + ggml_type_name(t), [t](ggml_context * ctx) {
                   ggml_tensor * a = ggml_new_tensor_3d(ctx, t, 512, 48, 2);   // three groups of 16
                   ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 6, 2);
                   return ggml_get_rows(ctx, a, ids);
               }, 1e-12, nullptr, row_ids(48) });
    }
}

// Every KV cache type the GPU reads and writes: the float types, the 32-value block types of
// KILN_KV_BLOCK_TYPES (quants-blocks.h) and q8_KV (a scale per row).
std::vector<ggml_type> gpu_kv_cache_types() {
    std::vector<ggml_type> v = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };
#define KILN_GPU_KV_TYPE(T, B, FN) v.push_back(T);
    KILN_KV_BLOCK_TYPES(KILN_GPU_KV_TYPE)
#undef KILN_GPU_KV_TYPE
    v.push_back(GGML_TYPE_Q8_KV);
    return v;
}

// The GPU's encoders round as the CPU's quantizers do (tests/test-quants-blocks.cpp checks the
// arithmetic on the host): the decoded caches must be equal, not close (error 0).
TEST_F(CudaOps, SetRowsWritesTheCache) {
    for (ggml_type t : gpu_kv_cache_types()) {
        check({ std::string("set_rows ") + ggml_type_name(t), [t](ggml_context * ctx) {
                   ggml_tensor * cache = ggml_new_tensor_3d(ctx, t, 96, 23, 2);
                   ggml_tensor * rows = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 96, 5, 2);
                   ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 5);
                   return ggml_set_rows(ctx, cache, rows, ids);
               }, 0.0, nullptr, row_ids(23) });
        // as build_kv_store writes a cache of per-head rows: [head_dim, n_head, cells] seen as
        // [head_dim, cells, n_head], the token rows permuted to match (strided source and dest)
        check({ std::string("set_rows per-head rows ") + ggml_type_name(t), [t](ggml_context * ctx) {
                   const int64_t hd = 128, nh = 3, cells = 19, nt = 4;
                   ggml_tensor * cache = ggml_new_tensor_3d(ctx, t, hd, nh, cells);
                   ggml_tensor * rows = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hd * nh, nt);
                   ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, nt);
                   ggml_tensor * dst = ggml_view_3d(ctx, cache, hd, cells, nh, cache->nb[2], cache->nb[1], 0);
                   ggml_tensor * src = ggml_permute(ctx, ggml_reshape_3d(ctx, rows, hd, nh, nt), 0, 2, 1, 3);
                   return ggml_set_rows(ctx, dst, src, ids);
               }, 0.0, nullptr, row_ids(19) });
    }
}

TEST_F(CudaOps, Concat) {
    for (int dim = 0; dim < 4; ++dim) {
        check({ "concat dim " + std::to_string(dim), [dim](ggml_context * ctx) {
                   int64_t ne[4] = { 5, 4, 3, 2 };
                   ggml_tensor * a = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
                   ne[dim] = 3;
                   ggml_tensor * b = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
                   return ggml_concat(ctx, a, b, dim);
               }, 0.0 });
    }
}

TEST_F(CudaOps, SortAndTopK) {
    // ties included: values drawn from a small set
    const auto ties = [](const ggml_tensor * t, std::vector<float> & v) {
        v.resize(ggml_nelements(t));
        for (size_t i = 0; i < v.size(); ++i) v[i] = (float) ((i * 2654435761u) % 13);
        return true;
    };
    check({ "argsort asc", [](ggml_context * ctx) { return ggml_argsort(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 129, 6), GGML_SORT_ORDER_ASC); }, 0.0, ties });
    check({ "argsort desc", [](ggml_context * ctx) { return ggml_argsort(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 6), GGML_SORT_ORDER_DESC); }, 0.0 });
    check({ "top_k", [](ggml_context * ctx) { return ggml_top_k(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 160, 9), 8); }, 0.0, ties });
}

// ---- matrix products

// The CPU quantizes activations for its integer kernels; the GPU keeps them f32 (one column at a
// time) or f16 (cuBLAS): both stay within this of each other.
double matmul_tolerance(ggml_type t) { return t == GGML_TYPE_F32 ? 1e-9 : 5e-4; }

TEST_F(CudaOps, MulMatEveryTypeBothPaths) {
    for (ggml_type t : gpu_weight_types()) {
        for (int64_t n : { 1, 3, 16, 33 }) {   // 1 and 3: from the blocks; 16 and 33: cuBLAS
            check({ std::string("mul_mat ") + ggml_type_name(t) + " N=" + std::to_string(n), [t, n](ggml_context * ctx) {
                       ggml_tensor * a = ggml_new_tensor_2d(ctx, t, 768, 67);
                       ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 768, n);
                       return ggml_mul_mat(ctx, a, b);
                   }, matmul_tolerance(t) });
        }
    }
}

TEST_F(CudaOps, MulMatEveryInterleavedType) {
    for (ggml_type t : gpu_interleaved_types()) {
        for (int64_t n : { 1, 3, 16, 33 }) {
            check({ std::string("mul_mat ") + ggml_type_name(t) + " N=" + std::to_string(n), [t, n](ggml_context * ctx) {
                       ggml_tensor * a = ggml_new_tensor_2d(ctx, t, 768, 64);
                       ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 768, n);
                       return ggml_mul_mat(ctx, a, b);
                   }, matmul_tolerance(t) });
        }
    }
}

TEST_F(CudaOps, MulMatBroadcastAndViews) {
    for (int64_t n : { 2, 20 }) {
        check({ "mul_mat f16 broadcast, permuted b N=" + std::to_string(n), [n](ggml_context * ctx) {
                   ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, 64, 37, 2, 1);   // like a KV cache, 2 kv heads
                   ggml_tensor * q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 64, 6, n, 1);    // [D, heads, tokens]
                   return ggml_mul_mat(ctx, a, ggml_permute(ctx, q, 0, 2, 1, 3));            // -> [D, tokens, heads]
               }, 5e-4 });
        check({ "mul_mat q4_K, strided b N=" + std::to_string(n), [n](ggml_context * ctx) {
                   ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_K, 256, 45);
                   ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 300, n);
                   return ggml_mul_mat(ctx, a, ggml_view_2d(ctx, b, 256, n, b->nb[1], 8 * sizeof(float)));
               }, 5e-4 });
    }
}

fill_ints_fn expert_ids(int64_t n_expert) {
    return [n_expert](const ggml_tensor * t, std::vector<int64_t> & v) {
        // distinct experts per token, varying across tokens
        for (int64_t tok = 0; tok < t->ne[1]; ++tok) {
            for (int64_t s = 0; s < t->ne[0]; ++s) v[tok * t->ne[0] + s] = (tok * 3 + s * 2) % n_expert;
        }
        return true;
    };
}

TEST_F(CudaOps, MulMatIdAndFusedExperts) {
    // iq3_xxs (a lattice grid read per lane) and iq2_kt (the row factor of products) besides
    for (ggml_type t : { GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS,
                         GGML_TYPE_IQ4_KS, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ2_KT }) {
        for (int64_t n_b : { 1, 2 }) {
            check({ std::string("mul_mat_id ") + ggml_type_name(t) + " n_b=" + std::to_string(n_b), [t, n_b](ggml_context * ctx) {
                       ggml_tensor * as = ggml_new_tensor_3d(ctx, t, 512, 37, 6);
                       ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 512, n_b, 5);
                       ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 5);
                       return ggml_mul_mat_id(ctx, as, b, ids);
                   }, 5e-4, nullptr, expert_ids(6) });
        }
        for (ggml_glu_op op : { GGML_GLU_OP_SWIGLU, GGML_GLU_OP_GEGLU }) {
            check({ std::string("moe_up_gate ") + ggml_type_name(t), [t, op](ggml_context * ctx) {
                       ggml_tensor * up = ggml_new_tensor_3d(ctx, t, 512, 37, 6);
                       ggml_tensor * gate = ggml_new_tensor_3d(ctx, t, 512, 37, 6);
                       ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 512, 1, 5);
                       ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 3, 5);
                       return ggml_moe_up_gate(ctx, up, gate, b, ids, op);
                   }, 5e-4, nullptr, expert_ids(6) });
        }
    }
    // smart expert reduction's keep mask (-ser): dropped pairs give zero rows, as on the CPU; the
    // mask drops about half of the pairs, so a kernel that computed them anyway is far off
    auto half_dropped = [](const ggml_tensor * t, std::vector<float> & v) {
        if (t->type != GGML_TYPE_F32 || t->ne[0] != 3 || t->ne[1] != 5) return false;   // only the mask
        v.resize(15);
        for (int i = 0; i < 15; ++i) v[i] = (i * 7) % 3 == 0 ? 0.0f : 1.0f;
        return true;
    };
    for (bool fused : { false, true }) {
        check({ fused ? "moe_up_gate q4_K with a keep mask" : "mul_mat_id q4_K with a keep mask", [fused](ggml_context * ctx) {
                   ggml_tensor * up = ggml_new_tensor_3d(ctx, GGML_TYPE_Q4_K, 512, 37, 6);
                   ggml_tensor * gate = fused ? ggml_new_tensor_3d(ctx, GGML_TYPE_Q4_K, 512, 37, 6) : nullptr;
                   ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 512, 1, 5);
                   ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 3, 5);
                   ggml_tensor * keep = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 5);
                   ggml_tensor * out = fused ? ggml_moe_up_gate(ctx, up, gate, b, ids, GGML_GLU_OP_SWIGLU) : ggml_mul_mat_id(ctx, up, b, ids);
                   ggml_mul_mat_id_set_keep(out, keep);
                   return out;
               }, 5e-4, half_dropped, expert_ids(6) });
    }
}

// Prompt batches take the batched expert path (ggml/src/cuda/ops-experts.cu: grouped by expert,
// decoded to f16, one GEMM per expert). Routing with 1 to 5 pairs per expert and experts no
// token chose between them (every fourth), assigned slot by slot so a token's experts are
// distinct: expert e gets e % 5 + 1 pairs, none when e % 4 == 3; the last few get none either.
struct batched_routing {
    int64_t n_tokens, n_used, n_expert;
    std::vector<int32_t> ids;   // [n_used, n_tokens]
};

batched_routing route_batch(int64_t n_tokens, int64_t n_used) {
    batched_routing r{ n_tokens, n_used, 0, std::vector<int32_t>((size_t) (n_tokens * n_used)) };
    int64_t e = 0, left = 1;   // expert e takes `left` more pairs
    for (int64_t s = 0; s < n_used; ++s) {
        for (int64_t t = 0; t < n_tokens; ++t) {
            while (left == 0) {
                ++e;
                left = e % 4 == 3 ? 0 : e % 5 + 1;
            }
            r.ids[(size_t) (t * n_used + s)] = (int32_t) e;
            --left;
        }
    }
    r.n_expert = e + 3;   // two more no token chose
    return r;
}

fill_ints_fn routed_ids(const batched_routing & r) {
    return [r](const ggml_tensor * t, std::vector<int64_t> & v) {
        if (t->ne[0] != r.n_used || t->ne[1] != r.n_tokens) return false;
        for (size_t i = 0; i < r.ids.size(); ++i) v[i] = r.ids[i];
        return true;
    };
}

TEST_F(CudaOps, ExpertProductsBatchedByExpert) {
    for (int64_t n_tokens : { 8, 33, 100, 512 }) {
        const batched_routing r = route_batch(n_tokens, 2);
        // the shapes must reach the batched path, or this test checks the per-pair kernel again
        ASSERT_TRUE(expert_products_batched(r.n_tokens, r.n_used, r.n_expert)) << n_tokens;
        for (ggml_type t : { GGML_TYPE_F16, GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_IQ4_XS, GGML_TYPE_F32, GGML_TYPE_BF16,
                             GGML_TYPE_Q6_K }) {
            const std::string tag = std::string(ggml_type_name(t)) + " tokens=" + std::to_string(n_tokens);
            for (int64_t n_b : { int64_t(1), r.n_used }) {
                check({ "batched mul_mat_id " + tag + " n_b=" + std::to_string(n_b), [t, n_b, r](ggml_context * ctx) {
                           ggml_tensor * as = ggml_new_tensor_3d(ctx, t, 256, 37, r.n_expert);
                           ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 256, n_b, r.n_tokens);
                           ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, r.n_used, r.n_tokens);
                           return ggml_mul_mat_id(ctx, as, b, ids);
                       }, matmul_tolerance(t), nullptr, routed_ids(r) });
            }
            for (ggml_glu_op op : { GGML_GLU_OP_SWIGLU, GGML_GLU_OP_GEGLU }) {
                check({ std::string("batched moe_up_gate ") + (op == GGML_GLU_OP_SWIGLU ? "swiglu " : "geglu ") + tag,
                        [t, op, r](ggml_context * ctx) {
                            ggml_tensor * up = ggml_new_tensor_3d(ctx, t, 256, 37, r.n_expert);
                            ggml_tensor * gate = ggml_new_tensor_3d(ctx, t, 256, 37, r.n_expert);
                            ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 256, 1, r.n_tokens);
                            ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, r.n_used, r.n_tokens);
                            return ggml_moe_up_gate(ctx, up, gate, b, ids, op);
                        }, matmul_tolerance(t), nullptr, routed_ids(r) });
            }
        }
        // the keep mask (-ser) drops a third of the pairs: zero rows, as on the CPU
        const auto third_dropped = [r](const ggml_tensor * t, std::vector<float> & v) {
            if (t->type != GGML_TYPE_F32 || t->ne[0] != r.n_used || t->ne[1] != r.n_tokens) return false;   // only the mask
            v.resize((size_t) ggml_nelements(t));
            for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 1 ? 0.0f : 1.0f;
            return true;
        };
        for (bool fused : { false, true }) {
            check({ std::string(fused ? "batched moe_up_gate" : "batched mul_mat_id") + " q4_K keep mask tokens=" + std::to_string(n_tokens),
                    [fused, r](ggml_context * ctx) {
                        ggml_tensor * up = ggml_new_tensor_3d(ctx, GGML_TYPE_Q4_K, 256, 37, r.n_expert);
                        ggml_tensor * gate = fused ? ggml_new_tensor_3d(ctx, GGML_TYPE_Q4_K, 256, 37, r.n_expert) : nullptr;
                        ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 256, 1, r.n_tokens);
                        ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, r.n_used, r.n_tokens);
                        ggml_tensor * keep = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, r.n_used, r.n_tokens);
                        ggml_tensor * out = fused ? ggml_moe_up_gate(ctx, up, gate, b, ids, GGML_GLU_OP_SWIGLU) : ggml_mul_mat_id(ctx, up, b, ids);
                        ggml_mul_mat_id_set_keep(out, keep);
                        return out;
                    }, 5e-4, third_dropped, routed_ids(r) });
        }
    }
    // experts larger than ops-experts.cu's decode scratch (128 MiB of f16) holds four of: the
    // chosen experts (0, 1, 2, 4; 3 idle) are decoded three, then one, per launch
    check({ "batched mul_mat_id q4_0, experts decoded over two launches", [](ggml_context * ctx) {
               ggml_tensor * as = ggml_new_tensor_3d(ctx, GGML_TYPE_Q4_0, 4096, 4160, 5);
               ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4096, 1, 8);
               ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 8);
               return ggml_mul_mat_id(ctx, as, b, ids);
           }, 5e-4, nullptr, [](const ggml_tensor * t, std::vector<int64_t> & v) {
               const int64_t chosen[] = { 0, 1, 2, 4 };
               for (int64_t tok = 0; tok < t->ne[1]; ++tok) {
                   for (int64_t s = 0; s < 2; ++s) v[(size_t) (tok * 2 + s)] = chosen[(tok + s) % 4];
               }
               return true;
           } });
    // eight slots of a 100-token batch, one activation column per slot, strided view of b
    const batched_routing r = route_batch(100, 8);
    ASSERT_TRUE(expert_products_batched(r.n_tokens, r.n_used, r.n_expert));
    check({ "batched mul_mat_id q8_0 8 slots, b a view", [r](ggml_context * ctx) {
               ggml_tensor * as = ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 128, 45, r.n_expert);
               ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 160, r.n_used, r.n_tokens);
               ggml_tensor * bv = ggml_view_3d(ctx, b, 128, r.n_used, r.n_tokens, b->nb[1], b->nb[2], 16 * sizeof(float));
               ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, r.n_used, r.n_tokens);
               return ggml_mul_mat_id(ctx, as, bv, ids);
           }, 5e-4, nullptr, routed_ids(r) });
}

// An expert id out of range in a prompt batch: the batched path reads the ids on the host and
// fails the graph with a message (the CPU asserts), instead of reading outside the weights.
TEST_F(CudaOps, ExpertIdOutOfRangeFailsTheBatchedGraph) {
    batched_routing r = route_batch(40, 2);
    ASSERT_TRUE(expert_products_batched(r.n_tokens, r.n_used, r.n_expert));
    r.ids[2 * 17 + 1] = (int32_t) r.n_expert;   // slot 1 of token 17
    ggml_context * ctx = ggml_init({ size_t(1) << 20, nullptr, true });
    ggml_tensor * as = ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 64, 16, r.n_expert);
    ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 64, 1, r.n_tokens);
    ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, r.n_used, r.n_tokens);
    ggml_tensor * out = ggml_mul_mat_id(ctx, as, b, ids);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_get_default_buffer_type(be));
    ASSERT_NE(buf, nullptr);
    std::vector<uint8_t> zeros(std::max(ggml_nbytes(as), ggml_nbytes(b)), 0);
    ggml_backend_tensor_set(as, zeros.data(), 0, ggml_nbytes(as));
    ggml_backend_tensor_set(b, zeros.data(), 0, ggml_nbytes(b));
    ggml_backend_tensor_set(ids, r.ids.data(), 0, ggml_nbytes(ids));
    EXPECT_EQ(ggml_backend_graph_compute(be, g), GGML_STATUS_FAILED);
    // the backend still works afterwards
    r.ids[2 * 17 + 1] = 0;
    ggml_backend_tensor_set(ids, r.ids.data(), 0, ggml_nbytes(ids));
    EXPECT_EQ(ggml_backend_graph_compute(be, g), GGML_STATUS_SUCCESS);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

// ---- flash attention

TEST_F(CudaOps, FlashAttention) {
    struct shape { const char * name; int64_t D, Dv, n_head, n_head_kv, n_q, n_kv; ggml_type kv; float softcap, max_bias; bool sinks; };
    const shape shapes[] = {
        { "gqa f16", 64, 64, 8, 2, 3, 77, GGML_TYPE_F16, 0.0f, 0.0f, false },
        { "decode f16", 128, 128, 4, 4, 1, 300, GGML_TYPE_F16, 0.0f, 0.0f, false },
        { "q8_0 cache", 64, 64, 4, 1, 5, 96, GGML_TYPE_Q8_0, 0.0f, 0.0f, false },
        { "f32 cache, softcap", 80, 80, 2, 2, 4, 41, GGML_TYPE_F32, 30.0f, 0.0f, false },
        { "alibi and sinks", 64, 64, 6, 3, 4, 50, GGML_TYPE_F16, 0.0f, 8.0f, true },
        { "mla 576/512", 576, 512, 8, 1, 2, 40, GGML_TYPE_F16, 0.0f, 0.0f, false },
        { "bf16 cache", 64, 64, 4, 2, 3, 33, GGML_TYPE_BF16, 0.0f, 0.0f, false },
    };
    for (const shape & s : shapes) {
        check({ std::string("flash_attn ") + s.name, [s](ggml_context * ctx) {
                   ggml_tensor * q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.D, s.n_q, s.n_head, 1);
                   ggml_tensor * k = ggml_new_tensor_4d(ctx, s.kv, s.D, s.n_kv, s.n_head_kv, 1);
                   ggml_tensor * v = ggml_new_tensor_4d(ctx, s.kv, s.Dv, s.n_kv, s.n_head_kv, 1);
                   ggml_tensor * m = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, s.n_kv, GGML_KQ_MASK_PAD);
                   ggml_set_name(m, "mask");
                   ggml_tensor * r = ggml_flash_attn_ext(ctx, q, k, v, m, 1.0f / std::sqrt((float) s.D), s.max_bias, s.softcap);
                   if (s.sinks) ggml_flash_attn_ext_add_sinks(r, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, s.n_head));
                   return r;
               }, 1e-5, causal_mask(s.n_kv - s.n_q) });
    }
}



// Each KV cache type the GPU reads, over the shapes that matter for its decoding: query heads per
// KV head (GQA) 1, 4 and 8, 33 and 333 cells (a partial tile of keys; many tiles), head sizes 64,
// 128 and MLA's 576/512 (V then a view of the first 512 values of each K row, as the MLA graphs
// make it; q8_KV, which a latent cache refuses, gets V rows of its own). Prompt-like (5 queries)
// and decode (1) batches.
// The CPU may compute quantized caches through bf16 tiles, hence the looser bound than exact
// float work; a wrong decode is far above it.
TEST_F(CudaOps, FlashAttentionEveryCacheType) {
    struct dims { int64_t D, Dv; };
    for (ggml_type t : gpu_kv_cache_types()) {
        for (const dims dd : { dims{ 64, 64 }, dims{ 128, 128 }, dims{ 576, 512 } }) {
            for (int64_t gqa : { 1, 4, 8 }) {
                for (int64_t n_kv : { 33, 333 }) {
                    const bool mla = dd.D == 576;
                    const int64_t n_head_kv = mla ? 1 : 2, n_head = gqa * n_head_kv;
                    const int64_t n_q = n_kv == 33 ? 5 : 1;
                    const std::string name = std::string("flash_attn ") + ggml_type_name(t) + " D " + std::to_string(dd.D) +
                                             " gqa " + std::to_string(gqa) + " n_kv " + std::to_string(n_kv);
                    check({ name, [=](ggml_context * ctx) {
                               ggml_tensor * q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, dd.D, n_q, n_head, 1);
                               ggml_tensor * k = ggml_new_tensor_4d(ctx, t, dd.D, n_kv, n_head_kv, 1);
                               ggml_tensor * v = mla && t != GGML_TYPE_Q8_KV ? ggml_view_4d(ctx, k, dd.Dv, n_kv, n_head_kv, 1, k->nb[1], k->nb[2], k->nb[3], 0)
                                                     : ggml_new_tensor_4d(ctx, t, dd.Dv, n_kv, n_head_kv, 1);
                               ggml_tensor * m = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_kv, GGML_KQ_MASK_PAD);
                               ggml_set_name(m, "mask");
                               return ggml_flash_attn_ext(ctx, q, k, v, m, 1.0f / std::sqrt((float) dd.D), 0.0f, 0.0f);
                           }, ggml_is_quantized(t) ? 1e-4 : 1e-5, causal_mask(n_kv - n_q) });
                }
            }
        }
    }
}

// ---- recurrent layers

// Decays (g, log scale) at most 0 and beta in [0, 1), as the models make them; the rest uniform.
bool recurrent_floats(const ggml_tensor * t, std::vector<float> & v) {
    const std::string name = t->name;
    if (name != "g" && name != "beta") return false;
    v = kiln_test::random_floats(ggml_nelements(t), name == "g" ? 5 : 6, name == "g" ? -1.0f : 0.0f, name == "g" ? 0.0f : 1.0f);
    return true;
}

// The op twice on the same state rows (the second reads what the first wrote), with 7 tokens of
// three sequences interleaved (slots 2, 0, 2, 1, 0, 2, 2): the outputs depend on every state update.
TEST_F(CudaOps, RecurrentOpsUpdateTheirStateInPlace) {
    const fill_ints_fn slots = [](const ggml_tensor *, std::vector<int64_t> & v) {
        const int64_t order[7] = { 2, 0, 2, 1, 0, 2, 2 };
        for (size_t i = 0; i < v.size(); ++i) v[i] = order[i % 7];
        return true;
    };
    check({ "ssm_conv d_conv 4, 37 channels", [](ggml_context * ctx) {
               ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 37);
               ggml_tensor * state = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3 * 37, 3);
               ggml_tensor * out[2];
               for (ggml_tensor *& o : out) {
                   ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 37, 7);
                   ggml_tensor * s = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 7);
                   o = ggml_ssm_conv(ctx, x, w, state, s);
               }
               return ggml_concat(ctx, out[0], out[1], 1);
           }, 1e-10, nullptr, slots });
    for (int chunk : { 1, 4 }) {   // the CPU's recurrent and chunked forms against the GPU's recurrence
        check({ "gated_delta_net d_k 32, d_v 40, 2 key heads, 6 value heads, chunk " + std::to_string(chunk), [chunk](ggml_context * ctx) {
                   const int64_t d_k = 32, d_v = 40, n_kh = 2, n_vh = 6, n_tok = 7;
                   ggml_tensor * state = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d_k * d_v * n_vh, 3);
                   ggml_tensor * out[2];
                   for (ggml_tensor *& o : out) {
                       ggml_tensor * q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d_k, n_kh, n_tok);
                       ggml_tensor * k = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d_k, n_kh, n_tok);
                       ggml_tensor * v = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d_v, n_vh, n_tok);
                       ggml_tensor * g = ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_vh, n_tok), "g");
                       ggml_tensor * beta = ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_vh, n_tok), "beta");
                       ggml_tensor * s = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tok);
                       o = ggml_gated_delta_net(ctx, q, k, v, g, beta, state, s, 0.17f, chunk);
                   }
                   return ggml_concat(ctx, out[0], out[1], 2);
               }, 1e-9, recurrent_floats, slots });
    }
}

} // namespace
