// KILN_HD marks the small functions that the CPU code and the CUDA kernels share (block decoders
// in quants/quants-blocks.h, RoPE angles in rope-angles.h): __host__ __device__ under nvcc, plain
// inline elsewhere. They are static (internal linkage), like every helper the per-ISA folders
// include: an inline function with external linkage could be emitted by an AVX512 file and chosen
// by the linker for every caller (README, "Per-ISA kernel code").
#pragma once

#if defined(__CUDACC__)
#define KILN_HD static __host__ __device__ inline
#define KILN_HD_MEMBER __host__ __device__ inline
#else
#define KILN_HD static inline
#define KILN_HD_MEMBER inline
#endif
