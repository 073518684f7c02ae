// Sim device memory (see arena.h).

#include "arena.h"

#include <sys/mman.h>
#include <unistd.h>

namespace wsp::sim {

Arena::Arena(size_t capacity) : base_(nullptr), storage_(nullptr), capacity_(capacity) {
    void * a = mmap(nullptr, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void * s = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a != MAP_FAILED && s != MAP_FAILED) {
        base_    = static_cast<char *>(a);
        storage_ = static_cast<char *>(s);
        free_.emplace(0, capacity);
        return;
    }
    if (a != MAP_FAILED) {
        munmap(a, capacity);
    }
    if (s != MAP_FAILED) {
        munmap(s, capacity);
    }
}

Arena::~Arena() {
    if (valid()) {
        munmap(base_, capacity_);
        munmap(storage_, capacity_);
    }
}

void * Arena::allocate(size_t size, size_t alignment) {
    std::lock_guard<std::mutex> lock(mutex_);
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
        return base_ + start;
    }
    return nullptr;
}

void Arena::release(void * p) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t                off = (size_t) (static_cast<char *>(p) - base_);
    auto                        it  = taken_.find(off);
    if (it == taken_.end()) {
        return;
    }
    size_t start = off, size = it->second;
    taken_.erase(it);
    used_ -= size;
    // give back the pages that lie wholly inside the block (a page shared with a live neighbour
    // must keep its contents: MADV_DONTNEED zero-fills every page it touches), then merge with the
    // free neighbours
    const size_t page  = (size_t) sysconf(_SC_PAGESIZE);
    const size_t first = (start + page - 1) / page * page, last = (start + size) / page * page;
    if (last > first) {
        madvise(storage_ + first, last - first, MADV_DONTNEED);
    }
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
}

size_t Arena::blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return taken_.size();
}

size_t Arena::used() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_;
}

} // namespace wsp::sim
