// Checks and locks applied to a model's weights once they are in place. Each one turns a problem
// that would surface later (an assert in a matrix product at warm-up, NaNs in the logits, a model
// paged out under memory pressure) into an error at load that names the tensor or the cause.
#include "llama-model-checks.h"

#include "llama-impl.h"
#include "llama-model.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <sys/mman.h>

namespace {

struct ggml_ctx_deleter {
    void operator()(ggml_context * c) const { ggml_free(c); }
};
struct backend_deleter {
    void operator()(ggml_backend * b) const { ggml_backend_free(b); }
};

template <typename F> void for_each_weight(const llama_model & model, F && f) {
    for (ggml_context * c : { model.ctx, model.ctx_derived }) {
        if (!c) continue;
        for (ggml_tensor * t = ggml_get_first_tensor(c); t; t = ggml_get_next_tensor(c, t)) f(t);
    }
}

} // namespace

void llama_check_weight_kernels(const llama_model & model, const std::string & path) {
    // Every matrix is the weight of a matrix product (the token embedding too, when the output is
    // tied to it), so each one's type must have a product kernel on the backend that runs it.
    // Only the CPU runs weights so far. The question goes to the backend as a real MUL_MAT node.
    std::unique_ptr<ggml_backend, backend_deleter> cpu(ggml_backend_cpu_init());
    size_t n_weights = 0;
    for_each_weight(model, [&](ggml_tensor *) { ++n_weights; });
    std::unique_ptr<ggml_context, ggml_ctx_deleter> ctx(ggml_init({ (2 * n_weights + 1) * ggml_tensor_overhead(), nullptr, true }));
    for_each_weight(model, [&](ggml_tensor * w) {
        if (ggml_n_dims(w) < 2) return;   // norms and biases: element-wise ops on f32
        ggml_tensor * x = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, w->ne[0], 1, w->ne[2], w->ne[3]);
        ggml_tensor * y = ggml_mul_mat(ctx.get(), w, x);
        const bool ok = ggml_backend_supports_op(cpu.get(), y);
        if (!ok) {
            throw llama_error(llama_format("%s: tensor '%s' has type %s, which has no matrix-product kernel on the CPU "
                                           "(it is an activation type or not implemented); requantize the model",
                                           path.c_str(), w->name, ggml_type_name(w->type)));
        }
    });
}

void llama_check_weight_data(const llama_model & model, const std::string & path) {
    // Decoding every row to f32 checks the values of float tensors and, for quantized ones, the
    // block scales too: a NaN or infinite scale makes its whole block non-finite.
    std::vector<float> row;
    for_each_weight(model, [&](ggml_tensor * t) {
        if (!t->data) return;
        const int64_t n_per_row = t->ne[0];
        const int64_t n_rows = ggml_nrows(t);
        const size_t row_bytes = ggml_row_size(t->type, n_per_row);
        const ggml_to_float_t to_float = ggml_get_type_traits(t->type)->to_float;
        if (t->type != GGML_TYPE_F32 && !to_float) {
            throw llama_error(llama_format("%s: --check-tensors: tensor '%s' has type %s, which cannot be decoded",
                                           path.c_str(), t->name, ggml_type_name(t->type)));
        }
        row.resize((size_t) n_per_row);
        const char * base = (const char *) t->data;
        for (int64_t r = 0; r < n_rows; ++r) {
            const char * src = base + r * row_bytes;   // weights are contiguous
            if (t->type == GGML_TYPE_F32) std::memcpy(row.data(), src, row_bytes);
            else to_float(src, row.data(), n_per_row);
            for (int64_t i = 0; i < n_per_row; ++i) {
                if (std::isfinite(row[i])) continue;
                const int64_t blk = ggml_blck_size(t->type);
                throw llama_error(llama_format("%s: --check-tensors: tensor '%s' (%s) has a non-finite value (%s) in row %lld "
                                               "at element %lld%s",
                                               path.c_str(), t->name, ggml_type_name(t->type),
                                               std::isnan(row[i]) ? "nan" : "inf", (long long) r, (long long) i,
                                               blk > 1 ? llama_format(" (block %lld: a bad scale or value)",
                                                                      (long long) (i / blk)).c_str()
                                                       : ""));
            }
        }
    });
    LLAMA_LOG_INFO("llama_model_load: --check-tensors: every weight is finite\n");
}

void llama_lock_weights(llama_model & model, const std::string & path) {
    // Mapped files and allocated buffers alike: whatever holds the weights stays in RAM.
    size_t locked = 0;
    for (ggml_backend_buffer_t buf : model.buffers) {
        if (!ggml_backend_buffer_is_host(buf)) continue;
        void * base = ggml_backend_buffer_get_base(buf);
        const size_t size = ggml_backend_buffer_get_size(buf);
        if (!base || size == 0) continue;
        if (mlock(base, size) != 0) {
            const int e = errno;
            throw llama_error(llama_format("%s: --mlock: cannot lock %.2f MiB of model memory in RAM: %s%s", path.c_str(),
                                           (locked + size) / 1048576.0, std::strerror(e),
                                           e == ENOMEM || e == EPERM ? " (raise the limit with 'ulimit -l', or run without --mlock)" : ""));
        }
        locked += size;
        model.locked.emplace_back(base, size);
    }
    LLAMA_LOG_INFO("llama_model_load: --mlock: %.2f MiB of weights locked in RAM\n", locked / 1048576.0);
}

void llama_unlock_weights(llama_model & model) {
    for (const auto & [base, size] : model.locked) munlock(base, size);
    model.locked.clear();
}
