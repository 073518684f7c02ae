// CUDA graph recording, update and replay of backend graphs (see graph.cuh).

#include "graph.cuh"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace wsp::cuda {

GraphCache::GraphCache(int index, int physical) : index_(index), physical_(physical) {
    const char * env = std::getenv("WSP_GGML_CUDA_GRAPHS");
    enabled_         = env == nullptr || std::atoi(env) != 0;
}

namespace {

// FNV-1a
struct Hash {
    uint64_t h = 1469598103934665603ull;
    void     add(const void * p, size_t n) {
            for (size_t i = 0; i < n; ++i) {
                h ^= static_cast<const unsigned char *>(p)[i];
                h *= 1099511628211ull;
        }
    }
    void add(uint64_t v) { add(&v, sizeof(v)); }
};

// a tensor as a kernel sees it (padding zeroed: compared byte for byte)
struct TensorKey {
    const void * data;
    int32_t      op, type;
    int64_t      ne[4];
    size_t       nb[4];
};

TensorKey tensor_key(const wsp_ggml_tensor * t) {
    TensorKey k;
    std::memset(&k, 0, sizeof(k));
    k.data = t->data;
    k.op   = (int32_t) t->op;
    k.type = (int32_t) t->type;
    std::memcpy(k.ne, t->ne, sizeof(k.ne));
    std::memcpy(k.nb, t->nb, sizeof(k.nb));
    return k;
}

void append(std::vector<char> & out, const void * p, size_t n) {
    out.insert(out.end(), static_cast<const char *>(p), static_cast<const char *>(p) + n);
}

} // namespace

GraphCache::Key GraphCache::key_of(const wsp_ggml_cgraph * graph) {
    auto * g = const_cast<wsp_ggml_cgraph *>(graph);
    Key    key;
    key.n_nodes = (size_t) wsp_ggml_graph_n_nodes(g);
    Hash ops;
    ops.add(key.n_nodes);
    std::vector<const wsp_ggml_tensor *> nodes(key.n_nodes);
    for (size_t i = 0; i < key.n_nodes; ++i) {
        nodes[i] = wsp_ggml_graph_node(g, (int) i);
    }
    std::sort(nodes.begin(), nodes.end());
    for (size_t i = 0; i < key.n_nodes; ++i) {
        const wsp_ggml_tensor * t = wsp_ggml_graph_node(g, (int) i);
        const TensorKey         k = tensor_key(t);
        append(key.bytes, &k, sizeof(k));
        append(key.bytes, t->op_params, sizeof(t->op_params));
        ops.add((uint64_t) t->op);
        ops.add((uint64_t) t->type);
        uint32_t present = 0;
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            present |= t->src[j] != nullptr ? 1u << j : 0u;
        }
        append(key.bytes, &present, sizeof(present));
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            if (const wsp_ggml_tensor * s = t->src[j]) {
                const TensorKey sk = tensor_key(s);
                append(key.bytes, &sk, sizeof(sk));
                ops.add((uint64_t) j);
                ops.add((uint64_t) s->type);
                if (!std::binary_search(nodes.begin(), nodes.end(), s)) {
                    key.outside.push_back(s->data);
                }
            }
        }
    }
    Hash all;
    all.add(key.bytes.data(), key.bytes.size());
    key.hash = all.h;
    key.ops  = ops.h;
    return key;
}

void GraphCache::evaluation_ended() {
    computed_last_ = computed_;
    computed_      = 0;
}

// at least half of the sources from outside the graph at the same addresses, in the same places
bool GraphCache::reads_alike(const Key & a, const Key & b) {
    if (a.outside.size() != b.outside.size() || a.outside.empty()) {
        return false;
    }
    size_t same = 0;
    for (size_t i = 0; i < a.outside.size(); ++i) {
        same += a.outside[i] == b.outside[i] ? 1 : 0;
    }
    return 2 * same >= a.outside.size();
}

GraphCache::Entry * GraphCache::replaced_by(const Key & key, size_t slot) {
    if (slot != 0 || computed_last_ != 1 || std::find(ghosts_.begin(), ghosts_.end(), key.hash) != ghosts_.end()) {
        return nullptr;
    }
    for (Entry & e : entries_) {
        if (e.key.hash == recorded_last_) {
            return !e.replayed && e.key.ops == key.ops && e.key.n_nodes == key.n_nodes && reads_alike(e.key, key)
                       ? &e
                       : nullptr;
        }
    }
    return nullptr;
}

GraphCache::Result GraphCache::launch(Entry & e, cudaStream_t stream, Result as) {
    ++counters(index_).graph_replays;
    return WSP_CUDA_OK(cudaGraphLaunch(e.exec.get(), stream), physical_) ? as : Result::FAILED;
}

