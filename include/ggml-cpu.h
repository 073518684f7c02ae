#pragma once

// CPU backend: graph compute on a thread pool, compute plans, scalar tensor accessors and the
// CPU backend/device/reg objects.

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// the compute plan that wsp_ggml_graph_compute needs; made by wsp_ggml_graph_plan
struct wsp_ggml_cplan {
    size_t    work_size; // size of the work buffer, computed by wsp_ggml_graph_plan()
    uint8_t * work_data; // work buffer, allocated by the caller before wsp_ggml_graph_compute()

    int                          n_threads;
    struct wsp_ggml_threadpool * threadpool;

    // abort wsp_ggml_graph_compute between nodes when it returns true
    wsp_ggml_abort_callback abort_callback;
    void *                  abort_callback_data;
};

// scalar tensor helpers (tensors with host data)
WSP_GGML_BACKEND_API struct wsp_ggml_tensor * wsp_ggml_new_i32(struct wsp_ggml_context * ctx, int32_t value);
WSP_GGML_BACKEND_API struct wsp_ggml_tensor * wsp_ggml_new_f32(struct wsp_ggml_context * ctx, float value);

WSP_GGML_BACKEND_API struct wsp_ggml_tensor * wsp_ggml_set_i32(struct wsp_ggml_tensor * tensor, int32_t value);
WSP_GGML_BACKEND_API struct wsp_ggml_tensor * wsp_ggml_set_f32(struct wsp_ggml_tensor * tensor, float value);

WSP_GGML_BACKEND_API int32_t wsp_ggml_get_i32_1d(const struct wsp_ggml_tensor * tensor, int i);
WSP_GGML_BACKEND_API void    wsp_ggml_set_i32_1d(const struct wsp_ggml_tensor * tensor, int i, int32_t value);

WSP_GGML_BACKEND_API int32_t wsp_ggml_get_i32_nd(const struct wsp_ggml_tensor * tensor, int i0, int i1, int i2, int i3);
WSP_GGML_BACKEND_API void    wsp_ggml_set_i32_nd(const struct wsp_ggml_tensor * tensor, int i0, int i1, int i2, int i3, int32_t value);

WSP_GGML_BACKEND_API float   wsp_ggml_get_f32_1d(const struct wsp_ggml_tensor * tensor, int i);
WSP_GGML_BACKEND_API void    wsp_ggml_set_f32_1d(const struct wsp_ggml_tensor * tensor, int i, float value);

WSP_GGML_BACKEND_API float   wsp_ggml_get_f32_nd(const struct wsp_ggml_tensor * tensor, int i0, int i1, int i2, int i3);
WSP_GGML_BACKEND_API void    wsp_ggml_set_f32_nd(const struct wsp_ggml_tensor * tensor, int i0, int i1, int i2, int i3, float value);

// thread pools that can be shared between compute calls
WSP_GGML_BACKEND_API struct wsp_ggml_threadpool * wsp_ggml_threadpool_new          (struct wsp_ggml_threadpool_params * params);
WSP_GGML_BACKEND_API void                         wsp_ggml_threadpool_free         (struct wsp_ggml_threadpool * threadpool);
WSP_GGML_BACKEND_API int                          wsp_ggml_threadpool_get_n_threads(struct wsp_ggml_threadpool * threadpool);
WSP_GGML_BACKEND_API void                         wsp_ggml_threadpool_pause        (struct wsp_ggml_threadpool * threadpool);
WSP_GGML_BACKEND_API void                         wsp_ggml_threadpool_resume       (struct wsp_ggml_threadpool * threadpool);

// wsp_ggml_graph_plan() has to be called before wsp_ggml_graph_compute()
// when plan.work_size > 0, the caller must allocate memory for plan.work_data
WSP_GGML_BACKEND_API struct wsp_ggml_cplan wsp_ggml_graph_plan(
        const struct wsp_ggml_cgraph * cgraph,
        int                            n_threads,   /* = WSP_GGML_DEFAULT_N_THREADS */
        struct wsp_ggml_threadpool *   threadpool); /* = NULL */
WSP_GGML_BACKEND_API enum wsp_ggml_status wsp_ggml_graph_compute(struct wsp_ggml_cgraph * cgraph, struct wsp_ggml_cplan * cplan);

// same as wsp_ggml_graph_compute() but the work data is allocated in the context
// (the context must have room for it)
WSP_GGML_BACKEND_API enum wsp_ggml_status wsp_ggml_graph_compute_with_ctx(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * cgraph, int n_threads);

// system info: what this build of the CPU backend uses
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_sse3       (void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_ssse3      (void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_avx        (void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_avx2       (void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_f16c       (void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_fma        (void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_avx512     (void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_avx512_vnni(void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_avx512_bf16(void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_neon       (void);
WSP_GGML_BACKEND_API int wsp_ggml_cpu_has_blas       (void);

// one-time initialisation of lookup tables (called automatically; safe to call again)
WSP_GGML_BACKEND_API void wsp_ggml_cpu_init(void);

//
// CPU backend
//

WSP_GGML_BACKEND_API wsp_ggml_backend_t wsp_ggml_backend_cpu_init(void);

WSP_GGML_BACKEND_API bool wsp_ggml_backend_is_cpu                (wsp_ggml_backend_t backend);
WSP_GGML_BACKEND_API void wsp_ggml_backend_cpu_set_n_threads     (wsp_ggml_backend_t backend_cpu, int n_threads);
WSP_GGML_BACKEND_API void wsp_ggml_backend_cpu_set_threadpool    (wsp_ggml_backend_t backend_cpu, wsp_ggml_threadpool_t threadpool);
WSP_GGML_BACKEND_API void wsp_ggml_backend_cpu_set_abort_callback(wsp_ggml_backend_t backend_cpu, wsp_ggml_abort_callback abort_callback, void * abort_callback_data);

WSP_GGML_BACKEND_API wsp_ggml_backend_reg_t wsp_ggml_backend_cpu_reg(void);

#ifdef __cplusplus
}
#endif
