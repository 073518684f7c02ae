// graph_copy and compare_graph_backend. A graph with leafs, ops with parameters, views of
// computed nodes and a transposed view is allocated and computed on the CPU, then copied to a
// sim backend and to another CPU backend: every node keeps its op, params, flags, name and
// layout; every value equals the source; views point into their copied sources; the copy
// computes the same result on its backend; freeing the copy returns its memory.
// compare_graph_backend shows each node's pair of results to a callback, in order.

#include "backend_util.h"
#include "test_util.h"

#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace wsp::test {
namespace {

// out = cont(transpose(cont(view(scale(a + b, 0.5)))))
struct SourceGraph {
    wsp_ggml_backend_ptr cpu{ wsp_ggml_backend_cpu_init() };
    TensorSet            s;
    wsp_ggml_tensor *    a;
    wsp_ggml_tensor *    b;
    wsp_ggml_tensor *    out;
    wsp_ggml_cgraph *    graph;

    SourceGraph() {
        wsp_ggml_context * ctx = s.ctx.get();
        a                      = s.f32({ 6, 4 }, "a");
        b                      = s.f32({ 6, 4 }, "b");
        wsp_ggml_set_input(a);
        wsp_ggml_set_input(b);
        wsp_ggml_tensor * c  = named(wsp_ggml_add(ctx, a, b), "c");
        wsp_ggml_tensor * sc = named(wsp_ggml_scale(ctx, c, 0.5f), "scaled");
        wsp_ggml_tensor * v  = named(wsp_ggml_view_2d(ctx, sc, 3, 4, sc->nb[1], 3 * sizeof(float)), "right_half");
        wsp_ggml_tensor * w  = named(wsp_ggml_cont(ctx, v), "right_half_cont");
        wsp_ggml_tensor * t  = named(wsp_ggml_transpose(ctx, w), "transposed");
        out                  = named(wsp_ggml_cont(ctx, t), "out");
        wsp_ggml_set_output(out);
        graph = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(graph, out);
        EXPECT_TRUE(s.alloc(wsp_ggml_backend_cpu_buffer_type()));
        upload(a, random_values(24, 1));
        upload(b, random_values(24, 2));
        EXPECT_EQ(wsp_ggml_backend_graph_compute(cpu.get(), graph), WSP_GGML_STATUS_SUCCESS);
    }

    static wsp_ggml_tensor * named(wsp_ggml_tensor * t, const char * name) { return wsp_ggml_set_name(t, name); }
};

std::vector<uint8_t> raw(const wsp_ggml_tensor * t) {
    std::vector<uint8_t> bytes(wsp_ggml_nbytes(t));
    wsp_ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
    return bytes;
}

// pairs each tensor of the source graph (nodes and everything they reach) with its copy,
// checking on the way that the two have the same metadata and the same source structure
void pair_up(wsp_ggml_tensor * src, wsp_ggml_tensor * dst, std::map<wsp_ggml_tensor *, wsp_ggml_tensor *> & pairs) {
    ASSERT_NE(dst, nullptr) << src->name;
    auto it = pairs.find(src);
    if (it != pairs.end()) {
        EXPECT_EQ(it->second, dst) << src->name << " was copied twice";
        return;
    }
    pairs[src] = dst;
    SCOPED_TRACE(src->name);
    EXPECT_STREQ(dst->name, src->name);
    EXPECT_EQ(dst->type, src->type);
    EXPECT_EQ(dst->op, src->op);
    EXPECT_EQ(std::memcmp(dst->op_params, src->op_params, sizeof(src->op_params)), 0);
    EXPECT_EQ(dst->flags, src->flags);
    for (int d = 0; d < WSP_GGML_MAX_DIMS; ++d) {
        EXPECT_EQ(dst->ne[d], src->ne[d]);
        EXPECT_EQ(dst->nb[d], src->nb[d]);
    }
    EXPECT_EQ(dst->view_offs, src->view_offs);
    EXPECT_EQ(dst->view_src == nullptr, src->view_src == nullptr);
    if (src->view_src != nullptr) {
        pair_up(src->view_src, dst->view_src, pairs);
    }
    for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
        EXPECT_EQ(dst->src[j] == nullptr, src->src[j] == nullptr) << "src " << j;
        if (src->src[j] != nullptr) {
            pair_up(src->src[j], dst->src[j], pairs);
        }
    }
}

