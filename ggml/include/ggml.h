// Kiln tensor library: tensors, types, ops, graphs.
//
// A tensor has up to 4 dimensions. ne[i] counts elements along dimension i (ne[0] is the row,
// the innermost dimension); nb[i] is the stride in bytes. For a block-quantized type nb[0] is
// the size of one block and nb[1] the size of a row (per-row metadata included).
//
// Tensors are created in a ggml_context (an arena). Ops build graph nodes; nothing is computed
// until a graph is run on a backend (see ggml-backend.h).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_MAX_DIMS       4
#define GGML_MAX_SRC        10
#define GGML_MAX_NAME       64
#define GGML_MAX_OP_PARAMS  64
#define GGML_DEFAULT_GRAPH_SIZE 2048
#define GGML_MEM_ALIGN      64
#define GGML_KQ_MASK_PAD    16

// Type ids are those of llama.cpp / ik_llama.cpp GGUF files; never renumber.
enum ggml_type {
    GGML_TYPE_F32      = 0,
    GGML_TYPE_F16      = 1,
    GGML_TYPE_Q4_0     = 2,
    GGML_TYPE_Q4_1     = 3,
    GGML_TYPE_Q5_0     = 6,
    GGML_TYPE_Q5_1     = 7,
    GGML_TYPE_Q8_0     = 8,
    GGML_TYPE_Q8_1     = 9,
    GGML_TYPE_Q2_K     = 10,
    GGML_TYPE_Q3_K     = 11,
    GGML_TYPE_Q4_K     = 12,
    GGML_TYPE_Q5_K     = 13,
    GGML_TYPE_Q6_K     = 14,
    GGML_TYPE_Q8_K     = 15,
    GGML_TYPE_IQ2_XXS  = 16,
    GGML_TYPE_IQ2_XS   = 17,
    GGML_TYPE_IQ3_XXS  = 18,
    GGML_TYPE_IQ1_S    = 19,
    GGML_TYPE_IQ4_NL   = 20,
    GGML_TYPE_IQ3_S    = 21,
    GGML_TYPE_IQ2_S    = 22,
    GGML_TYPE_IQ4_XS   = 23,
    GGML_TYPE_I8       = 24,
    GGML_TYPE_I16      = 25,
    GGML_TYPE_I32      = 26,
    GGML_TYPE_I64      = 27,
    GGML_TYPE_F64      = 28,
    GGML_TYPE_IQ1_M    = 29,
    GGML_TYPE_BF16     = 30,
    GGML_TYPE_TQ1_0    = 34,
    GGML_TYPE_TQ2_0    = 35,
    GGML_TYPE_MXFP4    = 39,
    // ik_llama.cpp types
    GGML_TYPE_Q6_0     = 133,
    GGML_TYPE_IQ1_BN   = 134,
    GGML_TYPE_IQ2_BN   = 135,
    GGML_TYPE_IQ2_K    = 137,
    GGML_TYPE_IQ3_K    = 138,
    GGML_TYPE_IQ4_K    = 139,
    GGML_TYPE_IQ5_K    = 140,
    GGML_TYPE_IQ6_K    = 141,
    GGML_TYPE_IQ4_KS   = 144,
    GGML_TYPE_IQ2_KS   = 145,
    GGML_TYPE_IQ4_KSS  = 146,
    GGML_TYPE_Q8_KV    = 151,
    GGML_TYPE_IQ5_KS   = 152,
    GGML_TYPE_IQ2_KT   = 153,
    GGML_TYPE_IQ3_KT   = 154,
    GGML_TYPE_IQ4_KT   = 155,
    GGML_TYPE_IQ3_KS   = 156,
    GGML_TYPE_IQ2_KL   = 157,
    GGML_TYPE_IQ1_KT   = 158,
    // row-interleaved layouts (ik_llama.cpp)
    GGML_TYPE_Q4_0_R8    = 202,
    GGML_TYPE_Q5_0_R4    = 206,
    GGML_TYPE_Q8_0_R8    = 208,
    GGML_TYPE_Q2_K_R4    = 210,
    GGML_TYPE_Q3_K_R4    = 211,
    GGML_TYPE_Q4_K_R4    = 212,
    GGML_TYPE_Q5_K_R4    = 213,
    GGML_TYPE_Q6_K_R4    = 214,
    GGML_TYPE_IQ2_XXS_R4 = 216,
    GGML_TYPE_IQ2_XS_R4  = 217,
    GGML_TYPE_IQ3_XXS_R4 = 218,
    GGML_TYPE_IQ1_S_R4   = 219,
    GGML_TYPE_IQ4_NL_R4  = 220,
    GGML_TYPE_IQ3_S_R4   = 221,
    GGML_TYPE_IQ2_S_R4   = 222,
    GGML_TYPE_IQ4_XS_R8  = 223,
    GGML_TYPE_IQ1_M_R4   = 229,
    GGML_TYPE_BF16_R16   = 230,
    GGML_TYPE_Q6_0_R4    = 233,
    GGML_TYPE_IQ2_BN_R4  = 335,
    GGML_TYPE_IQ2_K_R4   = 337,
    GGML_TYPE_IQ3_K_R4   = 338,
    GGML_TYPE_IQ4_K_R4   = 339,
    GGML_TYPE_IQ5_K_R4   = 340,
    GGML_TYPE_IQ4_KS_R4  = 344,
    GGML_TYPE_IQ5_KS_R4  = 352,
    GGML_TYPE_MXFP4_R8   = 353,
    GGML_TYPE_Q8_K_R16   = 397,
    GGML_TYPE_Q8_KV_R8   = 398,
    GGML_TYPE_Q8_K_R8    = 399,
    GGML_TYPE_COUNT      = 400,
};

