// CPY / CAST / CONT / DUP between F32, F16 and BF16 in every direction and layout, copies into
// strided views, quantizing copies (bytes equal to the reference quantizer) and dequantizing
// copies; GET_ROWS for float, quantized and I32 rows, including indices out of range.

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>

namespace wsp::test {
namespace {

bool is_float_type(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_F32 || t == WSP_GGML_TYPE_F16 || t == WSP_GGML_TYPE_BF16;
}

// the value a float becomes when stored in `type` (IEEE references, not the library)
double stored(wsp_ggml_type type, float v) {
    switch (type) {
        case WSP_GGML_TYPE_F16: return ieee_fp16_value(ieee_fp16_bits(v));
        case WSP_GGML_TYPE_BF16: {
            const uint32_t u = (uint32_t) ieee_bf16_bits(v) << 16;
            float          f;
            std::memcpy(&f, &u, 4);
            return f;
        }
        default: return v;
    }
}

std::vector<double> stored_all(wsp_ggml_type type, const std::vector<float> & v) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        out[i] = stored(type, v[i]);
    }
    return out;
}

struct TypePair {
    wsp_ggml_type src, dst;
};

std::vector<TypePair> float_pairs() {
    std::vector<TypePair> p;
    for (wsp_ggml_type s : float_types()) {
        for (wsp_ggml_type d : float_types()) {
            p.push_back({ s, d });
        }
    }
    return p;
}

std::string pair_name(const ::testing::TestParamInfo<TypePair> & info) {
    return std::string(wsp_ggml_type_name(info.param.src)) + "_to_" + wsp_ggml_type_name(info.param.dst);
}

class CopyTest : public ::testing::TestWithParam<TypePair> {};

TEST_P(CopyTest, CastAndCpyInEveryLayout) {
    const TypePair tp = GetParam();
    for (Layout layout : { Layout::Contiguous, Layout::Permuted, Layout::Strided }) {
        for (const std::vector<int64_t> & ne :
             { std::vector<int64_t>{ 1 }, std::vector<int64_t>{ 37, 5, 2 }, std::vector<int64_t>{ 300, 3 } }) {
            Graph             g;
            wsp_ggml_tensor * a    = make_operand(g, tp.src, ne, layout);
            wsp_ggml_tensor * cast = wsp_ggml_cast(g.ctx(), a, tp.dst);
            wsp_ggml_tensor * b    = g.input(tp.dst, ne);
            wsp_ggml_tensor * cpy  = wsp_ggml_cpy(g.ctx(), a, b);
            g.build(cast, { cpy });
            fill_inputs(g, 11, -3.0f, 3.0f);
            const std::vector<double> ref = stored_all(tp.dst, get_values(a));
            for (int n_threads : { 1, 2 }) {
                ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
                const std::string what =
                    shape_str(a) + " " + layout_name(layout) + " threads " + std::to_string(n_threads);
                all_close(get_values(cast), ref, 0.0, 0.0, "cast " + what);
                all_close(get_values(b), ref, 0.0, 0.0, "cpy " + what);
                EXPECT_EQ(cpy->data, b->data);
            }
        }
    }
}

TEST_P(CopyTest, CpyBetweenShapesWithTheSameElementCount) {
    const TypePair tp = GetParam();
    Graph          g;
    // rows of 12 into rows of 20: elements keep their flat (row-major) order
    wsp_ggml_tensor * a   = make_operand(g, tp.src, { 12, 5 }, Layout::Permuted);
    wsp_ggml_tensor * b   = g.input(tp.dst, { 20, 3 });
    wsp_ggml_tensor * out = wsp_ggml_cpy(g.ctx(), a, b);
    g.build(out);
    fill_inputs(g, 12);
    const std::vector<double> ref = stored_all(tp.dst, get_values(a));
    for (int n_threads : { 1, 2 }) {
        ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
        all_close(get_values(b), ref, 0.0, 0.0, "cpy [12, 5] -> [20, 3]");
    }
}

