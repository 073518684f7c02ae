// Random graphs on random placements, against the CPU alone. Each seed draws a DAG of SPEC ops
// (unary, scale, add and mul with broadcast, mul_mat, norm, soft_max, transposes, concat, row
// views, get_rows, casts to F16 and back) over random shapes, weights on the CPU, on one of 1 to
// 4 sim devices or split over them, random pins of nodes to any backend, `parallel` on or off and
// random per-command delays on the devices. The scheduler computes it twice with different inputs,
// overlapped (no synchronize in between, outputs read on their backends' streams); the CPU alone
// computes the same graph from the same draws. The same kernels run everywhere, so the outputs
// must match to rounding. A failing seed is printed; WSP_TEST_SEED=N runs that one alone and
// WSP_TEST_RANDOM_GRAPHS=N sets how many run.

#include "sim_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>

namespace wsp::test {
namespace {

constexpr int DEFAULT_GRAPHS = 300;

// where the graph's tensors go, drawn from the seed but applied only on the device side
struct Placement {
    int                                            n_sim = 0;
    std::vector<wsp_ggml_backend_buffer_type_t>    weight_bufts; // CPU, the sims, split types
    std::vector<std::pair<wsp_ggml_tensor *, int>> pins;         // node, backend index
};

struct Weight {
    wsp_ggml_tensor * t;
    int               home; // where it lives (an index the caller gave meaning)
};

// makes a weight of the given type and shape in the given home
using MakeWeight = std::function<wsp_ggml_tensor *(wsp_ggml_type, int64_t, int64_t, int)>;

class RandomGraph {
public:
    RandomGraph(uint32_t seed, int n_sim, int n_weight_bufts, int n_backends)
        : rng_(seed), n_sim_(n_sim), n_wbufts_(n_weight_bufts), n_backends_(n_backends) {}

    // builds the graph in ctx, weights by make_weight; the draws are the same for the same seed
    wsp_ggml_cgraph * build(wsp_ggml_context * ctx, MakeWeight make_weight) {
        ctx_         = ctx;
        make_weight_ = std::move(make_weight);
        pool_.clear();
        inputs_.clear();
        index_inputs_.clear();
        weights_.clear();
        pins_.clear();
        outputs_.clear();
        const int n_inputs = 1 + pick(2);
        for (int i = 0; i < n_inputs; ++i) {
            wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx_, WSP_GGML_TYPE_F32, dim0(), dim1());
            wsp_ggml_set_input(x);
            wsp_ggml_format_name(x, "x%d", i);
            inputs_.push_back(x);
            pool_.push_back(x);
        }
        const int n_ops = 8 + pick(21);
        for (int i = 0; i < n_ops; ++i) {
            wsp_ggml_tensor * t = add_op();
            wsp_ggml_format_name(t, "op%d", i);
            if (pick(10) < 3) {
                pins_.emplace_back(t, pick(n_backends_));
            }
            pool_.push_back(t);
        }
        wsp_ggml_cgraph * g = wsp_ggml_new_graph_custom(ctx_, 1024, false);
        outputs_.push_back(pool_.back());
        for (size_t i = 0; i < 2; ++i) {
            wsp_ggml_tensor * t = pool_[(size_t) pick((int) pool_.size())];
            if (t->view_src == nullptr && !(t->flags & WSP_GGML_TENSOR_FLAG_INPUT) &&
                std::find(outputs_.begin(), outputs_.end(), t) == outputs_.end()) {
                outputs_.push_back(t);
            }
        }
        for (wsp_ggml_tensor * t : outputs_) {
            wsp_ggml_set_output(t);
            wsp_ggml_build_forward_expand(g, t);
        }
        return g;
    }

