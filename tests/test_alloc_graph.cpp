// The graph allocator: memory reuse, no two tensors that are live at the same time overlapping
// (liveness computed here from the graph order), in-place computation where it is safe, inputs
// and outputs kept, reserve / re-plan behaviour, and several buffer types.

#include "test_util.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

namespace wsp::test {
namespace {

const wsp_ggml_tensor * storage_of(const wsp_ggml_tensor * t) {
    return t->view_src ? t->view_src : t;
}

bool elementwise(wsp_ggml_op op) {
    switch (op) {
        case WSP_GGML_OP_ADD:
        case WSP_GGML_OP_SUB:
        case WSP_GGML_OP_MUL:
        case WSP_GGML_OP_DIV:
        case WSP_GGML_OP_UNARY:
        case WSP_GGML_OP_SCALE:
        case WSP_GGML_OP_SQR:
        case WSP_GGML_OP_SQRT:
        case WSP_GGML_OP_NORM:
        case WSP_GGML_OP_SOFT_MAX: return true;
        default: return false;
    }
}

struct Span {
    const char * begin = nullptr;
    const char * end   = nullptr;
    int          first = 1 << 30; // first node index at which the memory must hold the tensor
    int          last  = -2;      // last node index that reads or writes it
};

// Liveness from the graph order: a tensor's memory is in use from the node that computes it
// (from the start for leafs and inputs) to the last node that reads it or writes it through a
// view (to the end for inputs and outputs). Tensors in use at the same time must not overlap,
// except for an in-place handoff: node k computes t2 at the address of t1, which an elementwise
// op reads for the last time at k.
std::map<const wsp_ggml_tensor *, Span> live_spans(wsp_ggml_cgraph * g) {
    std::map<const wsp_ggml_tensor *, Span> spans;
    const int                               n     = wsp_ggml_graph_n_nodes(g);
    auto                                    touch = [&](const wsp_ggml_tensor * t, int i) {
        const wsp_ggml_tensor * s = storage_of(t);
        if (s->buffer == nullptr ||
            wsp_ggml_backend_buffer_get_usage(s->buffer) != WSP_GGML_BACKEND_BUFFER_USAGE_COMPUTE) {
            return; // not placed by the graph allocator
        }
        Span & sp       = spans[s];
        sp.begin        = static_cast<const char *>(s->data);
        sp.end          = sp.begin + wsp_ggml_nbytes(s);
        const bool leaf = s->op == WSP_GGML_OP_NONE;
        sp.first = std::min(sp.first, (leaf || (s->flags & WSP_GGML_TENSOR_FLAG_INPUT)) ? -1 : i);
        sp.last = std::max(sp.last, (s->flags & (WSP_GGML_TENSOR_FLAG_INPUT | WSP_GGML_TENSOR_FLAG_OUTPUT)) ? n : i);
    };
    for (int i = 0; i < n; ++i) {
        wsp_ggml_tensor * node = wsp_ggml_graph_node(g, i);
        touch(node, i);
        for (const wsp_ggml_tensor * s : node->src) {
            if (s != nullptr) {
                touch(s, i);
            }
        }
    }
    return spans;
}

bool is_inplace_handoff(wsp_ggml_cgraph * g, const wsp_ggml_tensor * t1, const Span & s1, const wsp_ggml_tensor * t2,
                        const Span & s2) {
    if (s1.last != s2.first || s1.begin != s2.begin || s2.first < 0) {
        return false;
    }
    const wsp_ggml_tensor * node = wsp_ggml_graph_node(g, s2.first);
    if (node != t2 || !elementwise(node->op) || wsp_ggml_nbytes(t1) != wsp_ggml_nbytes(t2)) {
        return false;
    }
    for (const wsp_ggml_tensor * s : node->src) {
        if (s != nullptr && storage_of(s) == t1) {
            return true;
        }
    }
    return false;
}

// returns the number of in-place handoffs seen
int expect_no_live_overlap(wsp_ggml_cgraph * g) {
    const auto spans     = live_spans(g);
    int        n_inplace = 0;
    for (auto i = spans.begin(); i != spans.end(); ++i) {
        for (auto j = std::next(i); j != spans.end(); ++j) {
            const Span & a = i->second;
            const Span & b = j->second;
            if (a.first > b.last || b.first > a.last || a.end <= b.begin || b.end <= a.begin) {
                continue;
            }
            if (is_inplace_handoff(g, i->first, a, j->first, b) || is_inplace_handoff(g, j->first, b, i->first, a)) {
                ++n_inplace;
                continue;
            }
            ADD_FAILURE() << i->first->name << " (live " << a.first << ".." << a.last << ") and " << j->first->name
                          << " (live " << b.first << ".." << b.last << ") overlap in memory";
        }
    }
    return n_inplace;
}

// inputs come first in their buffer: no other tensor of the graph starts below their end
void expect_inputs_first(wsp_ggml_cgraph * g) {
    const auto   spans     = live_spans(g);
    const char * input_end = nullptr;
    const char * other_min = nullptr;
    for (const auto & [t, sp] : spans) {
        if (t->flags & WSP_GGML_TENSOR_FLAG_INPUT) {
            input_end = std::max(input_end, sp.end);
        } else if (other_min == nullptr || sp.begin < other_min) {
            other_min = sp.begin;
        }
    }
    ASSERT_NE(input_end, nullptr);
    if (other_min != nullptr) {
        EXPECT_LE(input_end, other_min);
    }
}

// A random DAG of elementwise ops over inputs, mirrored in double precision. Values stay in
// [-1, 1]: avg and half-difference go through a broadcast 0.5, products of values <= 1.
class RandomGraph {
public:
    RandomGraph(uint32_t seed, int n_ops) : rng_(seed) {
        ctx_ = wsp_ggml_init(
            { (size_t) (4 * n_ops + 64) * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
        half_ = input({ 1 }, "half");
        for (int64_t ne : { 64, 128, 32, 16, 128 }) {
            input({ ne }, nullptr);
        }
        for (int i = 0; i < n_ops; ++i) {
            add_op();
        }
        graph_ = wsp_ggml_new_graph(ctx_);
        for (size_t i = 6; i < ts_.size(); ++i) {
            if (i + 3 >= ts_.size() || rng_() % 10 == 0) {
                wsp_ggml_set_output(ts_[i]);
                wsp_ggml_build_forward_expand(graph_, ts_[i]);
            }
        }
    }

    ~RandomGraph() { wsp_ggml_free(ctx_); }

    wsp_ggml_cgraph * graph() const { return graph_; }

    // after allocation: set every input
    void set_inputs() {
        for (size_t i = 0; i < ts_.size(); ++i) {
            if (ts_[i]->flags & WSP_GGML_TENSOR_FLAG_INPUT) {
                const std::vector<float> v(ref_[i].begin(), ref_[i].end());
                wsp_ggml_backend_tensor_set(ts_[i], v.data(), 0, v.size() * sizeof(float));
            }
        }
    }

    void expect_outputs_match() {
        int n_checked = 0;
        for (size_t i = 0; i < ts_.size(); ++i) {
            if (ts_[i]->flags & WSP_GGML_TENSOR_FLAG_OUTPUT) {
                all_close(get_values(ts_[i]), ref_[i], 2e-5, 0.0, ts_[i]->name);
                ++n_checked;
            }
        }
        EXPECT_GT(n_checked, 3);
    }

    size_t sum_of_node_sizes() const {
        size_t s = 0;
        for (int i = 0; i < wsp_ggml_graph_n_nodes(graph_); ++i) {
            s += wsp_ggml_nbytes(wsp_ggml_graph_node(graph_, i));
        }
        return s;
    }

private:
    wsp_ggml_tensor * input(std::vector<int64_t> ne, const char * name) {
        wsp_ggml_tensor * t = wsp_ggml_new_tensor_1d(ctx_, WSP_GGML_TYPE_F32, ne[0]);
        wsp_ggml_set_input(t);
        if (name != nullptr) {
            wsp_ggml_set_name(t, name);
        }
        const std::vector<float> v = name ? std::vector<float>{ 0.5f } : random_values((size_t) ne[0], rng_());
        push(t, std::vector<double>(v.begin(), v.end()));
        return t;
    }

    void push(wsp_ggml_tensor * t, std::vector<double> v) {
        ts_.push_back(t);
        ref_.push_back(std::move(v));
    }

    // an operand for x: a tensor whose length divides x's, or a view of a longer one
    std::pair<wsp_ggml_tensor *, std::vector<double>> operand_for(int64_t ne0) {
        const size_t                k  = 1 + rng_() % (ts_.size() - 1); // never `half`
        wsp_ggml_tensor *           y  = ts_[k];
        const std::vector<double> & vy = ref_[k];
        if (ne0 % y->ne[0] == 0) {
            return { y, vy };
        }
        const size_t off = (size_t) (y->ne[0] - ne0) / 2; // y is longer: take a window of ne0 values
        return { wsp_ggml_view_1d(ctx_, y, ne0, off * sizeof(float)),
                 std::vector<double>(vy.begin() + (std::ptrdiff_t) off, vy.begin() + (std::ptrdiff_t)(off + ne0)) };
    }

    void add_op() {
        // prefer recent tensors so that chains form, but reach back sometimes
        const size_t        back = rng_() % 4 == 0 ? ts_.size() - 1 : std::min<size_t>(ts_.size() - 1, 4);
        const size_t        xi   = ts_.size() - 1 - rng_() % back;
        wsp_ggml_tensor *   x    = ts_[xi];
        std::vector<double> vx   = ref_[xi];
        auto [y, vy]             = operand_for(x->ne[0]);
        std::vector<double> out(vx.size());
        const int           kind = (int) (rng_() % 4);
        wsp_ggml_tensor *   r    = nullptr;
        for (size_t i = 0; i < out.size(); ++i) {
            const double a = vx[i], b = vy[i % vy.size()];
            out[i] = kind == 0 ? (a + b) * 0.5 : kind == 1 ? (a - b) * 0.5 : kind == 2 ? a * b : a;
        }
        switch (kind) {
            case 0: r = wsp_ggml_mul(ctx_, wsp_ggml_add(ctx_, x, y), half_); break;
            case 1: r = wsp_ggml_mul(ctx_, wsp_ggml_sub(ctx_, x, y), half_); break;
            case 2: r = wsp_ggml_mul(ctx_, x, y); break;
            default: r = wsp_ggml_cont(ctx_, x); break;
        }
        push(r, std::move(out));
    }

    std::mt19937                     rng_;
    wsp_ggml_context *               ctx_   = nullptr;
    wsp_ggml_cgraph *                graph_ = nullptr;
    wsp_ggml_tensor *                half_  = nullptr;
    std::vector<wsp_ggml_tensor *>   ts_;
    std::vector<std::vector<double>> ref_;
};

wsp_ggml_status compute(wsp_ggml_cgraph * g, int n_threads) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, n_threads);
    const wsp_ggml_status st = wsp_ggml_backend_graph_compute(cpu, g);
    wsp_ggml_backend_free(cpu);
    return st;
}

TEST(Gallocr, RandomGraphsReuseMemoryWithoutLiveOverlap) {
    int n_inplace = 0;
    for (uint32_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        RandomGraph        rg(seed, 250);
        wsp_ggml_gallocr_t galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_cpu_buffer_type());
        ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, rg.graph()));
        n_inplace += expect_no_live_overlap(rg.graph());
        expect_inputs_first(rg.graph());
        EXPECT_LT(wsp_ggml_gallocr_get_buffer_size(galloc, 0), rg.sum_of_node_sizes() / 3);
        rg.set_inputs();
        ASSERT_EQ(compute(rg.graph(), 1 + seed % 2), WSP_GGML_STATUS_SUCCESS);
        rg.expect_outputs_match();
        wsp_ggml_gallocr_free(galloc);
    }
    EXPECT_GT(n_inplace, 20); // the avg / half-difference pairs compute in place
}