GraphCache::Result GraphCache::run(cudaStream_t stream, const wsp_ggml_cgraph * graph, ScratchArena & arena,
                                   const std::function<bool()> & launch_all) {
    if (!enabled_) {
        return Result::OFF;
    }
    Key          key  = key_of(graph);
    const size_t slot = computed_++;
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].key == key) {
            std::rotate(entries_.begin(), entries_.begin() + (std::ptrdiff_t) i,
                        entries_.begin() + (std::ptrdiff_t) i + 1);
            entries_.front().replayed = true;
            return launch(entries_.front(), stream, Result::REPLAYED);
        }
    }
    Result      why = Result::OFF;
    cudaGraph_t g   = capture(stream, arena, launch_all, &why);
    if (g == nullptr) {
        return why;
    }
    const Result r = keep(stream, std::move(key), g, arena.block(), slot);
    (void) cudaGraphDestroy(g);
    return r;
}

cudaGraph_t GraphCache::capture(cudaStream_t stream, ScratchArena & arena, const std::function<bool()> & launch_all,
                                Result * why) {
    constexpr int ATTEMPTS = 4; // each grows the arena to what the recording got to
    for (int attempt = 0; attempt < ATTEMPTS; ++attempt) {
        if (!WSP_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), physical_)) {
            enabled_ = false;
            return nullptr;
        }
        bool launched = false;
        arena.set_recording(true);
        {
            Capturing capturing; // the launches are the graph's nodes, counted as its capture and replays
            launched = launch_all();
        }
        arena.set_recording(false);
        cudaGraph_t       g   = nullptr;
        const cudaError_t end = cudaStreamEndCapture(stream, &g);
        if (launched && end == cudaSuccess && g != nullptr) {
            return g;
        }
        (void) cudaGetLastError();
        if (g != nullptr) {
            (void) cudaGraphDestroy(g);
        }
        if (!launched && arena.short_by() > 0) {
            // nothing ran: grow the arena outside the recording and record again
            if (!arena.grow_for_capture(stream)) {
                return nullptr; // out of memory (logged): the direct launch reports the failure
            }
            continue;
        }
        // nothing ran during the capture: the caller launches directly, now and from now on
        WSP_LOG_WARN(WSP_GGML_CUDA_NAME
                     ": this graph cannot be recorded as a CUDA graph (%s); launching directly from now on\n",
                     end != cudaSuccess ? cudaGetErrorString(end) : "an op failed to launch while recording");
        enabled_ = false;
        entries_.clear();
        return nullptr;
    }
    *why = Result::OFF; // still short after growing: launch directly this time
    return nullptr;
}

GraphCache::Result GraphCache::keep(cudaStream_t stream, Key key, cudaGraph_t g, std::shared_ptr<void> scratch,
                                    size_t slot) {
    constexpr size_t GHOSTS  = 64;
    const size_t     n_nodes = key.n_nodes;
    Entry *          e       = replaced_by(key, slot);
    recorded_last_           = key.hash;
    if (e != nullptr) {
        if (gpu::graph_exec_update(e->exec.get(), g) == cudaSuccess) {
            if (ghosts_.size() == GHOSTS) {
                ghosts_.erase(ghosts_.begin());
            }
            ghosts_.push_back(e->key.hash);
            e->key     = std::move(key);
            e->scratch = std::move(scratch);
            ++counters(index_).graph_captures;
            const auto at = entries_.begin() + (e - entries_.data());
            std::rotate(entries_.begin(), at, at + 1);
            WSP_LOG_DEBUG(WSP_GGML_CUDA_NAME ": updated a CUDA graph of %zu nodes on GPU %d\n", n_nodes, physical_);
            return launch(entries_.front(), stream, Result::RECORDED);
        }
        (void) cudaGetLastError(); // another topology after all: a graph of its own
    }
    cudaGraphExec_t exec = nullptr;
    if (!WSP_CUDA_OK(cudaGraphInstantiate(&exec, g, 0), physical_)) {
        enabled_ = false;
        entries_.clear();
        return Result::OFF;
    }
    ++counters(index_).graph_captures;
    if (entries_.size() >= CAPACITY) {
        entries_.pop_back();
    }
    entries_.insert(entries_.begin(), Entry{ std::move(key), false, std::move(scratch), GraphExec(physical_, exec) });
    WSP_LOG_DEBUG(WSP_GGML_CUDA_NAME ": recorded a CUDA graph of %zu nodes on GPU %d (%zu kept)\n", n_nodes, physical_,
                  entries_.size());
    return launch(entries_.front(), stream, Result::RECORDED);
}

} // namespace wsp::cuda