    const std::vector<wsp_ggml_tensor *> &               inputs() const { return inputs_; }
    const std::vector<wsp_ggml_tensor *> &               index_inputs() const { return index_inputs_; }
    const std::vector<Weight> &                          weights() const { return weights_; }
    const std::vector<std::pair<wsp_ggml_tensor *, int>> pins() const { return pins_; }
    const std::vector<wsp_ggml_tensor *> &               outputs() const { return outputs_; }

private:
    int     pick(int n) { return (int) (rng_() % (uint32_t) n); }
    int64_t dim0() { return 8 * (1 + pick(4)); }
    int64_t dim1() { return 1 + pick(6); }

    wsp_ggml_tensor * any() { return pool_[(size_t) pick((int) pool_.size())]; }

    // a tensor of the pool with the given ne0 (and ne1 when > 0), or NULL
    wsp_ggml_tensor * with_shape(int64_t ne0, int64_t ne1) {
        std::vector<wsp_ggml_tensor *> fit;
        for (wsp_ggml_tensor * t : pool_) {
            if (t->ne[0] == ne0 && (ne1 <= 0 || t->ne[1] == ne1) && t->ne[2] == 1) {
                fit.push_back(t);
            }
        }
        return fit.empty() ? nullptr : fit[(size_t) pick((int) fit.size())];
    }

