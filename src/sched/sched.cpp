// Scheduler state, tensor pool and the public API of ggml-backend.h's scheduler section.

#include "sched.h"

#include <algorithm>
#include <cstdlib>

namespace wsp::sched {

namespace {
constexpr size_t POOL_CTX_TENSORS = 256;
constexpr int    DEFAULT_COPIES   = 4;
} // namespace

TensorPool::~TensorPool() {
    for (wsp_ggml_context * c : ctxs_) {
        wsp_ggml_free(c);
    }
}

void TensorPool::reset() {
    for (wsp_ggml_context * c : ctxs_) {
        wsp_ggml_reset(c);
    }
    cur_ = 0;
}

wsp_ggml_context * TensorPool::room_for_one() {
    while (cur_ < ctxs_.size()) {
        wsp_ggml_context * c = ctxs_[cur_];
        if (wsp_ggml_used_mem(c) + wsp_ggml_tensor_overhead() <= wsp_ggml_get_mem_size(c)) {
            return c;
        }
        ++cur_;
    }
    wsp_ggml_init_params params = { POOL_CTX_TENSORS * wsp_ggml_tensor_overhead(), nullptr, true };
    ctxs_.push_back(wsp_ggml_init(params));
    return ctxs_.back();
}

wsp_ggml_tensor * TensorPool::dup_layout(const wsp_ggml_tensor * t) {
    wsp_ggml_tensor * c = wsp_ggml_new_tensor(room_for_one(), t->type, WSP_GGML_MAX_DIMS, t->ne);
    for (int i = 0; i < WSP_GGML_MAX_DIMS; ++i) {
        c->nb[i] = t->nb[i];
    }
    return c;
}

wsp_ggml_tensor * TensorPool::view_of(wsp_ggml_tensor * t) {
    return wsp_ggml_view_tensor(room_for_one(), t);
}

wsp_ggml_tensor * TensorPool::new_tensor(wsp_ggml_type type, const int64_t * ne) {
    return wsp_ggml_new_tensor(room_for_one(), type, WSP_GGML_MAX_DIMS, ne);
}

wsp_ggml_tensor * TensorPool::rows_of(wsp_ggml_tensor * t, int64_t r0, int64_t r1) {
    return wsp_ggml_view_4d(room_for_one(), t, r1 - r0, t->ne[1], t->ne[2], t->ne[3], t->nb[1], t->nb[2], t->nb[3],
                            (size_t) r0 * t->nb[0]);
}

} // namespace wsp::sched

using wsp::sched::Split;

size_t wsp_ggml_backend_sched::slot(const wsp_ggml_tensor * t) {
    bool inserted = false;
    return hash.insert(const_cast<wsp_ggml_tensor *>(t), inserted);
}

void wsp_ggml_backend_sched::ensure_capacity(size_t n_tensors) {
    const size_t need = wsp::HashSet::capacity_for(n_tensors);
    if (hash.size >= need && hash.keys != nullptr) {
        return;
    }
    // grow and re-insert, keeping assignments made with set_tensor_backend
    std::vector<std::pair<wsp_ggml_tensor *, int>> kept;
    for (size_t i = 0; hash.keys != nullptr && i < hash.size; ++i) {
        if (hash.is_used(i)) {
            kept.emplace_back(hash.keys[i], tensor_backend[i]);
        }
    }
    hash_keys.assign(need, nullptr);
    hash_used.assign(wsp::HashSet::bitset_words(need), 0);
    hash.size = need;
    hash.keys = hash_keys.data();
    hash.used = hash_used.data();
    tensor_backend.assign(need, -1);
    tensor_pinned.assign(need, 0);
    tensor_copies.assign(need * (size_t) n_backends * (size_t) n_copies, nullptr);
    slots_with_copies.clear();
    for (const auto & kv : kept) {
        tensor_backend[slot(kv.first)] = kv.second;
    }
    apply_pins();
}

void wsp_ggml_backend_sched::apply_pins() {
    for (const auto & pin : pins) {
        const size_t s    = slot(pin.first);
        tensor_backend[s] = pin.second;
        tensor_pinned[s]  = 1;
    }
}

