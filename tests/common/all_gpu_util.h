#pragma once

// The all-GPU device's suites (sims, CUDA): a whisper-shaped piece of a decoder whose weights
// live in a chosen buffer type, and its logits on a scheduler over a backend and the CPU, as
// whisper.cpp runs its graphs.

#include "test_util.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <vector>

namespace wsp::test {

// a whisper-shaped piece of a decoder: x = get_rows(E, ids) + P[:, :T]; h = W x + b; logits = E h
struct Model {
    static constexpr int64_t  K = 64, V = 96, T = 5, N_POS = 8;
    wsp_ggml_type             type;
    wsp_ggml_context *        ctx = nullptr;
    wsp_ggml_tensor *         E = nullptr, *P = nullptr, *W = nullptr, *b = nullptr;
    wsp_ggml_backend_buffer_t buf = nullptr;

    Model(wsp_ggml_type t, wsp_ggml_backend_buffer_type_t buft, uint32_t seed) : type(t) {
        wsp_ggml_init_params p = { 8 * wsp_ggml_tensor_overhead(), nullptr, true };
        ctx                    = wsp_ggml_init(p);
        E                      = wsp_ggml_new_tensor_2d(ctx, type, K, V);
        P                      = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, K, N_POS);
        W                      = wsp_ggml_new_tensor_2d(ctx, type, K, K);
        b                      = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, K);
        // named, as a model's weights are: building a graph names an unnamed leaf, which would
        // make concurrent graphs over shared weights write them
        wsp_ggml_set_name(E, "token_embedding");
        wsp_ggml_set_name(P, "positional_embedding");
        wsp_ggml_set_name(W, "weight");
        wsp_ggml_set_name(b, "bias");
        buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
        wsp_ggml_backend_buffer_set_usage(buf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        set(seed);
    }
    ~Model() {
        wsp_ggml_backend_buffer_free(buf);
        wsp_ggml_free(ctx);
    }
    void set(uint32_t seed) {
        for (wsp_ggml_tensor * t : { E, P, W, b }) {
            const std::vector<float> v = random_values((size_t) wsp_ggml_nelements(t), seed++);
            std::vector<uint8_t>     bytes(wsp_ggml_nbytes(t));
            wsp_ggml_get_type_traits(t->type)->from_float_ref(v.data(), bytes.data(), wsp_ggml_nelements(t));
            wsp_ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
        }
    }
    size_t spread_bytes() const { return wsp_ggml_nbytes(E) + wsp_ggml_nbytes(W); }
};

// the logits on a scheduler over `backend` and the CPU, as whisper.cpp runs its graphs
inline std::vector<float> logits(const Model & m, wsp_ggml_backend_t backend, wsp_ggml_backend_t cpu) {
    wsp_ggml_init_params p   = { 32 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx = wsp_ggml_init(p);
    wsp_ggml_tensor *    ids = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, Model::T);
    wsp_ggml_set_input(ids);
    wsp_ggml_tensor * pos = wsp_ggml_view_2d(ctx, m.P, Model::K, Model::T, m.P->nb[1], 0);
    wsp_ggml_tensor * x   = wsp_ggml_add(ctx, wsp_ggml_get_rows(ctx, m.E, ids), pos);
    wsp_ggml_tensor * h   = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, m.W, x), m.b);
    wsp_ggml_tensor * out = wsp_ggml_mul_mat(ctx, m.E, h);
    wsp_ggml_set_output(out);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, out);

    std::vector<wsp_ggml_backend_t> backends = { backend };
    if (backend != cpu) {
        backends.push_back(cpu);
    }
    wsp_ggml_backend_sched_t s =
        wsp_ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(), 256, false, true);
    EXPECT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
    const int32_t tokens[Model::T] = { 3, 95, 0, 41, 3 };
    wsp_ggml_backend_tensor_set(ids, tokens, 0, sizeof(tokens));
    EXPECT_EQ(wsp_ggml_backend_sched_graph_compute(s, g), WSP_GGML_STATUS_SUCCESS);
    std::vector<float> v((size_t) wsp_ggml_nelements(out));
    wsp_ggml_backend_tensor_get(out, v.data(), 0, v.size() * sizeof(float));
    EXPECT_EQ(out->src[0], m.E) << "the user's mat-mul reads its own weight again after compute";
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
    return v;
}

} // namespace wsp::test