    wsp_ggml_tensor * add_op() {
        wsp_ggml_tensor * a = any();
        switch (pick(12)) {
            case 0: {
                const wsp_ggml_unary_op ops[] = { WSP_GGML_UNARY_OP_RELU, WSP_GGML_UNARY_OP_GELU,
                                                  WSP_GGML_UNARY_OP_TANH, WSP_GGML_UNARY_OP_SIGMOID };
                return wsp_ggml_unary(ctx_, a, ops[pick(4)]);
            }
            case 1: return wsp_ggml_scale(ctx_, a, 0.25f + 0.25f * (float) pick(6));
            case 2:
            case 3: {
                // same shape, or one row broadcast over a's rows
                wsp_ggml_tensor * b = with_shape(a->ne[0], pick(2) ? a->ne[1] : 1);
                if (b == nullptr) {
                    b = with_shape(a->ne[0], a->ne[1]);
                }
                return pick(2) ? wsp_ggml_add(ctx_, a, b) : wsp_ggml_mul(ctx_, a, b);
            }
            case 4:
            case 5: {
                const int64_t       n    = 8 * (1 + pick(4));
                const wsp_ggml_type type = pick(3) ? WSP_GGML_TYPE_F32 : WSP_GGML_TYPE_F16;
                const int           home = pick(n_wbufts_);
                wsp_ggml_tensor *   w    = make_weight_(type, a->ne[0], n, home);
                wsp_ggml_format_name(w, "w%zu", weights_.size());
                weights_.push_back({ w, home });
                return wsp_ggml_mul_mat(ctx_, w, wsp_ggml_cont(ctx_, a));
            }
            case 6: return wsp_ggml_norm(ctx_, a, 1e-5f);
            case 7: return wsp_ggml_soft_max_ext(ctx_, a, nullptr, 0.5f, 0.0f);
            case 8: return wsp_ggml_cont(ctx_, wsp_ggml_transpose(ctx_, a));
            case 9: {
                wsp_ggml_tensor * b = with_shape(a->ne[0], -1);
                return wsp_ggml_concat(ctx_, a, b, 1);
            }
            case 10: {
                // rows [r0, ne1) of a, as a view
                const int64_t     r0 = a->ne[1] > 1 ? pick((int) a->ne[1] - 1) : 0;
                wsp_ggml_tensor * v =
                    wsp_ggml_view_2d(ctx_, a, a->ne[0], a->ne[1] - r0, a->nb[1], (size_t) r0 * a->nb[1]);
                return wsp_ggml_scale(ctx_, v, -1.0f);
            }
            default: {
                if (pick(2)) {
                    return wsp_ggml_cast(ctx_, wsp_ggml_cast(ctx_, a, WSP_GGML_TYPE_F16), WSP_GGML_TYPE_F32);
                }
                wsp_ggml_tensor * idx = wsp_ggml_new_tensor_1d(ctx_, WSP_GGML_TYPE_I32, 1 + pick(5));
                wsp_ggml_set_input(idx);
                wsp_ggml_format_name(idx, "idx%zu", index_inputs_.size());
                index_inputs_.push_back(idx);
                index_rows_.push_back(a->ne[1]);
                return wsp_ggml_get_rows(ctx_, wsp_ggml_cont(ctx_, a), idx);
            }
        }
    }

public:
    std::vector<int64_t> index_rows_; // rows each index input may address

private:
    std::mt19937                                   rng_;
    int                                            n_sim_, n_wbufts_, n_backends_;
    wsp_ggml_context *                             ctx_ = nullptr;
    MakeWeight                                     make_weight_;
    std::vector<wsp_ggml_tensor *>                 pool_, inputs_, index_inputs_, outputs_;
    std::vector<Weight>                            weights_;
    std::vector<std::pair<wsp_ggml_tensor *, int>> pins_;
};

struct Draws {
    int                n_sim;
    bool               parallel;
    int                jitter_us;
    std::vector<float> split;
    std::vector<int>   streams; // the device of each sim backend: every sim, SIM0 sometimes twice
};

Draws draw_setup(uint32_t seed) {
    std::mt19937 rng(seed * 7919u + 17u);
    Draws        d;
    d.n_sim     = 1 + (int) (rng() % 4);
    d.parallel  = rng() % 2 == 0;
    d.jitter_us = (int) (rng() % 3) * 20;
    for (int i = 0; i < SIM_DEVICES; ++i) {
        d.split.push_back(i < d.n_sim ? (float) (rng() % 4) : 0.0f);
    }
    if (std::all_of(d.split.begin(), d.split.end(), [](float f) { return f == 0.0f; })) {
        d.split[0] = 1.0f;
    }
    for (int i = 0; i < d.n_sim; ++i) {
        d.streams.push_back(i);
    }
    if (rng() % 3 == 0) {
        d.streams.push_back(0); // two streams of SIM0: backends that share a buffer type
    }
    return d;
}

wsp_ggml_context * new_ctx(size_t n) {
    return wsp_ggml_init(
        { n * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead_custom(1024, false), nullptr, true });
}

std::vector<float> weight_values(const wsp_ggml_tensor * w, uint32_t seed, size_t i) {
    return round_trip(w->type, random_values((size_t) wsp_ggml_nelements(w), seed * 131u + (uint32_t) i, -0.5f, 0.5f));
}

// inputs of evaluation `e`
void set_inputs(const RandomGraph & rg, uint32_t seed, int e) {
    for (size_t i = 0; i < rg.inputs().size(); ++i) {
        if (rg.inputs()[i]->buffer == nullptr) {
            continue; // no op used it
        }
        const std::vector<float> v =
            random_values((size_t) wsp_ggml_nelements(rg.inputs()[i]), seed * 977u + (uint32_t) (e * 16 + (int) i));
        wsp_ggml_backend_tensor_set(rg.inputs()[i], v.data(), 0, wsp_ggml_nbytes(rg.inputs()[i]));
    }
    for (size_t i = 0; i < rg.index_inputs().size(); ++i) {
        wsp_ggml_tensor *    idx = rg.index_inputs()[i];
        std::vector<int32_t> v((size_t) idx->ne[0]);
        for (size_t k = 0; k < v.size(); ++k) {
            v[k] = (int32_t) ((seed + (uint32_t) (e * 31 + (int) (i * 7 + k * 3))) % (uint32_t) rg.index_rows_[i]);
        }
        wsp_ggml_backend_tensor_set(idx, v.data(), 0, wsp_ggml_nbytes(idx));
    }
}

std::vector<float> read_all(const wsp_ggml_tensor * t) {
    std::vector<float> v((size_t) wsp_ggml_nelements(t));
    wsp_ggml_backend_tensor_get(t, v.data(), 0, v.size() * sizeof(float));
    return v;
}

constexpr int EVALUATIONS = 2;

// the outputs of every evaluation on the CPU alone
std::vector<std::vector<std::vector<float>>> reference(uint32_t seed, const Draws & d) {
    RandomGraph        rg(seed, d.n_sim, 1, (int) d.streams.size() + 1);
    wsp_ggml_context * ctx  = new_ctx(512);
    wsp_ggml_context * wctx = new_ctx(64);
    wsp_ggml_cgraph *  g    = rg.build(
            ctx, [&](wsp_ggml_type type, int64_t k, int64_t n, int) { return wsp_ggml_new_tensor_2d(wctx, type, k, n); });
    wsp_ggml_backend_t        cpu  = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_buffer_t wbuf = wsp_ggml_backend_alloc_ctx_tensors(wctx, cpu);
    for (size_t i = 0; i < rg.weights().size(); ++i) {
        set_values(rg.weights()[i].t, weight_values(rg.weights()[i].t, seed, i));
    }
    wsp_ggml_gallocr_t galloc = wsp_ggml_gallocr_new(wsp_ggml_backend_cpu_buffer_type());
    EXPECT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc, g));
    std::vector<std::vector<std::vector<float>>> out;
    for (int e = 0; e < EVALUATIONS; ++e) {
        set_inputs(rg, seed, e);
        EXPECT_EQ(wsp_ggml_backend_graph_compute(cpu, g), WSP_GGML_STATUS_SUCCESS);
        out.emplace_back();
        for (wsp_ggml_tensor * t : rg.outputs()) {
            out.back().push_back(read_all(t));
        }
    }
    wsp_ggml_gallocr_free(galloc);
    wsp_ggml_backend_buffer_free(wbuf);
    wsp_ggml_backend_free(cpu);
    wsp_ggml_free(wctx);
    wsp_ggml_free(ctx);
    return out;
}