// Half-precision storage types.
typedef uint16_t ggml_fp16_t;
typedef uint16_t ggml_bf16_t;

float       ggml_fp16_to_fp32(ggml_fp16_t h);
ggml_fp16_t ggml_fp32_to_fp16(float f);
float       ggml_bf16_to_fp32(ggml_bf16_t h);
ggml_bf16_t ggml_fp32_to_bf16(float f);   // round to nearest even, NaN kept quiet
void ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n);
void ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n);
void ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n);
void ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n);

// ---------------------------------------------------------------------------------------------
// Type traits. Quant families register their functions into this table (ggml/src/quants/).

typedef void (*ggml_to_float_t)(const void * x, float * y, int64_t n);
typedef void (*ggml_from_float_t)(const float * x, void * y, int64_t n);
// Quantize nrows rows of n_per_row values with optional per-column importance weights.
// Returns bytes written, or 0 when the input cannot be quantized (non-finite values).
typedef size_t (*ggml_quantize_rows_t)(const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                                       const float * imatrix);

typedef void (*ggml_weave_t)(const char * const * rows, int64_t n_per_row, char * group);

struct ggml_type_traits {
    const char *      type_name;
    int64_t           blck_size;      // elements per block
    size_t            type_size;      // bytes per block
    size_t            row_meta_size;  // bytes of per-row metadata before the blocks
    int               nrows_interleaved; // 1, or R = 4/8/16 for row-interleaved layouts (see below)
    enum ggml_type    interleaved_base;  // for R > 1: the plain type whose R rows are woven together
    bool              is_quantized;
    bool              known;          // a type id Kiln knows the layout of
    // decode one row (n elements); NULL when not implemented. For a row-interleaved type (R > 1)
    // it decodes one group of R rows instead: x is the group's start (R row sizes of bytes),
    // n = R * row length, and y receives the R rows one after another. Tensors of such types have
    // a multiple of R rows; gemm kernels get whole groups (nr a multiple of R).
    ggml_to_float_t   to_float;
    ggml_from_float_t from_float_ref; // reference encoder of one row
    ggml_quantize_rows_t quantize;    // full quantizer (imatrix aware); NULL -> from_float_ref
    bool              requires_imatrix;
    // For a layout woven from interleaved_base: build one group from R rows of the base type
    // (rows[k] = row k, metadata first; group zeroed by the caller). NULL for layouts that are
    // quantized on their own (iq1_s_r4, iq1_m_r4) or not implemented.
    ggml_weave_t      weave;
};