void wsp_ggml_backend_sched::index_graph(wsp_ggml_cgraph * g) {
    node_slots.resize((size_t) g->n_nodes);
    leaf_slots.resize((size_t) g->n_leafs);
    src_slots.assign((size_t) g->n_nodes * WSP_GGML_MAX_SRC, NO_SLOT);
    for (int i = 0; i < g->n_leafs; ++i) {
        leaf_slots[(size_t) i] = slot(g->leafs[i]);
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        node_slots[(size_t) i] = slot(g->nodes[i]);
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            if (g->nodes[i]->src[j] != nullptr) {
                src_slot(i, j) = slot(g->nodes[i]->src[j]);
            }
        }
    }
}

void wsp_ggml_backend_sched::apply_edits() {
    for (const SrcSwap & sw : swaps) {
        sw.node->src[sw.index] = copy_of(sw.slot, sw.backend, cur_copy);
    }
    edited = !swaps.empty();
}

void wsp_ggml_backend_sched::restore_edits() {
    if (!edited) {
        return;
    }
    for (auto it = swaps.rbegin(); it != swaps.rend(); ++it) {
        it->node->src[it->index] = it->original;
    }
    edited = false;
}

const wsp::sched::SplitMulMat * wsp_ggml_backend_sched::split_mul_mat_of(const wsp_ggml_tensor * node) const {
    for (const wsp::sched::SplitMulMat & smm : split_mul_mats) {
        if (smm.node == node) {
            return &smm;
        }
    }
    return nullptr;
}

void wsp_ggml_backend_sched::clear_state() {
    restore_edits(); // only while a compute is unsynchronized; the graph is alive then
    swaps.clear();
    split_mul_mats.clear();
    internal.clear();
    hash.reset();
    std::fill(tensor_backend.begin(), tensor_backend.end(), -1);
    const size_t per_slot = (size_t) n_backends * (size_t) n_copies;
    for (size_t s : slots_with_copies) {
        std::fill(tensor_copies.begin() + (std::ptrdiff_t)(s * per_slot),
                  tensor_copies.begin() + (std::ptrdiff_t)((s + 1) * per_slot), nullptr);
    }
    slots_with_copies.clear();
    pool.reset();
    std::fill(tensor_pinned.begin(), tensor_pinned.end(), 0);
    apply_pins();
}

int wsp_ggml_backend_sched::backend_index(wsp_ggml_backend_t backend) const {
    for (int i = 0; i < n_backends; ++i) {
        if (backends[i] == backend) {
            return i;
        }
    }
    return -1;
}

namespace {

int copies_from_env(bool parallel) {
    if (!parallel) {
        return 1;
    }
    const char * env = std::getenv("WSP_GGML_SCHED_COPIES");
    const int    n   = env ? std::atoi(env) : wsp::sched::DEFAULT_COPIES;
    return n >= 1 && n <= 16 ? n : wsp::sched::DEFAULT_COPIES;
}

bool valid(wsp_ggml_backend_sched_t sched, const char * fn) {
    if (sched == nullptr) {
        WSP_LOG_ERROR("%s: sched is NULL\n", fn);
        return false;
    }
    return true;
}

} // namespace

