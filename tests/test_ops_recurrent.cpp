// The recurrent ops on the CPU against double references written from their recurrences:
// SSM_CONV (Mamba's causal convolution, over contiguous, transposed and padded views), SSM_SCAN
// (softplus of dt on both sides of 20, strided B and C), RWKV_WKV6, RWKV_WKV7 and
// GATED_LINEAR_ATTN (head sizes 1, 5, 64; several heads, sequences and tokens; more tasks than
// (sequence, head) pairs), the outputs and the final states; and the builders' shape checks.

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace wsp::test {
namespace {

// F32 accumulations of a few hundred terms of O(1): relative errors ~1e-6
constexpr double TOL = 1e-10;

std::vector<float> random_in(const wsp_ggml_tensor * t, uint32_t seed, float lo, float hi) {
    return random_values((size_t) wsp_ggml_nelements(t), seed, lo, hi);
}

// ---- SSM_CONV

enum class ConvView { contiguous, transposed, padded };

struct ConvCase {
    int64_t  d_conv, d_inner, n_t, n_s;
    ConvView view;
    int      n_threads;
};

void check_conv(const ConvCase & c) {
    SCOPED_TRACE(::testing::Message() << "d_conv " << c.d_conv << " d_inner " << c.d_inner << " n_t " << c.n_t
                                      << " n_s " << c.n_s << " view " << (int) c.view << " threads " << c.n_threads);
    const int64_t     L = c.d_conv - 1 + c.n_t;
    Graph             g;
    wsp_ggml_tensor * sx;
    switch (c.view) {
        case ConvView::transposed:
            sx = wsp_ggml_permute(g.ctx(), g.input(WSP_GGML_TYPE_F32, { c.d_inner, L, c.n_s }), 1, 0, 2, 3);
            break;
        case ConvView::padded: {
            wsp_ggml_tensor * big = g.input(WSP_GGML_TYPE_F32, { L + 3, c.d_inner, c.n_s });
            sx = wsp_ggml_view_3d(g.ctx(), big, L, c.d_inner, c.n_s, big->nb[1], big->nb[2], sizeof(float));
            break;
        }
        default: sx = g.input(WSP_GGML_TYPE_F32, { L, c.d_inner, c.n_s }); break;
    }
    wsp_ggml_tensor * w   = g.input(WSP_GGML_TYPE_F32, { c.d_conv, c.d_inner });
    wsp_ggml_tensor * out = wsp_ggml_ssm_conv(g.ctx(), sx, w);
    ASSERT_EQ(out->ne[0], c.d_inner);
    ASSERT_EQ(out->ne[1], c.n_t);
    ASSERT_EQ(out->ne[2], c.n_s);
    g.build(out);
    const std::vector<float> xv = random_in(sx, 3, -1, 1), wv = random_in(w, 4, -1, 1);
    set_values(sx, xv);
    set_values(w, wv);
    ASSERT_EQ(g.run(c.n_threads), WSP_GGML_STATUS_SUCCESS);
    std::vector<double> ref((size_t) wsp_ggml_nelements(out));
    for (int64_t s = 0; s < c.n_s; ++s) {
        for (int64_t t = 0; t < c.n_t; ++t) {
            for (int64_t i = 0; i < c.d_inner; ++i) {
                double sum = 0.0;
                for (int64_t k = 0; k < c.d_conv; ++k) {
                    sum += (double) xv[flat_index(sx, t + k, i, s, 0)] * wv[flat_index(w, k, i, 0, 0)];
                }
                ref[flat_index(out, i, t, s, 0)] = sum;
            }
        }
    }
    EXPECT_LT(nmse(get_values(out), ref), TOL);
}

TEST(SsmConv, MatchesReference) {
    for (ConvView view : { ConvView::contiguous, ConvView::transposed, ConvView::padded }) {
        check_conv({ 4, 37, 5, 3, view, 3 });
        check_conv({ 1, 1, 1, 1, view, 1 });
        check_conv({ 4, 130, 1, 2, view, 4 });
        check_conv({ 3, 7, 11, 1, view, 2 });
    }
}

// ---- SSM_SCAN

struct ScanCase {
    int64_t d_state, d_inner, n_t, n_s;
    bool    strided_bc;
    int     n_threads;
};

double softplus(double v) {
    return v <= 20.0 ? std::log1p(std::exp(v)) : v;
}

void check_scan(const ScanCase & c) {
    SCOPED_TRACE(::testing::Message() << "d_state " << c.d_state << " d_inner " << c.d_inner << " n_t " << c.n_t
                                      << " n_s " << c.n_s << " strided " << c.strided_bc << " threads " << c.n_threads);
    Graph  g;
    auto * s  = g.input(WSP_GGML_TYPE_F32, { c.d_state, c.d_inner, c.n_s });
    auto * x  = g.input(WSP_GGML_TYPE_F32, { c.d_inner, c.n_t, c.n_s });
    auto * dt = g.input(WSP_GGML_TYPE_F32, { c.d_inner, c.n_t, c.n_s });
    auto * A  = g.input(WSP_GGML_TYPE_F32, { c.d_state, c.d_inner });
    auto   bc = [&](void) {
        if (!c.strided_bc) {
            return g.input(WSP_GGML_TYPE_F32, { c.d_state, c.n_t, c.n_s });
        }
        // B and C as Mamba slices them: columns of a wider projection
        wsp_ggml_tensor * big = g.input(WSP_GGML_TYPE_F32, { c.d_state + 5, c.n_t, c.n_s });
        return wsp_ggml_view_3d(g.ctx(), big, c.d_state, c.n_t, c.n_s, big->nb[1], big->nb[2], 2 * sizeof(float));
    };
    auto * B   = bc();
    auto * C   = bc();
    auto * out = wsp_ggml_ssm_scan(g.ctx(), s, x, dt, A, B, C);
    ASSERT_EQ(wsp_ggml_n_dims(out), 1);
    ASSERT_EQ(wsp_ggml_nelements(out), wsp_ggml_nelements(x) + wsp_ggml_nelements(s));
    g.build(out);
    const auto sv = random_in(s, 1, -1, 1), xv = random_in(x, 2, -1, 1), dtv = random_in(dt, 3, -4, 24),
               av = random_in(A, 4, -2, -0.05f), bv = random_in(B, 5, -1, 1), cv = random_in(C, 6, -1, 1);
    set_values(s, sv);
    set_values(x, xv);
    set_values(dt, dtv);
    set_values(A, av);
    set_values(B, bv);
    set_values(C, cv);
    ASSERT_EQ(g.run(c.n_threads), WSP_GGML_STATUS_SUCCESS);

    std::vector<double> ref((size_t) wsp_ggml_nelements(out));
    const size_t        ny = (size_t) wsp_ggml_nelements(x);
    for (int64_t q = 0; q < c.n_s; ++q) {
        for (int64_t i = 0; i < c.d_inner; ++i) {
            std::vector<double> st((size_t) c.d_state);
            for (int64_t n = 0; n < c.d_state; ++n) {
                st[(size_t) n] = sv[flat_index(s, n, i, q, 0)];
            }
            for (int64_t t = 0; t < c.n_t; ++t) {
                const double d = softplus(dtv[flat_index(dt, i, t, q, 0)]);
                double       y = 0.0;
                for (int64_t n = 0; n < c.d_state; ++n) {
                    st[(size_t) n] = st[(size_t) n] * std::exp(d * av[flat_index(A, n, i, 0, 0)]) +
                                     bv[flat_index(B, n, t, q, 0)] * xv[flat_index(x, i, t, q, 0)] * d;
                    y += st[(size_t) n] * cv[flat_index(C, n, t, q, 0)];
                }
                ref[flat_index(x, i, t, q, 0)] = y;
            }
            for (int64_t n = 0; n < c.d_state; ++n) {
                ref[ny + flat_index(s, n, i, q, 0)] = st[(size_t) n];
            }
        }
    }
    EXPECT_TRUE(all_close(get_values(out), ref, 1e-4, 1e-4, "ssm_scan"));
    EXPECT_LT(nmse(get_values(out), ref), TOL);
}

TEST(SsmScan, MatchesReference) {
    check_scan({ 16, 64, 7, 2, false, 3 });
    check_scan({ 16, 13, 5, 3, true, 2 });
    check_scan({ 1, 1, 1, 1, false, 1 });
    check_scan({ 5, 31, 1, 1, true, 4 });
    check_scan({ 16, 3, 9, 1, false, 8 }); // more tasks than channels
}

// ---- RWKV_WKV6, RWKV_WKV7, GATED_LINEAR_ATTN

enum class Rec { wkv6, wkv7, gla };

struct RecCase {
    Rec     op;
    int64_t S, H, per_seq, n_seqs;
    int     n_threads;
};

// references over flat [S, H, n_tokens] operands; state [n_seqs][H][S][S]; y [n_tokens][H][S]
struct RecData {
    int64_t                         S, H, T, n_seqs;
    std::vector<std::vector<float>> in; // per-token operands in the op's argument order, then tf
    std::vector<float>              state;
};

size_t at(const RecData & d, int64_t t, int64_t h, int64_t i) {
    return (size_t) ((t * d.H + h) * d.S + i);
}

// y then final states, in the node's layout; per op, state[i][j] as the CPU kernel's comment says
std::vector<double> rec_reference(Rec op, const RecData & d, float scale) {
    const int64_t       S = d.S, per_seq = d.T / d.n_seqs;
    std::vector<double> out((size_t) (d.T * S * d.H + d.n_seqs * d.H * S * S));
    for (int64_t q = 0; q < d.n_seqs; ++q) {
        for (int64_t h = 0; h < d.H; ++h) {
            const size_t        so = (size_t) ((q * d.H + h) * S * S);
            std::vector<double> st(d.state.begin() + (long) so, d.state.begin() + (long) (so + S * S));
            for (int64_t tt = 0; tt < per_seq; ++tt) {
                const int64_t t = q * per_seq + tt;
                auto          v = [&](int a, int64_t i) { return (double) d.in[(size_t) a][at(d, t, h, i)]; };
                if (op == Rec::wkv6) { // k v r td; tf = in[4] [S, H]
                    for (int64_t j = 0; j < S; ++j) {
                        double y = 0.0;
                        for (int64_t i = 0; i < S; ++i) {
                            const double tf = d.in[4][(size_t) (h * S + i)];
                            y += v(2, i) * (tf * v(0, i) * v(1, j) + st[(size_t) (i * S + j)]);
                        }
                        out[at(d, t, h, j)] = y;
                    }
                    for (int64_t i = 0; i < S; ++i) {
                        for (int64_t j = 0; j < S; ++j) {
                            double & e = st[(size_t) (i * S + j)];
                            e          = e * v(3, i) + v(0, i) * v(1, j);
                        }
                    }
                } else if (op == Rec::wkv7) { // r w k v a b; state[i = value][j = key]
                    for (int64_t i = 0; i < S; ++i) {
                        double sa = 0.0;
                        for (int64_t j = 0; j < S; ++j) {
                            sa += st[(size_t) (i * S + j)] * v(4, j);
                        }
                        double y = 0.0;
                        for (int64_t j = 0; j < S; ++j) {
                            double & e = st[(size_t) (i * S + j)];
                            e          = e * v(1, j) + v(3, i) * v(2, j) + sa * v(5, j);
                            y += e * v(0, j);
                        }
                        out[at(d, t, h, i)] = y;
                    }
                } else { // k v q g; state[i = key][j = value]
                    for (int64_t i = 0; i < S; ++i) {
                        for (int64_t j = 0; j < S; ++j) {
                            double & e = st[(size_t) (i * S + j)];
                            e          = e * v(3, i) + v(0, i) * v(1, j);
                        }
                    }
                    for (int64_t j = 0; j < S; ++j) {
                        double y = 0.0;
                        for (int64_t i = 0; i < S; ++i) {
                            y += v(2, i) * st[(size_t) (i * S + j)];
                        }
                        out[at(d, t, h, j)] = scale * y;
                    }
                }
            }
            for (int64_t e = 0; e < S * S; ++e) {
                out[(size_t) (d.T * S * d.H) + so + (size_t) e] = st[(size_t) e];
            }
        }
    }
    return out;
}

const char * rec_name(Rec op) {
    return op == Rec::wkv6 ? "wkv6" : op == Rec::wkv7 ? "wkv7" : "gla";
}

void check_rec(const RecCase & c) {
    SCOPED_TRACE(::testing::Message() << rec_name(c.op) << " S " << c.S << " H " << c.H << " per_seq " << c.per_seq
                                      << " n_seqs " << c.n_seqs << " threads " << c.n_threads);
    const int64_t                  T = c.per_seq * c.n_seqs;
    Graph                          g;
    const int                      n_in = c.op == Rec::wkv7 ? 6 : 4;
    std::vector<wsp_ggml_tensor *> in;
    for (int a = 0; a < n_in; ++a) {
        in.push_back(g.input(WSP_GGML_TYPE_F32, { c.S, c.H, T }));
    }
    wsp_ggml_tensor * tf    = c.op == Rec::wkv6 ? g.input(WSP_GGML_TYPE_F32, { c.S, c.H }) : nullptr;
    wsp_ggml_tensor * state = g.input(WSP_GGML_TYPE_F32, { c.S * c.S * c.H, c.n_seqs });
    const float       scale = 0.37f;
    wsp_ggml_tensor * out;
    switch (c.op) {
        case Rec::wkv6: out = wsp_ggml_rwkv_wkv6(g.ctx(), in[0], in[1], in[2], tf, in[3], state); break;
        case Rec::wkv7: out = wsp_ggml_rwkv_wkv7(g.ctx(), in[0], in[1], in[2], in[3], in[4], in[5], state); break;
        default: out = wsp_ggml_gated_linear_attn(g.ctx(), in[0], in[1], in[2], in[3], state, scale); break;
    }
    ASSERT_EQ(out->ne[0], c.S * c.H);
    ASSERT_EQ(out->ne[1], T + c.S * c.n_seqs);
    g.build(out);

    RecData d{ c.S, c.H, T, c.n_seqs, {}, {} };
    // the decay operand (td, w, g) in (0.5, 1); wkv7's a and b small, so S a b^T keeps the state bounded
    const int decay = c.op == Rec::wkv7 ? 1 : 3;
    for (int a = 0; a < n_in; ++a) {
        const bool  small = c.op == Rec::wkv7 && a >= 4;
        const float lo = a == decay ? 0.5f : small ? -0.1f : -1.0f, hi = a == decay ? 1.0f : small ? 0.1f : 1.0f;
        d.in.push_back(random_in(in[(size_t) a], 10 + a, lo, hi));
        set_values(in[(size_t) a], d.in.back());
    }
    if (tf != nullptr) {
        d.in.push_back(random_in(tf, 20, -1, 1));
        set_values(tf, d.in.back());
    }
    d.state = random_in(state, 21, -1, 1);
    set_values(state, d.state);
    ASSERT_EQ(g.run(c.n_threads), WSP_GGML_STATUS_SUCCESS);
    const std::vector<double> ref = rec_reference(c.op, d, scale);
    const std::vector<float>  got = get_values(out);
    EXPECT_LT(nmse(got, ref), TOL);
    EXPECT_TRUE(all_close(got, ref, 1e-4, 1e-4, rec_name(c.op)));
}

class Recurrent : public ::testing::TestWithParam<Rec> {};

TEST_P(Recurrent, MatchesReference) {
    const Rec op = GetParam();
    check_rec({ op, 64, 2, 3, 2, 3 });
    check_rec({ op, 1, 1, 1, 1, 1 });
    check_rec({ op, 5, 3, 4, 1, 2 });
    check_rec({ op, 5, 1, 2, 3, 8 });  // more tasks than (sequence, head) pairs
    check_rec({ op, 16, 4, 0, 2, 2 }); // no tokens: the states pass through
}

INSTANTIATE_TEST_SUITE_P(Ops, Recurrent, ::testing::Values(Rec::wkv6, Rec::wkv7, Rec::gla),
                         [](const ::testing::TestParamInfo<Rec> & info) { return std::string(rec_name(info.param)); });

// ---- shape checks

class RecurrentDeath : public ::testing::Test {
protected:
    void SetUp() override {
        GTEST_FLAG_SET(death_test_style, "threadsafe");
        ctx_ = wsp_ggml_init({ 32 * wsp_ggml_tensor_overhead(), nullptr, true });
    }
    void TearDown() override { wsp_ggml_free(ctx_); }

    wsp_ggml_tensor * t(std::vector<int64_t> ne) {
        ne.resize(4, 1);
        return wsp_ggml_new_tensor(ctx_, WSP_GGML_TYPE_F32, 4, ne.data());
    }

    wsp_ggml_context * ctx_ = nullptr;
};

TEST_F(RecurrentDeath, SsmConvChannelsMustMatch) {
    EXPECT_DEATH(wsp_ggml_ssm_conv(ctx_, t({ 8, 6, 2 }), t({ 4, 5 })), "wsp_ggml_ssm_conv: .*sx->ne\\[1\\] == d_inner");
}

TEST_F(RecurrentDeath, SsmScanAMustBeStateByChannels) {
    EXPECT_DEATH(wsp_ggml_ssm_scan(ctx_, t({ 16, 8, 1 }), t({ 8, 3, 1 }), t({ 8, 3, 1 }), t({ 16, 7 }), t({ 16, 3, 1 }),
                                   t({ 16, 3, 1 })),
                 "wsp_ggml_ssm_scan: .*A->ne\\[1\\] == d_inner");
}

TEST_F(RecurrentDeath, Wkv6StateSize) {
    EXPECT_DEATH(wsp_ggml_rwkv_wkv6(ctx_, t({ 4, 2, 3 }), t({ 4, 2, 3 }), t({ 4, 2, 3 }), t({ 4, 2 }), t({ 4, 2, 3 }),
                                    t({ 31, 1 })),
                 "wsp_ggml_rwkv_wkv6: .*nelements\\(state\\)");
}

TEST_F(RecurrentDeath, Wkv7OperandShapes) {
    EXPECT_DEATH(wsp_ggml_rwkv_wkv7(ctx_, t({ 4, 2, 3 }), t({ 4, 2, 3 }), t({ 4, 2, 3 }), t({ 4, 2, 3 }),
                                    t({ 4, 2, 2 }), t({ 4, 2, 3 }), t({ 32, 1 })),
                 "wsp_ggml_rwkv_wkv7: .*ne\\[2\\] == ref->ne\\[2\\]");
}

TEST_F(RecurrentDeath, GlaTokensSplitIntoSequences) {
    EXPECT_DEATH(wsp_ggml_gated_linear_attn(ctx_, t({ 4, 2, 3 }), t({ 4, 2, 3 }), t({ 4, 2, 3 }), t({ 4, 2, 3 }),
                                            t({ 32, 2 }), 1.0f),
                 "wsp_ggml_gated_linear_attn: .*n_tokens % state->ne\\[1\\] == 0");
}

} // namespace
} // namespace wsp::test