// a graph in a context of its own
struct Built {
    wsp_ggml_context * ctx;
    wsp_ggml_cgraph *  graph = nullptr;
    explicit Built(size_t n)
        : ctx(wsp_ggml_init({ n * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true })) {}
    ~Built() { wsp_ggml_free(ctx); }
    void finish(wsp_ggml_tensor * out) {
        wsp_ggml_set_output(out);
        graph = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(graph, out);
    }
};

// t <- t + t, n times: no node can be computed in place (its parent has two readers), so memory
// comes back through the free list
Built * doubling_chain(int n, int64_t ne, wsp_ggml_tensor ** in) {
    auto * b = new Built((size_t) n + 4);
    *in      = wsp_ggml_new_tensor_1d(b->ctx, WSP_GGML_TYPE_F32, ne);
    wsp_ggml_set_input(*in);
    wsp_ggml_tensor * t = *in;
    for (int i = 0; i < n; ++i) {
        t = wsp_ggml_add(b->ctx, t, t);
    }
    b->finish(t);
    return b;
}

TEST(Gallocr, LongChainNeedsAFewNodesOfMemory) {
    wsp_ggml_tensor *            in = nullptr;
    const std::unique_ptr<Built> b(doubling_chain(200, 1000, &in));
    wsp_ggml_gallocr_t           galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, b->graph));
    EXPECT_LE(wsp_ggml_gallocr_get_buffer_size(galloc, 0), 3u * 4096u);
    EXPECT_EQ(expect_no_live_overlap(b->graph), 0);
    std::vector<float> x(1000);
    for (size_t i = 0; i < x.size(); ++i) {
        x[i] = (float) i * std::ldexp(1.0f, -190); // 2^200 growth stays finite
    }
    wsp_ggml_backend_tensor_set(in, x.data(), 0, x.size() * 4);
    ASSERT_EQ(compute(b->graph, 2), WSP_GGML_STATUS_SUCCESS);
    std::vector<double> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        ref[i] = std::ldexp((double) x[i], 200);
    }
    all_close(get_values(wsp_ggml_graph_node(b->graph, -1)), ref, 0.0, 0.0, "chain");
    wsp_ggml_gallocr_free(galloc);
}