class GraphCopy : public ::testing::TestWithParam<const char *> {
protected:
    wsp_ggml_backend_t target() {
        if (!target_) {
            const std::string name = GetParam();
            target_.reset(name == "CPU" ? wsp_ggml_backend_cpu_init()
                                        : wsp_ggml_backend_dev_init(sim_device(0), nullptr));
        }
        return target_.get();
    }

    wsp_ggml_backend_ptr target_;
};

TEST_P(GraphCopy, CopiesEveryNodeWithItsMetadataAndValues) {
    SourceGraph                        g;
    struct wsp_ggml_backend_graph_copy copy = wsp_ggml_backend_graph_copy(target(), g.graph);
    ASSERT_NE(copy.graph, nullptr);
    ASSERT_NE(copy.buffer, nullptr);
    EXPECT_NE(copy.ctx_allocated, nullptr);
    EXPECT_NE(copy.ctx_unallocated, nullptr);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_type(copy.buffer), wsp_ggml_backend_get_default_buffer_type(target()));

    const int n = wsp_ggml_graph_n_nodes(g.graph);
    ASSERT_EQ(wsp_ggml_graph_n_nodes(copy.graph), n);
    std::map<wsp_ggml_tensor *, wsp_ggml_tensor *> pairs;
    for (int i = 0; i < n; ++i) {
        pair_up(wsp_ggml_graph_node(g.graph, i), wsp_ggml_graph_node(copy.graph, i), pairs);
    }
    EXPECT_EQ(pairs.size(), 8u) << "six nodes and two leafs";
    for (const auto & [src, dst] : pairs) {
        SCOPED_TRACE(src->name);
        ASSERT_NE(dst->data, nullptr);
        EXPECT_NE(dst, src);
        if (dst->view_src != nullptr) {
            EXPECT_EQ(dst->data, static_cast<char *>(dst->view_src->data) + dst->view_offs);
            EXPECT_EQ(dst->buffer, dst->view_src->buffer);
        } else {
            EXPECT_EQ(dst->buffer, copy.buffer);
        }
        EXPECT_EQ(raw(dst), raw(src)) << "values differ";
    }
    wsp_ggml_backend_graph_copy_free(copy);
}

TEST_P(GraphCopy, TheCopyComputesTheSameResult) {
    SourceGraph                        g;
    const size_t                       foreign = wsp_ggml_backend_sim_foreign_accesses();
    struct wsp_ggml_backend_graph_copy copy    = wsp_ggml_backend_graph_copy(target(), g.graph);
    ASSERT_NE(copy.graph, nullptr);
    // erase every computed value of the copy, then compute it on its own backend
    for (int i = 0; i < wsp_ggml_graph_n_nodes(copy.graph); ++i) {
        wsp_ggml_tensor * node = wsp_ggml_graph_node(copy.graph, i);
        if (node->view_src == nullptr) {
            wsp_ggml_backend_tensor_memset(node, 0, 0, wsp_ggml_nbytes(node));
        }
    }
    wsp_ggml_tensor * out = wsp_ggml_graph_node(copy.graph, -1);
    ASSERT_STREQ(out->name, "out");
    EXPECT_EQ(download(out), std::vector<float>(12, 0.0f));
    EXPECT_EQ(wsp_ggml_backend_graph_compute(target(), copy.graph), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(download(out), download(g.out));
    EXPECT_EQ(wsp_ggml_backend_sim_foreign_accesses(), foreign) << "the copy must live in its backend's memory";

    // and the result is what the graph means: out[i][j] = (a + b)[j][3 + i] / 2
    const std::vector<float> a = download(g.a), b = download(g.b), got = download(out);
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) {
            EXPECT_FLOAT_EQ(got[(size_t) (i * 4 + j)],
                            0.5f * (a[(size_t) (j * 6 + 3 + i)] + b[(size_t) (j * 6 + 3 + i)]));
        }
    }
    wsp_ggml_backend_graph_copy_free(copy);
}

TEST_P(GraphCopy, FreeReturnsTheMemory) {
    SourceGraph                        g;
    wsp_ggml_backend_dev_t             dev    = wsp_ggml_backend_get_device(target());
    const bool                         is_sim = wsp_ggml_backend_is_sim(target());
    const size_t                       before = is_sim ? wsp_ggml_backend_sim_memory_used(dev) : 0;
    struct wsp_ggml_backend_graph_copy copy   = wsp_ggml_backend_graph_copy(target(), g.graph);
    ASSERT_NE(copy.buffer, nullptr);
    if (is_sim) {
        EXPECT_GE(wsp_ggml_backend_sim_memory_used(dev), before + wsp_ggml_backend_buffer_get_size(copy.buffer));
    }
    wsp_ggml_backend_graph_copy_free(copy);
    if (is_sim) {
        EXPECT_EQ(wsp_ggml_backend_sim_memory_used(dev), before);
    }
}

