// The all-reduce of tensor parallelism (-sm graph): the partial results of a cut layer's parts,
// one [n, T] tensor per device, become their sum on the main device (-mg), which holds the norms
// that read it next; the scheduler's copies then bring what the next layer needs to each device.
// One call, three forms (llama_context_params::graph_reduce_form, --graph-reduce-form):
//
//   collective: one node (ggml_all_reduce) that the scheduler runs as one step of the devices'
//           backends (ggml_backend_all_reduce): NCCL over distinct GPUs (KILN_NCCL builds), the
//           CPU's sum over CPU devices; every device then holds the sum and no partial is copied
//           by the scheduler. What the context picks by default (auto) where the backends offer
//           it; elsewhere (virtual devices over one GPU, no NCCL, CPU + GPU lists) gather. On
//           GPUs without NCCL the gather and ring forms are the peer copies + sum kernels: their
//           copies are the scheduler's asynchronous ones and their sums ordinary add nodes, so no
//           second, untested copy-and-add path exists beside them.
//   gather: every partial crosses to -mg, which adds them up. P devices: P - 1 whole messages
//           over -mg's link, and P - 1 hops of latency at most.
//   ring:   reduce-scatter around the ring of devices, then a gather of the pieces. The rows are
//           cut into P chunks; chunk c starts on the device after c, travels the ring, each
//           device adding its own rows of it, and ends summed on device c; -mg then joins the P
//           summed chunks. Each link carries (P - 1) / P of a message for the scatter and -mg's
//           link another (P - 1) / P for the gather, instead of P - 1 messages: the form for
//           large batches over links of equal speed (GPUs on PCIe or NVLink), at the cost of
//           more, smaller copies (P (P - 1) + P - 1 of them).
//
// What crosses a link travels in the -grt type (f32, f16 or bf16), converted on the device that
// sends it; gather and ring form their sums in f32, the collective hands back the sum in the wire
// type (as NCCL does; the CPU's adds in f32 and rounds once). Gather and ring are graph nodes
// pinned to devices: the copies are the scheduler's (peer copies between GPUs, memcpy between
// virtual CPU devices).
#pragma once

#include "ggml.h"
#include "llama.h"

#include <utility>
#include <vector>

struct llama_all_reduce_options {
    int main_device = -1;   // index in the model's devices (-1: no pinning, a single-device build)
    ggml_type wire_type = GGML_TYPE_F32;
    // COLLECTIVE: the caller made sure the devices' backends offer it (the context does, and
    // resolves AUTO); AUTO here is gather
    llama_graph_reduce_form form = LLAMA_GRAPH_REDUCE_GATHER;
};

// partials: (tensor [n, T] f32, device index), at least one; pinned receives (node, device) for
// the nodes that must run on a given device. Returns the sum [n, T] f32.
ggml_tensor * llama_build_all_reduce(ggml_context * ctx, const std::vector<std::pair<ggml_tensor *, int>> & partials,
                                     const llama_all_reduce_options & opt, std::vector<std::pair<ggml_tensor *, int>> & pinned);

// "gather" / "ring"
const char * llama_graph_reduce_form_name(llama_graph_reduce_form form);