TEST(Gallocr, WideGraphReusesBranchMemory) {
    Built             b(300);
    wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(b.ctx, WSP_GGML_TYPE_F32, 512);
    wsp_ggml_set_input(x);
    wsp_ggml_tensor * sum = nullptr;
    for (int i = 0; i < 64; ++i) { // branch i = (x * x) + x; sum of all branches
        wsp_ggml_tensor * br = wsp_ggml_add(b.ctx, wsp_ggml_mul(b.ctx, x, x), x);
        sum                  = sum ? wsp_ggml_add(b.ctx, sum, br) : br;
    }
    b.finish(sum);
    wsp_ggml_gallocr_t galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, b.graph));
    size_t all = 0;
    for (int i = 0; i < wsp_ggml_graph_n_nodes(b.graph); ++i) {
        all += wsp_ggml_nbytes(wsp_ggml_graph_node(b.graph, i));
    }
    EXPECT_LT(wsp_ggml_gallocr_get_buffer_size(galloc, 0) * 20, all);
    expect_no_live_overlap(b.graph);
    const std::vector<float> xv = random_values(512, 9);
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, 512 * 4);
    ASSERT_EQ(compute(b.graph, 2), WSP_GGML_STATUS_SUCCESS);
    std::vector<double> ref(512);
    for (size_t i = 0; i < 512; ++i) {
        ref[i] = 64.0 * ((double) xv[i] * xv[i] + xv[i]);
    }
    all_close(get_values(sum), ref, 1e-4, 1e-5, "sum of branches");
    wsp_ggml_gallocr_free(galloc);
}

