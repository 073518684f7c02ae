// Running the splits. Before a split runs on backend B, each input is copied into B's copy of it:
// a user input synchronously (the caller may overwrite its data once compute returns), any other
// input asynchronously where the backends can, after B (and the source's stream) finished the
// previous evaluation that used the same copy (Note [copy events]). The eval callback, when set,
// sees nodes as they complete and can stop the evaluation.

#include "sched.h"

namespace {

using Sched = wsp_ggml_backend_sched;

// Note [copy events]: events[B][c] is recorded on B after each split of B that used copy c of its
// inputs. Overwriting copy c again must wait for it: B's stream waits before later work, the
// source stream waits before an asynchronous copy, and the host waits before a synchronous one.
// Backends without events fall back to a full synchronize.
wsp_ggml_backend_event_t copy_event(Sched & s, int b) {
    return s.events[(size_t) b * (size_t) s.n_copies + (size_t) s.cur_copy];
}

void host_wait_for_copy_slot(Sched & s, int b) {
    if (wsp_ggml_backend_event_t e = copy_event(s, b)) {
        wsp_ggml_backend_event_synchronize(e);
    } else {
        s.sync_backend(b);
    }
}

void copy_input(Sched & s, int b, wsp_ggml_tensor * input) {
    wsp_ggml_backend_t dst_backend = s.backends[b];
    wsp_ggml_tensor *  cpy         = s.copy_of(s.slot(input), b, s.cur_copy);
    if (input->flags & WSP_GGML_TENSOR_FLAG_INPUT) {
        host_wait_for_copy_slot(s, b);
        wsp_ggml_backend_tensor_copy(input, cpy);
        return;
    }
    const int          src_id      = s.backend_of(input);
    wsp_ggml_backend_t src_backend = s.backends[src_id];
    if (wsp_ggml_backend_event_t e = copy_event(s, b)) {
        wsp_ggml_backend_event_wait(dst_backend, e);
        if (src_backend != dst_backend && src_backend->iface.event_wait != nullptr) {
            wsp_ggml_backend_event_wait(src_backend, e);
        }
    } else {
        s.sync_backend(b);
    }
    if (dst_backend->iface.cpy_tensor_async == nullptr ||
        !dst_backend->iface.cpy_tensor_async(src_backend, dst_backend, input, cpy)) {
        s.sync_backend(src_id);
        host_wait_for_copy_slot(s, b);
        wsp_ggml_backend_tensor_copy(input, cpy);
    }
}

// compute with the eval callback: nodes the callback does not want to see run together
wsp_ggml_status compute_observed(Sched & s, wsp_ggml_backend_t backend, wsp_ggml_cgraph & g, bool & stop) {
    for (int j0 = 0; j0 < g.n_nodes; ++j0) {
        wsp_ggml_tensor * t    = g.nodes[j0];
        bool              need = s.callback_eval(t, true, s.callback_eval_data);
        int               j1   = j0;
        while (!need && j1 < g.n_nodes - 1) {
            t    = g.nodes[++j1];
            need = s.callback_eval(t, true, s.callback_eval_data);
        }
        wsp_ggml_cgraph       view   = wsp::graph_view(&g, j0, j1 + 1);
        const wsp_ggml_status status = wsp_ggml_backend_graph_compute_async(backend, &view);
        if (status != WSP_GGML_STATUS_SUCCESS) {
            return status;
        }
        if (backend->iface.synchronize != nullptr) {
            const wsp_ggml_status sync = backend->iface.synchronize(backend);
            if (sync != WSP_GGML_STATUS_SUCCESS) {
                return sync;
            }
        }
        if (need && !s.callback_eval(t, false, s.callback_eval_data)) {
            stop = true;
            return WSP_GGML_STATUS_SUCCESS;
        }
        j0 = j1;
    }
    return WSP_GGML_STATUS_SUCCESS;
}

} // namespace

wsp_ggml_status wsp_ggml_backend_sched::compute_splits() {
    apply_edits(); // undone by synchronize_all, once the backends are done with the nodes
    for (int k = 0; k < n_splits; ++k) {
        wsp::sched::Split & sp      = splits[(size_t) k];
        wsp_ggml_backend_t  backend = backends[sp.backend_id];
        for (wsp_ggml_tensor * input : sp.inputs) {
            copy_input(*this, sp.backend_id, input);
        }
        if (callback_eval == nullptr) {
            const wsp_ggml_status status = wsp_ggml_backend_graph_compute_async(backend, &sp.graph);
            if (status != WSP_GGML_STATUS_SUCCESS) {
                return status;
            }
        } else {
            bool                  stop   = false;
            const wsp_ggml_status status = compute_observed(*this, backend, sp.graph, stop);
            if (status != WSP_GGML_STATUS_SUCCESS) {
                return status;
            }
            if (stop) {
                break;
            }
        }
        if (!sp.inputs.empty()) {
            if (wsp_ggml_backend_event_t e = copy_event(*this, sp.backend_id)) {
                wsp_ggml_backend_event_record(e, backend);
            }
        }
    }
    cur_copy = (cur_copy + 1) % n_copies;
    return WSP_GGML_STATUS_SUCCESS;
}

void wsp_ggml_backend_sched::sync_backend(int b) {
    if (backends[b]->iface.synchronize == nullptr) {
        return;
    }
    const wsp_ggml_status s = backends[b]->iface.synchronize(backends[b]);
    if (s != WSP_GGML_STATUS_SUCCESS && pending_status == WSP_GGML_STATUS_SUCCESS) {
        pending_status = s;
    }
}

wsp_ggml_status wsp_ggml_backend_sched::synchronize_all() {
    for (int b = 0; b < n_backends; ++b) {
        sync_backend(b);
    }
    restore_edits();
    const wsp_ggml_status result = pending_status;
    pending_status               = WSP_GGML_STATUS_SUCCESS;
    return result;
}
