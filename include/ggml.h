#pragma once

// wsp-ggml core API: tensors, contexts, op builders and compute graphs.
// Names, enum ids and the tensor struct layout are those of the ggml API that whisper.rn 0.4.0
// ships (prefix wsp_ggml_ / WSP_GGML_), so client code and model files work unchanged.
// Building a graph only records ops; a backend (ggml-cpu.h, ggml-backend.h) computes it.

#ifdef WSP_GGML_SHARED
#    if defined(_WIN32) && !defined(__MINGW32__)
#        ifdef WSP_GGML_BUILD
#            define WSP_GGML_API __declspec(dllexport) extern
#        else
#            define WSP_GGML_API __declspec(dllimport) extern
#        endif
#    else
#        define WSP_GGML_API __attribute__((visibility("default"))) extern
#    endif
#else
#    define WSP_GGML_API extern
#endif

#ifdef __GNUC__
#    define WSP_GGML_DEPRECATED(func, hint) func __attribute__((deprecated(hint)))
#else
#    define WSP_GGML_DEPRECATED(func, hint) func
#endif

#ifndef __GNUC__
#    define WSP_GGML_ATTRIBUTE_FORMAT(...)
#elif defined(__MINGW32__) && !defined(__clang__)
#    define WSP_GGML_ATTRIBUTE_FORMAT(...) __attribute__((format(gnu_printf, __VA_ARGS__)))
#else
#    define WSP_GGML_ATTRIBUTE_FORMAT(...) __attribute__((format(printf, __VA_ARGS__)))
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define WSP_GGML_FILE_MAGIC   0x67676d6c // "ggml"
#define WSP_GGML_FILE_VERSION 2

#define WSP_GGML_QNT_VERSION        2    // bump when the quantisation format changes
#define WSP_GGML_QNT_VERSION_FACTOR 1000 // do not change

#define WSP_GGML_MAX_DIMS          4
#define WSP_GGML_MAX_PARAMS        2048
#define WSP_GGML_MAX_SRC           10
#define WSP_GGML_MAX_N_THREADS     512
#define WSP_GGML_MAX_OP_PARAMS     64
#define WSP_GGML_MAX_NAME          64
#define WSP_GGML_DEFAULT_N_THREADS 4
#define WSP_GGML_DEFAULT_GRAPH_SIZE 2048

#if UINTPTR_MAX == 0xFFFFFFFF
#    define WSP_GGML_MEM_ALIGN 4
#else
#    define WSP_GGML_MEM_ALIGN 16
#endif

#define WSP_GGML_EXIT_SUCCESS 0
#define WSP_GGML_EXIT_ABORTED 1

#define WSP_GGML_ROPE_TYPE_NEOX 2

#define WSP_GGUF_MAGIC "GGUF"

#define WSP_GGML_UNUSED(x) (void)(x)

#define WSP_GGML_PAD(x, n) (((x) + (n) - 1) & ~((n) - 1))

#ifdef __cplusplus
#    define WSP_GGML_NORETURN [[noreturn]]
#elif defined(_MSC_VER)
#    define WSP_GGML_NORETURN __declspec(noreturn)
#else
#    define WSP_GGML_NORETURN _Noreturn
#endif

#define WSP_GGML_ABORT(...) wsp_ggml_abort(__FILE__, __LINE__, __VA_ARGS__)
#define WSP_GGML_ASSERT(x) if (!(x)) WSP_GGML_ABORT("WSP_GGML_ASSERT(%s) failed", #x)

