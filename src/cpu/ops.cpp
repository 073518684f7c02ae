// Op id -> kernel table, and the view ops that need no compute.

#include "ops.h"
#include "repack.h"

namespace wsp::cpu {

namespace {

bool always(const wsp_ggml_tensor *) {
    return true;
}

void no_compute(const ComputeParams &, wsp_ggml_tensor *) {}

// views, reshapes and permutes only change metadata
const OpKernel kernel_noop = { always, one_task, nullptr, no_compute };

} // namespace

int one_task(const wsp_ggml_tensor *, int) {
    return 1;
}

int tasks_by_rows(const wsp_ggml_tensor * node, int n_threads) {
    const int64_t rows    = wsp_ggml_nrows(node);
    const int     by_size = tasks_for_elements(wsp_ggml_nelements(node), n_threads);
    return (int) (rows < by_size ? (rows < 1 ? 1 : rows) : by_size);
}

const OpKernel * kernel_for(const wsp_ggml_tensor * node) {
    if (!repack_allows(node)) {
        return nullptr; // Note [Q4_0x8 repack]: only MUL_MAT reads a repacked weight
    }
    switch (node->op) {
        case WSP_GGML_OP_NONE:
        case WSP_GGML_OP_VIEW:
        case WSP_GGML_OP_RESHAPE:
        case WSP_GGML_OP_PERMUTE:
        case WSP_GGML_OP_TRANSPOSE: return &kernel_noop;
        case WSP_GGML_OP_ADD:
        case WSP_GGML_OP_SUB:
        case WSP_GGML_OP_MUL:
        case WSP_GGML_OP_DIV: return &kernel_binary;
        case WSP_GGML_OP_UNARY:
        case WSP_GGML_OP_SQR:
        case WSP_GGML_OP_SQRT:
        case WSP_GGML_OP_SCALE: return &kernel_unary;
        case WSP_GGML_OP_MEAN: return &kernel_mean;
        case WSP_GGML_OP_NORM: return &kernel_norm;
        case WSP_GGML_OP_SOFT_MAX: return &kernel_soft_max;
        case WSP_GGML_OP_FLASH_ATTN_EXT: return &kernel_flash_attn;
        case WSP_GGML_OP_MUL_MAT: return &kernel_mul_mat;
        case WSP_GGML_OP_DUP:
        case WSP_GGML_OP_CPY:
        case WSP_GGML_OP_CONT: return &kernel_copy;
        case WSP_GGML_OP_GET_ROWS: return &kernel_get_rows;
        case WSP_GGML_OP_IM2COL: return &kernel_im2col;
        case WSP_GGML_OP_PAD_REFLECT_1D: return &kernel_pad_reflect;
        case WSP_GGML_OP_POOL_1D:
        case WSP_GGML_OP_POOL_2D: return &kernel_pool;
        case WSP_GGML_OP_CONV_2D_DW: return &kernel_conv_2d_dw;
        case WSP_GGML_OP_CONV_TRANSPOSE_1D:
        case WSP_GGML_OP_CONV_TRANSPOSE_2D: return &kernel_conv_transpose;
        case WSP_GGML_OP_MUL_MAT_ID: return &kernel_mul_mat_id;
        case WSP_GGML_OP_OUT_PROD: return &kernel_out_prod;
        case WSP_GGML_OP_CONCAT: return &kernel_concat;
        case WSP_GGML_OP_MAP_CUSTOM1: return &kernel_custom1;
        case WSP_GGML_OP_REPEAT: return &kernel_repeat;
        case WSP_GGML_OP_PAD: return &kernel_pad;
        case WSP_GGML_OP_ROLL: return &kernel_roll;
        case WSP_GGML_OP_WIN_PART: return &kernel_win_part;
        case WSP_GGML_OP_WIN_UNPART: return &kernel_win_unpart;
        case WSP_GGML_OP_GET_REL_POS: return &kernel_get_rel_pos;
        case WSP_GGML_OP_ADD_REL_POS: return &kernel_add_rel_pos;
        case WSP_GGML_OP_UPSCALE: return &kernel_upscale;
        case WSP_GGML_OP_ARANGE: return &kernel_arange;
        case WSP_GGML_OP_TIMESTEP_EMBEDDING: return &kernel_timestep;
        case WSP_GGML_OP_ARGSORT: return &kernel_argsort;
        case WSP_GGML_OP_ROPE: return &kernel_rope;
        case WSP_GGML_OP_LOG:
        case WSP_GGML_OP_SIN:
        case WSP_GGML_OP_COS:
        case WSP_GGML_OP_CLAMP:
        case WSP_GGML_OP_LEAKY_RELU:
        case WSP_GGML_OP_ADD1: return &kernel_math_map;
        case WSP_GGML_OP_SUM:
        case WSP_GGML_OP_SUM_ROWS:
        case WSP_GGML_OP_ARGMAX:
        case WSP_GGML_OP_COUNT_EQUAL: return &kernel_math_reduce;
        case WSP_GGML_OP_RMS_NORM:
        case WSP_GGML_OP_L2_NORM:
        case WSP_GGML_OP_GROUP_NORM: return &kernel_rms_norm;
        case WSP_GGML_OP_ACC:
        case WSP_GGML_OP_SET: return &kernel_set;
        case WSP_GGML_OP_DIAG:
        case WSP_GGML_OP_DIAG_MASK_INF:
        case WSP_GGML_OP_DIAG_MASK_ZERO: return &kernel_diag;
        case WSP_GGML_OP_MAP_CUSTOM2: return &kernel_custom2;
        case WSP_GGML_OP_MAP_CUSTOM3: return &kernel_custom3;
        case WSP_GGML_OP_CUSTOM: return &kernel_custom;
        case WSP_GGML_OP_SSM_CONV: return &kernel_ssm_conv;
        case WSP_GGML_OP_SSM_SCAN: return &kernel_ssm_scan;
        case WSP_GGML_OP_RWKV_WKV6: return &kernel_rwkv_wkv6;
        case WSP_GGML_OP_RWKV_WKV7: return &kernel_rwkv_wkv7;
        case WSP_GGML_OP_GATED_LINEAR_ATTN: return &kernel_gated_linear_attn;
        default: return nullptr;
    }
}

bool supports_op(const wsp_ggml_tensor * node) {
    const OpKernel * k = kernel_for(node);
    return k != nullptr && k->supported(node);
}

} // namespace wsp::cpu
