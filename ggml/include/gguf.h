// GGUF v3 reading and writing, byte-compatible with llama.cpp.
//
// Reading validates every field (see gguf.cpp); on failure the init functions return NULL and
// gguf_last_error() says what is wrong, naming the file and the field. Nothing is read past the
// end of the file.
#pragma once

#include "ggml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GGUF_MAGIC "GGUF"
#define GGUF_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_KEY_GENERAL_ALIGNMENT "general.alignment"

enum gguf_type {
    GGUF_TYPE_UINT8   = 0,
    GGUF_TYPE_INT8    = 1,
    GGUF_TYPE_UINT16  = 2,
    GGUF_TYPE_INT16   = 3,
    GGUF_TYPE_UINT32  = 4,
    GGUF_TYPE_INT32   = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL    = 7,
    GGUF_TYPE_STRING  = 8,
    GGUF_TYPE_ARRAY   = 9,
    GGUF_TYPE_UINT64  = 10,
    GGUF_TYPE_INT64   = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT,
};

struct gguf_context;

struct gguf_init_params {
    // true: tensor data is not read; *ctx (if given) gets tensors without data.
    // false: *ctx gets the tensors with their data loaded into context memory.
    bool no_alloc;
    struct ggml_context ** ctx;   // optional: a context holding a ggml_tensor per GGUF tensor
};

// NULL on failure; gguf_last_error() has the message (thread-local).
struct gguf_context * gguf_init_empty(void);
struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params);
// Parse from memory (the whole file image); data offsets are relative to buf.
struct gguf_context * gguf_init_from_buffer(const void * buf, size_t size, const char * name, struct gguf_init_params params);
const char * gguf_last_error(void);
void gguf_free(struct gguf_context * ctx);

const char * gguf_type_name(enum gguf_type type);

uint32_t gguf_get_version(const struct gguf_context * ctx);
size_t   gguf_get_alignment(const struct gguf_context * ctx);
size_t   gguf_get_data_offset(const struct gguf_context * ctx);   // file offset of the tensor data section
size_t   gguf_get_file_size(const struct gguf_context * ctx);     // size of the file parsed (0 if unknown)

int64_t      gguf_get_n_kv(const struct gguf_context * ctx);
int64_t      gguf_find_key(const struct gguf_context * ctx, const char * key);   // -1 if absent
const char * gguf_get_key(const struct gguf_context * ctx, int64_t key_id);
enum gguf_type gguf_get_kv_type(const struct gguf_context * ctx, int64_t key_id);
enum gguf_type gguf_get_arr_type(const struct gguf_context * ctx, int64_t key_id);

// Scalar getters abort on a type mismatch: check gguf_get_kv_type first.
uint8_t      gguf_get_val_u8  (const struct gguf_context * ctx, int64_t key_id);
int8_t       gguf_get_val_i8  (const struct gguf_context * ctx, int64_t key_id);
uint16_t     gguf_get_val_u16 (const struct gguf_context * ctx, int64_t key_id);
int16_t      gguf_get_val_i16 (const struct gguf_context * ctx, int64_t key_id);
uint32_t     gguf_get_val_u32 (const struct gguf_context * ctx, int64_t key_id);
int32_t      gguf_get_val_i32 (const struct gguf_context * ctx, int64_t key_id);
float        gguf_get_val_f32 (const struct gguf_context * ctx, int64_t key_id);
uint64_t     gguf_get_val_u64 (const struct gguf_context * ctx, int64_t key_id);
int64_t      gguf_get_val_i64 (const struct gguf_context * ctx, int64_t key_id);
double       gguf_get_val_f64 (const struct gguf_context * ctx, int64_t key_id);
bool         gguf_get_val_bool(const struct gguf_context * ctx, int64_t key_id);
const char * gguf_get_val_str (const struct gguf_context * ctx, int64_t key_id);
size_t       gguf_get_val_str_len(const struct gguf_context * ctx, int64_t key_id);
const void * gguf_get_val_data(const struct gguf_context * ctx, int64_t key_id);  // scalar value bytes

size_t       gguf_get_arr_n   (const struct gguf_context * ctx, int64_t key_id);
const void * gguf_get_arr_data(const struct gguf_context * ctx, int64_t key_id);  // not for strings
const char * gguf_get_arr_str (const struct gguf_context * ctx, int64_t key_id, size_t i);
size_t       gguf_get_arr_str_len(const struct gguf_context * ctx, int64_t key_id, size_t i);

