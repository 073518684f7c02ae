#pragma once

// A sim device's memory, in two mappings of the same size. Device addresses (what tensors hold)
// lie in a range reserved without any access, so host code that dereferences one faults as it
// would on a GPU; the bytes live in a second mapping (pages committed only when touched) that
// only the sim reaches, through host(). A first-fit placement (alloc/first_fit.h) carves the
// range. The range lets a kernel's pointers be attributed to exactly one device.

#include "../alloc/first_fit.h"

#include <cstddef>
#include <mutex>

namespace wsp::sim {

class Arena {
public:
    explicit Arena(size_t capacity);
    ~Arena();

    Arena(const Arena &)             = delete;
    Arena & operator=(const Arena &) = delete;

    bool valid() const { return base_ != nullptr && storage_ != nullptr; }

    // nullptr when there is no contiguous room
    void * allocate(size_t size, size_t alignment);
    void   release(void * p);

    bool contains(const void * p) const {
        const char * c = static_cast<const char *>(p);
        return c >= base_ && c < base_ + capacity_;
    }

    // where the sim reads and writes the bytes at device address p (p inside the range)
    void * host(const void * p) const { return storage_ + (static_cast<const char *>(p) - base_); }

    size_t capacity() const { return capacity_; }
    size_t used() const;
    size_t blocks() const; // allocations alive

private:
    char *             base_;    // device addresses: no access
    char *             storage_; // the bytes
    size_t             capacity_;
    mutable std::mutex mutex_;
    alloc::FirstFit    blocks_;
};

} // namespace wsp::sim
