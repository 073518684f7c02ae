// Shared test helpers (see test_util.h).

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace wsp::test {

std::vector<float> random_values(size_t n, uint32_t seed, float lo, float hi) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float>                    v(n);
    for (float & x : v) {
        x = dist(rng);
    }
    return v;
}

double nmse(const std::vector<float> & out, const std::vector<double> & ref) {
    EXPECT_EQ(out.size(), ref.size());
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < std::min(out.size(), ref.size()); ++i) {
        const double d = (double) out[i] - ref[i];
        err += d * d;
        norm += ref[i] * ref[i];
    }
    if (norm == 0.0) {
        return err;
    }
    return err / norm;
}

double nmse(const std::vector<float> & out, const std::vector<float> & ref) {
    return nmse(out, std::vector<double>(ref.begin(), ref.end()));
}

double max_abs_diff(const std::vector<float> & out, const std::vector<double> & ref) {
    double m = 0.0;
    for (size_t i = 0; i < std::min(out.size(), ref.size()); ++i) {
        m = std::max(m, std::fabs((double) out[i] - ref[i]));
    }
    return m;
}

std::vector<float> round_trip(wsp_ggml_type type, const std::vector<float> & values) {
    if (type == WSP_GGML_TYPE_F32) {
        return values;
    }
    const auto *  tr = wsp_ggml_get_type_traits(type);
    const int64_t bs = tr->blck_size;
    EXPECT_EQ(values.size() % (size_t) bs, 0u) << "round_trip: length not a multiple of the block size";
    std::vector<uint8_t> buf(wsp_ggml_row_size(type, (int64_t) values.size()));
    std::vector<float>   out(values.size());
    tr->from_float_ref(values.data(), buf.data(), (int64_t) values.size());
    tr->to_float(buf.data(), out.data(), (int64_t) values.size());
    return out;
}

namespace {

// visit every row of t in logical order: fn(row_index, pointer to the row's first element)
void for_rows(const wsp_ggml_tensor * t, const std::function<void(int64_t, char *)> & fn) {
    int64_t r = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                fn(r++, static_cast<char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
            }
        }
    }
}

} // namespace

void set_values(wsp_ggml_tensor * t, const std::vector<float> & values) {
    ASSERT_EQ((int64_t) values.size(), wsp_ggml_nelements(t)) << shape_str(t);
    ASSERT_NE(t->data, nullptr);
    const int64_t ne0 = t->ne[0];
    const auto *  tr  = wsp_ggml_get_type_traits(t->type);
    for_rows(t, [&](int64_t r, char * row) {
        const float * src = values.data() + r * ne0;
        if (wsp_ggml_is_quantized(t->type)) {
            tr->from_float_ref(src, row, ne0);
            return;
        }
        for (int64_t i = 0; i < ne0; ++i) {
            char * p = row + i * t->nb[0];
            switch (t->type) {
                case WSP_GGML_TYPE_F32: std::memcpy(p, &src[i], 4); break;
                case WSP_GGML_TYPE_F16: {
                    const wsp_ggml_fp16_t h = wsp_ggml_fp32_to_fp16(src[i]);
                    std::memcpy(p, &h, 2);
                    break;
                }
                case WSP_GGML_TYPE_BF16: {
                    const wsp_ggml_bf16_t b = wsp_ggml_fp32_to_bf16(src[i]);
                    std::memcpy(p, &b, 2);
                    break;
                }
                case WSP_GGML_TYPE_I32: {
                    const int32_t v = (int32_t) src[i];
                    std::memcpy(p, &v, 4);
                    break;
                }
                default: FAIL() << "set_values: unsupported type " << wsp_ggml_type_name(t->type);
            }
        }
    });
}