const struct ggml_type_traits * ggml_get_type_traits(enum ggml_type type);
struct ggml_type_traits *       ggml_type_traits_mut(enum ggml_type type); // for registration
bool        ggml_type_is_valid(int type);   // a known id
// Why a type id that files may carry is not one Kiln reads (removed or placeholder ids of the
// reference projects, with what to do instead); NULL for other ids.
const char * ggml_type_unsupported_reason(int type);
const char * ggml_type_name(enum ggml_type type);
int64_t     ggml_blck_size(enum ggml_type type);
size_t      ggml_type_size(enum ggml_type type);
size_t      ggml_row_size(enum ggml_type type, int64_t ne); // per-row metadata included
bool        ggml_is_quantized(enum ggml_type type);
// Quantize (or convert) nrows rows; returns bytes written, 0 on failure (non-finite input).
size_t      ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start,
                                int64_t nrows, int64_t n_per_row, const float * imatrix);
bool        ggml_quantize_requires_imatrix(enum ggml_type type);
// The interleaved twin of a plain type that can be woven from it (repacking), or the type
// itself when there is none.
enum ggml_type ggml_interleaved_twin(enum ggml_type type);
// Repack nrows rows of interleaved_base(type) (contiguous, src) into type (dst, not overlapping
// src); nrows must be a
// multiple of the twin's R. Returns bytes written, 0 if the type has no weave or the shape does
// not fit.
size_t      ggml_repack_rows(enum ggml_type type, const void * src, void * dst, int64_t nrows, int64_t n_per_row);

// ---------------------------------------------------------------------------------------------
// Ops

enum ggml_op {
    GGML_OP_NONE = 0,
    GGML_OP_DUP,
    GGML_OP_ADD,
    GGML_OP_SUB,
    GGML_OP_MUL,
    GGML_OP_DIV,
    GGML_OP_SCALE,
    GGML_OP_SQR,
    GGML_OP_SQRT,
    GGML_OP_SUM_ROWS,
    GGML_OP_MEAN,
    GGML_OP_ARGMAX,
    GGML_OP_CONCAT,
    GGML_OP_NORM,
    GGML_OP_RMS_NORM,
    GGML_OP_MUL_MAT,
    GGML_OP_MUL_MAT_ID,
    GGML_OP_CPY,
    GGML_OP_CONT,
    GGML_OP_RESHAPE,
    GGML_OP_VIEW,
    GGML_OP_PERMUTE,
    GGML_OP_TRANSPOSE,
    GGML_OP_GET_ROWS,
    GGML_OP_SET_ROWS,
    GGML_OP_DIAG_MASK_INF,
    GGML_OP_SOFT_MAX,
    GGML_OP_ROPE,
    GGML_OP_CLAMP,
    GGML_OP_ARGSORT,
    GGML_OP_TOP_K,
    GGML_OP_FLASH_ATTN_EXT,
    GGML_OP_UNARY,
    GGML_OP_GLU,
    GGML_OP_MOE_FUSED_UP_GATE,
    GGML_OP_L2_NORM,
    GGML_OP_SSM_CONV,
    GGML_OP_GATED_DELTA_NET,
    GGML_OP_ALL_REDUCE,
    GGML_OP_COUNT,
};

enum ggml_unary_op {
    GGML_UNARY_OP_SILU,
    GGML_UNARY_OP_GELU,
    GGML_UNARY_OP_SIGMOID,
    GGML_UNARY_OP_SOFTPLUS,
    GGML_UNARY_OP_RELU,
    GGML_UNARY_OP_TANH,
    GGML_UNARY_OP_NEG,
    GGML_UNARY_OP_EXP,
    GGML_UNARY_OP_COUNT,
};

enum ggml_glu_op {
    GGML_GLU_OP_SWIGLU,   // silu(gate) * up
    GGML_GLU_OP_GEGLU,    // gelu(gate) * up
    GGML_GLU_OP_COUNT,
};

enum ggml_sort_order { GGML_SORT_ORDER_ASC, GGML_SORT_ORDER_DESC };

// RoPE modes
#define GGML_ROPE_TYPE_NORMAL 0   // rotate pairs (2i, 2i+1)
#define GGML_ROPE_TYPE_NEOX   2   // rotate pairs (i, i + n_dims/2)
// Multi-section RoPE (Qwen2-VL / Qwen3-VL / Qwen3.5): pairs as NEOX, but each pair takes its angle
// from one of four positions (time, height, width, extra) chosen by the sections (ggml_rope_multi).
#define GGML_ROPE_TYPE_MROPE  8   // sections are contiguous runs of pairs
#define GGML_ROPE_TYPE_IMROPE 40  // sections interleaved: pair i uses component i % 3 while that section lasts

