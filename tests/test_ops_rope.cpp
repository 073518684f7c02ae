// The CPU kernel of ROPE against a double reference written here from the definitions: theta_i =
// p * base^(-2i/n_dims) / c_i, YaRN's blend of interpolation and extrapolation over the ramp
// between the correction dims and its mscale, the pairings of the normal, NEOX, MROPE and VISION
// modes, multi-section positions, dims past n_dims copied; F32 / F16 / BF16, strided rows, in
// place, and every builder (rope, rope_ext, rope_multi, the deprecated rope_custom).

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace wsp::test {
namespace {

struct RopeCase {
    std::vector<int64_t> ne;
    int                  n_dims;
    int                  mode;
    bool                 freq_factors;
    int                  n_ctx_orig;
    float                freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int                  sections[4];
};

// YaRN's correction dims from the definition: the dim whose wavelength turns n_rot times over
// n_ctx_orig positions, floor / ceil, clamped to [0, n_dims - 1]
void corr_dims_ref(const RopeCase & c, double dims[2]) {
    auto corr = [&](double n_rot) {
        return c.n_dims * std::log(c.n_ctx_orig / (n_rot * 2.0 * M_PI)) / (2.0 * std::log((double) c.freq_base));
    };
    dims[0] = std::max(0.0, std::floor(corr(c.beta_fast)));
    dims[1] = std::min((double) (c.n_dims - 1), std::ceil(corr(c.beta_slow)));
}

std::vector<double> rope_ref(const RopeCase & c, const std::vector<float> & x, const std::vector<int32_t> & pos,
                             const std::vector<float> & ff) {
    std::vector<int64_t> ne = c.ne;
    ne.resize(4, 1);
    const bool vision = c.mode == WSP_GGML_ROPE_TYPE_VISION;
    const bool multi  = (c.mode & WSP_GGML_ROPE_TYPE_MROPE) != 0;
    const bool neox   = (c.mode & WSP_GGML_ROPE_TYPE_NEOX) != 0 || (multi && !vision);
    double     corr[2];
    corr_dims_ref(c, corr);
    const int           n_sect  = c.sections[0] + c.sections[1] + c.sections[2] + c.sections[3];
    const int           n_pairs = vision ? c.n_dims : c.n_dims / 2;
    std::vector<double> out(x.begin(), x.end());
    for (int64_t i3 = 0; i3 < ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                const size_t row = (size_t) (((i3 * ne[2] + i2) * ne[1] + i1) * ne[0]);
                for (int i = 0; i < n_pairs; ++i) {
                    double p = pos[i2];
                    int    e = i;
                    if (multi) {
                        const int s  = i % n_sect;
                        const int b1 = c.sections[0], b2 = b1 + c.sections[1], b3 = b2 + c.sections[2];
                        const int which = s < b1 ? 0 : s < b2 ? 1 : s < b3 ? 2 : 3;
                        const int start = which == 0 ? 0 : which == 1 ? b1 : which == 2 ? b2 : b3;
                        p               = pos[i2 + ne[2] * which];
                        e               = vision ? s - start : i;
                    }
                    double extrap = p * std::pow((double) c.freq_base, -2.0 * e / c.n_dims);
                    if (!ff.empty()) {
                        extrap /= ff[i];
                    }
                    const double interp = c.freq_scale * extrap;
                    double       theta = interp, mscale = c.attn_factor;
                    if (c.ext_factor != 0.0f) {
                        const double y    = (i - corr[0]) / std::max(0.001, corr[1] - corr[0]);
                        const double ramp = (1.0 - std::min(1.0, std::max(0.0, y))) * c.ext_factor;
                        theta             = interp * (1.0 - ramp) + extrap * ramp;
                        mscale *= 1.0 + 0.1 * std::log(1.0 / c.freq_scale);
                    }
                    const size_t j0 = row + (vision ? i : neox ? i : 2 * i);
                    const size_t j1 = row + (vision ? i + c.n_dims : neox ? i + c.n_dims / 2 : 2 * i + 1);
                    const double x0 = x[j0], x1 = x[j1];
                    out[j0] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * mscale;
                    out[j1] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * mscale;
                }
            }
        }
    }
    return out;
}

struct Built {
    wsp_ggml_tensor * a;
    wsp_ggml_tensor * pos;
    wsp_ggml_tensor * ff;
    wsp_ggml_tensor * out;
};

