#pragma once

// Helpers for the CUDA suites: the skip for machines without a GPU, and a comparison of every
// node of a graph computed on each CUDA device with the same graph on the CPU backend.

#include "ggml-cuda.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <functional>

namespace wsp::test {

#define REQUIRE_GPU()                                                                             \
    if (wsp_ggml_backend_cuda_get_device_count() == 0) {                                          \
        GTEST_SKIP() << "no CUDA device (no driver or no GPU on this machine); run gpu-check.sh"; \
    }

// build(ctx) makes a graph of ops CUDA supports; every node is compared with the CPU's
inline void compare_with_cpu(const std::function<wsp_ggml_tensor *(wsp_ggml_context *)> & build, double tolerance) {
    const int n = wsp_ggml_backend_cuda_get_device_count();
    for (int d = 0; d < n; ++d) {
        Graph             g;
        wsp_ggml_tensor * out = build(g.ctx());
        g.build(out);
        for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(g.ctx()); t; t = wsp_ggml_get_next_tensor(g.ctx(), t)) {
            if ((t->flags & WSP_GGML_TENSOR_FLAG_INPUT) && t->type != WSP_GGML_TYPE_I32) {
                set_values(t, round_trip(t->type, random_values((size_t) wsp_ggml_nelements(t), 5)));
            }
        }
        wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(d);
        struct Ctx {
            double tol;
            int    checked;
        } c{ tolerance, 0 };
        const bool ok = wsp_ggml_backend_compare_graph_backend(
            g.backend(), cuda, g.graph(),
            [](int i, wsp_ggml_tensor * t1, wsp_ggml_tensor * t2, void * ud) {
                auto * c = static_cast<Ctx *>(ud);
                if (t1->op == WSP_GGML_OP_NONE || wsp_ggml_is_empty(t1)) {
                    return true;
                }
                // the device result, read back and viewed with its own strides
                std::vector<uint8_t> raw(wsp_ggml_nbytes(t2));
                wsp_ggml_backend_tensor_get(t2, raw.data(), 0, raw.size());
                wsp_ggml_tensor host        = *t2;
                host.data                   = raw.data();
                host.buffer                 = nullptr;
                host.view_src               = nullptr;
                const std::vector<float> v1 = get_values(t1), v2 = get_values(&host);
                EXPECT_LT(nmse(v2, v1), c->tol) << "node " << i << " " << wsp_ggml_op_desc(t1) << " " << shape_str(t1);
                ++c->checked;
                return true;
            },
            &c);
        EXPECT_TRUE(ok);
        EXPECT_GT(c.checked, 0);
        wsp_ggml_backend_free(cuda);
    }
}

} // namespace wsp::test
