// Split weights (src/split): a mul_mat whose weight lives in a split buffer is computed as one
// mul_mat per device slice, each giving that device's rows of the result. The main device
// computes its rows straight into the user's node (a strided view of it); every other device
// computes into a tensor of its own, whose rows then land in the user's node by a 2-D copy
// (a Gather, performed by compute.cpp). The per-device mul_mats of the other devices come first,
// so that their input copies leave before the main device starts its own rows. The user's node
// itself is never computed by a backend and never rewritten: it stays a MUL_MAT, placed on the
// main device, complete once its gathers have landed, and that is when the eval callback sees it.

#include "sched.h"

#include "../split/split_buffer.h"

namespace {

using Sched = wsp_ggml_backend_sched;

bool has_split_weight(const wsp_ggml_tensor * node) {
    return node->op == WSP_GGML_OP_MUL_MAT && wsp::split::split_of(node->src[0]) != nullptr;
}

// the scheduler's index of the backend of a device, -1 if it has none
int backend_of_device(Sched & s, wsp_ggml_backend_dev_t dev) {
    for (int b = 0; b < s.n_backends; ++b) {
        if (wsp_ggml_backend_get_device(s.backends[b]) == dev) {
            return b;
        }
    }
    return -1;
}

// one device's mul_mat over its slice of the weight, into `into`
wsp_ggml_tensor * slice_mul_mat(Sched & s, wsp_ggml_tensor * node, const wsp::split::Slice & slice,
                                wsp_ggml_tensor * into) {
    into->op     = WSP_GGML_OP_MUL_MAT;
    into->src[0] = const_cast<wsp_ggml_tensor *>(&slice.tensor);
    into->src[1] = node->src[1];
    std::memcpy(into->op_params, node->op_params, sizeof(node->op_params));
    wsp_ggml_format_name(into, "%.40s#%s", node->name, slice.tensor.name);
    s.internal.insert(into);
    s.expanded_nodes.push_back(into);
    return into;
}

bool expand(Sched & s, wsp_ggml_tensor * node) {
    const wsp::split::SplitTensor * st = wsp::split::split_of(node->src[0]);
    wsp_ggml_backend_dev_t main_dev = wsp::split::main_device(wsp_ggml_backend_buffer_get_type(node->src[0]->buffer));
    const int              main     = backend_of_device(s, main_dev);
    if (main < 0) {
        WSP_LOG_ERROR("sched: %s has a split weight whose main device %s is not one of the scheduler's backends\n",
                      wsp::describe(node).c_str(), wsp_ggml_backend_dev_name(main_dev));
        return false;
    }
    wsp::sched::SplitMulMat   smm{ node, {} };
    const wsp::split::Slice * own = nullptr;
    for (const wsp::split::Slice & slice : st->slices) {
        const int b = backend_of_device(
            s, wsp_ggml_backend_reg_dev_get(wsp_ggml_backend_dev_backend_reg(main_dev), (size_t) slice.device));
        if (b == main) {
            own = &slice;
            continue;
        }
        const int64_t      ne[4] = { slice.row_end - slice.row_begin, node->ne[1], node->ne[2], node->ne[3] };
        wsp::sched::Gather g;
        g.slice        = slice_mul_mat(s, node, slice, s.pool.new_tensor(WSP_GGML_TYPE_F32, ne));
        g.backend      = b; // where its weight is; assign.cpp places the slice there from its buffer
        g.rows         = s.pool.rows_of(node, slice.row_begin, slice.row_end);
        g.rows->op     = WSP_GGML_OP_NONE; // a place, not a view user (see gallocr)
        g.rows->src[0] = nullptr;
        wsp_ggml_format_name(g.rows, "%.40s#rows#%d", node->name, slice.device);
        s.internal.insert(g.rows);
        smm.gathers.push_back(g);
    }
    if (own != nullptr) {
        smm.own = slice_mul_mat(s, node, *own, s.pool.rows_of(node, own->row_begin, own->row_end));
    }
    s.split_mul_mats.push_back(std::move(smm));
    s.backend_of(node) = main; // complete on the main device
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
        if (has_split_weight(node) && !expand(*this, node)) {
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
