// Compute graphs: topological order (sources before users), leafs versus nodes, no duplicates,
// very long chains, lookup, sizes and overheads, copies, printing, and the log callback.

#include "test_util.h"

#include "../src/core/impl.h" // leafs are not part of the public graph API

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <unordered_map>

namespace wsp::test {
namespace {

struct Ctx {
    explicit Ctx(size_t size, bool no_alloc = true) : ctx(wsp_ggml_init({ size, nullptr, no_alloc })) {}
    ~Ctx() { wsp_ggml_free(ctx); }
    wsp_ggml_context * ctx;
};

// every tensor reachable from the roots through src links
std::set<wsp_ggml_tensor *> reachable(const std::vector<wsp_ggml_tensor *> & roots) {
    std::set<wsp_ggml_tensor *>    seen;
    std::vector<wsp_ggml_tensor *> stack = roots;
    while (!stack.empty()) {
        wsp_ggml_tensor * t = stack.back();
        stack.pop_back();
        if (!seen.insert(t).second) {
            continue;
        }
        for (wsp_ggml_tensor * s : t->src) {
            if (s != nullptr) {
                stack.push_back(s);
            }
        }
    }
    return seen;
}

// a node of the graph: computed by an op, or a parameter (which the graph keeps as a node)
bool is_node(const wsp_ggml_tensor * t) {
    return t->op != WSP_GGML_OP_NONE || (t->flags & WSP_GGML_TENSOR_FLAG_PARAM);
}

// the graph holds exactly the reachable tensors once each, leafs are the op-less ones, and every
// node comes after the nodes it reads
void expect_valid_order(wsp_ggml_cgraph * g, const std::vector<wsp_ggml_tensor *> & roots) {
    const std::set<wsp_ggml_tensor *>                all = reachable(roots);
    std::unordered_map<const wsp_ggml_tensor *, int> pos;
    const int                                        n_nodes = wsp_ggml_graph_n_nodes(g);
    for (int i = 0; i < n_nodes; ++i) {
        wsp_ggml_tensor * n = wsp_ggml_graph_node(g, i);
        ASSERT_TRUE(pos.emplace(n, i).second) << "node twice: " << n->name;
        ASSERT_TRUE(is_node(n)) << n->name;
        for (wsp_ggml_tensor * s : n->src) {
            if (s != nullptr && is_node(s)) {
                ASSERT_TRUE(pos.count(s)) << s->name << " is read by " << n->name << " before it is computed";
            }
        }
    }
    std::set<wsp_ggml_tensor *> leafs;
    for (int i = 0; i < g->n_leafs; ++i) {
        wsp_ggml_tensor * l = g->leafs[i];
        ASSERT_FALSE(is_node(l)) << l->name;
        ASSERT_TRUE(leafs.insert(l).second) << "leaf twice: " << l->name;
    }
    EXPECT_EQ(pos.size() + leafs.size(), all.size());
    for (wsp_ggml_tensor * t : all) {
        EXPECT_TRUE(pos.count(t) || leafs.count(t)) << t->name << " is missing";
    }
}

TEST(Graph, DiamondOrderAndNames) {
    Ctx               c(64 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead());
    wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 4);
    wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 4);
    wsp_ggml_set_name(b, "bias");
    wsp_ggml_tensor * s = wsp_ggml_add(c.ctx, a, b);
    wsp_ggml_tensor * m = wsp_ggml_mul(c.ctx, s, a);
    wsp_ggml_tensor * e = wsp_ggml_sub(c.ctx, m, s);
    wsp_ggml_set_name(e, "out");