enum ggml_prec { GGML_PREC_DEFAULT = 0, GGML_PREC_F32 = 10 };

enum ggml_tensor_flag {
    GGML_TENSOR_FLAG_INPUT  = 1,
    GGML_TENSOR_FLAG_OUTPUT = 2,
    GGML_TENSOR_FLAG_PARAM  = 4,
};

struct ggml_backend_buffer;

struct ggml_tensor {
    enum ggml_type type;
    struct ggml_backend_buffer * buffer;   // where data lives (NULL: context memory or unallocated)

    int64_t ne[GGML_MAX_DIMS];
    size_t  nb[GGML_MAX_DIMS];

    enum ggml_op op;
    int32_t op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t)];
    int32_t flags;

    struct ggml_tensor * src[GGML_MAX_SRC];

    struct ggml_tensor * view_src;   // the tensor a view looks into
    size_t               view_offs;

    void * data;
    char   name[GGML_MAX_NAME];
    void * extra;                     // backend-specific (e.g. repacked layout)
};

// ---------------------------------------------------------------------------------------------
// Contexts

struct ggml_init_params {
    size_t mem_size;     // bytes of the arena
    void * mem_buffer;   // NULL: allocated and owned by the context
    bool   no_alloc;     // true: tensors get no data (a backend buffer allocates it later)
};

struct ggml_context;
struct ggml_cgraph;

struct ggml_context * ggml_init(struct ggml_init_params params);
void    ggml_free(struct ggml_context * ctx);
size_t  ggml_used_mem(const struct ggml_context * ctx);
bool    ggml_get_no_alloc(struct ggml_context * ctx);
void    ggml_set_no_alloc(struct ggml_context * ctx, bool no_alloc);
size_t  ggml_tensor_overhead(void);
size_t  ggml_graph_overhead(void);
size_t  ggml_graph_overhead_custom(size_t size);

struct ggml_tensor * ggml_get_first_tensor(const struct ggml_context * ctx);
struct ggml_tensor * ggml_get_next_tensor(const struct ggml_context * ctx, struct ggml_tensor * t);
struct ggml_tensor * ggml_get_tensor(struct ggml_context * ctx, const char * name);

// Errors inside the library abort with a message (programming errors); callers validate input.
void ggml_abort(const char * file, int line, const char * fmt, ...)
#ifdef __GNUC__
    __attribute__((noreturn, format(printf, 3, 4)))
#endif
    ;
#define GGML_ABORT(...) ggml_abort(__FILE__, __LINE__, __VA_ARGS__)
#define GGML_ASSERT(x) do { if (!(x)) ggml_abort(__FILE__, __LINE__, "GGML_ASSERT(%s) failed", #x); } while (0)

// ---------------------------------------------------------------------------------------------
// Tensor properties

int64_t ggml_nelements(const struct ggml_tensor * t);
int64_t ggml_nrows(const struct ggml_tensor * t);
size_t  ggml_nbytes(const struct ggml_tensor * t);
size_t  ggml_element_size(const struct ggml_tensor * t);
int     ggml_n_dims(const struct ggml_tensor * t);
bool    ggml_is_contiguous(const struct ggml_tensor * t);
bool    ggml_is_contiguous_rows(const struct ggml_tensor * t);  // rows dense; dims 1..3 may stride
bool    ggml_is_transposed(const struct ggml_tensor * t);
bool    ggml_is_permuted(const struct ggml_tensor * t);
bool    ggml_are_same_shape(const struct ggml_tensor * a, const struct ggml_tensor * b);
bool    ggml_can_repeat(const struct ggml_tensor * a, const struct ggml_tensor * b); // a broadcasts to b
bool    ggml_is_view_op(enum ggml_op op);
const char * ggml_op_name(enum ggml_op op);
const char * ggml_unary_op_name(enum ggml_unary_op op);
const char * ggml_op_desc(const struct ggml_tensor * t);

