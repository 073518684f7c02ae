// A whisper-shaped encoder (conv front end, attention through soft_max_ext or flash_attn_ext,
// MLP with gelu) with random weights, computed on the CPU backend with 1 and 2 threads and
// compared with the double-precision reference of tools/model/whisper_encoder.cpp.

#include "model/whisper_encoder.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <tuple>

namespace wsp::test {
namespace {

using model::EncoderConfig;
using model::EncoderWeights;

struct EncoderCase {
    wsp_ggml_type wtype;
    bool          flash;
    int           n_threads;
};

class EncoderTest : public ::testing::TestWithParam<EncoderCase> {};

std::vector<float> run_encoder(const EncoderWeights & w, const std::vector<float> & mel, int n_threads) {
    wsp_ggml_backend_t backend = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(backend, n_threads);
    const EncoderConfig & cfg    = w.config();
    wsp_ggml_init_params  params = { model::encoder_graph_tensors(cfg) * wsp_ggml_tensor_overhead() +
                                         wsp_ggml_graph_overhead_custom(model::encoder_graph_size(cfg), false),
                                     nullptr, true };
    wsp_ggml_context *    ctx    = wsp_ggml_init(params);
    wsp_ggml_tensor *     in     = nullptr;
    wsp_ggml_cgraph *     graph  = model::build_encoder_graph(w, ctx, &in);
    wsp_ggml_gallocr_t    galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_get_default_buffer_type(backend));
    std::vector<float>    out;
    EXPECT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, graph));
    wsp_ggml_backend_tensor_set(in, mel.data(), 0, mel.size() * sizeof(float));
    EXPECT_EQ(wsp_ggml_backend_graph_compute(backend, graph), WSP_GGML_STATUS_SUCCESS);
    out = get_values(wsp_ggml_graph_node(graph, -1));
    wsp_ggml_gallocr_free(galloc);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(backend);
    return out;
}

TEST_P(EncoderTest, MatchesDoubleReference) {
    const EncoderCase & c = GetParam();
    EncoderConfig       cfg;
    cfg.n_mels     = 12;
    cfg.n_ctx      = 40; // 80 mel frames; n_ctx is above the mat-mul batch size of decoder steps
    cfg.n_state    = 64;
    cfg.n_head     = 4;
    cfg.n_layer    = 2;
    cfg.wtype      = c.wtype;
    cfg.flash_attn = c.flash;

    EncoderWeights weights(cfg);
    ASSERT_TRUE(weights.allocate(wsp_ggml_backend_cpu_buffer_type()));
    weights.randomize(7);
    const std::vector<float>  mel = model::random_mel(cfg, 11);
    const std::vector<double> ref = model::reference_encoder(weights, mel);
    const std::vector<float>  out = run_encoder(weights, mel, c.n_threads);
    ASSERT_EQ(out.size(), (size_t) cfg.n_state * cfg.n_ctx);

    // The reference rounds to F16 where the graph stores F16 (im2col columns, flash K/V), so the
    // remaining difference is F32 accumulation: NMSE ~1e-12..1e-10. A wrong op gives ~1.
    const double e = nmse(out, ref);
    EXPECT_LT(e, 1e-8) << cfg.describe() << ", " << c.n_threads << " threads";
}

std::string case_name(const ::testing::TestParamInfo<EncoderCase> & info) {
    return std::string(wsp_ggml_type_name(info.param.wtype)) + (info.param.flash ? "_flash" : "_softmax") + "_" +
           std::to_string(info.param.n_threads) + "t";
}

INSTANTIATE_TEST_SUITE_P(
    Encoder, EncoderTest,
    ::testing::Values(EncoderCase{ WSP_GGML_TYPE_F16, false, 1 }, EncoderCase{ WSP_GGML_TYPE_F16, false, 2 },
                      EncoderCase{ WSP_GGML_TYPE_F16, true, 1 }, EncoderCase{ WSP_GGML_TYPE_F16, true, 2 },
                      EncoderCase{ WSP_GGML_TYPE_F32, false, 2 }, EncoderCase{ WSP_GGML_TYPE_F32, true, 2 },
                      EncoderCase{ WSP_GGML_TYPE_Q8_0, false, 2 }),
    case_name);

// The same weights give the same result with 1 and 2 threads (up to F32 summation order).
TEST(Encoder, ThreadCountsAgree) {
    EncoderConfig cfg;
    cfg.n_mels  = 8;
    cfg.n_ctx   = 24;
    cfg.n_state = 32;
    cfg.n_head  = 2;
    cfg.n_layer = 1;
    EncoderWeights weights(cfg);
    ASSERT_TRUE(weights.allocate(wsp_ggml_backend_cpu_buffer_type()));
    weights.randomize(3);
    const std::vector<float> mel = model::random_mel(cfg, 5);
    EXPECT_LT(nmse(run_encoder(weights, mel, 2), run_encoder(weights, mel, 1)), 1e-10);
}

} // namespace
} // namespace wsp::test
