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
        default: return nullptr;
    }
}

} // namespace wsp::cuda