struct ggml_tensor * ggml_new_tensor(struct ggml_context * ctx, enum ggml_type type, int n_dims, const int64_t * ne);
struct ggml_tensor * ggml_new_tensor_1d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0);
struct ggml_tensor * ggml_new_tensor_2d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1);
struct ggml_tensor * ggml_new_tensor_3d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2);
struct ggml_tensor * ggml_new_tensor_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
struct ggml_tensor * ggml_dup_tensor(struct ggml_context * ctx, const struct ggml_tensor * src);

struct ggml_tensor * ggml_set_name(struct ggml_tensor * t, const char * name);
struct ggml_tensor * ggml_format_name(struct ggml_tensor * t, const char * fmt, ...);
const char *         ggml_get_name(const struct ggml_tensor * t);
void ggml_set_input(struct ggml_tensor * t);
void ggml_set_output(struct ggml_tensor * t);

// ---------------------------------------------------------------------------------------------
// Views and layout

struct ggml_tensor * ggml_view_tensor(struct ggml_context * ctx, struct ggml_tensor * src);
struct ggml_tensor * ggml_view_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, size_t offset);
struct ggml_tensor * ggml_view_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
struct ggml_tensor * ggml_view_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);
struct ggml_tensor * ggml_view_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
struct ggml_tensor * ggml_reshape(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * shape);
struct ggml_tensor * ggml_reshape_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0);
struct ggml_tensor * ggml_reshape_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1);
struct ggml_tensor * ggml_reshape_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
struct ggml_tensor * ggml_reshape_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
// permute: axis i of a becomes axis axisN of the result
struct ggml_tensor * ggml_permute(struct ggml_context * ctx, struct ggml_tensor * a, int axis0, int axis1, int axis2, int axis3);
struct ggml_tensor * ggml_transpose(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_cont(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_cont_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1);
struct ggml_tensor * ggml_cont_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
struct ggml_tensor * ggml_cont_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
// copy a into b (converting type); returns a view of b
struct ggml_tensor * ggml_cpy(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
// a converted to type (new tensor, same shape)
struct ggml_tensor * ggml_cast(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_type type);
// rows of a picked by the I32 ids in b: a [n, rows, x, y], b [k, x, y] -> [n, k, x, y] f32
struct ggml_tensor * ggml_get_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
// write rows of b (f32) into a at the row indices c (I64 or I32): returns a view of a
struct ggml_tensor * ggml_set_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c);
struct ggml_tensor * ggml_concat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int dim);

// ---------------------------------------------------------------------------------------------
// Arithmetic (b broadcasts to a by repetition along each dim)

