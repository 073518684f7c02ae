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
        case WSP_GGML_OP_CONCAT: return &kernel_concat;
        case WSP_GGML_OP_MAP_CUSTOM1: return &kernel_custom1;
        default: return nullptr;
    }
}

bool supports_op(const wsp_ggml_tensor * node) {
    const OpKernel * k = kernel_for(node);
    return k != nullptr && k->supported(node);
}

} // namespace wsp::cpu