int64_t      gguf_get_n_tensors(const struct gguf_context * ctx);
int64_t      gguf_find_tensor(const struct gguf_context * ctx, const char * name);   // -1 if absent
const char * gguf_get_tensor_name(const struct gguf_context * ctx, int64_t tensor_id);
enum ggml_type gguf_get_tensor_type(const struct gguf_context * ctx, int64_t tensor_id);
int          gguf_get_tensor_n_dims(const struct gguf_context * ctx, int64_t tensor_id);
int64_t      gguf_get_tensor_ne(const struct gguf_context * ctx, int64_t tensor_id, int dim);
size_t       gguf_get_tensor_offset(const struct gguf_context * ctx, int64_t tensor_id); // relative to data offset
size_t       gguf_get_tensor_size(const struct gguf_context * ctx, int64_t tensor_id);

// Writing. Setters replace an existing key of the same name.
void gguf_set_val_u8  (struct gguf_context * ctx, const char * key, uint8_t  val);
void gguf_set_val_i8  (struct gguf_context * ctx, const char * key, int8_t   val);
void gguf_set_val_u16 (struct gguf_context * ctx, const char * key, uint16_t val);
void gguf_set_val_i16 (struct gguf_context * ctx, const char * key, int16_t  val);
void gguf_set_val_u32 (struct gguf_context * ctx, const char * key, uint32_t val);
void gguf_set_val_i32 (struct gguf_context * ctx, const char * key, int32_t  val);
void gguf_set_val_f32 (struct gguf_context * ctx, const char * key, float    val);
void gguf_set_val_u64 (struct gguf_context * ctx, const char * key, uint64_t val);
void gguf_set_val_i64 (struct gguf_context * ctx, const char * key, int64_t  val);
void gguf_set_val_f64 (struct gguf_context * ctx, const char * key, double   val);
void gguf_set_val_bool(struct gguf_context * ctx, const char * key, bool     val);
void gguf_set_val_str (struct gguf_context * ctx, const char * key, const char * val);
void gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n);
void gguf_set_arr_str (struct gguf_context * ctx, const char * key, const char ** data, size_t n);
void gguf_set_kv      (struct gguf_context * ctx, const struct gguf_context * src);  // copy all keys
void gguf_remove_key  (struct gguf_context * ctx, const char * key);

// Add a tensor (its shape and type; data taken from tensor->data when writing, if not NULL).
void gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor);
// Change the type of a tensor already added (recomputes offsets); data set separately.
void gguf_set_tensor_type(struct gguf_context * ctx, const char * name, enum ggml_type type);
void gguf_set_tensor_data(struct gguf_context * ctx, const char * name, const void * data);

// Write the whole file to a temporary name and rename it. Returns false with gguf_last_error().
bool gguf_write_to_file(const struct gguf_context * ctx, const char * fname, bool only_meta);
// Size of the metadata part (header, kv, tensor infos, padding) and writing it into a buffer:
// lets a writer stream tensor data itself after the metadata.
size_t gguf_get_meta_size(const struct gguf_context * ctx);
void   gguf_get_meta_data(const struct gguf_context * ctx, void * data);

// ---------------------------------------------------------------------------------------------
// Split models: part i (0-based) of n is "<prefix>-%05d-of-%05d.gguf" with i + 1 and n, and holds
// split.no = i (u16), split.count = n (u16), split.tensors.count = total tensors (i32).

#define GGUF_KEY_SPLIT_NO            "split.no"
#define GGUF_KEY_SPLIT_COUNT         "split.count"
#define GGUF_KEY_SPLIT_TENSORS_COUNT "split.tensors.count"

// The path of part split_no (0-based) of split_count; snprintf semantics (returns the full length).
int gguf_split_path(char * path, size_t maxlen, const char * prefix, int split_no, int split_count);
// The prefix of split_path if it is the name of part split_no of split_count; returns its
// length, or 0 when the name does not end as that part's name would.
int gguf_split_prefix(char * prefix, size_t maxlen, const char * split_path, int split_no, int split_count);
// split.count of a parsed file: 1 when the key is absent, 0 when it is not a valid integer.
int gguf_split_count(const struct gguf_context * ctx);

// A model that may be split across several files. gguf_split_open parses the metadata of the
// given file and, when it is the first part of a split model, of all the other parts (no tensor
// data is read), checking split.no, split.count, split.tensors.count and that tensor names are
// unique across parts. An unsplit file is a model of one part. NULL + gguf_last_error() on error
// (a missing part is named).
struct gguf_split;
struct gguf_split * gguf_split_open(const char * path);
void gguf_split_free(struct gguf_split * split);
int  gguf_split_n_parts(const struct gguf_split * split);
const char * gguf_split_part_path(const struct gguf_split * split, int part);
const struct gguf_context * gguf_split_part(const struct gguf_split * split, int part);
int64_t gguf_split_n_tensors(const struct gguf_split * split);  // over all parts
// The tensor's id within its part (and the part in *part); -1 if no part has it.
int64_t gguf_split_find_tensor(const struct gguf_split * split, const char * name, int * part);

#ifdef __cplusplus
}
#endif