    wsp_ggml_cgraph * g = wsp_ggml_new_graph(c.ctx);
    wsp_ggml_build_forward_expand(g, e);
    ASSERT_EQ(wsp_ggml_graph_n_nodes(g), 3);
    EXPECT_EQ(wsp_ggml_graph_node(g, 0), s);
    EXPECT_EQ(wsp_ggml_graph_node(g, 1), m);
    EXPECT_EQ(wsp_ggml_graph_node(g, 2), e);
    EXPECT_EQ(wsp_ggml_graph_node(g, -1), e);
    EXPECT_EQ(wsp_ggml_graph_node(g, -3), s);
    EXPECT_EQ(wsp_ggml_graph_nodes(g)[1], m);
    ASSERT_EQ(g->n_leafs, 2);
    EXPECT_EQ(g->leafs[0], a);
    EXPECT_EQ(g->leafs[1], b);
    // unnamed tensors get names from their position
    EXPECT_STREQ(a->name, "leaf_0");
    EXPECT_STREQ(b->name, "bias");
    EXPECT_STREQ(s->name, "node_0");
    EXPECT_STREQ(e->name, "out");
    EXPECT_EQ(wsp_ggml_graph_get_tensor(g, "bias"), b);
    EXPECT_EQ(wsp_ggml_graph_get_tensor(g, "node_1"), m);
    EXPECT_EQ(wsp_ggml_graph_get_tensor(g, "out"), e);
    EXPECT_EQ(wsp_ggml_graph_get_tensor(g, "nothing"), nullptr);

    // expanding again adds nothing; a new root adds only what is new
    wsp_ggml_build_forward_expand(g, e);
    wsp_ggml_build_forward_expand(g, m);
    EXPECT_EQ(wsp_ggml_graph_n_nodes(g), 3);
    wsp_ggml_tensor * extra = wsp_ggml_div(c.ctx, e, b);
    wsp_ggml_build_forward_expand(g, extra);
    EXPECT_EQ(wsp_ggml_graph_n_nodes(g), 4);
    EXPECT_EQ(wsp_ggml_graph_node(g, -1), extra);
    EXPECT_EQ(g->n_leafs, 2);
    expect_valid_order(g, { e, extra });
}

TEST(Graph, RandomDagsAreInTopologicalOrder) {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 20; ++trial) {
        Ctx                            c(600 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead());
        std::vector<wsp_ggml_tensor *> pool;
        for (int i = 0; i < 5; ++i) {
            pool.push_back(wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 8));
        }
        wsp_ggml_tensor * param = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 8);
        param->flags |= WSP_GGML_TENSOR_FLAG_PARAM; // op NONE but a parameter: a node, not a leaf
        pool.push_back(param);
        for (int i = 0; i < 300; ++i) {
            wsp_ggml_tensor * x = pool[rng() % pool.size()];
            wsp_ggml_tensor * y = pool[pool.size() - 1 - rng() % std::min<size_t>(pool.size(), 6)];
            pool.push_back(rng() % 2 ? wsp_ggml_add(c.ctx, x, y) : wsp_ggml_mul(c.ctx, y, x));
        }
        wsp_ggml_cgraph *              g = wsp_ggml_new_graph(c.ctx);
        std::vector<wsp_ggml_tensor *> roots;
        for (int r = 0; r < 4; ++r) {
            roots.push_back(pool[pool.size() - 1 - rng() % 50]);
            wsp_ggml_build_forward_expand(g, roots.back());
        }
        expect_valid_order(g, roots);
        bool param_is_leaf = false;
        for (int i = 0; i < g->n_leafs; ++i) {
            param_is_leaf |= g->leafs[i] == param;
        }
        EXPECT_FALSE(param_is_leaf);
    }
}