extern "C" {

wsp_ggml_backend_sched_t wsp_ggml_backend_sched_new(wsp_ggml_backend_t *             backends,
                                                    wsp_ggml_backend_buffer_type_t * bufts, int n_backends,
                                                    size_t graph_size, bool parallel, bool op_offload) {
    if (backends == nullptr || n_backends < 1 || n_backends > wsp::sched::MAX_BACKENDS) {
        WSP_LOG_ERROR("%s: n_backends must be 1 to %d, got %d\n", __func__, wsp::sched::MAX_BACKENDS, n_backends);
        return nullptr;
    }
    for (int i = 0; i < n_backends; ++i) {
        if (backends[i] == nullptr) {
            WSP_LOG_ERROR("%s: backend %d is NULL\n", __func__, i);
            return nullptr;
        }
    }
    if (wsp_ggml_backend_dev_type(wsp_ggml_backend_get_device(backends[n_backends - 1])) !=
        WSP_GGML_BACKEND_DEVICE_TYPE_CPU) {
        WSP_LOG_ERROR("%s: the last backend must be the CPU (got %s)\n", __func__,
                      wsp_ggml_backend_name(backends[n_backends - 1]));
        return nullptr;
    }
    auto * s      = new wsp_ggml_backend_sched();
    s->n_backends = n_backends;
    s->op_offload = op_offload;
    s->n_copies   = copies_from_env(parallel);
    for (int i = 0; i < n_backends; ++i) {
        s->backends[i] = backends[i];
        s->bufts[i]    = bufts && bufts[i] ? bufts[i] : wsp_ggml_backend_get_default_buffer_type(backends[i]);
        if (!wsp_ggml_backend_supports_buft(backends[i], s->bufts[i])) {
            WSP_LOG_ERROR("%s: backend %s cannot use buffer type %s\n", __func__, wsp_ggml_backend_name(backends[i]),
                          wsp_ggml_backend_buft_name(s->bufts[i]));
            delete s;
            return nullptr;
        }
    }
    s->progress.assign((size_t) n_backends, nullptr);
    s->ready.assign((size_t) n_backends, nullptr);
    s->done.assign((size_t) n_backends * (size_t) s->n_copies, nullptr);
    for (int b = 0; b < n_backends; ++b) {
        wsp_ggml_backend_dev_t     dev = wsp_ggml_backend_get_device(backends[b]);
        wsp_ggml_backend_dev_props props;
        wsp_ggml_backend_dev_get_props(dev, &props);
        if (!props.caps.events || backends[b]->iface.event_record == nullptr) {
            continue; // a backend without events is waited for on the host
        }
        s->progress[(size_t) b] = wsp_ggml_backend_event_new(dev);
        s->ready[(size_t) b]    = wsp_ggml_backend_event_new(dev);
        for (int c = 0; c < s->n_copies; ++c) {
            s->done[(size_t) b * (size_t) s->n_copies + (size_t) c] = wsp_ggml_backend_event_new(dev);
        }
    }
    s->galloc = wsp_ggml_gallocr_new_n(s->bufts, n_backends);
    s->ensure_capacity(std::max<size_t>(graph_size, 64) * 2);
    s->splits.resize(16);
    wsp_ggml_backend_sched_reset(s);
    return s;
}

void wsp_ggml_backend_sched_free(wsp_ggml_backend_sched_t sched) {
    if (sched == nullptr) {
        return;
    }
    sched->synchronize_all();
    sched->free_stages();
    sched->clear_state(); // restores the sources of the last graph
    for (const auto * list : { &sched->progress, &sched->ready, &sched->done }) {
        for (wsp_ggml_backend_event_t e : *list) {
            wsp_ggml_backend_event_free(e);
        }
    }
    wsp_ggml_gallocr_free(sched->galloc);
    delete sched;
}

void wsp_ggml_backend_sched_reset(wsp_ggml_backend_sched_t sched) {
    if (!valid(sched, __func__)) {
        return;
    }
    sched->pins.clear();
    sched->clear_state();
    sched->is_reset        = true;
    sched->is_alloc        = false;
    sched->allocated_graph = nullptr;
}

bool wsp_ggml_backend_sched_reserve(wsp_ggml_backend_sched_t sched, struct wsp_ggml_cgraph * measure_graph) {
    if (!valid(sched, __func__)) {
        return false;
    }
    // the graph state goes, the pins stay (Note [pins])
    sched->synchronize_all();
    sched->clear_state();
    bool ok = sched->split_graph(measure_graph);
    if (ok) {
        ok = wsp_ggml_gallocr_reserve_n(sched->galloc, &sched->graph, sched->node_backend_ids.data(),
                                        sched->leaf_backend_ids.data());
    }
    sched->clear_state();
    sched->is_alloc        = false;
    sched->allocated_graph = nullptr;
    return ok;
}

bool wsp_ggml_backend_sched_alloc_graph(wsp_ggml_backend_sched_t sched, struct wsp_ggml_cgraph * graph) {
    if (!valid(sched, __func__)) {
        return false;
    }
    if (!sched->is_reset) {
        sched->clear_state(); // the state of the previous graph
    }
    sched->is_reset = false;
    sched->is_alloc = false;
    const bool ok   = sched->split_graph(graph) && sched->alloc_splits();
    sched->restore_edits(); // Note [graph edits]
    if (!ok) {
        return false;
    }
    sched->is_alloc        = true;
    sched->allocated_graph = graph;
    return true;
}

enum wsp_ggml_status wsp_ggml_backend_sched_graph_compute_async(wsp_ggml_backend_sched_t sched,
                                                                struct wsp_ggml_cgraph * graph) {
    if (!valid(sched, __func__)) {
        return WSP_GGML_STATUS_FAILED;
    }
    // the first compute of a graph allocates it
    if ((!sched->is_alloc || sched->allocated_graph != graph) && !wsp_ggml_backend_sched_alloc_graph(sched, graph)) {
        return WSP_GGML_STATUS_ALLOC_FAILED;
    }
    return sched->compute_splits();
}

enum wsp_ggml_status wsp_ggml_backend_sched_graph_compute(wsp_ggml_backend_sched_t sched,
                                                          struct wsp_ggml_cgraph * graph) {
    const wsp_ggml_status status = wsp_ggml_backend_sched_graph_compute_async(sched, graph);
    if (sched == nullptr) {
        return status;
    }
    const wsp_ggml_status sync = sched->synchronize_all();
    return status != WSP_GGML_STATUS_SUCCESS ? status : sync;
}

void wsp_ggml_backend_sched_synchronize(wsp_ggml_backend_sched_t sched) {
    if (valid(sched, __func__)) {
        sched->synchronize_all();
    }
}

void wsp_ggml_backend_sched_set_eval_callback(wsp_ggml_backend_sched_t             sched,
                                              wsp_ggml_backend_sched_eval_callback callback, void * user_data) {
    if (valid(sched, __func__)) {
        sched->callback_eval      = callback;
        sched->callback_eval_data = user_data;
    }
}

int wsp_ggml_backend_sched_get_n_splits(wsp_ggml_backend_sched_t sched) {
    return valid(sched, __func__) ? sched->n_splits : 0;
}

int wsp_ggml_backend_sched_get_n_copies(wsp_ggml_backend_sched_t sched) {
    return valid(sched, __func__) ? sched->n_copies : 0;
}

int wsp_ggml_backend_sched_get_n_backends(wsp_ggml_backend_sched_t sched) {
    return valid(sched, __func__) ? sched->n_backends : 0;
}

wsp_ggml_backend_t wsp_ggml_backend_sched_get_backend(wsp_ggml_backend_sched_t sched, int i) {
    if (!valid(sched, __func__) || i < 0 || i >= sched->n_backends) {
        WSP_LOG_ERROR("%s: backend index %d out of range\n", __func__, i);
        return nullptr;
    }
    return sched->backends[i];
}

size_t wsp_ggml_backend_sched_get_buffer_size(wsp_ggml_backend_sched_t sched, wsp_ggml_backend_t backend) {
    const int i = valid(sched, __func__) ? sched->backend_index(backend) : -1;
    if (i < 0) {
        WSP_LOG_ERROR("%s: backend %s is not in the scheduler\n", __func__, wsp_ggml_backend_name(backend));
        return 0;
    }
    return wsp_ggml_gallocr_get_buffer_size(sched->galloc, i);
}

void wsp_ggml_backend_sched_set_tensor_backend(wsp_ggml_backend_sched_t sched, struct wsp_ggml_tensor * node,
                                               wsp_ggml_backend_t backend) {
    const int i = valid(sched, __func__) ? sched->backend_index(backend) : -1;
    if (i < 0) {
        WSP_LOG_ERROR("%s: backend %s is not in the scheduler\n", __func__, wsp_ggml_backend_name(backend));
        return;
    }
    const size_t slot           = sched->slot(node);
    sched->tensor_backend[slot] = i;
    sched->tensor_pinned[slot]  = 1;
    sched->pins[node]           = i;
}

wsp_ggml_backend_t wsp_ggml_backend_sched_get_tensor_backend(wsp_ggml_backend_sched_t sched,
                                                             struct wsp_ggml_tensor * node) {
    if (!valid(sched, __func__)) {
        return nullptr;
    }
    const size_t i = sched->hash.find(node);
    if (i == wsp::HashSet::FULL || !sched->hash.is_used(i) || sched->tensor_backend[i] < 0) {
        return nullptr;
    }
    return sched->backends[sched->tensor_backend[i]];
}

} // extern "C"
