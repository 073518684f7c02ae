#pragma once

// GGUF model-file container as whisper.rn 0.4.3's gguf.h declares it: key-value metadata of
// twelve scalar types, strings and arrays, followed by tensor infos (name, shape, type, offset)
// and an aligned data section. All integers little-endian; counts and string lengths are uint64;
// offsets are relative to the start of the data section and multiples of the alignment
// ("general.alignment", uint32, a power of two; WSP_GGUF_DEFAULT_ALIGNMENT when absent).

#include "ggml.h"

#include <stdbool.h>
#include <stdint.h>

#define WSP_GGUF_MAGIC   "GGUF"
#define WSP_GGUF_VERSION 3

#define WSP_GGUF_KEY_GENERAL_ALIGNMENT "general.alignment"

#define WSP_GGUF_DEFAULT_ALIGNMENT 32

#ifdef __cplusplus
extern "C" {
#endif

// value types of the key-value pairs; the ids are part of the file format
enum wsp_gguf_type {
    WSP_GGUF_TYPE_UINT8   = 0,
    WSP_GGUF_TYPE_INT8    = 1,
    WSP_GGUF_TYPE_UINT16  = 2,
    WSP_GGUF_TYPE_INT16   = 3,
    WSP_GGUF_TYPE_UINT32  = 4,
    WSP_GGUF_TYPE_INT32   = 5,
    WSP_GGUF_TYPE_FLOAT32 = 6,
    WSP_GGUF_TYPE_BOOL    = 7,
    WSP_GGUF_TYPE_STRING  = 8,
    WSP_GGUF_TYPE_ARRAY   = 9,
    WSP_GGUF_TYPE_UINT64  = 10,
    WSP_GGUF_TYPE_INT64   = 11,
    WSP_GGUF_TYPE_FLOAT64 = 12,
    WSP_GGUF_TYPE_COUNT, // one past the last type
};

struct wsp_gguf_context;

struct wsp_gguf_init_params {
    bool no_alloc; // read the metadata only: tensors (if ctx is set) get no data

    // when not NULL: a new wsp_ggml_context holding every tensor of the file is returned here;
    // with data, those tensors are also the data source when the gguf context is written again
    struct wsp_ggml_context ** ctx;
};

WSP_GGML_API struct wsp_gguf_context * wsp_gguf_init_empty(void);
// NULL with a logged message when the file cannot be read or is malformed
WSP_GGML_API struct wsp_gguf_context * wsp_gguf_init_from_file(const char * fname, struct wsp_gguf_init_params params);
// the same from the bytes of a whole GGUF file in memory (whisper.rn's header names this function
// in a comment without a signature; this is ours)
WSP_GGML_API struct wsp_gguf_context * wsp_gguf_init_from_buffer(const void * data, size_t size,
                                                             struct wsp_gguf_init_params params);

WSP_GGML_API void wsp_gguf_free(struct wsp_gguf_context * ctx);

WSP_GGML_API const char * wsp_gguf_type_name(enum wsp_gguf_type type);

WSP_GGML_API uint32_t wsp_gguf_get_version    (const struct wsp_gguf_context * ctx);
WSP_GGML_API size_t   wsp_gguf_get_alignment  (const struct wsp_gguf_context * ctx);
WSP_GGML_API size_t   wsp_gguf_get_data_offset(const struct wsp_gguf_context * ctx); // 0 unless read from a file

WSP_GGML_API int64_t      wsp_gguf_get_n_kv(const struct wsp_gguf_context * ctx);
WSP_GGML_API int64_t      wsp_gguf_find_key(const struct wsp_gguf_context * ctx, const char * key); // -1 when absent
WSP_GGML_API const char * wsp_gguf_get_key (const struct wsp_gguf_context * ctx, int64_t key_id);

// WSP_GGUF_TYPE_COUNT for an invalid key id (and, for get_arr_type, a key that is no array)
WSP_GGML_API enum wsp_gguf_type wsp_gguf_get_kv_type (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API enum wsp_gguf_type wsp_gguf_get_arr_type(const struct wsp_gguf_context * ctx, int64_t key_id);

// a getter of the wrong type for the key (or an invalid key id) logs an error and returns 0 / NULL
WSP_GGML_API uint8_t      wsp_gguf_get_val_u8  (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API int8_t       wsp_gguf_get_val_i8  (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API uint16_t     wsp_gguf_get_val_u16 (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API int16_t      wsp_gguf_get_val_i16 (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API uint32_t     wsp_gguf_get_val_u32 (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API int32_t      wsp_gguf_get_val_i32 (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API float        wsp_gguf_get_val_f32 (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API uint64_t     wsp_gguf_get_val_u64 (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API int64_t      wsp_gguf_get_val_i64 (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API double       wsp_gguf_get_val_f64 (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API bool         wsp_gguf_get_val_bool(const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API const char * wsp_gguf_get_val_str (const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API const void * wsp_gguf_get_val_data(const struct wsp_gguf_context * ctx, int64_t key_id);
WSP_GGML_API size_t       wsp_gguf_get_arr_n   (const struct wsp_gguf_context * ctx, int64_t key_id); // 1 for a scalar

// the elements of a non-string array, packed as in the file (bool elements are one byte each)
WSP_GGML_API const void * wsp_gguf_get_arr_data(const struct wsp_gguf_context * ctx, int64_t key_id);

// element i of a string array
WSP_GGML_API const char * wsp_gguf_get_arr_str (const struct wsp_gguf_context * ctx, int64_t key_id, size_t i);

WSP_GGML_API int64_t        wsp_gguf_get_n_tensors    (const struct wsp_gguf_context * ctx);
WSP_GGML_API int64_t        wsp_gguf_find_tensor      (const struct wsp_gguf_context * ctx, const char * name); // -1 when absent
WSP_GGML_API size_t         wsp_gguf_get_tensor_offset(const struct wsp_gguf_context * ctx, int64_t tensor_id);
WSP_GGML_API const char *   wsp_gguf_get_tensor_name  (const struct wsp_gguf_context * ctx, int64_t tensor_id);
WSP_GGML_API enum wsp_ggml_type wsp_gguf_get_tensor_type  (const struct wsp_gguf_context * ctx, int64_t tensor_id);
WSP_GGML_API size_t         wsp_gguf_get_tensor_size  (const struct wsp_gguf_context * ctx, int64_t tensor_id);

// removes the key if present; returns the id it had, or -1
WSP_GGML_API int64_t wsp_gguf_remove_key(struct wsp_gguf_context * ctx, const char * key);

// set a value: an existing pair of that key is removed, the new one goes last
WSP_GGML_API void wsp_gguf_set_val_u8  (struct wsp_gguf_context * ctx, const char * key, uint8_t      val);
WSP_GGML_API void wsp_gguf_set_val_i8  (struct wsp_gguf_context * ctx, const char * key, int8_t       val);
WSP_GGML_API void wsp_gguf_set_val_u16 (struct wsp_gguf_context * ctx, const char * key, uint16_t     val);
WSP_GGML_API void wsp_gguf_set_val_i16 (struct wsp_gguf_context * ctx, const char * key, int16_t      val);
WSP_GGML_API void wsp_gguf_set_val_u32 (struct wsp_gguf_context * ctx, const char * key, uint32_t     val);
WSP_GGML_API void wsp_gguf_set_val_i32 (struct wsp_gguf_context * ctx, const char * key, int32_t      val);
WSP_GGML_API void wsp_gguf_set_val_f32 (struct wsp_gguf_context * ctx, const char * key, float        val);
WSP_GGML_API void wsp_gguf_set_val_u64 (struct wsp_gguf_context * ctx, const char * key, uint64_t     val);
WSP_GGML_API void wsp_gguf_set_val_i64 (struct wsp_gguf_context * ctx, const char * key, int64_t      val);
WSP_GGML_API void wsp_gguf_set_val_f64 (struct wsp_gguf_context * ctx, const char * key, double       val);
WSP_GGML_API void wsp_gguf_set_val_bool(struct wsp_gguf_context * ctx, const char * key, bool         val);
WSP_GGML_API void wsp_gguf_set_val_str (struct wsp_gguf_context * ctx, const char * key, const char * val);

// an array of n elements of a scalar (non-string) type, copied from data
WSP_GGML_API void wsp_gguf_set_arr_data(struct wsp_gguf_context * ctx, const char * key, enum wsp_gguf_type type, const void * data, size_t n);

// an array of n strings, copied
WSP_GGML_API void wsp_gguf_set_arr_str (struct wsp_gguf_context * ctx, const char * key, const char ** data, size_t n);

// copy every key-value pair of src into ctx (set semantics as above)
WSP_GGML_API void wsp_gguf_set_kv(struct wsp_gguf_context * ctx, const struct wsp_gguf_context * src);

// add the tensor's metadata (names are unique); its data pointer is kept, not copied, for writing
WSP_GGML_API void wsp_gguf_add_tensor(struct wsp_gguf_context * ctx, const struct wsp_ggml_tensor * tensor);

// change a tensor's type; the offsets of the tensors after it move so that the data stays one
// contiguous block (up to alignment padding)
WSP_GGML_API void wsp_gguf_set_tensor_type(struct wsp_gguf_context * ctx, const char * name, enum wsp_ggml_type type);

// the tensor's data for writing: wsp_gguf_get_tensor_size bytes at data, kept (not copied) until written
WSP_GGML_API void wsp_gguf_set_tensor_data(struct wsp_gguf_context * ctx, const char * name, const void * data);

// Writing a file: in one pass with write_to_file(ctx, fname, false); or the metadata alone with
// only_meta = true and the tensor data appended by the caller; or get_meta_size bytes reserved at
// the start of the file, the data written after them, and get_meta_data written over the reserve.

// false with a logged message on failure
WSP_GGML_API bool wsp_gguf_write_to_file(const struct wsp_gguf_context * ctx, const char * fname, bool only_meta);

// bytes of the metadata (header, key-value pairs, tensor infos) with the padding up to the data section
WSP_GGML_API size_t wsp_gguf_get_meta_size(const struct wsp_gguf_context * ctx);

// writes wsp_gguf_get_meta_size bytes to data
WSP_GGML_API void   wsp_gguf_get_meta_data(const struct wsp_gguf_context * ctx, void * data);

#ifdef __cplusplus
}
#endif
