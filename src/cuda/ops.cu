// Op id -> {supported, launch} (see ops.cuh).

#include "kernels/kernels.cuh"

namespace wsp::cuda {

namespace {

bool always(const wsp_ggml_tensor *) {
    return true;
}

bool nothing_to_do(LaunchCtx &, wsp_ggml_tensor *) {
    return true;
}

const OpEntry & op_view() {
    static const OpEntry entry = { always, nothing_to_do };
    return entry;
}

} // namespace

const OpEntry * op_entry(const wsp_ggml_tensor * node) {
    switch (node->op) {
        case WSP_GGML_OP_NONE:
        case WSP_GGML_OP_VIEW:
        case WSP_GGML_OP_RESHAPE:
        case WSP_GGML_OP_PERMUTE:
        case WSP_GGML_OP_TRANSPOSE: return &op_view();
        case WSP_GGML_OP_ADD:
        case WSP_GGML_OP_SUB:
        case WSP_GGML_OP_MUL:
        case WSP_GGML_OP_DIV: return &op_binary();
        case WSP_GGML_OP_SCALE: return &op_scale();
        case WSP_GGML_OP_CPY:
        case WSP_GGML_OP_CONT:
        case WSP_GGML_OP_DUP: return &op_cpy();
        case WSP_GGML_OP_CONCAT: return &op_concat();
        case WSP_GGML_OP_MUL_MAT: return &op_mul_mat();
        case WSP_GGML_OP_FLASH_ATTN_EXT: return &op_flash_attn_ext();
        case WSP_GGML_OP_UNARY:
        case WSP_GGML_OP_SQR:
        case WSP_GGML_OP_SQRT: return &op_unary();
        case WSP_GGML_OP_NORM: return &op_norm();
        case WSP_GGML_OP_SOFT_MAX: return &op_soft_max();
        case WSP_GGML_OP_MEAN: return &op_mean();
        case WSP_GGML_OP_GET_ROWS: return &op_get_rows();
        case WSP_GGML_OP_IM2COL: return &op_im2col();
        case WSP_GGML_OP_PAD_REFLECT_1D: return &op_pad_reflect();
        case WSP_GGML_OP_REPEAT: return &op_repeat();
        case WSP_GGML_OP_PAD: return &op_pad();
        case WSP_GGML_OP_ROLL: return &op_roll();
        case WSP_GGML_OP_WIN_PART: return &op_win_part();
        case WSP_GGML_OP_WIN_UNPART: return &op_win_unpart();
        case WSP_GGML_OP_GET_REL_POS: return &op_get_rel_pos();
        case WSP_GGML_OP_ADD_REL_POS: return &op_add_rel_pos();
        case WSP_GGML_OP_UPSCALE: return &op_upscale();
        case WSP_GGML_OP_ARANGE: return &op_arange();
        case WSP_GGML_OP_TIMESTEP_EMBEDDING: return &op_timestep_embedding();
        case WSP_GGML_OP_ARGSORT: return &op_argsort();
        case WSP_GGML_OP_ROPE: return &op_rope();
        case WSP_GGML_OP_POOL_1D:
        case WSP_GGML_OP_POOL_2D: return &op_pool();
        case WSP_GGML_OP_CONV_2D_DW: return &op_conv_2d_dw();
        case WSP_GGML_OP_CONV_TRANSPOSE_1D:
        case WSP_GGML_OP_CONV_TRANSPOSE_2D: return &op_conv_transpose();
        case WSP_GGML_OP_MUL_MAT_ID: return &op_mul_mat_id();
        case WSP_GGML_OP_OUT_PROD: return &op_out_prod();
        case WSP_GGML_OP_SSM_CONV: return &op_ssm_conv();
        case WSP_GGML_OP_SSM_SCAN: return &op_ssm_scan();
        case WSP_GGML_OP_RWKV_WKV6:
        case WSP_GGML_OP_RWKV_WKV7:
        case WSP_GGML_OP_GATED_LINEAR_ATTN: return &op_rwkv();
        case WSP_GGML_OP_LOG:
        case WSP_GGML_OP_SIN:
        case WSP_GGML_OP_COS:
        case WSP_GGML_OP_CLAMP:
        case WSP_GGML_OP_LEAKY_RELU:
        case WSP_GGML_OP_ADD1: return &op_math();
        case WSP_GGML_OP_SUM:
        case WSP_GGML_OP_SUM_ROWS:
        case WSP_GGML_OP_ARGMAX:
        case WSP_GGML_OP_COUNT_EQUAL: return &op_math_reduce();
        case WSP_GGML_OP_RMS_NORM:
        case WSP_GGML_OP_L2_NORM:
        case WSP_GGML_OP_GROUP_NORM: return &op_rms_norm();
        case WSP_GGML_OP_ACC:
        case WSP_GGML_OP_SET: return &op_set();
        case WSP_GGML_OP_DIAG:
        case WSP_GGML_OP_DIAG_MASK_INF:
        case WSP_GGML_OP_DIAG_MASK_ZERO: return &op_diag();
        default: return nullptr;
    }
}

} // namespace wsp::cuda