TEST(Graph, LongChainsNeedNoRecursion) {
    const int    n   = 100000;
    const size_t mem = (size_t) (n + 8) * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead_custom(n + 8, false);
    Ctx          c(mem);
    wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 1);
    wsp_ggml_tensor * y = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 1);
    wsp_ggml_tensor * t = x;
    for (int i = 0; i < n; ++i) {
        t = wsp_ggml_add(c.ctx, t, y);
    }
    wsp_ggml_cgraph * g = wsp_ggml_new_graph_custom(c.ctx, n + 8, false);
    wsp_ggml_build_forward_expand(g, t);
    ASSERT_EQ(wsp_ggml_graph_n_nodes(g), n);
    EXPECT_EQ(g->n_leafs, 2);
    EXPECT_EQ(wsp_ggml_graph_node(g, -1), t);
    for (int i = 1; i < n; ++i) {
        ASSERT_EQ(g->nodes[i]->src[0], g->nodes[i - 1]);
    }
}

TEST(Graph, OverheadIsTheMemoryAGraphTakes) {
    for (size_t size : { (size_t) 1, (size_t) 7, (size_t) 64, (size_t) 1000, (size_t) WSP_GGML_DEFAULT_GRAPH_SIZE }) {
        for (bool grads : { false, true }) {
            Ctx               c(wsp_ggml_graph_overhead_custom(size, grads));
            const size_t      before = wsp_ggml_used_mem(c.ctx);
            wsp_ggml_cgraph * g      = wsp_ggml_new_graph_custom(c.ctx, size, grads);
            EXPECT_EQ(wsp_ggml_used_mem(c.ctx) - before, wsp_ggml_graph_overhead_custom(size, grads))
                << size << " " << grads;
            EXPECT_EQ(wsp_ggml_graph_size(g), (int) size);
            EXPECT_EQ(wsp_ggml_graph_n_nodes(g), 0);
        }
    }
    EXPECT_EQ(wsp_ggml_graph_overhead(), wsp_ggml_graph_overhead_custom(WSP_GGML_DEFAULT_GRAPH_SIZE, false));
    EXPECT_GT(wsp_ggml_graph_overhead_custom(100, true), wsp_ggml_graph_overhead_custom(100, false));
    EXPECT_GT(wsp_ggml_graph_overhead_custom(200, false), wsp_ggml_graph_overhead_custom(100, false));
    Ctx c(wsp_ggml_graph_overhead());
    EXPECT_EQ(wsp_ggml_graph_size(wsp_ggml_new_graph(c.ctx)), WSP_GGML_DEFAULT_GRAPH_SIZE);
}

TEST(Graph, GraphSizeIsTheCapacity) {
    Ctx               c(64 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead_custom(5, false));
    wsp_ggml_cgraph * g = wsp_ggml_new_graph_custom(c.ctx, 5, false);
    wsp_ggml_tensor * t = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 3);
    for (int i = 0; i < 5; ++i) {
        t = wsp_ggml_sqr(c.ctx, t);
    }
    wsp_ggml_build_forward_expand(g, t); // exactly 5 nodes and 1 leaf fit
    EXPECT_EQ(wsp_ggml_graph_n_nodes(g), 5);
    wsp_ggml_graph_clear(g);
    EXPECT_EQ(wsp_ggml_graph_n_nodes(g), 0);
    EXPECT_EQ(g->n_leafs, 0);
    wsp_ggml_build_forward_expand(g, t); // the hash set was cleared too
    EXPECT_EQ(wsp_ggml_graph_n_nodes(g), 5);
}

