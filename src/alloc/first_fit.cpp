// First-fit placement (see first_fit.h).

#include "first_fit.h"

#include <sys/mman.h>
#include <unistd.h>

#include <iterator>

namespace wsp::alloc {

size_t FirstFit::allocate(size_t size, size_t alignment) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        const size_t start = (it->first + alignment - 1) / alignment * alignment;
        const size_t pad   = start - it->first;
        if (it->second < pad + size) {
            continue;
        }
        const size_t block_off = it->first, block_size = it->second;
        free_.erase(it);
        if (pad > 0) {
            free_.emplace(block_off, pad);
        }
        if (block_size > pad + size) {
            free_.emplace(start + size, block_size - pad - size);
        }
        taken_.emplace(start, size);
        used_ += size;
        return start;
    }
    return NONE;
}

size_t FirstFit::release(size_t offset) {
    auto it = taken_.find(offset);
    if (it == taken_.end()) {
        return 0;
    }
    const size_t freed = it->second;
    size_t       start = offset, size = freed;
    taken_.erase(it);
    used_ -= size;
    auto next = free_.lower_bound(start);
    if (next != free_.end() && start + size == next->first) {
        size += next->second;
        next = free_.erase(next);
    }
    if (next != free_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == start) {
            start = prev->first;
            size += prev->second;
            free_.erase(prev);
        }
    }
    free_.emplace(start, size);
    return freed;
}

void release_pages(char * base, size_t offset, size_t size) {
    const size_t page  = (size_t) sysconf(_SC_PAGESIZE);
    const size_t first = (offset + page - 1) / page * page, last = (offset + size) / page * page;
    if (last > first) {
        madvise(base + first, last - first, MADV_DONTNEED);
    }
}

} // namespace wsp::alloc