// the scheduler's outputs, over the sims of the draws; false when something failed
bool on_devices(uint32_t seed, const Draws & d, std::vector<std::vector<std::vector<float>>> & out) {
    SimBackends be(d.streams, 0, 1);
    for (int i = 0; i < d.n_sim; ++i) {
        wsp_ggml_backend_sim_set_jitter_us(sim_dev(i), d.jitter_us, seed + (uint32_t) i);
    }
    // weight homes: the CPU, each sim, and (with two or more sims) the split type
    std::vector<wsp_ggml_backend_buffer_type_t> bufts = { wsp_ggml_backend_cpu_buffer_type() };
    for (int i = 0; i < d.n_sim; ++i) {
        bufts.push_back(wsp_ggml_backend_dev_buffer_type(sim_dev(i)));
    }
    if (d.n_sim >= 2) {
        bufts.push_back(wsp_ggml_backend_sim_split_buffer_type(0, d.split.data()));
    }
    // each weight in its home: one context per home, then the values
    std::vector<wsp_ggml_context *>        homes(bufts.size(), nullptr);
    RandomGraph                            rg(seed, d.n_sim, (int) bufts.size(), (int) d.streams.size() + 1);
    wsp_ggml_context *                     ctx = new_ctx(512);
    wsp_ggml_cgraph *                      g   = rg.build(ctx, [&](wsp_ggml_type type, int64_t k, int64_t n, int home) {
        if (homes[(size_t) home] == nullptr) {
            homes[(size_t) home] = new_ctx(64);
        }
        return wsp_ggml_new_tensor_2d(homes[(size_t) home], type, k, n);
    });
    std::vector<wsp_ggml_backend_buffer_t> wbufs;
    for (size_t h = 0; h < homes.size(); ++h) {
        if (homes[h] != nullptr) {
            wbufs.push_back(wsp_ggml_backend_alloc_ctx_tensors_from_buft(homes[h], bufts[h]));
            EXPECT_NE(wbufs.back(), nullptr);
            wsp_ggml_backend_buffer_set_usage(wbufs.back(), WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        }
    }
    for (size_t i = 0; i < rg.weights().size(); ++i) {
        wsp_ggml_tensor *        w = rg.weights()[i].t;
        const std::vector<float> v = weight_values(w, seed, i);
        std::vector<uint8_t>     raw(wsp_ggml_nbytes(w));
        wsp_ggml_get_type_traits(w->type)->from_float_ref(v.data(), raw.data(), (int64_t) v.size());
        wsp_ggml_backend_tensor_set(w, raw.data(), 0, raw.size());
    }

    wsp_ggml_backend_sched_t s =
        wsp_ggml_backend_sched_new(be.all().data(), nullptr, (int) be.all().size(), 1024, d.parallel, false);
    for (const auto & pin : rg.pins()) {
        wsp_ggml_backend_sched_set_tensor_backend(s, pin.first, be.all()[(size_t) pin.second]);
    }
    bool ok = wsp_ggml_backend_sched_alloc_graph(s, g);
    if (std::getenv("WSP_TEST_VERBOSE")) {
        fprintf(stderr, "seed %u: %d sims, %d nodes, %zu weights, %zu pins, %d splits, %d copies\n", seed, d.n_sim,
                wsp_ggml_graph_n_nodes(g), rg.weights().size(), rg.pins().size(),
                wsp_ggml_backend_sched_get_n_splits(s), wsp_ggml_backend_sched_get_n_copies(s));
    }
    out.assign(EVALUATIONS, {});
    for (int e = 0; ok && e < EVALUATIONS; ++e) {
        set_inputs(rg, seed, e); // the previous evaluation may still run: inputs are copied at compute
        ok = wsp_ggml_backend_sched_graph_compute_async(s, g) == WSP_GGML_STATUS_SUCCESS;
        for (wsp_ggml_tensor * t : rg.outputs()) {
            out[(size_t) e].emplace_back((size_t) wsp_ggml_nelements(t));
            wsp_ggml_backend_tensor_get_async(wsp_ggml_backend_sched_get_tensor_backend(s, t), t,
                                              out[(size_t) e].back().data(), 0, wsp_ggml_nbytes(t));
        }
    }
    wsp_ggml_backend_sched_synchronize(s);
    wsp_ggml_backend_sched_free(s);
    for (int i = 0; i < d.n_sim; ++i) {
        wsp_ggml_backend_sim_set_jitter_us(sim_dev(i), 0, 0);
    }
    for (wsp_ggml_backend_buffer_t b : wbufs) {
        wsp_ggml_backend_buffer_free(b);
    }
    for (wsp_ggml_context * h : homes) {
        wsp_ggml_free(h);
    }
    wsp_ggml_free(ctx);
    return ok;
}

TEST(SchedRandom, RandomGraphsOnRandomPlacementsEqualTheCpu) {
    sim_reg();
    int          n     = DEFAULT_GRAPHS;
    uint32_t     first = 1;
    const char * one   = std::getenv("WSP_TEST_SEED");
    if (one != nullptr) {
        first = (uint32_t) std::strtoul(one, nullptr, 10);
        n     = 1;
    } else if (const char * count = std::getenv("WSP_TEST_RANDOM_GRAPHS")) {
        n = std::max(1, std::atoi(count));
    }
    int failed = 0;
    for (uint32_t seed = first; seed < first + (uint32_t) n && failed < 3; ++seed) {
        ForeignAccessGuard                           guard;
        const Draws                                  d   = draw_setup(seed);
        const auto                                   ref = reference(seed, d);
        std::vector<std::vector<std::vector<float>>> out;
        const bool                                   ok   = on_devices(seed, d, out);
        bool                                         same = ok;
        for (size_t e = 0; same && e < ref.size(); ++e) {
            for (size_t k = 0; same && k < ref[e].size(); ++k) {
                same = nmse(out[e][k], ref[e][k]) <= 1e-10;
            }
        }
        EXPECT_TRUE(same) << "seed " << seed << " (" << d.n_sim << " sims, " << d.streams.size()
                          << " sim backends, parallel " << d.parallel << "): rerun with WSP_TEST_SEED=" << seed
                          << (ok ? "" : "; the scheduler failed");
        failed += same ? 0 : 1;
    }
}

} // namespace
} // namespace wsp::test