TEST_P(CopyTest, CpyIntoAStridedViewOfABiggerTensor) {
    const TypePair    tp = GetParam();
    Graph             g;
    wsp_ggml_tensor * a    = make_operand(g, tp.src, { 4, 6 }, Layout::Permuted);
    wsp_ggml_tensor * big  = g.input(tp.dst, { 10, 6 });
    const size_t      elem = wsp_ggml_type_size(tp.dst);
    wsp_ggml_tensor * view = wsp_ggml_view_2d(g.ctx(), big, 4, 6, big->nb[1], 3 * elem); // columns 3..6
    wsp_ggml_tensor * out  = wsp_ggml_cpy(g.ctx(), a, view);
    g.build(out);
    fill_inputs(g, 13);
    const std::vector<float> va     = get_values(a);
    const std::vector<float> before = get_values(big);
    std::vector<double>      ref(before.begin(), before.end());
    for (int r = 0; r < 6; ++r) {
        for (int c = 0; c < 4; ++c) {
            ref[(size_t) (r * 10 + 3 + c)] = stored(tp.dst, va[(size_t) (r * 4 + c)]);
        }
    }
    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
    all_close(get_values(big), ref, 0.0, 0.0, "cpy into columns 3..6 of [10, 6]");
}

class ContTest : public ::testing::TestWithParam<wsp_ggml_type> {};

// cont and dup keep the type
TEST_P(ContTest, ContAndDupOfPermutedTensors) {
    const TypePair    tp = { GetParam(), GetParam() };
    Graph             g;
    wsp_ggml_tensor * base = g.input(tp.src, { 7, 5, 3 });
    wsp_ggml_tensor * p    = wsp_ggml_permute(g.ctx(), base, 2, 0, 1, 3); // [5, 3, 7]
    wsp_ggml_tensor * c    = wsp_ggml_cont(g.ctx(), p);
    wsp_ggml_tensor * c2   = wsp_ggml_cont_2d(g.ctx(), wsp_ggml_transpose(g.ctx(), base), 5 * 7, 3);
    wsp_ggml_tensor * d    = wsp_ggml_dup(g.ctx(), p);
    g.build(c, { c2, d });
    fill_inputs(g, 14);
    const std::vector<float> vp = get_values(p);
    const std::vector<float> vt = [&] {
        std::vector<float> vb = get_values(base), t(vb.size());
        for (int i2 = 0; i2 < 3; ++i2) { // transpose of [7, 5, 3]: [5, 7, 3]
            for (int i1 = 0; i1 < 7; ++i1) {
                for (int i0 = 0; i0 < 5; ++i0) {
                    t[(size_t) ((i2 * 7 + i1) * 5 + i0)] = vb[(size_t) ((i2 * 5 + i0) * 7 + i1)];
                }
            }
        }
        return t;
    }();
    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
    EXPECT_TRUE(wsp_ggml_is_contiguous(c));
    all_close(get_values(c), stored_all(tp.dst, vp), 0.0, 0.0, "cont");
    all_close(get_values(d), stored_all(tp.dst, vp), 0.0, 0.0, "dup");
    all_close(get_values(c2), stored_all(tp.dst, vt), 0.0, 0.0, "cont_2d of a transpose");
}

TEST_P(CopyTest, CpyIntoATransposedDestination) {
    const TypePair    tp = GetParam();
    Graph             g;
    wsp_ggml_tensor * a   = make_operand(g, tp.src, { 9, 5, 2 }, Layout::Strided);
    wsp_ggml_tensor * b   = g.input(tp.dst, { 5, 9, 2 });
    wsp_ggml_tensor * bt  = wsp_ggml_transpose(g.ctx(), b); // [9, 5, 2], rows not packed
    wsp_ggml_tensor * out = wsp_ggml_cpy(g.ctx(), a, bt);
    g.build(out);
    fill_inputs(g, 15);
    const std::vector<float> va = get_values(a);
    std::vector<double>      ref(va.size());
    for (int i2 = 0; i2 < 2; ++i2) { // b[j, i] = a[i, j]
        for (int i1 = 0; i1 < 9; ++i1) {
            for (int i0 = 0; i0 < 5; ++i0) {
                ref[(size_t) ((i2 * 9 + i1) * 5 + i0)] = stored(tp.dst, va[(size_t) ((i2 * 5 + i0) * 9 + i1)]);
            }
        }
    }
    for (int n_threads : { 1, 2 }) {
        ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
        all_close(get_values(b), ref, 0.0, 0.0, "cpy into a transpose");
    }
}

INSTANTIATE_TEST_SUITE_P(Types, CopyTest, ::testing::ValuesIn(float_pairs()), pair_name);
INSTANTIATE_TEST_SUITE_P(Types, ContTest, ::testing::ValuesIn(float_types()),
                         [](const auto & info) { return std::string(wsp_ggml_type_name(info.param)); });

std::vector<uint8_t> tensor_bytes(const wsp_ggml_tensor * t) {
    const uint8_t * p = static_cast<const uint8_t *>(t->data);
    return std::vector<uint8_t>(p, p + wsp_ggml_nbytes(t));
}

