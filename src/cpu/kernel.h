#pragma once

// The CPU kernel interface. Every op the CPU computes has one OpKernel entry (ops.cpp) that
// keeps support and execution side by side: supported() says whether compute() can run the
// node as built (types, layouts), n_tasks() how many threads it wants, work_size() how much
// shared scratch it needs. compute() is called once per task with ith in [0, nth).

#include "ggml.h"

#include "../core/impl.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace wsp::cpu {

class ThreadGroup;

struct ComputeParams {
    int           ith;   // this task's index
    int           nth;   // number of tasks running the node
    void *        wdata; // scratch shared by the tasks of this node (work_size bytes)
    size_t        wsize;
    ThreadGroup * group; // shared by the tasks of this node (never NULL)

    // all nth tasks of the node wait here for each other
    void barrier() const;
    // dynamic work distribution: returns 0, 1, 2, ... across the tasks of this node
    int64_t next_chunk() const;
    // guided ranges of n items for one phase per node (Note [guided claims], threadpool.h)
    bool claim(int64_t n, int64_t min_size, int64_t & begin, int64_t & end) const;
};

struct OpKernel {
    bool (*supported)(const wsp_ggml_tensor * node);
    int (*n_tasks)(const wsp_ggml_tensor * node, int n_threads);
    size_t (*work_size)(const wsp_ggml_tensor * node, int n_tasks); // may be NULL: no scratch
    void (*compute)(const ComputeParams & params, wsp_ggml_tensor * node);
};

// the kernel of node's op, or NULL when the CPU has none
const OpKernel * kernel_for(const wsp_ggml_tensor * node);

// supported by the CPU: a kernel exists and accepts this node
WSP_INTERNAL_API bool supports_op(const wsp_ggml_tensor * node);

// split [0, n) into nth nearly equal ranges; range of task ith
inline void split_range(int64_t n, int ith, int nth, int64_t & begin, int64_t & end) {
    const int64_t per = (n + nth - 1) / nth;
    begin             = per * ith < n ? per * ith : n;
    end               = begin + per < n ? begin + per : n;
}

// typical thread counts
inline int tasks_for_elements(int64_t n_elements, int n_threads, int64_t per_task = 16384) {
    int64_t n = n_elements / per_task;
    if (n < 1) {
        n = 1;
    }
    return (int) (n < n_threads ? n : n_threads);
}

int one_task(const wsp_ggml_tensor * node, int n_threads);
int tasks_by_rows(const wsp_ggml_tensor * node, int n_threads);

} // namespace wsp::cpu
