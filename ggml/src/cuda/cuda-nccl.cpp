// The all-reduce through NCCL (issue 16, KILN_NCCL=ON): the sum of one tensor per device, written
// in place on every device, queued on each backend's compute stream. Taken only when
// choose_all_reduce (all-reduce-plan.h) says the devices are distinct GPUs; every refusal and
// every NCCL error is logged and answered false, so that the caller reduces with peer copies
// instead. Compiled, not run (no GPU in the session that wrote it).
#include "all-reduce-plan.h"
#include "cuda-common.h"

#ifdef KILN_NCCL
#include <nccl.h>

#include <map>
#include <mutex>
#endif

#include <vector>

namespace {

#ifdef KILN_NCCL
// One communicator per device set (the ordinals, in rank order), created at the first all-reduce
// over that set and kept for the life of the process: ncclCommInitAll costs milliseconds, an
// all-reduce microseconds. A set whose creation failed is remembered as empty, so the failure is
// logged once and later calls go to the copies at once.
struct nccl_comms {
    std::mutex mutex;
    // never destroyed: at exit the CUDA runtime may already be gone under a static destructor
    std::map<std::vector<int>, std::vector<ncclComm_t>> by_set;
};

nccl_comms & comms_registry() {
    static nccl_comms r;
    return r;
}

// the set's communicators (rank i on ordinals[i]), or an empty vector (logged) when NCCL refused it
const std::vector<ncclComm_t> & comms_for(const std::vector<int> & ordinals) {
    nccl_comms & r = comms_registry();
    auto it = r.by_set.find(ordinals);
    if (it != r.by_set.end()) return it->second;
    std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
    const ncclResult_t res = ncclCommInitAll(comms.data(), (int) ordinals.size(), ordinals.data());
    if (res != ncclSuccess) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "NCCL: ncclCommInitAll over %zu GPUs failed (%s); all-reduces over them use peer copies\n",
                 ordinals.size(), ncclGetErrorString(res));
        comms.clear();
    } else {
        ggml_log(GGML_LOG_LEVEL_INFO, "NCCL: communicator over %zu GPUs created\n", ordinals.size());
    }
    return r.by_set.emplace(ordinals, std::move(comms)).first->second;
}

bool nccl_type(ggml_type type, ncclDataType_t & out) {
    switch (type) {
        case GGML_TYPE_F32:  out = ncclFloat32;  return true;
        case GGML_TYPE_F16:  out = ncclFloat16;  return true;
        case GGML_TYPE_BF16: out = ncclBfloat16; return true;
        default:             return false;
    }
}
#endif

// The tensor lies whole in this backend's device memory.
bool in_device_memory(ggml_backend_t backend, const ggml_tensor * t) {
    const ggml_tensor * r = t->view_src ? t->view_src : t;
    return r->buffer && ggml_backend_buffer_get_type(r->buffer) == ggml_backend_get_default_buffer_type(backend) && t->data;
}

} // namespace

extern "C" {

bool ggml_cuda_nccl_compiled(void) {
#ifdef KILN_NCCL
    return true;
#else
    return false;
#endif
}

bool ggml_backend_cuda_all_reduce(ggml_backend_t * backends, ggml_tensor ** tensors, int n) {
    if (!tensors) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "all-reduce: no tensors\n");
        return false;
    }
    return cuda_all_reduce(backends, tensors, n);
}

} // extern "C"

