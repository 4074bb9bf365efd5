// The memory report: each buffer the context and its model own is counted at the place (host CPU
// or device) whose buffer type it has, so the rows add up to everything allocated.
#include "llama-memory-report.h"

#include "llama-context.h"
#include "llama-impl.h"

std::vector<llama_memory_row> llama_memory_report(const llama_context & ctx) {
    const std::vector<llama_place_summary> places = llama_place_summaries(ctx.model);
    std::vector<llama_memory_row> rows;
    for (const llama_place_summary & p : places) {
        llama_memory_row r;
        static_cast<llama_place_summary &>(r) = p;
        rows.push_back(r);
    }
    const std::vector<llama_place_summary> & as_places = places;
    auto add = [&](ggml_backend_buffer_t b, size_t llama_memory_row::*field) {
        rows[llama_place_of(as_places, ggml_backend_buffer_get_type(b))].*field += ggml_backend_buffer_get_size(b);
    };
    for (ggml_backend_buffer_t b : ctx.kv.bufs) add(b, &llama_memory_row::kv);
    for (ggml_backend_buffer_t b : ctx.kv_swa.bufs) add(b, &llama_memory_row::kv);
    for (ggml_backend_buffer_t b : ctx.rs.bufs) add(b, &llama_memory_row::state);
    // the scheduler's backends are the devices' (in the model's order), then the host CPU
    if (ctx.sched) {
        rows[0].compute = ggml_backend_sched_get_buffer_size(ctx.sched, ctx.cpu);
        for (size_t i = 0; i < ctx.device_backends.size() && i + 1 < rows.size(); ++i) {
            rows[i + 1].compute = ggml_backend_sched_get_buffer_size(ctx.sched, ctx.device_backends[i]);
        }
    }
    return rows;
}

void llama_log_memory_report(const llama_context & ctx) {
    const std::vector<llama_memory_row> rows = llama_memory_report(ctx);
    constexpr double mib = 1048576.0;
    LLAMA_LOG_INFO("llama_init_from_model: memory (MiB)  %10s %10s %10s %10s %10s  layers\n", "weights", "KV cache", "state",
                   "compute", "total");
    llama_memory_row sum;
    for (size_t i = 0; i < rows.size(); ++i) {
        const llama_memory_row & r = rows[i];
        if (i > 0 && r.total() == 0 && r.layers.empty() && r.cut.empty()) continue;   // a device given nothing
        const std::string name = std::string(ggml_backend_buft_name(r.buft)) + (i == 0 ? " (host)" : "");
        LLAMA_LOG_INFO("llama_init_from_model:   %-14s %10.2f %10.2f %10.2f %10.2f %10.2f  %s\n", name.c_str(), r.weights / mib,
                       r.kv / mib, r.state / mib, r.compute / mib, r.total() / mib, r.describe_layers().c_str());
        sum.weights += r.weights;
        sum.kv += r.kv;
        sum.state += r.state;
        sum.compute += r.compute;
    }
    LLAMA_LOG_INFO("llama_init_from_model:   %-14s %10.2f %10.2f %10.2f %10.2f %10.2f\n", "total", sum.weights / mib, sum.kv / mib,
                   sum.state / mib, sum.compute / mib, sum.total() / mib);
}
