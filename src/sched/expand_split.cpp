// Split weights (src/split): a mul_mat whose weight lives in a split buffer becomes one mul_mat
// per device slice, each computing that device's rows of the result from its own rows of the
// weight, and the node itself becomes an N-ary CONCAT along dim 0 that gathers the slices on the
// main device. The ordinary passes then place each slice's mul_mat on its device (its weight is
// there), copy the activations to each device once, and copy the slices back to the main device
// with async copies ordered by events. The rewrite is undone on reset.

#include "sched.h"

#include "../split/split_buffer.h"

namespace {

using Sched = wsp_ggml_backend_sched;

bool has_split_weight(const wsp_ggml_tensor * node) {
    return node->op == WSP_GGML_OP_MUL_MAT && wsp::split::split_of(node->src[0]) != nullptr;
}

// the scheduler's index of the backend of the split's main device, -1 if it has none
int main_backend(Sched & s, const wsp_ggml_tensor * weight) {
    wsp_ggml_backend_dev_t dev = wsp::split::main_device(wsp_ggml_backend_buffer_get_type(weight->buffer));
    for (int b = 0; b < s.n_backends; ++b) {
        if (wsp_ggml_backend_get_device(s.backends[b]) == dev) {
            return b;
        }
    }
    return -1;
}

bool rewrite(Sched & s, wsp_ggml_tensor * node) {
    const wsp::split::SplitTensor * st   = wsp::split::split_of(node->src[0]);
    const int                       main = main_backend(s, node->src[0]);
    if (main < 0 || st->slices.size() > WSP_GGML_MAX_SRC) {
        WSP_LOG_ERROR("sched: %s has a split weight whose main device is not one of the scheduler's backends, or is "
                      "split over more than %d devices\n",
                      wsp::describe(node).c_str(), WSP_GGML_MAX_SRC);
        return false;
    }
    Sched::Rewrite r;
    r.node  = node;
    r.op[0] = node->op;
    std::memcpy(r.src[0], node->src, sizeof(r.src[0]));
    std::memcpy(r.op_params[0], node->op_params, sizeof(r.op_params[0]));

    std::memset(node->src, 0, sizeof(node->src));
    for (size_t k = 0; k < st->slices.size(); ++k) {
        const wsp::split::Slice & slice = st->slices[k];
        const int64_t             ne[4] = { slice.row_end - slice.row_begin, node->ne[1], node->ne[2], node->ne[3] };
        wsp_ggml_tensor *         mm    = s.pool.new_tensor(WSP_GGML_TYPE_F32, ne);
        mm->op                          = WSP_GGML_OP_MUL_MAT;
        mm->src[0]                      = const_cast<wsp_ggml_tensor *>(&slice.tensor);
        mm->src[1]                      = r.src[0][1];
        std::memcpy(mm->op_params, r.op_params[0], sizeof(r.op_params[0]));
        wsp_ggml_format_name(mm, "%.40s#%s", node->name, slice.tensor.name);
        s.expanded_nodes.push_back(mm);
        node->src[k] = mm;
    }
    node->op = WSP_GGML_OP_CONCAT;
    std::memset(node->op_params, 0, sizeof(node->op_params)); // dim 0
    r.op[1] = node->op;
    std::memcpy(r.src[1], node->src, sizeof(r.src[1]));
    std::memcpy(r.op_params[1], node->op_params, sizeof(r.op_params[1]));
    s.rewrites.push_back(r);
    s.edited           = true;
    s.backend_of(node) = main; // the gather stays on the main device
    return true;
}

} // namespace

wsp_ggml_cgraph * wsp_ggml_backend_sched::expand_split(wsp_ggml_cgraph * g) {
    bool any = false;
    for (int i = 0; i < g->n_nodes && !any; ++i) {
        any = has_split_weight(g->nodes[i]);
    }
    if (!any) {
        return g;
    }
    ensure_capacity(2 * (size_t) (g->n_nodes + g->n_leafs) + 64);
    expanded_nodes.clear();
    for (int i = 0; i < g->n_nodes; ++i) {
        wsp_ggml_tensor * node = g->nodes[i];
        if (has_split_weight(node) && !rewrite(*this, node)) {
            return nullptr;
        }
        expanded_nodes.push_back(node);
    }
    expanded         = *g;
    expanded.nodes   = expanded_nodes.data();
    expanded.n_nodes = (int) expanded_nodes.size();
    expanded.size    = std::max(expanded.n_nodes, g->n_leafs);
    return &expanded;
}
