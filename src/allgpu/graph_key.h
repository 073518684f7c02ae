#pragma once

// Note [graph keys]: what a graph given to the all-GPU device is, for the runner's cache of member
// graphs (Note [kept member graphs] in runner.h): every node's op, type, flags, shape, strides and
// op parameters and which node or outside tensor each source and view source is; every outside
// tensor's identity (weights' pieces and sharded caches are kept by tensor), memory and shape;
// and the shares of the split. Where the nodes are is not part of it: a decoder step writes its
// keys and values at the next position of the cache (a view at another offset) and the scheduler
// may place a node elsewhere, and a kept build follows them (Note [moved nodes] in kept.cpp).
// Two graphs with equal keys plan alike, so a decoder step runs what an earlier step built.

#include "ggml.h"

#include <cstdint>
#include <vector>

namespace wsp::allgpu::tp {

struct GraphKey {
    std::vector<uint64_t> words;
    uint64_t              hash = 0;

    bool operator==(const GraphKey & o) const { return hash == o.hash && words == o.words; }
};

GraphKey key_of(const wsp_ggml_cgraph * g, const std::vector<float> & proportions);

// Note [grown shapes] in reshape.cpp: the key without the shapes and strides of the nodes and
// outside tensors and without where outside tensors are: graphs that differ only in those (a
// decoder step whose cache grew a position) are alike, and a build kept for one may follow the
// other
GraphKey alike_key_of(const wsp_ggml_cgraph * g, const std::vector<float> & proportions);

} // namespace wsp::allgpu::tp