TEST(Gallocr, InPlaceOnlyOverIntermediates) {
    Built             b(32);
    wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(b.ctx, WSP_GGML_TYPE_F32, 300);
    wsp_ggml_tensor * c = wsp_ggml_new_tensor_1d(b.ctx, WSP_GGML_TYPE_F32, 300);
    wsp_ggml_set_input(x);
    wsp_ggml_set_input(c);
    wsp_ggml_tensor * a1 = wsp_ggml_add(b.ctx, x, c);  // x is an input: not overwritten
    wsp_ggml_tensor * a2 = wsp_ggml_mul(b.ctx, a1, c); // in place over a1
    wsp_ggml_tensor * a3 = wsp_ggml_sub(b.ctx, a2, c); // in place over a2
    wsp_ggml_set_output(a3);
    wsp_ggml_tensor * a4 = wsp_ggml_add(b.ctx, a3, c); // a3 is an output: not overwritten
    wsp_ggml_tensor * a5 = wsp_ggml_div(b.ctx, a4, c); // in place over a4
    b.finish(a5);
    wsp_ggml_gallocr_t galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, b.graph));
    EXPECT_NE(a1->data, x->data);
    EXPECT_NE(a1->data, c->data);
    EXPECT_EQ(a2->data, a1->data);
    EXPECT_EQ(a3->data, a2->data);
    EXPECT_NE(a4->data, a3->data);
    EXPECT_EQ(a5->data, a4->data);
    EXPECT_EQ(expect_no_live_overlap(b.graph), 3);
    expect_inputs_first(b.graph);

    const std::vector<float> xv = random_values(300, 1), cv = random_values(300, 2, 0.5f, 1.5f);
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, 1200);
    wsp_ggml_backend_tensor_set(c, cv.data(), 0, 1200);
    ASSERT_EQ(compute(b.graph, 1), WSP_GGML_STATUS_SUCCESS);
    std::vector<double> r3(300), r5(300);
    for (size_t i = 0; i < 300; ++i) {
        r3[i] = ((double) xv[i] + cv[i]) * cv[i] - cv[i];
        r5[i] = (r3[i] + cv[i]) / cv[i];
    }
    all_close(get_values(a3), r3, 1e-5, 1e-6, "output a3 survives");
    all_close(get_values(a5), r5, 1e-5, 1e-6, "a5");
    all_close(get_values(x), std::vector<double>(xv.begin(), xv.end()), 0.0, 0.0, "input x is intact");
    wsp_ggml_gallocr_free(galloc);
}

