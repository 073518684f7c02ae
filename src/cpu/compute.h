#pragma once

// Graph compute on the CPU: the plan (work buffer size) and the node loop.

#include "ggml-cpu.h"

#include "threadpool.h"

namespace wsp::cpu {

// scratch bytes the graph needs with n_threads threads
WSP_INTERNAL_API size_t graph_work_size(const wsp_ggml_cgraph * graph, int n_threads);

// compute nodes in order; pool may be NULL (one thread). Checks the abort callback before each
// node; an op the CPU cannot compute fails the graph with a message naming it.
WSP_INTERNAL_API wsp_ggml_status graph_compute(wsp_ggml_cgraph * graph, ThreadPool * pool, int n_threads, void * wdata,
                                               size_t wsize, wsp_ggml_abort_callback abort_cb, void * abort_data);

} // namespace wsp::cpu
