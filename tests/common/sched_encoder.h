#pragma once

// The whisper-shaped encoder run by a scheduler over sim devices: the front end and the final
// norm keep their weights on the CPU, layer i's weights live on sim device i % n_sim.

#include "model/whisper_encoder.h"
#include "sim_util.h"
#include "test_util.h"

#include <memory>

namespace wsp::test {

inline model::EncoderConfig small_encoder(bool flash, int n_layer = 4) {
    model::EncoderConfig cfg;
    cfg.n_mels     = 8;
    cfg.n_ctx      = 40;
    cfg.n_state    = 64;
    cfg.n_head     = 4;
    cfg.n_layer    = n_layer;
    cfg.flash_attn = flash;
    return cfg;
}

class SchedEncoder {
public:
    // front_on_device: the conv front end's weights on SIM0 too, so the input goes to a device
    SchedEncoder(const model::EncoderConfig & cfg, SimBackends & be, bool parallel, bool op_offload = true,
                 bool front_on_device = false)
        : weights_(cfg) {
        std::vector<wsp_ggml_backend_buffer_type_t> layer_bufts;
        for (int i = 0; i < be.n_sim(); ++i) {
            layer_bufts.push_back(wsp_ggml_backend_get_default_buffer_type(be.sim(i)));
        }
        EXPECT_TRUE(
            weights_.allocate(front_on_device ? layer_bufts[0] : wsp_ggml_backend_cpu_buffer_type(), layer_bufts));
        weights_.randomize(99);
        sched_ = wsp_ggml_backend_sched_new(be.all().data(), nullptr, (int) be.all().size(),
                                            model::encoder_graph_size(cfg) * 2, parallel, op_offload);
        EXPECT_NE(sched_, nullptr);
    }
    ~SchedEncoder() {
        wsp_ggml_backend_sched_free(sched_);
        wsp_ggml_free(ctx_);
    }

    // a fresh graph (the previous one is dropped); returns it, its mel input in *mel
    wsp_ggml_cgraph * build(wsp_ggml_tensor ** mel) {
        wsp_ggml_free(ctx_);
        const model::EncoderConfig & cfg    = weights_.config();
        wsp_ggml_init_params         params = { model::encoder_graph_tensors(cfg) * wsp_ggml_tensor_overhead() +
                                                    wsp_ggml_graph_overhead_custom(model::encoder_graph_size(cfg), false),
                                                nullptr, true };
        ctx_                                = wsp_ggml_init(params);
        return model::build_encoder_graph(weights_, ctx_, mel);
    }

    // the double reference for an input
    std::vector<double> reference(const std::vector<float> & mel) const {
        return model::reference_encoder(weights_, mel);
    }

    std::vector<float> random_input(uint32_t seed) const { return model::random_mel(weights_.config(), seed); }

    wsp_ggml_backend_sched_t      sched() const { return sched_; }
    const model::EncoderWeights & weights() const { return weights_; }

private:
    model::EncoderWeights    weights_;
    wsp_ggml_backend_sched_t sched_ = nullptr;
    wsp_ggml_context *       ctx_   = nullptr;
};

inline void set_input(wsp_ggml_tensor * t, const std::vector<float> & v) {
    wsp_ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
}

inline std::vector<float> output_of(wsp_ggml_cgraph * g) {
    wsp_ggml_tensor *  out = wsp_ggml_graph_node(g, -1);
    std::vector<float> v((size_t) wsp_ggml_nelements(out));
    wsp_ggml_backend_tensor_get(out, v.data(), 0, v.size() * sizeof(float));
    return v;
}

} // namespace wsp::test
