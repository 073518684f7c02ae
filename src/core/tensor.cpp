// Tensor metadata queries (sizes, layouts, names, flags) and the op name tables.

#include "impl.h"

#include "ggml-backend.h"

#include <cstdarg>
#include <cstdio>

namespace {

const char * const OP_NAMES[] = {
    "NONE",
    "DUP",
    "ADD",
    "ADD1",
    "ACC",
    "SUB",
    "MUL",
    "DIV",
    "SQR",
    "SQRT",
    "LOG",
    "SIN",
    "COS",
    "SUM",
    "SUM_ROWS",
    "MEAN",
    "ARGMAX",
    "COUNT_EQUAL",
    "REPEAT",
    "REPEAT_BACK",
    "CONCAT",
    "SILU_BACK",
    "NORM",
    "RMS_NORM",
    "RMS_NORM_BACK",
    "GROUP_NORM",
    "L2_NORM",
    "MUL_MAT",
    "MUL_MAT_ID",
    "OUT_PROD",
    "SCALE",
    "SET",
    "CPY",
    "CONT",
    "RESHAPE",
    "VIEW",
    "PERMUTE",
    "TRANSPOSE",
    "GET_ROWS",
    "GET_ROWS_BACK",
    "DIAG",
    "DIAG_MASK_INF",
    "DIAG_MASK_ZERO",
    "SOFT_MAX",
    "SOFT_MAX_BACK",
    "ROPE",
    "ROPE_BACK",
    "CLAMP",
    "CONV_TRANSPOSE_1D",
    "IM2COL",
    "IM2COL_BACK",
    "CONV_2D_DW",
    "CONV_TRANSPOSE_2D",
    "POOL_1D",
    "POOL_2D",
    "POOL_2D_BACK",
    "UPSCALE",
    "PAD",
    "PAD_REFLECT_1D",
    "ROLL",
    "ARANGE",
    "TIMESTEP_EMBEDDING",
    "ARGSORT",
    "LEAKY_RELU",
    "FLASH_ATTN_EXT",
    "FLASH_ATTN_BACK",
    "SSM_CONV",
    "SSM_SCAN",
    "WIN_PART",
    "WIN_UNPART",
    "GET_REL_POS",
    "ADD_REL_POS",
    "RWKV_WKV6",
    "GATED_LINEAR_ATTN",
    "RWKV_WKV7",
    "UNARY",
    "MAP_CUSTOM1",
    "MAP_CUSTOM2",
    "MAP_CUSTOM3",
    "CUSTOM",
    "CROSS_ENTROPY_LOSS",
    "CROSS_ENTROPY_LOSS_BACK",
    "OPT_STEP_ADAMW",
};
static_assert(sizeof(OP_NAMES) / sizeof(OP_NAMES[0]) == WSP_GGML_OP_COUNT, "OP_NAMES out of date");
static_assert(WSP_GGML_OP_ADD == 2 && WSP_GGML_OP_MUL == 6 && WSP_GGML_OP_NORM == 22 && WSP_GGML_OP_MUL_MAT == 27 &&
                  WSP_GGML_OP_SCALE == 30 && WSP_GGML_OP_CPY == 32 && WSP_GGML_OP_GET_ROWS == 38 &&
                  WSP_GGML_OP_SOFT_MAX == 43 && WSP_GGML_OP_IM2COL == 49 && WSP_GGML_OP_FLASH_ATTN_EXT == 64 &&
                  WSP_GGML_OP_UNARY == 75,
              "op ids must equal upstream's");

const char * const OP_SYMBOLS[] = {
    "none",
    "x",
    "x+y",
    "x+y",
    "view(x,nb,offset)+=y->x",
    "x-y",
    "x*y",
    "x/y",
    "x^2",
    "√x",
    "log(x)",
    "sin(x)",
    "cos(x)",
    "Σx",
    "Σx_k",
    "Σx/n",
    "argmax(x)",
    "count_equal(x)",
    "repeat(x)",
    "repeat_back(x)",
    "concat(x, y)",
    "silu_back(x)",
    "norm(x)",
    "rms_norm(x)",
    "rms_norm_back(x)",
    "group_norm(x)",
    "l2_norm(x)",
    "X*Y",
    "X[i]*Y",
    "X*Y",
    "x*v",
    "y-\\>view(x)",
    "x-\\>y",
    "cont(x)",
    "reshape(x)",
    "view(x)",
    "permute(x)",
    "transpose(x)",
    "get_rows(x)",
    "get_rows_back(x)",
    "diag(x)",
    "diag_mask_inf(x)",
    "diag_mask_zero(x)",
    "soft_max(x)",
    "soft_max_back(x)",
    "rope(x)",
    "rope_back(x)",
    "clamp(x)",
    "conv_transpose_1d(x)",
    "im2col(x)",
    "im2col_back(x)",
    "conv_2d_dw(x)",
    "conv_transpose_2d(x)",
    "pool_1d(x)",
    "pool_2d(x)",
    "pool_2d_back(x)",
    "upscale(x)",
    "pad(x)",
    "pad_reflect_1d(x)",
    "roll(x)",
    "arange(start, stop, step)",
    "timestep_embedding(timesteps, dim, max_period)",
    "argsort(x)",
    "leaky_relu(x)",
    "flash_attn_ext(x)",
    "flash_attn_back(x)",
    "ssm_conv(x)",
    "ssm_scan(x)",
    "win_part(x)",
    "win_unpart(x)",
    "get_rel_pos(x)",
    "add_rel_pos(x)",
    "rwkv_wkv6(k, v, r, tf, td, s)",
    "gated_linear_attn(k, v, q, gate, s)",
    "rwkv_wkv7(r, w, k, v, a, b, s)",
    "unary(x)",
    "map_custom(x)",
    "map_custom(x,y)",
    "map_custom(x,y,z)",
    "custom(x)",
    "cross_entropy_loss(x,y)",
    "cross_entropy_loss_back(x,y)",
    "adamw(x)",
};
static_assert(sizeof(OP_SYMBOLS) / sizeof(OP_SYMBOLS[0]) == WSP_GGML_OP_COUNT, "OP_SYMBOLS out of date");

const char * const UNARY_OP_NAMES[] = {
    "ABS",  "SGN",        "NEG",  "STEP",      "TANH",        "ELU", "RELU",     "SIGMOID",
    "GELU", "GELU_QUICK", "SILU", "HARDSWISH", "HARDSIGMOID", "EXP", "GELU_ERF",
};
static_assert(sizeof(UNARY_OP_NAMES) / sizeof(UNARY_OP_NAMES[0]) == WSP_GGML_UNARY_OP_COUNT,
              "UNARY_OP_NAMES out of date");
static_assert(WSP_GGML_UNARY_OP_TANH == 4 && WSP_GGML_UNARY_OP_RELU == 6 && WSP_GGML_UNARY_OP_SIGMOID == 7 &&
                  WSP_GGML_UNARY_OP_GELU == 8,
              "unary op ids must equal upstream's");

bool contiguous_from(const wsp_ggml_tensor * t, int n) {
    // dims below n may have gaps between rows; from n on, each dim follows the previous one
    size_t next_nb = wsp_ggml_type_size(t->type);
    if (t->ne[0] != wsp_ggml_blck_size(t->type) && t->nb[0] != next_nb) {
        return false;
    }
    next_nb *= (size_t) (t->ne[0] / wsp_ggml_blck_size(t->type));
    for (int i = 1; i < WSP_GGML_MAX_DIMS; ++i) {
        if (t->ne[i] != 1) {
            if (i > n) {
                if (t->nb[i] != next_nb) {
                    return false;
                }
                next_nb *= (size_t) t->ne[i];
            } else {
                // this dimension does not need to be contiguous
                next_nb = (size_t) t->ne[i] * t->nb[i];
            }
        }
    }
    return true;
}

} // namespace

