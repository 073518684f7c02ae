// mul_mat with a split weight, run by the scheduler over sim devices: every device computes its
// rows on its own stream and the main device gathers them. Equal to the same mul_mat on one
// device (the CPU) for uneven and zero-row splits, every weight type, row counts that are not
// multiples of the row granularity, batch 1 and 1500 and broadcast over dims 2-3; and a
// whisper-shaped encoder with every mat-mul weight split equals the double reference.

#include "sched_encoder.h"
#include "split_util.h"

#include <gtest/gtest.h>

namespace wsp::test {
namespace {

wsp_ggml_backend_buffer_type_t split_buft(const std::vector<float> & split) {
    sim_reg(); // the devices exist before the first split type
    return wsp_ggml_backend_sim_split_buffer_type(0, split.data());
}

struct MulMatCase {
    wsp_ggml_type      type;
    std::vector<float> split;
    int64_t            n_rows;
    int64_t            batch;
    int64_t            ne2, ne3; // broadcast of the activations
};

// y = W x on the scheduler with W in `buft`; returns y
std::vector<float> run_mul_mat(SimBackends & be, wsp_ggml_backend_buffer_type_t buft, const MulMatCase & c, int64_t k,
                               const std::vector<uint8_t> & w_bytes, const std::vector<float> & x, bool parallel,
                               int * n_splits, size_t * bytes_copied) {
    wsp_ggml_init_params      wp   = { 4 * wsp_ggml_tensor_overhead(), nullptr, true };
    wsp_ggml_context *        wctx = wsp_ggml_init(wp);
    wsp_ggml_tensor *         w    = wsp_ggml_new_tensor_2d(wctx, c.type, k, c.n_rows);
    wsp_ggml_backend_buffer_t wbuf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    wsp_ggml_backend_buffer_set_usage(wbuf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    wsp_ggml_backend_tensor_set(w, w_bytes.data(), 0, w_bytes.size());

    wsp_ggml_init_params p   = { 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx = wsp_ggml_init(p);
    wsp_ggml_tensor *    xt  = wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F32, k, c.batch, c.ne2, c.ne3);
    wsp_ggml_set_input(xt);
    wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, w, xt);
    wsp_ggml_set_output(y);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, y);

