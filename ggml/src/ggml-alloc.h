// Internal: the graph planner over several buffer types (used by the scheduler).
#pragma once

#include "ggml-backend.h"

ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n);
// buffer_of(t, user) says which buffer type (index) a tensor's memory comes from (NULL: 0).
bool ggml_gallocr_alloc_graph_n(ggml_gallocr_t galloc, ggml_cgraph * graph,
                                int (*buffer_of)(const ggml_tensor *, void *), void * user, bool reserve_only);
size_t ggml_gallocr_get_buffer_size_n(ggml_gallocr_t galloc, int buffer_id);
