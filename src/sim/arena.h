#pragma once

// A sim device's memory: one reserved address range (pages are committed only when touched),
// carved by a first-fit allocator whose free blocks are merged on release. The range lets a
// kernel's pointers be attributed to exactly one device.

#include <cstddef>
#include <map>
#include <mutex>

namespace wsp::sim {

class Arena {
public:
    explicit Arena(size_t capacity);
    ~Arena();

    Arena(const Arena &)             = delete;
    Arena & operator=(const Arena &) = delete;

    bool valid() const { return base_ != nullptr; }

    // nullptr when there is no contiguous room
    void * allocate(size_t size, size_t alignment);
    void   release(void * p);

    bool contains(const void * p) const {
        const char * c = static_cast<const char *>(p);
        return c >= base_ && c < base_ + capacity_;
    }

    size_t capacity() const { return capacity_; }
    size_t used() const;

private:
    char *                   base_;
    size_t                   capacity_;
    mutable std::mutex       mutex_;
    std::map<size_t, size_t> free_;  // offset -> size
    std::map<size_t, size_t> taken_; // offset -> size
    size_t                   used_ = 0;
};

} // namespace wsp::sim