TEST(Gallocr, InPlaceThroughAReshapeAndCopiesIntoViews) {
    Built             b(32);
    wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(b.ctx, WSP_GGML_TYPE_F32, 12, 10);
    wsp_ggml_tensor * c = wsp_ggml_new_tensor_2d(b.ctx, WSP_GGML_TYPE_F32, 20, 6);
    wsp_ggml_set_input(x);
    wsp_ggml_set_input(c);
    wsp_ggml_tensor * y = wsp_ggml_add(b.ctx, x, x);                          // [12, 10]
    wsp_ggml_tensor * r = wsp_ggml_reshape_2d(b.ctx, y, 20, 6);               // y's only reader
    wsp_ggml_tensor * z = wsp_ggml_mul(b.ctx, r, c);                          // may take y's memory
    wsp_ggml_tensor * w = wsp_ggml_sub(b.ctx, z, c);                          // in place over z
    wsp_ggml_tensor * u = wsp_ggml_cont(b.ctx, wsp_ggml_transpose(b.ctx, w)); // [6, 20]
    // write the first row of u into a slice of an intermediate, then read the intermediate
    wsp_ggml_tensor * v   = wsp_ggml_add(b.ctx, c, c);
    wsp_ggml_tensor * cp  = wsp_ggml_cpy(b.ctx, wsp_ggml_view_1d(b.ctx, u, 6, 0), wsp_ggml_view_1d(b.ctx, v, 6, 8 * 4));
    wsp_ggml_tensor * out = wsp_ggml_add(b.ctx, v, w);
    out->src[2]           = cp; // out must run after the copy into v
    b.finish(out);
    wsp_ggml_gallocr_t galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, b.graph));
    EXPECT_EQ(z->data, y->data);
    EXPECT_EQ(w->data, z->data);
    expect_no_live_overlap(b.graph);

    const std::vector<float> xv = random_values(120, 4), cv = random_values(120, 5);
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, 480);
    wsp_ggml_backend_tensor_set(c, cv.data(), 0, 480);
    ASSERT_EQ(compute(b.graph, 2), WSP_GGML_STATUS_SUCCESS);
    std::vector<double> wv(120), ref(120);
    for (size_t i = 0; i < 120; ++i) {
        wv[i] = 2.0 * xv[i] * cv[i] - cv[i];
    }
    for (size_t i = 0; i < 120; ++i) {
        ref[i] = 2.0 * cv[i] + wv[i];
    }
    for (size_t k = 0; k < 6; ++k) { // u[k, 0] = w[0, k]
        ref[8 + k] = wv[k * 20] + wv[8 + k];
    }
    all_close(get_values(out), ref, 1e-6, 1e-6, "reshape, in-place chain and copy into a view");
    wsp_ggml_gallocr_free(galloc);
}