// The backend's all_reduce entry (ggml-backend-impl.h): tensors NULL asks whether NCCL would run
// over these backends (what -sm graph decides its reduce by when it builds the graph).
bool cuda_all_reduce(ggml_backend_t * backends, ggml_tensor ** tensors, int n) {
    if (!backends || n < 2 || n > GGML_CUDA_MAX_DEVICES) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "all-reduce: %d participants (2 to %d expected)\n", n, GGML_CUDA_MAX_DEVICES);
        return false;
    }
    std::vector<all_reduce_participant> parts((size_t) n);
    for (int i = 0; i < n; ++i) {
        if (!backends[i] || (tensors && !tensors[i])) {
            ggml_log(GGML_LOG_LEVEL_ERROR, "all-reduce: participant %d has no backend or tensor\n", i);
            return false;
        }
        parts[(size_t) i].cuda = ggml_backend_is_cuda(backends[i]);
        if (parts[(size_t) i].cuda) parts[(size_t) i].ordinal = ((cuda_context *) backends[i]->context)->ordinal;
    }
    const all_reduce_choice choice = choose_all_reduce(parts, ggml_cuda_nccl_compiled());
    if (choice.method != all_reduce_method::nccl) {
        ggml_log(GGML_LOG_LEVEL_DEBUG, "all-reduce: peer copies (%s)\n", choice.reason.c_str());
        return false;
    }
    if (!tensors) return true;
#ifdef KILN_NCCL
    const ggml_tensor * t0 = tensors[0];
    ncclDataType_t dtype;
    if (!nccl_type(t0->type, dtype)) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "all-reduce: type %s (f32, f16 or bf16 expected)\n", ggml_type_name(t0->type));
        return false;
    }
    for (int i = 0; i < n; ++i) {
        const ggml_tensor * t = tensors[i];
        if (t->type != t0->type || !ggml_are_same_shape(t, t0) || !ggml_is_contiguous(t) || !in_device_memory(backends[i], t)) {
            ggml_log(GGML_LOG_LEVEL_ERROR, "all-reduce: %s on %s is not a contiguous %s tensor of %s's shape in that device's memory\n",
                     t->name, ggml_backend_name(backends[i]), ggml_type_name(t0->type), t0->name);
            return false;
        }
    }
    std::vector<int> ordinals((size_t) n);
    for (int i = 0; i < n; ++i) ordinals[(size_t) i] = parts[(size_t) i].ordinal;

    std::lock_guard<std::mutex> lock(comms_registry().mutex);
    const std::vector<ncclComm_t> & comms = comms_for(ordinals);
    if (comms.empty()) return false;
    // One call per device inside a group: NCCL launches them together (a single thread issuing
    // them one by one outside a group would wait on the first for the others forever).
    ncclResult_t res = ncclGroupStart();
    if (res != ncclSuccess) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "NCCL: ncclGroupStart failed (%s)\n", ncclGetErrorString(res));
        return false;
    }
    bool queued = true;
    for (int i = 0; i < n && queued; ++i) {
        const cuda_context * ctx = (const cuda_context *) backends[i]->context;
        if (!CUDA_OK(cudaSetDevice(ctx->ordinal))) {
            queued = false;
            break;
        }
        res = ncclAllReduce(tensors[i]->data, tensors[i]->data, (size_t) ggml_nelements(tensors[i]), dtype, ncclSum,
                            comms[(size_t) i], ctx->stream);
        if (res != ncclSuccess) {
            ggml_log(GGML_LOG_LEVEL_ERROR, "NCCL: ncclAllReduce on %s failed (%s)\n", ggml_backend_name(backends[i]),
                     ncclGetErrorString(res));
            queued = false;
        }
    }
    // the group is closed whatever happened inside it (an open group would swallow later calls)
    res = ncclGroupEnd();
    if (res != ncclSuccess) {
        ggml_log(GGML_LOG_LEVEL_ERROR, "NCCL: ncclGroupEnd failed (%s)\n", ncclGetErrorString(res));
        return false;
    }
    if (!queued) return false;
    // Each stream's reduce counts as one more queued graph there (graph_done, as cuda_graph_enqueue
    // records): the scheduler counts it as a split of each backend, and a later copy into a
    // part's memory waits for it by that count (copy_async's wait_back).
    for (int i = 0; i < n; ++i) {
        cuda_context * ctx = (cuda_context *) backends[i]->context;
        if (!CUDA_OK(cudaSetDevice(ctx->ordinal)) ||
            !CUDA_OK(cudaEventRecord(ctx->graph_done[ctx->n_graphs % cuda_context::k_graph_events], ctx->stream))) {
            return false;
        }
        ++ctx->n_graphs;
    }
    return true;
#else
    return false;
#endif
}
