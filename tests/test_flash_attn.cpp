// FLASH_ATTN_EXT against a double-precision reference of softmax(scale q.k, softcapped, + slope
// mask) . v, over head sizes, query/key counts that straddle the kernel's blocks, GQA, masks
// (broadcast, -inf, fully masked rows and key blocks), ALiBi, softcap, K/V types, strided and
// permuted views, thread counts; and against the unfused soft_max_ext + mul_mat graph.

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace wsp::test {
namespace {

enum class QkvLayout { contiguous, permuted, strided_d };
enum class MaskKind { none, random, causal_blocks };

struct FaCase {
    int64_t       D, Dv, n_q, n_kv;
    int64_t       n_head = 4, n_head_kv = 2, ne3 = 2, ne3k = 1;
    MaskKind      mask     = MaskKind::random;
    int64_t       mask_ne2 = 1, mask_ne3 = 1;
    wsp_ggml_type kv_type = WSP_GGML_TYPE_F16, mask_type = WSP_GGML_TYPE_F16;
    float         max_bias = 0.0f, softcap = 0.0f;
    QkvLayout     layout    = QkvLayout::contiguous;
    int           n_threads = 2;
};

std::string describe(const FaCase & c) {
    char buf[256];
    snprintf(buf, sizeof(buf),
             "D=%lld Dv=%lld n_q=%lld n_kv=%lld heads=%lld/%lld ne3=%lld/%lld mask=%d kv=%s bias=%g cap=%g "
             "layout=%d threads=%d",
             (long long) c.D, (long long) c.Dv, (long long) c.n_q, (long long) c.n_kv, (long long) c.n_head,
             (long long) c.n_head_kv, (long long) c.ne3, (long long) c.ne3k, (int) c.mask,
             wsp_ggml_type_name(c.kv_type), c.max_bias, c.softcap, (int) c.layout, c.n_threads);
    return buf;
}

// host copies (logical order) of the inputs, as the kernel reads them
struct FaData {
    std::vector<float> q, k, v, mask;
    int64_t            n_q_pad;
};

FaData make_data(const FaCase & c, uint32_t seed) {
    FaData d;
    d.n_q_pad = (c.n_q + WSP_GGML_KQ_MASK_PAD - 1) / WSP_GGML_KQ_MASK_PAD * WSP_GGML_KQ_MASK_PAD;
    d.q       = random_values((size_t) (c.D * c.n_q * c.n_head * c.ne3), seed, -1.0f, 1.0f);
    d.k       = round_trip(c.kv_type, random_values((size_t) (c.D * c.n_kv * c.n_head_kv * c.ne3k), seed + 1));
    d.v       = round_trip(c.kv_type, random_values((size_t) (c.Dv * c.n_kv * c.n_head_kv * c.ne3k), seed + 2));
    if (c.mask == MaskKind::none) {
        return d;
    }
    const int64_t      rows = d.n_q_pad * c.mask_ne2 * c.mask_ne3;
    std::vector<float> u    = random_values((size_t) (c.n_kv * rows), seed + 3, 0.0f, 1.0f);
    d.mask.resize(u.size());
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = r % d.n_q_pad; // query index of this mask row
        for (int64_t j = 0; j < c.n_kv; ++j) {
            const float x = u[(size_t) (r * c.n_kv + j)];
            float       m = 0.0f;
            if (c.mask == MaskKind::random) {
                // a quarter of the keys masked, query 1 fully masked, small finite biases elsewhere
                m = (x < 0.25f || i == 1) ? -inf : -2.0f * x;
            } else {
                // causal, with keys 64..191 masked for everybody: whole key blocks to skip
                m = (j > i + c.n_kv - c.n_q || (j >= 64 && j < 192)) ? -inf : 0.0f;
            }
            d.mask[(size_t) (r * c.n_kv + j)] = m;
        }
    }
    d.mask = round_trip(c.mask_type, d.mask);
    return d;
}

double alibi_slope_ref(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) {
        return 1.0;
    }
    const int64_t n_log2 = (int64_t) 1 << (int64_t) std::floor(std::log2((double) n_head));
    const double  m0     = std::pow(2.0, -(double) max_bias / (double) n_log2);
    const double  m1     = std::pow(2.0, -((double) max_bias / 2.0) / (double) n_log2);
    return h < n_log2 ? std::pow(m0, (double) (h + 1)) : std::pow(m1, (double) (2 * (h - n_log2) + 1));
}

