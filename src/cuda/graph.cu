// CUDA graph recording and replay of backend graphs (see graph.cuh).

#include "graph.cuh"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace wsp::cuda {

GraphCache::GraphCache(int index, int physical) : index_(index), physical_(physical) {
    const char * env = std::getenv("WSP_GGML_CUDA_GRAPHS");
    enabled_         = env != nullptr && std::atoi(env) != 0;
}

std::vector<GraphCache::NodeKey> GraphCache::key_of(const wsp_ggml_cgraph * graph) {
    auto *               g = const_cast<wsp_ggml_cgraph *>(graph);
    std::vector<NodeKey> key((size_t) wsp_ggml_graph_n_nodes(g));
    for (size_t i = 0; i < key.size(); ++i) {
        const wsp_ggml_tensor * t = wsp_ggml_graph_node(g, (int) i);
        NodeKey &               k = key[i];
        std::memset(&k, 0, sizeof(k));
        k.op   = (int) t->op;
        k.type = (int) t->type;
        std::memcpy(k.ne, t->ne, sizeof(k.ne));
        std::memcpy(k.nb, t->nb, sizeof(k.nb));
        k.data = t->data;
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            if (const wsp_ggml_tensor * s = t->src[j]) {
                k.src[j].data = s->data;
                k.src[j].type = (int) s->type;
                std::memcpy(k.src[j].ne, s->ne, sizeof(k.src[j].ne));
                std::memcpy(k.src[j].nb, s->nb, sizeof(k.src[j].nb));
            }
        }
        std::memcpy(k.params, t->op_params, sizeof(k.params));
    }
    return key;
}

GraphCache::Result GraphCache::run(cudaStream_t stream, const wsp_ggml_cgraph * graph,
                                   const std::function<bool()> & launch_all) {
    if (!enabled_) {
        return Result::OFF;
    }
    std::vector<NodeKey> key = key_of(graph);
    for (size_t i = 0; i < entries_.size(); ++i) {
        const Entry & e = entries_[i];
        if (e.key.size() == key.size() && std::memcmp(key.data(), e.key.data(), key.size() * sizeof(NodeKey)) == 0) {
            std::rotate(entries_.begin(), entries_.begin() + (std::ptrdiff_t) i,
                        entries_.begin() + (std::ptrdiff_t) i + 1);
            ++counters(index_).graph_replays;
            return WSP_CUDA_OK(cudaGraphLaunch(entries_.front().exec.get(), stream), physical_) ? Result::REPLAYED
                                                                                                : Result::FAILED;
        }
    }
    return record(stream, std::move(key), launch_all);
}

GraphCache::Result GraphCache::record(cudaStream_t stream, std::vector<NodeKey> key,
                                      const std::function<bool()> & launch_all) {
    if (!WSP_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), physical_)) {
        enabled_ = false;
        return Result::OFF;
    }
    bool launched = false;
    {
        Capturing capturing; // the launches are the graph's nodes, counted as its capture and replays
        launched = launch_all();
    }
    cudaGraph_t       g   = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &g);
    if (!launched || end != cudaSuccess || g == nullptr) {
        (void) cudaGetLastError();
        if (g != nullptr) {
            (void) cudaGraphDestroy(g);
        }
        // nothing ran during the capture: the caller launches directly, now and from now on
        WSP_LOG_WARN(WSP_GGML_CUDA_NAME
                     ": this graph cannot be recorded as a CUDA graph (%s); launching directly from now on\n",
                     end != cudaSuccess ? cudaGetErrorString(end) : "an op failed to launch while recording");
        enabled_ = false;
        entries_.clear();
        return Result::OFF;
    }
    cudaGraphExec_t exec = nullptr;
    const bool      ok   = WSP_CUDA_OK(cudaGraphInstantiate(&exec, g, 0), physical_);
    (void) cudaGraphDestroy(g);
    if (!ok) {
        enabled_ = false;
        entries_.clear();
        return Result::OFF;
    }
    if (entries_.size() == CAPACITY) {
        entries_.pop_back();
    }
    ++counters(index_).graph_captures;
    const size_t n_nodes = key.size();
    entries_.insert(entries_.begin(), Entry{ std::move(key), GraphExec(physical_, exec) });
    WSP_LOG_DEBUG(WSP_GGML_CUDA_NAME ": recorded a CUDA graph of %zu nodes on GPU %d (%zu kept)\n", n_nodes, physical_,
                  entries_.size());
    ++counters(index_).graph_replays;
    return WSP_CUDA_OK(cudaGraphLaunch(exec, stream), physical_) ? Result::RECORDED : Result::FAILED;
}

} // namespace wsp::cuda
