#pragma once

// Note [graph keys]: what a graph given to the all-GPU device is, for the runner's cache of member
// graphs (Note [kept member graphs] in runner.h): every node's op, type, flags, shape, strides,
// op parameters, memory (data, buffer, view offset) and which node or outside tensor each source
// and view source is; every outside tensor's identity (weights' pieces and sharded caches are
// kept by tensor), memory and shape; and the shares of the split. Two graphs with equal keys
// plan alike and build the same member graphs over the same memory, whatever their tensor
// objects, so a decoder step that repeats its shapes runs what an earlier step built.

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

} // namespace wsp::allgpu::tp