// out[Dv, n_head, n_q, ne3]
std::vector<double> reference(const FaCase & c, const FaData & d, float scale) {
    std::vector<double> out((size_t) (c.Dv * c.n_head * c.n_q * c.ne3), 0.0);
    std::vector<double> s((size_t) c.n_kv);
    for (int64_t b = 0; b < c.ne3; ++b) {
        for (int64_t h = 0; h < c.n_head; ++h) {
            const int64_t hk = h / (c.n_head / c.n_head_kv), bk = b / (c.ne3 / c.ne3k);
            const double  slope = alibi_slope_ref(c.max_bias, h, c.n_head);
            for (int64_t i = 0; i < c.n_q; ++i) {
                const float * qr = &d.q[(size_t) (((b * c.n_head + h) * c.n_q + i) * c.D)];
                double        mx = -std::numeric_limits<double>::infinity();
                for (int64_t j = 0; j < c.n_kv; ++j) {
                    const float * kr  = &d.k[(size_t) (((bk * c.n_head_kv + hk) * c.n_kv + j) * c.D)];
                    double        dot = 0.0;
                    for (int64_t e = 0; e < c.D; ++e) {
                        dot += (double) qr[e] * kr[e];
                    }
                    double x = scale * dot;
                    if (c.softcap != 0.0f) {
                        x = c.softcap * std::tanh(x / c.softcap);
                    }
                    if (c.mask != MaskKind::none) {
                        const int64_t mr = ((b % c.mask_ne3) * c.mask_ne2 + h % c.mask_ne2) * d.n_q_pad + i;
                        x += slope * d.mask[(size_t) (mr * c.n_kv + j)];
                    }
                    s[(size_t) j] = x;
                    mx            = std::max(mx, x);
                }
                if (mx == -std::numeric_limits<double>::infinity()) {
                    continue; // fully masked: zeros
                }
                double * o   = &out[(size_t) (((b * c.n_q + i) * c.n_head + h) * c.Dv)];
                double   sum = 0.0;
                for (int64_t j = 0; j < c.n_kv; ++j) {
                    const double p = std::exp(s[(size_t) j] - mx);
                    sum += p;
                    const float * vr = &d.v[(size_t) (((bk * c.n_head_kv + hk) * c.n_kv + j) * c.Dv)];
                    for (int64_t e = 0; e < c.Dv; ++e) {
                        o[e] += p * vr[e];
                    }
                }
                for (int64_t e = 0; e < c.Dv; ++e) {
                    o[e] /= sum;
                }
            }
        }
    }
    return out;
}

// a [ne0, ne1, ne2, ne3] input in the requested layout (a view over a differently ordered tensor)
wsp_ggml_tensor * make_input(Graph & g, wsp_ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                             QkvLayout layout) {
    switch (layout) {
        case QkvLayout::permuted: return wsp_ggml_permute(g.ctx(), g.input(type, { ne0, ne2, ne1, ne3 }), 0, 2, 1, 3);
        case QkvLayout::strided_d: return wsp_ggml_permute(g.ctx(), g.input(type, { ne1, ne0, ne2, ne3 }), 1, 0, 2, 3);
        default: return g.input(type, { ne0, ne1, ne2, ne3 });
    }
}

struct FaGraph {
    wsp_ggml_tensor *q, *k, *v, *mask = nullptr;
};

FaGraph build_inputs(Graph & g, const FaCase & c, const FaData & d) {
    FaGraph t;
    t.q = make_input(g, WSP_GGML_TYPE_F32, c.D, c.n_q, c.n_head, c.ne3, c.layout);
    t.k = make_input(g, c.kv_type, c.D, c.n_kv, c.n_head_kv, c.ne3k, c.layout);
    t.v = make_input(g, c.kv_type, c.Dv, c.n_kv, c.n_head_kv, c.ne3k, c.layout);
    if (c.mask != MaskKind::none) {
        t.mask = g.input(c.mask_type, { c.n_kv, d.n_q_pad, c.mask_ne2, c.mask_ne3 });
    }
    return t;
}

