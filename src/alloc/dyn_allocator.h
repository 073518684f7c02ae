#pragma once

// Offset allocator used to plan a buffer: hands out aligned [offset, offset + size) ranges
// from a free list kept sorted by offset (neighbours merged on free), best fit first.
// It never touches memory; max_size() is the buffer size the plan needs.

#include <cstddef>
#include <vector>

namespace wsp::alloc {

class DynAllocator {
public:
    explicit DynAllocator(size_t alignment) : alignment_(alignment) { reset(); }

    void reset();

    size_t allocate(size_t size);
    void   free(size_t offset, size_t size);

    size_t max_size() const { return max_size_; }
    size_t alignment() const { return alignment_; }
    size_t aligned(size_t size) const { return (size + alignment_ - 1) / alignment_ * alignment_; }

private:
    struct Block {
        size_t offset;
        size_t size;
    };

    size_t             alignment_;
    size_t             max_size_ = 0;
    std::vector<Block> free_; // sorted by offset; the last block is the unbounded tail
};

} // namespace wsp::alloc
