// Graph compute on the CPU (see compute.h) and the cplan API of ggml-cpu.h.

#include "compute.h"

#include <memory>
#include <iterator>
#include <mutex>
#include <vector>

namespace wsp::cpu {

namespace {

constexpr size_t CACHE_LINE = 64;

bool is_noop(const wsp_ggml_tensor * node) {
    switch (node->op) {
        case WSP_GGML_OP_NONE:
        case WSP_GGML_OP_VIEW:
        case WSP_GGML_OP_RESHAPE:
        case WSP_GGML_OP_PERMUTE:
        case WSP_GGML_OP_TRANSPOSE: return true;
        default: return false;
    }
}

struct NodeJob {
    const OpKernel *  kernel;
    wsp_ggml_tensor * node;
    void *            wdata;
    size_t            wsize;
    ThreadGroup *     group;
};

void run_task(void * ctx, int ith, int nth) {
    const NodeJob * job = static_cast<const NodeJob *>(ctx);
    job->kernel->compute(ComputeParams{ ith, nth, job->wdata, job->wsize, job->group }, job->node);
}

// Note [kept pools]
// wsp_ggml_graph_compute without a threadpool in its plan (and so wsp_ggml_graph_compute_with_ctx,
// the path of whisper.cpp's CPU-only helpers and of older clients) used to start n - 1 threads for
// the call and join them after it. At M = 1 that cost more than the mat-mul: F16 1280x5120 in
// cache ran at a third of upstream's GFLOP/s. Such calls now borrow a pool of their thread count
// from a shelf and give it back after: one call at a time per pool (a call that finds none idle
// makes one), the one given back last first, at most kKeptPools kept; kept workers sleep between calls once their poll
// ends. The shelf is never destroyed: its sleeping workers end with the process.
constexpr size_t kKeptPools = 4;

class PoolShelf {
public:
    std::unique_ptr<ThreadPool> take(int n_threads) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) { // the warmest first
                if ((*it)->n_threads() == n_threads) {
                    std::unique_ptr<ThreadPool> pool = std::move(*it);
                    idle_.erase(std::next(it).base());
                    return pool;
                }
            }
        }
        return std::make_unique<ThreadPool>(n_threads, 50, false);
    }

    void give_back(std::unique_ptr<ThreadPool> pool) {
        std::unique_ptr<ThreadPool> oldest; // joined outside the lock
        {
            std::lock_guard<std::mutex> lock(mutex_);
            idle_.push_back(std::move(pool));
            if (idle_.size() > kKeptPools) {
                oldest = std::move(idle_.front());
                idle_.erase(idle_.begin());
            }
        }
    }

private:
    std::mutex                               mutex_;
    std::vector<std::unique_ptr<ThreadPool>> idle_; // oldest first
};

PoolShelf & shelf() {
    static PoolShelf * s = new PoolShelf;
    return *s;
}

} // namespace

size_t graph_work_size(const wsp_ggml_cgraph * graph, int n_threads) {
    size_t work = 0;
    for (int i = 0; i < graph->n_nodes; ++i) {
        const wsp_ggml_tensor * node = graph->nodes[i];
        const OpKernel *        k    = kernel_for(node);
        if (k == nullptr || k->work_size == nullptr || is_noop(node) || !k->supported(node)) {
            continue;
        }
        const size_t w = k->work_size(node, k->n_tasks(node, n_threads));
        work           = w > work ? w : work;
    }
    return work > 0 ? work + CACHE_LINE * (size_t) n_threads : 0;
}

wsp_ggml_status graph_compute(wsp_ggml_cgraph * graph, ThreadPool * pool, int n_threads, void * wdata, size_t wsize,
                              wsp_ggml_abort_callback abort_cb, void * abort_data) {
    ThreadGroup solo;
    solo.start(1);
    for (int i = 0; i < graph->n_nodes; ++i) {
        wsp_ggml_tensor * node = graph->nodes[i];
        if (abort_cb != nullptr && abort_cb(abort_data)) {
            return WSP_GGML_STATUS_ABORTED;
        }
        if (is_noop(node) || wsp_ggml_is_empty(node)) {
            continue;
        }
        const OpKernel * k = kernel_for(node);
        if (k == nullptr || !k->supported(node)) {
            WSP_LOG_ERROR("CPU backend: op %s is not supported for %s (src0 %s, src1 %s)\n", wsp_ggml_op_desc(node),
                          describe(node).c_str(), describe(node->src[0]).c_str(), describe(node->src[1]).c_str());
            return WSP_GGML_STATUS_FAILED;
        }
        int nth = k->n_tasks(node, n_threads);
        if (pool == nullptr || nth < 1) {
            nth = 1;
        }
        if (k->work_size != nullptr && k->work_size(node, nth) > wsize) {
            WSP_LOG_ERROR("CPU backend: the work buffer (%zu bytes) is too small for %s; plan the graph first\n", wsize,
                          describe(node).c_str());
            return WSP_GGML_STATUS_FAILED;
        }
        if (nth == 1) {
            solo.start(1);
            k->compute(ComputeParams{ 0, 1, wdata, wsize, &solo }, node);
            continue;
        }
        NodeJob job = { k, node, wdata, wsize, &pool->group() };
        pool->run(nth, run_task, &job);
    }
    return WSP_GGML_STATUS_SUCCESS;
}

} // namespace wsp::cpu

