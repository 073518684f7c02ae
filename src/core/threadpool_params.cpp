// CPU threadpool parameters (ggml.h); the pool itself is in the CPU backend.

#include "impl.h"

extern "C" {

void wsp_ggml_threadpool_params_init(struct wsp_ggml_threadpool_params * p, int n_threads) {
    std::memset(p, 0, sizeof(*p));
    p->n_threads  = n_threads;
    p->prio       = WSP_GGML_SCHED_PRIO_NORMAL;
    p->poll       = 50;
    p->strict_cpu = false;
    p->paused     = false;
}

struct wsp_ggml_threadpool_params wsp_ggml_threadpool_params_default(int n_threads) {
    wsp_ggml_threadpool_params p;
    wsp_ggml_threadpool_params_init(&p, n_threads);
    return p;
}

bool wsp_ggml_threadpool_params_match(const struct wsp_ggml_threadpool_params * p0,
                                      const struct wsp_ggml_threadpool_params * p1) {
    if (p0->n_threads != p1->n_threads || p0->prio != p1->prio || p0->poll != p1->poll ||
        p0->strict_cpu != p1->strict_cpu) {
        return false;
    }
    return std::memcmp(p0->cpumask, p1->cpumask, WSP_GGML_MAX_N_THREADS) == 0;
}

} // extern "C"
