#pragma once

// A whisper-shaped encoder with random weights: conv front end (two conv_1d + gelu),
// positional embedding, n_layer transformer blocks (layer norm, attention through soft_max_ext
// or flash_attn_ext, MLP with gelu) and a final layer norm. Used by the CLI, the tests and the
// benches; weights can live in any buffer type, one per layer, so that a graph spans devices.
// A double-precision reference of the same computation (with the same F16 rounding points)
// checks the result.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <cstdint>
#include <string>
#include <vector>

namespace wsp::model {

struct EncoderConfig {
    int           n_mels     = 80;
    int           n_ctx      = 1500; // frames after the stride-2 conv; the mel input has 2 * n_ctx
    int           n_state    = 384;
    int           n_head     = 6;
    int           n_layer    = 4;
    wsp_ggml_type wtype      = WSP_GGML_TYPE_F16; // type of the mat-mul weights
    bool          flash_attn = false;

    std::string describe() const;
};

struct EncoderLayer {
    wsp_ggml_tensor *attn_ln_w, *attn_ln_b;
    wsp_ggml_tensor *q_w, *q_b, *k_w, *v_w, *v_b, *o_w, *o_b;
    wsp_ggml_tensor *mlp_ln_w, *mlp_ln_b;
    wsp_ggml_tensor *mlp0_w, *mlp0_b, *mlp1_w, *mlp1_b;
};

// Weights in a no_alloc context; allocate() places them in backend buffers.
class EncoderWeights {
public:
    explicit EncoderWeights(const EncoderConfig & cfg);
    ~EncoderWeights();

    EncoderWeights(const EncoderWeights &)             = delete;
    EncoderWeights & operator=(const EncoderWeights &) = delete;

    // front end and final norm in `front`; layer i in layer_bufts[i % size] (front when empty);
    // the layers' mat-mul weights in matmul_buft when given (e.g. a split buffer type)
    bool allocate(wsp_ggml_backend_buffer_type_t                      front,
                  const std::vector<wsp_ggml_backend_buffer_type_t> & layer_bufts = {},
                  wsp_ggml_backend_buffer_type_t                      matmul_buft = nullptr);

    // deterministic random values (uploaded with tensor_set, quantized where the type says so)
    void randomize(uint32_t seed);

    const EncoderConfig &             config() const { return cfg_; }
    const std::vector<EncoderLayer> & layers() const { return layers_; }

    wsp_ggml_tensor *conv1_w, *conv1_b, *conv2_w, *conv2_b, *pos;
    wsp_ggml_tensor *ln_post_w, *ln_post_b;

    // every weight tensor, for iteration
    std::vector<wsp_ggml_tensor *> all() const;

private:
    EncoderConfig                          cfg_;
    wsp_ggml_context *                     ctx_ = nullptr;
    std::vector<EncoderLayer>              layers_;
    std::vector<wsp_ggml_backend_buffer_t> buffers_;
};

// The encoder graph in ctx (a no_alloc context with room for encoder_graph_tensors(cfg)
// tensors and a graph of encoder_graph_size(cfg)); *mel_out receives the input tensor
// [2 * n_ctx, n_mels] (flagged input), the result is the graph's last node [n_state, n_ctx].
wsp_ggml_cgraph * build_encoder_graph(const EncoderWeights & w, wsp_ggml_context * ctx, wsp_ggml_tensor ** mel_out);

size_t encoder_graph_size(const EncoderConfig & cfg);
size_t encoder_graph_tensors(const EncoderConfig & cfg);

// deterministic mel-like input of 2 * n_ctx frames x n_mels
std::vector<float> random_mel(const EncoderConfig & cfg, uint32_t seed);

// double-precision reference of the encoder for the weights' stored values; [n_state, n_ctx]
// row-major with n_state fastest, like the graph's result
std::vector<double> reference_encoder(const EncoderWeights & w, const std::vector<float> & mel);

// multiply-adds x2 of one encoder pass (convs, projections, attention, MLP)
double encoder_flops(const EncoderConfig & cfg);

} // namespace wsp::model