TEST(Graph, DupAndCpyKeepNodesLeafsAndVisitedSet) {
    Ctx               c(64 * wsp_ggml_tensor_overhead() + 4 * wsp_ggml_graph_overhead_custom(64, true));
    wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 4);
    wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 4);
    wsp_ggml_tensor * x = wsp_ggml_mul(c.ctx, wsp_ggml_add(c.ctx, a, b), b);
    wsp_ggml_cgraph * g = wsp_ggml_new_graph_custom(c.ctx, 16, false);
    wsp_ggml_build_forward_expand(g, x);

    wsp_ggml_cgraph * d = wsp_ggml_graph_dup(c.ctx, g, false);
    EXPECT_EQ(wsp_ggml_graph_size(d), 16);
    EXPECT_EQ(d->grads, nullptr);
    wsp_ggml_cgraph * dg = wsp_ggml_graph_dup(c.ctx, g, true);
    EXPECT_NE(dg->grads, nullptr);

    wsp_ggml_cgraph * big = wsp_ggml_new_graph_custom(c.ctx, 64, false);
    wsp_ggml_graph_cpy(g, big);
    for (wsp_ggml_cgraph * copy : { d, dg, big }) {
        ASSERT_EQ(wsp_ggml_graph_n_nodes(copy), wsp_ggml_graph_n_nodes(g));
        ASSERT_EQ(copy->n_leafs, g->n_leafs);
        for (int i = 0; i < g->n_nodes; ++i) {
            EXPECT_EQ(copy->nodes[i], g->nodes[i]);
        }
        for (int i = 0; i < g->n_leafs; ++i) {
            EXPECT_EQ(copy->leafs[i], g->leafs[i]);
        }
        // the copy knows what it holds: expanding an existing tensor adds nothing
        wsp_ggml_build_forward_expand(copy, x);
        EXPECT_EQ(wsp_ggml_graph_n_nodes(copy), 2);
    }
    wsp_ggml_tensor * y = wsp_ggml_sqr(c.ctx, x);
    wsp_ggml_build_forward_expand(big, y);
    EXPECT_EQ(wsp_ggml_graph_n_nodes(big), 3);
    EXPECT_EQ(wsp_ggml_graph_n_nodes(g), 2); // the source is untouched
    wsp_ggml_graph_add_node(g, y);
    EXPECT_EQ(wsp_ggml_graph_node(g, -1), y);
}

TEST(Graph, PrintGoesThroughTheLogCallback) {
    Ctx               c(16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead());
    wsp_ggml_tensor * a = wsp_ggml_new_tensor_2d(c.ctx, WSP_GGML_TYPE_F16, 5, 3);
    wsp_ggml_tensor * r = wsp_ggml_gelu(c.ctx, wsp_ggml_scale(c.ctx, a, 2.0f));
    wsp_ggml_set_name(r, "activation");
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(c.ctx);
    wsp_ggml_build_forward_expand(g, r);
    LogCapture log;
    wsp_ggml_graph_print(g);
    EXPECT_TRUE(log.contains("n_nodes = 2")) << log.text();
    EXPECT_TRUE(log.contains("n_leafs = 1")) << log.text();
    EXPECT_TRUE(log.contains("GELU")) << log.text();
    EXPECT_TRUE(log.contains("activation")) << log.text();
    EXPECT_GT(log.count(WSP_GGML_LOG_LEVEL_INFO), 3);
    log.clear();
    wsp_ggml_print_objects(c.ctx);
    EXPECT_TRUE(log.contains("wsp_ggml_object")) << log.text();
}

TEST(Graph, LogSetNullRestoresStderr) {
    struct Sink {
        int         calls = 0;
        std::string last;
    } sink;
    wsp_ggml_log_set(
        [](wsp_ggml_log_level, const char * text, void * ud) {
            auto * s = static_cast<Sink *>(ud);
            s->calls += 1;
            s->last = text;
        },
        &sink);
    std::vector<uint8_t> dst(64);
    const float          x[32] = {};
    EXPECT_EQ(wsp_ggml_quantize_chunk(WSP_GGML_TYPE_IQ3_S, x, dst.data(), 0, 1, 32, nullptr), 0u);
    EXPECT_EQ(sink.calls, 1);
    EXPECT_NE(sink.last.find("iq3_s"), std::string::npos);

    wsp_ggml_log_set(nullptr, nullptr);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(wsp_ggml_quantize_chunk(WSP_GGML_TYPE_IQ2_S, x, dst.data(), 0, 1, 32, nullptr), 0u);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(sink.calls, 1); // the old callback is no longer called
    EXPECT_NE(err.find("iq2_s"), std::string::npos) << err;
}

} // namespace
} // namespace wsp::test