// the reference quantizer applied row by row to logical values
std::vector<uint8_t> quantize_rows(wsp_ggml_type type, const std::vector<float> & v, int64_t ne0) {
    const size_t         rs = wsp_ggml_row_size(type, ne0);
    std::vector<uint8_t> out(rs * (v.size() / (size_t) ne0));
    for (size_t r = 0; r < v.size() / (size_t) ne0; ++r) {
        wsp_ggml_get_type_traits(type)->from_float_ref(v.data() + r * (size_t) ne0, out.data() + r * rs, ne0);
    }
    return out;
}

class QuantCopyTest : public ::testing::TestWithParam<wsp_ggml_type> {};

TEST_P(QuantCopyTest, QuantizingCopiesMatchTheReferenceQuantizer) {
    const wsp_ggml_type qt = GetParam();
    for (wsp_ggml_type src : float_types()) {
        for (Layout layout : { Layout::Contiguous, Layout::Permuted }) {
            Graph             g;
            wsp_ggml_tensor * a    = make_operand(g, src, { 96, 7, 2 }, layout);
            wsp_ggml_tensor * cast = wsp_ggml_cast(g.ctx(), a, qt);
            wsp_ggml_tensor * b    = g.input(qt, { 96, 7, 2 });
            wsp_ggml_tensor * cpy  = wsp_ggml_cpy(g.ctx(), a, b);
            g.build(cast, { cpy });
            fill_inputs(g, 21, -4.0f, 4.0f);
            // the kernel reads the source as f32 (exact for f16 and bf16) and quantizes each row
            const std::vector<uint8_t> ref = quantize_rows(qt, get_values(a), 96);
            for (int n_threads : { 1, 2 }) {
                ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
                EXPECT_EQ(tensor_bytes(cast), ref) << wsp_ggml_type_name(src) << " " << layout_name(layout);
                EXPECT_EQ(tensor_bytes(b), ref) << wsp_ggml_type_name(src) << " " << layout_name(layout);
            }
        }
    }
}

TEST_P(QuantCopyTest, DequantizingCopiesGiveTheBlockValues) {
    const wsp_ggml_type qt = GetParam();
    Graph               g;
    wsp_ggml_tensor *   q    = g.input(qt, { 64, 9 });
    wsp_ggml_tensor *   f32  = wsp_ggml_cast(g.ctx(), q, WSP_GGML_TYPE_F32);
    wsp_ggml_tensor *   f16  = g.input(WSP_GGML_TYPE_F16, { 64, 9 });
    wsp_ggml_tensor *   cpy  = wsp_ggml_cpy(g.ctx(), q, f16);
    wsp_ggml_tensor *   q8   = wsp_ggml_cast(g.ctx(), q, WSP_GGML_TYPE_Q8_0);    // requantize
    wsp_ggml_tensor *   same = wsp_ggml_cpy(g.ctx(), q, g.input(qt, { 64, 9 })); // bytes as they are
    wsp_ggml_tensor *   bt   = g.input(WSP_GGML_TYPE_BF16, { 9, 64 });
    wsp_ggml_tensor *   tcpy = wsp_ggml_cpy(g.ctx(), q, wsp_ggml_transpose(g.ctx(), bt));
    g.build(f32, { cpy, q8, same, tcpy });
    fill_inputs(g, 22, -2.0f, 2.0f);
    const std::vector<float> deq = get_values(q); // the block values, by the type's to_float
    for (int n_threads : { 1, 2 }) {
        ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
        all_close(get_values(f32), std::vector<double>(deq.begin(), deq.end()), 0.0, 0.0, "to f32");
        std::vector<double> transposed(deq.size());
        for (int r = 0; r < 9; ++r) {
            for (int c = 0; c < 64; ++c) {
                transposed[(size_t) (c * 9 + r)] = stored(WSP_GGML_TYPE_BF16, deq[(size_t) (r * 64 + c)]);
            }
        }
        all_close(get_values(bt), transposed, 0.0, 0.0, "to a transposed bf16 destination");
        all_close(get_values(f16), stored_all(WSP_GGML_TYPE_F16, deq), 0.0, 0.0, "to f16");
        EXPECT_EQ(tensor_bytes(q8), quantize_rows(WSP_GGML_TYPE_Q8_0, deq, 64));
        EXPECT_EQ(tensor_bytes(same), tensor_bytes(q));
    }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantCopyTest, ::testing::ValuesIn(quant_types()),
                         [](const auto & info) { return std::string(wsp_ggml_type_name(info.param)); });

