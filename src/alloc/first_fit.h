#pragma once

// First-fit placement of blocks in a range of `capacity` bytes, by offset: the free blocks and the
// taken ones in two ordered maps, a released block merged with its free neighbours. The emulated
// devices' memory (sim arenas, the host target's) places its allocations with it; the caller
// holds the lock and owns the bytes.

#include "../core/log.h"

#include <cstddef>
#include <cstdint>
#include <map>

namespace wsp::alloc {

class WSP_INTERNAL_API FirstFit {
public:
    static constexpr size_t NONE = SIZE_MAX;

    explicit FirstFit(size_t capacity) { free_.emplace(0, capacity); }

    // the offset of `size` bytes at a multiple of `alignment` in the first free block that holds
    // them, or NONE
    size_t allocate(size_t size, size_t alignment);
    // frees the block taken at `offset` and returns its size; 0 (nothing freed) when no block
    // starts there
    size_t release(size_t offset);

    size_t used() const { return used_; }
    size_t blocks() const { return taken_.size(); }

private:
    std::map<size_t, size_t> free_;  // offset -> size
    std::map<size_t, size_t> taken_; // offset -> size
    size_t                   used_ = 0;
};

// Gives the pages that lie wholly inside [base + offset, + size) back to the system (a freed
// block of a mapping; a page shared with a live neighbour keeps its contents, as MADV_DONTNEED
// zero-fills every page it touches). Refilled with zeros when touched again.
WSP_INTERNAL_API void release_pages(char * base, size_t offset, size_t size);

} // namespace wsp::alloc