TEST(Gallocr, NoInPlaceOverATensorAViewStillReads) {
    Built             b(16);
    wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(b.ctx, WSP_GGML_TYPE_F32, 64);
    wsp_ggml_tensor * c = wsp_ggml_new_tensor_1d(b.ctx, WSP_GGML_TYPE_F32, 64);
    wsp_ggml_set_input(x);
    wsp_ggml_set_input(c);
    wsp_ggml_tensor * y = wsp_ggml_add(b.ctx, x, c);
    wsp_ggml_tensor * v = wsp_ggml_view_1d(b.ctx, y, 32, 16 * 4);
    wsp_ggml_tensor * z = wsp_ggml_mul(b.ctx, y, c); // y's last direct reader, but v is read later
    wsp_ggml_tensor * q = wsp_ggml_add(b.ctx, v, v);
    wsp_ggml_set_output(z);
    wsp_ggml_set_output(q);
    b.graph = wsp_ggml_new_graph(b.ctx);
    // order the nodes y, v, z, q: the view is computed before z and read after it
    wsp_ggml_build_forward_expand(b.graph, v);
    wsp_ggml_build_forward_expand(b.graph, z);
    wsp_ggml_build_forward_expand(b.graph, q);
    ASSERT_EQ(wsp_ggml_graph_node(b.graph, 2), z);
    wsp_ggml_gallocr_t galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, b.graph));
    EXPECT_NE(z->data, y->data);
    expect_no_live_overlap(b.graph);
    const std::vector<float> xv = random_values(64, 6), cv = random_values(64, 7);
    wsp_ggml_backend_tensor_set(x, xv.data(), 0, 256);
    wsp_ggml_backend_tensor_set(c, cv.data(), 0, 256);
    ASSERT_EQ(compute(b.graph, 1), WSP_GGML_STATUS_SUCCESS);
    std::vector<double> rq(32);
    for (size_t i = 0; i < 32; ++i) {
        rq[i] = 2.0 * ((double) xv[16 + i] + cv[16 + i]);
    }
    all_close(get_values(q), rq, 1e-6, 1e-6, "the view reads y, not z");
    wsp_ggml_gallocr_free(galloc);
}

TEST(Gallocr, ReserveThenAllocKeepsTheBufferAndBiggerGraphsReplan) {
    wsp_ggml_tensor *            in1 = nullptr;
    const std::unique_ptr<Built> g1(doubling_chain(50, 256, &in1));
    wsp_ggml_gallocr_t           galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(wsp_ggml_gallocr_reserve(galloc, g1->graph));
    const size_t reserved = wsp_ggml_gallocr_get_buffer_size(galloc, 0);
    EXPECT_GT(reserved, 0u);
    EXPECT_EQ(in1->data, nullptr); // reserve plans, it does not place

    // the same topology built again: allocated in the reserved buffer, no growth
    wsp_ggml_tensor *            in2 = nullptr;
    const std::unique_ptr<Built> g2(doubling_chain(50, 256, &in2));
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, g2->graph));
    EXPECT_EQ(wsp_ggml_gallocr_get_buffer_size(galloc, 0), reserved);
    const wsp_ggml_backend_buffer_t first_buffer = in2->buffer;
    ASSERT_NE(first_buffer, nullptr);
    expect_no_live_overlap(g2->graph);

    // a smaller graph fits too
    wsp_ggml_tensor *            in3 = nullptr;
    const std::unique_ptr<Built> g3(doubling_chain(50, 128, &in3));
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, g3->graph));
    EXPECT_EQ(wsp_ggml_gallocr_get_buffer_size(galloc, 0), reserved);

    // a bigger one re-plans and grows the single buffer
    wsp_ggml_tensor *            in4 = nullptr;
    const std::unique_ptr<Built> g4(doubling_chain(80, 4096, &in4));
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, g4->graph));
    EXPECT_GT(wsp_ggml_gallocr_get_buffer_size(galloc, 0), reserved);
    expect_no_live_overlap(g4->graph);
    std::vector<float> x(4096, 1.0f);
    wsp_ggml_backend_tensor_set(in4, x.data(), 0, x.size() * 4);
    ASSERT_EQ(compute(g4->graph, 2), WSP_GGML_STATUS_SUCCESS);
    all_close(get_values(wsp_ggml_graph_node(g4->graph, -1)), std::vector<double>(4096, std::ldexp(1.0, 80)), 0.0, 0.0,
              "bigger chain");
    wsp_ggml_gallocr_free(galloc);
}

