// Note [staged inputs]: a user input must be read before compute returns (the caller may write
// the next step's values at once), which used to mean two host waits per input on a GPU: one for
// the slot to be free, one for a synchronous copy. Instead the scheduler copies the input's bytes
// on the host into pinned memory of the split's device (its host buffer type), and the device's
// stream copies them from there asynchronously. No host wait is needed:
//  - the copy is queued on the split's own backend, after all it was asked to do before, which is
//    what the slot's last readers did (and what the synchronous path waited for: ready[b], or
//    done[b][c] with `parallel`, both recorded on that stream);
//  - the pinned bytes of copy slot c are read by copies that end before done[b][c], recorded at
//    the end of the evaluation. The host writes them again only at the next evaluation using c:
//    after a synchronize of the scheduler nothing reads them any more; otherwise the host waits
//    for done[b][c] (evaluations queued back to back without a synchronize).
// The pinned memory of each backend and copy is sized when a graph is allocated, for every user
// input its splits copy. A backend whose device has no host buffer type, no events or no async
// set, and inputs that are not contiguous host tensors, take the synchronous path.

#include "sched.h"

#include <cstring>

namespace {

using Sched = wsp_ggml_backend_sched;

constexpr size_t STAGE_ALIGN = 64;

size_t aligned(size_t n) {
    return (n + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
}

// the host buffer type staging on backend b uses, NULL where b cannot stage
wsp_ggml_backend_buffer_type_t stage_buft(Sched & s, int b) {
    wsp_ggml_backend_t backend = s.backends[b];
    if (backend->iface.set_tensor_async == nullptr || s.done[(size_t) b * (size_t) s.n_copies] == nullptr) {
        return nullptr;
    }
    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_get_device(backend);
    if (dev == nullptr || wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_CPU) {
        return nullptr;
    }
    return wsp_ggml_backend_dev_host_buffer_type(dev);
}

bool stageable(const wsp_ggml_tensor * input) {
    const wsp_ggml_tensor *   t   = input->view_src ? input->view_src : input;
    wsp_ggml_backend_buffer_t buf = t->buffer;
    return (input->flags & WSP_GGML_TENSOR_FLAG_INPUT) && input->data != nullptr && buf != nullptr &&
           wsp_ggml_backend_buffer_is_host(buf) && wsp_ggml_is_contiguous(input);
}

// waits until nothing reads the pinned bytes of stage st (backend b, copy c) any more
void settle(Sched & s, wsp::sched::Stage & st, int b, int c) {
    if (st.busy) {
        wsp_ggml_backend_event_synchronize(s.done[(size_t) b * (size_t) s.n_copies + (size_t) c]);
        st.busy = false;
    }
}

} // namespace

bool wsp_ggml_backend_sched::reserve_stages() {
    stages.resize((size_t) n_backends * (size_t) n_copies);
    for (int b = 0; b < n_backends; ++b) {
        wsp_ggml_backend_buffer_type_t buft = stage_buft(*this, b);
        size_t                         need = 0;
        for (int k = 0; k < n_splits && buft != nullptr; ++k) {
            const wsp::sched::Split & sp = splits[(size_t) k];
            for (const wsp_ggml_tensor * input : sp.inputs) {
                need += sp.backend_id == b && stageable(input) ? aligned(wsp_ggml_nbytes(input)) : 0;
            }
        }
        for (int c = 0; c < n_copies; ++c) {
            wsp::sched::Stage & st = stages[(size_t) b * (size_t) n_copies + (size_t) c];
            if (need == 0 || (st.buffer != nullptr && wsp_ggml_backend_buffer_get_size(st.buffer) >= need)) {
                continue;
            }
            settle(*this, st, b, c);
            wsp_ggml_backend_buffer_free(st.buffer);
            st.buffer = wsp_ggml_backend_buft_alloc_buffer(buft, need);
            if (st.buffer == nullptr) {
                WSP_LOG_WARN("sched: no pinned memory of %zu bytes for the inputs of %s; they are copied "
                             "synchronously\n",
                             need, wsp_ggml_backend_name(backends[b]));
            }
        }
    }
    return true;
}

bool wsp_ggml_backend_sched::stage_input(int b, wsp_ggml_tensor * input, wsp_ggml_tensor * cpy) {
    if (stages.empty() || !stageable(input)) {
        return false;
    }
    wsp::sched::Stage & st = stages[(size_t) b * (size_t) n_copies + (size_t) cur_copy];
    if (st.buffer == nullptr) {
        return false;
    }
    if (st.evaluation != evaluations) { // the first input of this evaluation to use the stage
        settle(*this, st, b, cur_copy);
        st.evaluation = evaluations;
        st.used       = 0;
    }
    const size_t n = wsp_ggml_nbytes(input);
    if (st.used + n > wsp_ggml_backend_buffer_get_size(st.buffer)) {
        return false; // not reserved for this input (a graph computed without its allocation)
    }
    char * at = static_cast<char *>(wsp_ggml_backend_buffer_get_base(st.buffer)) + st.used;
    std::memcpy(at, input->data, n);
    st.used += aligned(n);
    st.busy = true; // until done[b][cur_copy], recorded at the end of this evaluation
    wsp_ggml_backend_tensor_set_async(backends[b], cpy, at, 0, n);
    return true;
}

void wsp_ggml_backend_sched::stages_settled() {
    for (wsp::sched::Stage & st : stages) {
        st.busy = false;
    }
}

void wsp_ggml_backend_sched::free_stages() {
    for (int b = 0; b < n_backends; ++b) {
        for (int c = 0; c < n_copies && !stages.empty(); ++c) {
            wsp::sched::Stage & st = stages[(size_t) b * (size_t) n_copies + (size_t) c];
            settle(*this, st, b, c);
            wsp_ggml_backend_buffer_free(st.buffer);
            st.buffer = nullptr;
        }
    }
    stages.clear();
}
