#pragma once

// Note [CUDA graphs]: a backend records the launches of a graph into a CUDA graph the first time
// it sees it and replays it whenever the same graph comes again (same nodes, ops, types, shapes,
// strides, data addresses and params, and the same of every source): a repeated step is one
// graph launch instead of a launch per kernel. On by default; WSP_GGML_CUDA_GRAPHS=0 turns it off.
//  - A graph that replaces the one before it is recorded into it, in place (cudaGraphExecUpdate,
//    far cheaper than instantiating): a decoder step is one graph computed between synchronizes,
//    and differs from the step before only in numbers (the KV cache grows a cell, its write
//    moves). So a graph that is the first since a synchronize, after an evaluation of one graph
//    that was recorded then and never replayed, with the same ops and types and reading mostly
//    the same memory from outside the graph (at least half its outside sources at the same
//    addresses: the same weights and caches), replaces that recording. A scheduler that waits
//    for a backend between two of its splits makes them look like two evaluations of one graph;
//    the splits read other weights, so the second does not replace the first (with the ops
//    alone, two splits of our own GEMM did, and the first was recorded again in the next
//    evaluation). Every other graph is kept apart: the splits of a scheduler's evaluation each call
//    their backend with a graph of their own, in the same order every time, and the copies a
//    scheduler rotates through (Note [copy rotation]) alternate; each replays when it comes again.
//    A replaced graph that comes back after all is remembered (ghosts_) and never replaces another.
//  - The cache keeps CAPACITY graphs; the least recently used goes first.
//  - The scratch arena cannot grow during a recording (Note [scratch arena]): the recording is
//    dropped, the arena grows, and the graph is recorded again. A kept graph holds the arena block
//    it was recorded with, which outlives the arena's growth until the graph goes.
//  - If an op cannot be captured, the backend logs once and launches directly from then on.

#include "counters.cuh"
#include "handles.cuh"

#include <functional>
#include <memory>
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
        RECORDED, // the graph was recorded (instantiated, or updated into a kept one) and ran
        OFF,      // not used (setting off, or not capturable): the caller launches directly
        FAILED,   // launching failed; logged
    };

    // graphs kept: a scheduler's splits each call their backend with a graph of their own (an
    // encoder with split weights makes ~45 per device per evaluation), all of which must stay
    static constexpr size_t CAPACITY = 256;

    GraphCache(int index, int physical);

    // launch_all enqueues every node on `stream` (taking scratch from `arena`) and returns false
    // on failure
    Result run(cudaStream_t stream, const wsp_ggml_cgraph * graph, ScratchArena & arena,
               const std::function<bool()> & launch_all);

    // the backend waited for its stream: the graphs computed since were one evaluation
    void evaluation_ended();

    bool enabled() const { return enabled_; }

private:
    // What a recording depends on, node by node: op, type, shape, strides, data address and
    // params, and the same of every source (the same address may hold another tensor later,
    // memory being reused, so its type and layout count too), packed without the empty sources
    struct Key {
        std::vector<char> bytes;
        uint64_t          hash    = 0; // of bytes: a cheap first comparison
        uint64_t          ops     = 0; // of the ops and types alone: graphs that may differ only in numbers
        size_t            n_nodes = 0;
        // the addresses of the sources from outside the graph (weights, caches, inputs), in order
        std::vector<const void *> outside;
        bool                      operator==(const Key & o) const { return hash == o.hash && bytes == o.bytes; }
    };

    struct Entry {
        Key                   key;
        bool                  replayed; // since it was recorded or updated
        std::shared_ptr<void> scratch;  // the arena block it was recorded with
        GraphExec             exec;     // destroyed before the block can go
    };

    static Key  key_of(const wsp_ggml_cgraph * graph);
    static bool reads_alike(const Key & a, const Key & b);
    Result      launch(Entry & e, cudaStream_t stream, Result as);
    // records the graph; NULL (and OFF in *why) when it cannot be recorded now
    cudaGraph_t capture(cudaStream_t stream, ScratchArena & arena, const std::function<bool()> & launch_all,
                        Result * why);
    // the recording into a kept entry of the same ops, or into a new one
    Result keep(cudaStream_t stream, Key key, cudaGraph_t g, std::shared_ptr<void> scratch, size_t slot);
    // the recording this graph replaces (NULL: none), the graph being the evaluation's `slot`-th
    Entry * replaced_by(const Key & key, size_t slot);

    int                   index_; // the device the captures and replays are counted for
    int                   physical_;
    bool                  enabled_;
    std::vector<Entry>    entries_;           // most recently used first
    size_t                computed_      = 0; // graphs computed in this evaluation
    size_t                computed_last_ = 0; // and in the one before
    uint64_t              recorded_last_ = 0; // the hash of the key recorded (or updated) last
    std::vector<uint64_t> ghosts_;            // hashes of keys replaced by an update, latest last
};

} // namespace wsp::cuda