// a graph whose tensors have no memory cannot be copied: refused with a message, nothing allocated
TEST_P(GraphCopy, AnUnallocatedGraphIsRefused) {
    TensorSet         s;
    wsp_ggml_tensor * a = s.f32({ 6, 4 }, "a");
    wsp_ggml_tensor * b = wsp_ggml_scale(s.ctx.get(), a, 2.0f);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(s.ctx.get());
    wsp_ggml_build_forward_expand(g, b);
    LogCapture                         log;
    struct wsp_ggml_backend_graph_copy copy = wsp_ggml_backend_graph_copy(target(), g);
    EXPECT_EQ(copy.graph, nullptr);
    EXPECT_EQ(copy.buffer, nullptr);
    EXPECT_TRUE(log.contains("has no memory")) << log.text();
    EXPECT_FALSE(wsp_ggml_backend_compare_graph_backend(target(), target(), g, nullptr, nullptr));
}

INSTANTIATE_TEST_SUITE_P(Targets, GraphCopy, ::testing::Values("SIM0", "CPU"),
                         [](const auto & info) { return std::string(info.param); });

//
// compare_graph_backend
//

struct Seen {
    wsp_ggml_cgraph *  graph;
    int                stop_at = -1;
    std::vector<int>   indices;
    std::vector<float> max_diff;
};

bool on_node(int i, wsp_ggml_tensor * t1, wsp_ggml_tensor * t2, void * user_data) {
    auto * seen = static_cast<Seen *>(user_data);
    seen->indices.push_back(i);
    EXPECT_EQ(t1, wsp_ggml_graph_node(seen->graph, i)) << "t1 is the caller's node";
    EXPECT_NE(t1, t2);
    EXPECT_STREQ(t1->name, t2->name);
    const std::vector<float> v1 = download(t1), v2 = download(t2);
    EXPECT_EQ(v1.size(), v2.size());
    float diff = 0.0f;
    for (size_t k = 0; k < std::min(v1.size(), v2.size()); ++k) {
        diff = std::max(diff, std::fabs(v1[k] - v2[k]));
    }
    seen->max_diff.push_back(diff);
    return i != seen->stop_at;
}

TEST(CompareGraphBackend, CallsBackForEveryNodeInOrder) {
    SourceGraph          g;
    wsp_ggml_backend_ptr sim(wsp_ggml_backend_dev_init(sim_device(1), nullptr));
    Seen                 seen{ g.graph };
    EXPECT_TRUE(wsp_ggml_backend_compare_graph_backend(g.cpu.get(), sim.get(), g.graph, on_node, &seen));
    const int        n = wsp_ggml_graph_n_nodes(g.graph);
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) {
        all[(size_t) i] = i;
    }
    EXPECT_EQ(seen.indices, all);
    for (size_t i = 0; i < seen.max_diff.size(); ++i) {
        EXPECT_EQ(seen.max_diff[i], 0.0f) << "node " << i << ": the same kernels give the same values";
    }
}

TEST(CompareGraphBackend, ReturningFalseStopsEarly) {
    SourceGraph          g;
    wsp_ggml_backend_ptr sim(wsp_ggml_backend_dev_init(sim_device(0), nullptr));
    Seen                 seen{ g.graph, 2 };
    EXPECT_TRUE(wsp_ggml_backend_compare_graph_backend(g.cpu.get(), sim.get(), g.graph, on_node, &seen));
    EXPECT_EQ(seen.indices, std::vector<int>({ 0, 1, 2 }));
}

TEST(CompareGraphBackend, AFailingNodeEndsTheComparison) {
    SourceGraph          g;
    wsp_ggml_backend_ptr sim(wsp_ggml_backend_dev_init(sim_device(0), nullptr));
    Seen                 seen{ g.graph };
    LogCapture           log;
    wsp_ggml_backend_sim_inject_fault(sim_device(0), WSP_GGML_SIM_FAULT_KERNEL);
    EXPECT_FALSE(wsp_ggml_backend_compare_graph_backend(g.cpu.get(), sim.get(), g.graph, on_node, &seen));
    EXPECT_TRUE(seen.indices.empty());
    EXPECT_TRUE(log.contains("failed to compute")) << log.text();
}

} // namespace
} // namespace wsp::test