struct ggml_tensor * ggml_add(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_sub(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_mul(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_div(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_add_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_mul_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_scale(struct ggml_context * ctx, struct ggml_tensor * a, float s);
struct ggml_tensor * ggml_scale_bias(struct ggml_context * ctx, struct ggml_tensor * a, float s, float b);
struct ggml_tensor * ggml_clamp(struct ggml_context * ctx, struct ggml_tensor * a, float min, float max);
struct ggml_tensor * ggml_sqr(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sqrt(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sum_rows(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_mean(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_argmax(struct ggml_context * ctx, struct ggml_tensor * a);

struct ggml_tensor * ggml_unary(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op);
struct ggml_tensor * ggml_silu(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_gelu(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sigmoid(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_softplus(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_relu(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_tanh(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_neg(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_exp(struct ggml_context * ctx, struct ggml_tensor * a);

// gated linear units on two same-shape tensors: op(gate) * up
struct ggml_tensor * ggml_glu_split(struct ggml_context * ctx, struct ggml_tensor * gate, struct ggml_tensor * up, enum ggml_glu_op op);
struct ggml_tensor * ggml_swiglu_split(struct ggml_context * ctx, struct ggml_tensor * gate, struct ggml_tensor * up);

struct ggml_tensor * ggml_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
struct ggml_tensor * ggml_rms_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
// each row divided by its Euclidean norm: x / max(||x||, eps)
struct ggml_tensor * ggml_l2_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);

// ---------------------------------------------------------------------------------------------
// Matrix products
//
// ggml_mul_mat(a, b): a [K, M, ...] (weights, any type), b [K, N, ...] f32 -> [M, N, ...] f32.
// Dims 2 and 3 of a broadcast over b's.
struct ggml_tensor * ggml_mul_mat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
void ggml_mul_mat_set_prec(struct ggml_tensor * a, enum ggml_prec prec);

// Expert-routed product. as: [K, M, n_expert]; b: [K, n_b, n_tokens] (n_b is 1 or n_used);
// ids: I32 [n_used, n_tokens]. Result [M, n_used, n_tokens]: for each token t and slot i,
// as[:, :, ids[i, t]] times b[:, i % n_b, t].
struct ggml_tensor * ggml_mul_mat_id(struct ggml_context * ctx, struct ggml_tensor * as, struct ggml_tensor * b, struct ggml_tensor * ids);

// Fused expert gate/up with activation: op(gate_e · b) * (up_e · b) per selected expert.
struct ggml_tensor * ggml_moe_up_gate(struct ggml_context * ctx, struct ggml_tensor * as_up, struct ggml_tensor * as_gate,
                                      struct ggml_tensor * b, struct ggml_tensor * ids, enum ggml_glu_op op);

// Smart expert reduction: t is a mul_mat_id or moe_up_gate node; keep is F32 [n_used, n_tokens].
// Pairs (slot, token) whose keep value is 0 are not computed and their result rows are 0. A
// backend that does not read keep computes every pair; callers weight dropped pairs by 0, so
// the layer's output is the same either way.
void ggml_mul_mat_id_set_keep(struct ggml_tensor * t, struct ggml_tensor * keep);

// ---------------------------------------------------------------------------------------------
// Attention pieces

// softmax over rows of a * scale + mask (mask f32 or f16, [ne0, >= ne1], broadcast over dims 2,3)
struct ggml_tensor * ggml_soft_max(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_soft_max_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * mask, float scale, float max_bias);
// attention sinks (gpt-oss): one learned logit per head (f32 [ne2 of a]) that joins each row's
// softmax denominator without a value of its own
void ggml_soft_max_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks);

// RoPE on a [head_dim, n_head, n_tokens, 1] with I32 positions b [n_tokens]. The first n_dims
// values of each head are rotated. freq_factors (optional, [n_dims/2]) divide the frequencies.
struct ggml_tensor * ggml_rope(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int n_dims, int mode);
struct ggml_tensor * ggml_rope_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                   struct ggml_tensor * freq_factors, int n_dims, int mode, int n_ctx_orig,
                                   float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                   float beta_fast, float beta_slow);
// Multi-section RoPE (mode GGML_ROPE_TYPE_MROPE or _IMROPE): b holds 4 positions per token, I32
// [4 * n_tokens] as four runs (all time positions, then height, width, extra). sections[4] count
// pairs; pair i uses the component its sector (i mod the sections' sum) falls into.
struct ggml_tensor * ggml_rope_multi(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                     struct ggml_tensor * freq_factors, int n_dims, const int sections[4], int mode,
                                     int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                     float attn_factor, float beta_fast, float beta_slow);
// YaRN correction range (dims) for given beta values
void ggml_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]);

// Flash attention. q [D, n_q, n_head, n_seq] f32; k [D, n_kv, n_head_kv, n_seq] and
// v [Dv, n_kv, n_head_kv, n_seq] (f32/f16/bf16/q8_0); mask [n_kv, n_q_padded] f16/f32 (optional).
// n_head must be a multiple of n_head_kv (grouped-query broadcast).
// Result: [Dv, n_head, n_q, n_seq] f32 (heads before tokens, ready to reshape to rows).
struct ggml_tensor * ggml_flash_attn_ext(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                         struct ggml_tensor * v, struct ggml_tensor * mask, float scale,
                                         float max_bias, float logit_softcap);
void ggml_flash_attn_ext_set_prec(struct ggml_tensor * a, enum ggml_prec prec);
// attention sinks: f32 [n_head], as for ggml_soft_max_add_sinks
void ggml_flash_attn_ext_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks);

struct ggml_tensor * ggml_diag_mask_inf(struct ggml_context * ctx, struct ggml_tensor * a, int n_past);

// argsort of each row: I32 indices
struct ggml_tensor * ggml_argsort(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_sort_order order);
// indices of the k largest values of each row, largest first: I32 [k, rows...]
struct ggml_tensor * ggml_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k);

// ---------------------------------------------------------------------------------------------
// Recurrent layers (gated delta-net). Both ops keep one state row per sequence slot in `state`
// (f32 [state_size, n_slots], typically a cache tensor) and update it IN PLACE as they run:
// slots (I32 [n_tokens]) names the row each token's sequence uses. Tokens of one slot are taken
// in batch order; different slots may interleave freely.

// Short causal depthwise convolution with its rolling window. x [n_ch, n_tokens] (dense rows);
// w [d_conv, n_ch]; state rows hold the previous d_conv-1 inputs per channel ([d_conv-1, n_ch]).
// Result [n_ch, n_tokens]: y[c, t] = sum_j w[j, c] * (window of x[c] ending at t)[j].
struct ggml_tensor * ggml_ssm_conv(struct ggml_context * ctx, struct ggml_tensor * x, struct ggml_tensor * w,
                                   struct ggml_tensor * state, struct ggml_tensor * slots);

// Gated delta rule. q, k [d_k, n_k_heads, n_tokens] (normalised by the caller); v [d_v, n_v_heads,
// n_tokens], n_v_heads a multiple of n_k_heads, value head h reading key head h % n_k_heads;
// g [n_v_heads, n_tokens] log-decay; beta [n_v_heads, n_tokens]. Per head the state S is
// [d_k x d_v] (row i of S: d_v values), state rows [d_k * d_v * n_v_heads]. Per token:
//   S = exp(g) S;  S += k (beta (v - S^T k))^T;  out = scale * S^T q.
// chunk <= 1: that recurrence token by token; chunk > 1: the equivalent chunked (WY) form over
// runs of up to `chunk` tokens of a sequence (what prompt batches use). Result [d_v, n_v_heads, n_tokens].
struct ggml_tensor * ggml_gated_delta_net(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                          struct ggml_tensor * v, struct ggml_tensor * g, struct ggml_tensor * beta,
                                          struct ggml_tensor * state, struct ggml_tensor * slots, float scale, int chunk);

// All-reduce (tensor parallelism, -sm graph): parts[0..n) (2 <= n <= GGML_MAX_SRC; contiguous f32,
// f16 or bf16 of one shape, each computed on its own device) all become their sum, in place, and the
// result is parts[rank] after it (a view of it). No backend computes this node: the scheduler runs
// it as one collective step over the parts' devices once all of them are computed
// (ggml_backend_all_reduce), and copies none of the parts between devices for it.
struct ggml_tensor * ggml_all_reduce(struct ggml_context * ctx, struct ggml_tensor ** parts, int n, int rank);

// ---------------------------------------------------------------------------------------------
// Graphs

struct ggml_cgraph * ggml_new_graph(struct ggml_context * ctx);
struct ggml_cgraph * ggml_new_graph_custom(struct ggml_context * ctx, size_t size, bool grads);
void    ggml_build_forward_expand(struct ggml_cgraph * graph, struct ggml_tensor * t);
int     ggml_graph_n_nodes(const struct ggml_cgraph * graph);
struct ggml_tensor * ggml_graph_node(struct ggml_cgraph * graph, int i);  // i < 0 counts from the end
int     ggml_graph_n_leafs(const struct ggml_cgraph * graph);
struct ggml_tensor * ggml_graph_leaf(struct ggml_cgraph * graph, int i);
struct ggml_tensor * ggml_graph_get_tensor(const struct ggml_cgraph * graph, const char * name);
void    ggml_graph_clear(struct ggml_cgraph * graph);
int     ggml_graph_size(const struct ggml_cgraph * graph);

// Logging (shared by the library and the tools)
enum ggml_log_level { GGML_LOG_LEVEL_DEBUG = 1, GGML_LOG_LEVEL_INFO = 2, GGML_LOG_LEVEL_WARN = 3, GGML_LOG_LEVEL_ERROR = 4 };
typedef void (*ggml_log_callback)(enum ggml_log_level level, const char * text, void * user_data);
void ggml_log_set(ggml_log_callback cb, void * user_data);
void ggml_log(enum ggml_log_level level, const char * fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

int64_t ggml_time_us(void);

#ifdef __cplusplus
}
#endif