void set_inputs(const FaGraph & t, const FaData & d) {
    set_values(t.q, d.q);
    set_values(t.k, d.k);
    set_values(t.v, d.v);
    if (t.mask != nullptr) {
        set_values(t.mask, d.mask);
    }
}

void check_case(const FaCase & c, uint32_t seed = 7) {
    SCOPED_TRACE(describe(c));
    const float  scale = 1.0f / std::sqrt((float) c.D);
    const FaData d     = make_data(c, seed);
    Graph        g;
    FaGraph      t   = build_inputs(g, c, d);
    auto *       out = wsp_ggml_flash_attn_ext(g.ctx(), t.q, t.k, t.v, t.mask, scale, c.max_bias, c.softcap);
    g.build(out);
    set_inputs(t, d);
    ASSERT_EQ(g.run(c.n_threads), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(out->ne[0], c.Dv);
    ASSERT_EQ(out->ne[1], c.n_head);
    ASSERT_EQ(out->ne[2], c.n_q);

    const std::vector<float>  got = get_values(out);
    const std::vector<double> ref = reference(c, d, scale);
    // F32 accumulation of rounded inputs: relative error ~1e-6 at most, NMSE ~1e-12; the bound
    // leaves two orders of margin and still catches any misplaced key, head or scale
    EXPECT_LT(nmse(got, ref), 1e-10);
    EXPECT_LT(max_abs_diff(got, ref), 2e-5);
    for (size_t i = 0; i < got.size(); ++i) {
        if (ref[i] == 0.0 && got[i] != 0.0f) {
            ADD_FAILURE() << "element " << i << " should be 0 (fully masked query), got " << got[i];
            break;
        }
    }
}

TEST(FlashAttn, SweepShapes) {
    for (int64_t D : { 64, 80, 1, 128 }) {
        for (int64_t n_q : { 1, 3, 17, 64 }) {
            for (int64_t n_kv : { 1, 7, 33, 256, 300 }) {
                FaCase c{ D, D, n_q, n_kv };
                c.mask = n_kv > 1 ? MaskKind::random : MaskKind::none;
                check_case(c, (uint32_t) (D * 1000 + n_q * 10 + n_kv));
            }
        }
    }
}

TEST(FlashAttn, NoMaskGqaThreads) {
    for (int nth : { 1, 2 }) {
        FaCase c{ 64, 64, 70, 130 };
        c.mask      = MaskKind::none;
        c.n_head    = 8;
        c.n_head_kv = 2;
        c.ne3       = 2;
        c.ne3k      = 2;
        c.n_threads = nth;
        check_case(c);
    }
}

TEST(FlashAttn, MaskVariants) {
    FaCase base{ 64, 64, 17, 300 };
    base.n_head = 8;
    for (int64_t ne2 : { 1, 2, 8 }) {
        FaCase c   = base;
        c.mask_ne2 = ne2;
        check_case(c);
    }
    FaCase f32    = base;
    f32.mask_type = WSP_GGML_TYPE_F32;
    f32.mask_ne3  = 2;
    check_case(f32);
    FaCase causal = base;
    causal.n_q    = 64;
    causal.mask   = MaskKind::causal_blocks;
    check_case(causal);
}

TEST(FlashAttn, AlibiAndSoftcap) {
    for (int64_t n_head : { 8, 6 }) { // 6: heads beyond n_head_log2 take the m1 slopes
        FaCase c{ 64, 64, 5, 100 };
        c.n_head    = n_head;
        c.n_head_kv = 2;
        c.mask_ne2  = n_head;
        c.max_bias  = 8.0f;
        check_case(c);
    }
    FaCase cap{ 80, 80, 17, 256 };
    cap.softcap = 1.5f; // small cap: most scores land on tanh's curved part
    check_case(cap);
    cap.max_bias = 4.0f;
    cap.softcap  = 30.0f;
    check_case(cap);
}

TEST(FlashAttn, KvTypesAndDv) {
    for (wsp_ggml_type t : float_types()) {
        FaCase c{ 64, 64, 9, 77 };
        c.kv_type = t;
        check_case(c);
    }
    // value size differs from key size; sizes that end in part of a vector, for both paths
    for (wsp_ggml_type t : float_types()) {
        for (int64_t n_q : { 3, 17 }) {
            FaCase dv{ 72, 40, n_q, 70 };
            dv.kv_type = t;
            check_case(dv);
        }
    }
}

// A quantized K/V cache (Note [quantized K/V], src/cpu/flash_attn.cpp) at every head size whisper and
// the op suites use, D / Dv = 64 ... 256 and 576 / 512, one query (a decode step) and 9 (the tiles):
// the result is the dequantized cache's attention, to F32 rounding as for the float types
TEST(FlashAttn, QuantizedKv) {
    for (wsp_ggml_type t :
         { WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1 }) {
        for (std::pair<int64_t, int64_t> d :
             { std::pair<int64_t, int64_t>{ 64, 64 }, { 128, 128 }, { 192, 192 }, { 256, 256 }, { 576, 512 } }) {
            for (int64_t n_q : { 1, 9 }) {
                FaCase c{ d.first, d.second, n_q, 77 };
                c.kv_type = t;
                c.ne3     = 1;
                check_case(c);
            }
        }
    }
    // a permuted view keeps each row's blocks contiguous
    FaCase p{ 64, 64, 5, 40 };
    p.kv_type = WSP_GGML_TYPE_Q4_1;
    p.layout  = QkvLayout::permuted;
    check_case(p);
}

// permuted views keep rows contiguous along D (both paths read them in place); strided_d views
// do not, so the few-query path must hand them to the block path
TEST(FlashAttn, Layouts) {
    for (QkvLayout l : { QkvLayout::permuted, QkvLayout::strided_d }) {
        for (wsp_ggml_type t : { WSP_GGML_TYPE_F16, WSP_GGML_TYPE_F32 }) {
            for (int64_t n_q : { 3, 17 }) {
                FaCase c{ 80, 80, n_q, 100 };
                c.layout  = l;
                c.kv_type = t;
                check_case(c);
            }
        }
    }
}

// the fused op and softmax(k^T q * scale + mask) . v built from mul_mat and soft_max_ext agree
TEST(FlashAttn, MatchesUnfusedGraph) {
    for (float softcap : { 0.0f, 20.0f }) {
        FaCase c{ 64, 64, 33, 200 };
        c.n_head   = 6;
        c.mask_ne2 = 6;
        c.max_bias = 2.0f;
        c.softcap  = softcap;
        SCOPED_TRACE(describe(c));
        const float  scale = 0.125f;
        const FaData d     = make_data(c, 11);
        Graph        g;
        FaGraph      t  = build_inputs(g, c, d);
        auto *       fa = wsp_ggml_flash_attn_ext(g.ctx(), t.q, t.k, t.v, t.mask, scale, c.max_bias, c.softcap);

        wsp_ggml_context * ctx = g.ctx();
        auto *             kq  = wsp_ggml_mul_mat(ctx, t.k, t.q); // [n_kv, n_q, n_head, ne3]
        float              s   = scale;
        if (softcap != 0.0f) {
            kq = wsp_ggml_scale(ctx, wsp_ggml_tanh(ctx, wsp_ggml_scale(ctx, kq, scale / softcap)), softcap);
            s  = 1.0f;
        }
        kq        = wsp_ggml_soft_max_ext(ctx, kq, t.mask, s, c.max_bias);
        auto * vt = wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, t.v));         // [n_kv, Dv, n_head_kv, ne3]
        auto * o  = wsp_ggml_mul_mat(ctx, vt, kq);                            // [Dv, n_q, n_head, ne3]
        auto * uf = wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, o, 0, 2, 1, 3)); // [Dv, n_head, n_q, ne3]
        g.build(fa, { uf });
        set_inputs(t, d);
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        const std::vector<float> a = get_values(fa), b = get_values(uf);
        ASSERT_EQ(a.size(), b.size());
        EXPECT_LT(nmse(a, b), 1e-10);
        EXPECT_LT(nmse(a, reference(c, d, scale)), 1e-10);
    }
}

} // namespace
} // namespace wsp::test
