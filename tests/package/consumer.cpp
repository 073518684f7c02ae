// Uses the installed headers by their client names and computes 2 * (a + b) on the best backend.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml.h"

#include <cstdio>

int main() {
    wsp_ggml_init_params params = { 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context_ptr ctx(wsp_ggml_init(params));
    wsp_ggml_tensor *    a = wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 4);
    wsp_ggml_tensor *    b = wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 4);
    wsp_ggml_tensor *    y = wsp_ggml_scale(ctx.get(), wsp_ggml_add(ctx.get(), a, b), 2.0f);
    wsp_ggml_cgraph *    g = wsp_ggml_new_graph(ctx.get());
    wsp_ggml_build_forward_expand(g, y);

    wsp_ggml_backend_ptr        backend(wsp_ggml_backend_init_best());
    wsp_ggml_backend_buffer_ptr weights(wsp_ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    const float                 va[4] = { 1, 2, 3, 4 }, vb[4] = { 10, 20, 30, 40 };
    wsp_ggml_backend_tensor_set(a, va, 0, sizeof(va));
    wsp_ggml_backend_tensor_set(b, vb, 0, sizeof(vb));
    if (wsp_ggml_backend_graph_compute(backend.get(), g) != WSP_GGML_STATUS_SUCCESS) {
        return 1;
    }
    float out[4];
    wsp_ggml_backend_tensor_get(y, out, 0, sizeof(out));
    for (int i = 0; i < 4; ++i) {
        if (out[i] != 2.0f * (va[i] + vb[i])) {
            std::printf("wrong value %d: %f\n", i, out[i]);
            return 1;
        }
    }
    std::printf("consumer ok on %s\n", wsp_ggml_backend_name(backend.get()));
    return 0;
}
