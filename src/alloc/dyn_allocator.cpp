// Planning allocator (see dyn_allocator.h).

#include "dyn_allocator.h"

#include <algorithm>
#include <cstdint>

namespace wsp::alloc {

namespace {
constexpr size_t UNBOUNDED = SIZE_MAX / 4;
}

void DynAllocator::reset() {
    free_.clear();
    free_.push_back({ 0, UNBOUNDED });
    max_size_ = 0;
}

size_t DynAllocator::allocate(size_t size) {
    size = std::max(aligned(size), alignment_);
    // best fit among the bounded blocks; the unbounded tail only when nothing else fits
    size_t best = free_.size() - 1;
    for (size_t i = 0; i + 1 < free_.size(); ++i) {
        if (free_[i].size >= size && (best == free_.size() - 1 || free_[i].size < free_[best].size)) {
            best = i;
        }
    }
    const size_t offset = free_[best].offset;
    free_[best].offset += size;
    free_[best].size -= size;
    if (free_[best].size == 0) {
        free_.erase(free_.begin() + (std::ptrdiff_t) best);
    }
    max_size_ = std::max(max_size_, offset + size);
    return offset;
}

void DynAllocator::free(size_t offset, size_t size) {
    size    = std::max(aligned(size), alignment_);
    auto it = std::lower_bound(free_.begin(), free_.end(), offset,
                               [](const Block & b, size_t off) { return b.offset < off; });
    it      = free_.insert(it, { offset, size });
    // merge with the next block, then with the previous one
    auto next = it + 1;
    if (next != free_.end() && it->offset + it->size == next->offset) {
        it->size += next->size;
        free_.erase(next);
    }
    if (it != free_.begin()) {
        auto prev = it - 1;
        if (prev->offset + prev->size == it->offset) {
            prev->size += it->size;
            free_.erase(it);
        }
    }
}

} // namespace wsp::alloc
