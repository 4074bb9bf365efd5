// The MoE section of kiln-bench-ops (moe.cpp).
#pragma once

#include "ggml-backend.h"

void bench_moe(ggml_backend_t be, int reps);