extern "C" {

struct wsp_ggml_cplan wsp_ggml_graph_plan(const struct wsp_ggml_cgraph * cgraph, int n_threads,
                                          struct wsp_ggml_threadpool * threadpool) {
    if (threadpool != nullptr) {
        n_threads = threadpool->pool->n_threads();
    }
    if (n_threads <= 0) {
        n_threads = WSP_GGML_DEFAULT_N_THREADS;
    }
    wsp_ggml_cplan plan      = {};
    plan.n_threads           = n_threads;
    plan.threadpool          = threadpool;
    plan.work_size           = wsp::cpu::graph_work_size(cgraph, n_threads);
    plan.work_data           = nullptr;
    plan.abort_callback      = nullptr;
    plan.abort_callback_data = nullptr;
    return plan;
}

enum wsp_ggml_status wsp_ggml_graph_compute(struct wsp_ggml_cgraph * cgraph, struct wsp_ggml_cplan * cplan) {
    if (cplan == nullptr || cplan->n_threads <= 0) {
        WSP_LOG_ERROR("%s: the plan is NULL or has no threads\n", __func__);
        return WSP_GGML_STATUS_FAILED;
    }
    if (cplan->work_size > 0 && cplan->work_data == nullptr) {
        WSP_LOG_ERROR("%s: the plan needs a work buffer of %zu bytes (cplan.work_data is NULL)\n", __func__,
                      cplan->work_size);
        return WSP_GGML_STATUS_FAILED;
    }
    wsp::cpu::ThreadPool *                pool = nullptr;
    std::unique_ptr<wsp::cpu::ThreadPool> borrowed; // Note [kept pools]
    if (cplan->threadpool != nullptr) {
        pool = cplan->threadpool->pool;
    } else if (cplan->n_threads > 1) {
        borrowed = wsp::cpu::shelf().take(cplan->n_threads);
        pool     = borrowed.get();
    }
    const int             n_threads = pool ? pool->n_threads() : 1;
    const wsp_ggml_status status = wsp::cpu::graph_compute(cgraph, pool, n_threads, cplan->work_data, cplan->work_size,
                                                           cplan->abort_callback, cplan->abort_callback_data);
    if (borrowed != nullptr) {
        wsp::cpu::shelf().give_back(std::move(borrowed));
    }
    return status;
}

enum wsp_ggml_status wsp_ggml_graph_compute_with_ctx(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * cgraph,
                                                     int n_threads) {
    wsp_ggml_cplan plan = wsp_ggml_graph_plan(cgraph, n_threads, nullptr);
    if (plan.work_size > 0) {
        plan.work_data =
            static_cast<uint8_t *>(wsp::context_alloc(ctx, WSP_GGML_OBJECT_TYPE_WORK_BUFFER, plan.work_size));
    }
    return wsp_ggml_graph_compute(cgraph, &plan);
}

struct wsp_ggml_threadpool * wsp_ggml_threadpool_new(struct wsp_ggml_threadpool_params * params) {
    if (params == nullptr || params->n_threads <= 0 || params->n_threads > WSP_GGML_MAX_N_THREADS) {
        WSP_LOG_ERROR("%s: n_threads must be 1 to %d\n", __func__, WSP_GGML_MAX_N_THREADS);
        return nullptr;
    }
    auto * tp = new wsp_ggml_threadpool;
    tp->pool  = new wsp::cpu::ThreadPool(params->n_threads, (int) params->poll, params->paused);
    return tp;
}

void wsp_ggml_threadpool_free(struct wsp_ggml_threadpool * threadpool) {
    if (threadpool == nullptr) {
        return;
    }
    delete threadpool->pool;
    delete threadpool;
}

int wsp_ggml_threadpool_get_n_threads(struct wsp_ggml_threadpool * threadpool) {
    return threadpool->pool->n_threads();
}

void wsp_ggml_threadpool_pause(struct wsp_ggml_threadpool * threadpool) {
    threadpool->pool->pause();
}

void wsp_ggml_threadpool_resume(struct wsp_ggml_threadpool * threadpool) {
    threadpool->pool->resume();
}

} // extern "C"