std::vector<float> get_values(const wsp_ggml_tensor * t) {
    std::vector<float> out((size_t) wsp_ggml_nelements(t));
    const int64_t      ne0 = t->ne[0];
    const auto *       tr  = wsp_ggml_get_type_traits(t->type);
    for_rows(t, [&](int64_t r, char * row) {
        float * dst = out.data() + r * ne0;
        if (wsp_ggml_is_quantized(t->type)) {
            tr->to_float(row, dst, ne0);
            return;
        }
        for (int64_t i = 0; i < ne0; ++i) {
            const char * p = row + i * t->nb[0];
            switch (t->type) {
                case WSP_GGML_TYPE_F32: std::memcpy(&dst[i], p, 4); break;
                case WSP_GGML_TYPE_F16: {
                    wsp_ggml_fp16_t h;
                    std::memcpy(&h, p, 2);
                    dst[i] = wsp_ggml_fp16_to_fp32(h);
                    break;
                }
                case WSP_GGML_TYPE_BF16: {
                    wsp_ggml_bf16_t b;
                    std::memcpy(&b, p, 2);
                    dst[i] = wsp_ggml_bf16_to_fp32(b);
                    break;
                }
                case WSP_GGML_TYPE_I32: {
                    int32_t v;
                    std::memcpy(&v, p, 4);
                    dst[i] = (float) v;
                    break;
                }
                default: ADD_FAILURE() << "get_values: unsupported type " << wsp_ggml_type_name(t->type); return;
            }
        }
    });
    return out;
}

void set_i32(wsp_ggml_tensor * t, const std::vector<int32_t> & values) {
    ASSERT_EQ(t->type, WSP_GGML_TYPE_I32);
    ASSERT_EQ((int64_t) values.size(), wsp_ggml_nelements(t));
    const int64_t ne0 = t->ne[0];
    for_rows(t, [&](int64_t r, char * row) {
        for (int64_t i = 0; i < ne0; ++i) {
            std::memcpy(row + i * t->nb[0], &values[(size_t) (r * ne0 + i)], 4);
        }
    });
}

Graph::Graph(size_t max_tensors) {
    wsp_ggml_init_params params = { max_tensors * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr,
                                    true };
    ctx_                        = wsp_ggml_init(params);
    backend_                    = wsp_ggml_backend_cpu_init();
}

Graph::~Graph() {
    wsp_ggml_gallocr_free(galloc_);
    wsp_ggml_backend_free(backend_);
    wsp_ggml_free(ctx_);
}

wsp_ggml_tensor * Graph::input(wsp_ggml_type type, std::vector<int64_t> ne, const char * name) {
    while (ne.size() < 4) {
        ne.push_back(1);
    }
    wsp_ggml_tensor * t = wsp_ggml_new_tensor_4d(ctx_, type, ne[0], ne[1], ne[2], ne[3]);
    wsp_ggml_set_input(t);
    if (name != nullptr) {
        wsp_ggml_set_name(t, name);
    }
    return t;
}

void Graph::build(wsp_ggml_tensor * out, std::vector<wsp_ggml_tensor *> extra_outputs) {
    graph_ = wsp_ggml_new_graph(ctx_);
    wsp_ggml_set_output(out);
    wsp_ggml_build_forward_expand(graph_, out);
    for (wsp_ggml_tensor * t : extra_outputs) {
        wsp_ggml_set_output(t);
        wsp_ggml_build_forward_expand(graph_, t);
    }
    galloc_ = wsp_ggml_gallocr_new(wsp_ggml_backend_get_default_buffer_type(backend_));
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc_, graph_));
}

wsp_ggml_status Graph::run(int n_threads) {
    wsp_ggml_backend_cpu_set_n_threads(backend_, n_threads);
    return wsp_ggml_backend_graph_compute(backend_, graph_);
}

wsp_ggml_status Graph::compute(wsp_ggml_tensor * out, int n_threads) {
    if (graph_ == nullptr) {
        build(out);
    }
    return run(n_threads);
}

size_t Graph::compute_buffer_size() const {
    return galloc_ ? wsp_ggml_gallocr_get_buffer_size(galloc_, 0) : 0;
}

double nmse_bound(wsp_ggml_type type) {
    switch (type) {
        case WSP_GGML_TYPE_F32: return 1e-10;
        case WSP_GGML_TYPE_F16: return 1e-6;
        case WSP_GGML_TYPE_BF16: return 1e-4;
        default: return 5e-3;
    }
}

std::string shape_str(const wsp_ggml_tensor * t) {
    char buf[160];
    snprintf(buf, sizeof(buf), "%s [%lld, %lld, %lld, %lld] nb [%zu, %zu, %zu, %zu]", wsp_ggml_type_name(t->type),
             (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], t->nb[0], t->nb[1],
             t->nb[2], t->nb[3]);
    return buf;
}

} // namespace wsp::test
