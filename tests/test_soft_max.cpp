// SOFT_MAX (soft_max_ext) against a double reference of softmax(x * scale + slope * mask) per row:
// row lengths around the vector width and long rows, F16/F32 masks broadcast over dims 2-3 with
// -inf entries, ALiBi slopes, fully masked rows (zeros), F16/BF16 logits, threads, and the result
// computed in place of its source by the graph allocator.

#include "test_util.h"

#include <gtest/gtest.h>

#include <limits>

namespace wsp::test {
namespace {

struct SmCase {
    std::vector<int64_t> ne; // logits [ne0, ne1, ne2, ne3]
    wsp_ggml_type        type      = WSP_GGML_TYPE_F32;
    bool                 mask      = true;
    wsp_ggml_type        mask_type = WSP_GGML_TYPE_F16;
    int64_t              m2 = 1, m3 = 1; // mask dims 2-3 (broadcast by modulo)
    float                scale = 0.7f, max_bias = 0.0f;
    int                  n_threads = 2;
};

std::string describe(const SmCase & c) {
    char buf[200];
    snprintf(buf, sizeof(buf), "[%lld,%lld,%lld,%lld] %s mask=%d %s m2=%lld m3=%lld scale=%g bias=%g threads=%d",
             (long long) c.ne[0], (long long) c.ne[1], (long long) c.ne[2], (long long) c.ne[3],
             wsp_ggml_type_name(c.type), (int) c.mask, wsp_ggml_type_name(c.mask_type), (long long) c.m2,
             (long long) c.m3, c.scale, c.max_bias, c.n_threads);
    return buf;
}

double slope_ref(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) {
        return 1.0;
    }
    const int64_t n_log2 = (int64_t) 1 << (int64_t) std::floor(std::log2((double) n_head));
    const double  m0     = std::pow(2.0, -(double) max_bias / (double) n_log2);
    const double  m1     = std::pow(2.0, -((double) max_bias / 2.0) / (double) n_log2);
    return h < n_log2 ? std::pow(m0, (double) (h + 1)) : std::pow(m1, (double) (2 * (h - n_log2) + 1));
}

// mask rows (more rows than logits rows, as attention masks are padded): a fifth of the entries
// -inf, row 1 of every slice fully masked, small negative biases elsewhere
std::vector<float> make_mask(const SmCase & c, int64_t mask_rows, uint32_t seed) {
    const float        inf = std::numeric_limits<float>::infinity();
    std::vector<float> u   = random_values((size_t) (c.ne[0] * mask_rows * c.m2 * c.m3), seed, 0.0f, 1.0f);
    for (size_t k = 0; k < u.size(); ++k) {
        const int64_t row = (int64_t) (k / (size_t) c.ne[0]) % mask_rows;
        u[k]              = (u[k] < 0.2f || (row == 1 && c.ne[1] > 1)) ? -inf : -3.0f * u[k];
    }
    return round_trip(c.mask_type, u);
}

std::vector<double> reference(const SmCase & c, const std::vector<float> & x, const std::vector<float> & mask,
                              int64_t mask_rows) {
    const int64_t       ne0 = c.ne[0], ne1 = c.ne[1], ne2 = c.ne[2], ne3 = c.ne[3];
    std::vector<double> y(x.size());
    std::vector<double> w((size_t) ne0);
    for (int64_t i3 = 0; i3 < ne3; ++i3) {
        for (int64_t i2 = 0; i2 < ne2; ++i2) {
            for (int64_t i1 = 0; i1 < ne1; ++i1) {
                const size_t row  = (size_t) (((i3 * ne2 + i2) * ne1 + i1) * ne0);
                const size_t mrow = (size_t) ((((i3 % c.m3) * c.m2 + i2 % c.m2) * mask_rows + i1) * ne0);
                double       mx   = -std::numeric_limits<double>::infinity();
                for (int64_t i = 0; i < ne0; ++i) {
                    w[(size_t) i] = (double) c.scale * x[row + (size_t) i];
                    if (c.mask) {
                        w[(size_t) i] += slope_ref(c.max_bias, i2, ne2) * mask[mrow + (size_t) i];
                    }
                    mx = std::max(mx, w[(size_t) i]);
                }
                double sum = 0.0;
                for (int64_t i = 0; i < ne0; ++i) {
                    sum += mx == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp(w[(size_t) i] - mx);
                }
                for (int64_t i = 0; i < ne0; ++i) {
                    y[row + (size_t) i] = sum == 0.0 ? 0.0 : std::exp(w[(size_t) i] - mx) / sum;
                }
            }
        }
    }
    return y;
}

// softmax of `scale(input, 1)`, so that the allocator may compute it in place of its source
void check_case(const SmCase & c, uint32_t seed = 3) {
    SCOPED_TRACE(describe(c));
    const int64_t mask_rows = c.ne[1] + 2;
    Graph         g;
    auto *        in   = g.input(c.type, c.ne);
    auto *        x    = wsp_ggml_scale(g.ctx(), in, 1.0f);
    auto *        mask = c.mask ? g.input(c.mask_type, { c.ne[0], mask_rows, c.m2, c.m3 }) : nullptr;
    auto *        out  = wsp_ggml_soft_max_ext(g.ctx(), x, mask, c.scale, c.max_bias);
    g.build(out);
    const std::vector<float> xv = round_trip(c.type, random_values((size_t) wsp_ggml_nelements(in), seed, -5, 5));
    const std::vector<float> mv = c.mask ? make_mask(c, mask_rows, seed + 1) : std::vector<float>();
    set_values(in, xv);
    if (mask != nullptr) {
        set_values(mask, mv);
    }
    ASSERT_EQ(g.run(c.n_threads), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(out->data, x->data) << "expected the allocator to place soft_max in place of its source";

    const std::vector<float>  got = get_values(out);
    const std::vector<double> ref = reference(c, xv, mv, mask_rows);
    // F32: logits are rounded once (scale * x + slope * mask) and exp is good to a few ulp, so
    // each probability is within ~1e-6 relative; F16/BF16 add the rounding of the stored result
    const double rtol = c.type == WSP_GGML_TYPE_F32 ? 3e-6 : c.type == WSP_GGML_TYPE_F16 ? 1e-3 : 8e-3;
    int          bad  = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const bool ok = ref[i] == 0.0 ? got[i] == 0.0f : std::fabs(got[i] - ref[i]) <= 1e-12 + rtol * ref[i];
        if (!ok && ++bad <= 5) {
            ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << ref[i];
        }
    }
    EXPECT_LT(nmse(got, ref), c.type == WSP_GGML_TYPE_F32 ? 1e-11 : nmse_bound(c.type));
}

TEST(SoftMax, RowLengths) {
    for (int64_t ne0 : { 1, 5, 16, 17, 100, 1500 }) {
        SmCase c;
        c.ne = { ne0, 3, 4, 2 };
        check_case(c, (uint32_t) ne0);
        c.mask = false;
        check_case(c, (uint32_t) ne0 + 7);
    }
}

TEST(SoftMax, MaskBroadcast) {
    for (wsp_ggml_type mt : { WSP_GGML_TYPE_F16, WSP_GGML_TYPE_F32 }) {
        for (int64_t m2 : { 1, 4 }) {
            for (int64_t m3 : { 1, 2 }) {
                SmCase c;
                c.ne        = { 33, 5, 4, 2 };
                c.mask_type = mt;
                c.m2        = m2;
                c.m3        = m3;
                check_case(c);
            }
        }
    }
}

TEST(SoftMax, AlibiSlopes) {
    for (int64_t heads : { 4, 6 }) { // 6: heads beyond n_head_log2 take the m1 slopes
        SmCase c;
        c.ne       = { 40, 3, heads, 1 };
        c.m2       = heads;
        c.max_bias = 8.0f;
        check_case(c);
    }
}

TEST(SoftMax, ScalesThreadsTypes) {
    for (float scale : { 1.0f, 0.125f, 3.0f }) {
        for (int nth : { 1, 2 }) {
            SmCase c;
            c.ne        = { 100, 7, 2, 1 };
            c.scale     = scale;
            c.n_threads = nth;
            check_case(c);
        }
    }
    for (wsp_ggml_type t : { WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16 }) {
        SmCase c;
        c.ne   = { 70, 3, 2, 1 };
        c.type = t;
        check_case(c);
    }
}

// without a mask, softmax of constant rows is uniform, and of -inf rows (a fully masked
// attention row) is zero, not NaN
TEST(SoftMax, FullyMaskedRowsAreZero) {
    SmCase c;
    c.ne = { 64, 4, 1, 1 };
    Graph  g;
    auto * x    = g.input(WSP_GGML_TYPE_F32, c.ne);
    auto * mask = g.input(WSP_GGML_TYPE_F16, { 64, 4 });
    auto * out  = wsp_ggml_soft_max_ext(g.ctx(), x, mask, 1.0f, 0.0f);
    g.build(out);
    std::vector<float> m(64 * 4, 0.0f);
    for (int i = 64; i < 128; ++i) {
        m[(size_t) i] = -std::numeric_limits<float>::infinity(); // row 1
    }
    set_values(x, std::vector<float>(64 * 4, 0.5f));
    set_values(mask, m);
    ASSERT_EQ(g.run(1), WSP_GGML_STATUS_SUCCESS);
    const std::vector<float> y = get_values(out);
    for (size_t i = 0; i < y.size(); ++i) {
        EXPECT_EQ(y[i], (i / 64 == 1) ? 0.0f : 1.0f / 64.0f) << "element " << i;
    }
}

} // namespace
} // namespace wsp::test
