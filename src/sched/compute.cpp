// Running the splits. Before a split runs on backend B, B waits for what it must come after
// (Note [split waits]), then each input is copied into B's copy of it: a user input through
// pinned memory (Note [staged inputs]) or synchronously (the caller may overwrite its data once
// compute returns), any other input
// asynchronously on the source's stream where the backends can. B computes its nodes, then the
// other devices' rows of a split mul_mat land in the node this split completes. The eval
// callback, when set, sees the user's nodes as they complete and can stop the evaluation.

#include "sched.h"

namespace {

using Sched = wsp_ggml_backend_sched;

// Note [split events]: three kinds of events per backend order the work.
//  - progress[B] is recorded after every split of B, after a copy queued on B's stream (as the
//    source), and when an evaluation starts: a backend that must come after B's work so far waits
//    for it (Note [split waits]).
//  - ready[B] is recorded before a split's copies and compute, once B's waits are queued: what B
//    did before no longer needs the memory this split's input copies and gathered rows land
//    in, so the streams that copy there wait for it.
//  - done[B][c] is recorded at the end of an evaluation that used copy c: with `parallel`, a
//    copy slot is B's alone, so writing copy c again only has to wait for the evaluation that
//    used c last, not for B's work in between (the copies of evaluation i overlap B's compute of
//    evaluation i - 1).
// A backend waits on another's event on its stream where it can (an event of its own kind),
// otherwise the host waits; a backend without events is synchronized instead.
bool can_wait(wsp_ggml_backend_t backend, wsp_ggml_backend_event_t e) {
    return backend->iface.event_wait != nullptr &&
           wsp_ggml_backend_dev_backend_reg(wsp_ggml_backend_get_device(backend)) ==
               wsp_ggml_backend_dev_backend_reg(e->device);
}

// backend b's later work comes after event e (host wait where b cannot wait on e)
void order_after(int b, wsp_ggml_backend_event_t e, Sched & s) {
    if (can_wait(s.backends[b], e)) {
        wsp_ggml_backend_event_wait(s.backends[b], e);
    } else {
        wsp_ggml_backend_event_synchronize(e);
    }
}

// everything queued on p's stream so far is what progress[p] stands for
void mark_progress(Sched & s, int p) {
    if (wsp_ggml_backend_event_t e = s.progress[(size_t) p]) {
        wsp_ggml_backend_event_record(e, s.backends[p]);
    }
}

// backend b's later work comes after backend p's work so far
void wait_for_backend(Sched & s, int b, int p) {
    if (wsp_ggml_backend_event_t e = s.progress[(size_t) p]) {
        order_after(b, e, s);
    } else {
        s.sync_backend(p);
    }
}

// what a copy into b's memory waits for: with `parallel` the last evaluation that used this copy
// slot, else B's work so far (the slot's memory may have held another tensor)
wsp_ggml_backend_event_t copy_slot_free(Sched & s, int b) {
    return s.n_copies > 1 ? s.done[(size_t) b * (size_t) s.n_copies + (size_t) s.cur_copy] : s.ready[(size_t) b];
}

void host_wait(Sched & s, int b, wsp_ggml_backend_event_t e) {
    if (e != nullptr) {
        wsp_ggml_backend_event_synchronize(e);
    } else {
        s.sync_backend(b);
    }
}

void copy_input(Sched & s, int b, wsp_ggml_tensor * input) {
    wsp_ggml_backend_t       dst_backend = s.backends[b];
    wsp_ggml_tensor *        cpy         = s.copy_of(s.slot(input), b, s.cur_copy);
    wsp_ggml_backend_event_t free_slot   = copy_slot_free(s, b);
    if (input->flags & WSP_GGML_TENSOR_FLAG_INPUT) {
        if (s.stage_input(b, input, cpy)) {
            return;
        }
        host_wait(s, b, free_slot);
        wsp_ggml_backend_tensor_copy(input, cpy);
        return;
    }
    const int          src_id      = s.backend_of(input);
    wsp_ggml_backend_t src_backend = s.backends[src_id];
    // the copy runs on the source's stream: it must not land before the slot is free
    if (free_slot != nullptr) {
        order_after(src_id, free_slot, s);
    } else {
        s.sync_backend(b);
    }
    if (dst_backend->iface.cpy_tensor_async != nullptr &&
        dst_backend->iface.cpy_tensor_async(src_backend, dst_backend, input, cpy)) {
        mark_progress(s, src_id);
        return;
    }
    s.sync_backend(src_id);
    host_wait(s, b, free_slot);
    wsp_ggml_backend_tensor_copy(input, cpy);
}

// a device's rows of a split mul_mat land in the user's node on backend b (the main device)
void land_rows(Sched & s, int b, const wsp::sched::Gather & g) {
    wsp_ggml_backend_t src_backend = s.backends[g.backend];
    wsp_ggml_backend_t dst_backend = s.backends[b];
    if (wsp_ggml_backend_event_t e = s.ready[(size_t) b]) {
        order_after(g.backend, e, s);
    } else {
        s.sync_backend(b);
    }
    if (dst_backend->iface.cpy_tensor_async != nullptr &&
        dst_backend->iface.cpy_tensor_async(src_backend, dst_backend, g.slice, g.rows)) {
        mark_progress(s, g.backend);
        return;
    }
    // no 2-D copy between these backends: row by row through the host
    s.sync_backend(g.backend);
    host_wait(s, b, s.ready[(size_t) b]);
    const size_t         row = wsp_ggml_row_size(g.slice->type, g.slice->ne[0]);
    std::vector<uint8_t> staging(wsp_ggml_nbytes(g.slice));
    wsp_ggml_backend_tensor_get(g.slice, staging.data(), 0, staging.size());
    const int64_t     nrows = wsp_ggml_nrows(g.slice);
    const int64_t     ne1 = g.rows->ne[1], ne2 = g.rows->ne[2];
    const size_t      base = g.rows->view_offs;
    const size_t *    nb   = g.rows->nb;
    wsp_ggml_tensor * node = g.rows->view_src;
    for (int64_t r = 0; r < nrows; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const size_t  off = base + (size_t) i1 * nb[1] + (size_t) i2 * nb[2] + (size_t) i3 * nb[3];
        wsp_ggml_backend_tensor_set(node, staging.data() + (size_t) r * row, off, row);
    }
}

// compute with the eval callback: nodes the callback does not want to see run together; the
// scheduler's own nodes are never shown
wsp_ggml_status compute_observed(Sched & s, wsp_ggml_backend_t backend, wsp_ggml_cgraph & g, bool & stop) {
    auto wants = [&](wsp_ggml_tensor * t) {
        return s.internal.count(t) == 0 && s.callback_eval(t, true, s.callback_eval_data);
    };
    for (int j0 = 0; j0 < g.n_nodes; ++j0) {
        wsp_ggml_tensor * t    = g.nodes[j0];
        bool              need = wants(t);
        int               j1   = j0;
        while (!need && j1 < g.n_nodes - 1) {
            t    = g.nodes[++j1];
            need = wants(t);
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

// the eval callback for a split mul_mat's node, once its rows have all landed
wsp_ggml_status observe_gathered(Sched & s, int b, wsp_ggml_tensor * node, bool & stop) {
    if (!s.callback_eval(node, true, s.callback_eval_data)) {
        return WSP_GGML_STATUS_SUCCESS;
    }
    s.sync_backend(b);
    const wsp_ggml_status status = s.pending_status;
    if (status != WSP_GGML_STATUS_SUCCESS) {
        s.pending_status = WSP_GGML_STATUS_SUCCESS;
        return status;
    }
    stop = !s.callback_eval(node, false, s.callback_eval_data);
    return WSP_GGML_STATUS_SUCCESS;
}

wsp_ggml_status run_split(Sched & s, wsp::sched::Split & sp, bool & stop) {
    const int          b       = sp.backend_id;
    wsp_ggml_backend_t backend = s.backends[b];
    for (int p : sp.waits) {
        wait_for_backend(s, b, p);
    }
    if (!sp.inputs.empty() || !sp.gathers.empty()) {
        if (wsp_ggml_backend_event_t e = s.ready[(size_t) b]) {
            wsp_ggml_backend_event_record(e, backend);
        }
    }
    for (wsp_ggml_tensor * input : sp.inputs) {
        copy_input(s, b, input);
    }
    wsp_ggml_status status = WSP_GGML_STATUS_SUCCESS;
    if (sp.graph.n_nodes > 0) {
        status = s.callback_eval == nullptr ? wsp_ggml_backend_graph_compute_async(backend, &sp.graph)
                                            : compute_observed(s, backend, sp.graph, stop);
    }
    if (status != WSP_GGML_STATUS_SUCCESS || stop) {
        return status;
    }
    for (const wsp::sched::Gather & g : sp.gathers) {
        land_rows(s, b, g);
    }
    if (sp.gathered != nullptr && s.callback_eval != nullptr) {
        status = observe_gathered(s, b, sp.gathered, stop);
    }
    mark_progress(s, b);
    return status;
}

} // namespace

wsp_ggml_status wsp_ggml_backend_sched::compute_splits() {
    apply_edits(); // undone by synchronize_all; the backends bind what they queue
    ++evaluations;
    // what the caller queued since the last evaluation (reads of its outputs) counts as progress
    for (int b = 0; b < n_backends; ++b) {
        mark_progress(*this, b);
    }
    std::vector<bool> used((size_t) n_backends, false);
    wsp_ggml_status   status = WSP_GGML_STATUS_SUCCESS;
    for (int k = 0; k < n_splits && status == WSP_GGML_STATUS_SUCCESS; ++k) {
        bool stop                                    = false;
        status                                       = run_split(*this, splits[(size_t) k], stop);
        used[(size_t) splits[(size_t) k].backend_id] = true;
        if (stop) {
            break;
        }
    }
    for (int b = 0; b < n_backends; ++b) {
        wsp_ggml_backend_event_t e = done[(size_t) b * (size_t) n_copies + (size_t) cur_copy];
        if (used[(size_t) b] && e != nullptr) {
            wsp_ggml_backend_event_record(e, backends[b]);
        }
    }
    cur_copy = (cur_copy + 1) % n_copies;
    return status;
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

// Note [copy rotation]: consecutive computes rotate through the copies so that an evaluation
// can start while earlier ones still run. Once everything is synchronized no copy is in use, and
// the next compute starts again at copy 0: a graph computed and synchronized again and again
// sees the same addresses every time, so a backend's recorded graph (CUDA graphs) replays.
wsp_ggml_status wsp_ggml_backend_sched::synchronize_all() {
    for (int b = 0; b < n_backends; ++b) {
        sync_backend(b);
    }
    restore_edits();
    stages_settled();
    cur_copy                     = 0;
    const wsp_ggml_status result = pending_status;
    pending_status               = WSP_GGML_STATUS_SUCCESS;
    return result;
}
