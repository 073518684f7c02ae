// Sim device memory (see arena.h).

#include "arena.h"

#include <sys/mman.h>
#include <unistd.h>

namespace wsp::sim {

Arena::Arena(size_t capacity) : base_(nullptr), storage_(nullptr), capacity_(capacity), blocks_(capacity) {
    void * a = mmap(nullptr, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void * s = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a != MAP_FAILED && s != MAP_FAILED) {
        base_    = static_cast<char *>(a);
        storage_ = static_cast<char *>(s);
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
    const size_t                off = blocks_.allocate(size, alignment);
    return off == alloc::FirstFit::NONE ? nullptr : base_ + off;
}

void Arena::release(void * p) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t                start = (size_t) (static_cast<char *>(p) - base_);
    const size_t                size  = blocks_.release(start);
    alloc::release_pages(storage_, start, size);
}

size_t Arena::blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_.blocks();
}

size_t Arena::used() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_.used();
}

} // namespace wsp::sim
