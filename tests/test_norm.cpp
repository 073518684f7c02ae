// NORM against a double reference of (x - mean) / sqrt(var + eps) per row: row lengths from 1 to
// whisper's 1280, several eps, rows with a large mean and a small spread (where a float mean
// would dominate the error), F16/BF16 data, padded-row and transposed views, in place, threads.

#include "test_util.h"

#include <gtest/gtest.h>

namespace wsp::test {
namespace {

enum class View { contiguous, padded_rows, transposed };

struct NormCase {
    int64_t       ne0, ne1 = 5, ne2 = 2;
    float         eps     = 1e-5f;
    wsp_ggml_type type    = WSP_GGML_TYPE_F32;
    View          view    = View::contiguous;
    bool          inplace = false;
    float         center = 0.0f, spread = 1.0f; // inputs uniform in center +- spread
    int           n_threads = 2;
};

std::string describe(const NormCase & c) {
    char buf[200];
    snprintf(buf, sizeof(buf), "ne0=%lld ne1=%lld ne2=%lld eps=%g %s view=%d inplace=%d center=%g spread=%g threads=%d",
             (long long) c.ne0, (long long) c.ne1, (long long) c.ne2, c.eps, wsp_ggml_type_name(c.type), (int) c.view,
             (int) c.inplace, c.center, c.spread, c.n_threads);
    return buf;
}

wsp_ggml_tensor * make_view(Graph & g, const NormCase & c) {
    switch (c.view) {
        case View::padded_rows: {
            wsp_ggml_tensor * big = g.input(c.type, { c.ne0 + 3, c.ne1, c.ne2 });
            return wsp_ggml_view_3d(g.ctx(), big, c.ne0, c.ne1, c.ne2, big->nb[1], big->nb[2],
                                    wsp_ggml_type_size(c.type));
        }
        case View::transposed: return wsp_ggml_permute(g.ctx(), g.input(c.type, { c.ne1, c.ne0, c.ne2 }), 1, 0, 2, 3);
        default: return g.input(c.type, { c.ne0, c.ne1, c.ne2 });
    }
}

std::vector<double> reference(const std::vector<float> & x, int64_t ne0, float eps) {
    std::vector<double> y(x.size());
    for (size_t r = 0; r < x.size() / (size_t) ne0; ++r) {
        const float * row  = &x[r * (size_t) ne0];
        double        mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < ne0; ++i) {
            mean += row[i];
        }
        mean /= (double) ne0;
        for (int64_t i = 0; i < ne0; ++i) {
            var += (row[i] - mean) * (row[i] - mean);
        }
        var /= (double) ne0;
        for (int64_t i = 0; i < ne0; ++i) {
            y[r * (size_t) ne0 + (size_t) i] = (row[i] - mean) / std::sqrt(var + (double) eps);
        }
    }
    return y;
}

void check_case(const NormCase & c, uint32_t seed = 9) {
    SCOPED_TRACE(describe(c));
    Graph  g;
    auto * a   = make_view(g, c);
    auto * out = c.inplace ? wsp_ggml_norm_inplace(g.ctx(), a, c.eps) : wsp_ggml_norm(g.ctx(), a, c.eps);
    g.build(out);
    const std::vector<float> x = round_trip(
        c.type, random_values((size_t) wsp_ggml_nelements(a), seed, c.center - c.spread, c.center + c.spread));
    set_values(a, x);
    ASSERT_EQ(g.run(c.n_threads), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(out->type, c.type);
    if (c.inplace) {
        EXPECT_EQ(out->data, a->data);
    }
    const std::vector<float>  got = get_values(out);
    const std::vector<double> ref = reference(x, c.ne0, c.eps);
    // outputs are O(1): F32 is held to 1e-6 (a float mean alone would err by ulp(mean) / spread,
    // 6e-5 / 0.01 for the offset rows); F16/BF16 add half an ulp of the stored result
    const double rtol = c.type == WSP_GGML_TYPE_F32 ? 1e-6 : c.type == WSP_GGML_TYPE_F16 ? 1e-3 : 8e-3;
    int          bad  = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (!(std::fabs(got[i] - ref[i]) <= 1e-6 + rtol * std::fabs(ref[i])) && ++bad <= 5) {
            ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << ref[i];
        }
    }
    EXPECT_EQ(bad, 0);
}

TEST(Norm, RowLengthsAndEps) {
    for (int64_t ne0 : { 1, 2, 17, 384, 1280 }) {
        for (float eps : { 1e-5f, 1e-6f, 0.5f }) {
            NormCase c{ ne0 };
            c.eps = eps;
            check_case(c, (uint32_t) ne0);
        }
    }
}

TEST(Norm, LargeOffsetSmallSpread) {
    for (int64_t ne0 : { 17, 384, 1280 }) {
        NormCase c{ ne0 };
        c.center = 1000.0f;
        c.spread = 0.01f;
        c.eps    = 1e-12f;
        check_case(c);
        c.center = -30000.0f;
        c.spread = 1.0f;
        check_case(c);
    }
}

TEST(Norm, TypesViewsInPlace) {
    for (wsp_ggml_type t : float_types()) {
        for (View v : { View::contiguous, View::padded_rows, View::transposed }) {
            for (bool inplace : { false, true }) {
                NormCase c{ 67 };
                c.type    = t;
                c.view    = v;
                c.inplace = inplace;
                c.center  = 2.0f;
                check_case(c);
            }
        }
    }
}

TEST(Norm, Threads) {
    for (int nth : { 1, 2 }) {
        NormCase c{ 1280, 37, 1 };
        c.n_threads = nth;
        check_case(c);
    }
}

} // namespace
} // namespace wsp::test