Built build_rope(Graph & g, const RopeCase & c, wsp_ggml_type type, Layout layout, bool inplace) {
    Built b{};
    b.a                    = make_operand(g, type, c.ne, layout);
    const bool multi       = (c.mode & WSP_GGML_ROPE_TYPE_MROPE) != 0;
    b.pos                  = g.input(WSP_GGML_TYPE_I32, { (multi ? 4 : 1) * b.a->ne[2] });
    const int n_pairs      = c.mode == WSP_GGML_ROPE_TYPE_VISION ? c.n_dims : c.n_dims / 2;
    b.ff                   = c.freq_factors ? g.input(WSP_GGML_TYPE_F32, { n_pairs + 1 }) : nullptr;
    wsp_ggml_context * ctx = g.ctx();
    if (multi) {
        int sections[4] = { c.sections[0], c.sections[1], c.sections[2], c.sections[3] };
        b.out = wsp_ggml_rope_multi(ctx, b.a, b.pos, b.ff, c.n_dims, sections, c.mode, c.n_ctx_orig, c.freq_base,
                                    c.freq_scale, c.ext_factor, c.attn_factor, c.beta_fast, c.beta_slow);
    } else if (inplace) {
        b.out = wsp_ggml_rope_ext_inplace(ctx, b.a, b.pos, b.ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base,
                                          c.freq_scale, c.ext_factor, c.attn_factor, c.beta_fast, c.beta_slow);
    } else {
        b.out = wsp_ggml_rope_ext(ctx, b.a, b.pos, b.ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale,
                                  c.ext_factor, c.attn_factor, c.beta_fast, c.beta_slow);
    }
    return b;
}

void run_case(const RopeCase & c, wsp_ggml_type type, Layout layout, bool inplace) {
    Graph       g;
    const Built b = build_rope(g, c, type, layout, inplace);
    g.build(b.out);
    fill_inputs(g, 31);
    std::vector<int32_t> pos((size_t) b.pos->ne[0]);
    for (size_t i = 0; i < pos.size(); ++i) {
        pos[i] = (int32_t) ((i * 7919 + 13) % 2000) - 100; // spread over [-100, 1900)
    }
    set_i32(b.pos, pos);
    std::vector<float> ff;
    if (b.ff != nullptr) {
        ff = random_values((size_t) b.ff->ne[0], 37, 0.5f, 4.0f);
        set_values(b.ff, ff);
    }
    const std::vector<float>  x   = get_values(b.a);
    const std::vector<double> ref = rope_ref(c, x, pos, ff);
    ASSERT_EQ(g.run(3), WSP_GGML_STATUS_SUCCESS);
    const double scale = std::max(1.0f, c.attn_factor) * 2.0;
    const double tol   = 2.0 * type_eps(type) * scale + 1e-6;
    all_close(get_values(b.out), ref, tol, 2.0 * type_eps(type),
              std::string("rope mode ") + std::to_string(c.mode) + " n_dims " + std::to_string(c.n_dims) + " " +
                  wsp_ggml_type_name(type) + " " + layout_name(layout) + (inplace ? " in place " : " ") +
                  shape_str(b.out));
    if (inplace) {
        EXPECT_EQ(b.out->data, b.a->data);
    }
    // the reference really rotates (a kernel that copied would fail the comparison above)
    size_t moved = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        moved += std::fabs(ref[i] - (double) x[i]) > 1e-3 ? 1 : 0;
    }
    EXPECT_GT(moved, ref.size() / 8);
}

// {ne, n_dims, mode, freq factors, n_ctx_orig, base, scale, ext, attn, beta_fast, beta_slow, sections}
const std::vector<RopeCase> CASES = {
    { { 64, 4, 7 }, 64, 0, false, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, {} },
    { { 50, 3, 5, 2 }, 20, 0, false, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, {} },
    { { 50, 3, 5 }, 20, WSP_GGML_ROPE_TYPE_NEOX, false, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, {} },
    { { 128, 2, 9 }, 128, WSP_GGML_ROPE_TYPE_NEOX, true, 4096, 500000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, {} },
    { { 64, 3, 6 }, 64, 0, false, 2048, 10000.0f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f, {} },
    { { 96, 2, 5 }, 64, WSP_GGML_ROPE_TYPE_NEOX, true, 4096, 10000.0f, 0.5f, 0.5f, 0.8f, 32.0f, 1.0f, {} },
    { { 2, 1, 3 }, 2, 0, false, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, {} },
    { { 40, 3, 5 }, 32, WSP_GGML_ROPE_TYPE_MROPE, false, 0, 1000000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, { 4, 6, 6, 0 } },
    { { 32, 2, 4 }, 32, WSP_GGML_ROPE_TYPE_MROPE, true, 4096, 10000.0f, 0.5f, 1.0f, 1.0f, 32.0f, 1.0f, { 3, 2, 2, 1 } },
    { { 32, 3, 5 }, 16, WSP_GGML_ROPE_TYPE_VISION, false, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, { 8, 8, 0, 0 } },
    { { 24, 2, 3 }, 12, WSP_GGML_ROPE_TYPE_VISION, true, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, { 4, 2, 0, 0 } },
};

TEST(OpsRope, EveryModeAgainstTheDefinition) {
    for (const RopeCase & c : CASES) {
        run_case(c, WSP_GGML_TYPE_F32, Layout::Contiguous, false);
    }
}

TEST(OpsRope, HalfTypesStridedRowsAndInPlace) {
    for (const RopeCase & c : CASES) {
        for (wsp_ggml_type type : float_types()) {
            run_case(c, type, Layout::Strided, false);
            if ((c.mode & WSP_GGML_ROPE_TYPE_MROPE) == 0) {
                run_case(c, type, Layout::Contiguous, true);
            }
        }
    }
}