TEST(Gallocr, SeveralBufferTypesNeedReserveN) {
    HostBufferType                 host("HostB", 64, SIZE_MAX);
    wsp_ggml_backend_buffer_type_t bufts[2] = { wsp_ggml_backend_cpu_buffer_type(), host.buft() };
    wsp_ggml_gallocr_t             galloc   = wsp_ggml_gallocr_new_n(bufts, 2);
    RandomGraph                    rg(42, 120);
    {
        LogCapture log;
        EXPECT_FALSE(wsp_ggml_gallocr_alloc_graph(galloc, rg.graph()));
        EXPECT_TRUE(log.contains("reserve_n")) << log.text();
    }
    wsp_ggml_cgraph * g = rg.graph();
    const int         n = wsp_ggml_graph_n_nodes(g);
    std::vector<int>  node_ids((size_t) n);
    for (int i = 0; i < n; ++i) {
        node_ids[(size_t) i] = (i / 7) % 2; // runs of nodes alternate between the two buffers
    }
    std::vector<int> leaf_ids(1024, 1);
    ASSERT_TRUE(wsp_ggml_gallocr_reserve_n(galloc, g, node_ids.data(), leaf_ids.data()));
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, g));
    EXPECT_GT(wsp_ggml_gallocr_get_buffer_size(galloc, 0), 0u);
    EXPECT_GT(wsp_ggml_gallocr_get_buffer_size(galloc, 1), 0u);
    int n_checked = 0;
    for (int i = 0; i < n; ++i) {
        const wsp_ggml_tensor * node = wsp_ggml_graph_node(g, i);
        if (node->view_src != nullptr) {
            continue; // a view lives where its source lives
        }
        ASSERT_NE(node->buffer, nullptr) << node->name;
        EXPECT_EQ(wsp_ggml_backend_buffer_get_type(node->buffer), bufts[node_ids[(size_t) i]]) << node->name;
        ++n_checked;
    }
    EXPECT_GT(n_checked, 100);
    expect_no_live_overlap(g);
    rg.set_inputs();
    ASSERT_EQ(compute(g, 2), WSP_GGML_STATUS_SUCCESS);
    rg.expect_outputs_match();

    LogCapture log;
    EXPECT_EQ(wsp_ggml_gallocr_get_buffer_size(galloc, 2), 0u);
    EXPECT_EQ(wsp_ggml_gallocr_get_buffer_size(galloc, -1), 0u);
    EXPECT_TRUE(log.contains("out of range"));
    const std::vector<int> bad((size_t) n, 5);
    EXPECT_FALSE(wsp_ggml_gallocr_reserve_n(galloc, g, bad.data(), nullptr));
    EXPECT_TRUE(log.contains("buffer id 5")) << log.text();
    wsp_ggml_gallocr_free(galloc);
}

TEST(Gallocr, ABufferTypeListedTwiceSharesOneBuffer) {
    wsp_ggml_backend_buffer_type_t bufts[2] = { wsp_ggml_backend_cpu_buffer_type(),
                                                wsp_ggml_backend_cpu_buffer_type() };
    wsp_ggml_gallocr_t             galloc   = wsp_ggml_gallocr_new_n(bufts, 2);
    RandomGraph                    rg(7, 60);
    std::vector<int>               ids((size_t) wsp_ggml_graph_n_nodes(rg.graph()));
    for (size_t i = 0; i < ids.size(); ++i) {
        ids[i] = (int) (i % 2);
    }
    ASSERT_TRUE(wsp_ggml_gallocr_reserve_n(galloc, rg.graph(), ids.data(), nullptr));
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, rg.graph()));
    EXPECT_GT(wsp_ggml_gallocr_get_buffer_size(galloc, 0), 0u);
    EXPECT_EQ(wsp_ggml_gallocr_get_buffer_size(galloc, 1), 0u); // reported once, under the first id
    expect_no_live_overlap(rg.graph());
    rg.set_inputs();
    ASSERT_EQ(compute(rg.graph(), 1), WSP_GGML_STATUS_SUCCESS);
    rg.expect_outputs_match();
    wsp_ggml_gallocr_free(galloc);
}

} // namespace
} // namespace wsp::test
