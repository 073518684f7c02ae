#pragma once

// Note [CUDA graphs]: with WSP_GGML_CUDA_GRAPHS=1 a backend records the launches of a graph into a
// CUDA graph the first time it sees it and replays it whenever the same graph comes again (same
// nodes, ops, types, shapes, strides, data addresses and params, and the same of every source:
// decoder steps on a reused graph).
// It keeps the last few graphs it recorded, so that a scheduler rotating through its pipeline
// copies (whose addresses differ per copy, Note [copy rotation]) replays one per copy. If an op
// cannot be captured, the backend logs once and launches directly from then on.

#include "counters.cuh"
#include "handles.cuh"

#include <functional>
#include <vector>

namespace wsp::cuda {

struct GraphExecTraits {
    static void release(int dev, cudaGraphExec_t g) { WSP_CUDA_OK(cudaGraphExecDestroy(g), dev); }
};
using GraphExec = Owner<cudaGraphExec_t, GraphExecTraits>;

class GraphCache {
public:
    enum class Result {
        REPLAYED, // the cached graph ran
        RECORDED, // the graph was recorded and ran
        OFF,      // not used (setting off, or capture impossible): the caller launches directly
        FAILED,   // launching failed; logged
    };

    static constexpr size_t CAPACITY = 8; // graphs kept; the least recently used goes first

    GraphCache(int index, int physical);

    // launch_all enqueues every node on `stream` and returns false on failure
    Result run(cudaStream_t stream, const wsp_ggml_cgraph * graph, const std::function<bool()> & launch_all);

private:
    // a source as a kernel sees it: the same address may hold another tensor later (memory
    // reused), so its type and layout count too
    struct SrcKey {
        const void * data;
        int          type;
        int64_t      ne[4];
        size_t       nb[4];
    };
    struct NodeKey {
        int          op, type;
        int64_t      ne[4];
        size_t       nb[4];
        const void * data;
        SrcKey       src[WSP_GGML_MAX_SRC];
        int32_t      params[WSP_GGML_MAX_OP_PARAMS / sizeof(int32_t)];
    };

    struct Entry {
        std::vector<NodeKey> key;
        GraphExec            exec;
    };

    static std::vector<NodeKey> key_of(const wsp_ggml_cgraph * graph);
    Result record(cudaStream_t stream, std::vector<NodeKey> key, const std::function<bool()> & launch_all);

    int                index_; // the device the captures and replays are counted for
    int                physical_;
    bool               enabled_;
    std::vector<Entry> entries_; // most recently used first
};

} // namespace wsp::cuda