    wsp_ggml_backend_sched_t s =
        wsp_ggml_backend_sched_new(be.all().data(), nullptr, (int) be.all().size(), 64, parallel, true);
    EXPECT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
    *n_splits = wsp_ggml_backend_sched_get_n_splits(s);
    EXPECT_EQ(wsp_ggml_backend_sched_get_tensor_backend(s, y), be.sim(0)); // kept on the main device
    wsp_ggml_backend_tensor_set(xt, x.data(), 0, x.size() * sizeof(float));
    const size_t copied = wsp_ggml_backend_sim_bytes_copied();
    EXPECT_EQ(wsp_ggml_backend_sched_graph_compute(s, g), WSP_GGML_STATUS_SUCCESS);
    *bytes_copied = wsp_ggml_backend_sim_bytes_copied() - copied;
    std::vector<float> out((size_t) wsp_ggml_nelements(y));
    wsp_ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
    EXPECT_EQ(y->op, WSP_GGML_OP_MUL_MAT) << "the user's node is restored after compute";
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_free(wctx);
    return out;
}

class SplitMulMat : public ::testing::TestWithParam<MulMatCase> {};

TEST_P(SplitMulMat, EqualsSingleDevice) {
    const MulMatCase &       c = GetParam();
    const int64_t            k = 64;
    ForeignAccessGuard       guard;
    const std::vector<float> wv = random_values((size_t) (k * c.n_rows), 11);
    std::vector<uint8_t>     wb(wsp_ggml_row_size(c.type, k) * (size_t) c.n_rows);
    wsp_ggml_get_type_traits(c.type)->from_float_ref(wv.data(), wb.data(), k * c.n_rows);
    const std::vector<float> x = random_values((size_t) (k * c.batch * c.ne2 * c.ne3), 12);

    // the single-device result: the whole weight on SIM0, which runs the same kernels as every slice
    SimBackends one(1, 0);
    int         splits_one = 0, splits_split = 0;
    size_t      copied_one = 0, copied = 0;
    const auto  ref =
        run_mul_mat(one, wsp_ggml_backend_dev_buffer_type(sim_dev(0)), c, k, wb, x, false, &splits_one, &copied_one);
    SimBackends be(SIM_DEVICES, 10);
    const auto  out = run_mul_mat(be, split_buft(c.split), c, k, wb, x, c.batch % 2 == 0, &splits_split, &copied);
    ASSERT_EQ(out.size(), ref.size());
    // the same kernels on the same values: only the F32 summation order may differ
    EXPECT_LT(nmse(out, ref), 1e-10) << wsp_ggml_type_name(c.type) << " batch " << c.batch;
    EXPECT_GE(splits_split, 2);
    // the activations went once to each device holding rows, and each slice of y once to SIM0
    const size_t x_bytes = x.size() * sizeof(float), y_bytes = ref.size() * sizeof(float);
    size_t       holders = 0; // the last device holds the rows left by rounding, whatever its share
    for (int64_t rows : expected_rows(c.split, c.n_rows, wsp_ggml_is_quantized(c.type) ? 8 : 1)) {
        holders += rows > 0;
    }
    EXPECT_LE(copied, holders * x_bytes + y_bytes);
    EXPECT_EQ(copied_one, x_bytes);
}

std::vector<MulMatCase> cases() {
    std::vector<MulMatCase> v;
    const wsp_ggml_type     types[] = { WSP_GGML_TYPE_F32,  WSP_GGML_TYPE_F16,  WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q4_0,
                                        WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_0 };
    for (wsp_ggml_type t : types) {
        v.push_back({ t, { 0.7f, 0.2f, 0.1f, 0.0f }, 77, 1, 1, 1 });
        v.push_back({ t, { 1.0f, 0.0f, 1.0f, 0.0f }, 130, 1500, 1, 1 });
    }
    v.push_back({ WSP_GGML_TYPE_F16, { 0.25f, 0.25f, 0.25f, 0.25f }, 45, 8, 2, 3 });
    v.push_back({ WSP_GGML_TYPE_Q8_0, { 0.0f, 0.5f, 0.0f, 0.5f }, 64, 3, 2, 1 });
    v.push_back({ WSP_GGML_TYPE_F32, { 0.0f, 0.0f, 1.0f, 0.0f }, 20, 17, 1, 2 });
    return v;
}

INSTANTIATE_TEST_SUITE_P(Split, SplitMulMat, ::testing::ValuesIn(cases()));

struct EncoderSplitCase {
    int  n_sim;
    bool parallel;
};

class SplitEncoder : public ::testing::TestWithParam<EncoderSplitCase> {};

TEST_P(SplitEncoder, EveryMatMulWeightSplitEqualsTheReference) {
    const EncoderSplitCase & c = GetParam();
    ForeignAccessGuard       guard;
    std::vector<float>       split(SIM_DEVICES, 0.0f);
    for (int d = 0; d < c.n_sim; ++d) {
        split[(size_t) d] = 1.0f + (float) d; // uneven
    }
    SimBackends           be(c.n_sim, 20);
    model::EncoderConfig  cfg = small_encoder(c.parallel, 2);
    model::EncoderWeights weights(cfg);
    ASSERT_TRUE(weights.allocate(wsp_ggml_backend_cpu_buffer_type(), {}, split_buft(split)));
    weights.randomize(17);
    wsp_ggml_backend_sched_t s   = wsp_ggml_backend_sched_new(be.all().data(), nullptr, (int) be.all().size(),
                                                              2 * model::encoder_graph_size(cfg), c.parallel, true);
    wsp_ggml_init_params     p   = { model::encoder_graph_tensors(cfg) * wsp_ggml_tensor_overhead() +
                                         wsp_ggml_graph_overhead_custom(model::encoder_graph_size(cfg), false),
                                     nullptr, true };
    wsp_ggml_context *       ctx = wsp_ggml_init(p);
    wsp_ggml_tensor *        mel = nullptr;
    wsp_ggml_cgraph *        g   = model::build_encoder_graph(weights, ctx, &mel);
    ASSERT_TRUE(wsp_ggml_backend_sched_alloc_graph(s, g));
    for (uint32_t it = 0; it < 3; ++it) {
        const std::vector<float> x = model::random_mel(cfg, 60 + it);
        set_input(mel, x);
        ASSERT_EQ(wsp_ggml_backend_sched_graph_compute(s, g), WSP_GGML_STATUS_SUCCESS);
        EXPECT_LT(nmse(output_of(g), model::reference_encoder(weights, x)), 1e-8) << "evaluation " << it;
    }
    wsp_ggml_backend_sched_free(s);
    wsp_ggml_free(ctx);
}

INSTANTIATE_TEST_SUITE_P(Split, SplitEncoder,
                         ::testing::Values(EncoderSplitCase{ 2, false }, EncoderSplitCase{ 2, true },
                                           EncoderSplitCase{ 3, true }, EncoderSplitCase{ 4, false }));

// Any op other than mul_mat on a split tensor is refused by the devices, with a logged reason.
TEST(SplitMulMatRefusal, OtherOpsOnSplitTensorsAreRefused) {
    wsp_ggml_init_params      wp   = { 8 * wsp_ggml_tensor_overhead(), nullptr, true };
    wsp_ggml_context *        wctx = wsp_ggml_init(wp);
    wsp_ggml_tensor *         w    = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, 16, 8);
    wsp_ggml_backend_buffer_t buf  = wsp_ggml_backend_alloc_ctx_tensors_from_buft(wctx, split_buft({ 1, 1, 0, 0 }));
    wsp_ggml_init_params      p    = { 8 * wsp_ggml_tensor_overhead(), nullptr, true };
    wsp_ggml_context *        ctx  = wsp_ggml_init(p);
    wsp_ggml_tensor *         idx  = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, 2);
    wsp_ggml_tensor *         rows = wsp_ggml_get_rows(ctx, w, idx);
    wsp_ggml_tensor *         sc   = wsp_ggml_scale(ctx, w, 2.0f);
    for (int d = 0; d < SIM_DEVICES; ++d) {
        EXPECT_FALSE(wsp_ggml_backend_dev_supports_op(sim_dev(d), rows));
        EXPECT_FALSE(wsp_ggml_backend_dev_supports_op(sim_dev(d), sc));
    }
    EXPECT_FALSE(wsp_ggml_backend_dev_supports_op(wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU), sc));
    wsp_ggml_free(ctx);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(wctx);
}

} // namespace
} // namespace wsp::test