// rows of a (logical values) gathered by index; zero rows for indices out of range
std::vector<double> gather(const std::vector<float> & va, const wsp_ggml_tensor * a, const std::vector<int32_t> & idx,
                           int64_t n_idx) {
    const int64_t       ne0 = a->ne[0], ne1 = a->ne[1];
    std::vector<double> out;
    for (size_t k = 0; k < idx.size(); ++k) {
        const int64_t i2 = (int64_t) k / n_idx; // b [n_idx, ne2] picks rows of slice i2
        for (int64_t i0 = 0; i0 < ne0; ++i0) {
            const bool in = idx[k] >= 0 && idx[k] < ne1;
            out.push_back(in ? va[(size_t) ((i2 * ne1 + idx[k]) * ne0 + i0)] : 0.0);
        }
    }
    return out;
}

class GetRowsTest : public ::testing::TestWithParam<wsp_ggml_type> {};

TEST_P(GetRowsTest, GathersRowsOf2dAnd3dTensors) {
    const wsp_ggml_type type = GetParam();
    const int64_t       ne0  = wsp_ggml_is_quantized(type) ? 96 : 37;
    std::mt19937        rng(5);
    for (int64_t ne2 : { 1, 3 }) {
        Graph g;
        // float rows may sit inside longer rows; quantized rows are whole blocks, so packed
        const Layout      la  = is_float_type(type) ? Layout::Strided : Layout::Contiguous;
        wsp_ggml_tensor * a   = make_operand(g, type, { ne0, 11, ne2 }, la);
        wsp_ggml_tensor * b   = make_operand(g, WSP_GGML_TYPE_I32, { 6, ne2 }, Layout::Strided);
        wsp_ggml_tensor * out = wsp_ggml_get_rows(g.ctx(), a, b);
        g.build(out);
        if (type == WSP_GGML_TYPE_I32) {
            std::vector<int32_t> iv((size_t) wsp_ggml_nelements(a));
            for (size_t i = 0; i < iv.size(); ++i) {
                iv[i] = (int32_t) (i * 7919 % 100003) - 50000;
            }
            set_i32(a, iv);
        } else {
            fill_inputs(g, 31, -2.0f, 2.0f);
        }
        std::vector<int32_t> idx((size_t) (6 * ne2));
        for (int32_t & i : idx) {
            i = (int32_t) (rng() % 11);
        }
        idx[1] = idx[0]; // repeated indices are fine
        set_i32(b, idx);
        const std::vector<double> ref = gather(get_values(a), a, idx, 6);
        for (int n_threads : { 1, 2 }) {
            ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
            EXPECT_EQ(out->type, type == WSP_GGML_TYPE_I32 ? WSP_GGML_TYPE_I32 : WSP_GGML_TYPE_F32);
            all_close(get_values(out), ref, 0.0, 0.0, shape_str(a) + " threads " + std::to_string(n_threads));
        }
    }
}

TEST_P(GetRowsTest, IndicesOutOfRangeGiveZeroRowsAndAnError) {
    const wsp_ggml_type type = GetParam();
    const int64_t       ne0  = wsp_ggml_is_quantized(type) ? 32 : 5;
    Graph               g;
    wsp_ggml_tensor *   a   = g.input(type, { ne0, 4 });
    wsp_ggml_tensor *   b   = g.input(WSP_GGML_TYPE_I32, { 5 });
    wsp_ggml_tensor *   out = wsp_ggml_get_rows(g.ctx(), a, b);
    g.build(out);
    set_values(a, random_values((size_t) ne0 * 4, 3, 1.0f, 2.0f));
    const std::vector<int32_t> idx = { 2, -1, 4, 3, 1000000 };
    set_i32(b, idx);
    for (int n_threads : { 1, 2 }) {
        LogCapture log;
        ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
        EXPECT_GE(log.count(WSP_GGML_LOG_LEVEL_ERROR), 1);
        EXPECT_TRUE(log.contains("outside")) << log.text();
        all_close(get_values(out), gather(get_values(a), a, idx, 5), 0.0, 0.0, "out-of-range rows");
    }
}

INSTANTIATE_TEST_SUITE_P(Types, GetRowsTest,
                         ::testing::Values(WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q4_0,
                                           WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1,
                                           WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_I32),
                         [](const auto & info) { return std::string(wsp_ggml_type_name(info.param)); });

} // namespace
} // namespace wsp::test