TEST(OpsRope, PlainAndDeprecatedBuildersMatchRopeExt) {
    Graph              g;
    wsp_ggml_tensor *  a   = g.input(WSP_GGML_TYPE_F32, { 32, 2, 5 });
    wsp_ggml_tensor *  pos = g.input(WSP_GGML_TYPE_I32, { 5 });
    wsp_ggml_context * ctx = g.ctx();
    wsp_ggml_tensor *  ext =
        wsp_ggml_rope_ext(ctx, a, pos, nullptr, 32, WSP_GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    wsp_ggml_tensor * plain = wsp_ggml_rope(ctx, a, pos, 32, WSP_GGML_ROPE_TYPE_NEOX);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    wsp_ggml_tensor * custom =
        wsp_ggml_rope_custom(ctx, a, pos, 32, WSP_GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
#pragma GCC diagnostic pop
    wsp_ggml_tensor * cont = wsp_ggml_cont(ctx, a); // a's values, before the in-place node writes them
    wsp_ggml_tensor * inpl = wsp_ggml_rope_inplace(ctx, wsp_ggml_scale(ctx, a, 1.0f), pos, 32, WSP_GGML_ROPE_TYPE_NEOX);
    g.build(ext, { plain, custom, cont, inpl });
    fill_inputs(g, 41);
    set_i32(pos, { 0, 1, 17, 300, 4095 });
    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
    const std::vector<float>  e = get_values(ext);
    const std::vector<double> ed(e.begin(), e.end());
    all_close(get_values(plain), ed, 0.0, 0.0, "rope");
    all_close(get_values(custom), ed, 0.0, 0.0, "rope_custom");
    all_close(get_values(inpl), ed, 0.0, 0.0, "rope_inplace");
    // position 0 leaves the first token as it is
    const std::vector<float> x = get_values(cont);
    for (int i = 0; i < 64; ++i) {
        EXPECT_EQ(e[i], x[i]) << i;
    }
    EXPECT_EQ(ext->op_params[1], 32);
    EXPECT_EQ(ext->op_params[2], WSP_GGML_ROPE_TYPE_NEOX);
}

TEST(OpsRope, YarnCorrDimsFollowTheDefinition) {
    for (int n_dims : { 64, 128 }) {
        for (float base : { 10000.0f, 500000.0f }) {
            RopeCase c{};
            c.n_dims     = n_dims;
            c.n_ctx_orig = 4096;
            c.freq_base  = base;
            c.beta_fast  = 32.0f;
            c.beta_slow  = 1.0f;
            double ref[2];
            corr_dims_ref(c, ref);
            float dims[2];
            wsp_ggml_rope_yarn_corr_dims(n_dims, 4096, base, 32.0f, 1.0f, dims);
            EXPECT_EQ(dims[0], (float) ref[0]) << n_dims << " " << base;
            EXPECT_EQ(dims[1], (float) ref[1]) << n_dims << " " << base;
            EXPECT_LT(dims[0], dims[1]);
        }
    }
}

TEST(OpsRopeDeath, BuildersRejectBadArguments) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    wsp_ggml_context * ctx = wsp_ggml_init({ 16 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  a   = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, 32, 2, 5);
    wsp_ggml_tensor *  p4  = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, 4);
    wsp_ggml_tensor *  p5  = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, 5);
    wsp_ggml_tensor *  f5  = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 5);
    wsp_ggml_tensor *  ff  = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    EXPECT_DEATH(wsp_ggml_rope(ctx, a, p4, 32, 0), "wsp_ggml_rope: invalid arguments .*a->ne\\[2\\] == b->ne\\[0\\]");
    EXPECT_DEATH(wsp_ggml_rope(ctx, a, f5, 32, 0), "wsp_ggml_rope: .*WSP_GGML_TYPE_I32");
    EXPECT_DEATH(wsp_ggml_rope(ctx, a, p5, 34, 0), "wsp_ggml_rope: .*n_dims <= a->ne\\[0\\]");
    EXPECT_DEATH(wsp_ggml_rope(ctx, a, p5, 32, 1), "wsp_ggml_rope: .*mode & 1");
    EXPECT_DEATH(wsp_ggml_rope_ext(ctx, a, p5, ff, 32, 0, 0, 1e4f, 1, 0, 1, 0, 0), "c->ne\\[0\\] >= n_pairs");
    int sections[4] = { 4, 4, 4, 4 };
    EXPECT_DEATH(
        wsp_ggml_rope_multi(ctx, a, p5, nullptr, 32, sections, WSP_GGML_ROPE_TYPE_MROPE, 0, 1e4f, 1, 0, 1, 0, 0),
        "wsp_ggml_rope_multi: .*a->ne\\[2\\] \\* 4 == b->ne\\[0\\]");
    EXPECT_DEATH(
        wsp_ggml_rope_multi(ctx, a, p5, nullptr, 32, sections, WSP_GGML_ROPE_TYPE_NEOX, 0, 1e4f, 1, 0, 1, 0, 0),
        "wsp_ggml_rope_multi: .*MROPE");
    wsp_ggml_free(ctx);
}

} // namespace
} // namespace wsp::test