extern "C" {

int64_t wsp_ggml_nelements(const struct wsp_ggml_tensor * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t wsp_ggml_nrows(const struct wsp_ggml_tensor * t) {
    return t->ne[1] * t->ne[2] * t->ne[3];
}

size_t wsp_ggml_nbytes(const struct wsp_ggml_tensor * t) {
    for (int i = 0; i < WSP_GGML_MAX_DIMS; ++i) {
        if (t->ne[i] <= 0) {
            return 0;
        }
    }
    const size_t blck = (size_t) wsp_ggml_blck_size(t->type);
    size_t       nbytes;
    if (blck == 1) {
        nbytes = wsp_ggml_type_size(t->type);
        for (int i = 0; i < WSP_GGML_MAX_DIMS; ++i) {
            nbytes += (size_t) (t->ne[i] - 1) * t->nb[i];
        }
    } else {
        nbytes = (size_t) t->ne[0] * t->nb[0] / blck;
        for (int i = 1; i < WSP_GGML_MAX_DIMS; ++i) {
            nbytes += (size_t) (t->ne[i] - 1) * t->nb[i];
        }
    }
    return nbytes;
}

size_t wsp_ggml_nbytes_pad(const struct wsp_ggml_tensor * t) {
    return WSP_GGML_PAD(wsp_ggml_nbytes(t), (size_t) WSP_GGML_MEM_ALIGN);
}

size_t wsp_ggml_element_size(const struct wsp_ggml_tensor * t) {
    return wsp_ggml_type_size(t->type);
}

const char * wsp_ggml_op_name(enum wsp_ggml_op op) {
    return (op >= 0 && op < WSP_GGML_OP_COUNT) ? OP_NAMES[op] : "INVALID";
}

const char * wsp_ggml_op_symbol(enum wsp_ggml_op op) {
    return (op >= 0 && op < WSP_GGML_OP_COUNT) ? OP_SYMBOLS[op] : "invalid";
}

const char * wsp_ggml_unary_op_name(enum wsp_ggml_unary_op op) {
    return (op >= 0 && op < WSP_GGML_UNARY_OP_COUNT) ? UNARY_OP_NAMES[op] : "INVALID";
}

enum wsp_ggml_unary_op wsp_ggml_get_unary_op(const struct wsp_ggml_tensor * t) {
    WSP_GGML_ASSERT(t->op == WSP_GGML_OP_UNARY);
    return (enum wsp_ggml_unary_op) t->op_params[0];
}

const char * wsp_ggml_op_desc(const struct wsp_ggml_tensor * t) {
    if (t->op == WSP_GGML_OP_UNARY) {
        return wsp_ggml_unary_op_name(wsp_ggml_get_unary_op(t));
    }
    return wsp_ggml_op_name(t->op);
}

bool wsp_ggml_is_transposed(const struct wsp_ggml_tensor * t) {
    return t->nb[0] > t->nb[1];
}

bool wsp_ggml_is_permuted(const struct wsp_ggml_tensor * t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

bool wsp_ggml_is_empty(const struct wsp_ggml_tensor * t) {
    for (int i = 0; i < WSP_GGML_MAX_DIMS; ++i) {
        if (t->ne[i] == 0) {
            return true;
        }
    }
    return false;
}

bool wsp_ggml_is_scalar(const struct wsp_ggml_tensor * t) {
    return t->ne[0] == 1 && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}

bool wsp_ggml_is_vector(const struct wsp_ggml_tensor * t) {
    return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}

bool wsp_ggml_is_matrix(const struct wsp_ggml_tensor * t) {
    return t->ne[2] == 1 && t->ne[3] == 1;
}

bool wsp_ggml_is_3d(const struct wsp_ggml_tensor * t) {
    return t->ne[3] == 1;
}

int wsp_ggml_n_dims(const struct wsp_ggml_tensor * t) {
    for (int i = WSP_GGML_MAX_DIMS - 1; i >= 1; --i) {
        if (t->ne[i] > 1) {
            return i + 1;
        }
    }
    return 1;
}

bool wsp_ggml_is_contiguous(const struct wsp_ggml_tensor * t) {
    return contiguous_from(t, 0);
}

bool wsp_ggml_is_contiguous_0(const struct wsp_ggml_tensor * t) {
    return contiguous_from(t, 0);
}

bool wsp_ggml_is_contiguous_1(const struct wsp_ggml_tensor * t) {
    return contiguous_from(t, 1);
}

bool wsp_ggml_is_contiguous_2(const struct wsp_ggml_tensor * t) {
    return contiguous_from(t, 2);
}

bool wsp_ggml_is_contiguous_rows(const struct wsp_ggml_tensor * t) {
    return t->ne[0] == wsp_ggml_blck_size(t->type) || t->nb[0] == wsp_ggml_type_size(t->type);
}

// channel-last: dim 2 (channels) is the innermost, then dim 0, then dim 1
bool wsp_ggml_is_contiguous_channels(const struct wsp_ggml_tensor * t) {
    return t->nb[0] > t->nb[2] && t->nb[1] > t->nb[0] && t->nb[2] == wsp_ggml_type_size(t->type);
}

// the bytes from the first to the last element hold no gaps (any order of the dims)
bool wsp_ggml_is_contiguously_allocated(const struct wsp_ggml_tensor * t) {
    return wsp_ggml_nbytes(t) ==
           (size_t) wsp_ggml_nelements(t) * wsp_ggml_type_size(t->type) / (size_t) wsp_ggml_blck_size(t->type);
}

bool wsp_ggml_are_same_shape(const struct wsp_ggml_tensor * t0, const struct wsp_ggml_tensor * t1) {
    return t0->ne[0] == t1->ne[0] && t0->ne[1] == t1->ne[1] && t0->ne[2] == t1->ne[2] && t0->ne[3] == t1->ne[3];
}

bool wsp_ggml_are_same_stride(const struct wsp_ggml_tensor * t0, const struct wsp_ggml_tensor * t1) {
    return t0->nb[0] == t1->nb[0] && t0->nb[1] == t1->nb[1] && t0->nb[2] == t1->nb[2] && t0->nb[3] == t1->nb[3];
}

// t1 can be built by repeating t0 along each dim
bool wsp_ggml_can_repeat(const struct wsp_ggml_tensor * t0, const struct wsp_ggml_tensor * t1) {
    if (wsp_ggml_is_empty(t0)) {
        return wsp_ggml_is_empty(t1);
    }
    return t1->ne[0] % t0->ne[0] == 0 && t1->ne[1] % t0->ne[1] == 0 && t1->ne[2] % t0->ne[2] == 0 &&
           t1->ne[3] % t0->ne[3] == 0;
}

void wsp_ggml_unravel_index(const struct wsp_ggml_tensor * t, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2,
                            int64_t * i3) {
    const int64_t ne2 = t->ne[2];
    const int64_t ne1 = t->ne[1];
    const int64_t ne0 = t->ne[0];

    const int64_t i3_ = i / (ne2 * ne1 * ne0);
    const int64_t i2_ = (i - i3_ * ne2 * ne1 * ne0) / (ne1 * ne0);
    const int64_t i1_ = (i - i3_ * ne2 * ne1 * ne0 - i2_ * ne1 * ne0) / ne0;
    const int64_t i0_ = i - i3_ * ne2 * ne1 * ne0 - i2_ * ne1 * ne0 - i1_ * ne0;

    if (i0)
        *i0 = i0_;
    if (i1)
        *i1 = i1_;
    if (i2)
        *i2 = i2_;
    if (i3)
        *i3 = i3_;
}

void * wsp_ggml_get_data(const struct wsp_ggml_tensor * t) {
    return t->data;
}

float * wsp_ggml_get_data_f32(const struct wsp_ggml_tensor * t) {
    WSP_GGML_ASSERT(t->type == WSP_GGML_TYPE_F32);
    return static_cast<float *>(t->data);
}

const char * wsp_ggml_get_name(const struct wsp_ggml_tensor * t) {
    return t->name;
}

struct wsp_ggml_tensor * wsp_ggml_set_name(struct wsp_ggml_tensor * t, const char * name) {
    size_t i = 0;
    for (; i < sizeof(t->name) - 1 && name[i] != '\0'; ++i) {
        t->name[i] = name[i];
    }
    t->name[i] = '\0';
    return t;
}

struct wsp_ggml_tensor * wsp_ggml_format_name(struct wsp_ggml_tensor * t, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(t->name, sizeof(t->name), fmt, args);
    va_end(args);
    return t;
}

void wsp_ggml_set_input(struct wsp_ggml_tensor * t) {
    t->flags |= WSP_GGML_TENSOR_FLAG_INPUT;
}

void wsp_ggml_set_output(struct wsp_ggml_tensor * t) {
    t->flags |= WSP_GGML_TENSOR_FLAG_OUTPUT;
}

struct wsp_ggml_tensor * wsp_ggml_set_zero(struct wsp_ggml_tensor * t) {
    if (wsp_ggml_is_empty(t)) {
        return t;
    }
    if (t->buffer != nullptr) {
        // the data may live on a device; go through the backend
        wsp_ggml_backend_tensor_memset(t, 0, 0, wsp_ggml_nbytes(t));
    } else if (t->data != nullptr) {
        std::memset(t->data, 0, wsp_ggml_nbytes(t));
    } else {
        WSP_LOG_ERROR("wsp_ggml_set_zero: %s has no data\n", wsp::describe(t).c_str());
    }
    return t;
}

} // extern "C"