// Shape and stride locals for kernels: WSP_GGML_TENSOR_LOCALS(int64_t, ne0, t, ne) declares
// ne00..ne03 from t->ne.
#define WSP_GGML_TENSOR_LOCALS_1(type, prefix, pointer, array) \
    const type prefix##0 = (pointer)->array[0];                \
    WSP_GGML_UNUSED(prefix##0);
#define WSP_GGML_TENSOR_LOCALS_2(type, prefix, pointer, array) \
    WSP_GGML_TENSOR_LOCALS_1(type, prefix, pointer, array)     \
    const type prefix##1 = (pointer)->array[1];                \
    WSP_GGML_UNUSED(prefix##1);
#define WSP_GGML_TENSOR_LOCALS_3(type, prefix, pointer, array) \
    WSP_GGML_TENSOR_LOCALS_2(type, prefix, pointer, array)     \
    const type prefix##2 = (pointer)->array[2];                \
    WSP_GGML_UNUSED(prefix##2);
#define WSP_GGML_TENSOR_LOCALS(type, prefix, pointer, array) \
    WSP_GGML_TENSOR_LOCALS_3(type, prefix, pointer, array)   \
    const type prefix##3 = (pointer)->array[3];              \
    WSP_GGML_UNUSED(prefix##3);

#ifdef __cplusplus
extern "C" {
#endif

WSP_GGML_NORETURN WSP_GGML_ATTRIBUTE_FORMAT(3, 4)
WSP_GGML_API void wsp_ggml_abort(const char * file, int line, const char * fmt, ...);

enum wsp_ggml_status {
    WSP_GGML_STATUS_ALLOC_FAILED = -2,
    WSP_GGML_STATUS_FAILED       = -1,
    WSP_GGML_STATUS_SUCCESS      = 0,
    WSP_GGML_STATUS_ABORTED      = 1,
};

WSP_GGML_API const char * wsp_ggml_status_to_string(enum wsp_ggml_status status);

// IEEE 754 binary16 and bfloat16 storage types
typedef uint16_t wsp_ggml_fp16_t;
WSP_GGML_API float           wsp_ggml_fp16_to_fp32(wsp_ggml_fp16_t);
WSP_GGML_API wsp_ggml_fp16_t wsp_ggml_fp32_to_fp16(float);
WSP_GGML_API void            wsp_ggml_fp16_to_fp32_row(const wsp_ggml_fp16_t *, float *, int64_t);
WSP_GGML_API void            wsp_ggml_fp32_to_fp16_row(const float *, wsp_ggml_fp16_t *, int64_t);

typedef struct { uint16_t bits; } wsp_ggml_bf16_t;
WSP_GGML_API wsp_ggml_bf16_t wsp_ggml_fp32_to_bf16(float);
WSP_GGML_API float           wsp_ggml_bf16_to_fp32(wsp_ggml_bf16_t);
WSP_GGML_API void            wsp_ggml_bf16_to_fp32_row(const wsp_ggml_bf16_t *, float *, int64_t);
WSP_GGML_API void            wsp_ggml_fp32_to_bf16_row_ref(const float *, wsp_ggml_bf16_t *, int64_t);
WSP_GGML_API void            wsp_ggml_fp32_to_bf16_row(const float *, wsp_ggml_bf16_t *, int64_t);

struct wsp_ggml_object;
struct wsp_ggml_context;
struct wsp_ggml_cgraph;

// Type ids are part of the model file format: never renumber.
enum wsp_ggml_type {
    WSP_GGML_TYPE_F32     = 0,
    WSP_GGML_TYPE_F16     = 1,
    WSP_GGML_TYPE_Q4_0    = 2,
    WSP_GGML_TYPE_Q4_1    = 3,
    // 4 and 5 (Q4_2, Q4_3) were removed upstream
    WSP_GGML_TYPE_Q5_0    = 6,
    WSP_GGML_TYPE_Q5_1    = 7,
    WSP_GGML_TYPE_Q8_0    = 8,
    WSP_GGML_TYPE_Q8_1    = 9,
    WSP_GGML_TYPE_Q2_K    = 10,
    WSP_GGML_TYPE_Q3_K    = 11,
    WSP_GGML_TYPE_Q4_K    = 12,
    WSP_GGML_TYPE_Q5_K    = 13,
    WSP_GGML_TYPE_Q6_K    = 14,
    WSP_GGML_TYPE_Q8_K    = 15,
    WSP_GGML_TYPE_IQ2_XXS = 16,
    WSP_GGML_TYPE_IQ2_XS  = 17,
    WSP_GGML_TYPE_IQ3_XXS = 18,
    WSP_GGML_TYPE_IQ1_S   = 19,
    WSP_GGML_TYPE_IQ4_NL  = 20,
    WSP_GGML_TYPE_IQ3_S   = 21,
    WSP_GGML_TYPE_IQ2_S   = 22,
    WSP_GGML_TYPE_IQ4_XS  = 23,
    WSP_GGML_TYPE_I8      = 24,
    WSP_GGML_TYPE_I16     = 25,
    WSP_GGML_TYPE_I32     = 26,
    WSP_GGML_TYPE_I64     = 27,
    WSP_GGML_TYPE_F64     = 28,
    WSP_GGML_TYPE_IQ1_M   = 29,
    WSP_GGML_TYPE_BF16    = 30,
    // 31-33 (interleaved Q4_0 variants) were removed upstream
    WSP_GGML_TYPE_TQ1_0   = 34,
    WSP_GGML_TYPE_TQ2_0   = 35,
    // 36-38 (interleaved IQ4_NL variants) were removed upstream
    WSP_GGML_TYPE_COUNT   = 39,
};

// precision requested of an op (mul_mat, flash_attn_ext)
enum wsp_ggml_prec {
    WSP_GGML_PREC_DEFAULT = 0,
    WSP_GGML_PREC_F32     = 10,
};

// model file types
enum wsp_ggml_ftype {
    WSP_GGML_FTYPE_UNKNOWN              = -1,
    WSP_GGML_FTYPE_ALL_F32              = 0,
    WSP_GGML_FTYPE_MOSTLY_F16           = 1,
    WSP_GGML_FTYPE_MOSTLY_Q4_0          = 2,
    WSP_GGML_FTYPE_MOSTLY_Q4_1          = 3,
    WSP_GGML_FTYPE_MOSTLY_Q4_1_SOME_F16 = 4,
    WSP_GGML_FTYPE_MOSTLY_Q8_0          = 7,
    WSP_GGML_FTYPE_MOSTLY_Q5_0          = 8,
    WSP_GGML_FTYPE_MOSTLY_Q5_1          = 9,
    WSP_GGML_FTYPE_MOSTLY_Q2_K          = 10,
    WSP_GGML_FTYPE_MOSTLY_Q3_K          = 11,
    WSP_GGML_FTYPE_MOSTLY_Q4_K          = 12,
    WSP_GGML_FTYPE_MOSTLY_Q5_K          = 13,
    WSP_GGML_FTYPE_MOSTLY_Q6_K          = 14,
    WSP_GGML_FTYPE_MOSTLY_IQ2_XXS       = 15,
    WSP_GGML_FTYPE_MOSTLY_IQ2_XS        = 16,
    WSP_GGML_FTYPE_MOSTLY_IQ3_XXS       = 17,
    WSP_GGML_FTYPE_MOSTLY_IQ1_S         = 18,
    WSP_GGML_FTYPE_MOSTLY_IQ4_NL        = 19,
    WSP_GGML_FTYPE_MOSTLY_IQ3_S         = 20,
    WSP_GGML_FTYPE_MOSTLY_IQ2_S         = 21,
    WSP_GGML_FTYPE_MOSTLY_IQ4_XS        = 22,
    WSP_GGML_FTYPE_MOSTLY_IQ1_M         = 23,
    WSP_GGML_FTYPE_MOSTLY_BF16          = 24,
};

// Op ids keep upstream's order (SPEC.md); ops without a builder here are refused by every backend.
enum wsp_ggml_op {
    WSP_GGML_OP_NONE = 0,

    WSP_GGML_OP_DUP,
    WSP_GGML_OP_ADD,
    WSP_GGML_OP_ADD1,
    WSP_GGML_OP_ACC,
    WSP_GGML_OP_SUB,
    WSP_GGML_OP_MUL,
    WSP_GGML_OP_DIV,
    WSP_GGML_OP_SQR,
    WSP_GGML_OP_SQRT,
    WSP_GGML_OP_LOG,
    WSP_GGML_OP_SIN,
    WSP_GGML_OP_COS,
    WSP_GGML_OP_SUM,
    WSP_GGML_OP_SUM_ROWS,
    WSP_GGML_OP_MEAN,
    WSP_GGML_OP_ARGMAX,
    WSP_GGML_OP_COUNT_EQUAL,
    WSP_GGML_OP_REPEAT,
    WSP_GGML_OP_REPEAT_BACK,
    WSP_GGML_OP_CONCAT,
    WSP_GGML_OP_SILU_BACK,
    WSP_GGML_OP_NORM,
    WSP_GGML_OP_RMS_NORM,
    WSP_GGML_OP_RMS_NORM_BACK,
    WSP_GGML_OP_GROUP_NORM,
    WSP_GGML_OP_L2_NORM,

    WSP_GGML_OP_MUL_MAT,
    WSP_GGML_OP_MUL_MAT_ID,
    WSP_GGML_OP_OUT_PROD,

    WSP_GGML_OP_SCALE,
    WSP_GGML_OP_SET,
    WSP_GGML_OP_CPY,
    WSP_GGML_OP_CONT,
    WSP_GGML_OP_RESHAPE,
    WSP_GGML_OP_VIEW,
    WSP_GGML_OP_PERMUTE,
    WSP_GGML_OP_TRANSPOSE,
    WSP_GGML_OP_GET_ROWS,
    WSP_GGML_OP_GET_ROWS_BACK,
    WSP_GGML_OP_DIAG,
    WSP_GGML_OP_DIAG_MASK_INF,
    WSP_GGML_OP_DIAG_MASK_ZERO,
    WSP_GGML_OP_SOFT_MAX,
    WSP_GGML_OP_SOFT_MAX_BACK,
    WSP_GGML_OP_ROPE,
    WSP_GGML_OP_ROPE_BACK,
    WSP_GGML_OP_CLAMP,
    WSP_GGML_OP_CONV_TRANSPOSE_1D,
    WSP_GGML_OP_IM2COL,
    WSP_GGML_OP_IM2COL_BACK,
    WSP_GGML_OP_CONV_2D_DW,
    WSP_GGML_OP_CONV_TRANSPOSE_2D,
    WSP_GGML_OP_POOL_1D,
    WSP_GGML_OP_POOL_2D,
    WSP_GGML_OP_POOL_2D_BACK,
    WSP_GGML_OP_UPSCALE,
    WSP_GGML_OP_PAD,
    WSP_GGML_OP_PAD_REFLECT_1D,
    WSP_GGML_OP_ROLL,
    WSP_GGML_OP_ARANGE,
    WSP_GGML_OP_TIMESTEP_EMBEDDING,
    WSP_GGML_OP_ARGSORT,
    WSP_GGML_OP_LEAKY_RELU,

    WSP_GGML_OP_FLASH_ATTN_EXT,
    WSP_GGML_OP_FLASH_ATTN_BACK,
    WSP_GGML_OP_SSM_CONV,
    WSP_GGML_OP_SSM_SCAN,
    WSP_GGML_OP_WIN_PART,
    WSP_GGML_OP_WIN_UNPART,
    WSP_GGML_OP_GET_REL_POS,
    WSP_GGML_OP_ADD_REL_POS,
    WSP_GGML_OP_RWKV_WKV6,
    WSP_GGML_OP_GATED_LINEAR_ATTN,
    WSP_GGML_OP_RWKV_WKV7,

    WSP_GGML_OP_UNARY,

    WSP_GGML_OP_MAP_CUSTOM1,
    WSP_GGML_OP_MAP_CUSTOM2,
    WSP_GGML_OP_MAP_CUSTOM3,

    WSP_GGML_OP_CUSTOM,

    WSP_GGML_OP_CROSS_ENTROPY_LOSS,
    WSP_GGML_OP_CROSS_ENTROPY_LOSS_BACK,
    WSP_GGML_OP_OPT_STEP_ADAMW,

    WSP_GGML_OP_COUNT,
};

enum wsp_ggml_unary_op {
    WSP_GGML_UNARY_OP_ABS,
    WSP_GGML_UNARY_OP_SGN,
    WSP_GGML_UNARY_OP_NEG,
    WSP_GGML_UNARY_OP_STEP,
    WSP_GGML_UNARY_OP_TANH,
    WSP_GGML_UNARY_OP_ELU,
    WSP_GGML_UNARY_OP_RELU,
    WSP_GGML_UNARY_OP_SIGMOID,
    WSP_GGML_UNARY_OP_GELU,
    WSP_GGML_UNARY_OP_GELU_QUICK,
    WSP_GGML_UNARY_OP_SILU,
    WSP_GGML_UNARY_OP_HARDSWISH,
    WSP_GGML_UNARY_OP_HARDSIGMOID,
    WSP_GGML_UNARY_OP_EXP,
    WSP_GGML_UNARY_OP_GELU_ERF,

    WSP_GGML_UNARY_OP_COUNT,
};

enum wsp_ggml_object_type {
    WSP_GGML_OBJECT_TYPE_TENSOR,
    WSP_GGML_OBJECT_TYPE_GRAPH,
    WSP_GGML_OBJECT_TYPE_WORK_BUFFER,
};

enum wsp_ggml_log_level {
    WSP_GGML_LOG_LEVEL_NONE  = 0,
    WSP_GGML_LOG_LEVEL_DEBUG = 1,
    WSP_GGML_LOG_LEVEL_INFO  = 2,
    WSP_GGML_LOG_LEVEL_WARN  = 3,
    WSP_GGML_LOG_LEVEL_ERROR = 4,
    WSP_GGML_LOG_LEVEL_CONT  = 5, // continue the previous message
};

enum wsp_ggml_tensor_flag {
    WSP_GGML_TENSOR_FLAG_INPUT  = 1,
    WSP_GGML_TENSOR_FLAG_OUTPUT = 2,
    WSP_GGML_TENSOR_FLAG_PARAM  = 4,
    WSP_GGML_TENSOR_FLAG_LOSS   = 8,
};

struct wsp_ggml_init_params {
    size_t mem_size;   // bytes
    void * mem_buffer; // if NULL, memory is allocated internally
    bool   no_alloc;   // do not allocate memory for tensor data
};

// n-dimensional tensor; layout fixed by the contract (SPEC.md)
struct wsp_ggml_tensor {
    enum wsp_ggml_type type;

    struct wsp_ggml_backend_buffer * buffer;

    int64_t ne[WSP_GGML_MAX_DIMS]; // number of elements
    size_t  nb[WSP_GGML_MAX_DIMS]; // stride in bytes: nb[0] = type_size, nb[1] = nb[0] * (ne[0] / blck_size) + padding, ...

    enum wsp_ggml_op op;

    // op parameters; int32_t for alignment
    int32_t op_params[WSP_GGML_MAX_OP_PARAMS / sizeof(int32_t)];

    int32_t flags;

    struct wsp_ggml_tensor * src[WSP_GGML_MAX_SRC];

    // source tensor and offset for views
    struct wsp_ggml_tensor * view_src;
    size_t                   view_offs;

    void * data;

    char name[WSP_GGML_MAX_NAME];

    void * extra; // backend-specific

    char padding[8];
};

static const size_t WSP_GGML_TENSOR_SIZE = sizeof(struct wsp_ggml_tensor);

// Abort callback: returning true stops the current graph compute between nodes.
typedef bool (*wsp_ggml_abort_callback)(void * data);

// 16-byte unique identifier of a backend implementation
typedef uint8_t wsp_ggml_guid[16];
typedef wsp_ggml_guid * wsp_ggml_guid_t;

WSP_GGML_API bool wsp_ggml_guid_matches(wsp_ggml_guid_t guid_a, wsp_ggml_guid_t guid_b);

// timing
WSP_GGML_API void    wsp_ggml_time_init(void); // call once at the start of the program
WSP_GGML_API int64_t wsp_ggml_time_ms(void);
WSP_GGML_API int64_t wsp_ggml_time_us(void);
WSP_GGML_API int64_t wsp_ggml_cycles(void);
WSP_GGML_API int64_t wsp_ggml_cycles_per_ms(void);

WSP_GGML_API void wsp_ggml_print_object (const struct wsp_ggml_object * obj);
WSP_GGML_API void wsp_ggml_print_objects(const struct wsp_ggml_context * ctx);

WSP_GGML_API int64_t wsp_ggml_nelements (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API int64_t wsp_ggml_nrows     (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API size_t  wsp_ggml_nbytes    (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API size_t  wsp_ggml_nbytes_pad(const struct wsp_ggml_tensor * tensor); // nbytes padded to WSP_GGML_MEM_ALIGN

WSP_GGML_API int64_t wsp_ggml_blck_size(enum wsp_ggml_type type);
WSP_GGML_API size_t  wsp_ggml_type_size(enum wsp_ggml_type type);             // bytes per block
WSP_GGML_API size_t  wsp_ggml_row_size (enum wsp_ggml_type type, int64_t ne); // bytes of a row of ne elements

WSP_GGML_API const char * wsp_ggml_type_name(enum wsp_ggml_type type);
WSP_GGML_API const char * wsp_ggml_op_name  (enum wsp_ggml_op   op);
WSP_GGML_API const char * wsp_ggml_op_symbol(enum wsp_ggml_op   op);

WSP_GGML_API const char * wsp_ggml_unary_op_name(enum wsp_ggml_unary_op op);
WSP_GGML_API const char * wsp_ggml_op_desc(const struct wsp_ggml_tensor * t); // unary or op name

WSP_GGML_API size_t wsp_ggml_element_size(const struct wsp_ggml_tensor * tensor);

WSP_GGML_API bool wsp_ggml_is_quantized(enum wsp_ggml_type type);

// the tensor type that most tensors of a model file of this file type have
WSP_GGML_API enum wsp_ggml_type wsp_ggml_ftype_to_wsp_ggml_type(enum wsp_ggml_ftype ftype);

WSP_GGML_API bool wsp_ggml_is_transposed(const struct wsp_ggml_tensor * tensor);
WSP_GGML_API bool wsp_ggml_is_permuted  (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API bool wsp_ggml_is_empty     (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API bool wsp_ggml_is_scalar    (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API bool wsp_ggml_is_vector    (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API bool wsp_ggml_is_matrix    (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API bool wsp_ggml_is_3d        (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API int  wsp_ggml_n_dims       (const struct wsp_ggml_tensor * tensor); // 1 for scalars

WSP_GGML_API bool wsp_ggml_is_contiguous  (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API bool wsp_ggml_is_contiguous_0(const struct wsp_ggml_tensor * tensor); // same as is_contiguous
WSP_GGML_API bool wsp_ggml_is_contiguous_1(const struct wsp_ggml_tensor * tensor); // contiguous for dims >= 1
WSP_GGML_API bool wsp_ggml_is_contiguous_2(const struct wsp_ggml_tensor * tensor); // contiguous for dims >= 2
WSP_GGML_API bool wsp_ggml_is_contiguous_rows(const struct wsp_ggml_tensor * tensor); // rows (dim 0) are packed

WSP_GGML_API bool wsp_ggml_are_same_shape (const struct wsp_ggml_tensor * t0, const struct wsp_ggml_tensor * t1);
WSP_GGML_API bool wsp_ggml_are_same_stride(const struct wsp_ggml_tensor * t0, const struct wsp_ggml_tensor * t1);
WSP_GGML_API bool wsp_ggml_can_repeat     (const struct wsp_ggml_tensor * t0, const struct wsp_ggml_tensor * t1);

// bytes of context memory a tensor or a graph takes besides tensor data
WSP_GGML_API size_t wsp_ggml_tensor_overhead(void);

// checks a buffer of `type` data (whole blocks): false, with a message naming the block, when a
// float value or a block's fp16 scale is NaN or infinite, or when nbytes is not a whole number of blocks
WSP_GGML_API bool wsp_ggml_validate_row_data(enum wsp_ggml_type type, const void * data, size_t nbytes);

// main

WSP_GGML_API struct wsp_ggml_context * wsp_ggml_init (struct wsp_ggml_init_params params);
WSP_GGML_API void                      wsp_ggml_reset(struct wsp_ggml_context * ctx);
WSP_GGML_API void                      wsp_ggml_free (struct wsp_ggml_context * ctx);

WSP_GGML_API size_t wsp_ggml_used_mem(const struct wsp_ggml_context * ctx);

WSP_GGML_API bool   wsp_ggml_get_no_alloc(struct wsp_ggml_context * ctx);
WSP_GGML_API void   wsp_ggml_set_no_alloc(struct wsp_ggml_context * ctx, bool no_alloc);

WSP_GGML_API void * wsp_ggml_get_mem_buffer     (const struct wsp_ggml_context * ctx);
WSP_GGML_API size_t wsp_ggml_get_mem_size       (const struct wsp_ggml_context * ctx);
WSP_GGML_API size_t wsp_ggml_get_max_tensor_size(const struct wsp_ggml_context * ctx);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_new_tensor(
        struct wsp_ggml_context * ctx,
        enum   wsp_ggml_type      type,
        int                       n_dims,
        const int64_t           * ne);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_new_tensor_1d(
        struct wsp_ggml_context * ctx,
        enum   wsp_ggml_type      type,
        int64_t                   ne0);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_new_tensor_2d(
        struct wsp_ggml_context * ctx,
        enum   wsp_ggml_type      type,
        int64_t                   ne0,
        int64_t                   ne1);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_new_tensor_3d(
        struct wsp_ggml_context * ctx,
        enum   wsp_ggml_type      type,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_new_tensor_4d(
        struct wsp_ggml_context * ctx,
        enum   wsp_ggml_type      type,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2,
        int64_t                   ne3);

// raw bytes in the context arena (NULL when the context is no_alloc)
WSP_GGML_API void * wsp_ggml_new_buffer(struct wsp_ggml_context * ctx, size_t nbytes);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_dup_tensor (struct wsp_ggml_context * ctx, const struct wsp_ggml_tensor * src);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_view_tensor(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * src);

// context tensor enumeration and lookup
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_get_first_tensor(const struct wsp_ggml_context * ctx);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_get_next_tensor (const struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * tensor);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_get_tensor(struct wsp_ggml_context * ctx, const char * name);

// flat index to coordinates
WSP_GGML_API void wsp_ggml_unravel_index(const struct wsp_ggml_tensor * tensor, int64_t i,
                                         int64_t * i0, int64_t * i1, int64_t * i2, int64_t * i3);

WSP_GGML_API enum wsp_ggml_unary_op wsp_ggml_get_unary_op(const struct wsp_ggml_tensor * tensor);

WSP_GGML_API void *  wsp_ggml_get_data    (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API float * wsp_ggml_get_data_f32(const struct wsp_ggml_tensor * tensor);

WSP_GGML_API const char *             wsp_ggml_get_name   (const struct wsp_ggml_tensor * tensor);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_set_name   (      struct wsp_ggml_tensor * tensor, const char * name);
WSP_GGML_ATTRIBUTE_FORMAT(2, 3)
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_format_name(      struct wsp_ggml_tensor * tensor, const char * fmt, ...);

// graph inputs and outputs: the allocator never overwrites an input before it is read,
// nor reuses the memory of an output
WSP_GGML_API void wsp_ggml_set_input (struct wsp_ggml_tensor * tensor);
WSP_GGML_API void wsp_ggml_set_output(struct wsp_ggml_tensor * tensor);

// fill a tensor that has host data with zeros
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_set_zero(struct wsp_ggml_tensor * tensor);

#include "ggml-ops-core.h"

//
// graphs
//

WSP_GGML_API void wsp_ggml_build_forward_expand(struct wsp_ggml_cgraph * cgraph, struct wsp_ggml_tensor * tensor);

// graph allocation in a context
WSP_GGML_API struct wsp_ggml_cgraph * wsp_ggml_new_graph       (struct wsp_ggml_context * ctx); // size = WSP_GGML_DEFAULT_GRAPH_SIZE, grads = false
WSP_GGML_API struct wsp_ggml_cgraph * wsp_ggml_new_graph_custom(struct wsp_ggml_context * ctx, size_t size, bool grads);
WSP_GGML_API struct wsp_ggml_cgraph * wsp_ggml_graph_dup       (struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * cgraph, bool force_grads);
WSP_GGML_API void                     wsp_ggml_graph_cpy       (struct wsp_ggml_cgraph * src, struct wsp_ggml_cgraph * dst);
WSP_GGML_API void                     wsp_ggml_graph_clear     (struct wsp_ggml_cgraph * cgraph); // forget every node and leaf

WSP_GGML_API int                       wsp_ggml_graph_size   (struct wsp_ggml_cgraph * cgraph);
WSP_GGML_API struct wsp_ggml_tensor *  wsp_ggml_graph_node   (struct wsp_ggml_cgraph * cgraph, int i); // if i < 0, returns nodes[n_nodes + i]
WSP_GGML_API struct wsp_ggml_tensor ** wsp_ggml_graph_nodes  (struct wsp_ggml_cgraph * cgraph);
WSP_GGML_API int                       wsp_ggml_graph_n_nodes(struct wsp_ggml_cgraph * cgraph);

WSP_GGML_API void wsp_ggml_graph_add_node(struct wsp_ggml_cgraph * cgraph, struct wsp_ggml_tensor * tensor);

WSP_GGML_API size_t wsp_ggml_graph_overhead(void);
WSP_GGML_API size_t wsp_ggml_graph_overhead_custom(size_t size, bool grads);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_graph_get_tensor(const struct wsp_ggml_cgraph * cgraph, const char * name);

// print info and performance information for the graph
WSP_GGML_API void wsp_ggml_graph_print(const struct wsp_ggml_cgraph * cgraph);

// Set the log callback; NULL restores the default (stderr). Messages are levelled.
typedef void (*wsp_ggml_log_callback)(enum wsp_ggml_log_level level, const char * text, void * user_data);
WSP_GGML_API void wsp_ggml_log_set(wsp_ggml_log_callback log_callback, void * user_data);

//
// quantization
//

// - wsp_ggml_quantize_init can be called multiple times with the same type
//   it will only initialize the quantization tables for the first call or after wsp_ggml_quantize_free
//   automatically called by wsp_ggml_quantize_chunk for convenience
//
// - wsp_ggml_quantize_free will free any memory allocated by wsp_ggml_quantize_init
//   call this at the end of the program to avoid memory leaks
//
// note: these are thread-safe
WSP_GGML_API void wsp_ggml_quantize_init(enum wsp_ggml_type type);
WSP_GGML_API void wsp_ggml_quantize_free(void);

// some quantization type cannot be used without an importance matrix
WSP_GGML_API bool wsp_ggml_quantize_requires_imatrix(enum wsp_ggml_type type);

// quantize nrows rows of n_per_row values starting at row `start / n_per_row`; returns bytes written
WSP_GGML_API size_t wsp_ggml_quantize_chunk(
        enum wsp_ggml_type   type,
        const float        * src,
        void               * dst,
        int64_t              start,
        int64_t              nrows,
        int64_t              n_per_row,
        const float        * imatrix);

// the same functions under the names whisper.rn's ggml.h gives them (its prefixing doubled the
// "wsp_" of upstream's internal quantize names); they behave exactly as the ones above
WSP_GGML_API void   wsp_ggml_wsp_quantize_init(enum wsp_ggml_type type);
WSP_GGML_API void   wsp_ggml_wsp_quantize_free(void);
WSP_GGML_API bool   wsp_ggml_wsp_quantize_requires_imatrix(enum wsp_ggml_type type);
WSP_GGML_API size_t wsp_ggml_wsp_quantize_chunk(
        enum wsp_ggml_type   type,
        const float        * src,
        void               * dst,
        int64_t              start,
        int64_t              nrows,
        int64_t              n_per_row,
        const float        * imatrix);

//
// type traits
//

#ifdef __cplusplus
// restrict is not standard in C++
#    if defined(__GNUC__)
#        define WSP_GGML_RESTRICT __restrict__
#    elif defined(__clang__)
#        define WSP_GGML_RESTRICT __restrict
#    elif defined(_MSC_VER)
#        define WSP_GGML_RESTRICT __restrict
#    else
#        define WSP_GGML_RESTRICT
#    endif
#else
#    if defined(_MSC_VER) && (__STDC_VERSION__ < 201112L)
#        define WSP_GGML_RESTRICT __restrict
#    else
#        define WSP_GGML_RESTRICT restrict
#    endif
#endif

typedef void (*wsp_ggml_to_float_t)  (const void  * WSP_GGML_RESTRICT x, float * WSP_GGML_RESTRICT y, int64_t k);
typedef void (*wsp_ggml_from_float_t)(const float * WSP_GGML_RESTRICT x, void  * WSP_GGML_RESTRICT y, int64_t k);

struct wsp_ggml_type_traits {
    const char             * type_name;
    int64_t                  blck_size;
    int64_t                  blck_size_interleave; // interleave elements in blocks
    size_t                   type_size;
    bool                     is_quantized;
    wsp_ggml_to_float_t      to_float;
    wsp_ggml_from_float_t    from_float_ref;
};

WSP_GGML_API const struct wsp_ggml_type_traits * wsp_ggml_get_type_traits(enum wsp_ggml_type type);

//
// CPU threadpool parameters (the threadpool itself lives in ggml-cpu.h)
//

enum wsp_ggml_sched_priority {
    WSP_GGML_SCHED_PRIO_LOW = -1,
    WSP_GGML_SCHED_PRIO_NORMAL,
    WSP_GGML_SCHED_PRIO_MEDIUM,
    WSP_GGML_SCHED_PRIO_HIGH,
    WSP_GGML_SCHED_PRIO_REALTIME
};

struct wsp_ggml_threadpool_params {
    bool                         cpumask[WSP_GGML_MAX_N_THREADS]; // mask of cpu cores (all-zeros means use default affinity settings)
    int                          n_threads;                       // number of threads
    enum wsp_ggml_sched_priority prio;                            // thread priority
    uint32_t                     poll;                            // polling level (0 - no polling, 100 - aggressive polling)
    bool                         strict_cpu;                      // strict cpu placement
    bool                         paused;                          // start in paused state
};

struct wsp_ggml_threadpool; // forward declaration, see ggml-cpu.h

typedef struct wsp_ggml_threadpool * wsp_ggml_threadpool_t;

WSP_GGML_API struct wsp_ggml_threadpool_params wsp_ggml_threadpool_params_default(int n_threads);
WSP_GGML_API void                              wsp_ggml_threadpool_params_init   (struct wsp_ggml_threadpool_params * p, int n_threads);
WSP_GGML_API bool                              wsp_ggml_threadpool_params_match  (const struct wsp_ggml_threadpool_params * p0, const struct wsp_ggml_threadpool_params * p1);

// the rest of the op builders, the training entry points and utilities
#include "ggml-ops.h"

#ifdef __cplusplus
}
#endif
