// The tensor-parallel plan of a graph (Note [tensor parallelism] in plan.h): a state per node, how
// each node reads its sources on a member, and where PARTIAL results are all-reduced.

#include "plan.h"

#include "ggml-backend.h"

#include "../core/impl.h"
#include "../split/partition.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <unordered_set>

namespace wsp::allgpu::tp {

Ranges spread(int64_t n, int64_t unit, const std::vector<float> & proportions, bool * ok) {
    double total = 0.0;
    for (float p : proportions) {
        total += p;
    }
    *ok = unit > 0 && n % unit == 0 && total > 0.0;
    if (!*ok) {
        return Ranges(proportions.size(), { 0, 0 });
    }
    Ranges r = partition::ranges(proportions, n, unit); // Note [partition]
    for (const Range & x : r) {
        *ok = *ok && x.second > x.first;
    }
    return r;
}

namespace {

class Planner {
public:
    Planner(const Graph & gr, std::unordered_map<int, int64_t> & units) : gr_(gr), units_(units) {}

    // true: a plan (or a reason in why_not); false: an origin's unit was raised, plan again
    bool run(Plan & p);

private:
    const Graph &                                      gr_;
    std::unordered_map<int, int64_t> &                 units_; // origin node -> unit (rows)
    std::unordered_map<const wsp_ggml_tensor *, State> states_;
    std::vector<int>                                   origin_node_;
    Plan *                                             p_ = nullptr;
    std::unordered_set<const wsp_ggml_tensor *>        dst_only_; // cache views only written through

    const Layout * layout_of(const wsp_ggml_tensor * r) const {
        auto it = p_->layouts.find(r);
        return it != p_->layouts.end() ? &it->second : gr_.sharded ? gr_.sharded(r) : nullptr;
    }

    bool outside(const wsp_ggml_tensor * t) const { return p_->index.count(t) == 0; }

    // the state of a view mapped onto a cache's parts
    static State state_from(const Layout & L, const ViewMap & vm) {
        State         s{ State::SPLIT, vm.dim, vm.ranges, L.origin, L.num, L.den * vm.stride };
        const int64_t g = std::gcd(s.num, s.den);
        s.num /= g;
        s.den /= g;
        s.fixed_unit = L.origin < 0 ? L.unit / vm.stride : 0;
        return s;
    }

    bool        map_cache(const Layout & L, NodePlan & np, const wsp_ggml_tensor * r, const char * what);
    bool        visit_cache_write(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool        retry_ = false;
    std::string why_;

    State state_of(const wsp_ggml_tensor * t) const {
        auto it = states_.find(t);
        return it == states_.end() ? State{} : it->second;
    }

    bool fail(const char * fmt, ...) {
        char    buf[256];
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        why_ = buf;
        return false;
    }

    int64_t unit_of(const State & s) const {
        return s.origin < 0 ? s.fixed_unit : units_.at(origin_node_[s.origin]) * s.num / s.den;
    }

    // s's boundaries must be multiples of r elements of its dim: raise its origin's unit
    bool need(const State & s, int64_t r) {
        if (unit_of(s) % r == 0) {
            return true;
        }
        if (s.origin < 0) {
            return fail("a cache kept from an earlier graph is split in units of %lld, not %lld",
                        (long long) s.fixed_unit, (long long) r);
        }
        int64_t &     unit   = units_[origin_node_[s.origin]];
        const int64_t want   = r * s.den / std::gcd(r * s.den, s.num); // origin elements
        const int64_t raised = std::lcm(unit, want);
        retry_               = raised != unit;
        unit                 = raised;
        return retry_ ? false : fail("cannot align a split to %lld elements", (long long) r);
    }

    // two SPLIT states the same (dim and ranges); raises both origins to a common unit otherwise
    bool same(const State & a, const State & b) {
        if (a.dim == b.dim && a.ranges == b.ranges) {
            return true;
        }
        if (a.dim != b.dim) {
            return fail("operands split along different dimensions");
        }
        const int64_t u = std::lcm(unit_of(a), unit_of(b));
        return need(a, u) && need(b, u) && fail("operands split differently");
    }

    void scale(State & s, int64_t num, int64_t den) {
        s.num *= num;
        s.den *= den;
        const int64_t g = std::gcd(s.num, s.den);
        s.num /= g;
        s.den /= g;
        for (Range & r : s.ranges) {
            r = { r.first * num / den, r.second * num / den };
        }
        s.fixed_unit = s.fixed_unit * num / den; // a kept cache's unit, in the new dim's elements
    }

    bool reshape(const State & s, const int64_t * from, const int64_t * to, State & out);
    bool visit(int i, Plan & p);
    bool make_origin(int i, int w, NodePlan & np);
    bool by_columns(const wsp_ggml_tensor * n, int w, const State & input, NodePlan & np);
    bool visit_mul_mat(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool visit_flash_attn(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool visit_binary(wsp_ggml_tensor * n, State * in, NodePlan & np);

    // Note [split rules]: what an op makes of a split source, one rule per op (split_rule): a
    // node with a split source and no rule, or a rule that refuses how it is split, reads that
    // source all-gathered (Note [all-gathered sources] in plan.h)
    using Rule = bool (Planner::*)(wsp_ggml_tensor * n, State * in, NodePlan & np);
    static Rule split_rule(wsp_ggml_op op);
    bool        rule_reshape(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool        rule_cont(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool        rule_permute(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool        rule_view(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool        rule_elementwise(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool        rule_norm(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool        rule_soft_max(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool        rule_im2col(wsp_ggml_tensor * n, State * in, NodePlan & np);
    bool        no_rule(const wsp_ggml_tensor * n) {
               return fail("%s (%s) has no rule for a split source", n->name, wsp_ggml_op_name(n->op));
    }
    // Note [all-gathered sources]: n's split sources made whole on every member first, n REPL
    void gather_all(wsp_ggml_tensor * n, State * in, NodePlan & np) {
        std::vector<wsp_ggml_tensor *> reduce = std::move(np.reduce_before);
        np                                    = NodePlan{};
        np.reduce_before                      = std::move(reduce);
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            if (n->src[j] != nullptr && in[j].kind == State::SPLIT &&
                std::find(np.gather_before.begin(), np.gather_before.end(), n->src[j]) == np.gather_before.end()) {
                np.gather_before.push_back(n->src[j]);
                states_[n->src[j]] = State{};
            }
            in[j] = State{};
        }
        why_.clear();
        p_->n_all_gathers += (int) np.gather_before.size();
    }

    static Take slice(int dim, const Ranges & r) { return Take{ Take::SLICE, dim, r }; }
};

// the state of a row-major reading of a tensor of shape `from` as shape `to`
bool Planner::reshape(const State & s, const int64_t * from, const int64_t * to, State & out) {
    out = s;
    if (s.kind != State::SPLIT) {
        return true;
    }
    const int k  = s.dim;
    int64_t   pk = 1; // elements before dim k
    for (int i = 0; i < k; ++i) {
        pk *= from[i];
    }
    const int64_t end = pk * from[k];
    int64_t       q   = 1;
    for (int j = 0; j < WSP_GGML_MAX_DIMS; q *= to[j], ++j) {
        if (to[j] == 1 || q * to[j] != end) {
            continue; // the dimension of `to` that ends where k ends carries the split
        }
        out.dim = j;
        if (q <= pk && pk % q == 0) { // j takes in k and dimensions inside it
            scale(out, pk / q, 1);
            return true;
        }
        if (q > pk && q % pk == 0) { // k is cut into dimensions: j is its outermost
            const int64_t r = q / pk;
            if (!need(s, r)) {
                return false;
            }
            scale(out, 1, r);
            return true;
        }
    }
    return fail("a reshape that cuts across a split dimension");
}

// np's cache view (cache_ne/nb/offs set) onto L's parts
bool Planner::map_cache(const Layout & L, NodePlan & np, const wsp_ggml_tensor * r, const char * what) {
    ViewMap       vm;
    const size_t  es  = wsp_ggml_type_size(r->type);
    const ViewFit fit = map_view_fit(L, np.cache_ne, np.cache_nb, np.cache_offs, es, vm);
    if (fit == ViewFit::OFF_PARTS &&
        L.origin < 0) { // kept from an earlier graph in finer parts: sharded anew, in whole heads
        Layout L2 = L;
        bool   ok = false;
        L2.unit   = std::lcm(L.unit, vm.stride);
        L2.parts  = spread(L.W, L2.unit, gr_.proportions, &ok);
        if (!ok) {
            return fail("%s cannot be sharded in whole units of %lld", r->name, (long long) L2.unit);
        }
        p_->layouts[r] = L2;
        return map_cache(L2, np, r, what);
    }
    if (fit == ViewFit::OFF_PARTS) { // the parts must fall on the view's split dim: whole heads
        State ls{ State::SPLIT, 0, {}, L.origin, L.num, L.den };
        ls.fixed_unit = L.unit;
        return need(ls, vm.stride) && fail("%s %s off its parts", what, r->name);
    }
    if (fit == ViewFit::ACROSS_PARTS) {
        return fail("%s %s across its parts", what, r->name);
    }
    np.cache      = r;
    np.cache_view = vm;
    np.out        = state_from(L, vm);
    return true;
}

// a copy of split (or REPL) data into memory outside the graph: a cache, sharded from then on
bool Planner::visit_cache_write(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    const wsp_ggml_tensor *dst = n->src[1], *src = n->src[0], *r = n->view_src;
    const size_t           es = wsp_ggml_type_size(r->type);
    if (!gr_.keepable || !gr_.keepable(r)) {
        return fail("%s writes into %s, memory outside the device's own buffers", n->name, r->name);
    }
    if (wsp_ggml_blck_size(r->type) != 1 || !wsp_ggml_is_contiguous(r)) {
        return fail("%s writes into %s, a cache of a block type", n->name, r->name);
    }
    if (wsp_ggml_are_same_shape(dst, src)) { // the destination as the source's shape
        std::copy(dst->ne, dst->ne + WSP_GGML_MAX_DIMS, np.cache_ne);
        std::copy(dst->nb, dst->nb + WSP_GGML_MAX_DIMS, np.cache_nb);
    } else if (wsp_ggml_is_contiguous(dst)) {
        for (int d = 0; d < WSP_GGML_MAX_DIMS; ++d) {
            np.cache_ne[d] = src->ne[d];
            np.cache_nb[d] = d == 0 ? es : np.cache_nb[d - 1] * (size_t) src->ne[d - 1];
        }
    } else {
        return fail("%s writes into %s in another shape", n->name, r->name);
    }
    np.cache_offs   = dst->view_src != nullptr ? dst->view_offs : 0;
    const State & s = in[0];
    if (layout_of(r) == nullptr) { // the first write: its split says how the cache is sharded
        if (s.kind != State::SPLIT) {
            return fail("%s writes %s whole", n->name, r->name);
        }
        const int64_t sk = (int64_t) (np.cache_nb[s.dim] / es);
        Layout        L;
        L.W      = sk * np.cache_ne[s.dim];
        L.unit   = unit_of(s) * sk;
        L.origin = s.origin;
        L.num    = s.num * sk;
        L.den    = s.den;
        for (const Range & x : s.ranges) {
            L.parts.push_back({ x.first * sk, x.second * sk });
        }
        p_->layouts[r] = L; // a last block cut short (a cache with room to spare) is kept as far as it goes
    }
    if (!map_cache(*layout_of(r), np, r, "writes")) {
        return false;
    }
    if (s.kind == State::SPLIT) {
        return (s.dim == np.out.dim || fail("%s writes %s along another dim", n->name, r->name)) && same(s, np.out);
    }
    np.take[0] = slice(np.out.dim, np.out.ranges); // a REPL source: each member writes its part
    return true;
}

// a mat-mul whose weight src[w] meets its other operand split along the contracted dim 0: the
// weight's columns by the same ranges, PARTIAL terms
bool Planner::by_columns(const wsp_ggml_tensor * n, int w, const State & input, NodePlan & np) {
    if (!need(input, wsp_ggml_blck_size(n->src[w]->type))) {
        return false;
    }
    np.take[w]  = Take{ Take::COLUMNS, 0, input.ranges };
    np.out      = State{};
    np.out.kind = State::PARTIAL;
    return true;
}

bool Planner::visit_mul_mat(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    const wsp_ggml_tensor *a = n->src[0], *b = n->src[1];
    if (gr_.spreadable(a)) {
        // (a REPL input makes an origin: visit() does that, as it knows the node's index)
        if (in[1].kind == State::SPLIT && in[1].dim == 0) { // columns per member
            return by_columns(n, 0, in[1], np);
        }
        return fail("%s reads its input split along dimension %d", n->name, in[1].dim);
    }
    if (gr_.spreadable(b) && in[0].kind == State::SPLIT && in[0].dim == 0) {
        // a convolution's mat-mul (Note [split convolutions]): its columns [K*IC] split by input
        // channels, the kernel's columns by the same ranges
        return by_columns(n, 1, in[0], np);
    }
    // two activations (attention): split on a batch dimension (heads), or rows of one
    const State &sa = in[0], &sb = in[1];
    if (sa.kind == State::REPL && sb.kind == State::REPL) {
        return true;
    }
    const State & s = sa.kind == State::SPLIT ? sa : sb;
    if (s.dim >= 2) {
        if (sa.kind == State::SPLIT && sb.kind == State::SPLIT && !same(sa, sb)) {
            return false;
        }
        const wsp_ggml_tensor * other = sa.kind == State::SPLIT ? b : a;
        const int               j     = sa.kind == State::SPLIT ? 1 : 0;
        if (in[j].kind == State::REPL) {
            if (other->ne[s.dim] == n->ne[s.dim]) {
                np.take[j] = slice(s.dim, s.ranges);
            } else if (other->ne[s.dim] != 1) {
                return fail("%s broadcasts over a split dimension", n->name);
            }
        }
        np.out = s;
        return true;
    }
    if (s.dim == 1 && sb.kind == State::REPL) { // a's rows: the result's rows
        np.out     = sa;
        np.out.dim = 0;
        return true;
    }
    if (s.dim == 1 && sa.kind == State::REPL) { // b's columns: the result's columns
        np.out = sb;
        return true;
    }
    return fail("%s contracts over a split dimension", n->name);
}

bool Planner::visit_flash_attn(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    float max_bias = 0.0f;
    std::memcpy(&max_bias, n->op_params + 1, sizeof(float));
    const State * ref = nullptr;
    for (int j = 0; j < 3; ++j) {
        ref = ref == nullptr && in[j].kind == State::SPLIT ? &in[j] : ref;
    }
    if (ref == nullptr) {
        return true;
    }
    if (ref->dim != 2 || max_bias != 0.0f || n->src[1]->ne[2] != n->src[0]->ne[2]) {
        return fail("%s: heads split only without ALiBi and with as many KV heads as heads", n->name);
    }
    for (int j = 0; j < 3; ++j) {
        if (in[j].kind == State::SPLIT && !same(in[j], *ref)) {
            return false;
        }
        np.take[j] = in[j].kind == State::REPL ? slice(2, ref->ranges) : np.take[j];
    }
    if (n->src[3] != nullptr && n->src[3]->ne[2] != 1) {
        return fail("%s: a mask per head", n->name);
    }
    np.out     = *ref;
    np.out.dim = 1; // the result is [head size, heads, tokens]
    return true;
}

bool Planner::visit_binary(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    const State &sa = in[0], &sb = in[1];
    if (sa.kind == State::REPL && sb.kind == State::REPL) {
        return true;
    }
    if (sa.kind == State::SPLIT && sb.kind == State::SPLIT) {
        np.out = sa;
        return same(sa, sb);
    }
    const int     j = sa.kind == State::SPLIT ? 1 : 0; // the REPL one
    const State & s = in[1 - j];
    if (n->src[j]->ne[s.dim] == n->ne[s.dim]) {
        np.take[j] = slice(s.dim, s.ranges);
    } else if (j == 0 || n->src[j]->ne[s.dim] != 1) {
        return fail("%s broadcasts over a split dimension", n->name);
    }
    np.out = s;
    return true;
}

// Note [split rules]: the op -> rule table for nodes with a split source (the first, but for
// binary ops and attention, whose rules read every operand). Each rule sets np.out (and np.take
// where a member reads its sources otherwise than as they are) or fails with the reason.
Planner::Rule Planner::split_rule(wsp_ggml_op op) {
    switch (op) {
        case WSP_GGML_OP_FLASH_ATTN_EXT: return &Planner::visit_flash_attn;
        case WSP_GGML_OP_ADD:
        case WSP_GGML_OP_SUB:
        case WSP_GGML_OP_MUL:
        case WSP_GGML_OP_DIV: return &Planner::visit_binary;
        case WSP_GGML_OP_RESHAPE: return &Planner::rule_reshape;
        case WSP_GGML_OP_CONT: return &Planner::rule_cont;
        case WSP_GGML_OP_PERMUTE:
        case WSP_GGML_OP_TRANSPOSE: return &Planner::rule_permute;
        case WSP_GGML_OP_VIEW: return &Planner::rule_view;
        case WSP_GGML_OP_UNARY:
        case WSP_GGML_OP_SCALE:
        case WSP_GGML_OP_SQR:
        case WSP_GGML_OP_SQRT:
        case WSP_GGML_OP_LOG:
        case WSP_GGML_OP_CLAMP:
        case WSP_GGML_OP_DUP:
        case WSP_GGML_OP_CPY: return &Planner::rule_elementwise;
        case WSP_GGML_OP_NORM:
        case WSP_GGML_OP_RMS_NORM: return &Planner::rule_norm;
        case WSP_GGML_OP_SOFT_MAX: return &Planner::rule_soft_max;
        case WSP_GGML_OP_IM2COL: return &Planner::rule_im2col;
        default: return nullptr;
    }
}

bool Planner::rule_reshape(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    return reshape(in[0], n->src[0]->ne, n->ne, np.out);
}

// a copy into a new layout: a reshape where the shape changes, elementwise where it does not
bool Planner::rule_cont(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    return wsp_ggml_are_same_shape(n, n->src[0]) ? rule_elementwise(n, in, np) : rule_reshape(n, in, np);
}

bool Planner::rule_permute(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    np.out     = in[0];
    np.out.dim = n->op_params[in[0].dim]; // source dim k lands on axis k
    return true;
}

// a view of the whole tensor; any other view of a split tensor has no rule
bool Planner::rule_view(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    if (!wsp_ggml_are_same_shape(n, n->src[0]) || n->view_offs != n->src[0]->view_offs ||
        !std::equal(n->nb, n->nb + WSP_GGML_MAX_DIMS, n->src[0]->nb)) {
        return no_rule(n);
    }
    np.out = in[0];
    return true;
}

// element by element into a result of the source's shape (a CPY with a destination writes outside
// the node: refused before the rules)
bool Planner::rule_elementwise(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    if (n->src[1] != nullptr) {
        return no_rule(n);
    }
    np.out = in[0];
    return true;
}

bool Planner::rule_norm(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    np.out = in[0];
    return in[0].dim != 0 || fail("%s normalizes rows that are split", n->name);
}

bool Planner::rule_soft_max(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    float max_bias = 0.0f;
    std::memcpy(&max_bias, n->op_params + 1, sizeof(float));
    const wsp_ggml_tensor * mask = n->src[1];
    const int               k    = in[0].dim;
    np.out                       = in[0];
    if (k == 0 || (k == 2 && max_bias != 0.0f) || n->src[2] != nullptr) {
        return fail("%s: soft_max split along dimension %d", n->name, k);
    }
    if (mask != nullptr && mask->ne[k] != 1) {
        np.take[1] = slice(k, in[0].ranges);
        return mask->ne[k] == n->ne[k] || fail("%s: mask broadcast over a split dimension", n->name);
    }
    return true;
}

// Note [split convolutions]: whisper's front end, conv_1d = im2col + a mat-mul whose weight is
// src1, the kernel [K, IC, OC] read as [K*IC, OC]. The first convolution reads the whole mel and
// takes the kernel's rows (output channels) by member: an origin split on dim 1. Bias and GELU
// keep that split. The second convolution's im2col reads its input split by channels; its
// columns are ordered ic*K + k, so channels [a, b) are columns [a*K, b*K): split on dim 0, K times
// the ranges. Its mat-mul takes the kernel's columns by the same ranges and leaves PARTIAL terms,
// all-reduced once. im2col reads only its kernel's shape (the runner gives each member a stand-in
// of that shape, Runner::make_node), so no member holds a kernel whole.
bool Planner::rule_im2col(wsp_ggml_tensor * n, State * in, NodePlan & np) {
    if (in[1].kind != State::SPLIT || in[1].dim != 1 || get_op_param_i32(n, 6) != 0) {
        return fail("%s: im2col split other than by the channels of a 1-D input", n->name);
    }
    np.out     = in[1];
    np.out.dim = 0;
    scale(np.out, n->src[0]->ne[0], 1); // channel c's columns: [c*K, (c+1)*K)
    return true;
}

// node i, a mat-mul whose weight is src[w] with a REPL input, takes the weight's rows by member:
// its result is split on dim w (an origin)
bool Planner::make_origin(int i, int w, NodePlan & np) {
    const wsp_ggml_tensor * weight = gr_.g->nodes[i]->src[w];
    bool                    fits   = false;
    units_.emplace(i, 1);
    const Ranges r = spread(weight->ne[1], units_[i], gr_.proportions, &fits);
    if (!fits) {
        return fail("%s's rows do not reach every member in units of %lld", weight->name, (long long) units_[i]);
    }
    np.take[w] = Take{ Take::ROWS, 1, r };
    np.out     = State{ State::SPLIT, w, r, (int) origin_node_.size(), 1, 1 };
    origin_node_.push_back(i);
    p_->n_origins++;
    return true;
}

bool Planner::visit(int i, Plan & p) {
    wsp_ggml_tensor * n  = gr_.g->nodes[i];
    NodePlan &        np = p.nodes[i];
    State             in[WSP_GGML_MAX_SRC];
    bool              any_split = false;
    for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
        if (n->src[j] == nullptr) {
            continue;
        }
        in[j] = state_of(n->src[j]);
        if (in[j].kind == State::PARTIAL || in[j].kind == State::MAIN) { // every reader wants it whole
            np.reduce_before.push_back(n->src[j]);
            states_[n->src[j]] = State{};
            in[j]              = State{};
        }
        any_split = any_split || in[j].kind == State::SPLIT;
    }
    const wsp_ggml_tensor * root  = n->view_src;
    const bool              cache = root != nullptr && outside(root) && !is_weight(root) && layout_of(root) != nullptr;
    if (!is_view_op(n->op) && root != nullptr) {
        if (n->op == WSP_GGML_OP_CPY && n->src[1] != nullptr && outside(root) && !is_weight(root)) {
            if (!visit_cache_write(n, in, np)) {
                return false;
            }
            states_[n] = np.out;
            return true;
        }
        return fail("%s writes into %s (memory the graph does not own)", n->name, root->name);
    }
    if (n->op == WSP_GGML_OP_VIEW && dst_only_.count(n) != 0) {
        np.skip = true; // the copy into it writes the cache's parts directly
        return true;
    }
    if (n->op == WSP_GGML_OP_VIEW && cache) { // a read of a sharded cache: each member its part
        std::copy(n->ne, n->ne + WSP_GGML_MAX_DIMS, np.cache_ne);
        std::copy(n->nb, n->nb + WSP_GGML_MAX_DIMS, np.cache_nb);
        np.cache_offs = n->view_offs;
        if (!map_cache(*layout_of(root), np, root, "reads")) {
            return false;
        }
        states_[n] = np.out;
        return true;
    }
    for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
        const wsp_ggml_tensor * t = n->src[j];
        if (t != nullptr && outside(t) && outside(storage_of(t)) && layout_of(storage_of(t)) != nullptr) {
            return fail("%s reads the sharded %s whole", n->name, storage_of(t)->name);
        }
    }
    bool ok = true;
    if (n->op == WSP_GGML_OP_MUL_MAT && gr_.spreadable(n->src[0]) && in[1].kind == State::REPL) {
        if (!make_origin(i, 0, np)) { // the weight's rows are the result's rows
            return false;
        }
    } else if (n->op == WSP_GGML_OP_MUL_MAT && gr_.spreadable(n->src[1]) && in[0].kind == State::REPL &&
               in[1].kind == State::REPL) {
        if (!make_origin(i, 1,
                         np)) { // the weight is src1 (Note [split convolutions]): its rows are the result's columns
            return false;
        }
    } else if (n->op == WSP_GGML_OP_MUL_MAT) {
        ok = visit_mul_mat(n, in, np);
    } else if (!any_split) {
        np.out = State{}; // REPL from REPL sources, whatever the op
        for (int j = 0; j < WSP_GGML_MAX_SRC && !is_view_op(n->op); ++j) {
            const wsp_ggml_tensor * t          = n->src[j];
            const bool              shape_only = n->op == WSP_GGML_OP_IM2COL && j == 0; // the kernel: its shape
            if (t != nullptr && !shape_only && is_weight(storage_of(t)) &&
                wsp_ggml_nbytes(storage_of(t)) > 8 * wsp_ggml_nbytes(n)) {
                np.out.kind = State::MAIN; // a big table's few rows: sent, not the table copied
            }
        }
    } else {
        const Rule rule = split_rule(n->op);
        // attention's and binary ops' rules read every operand; the others a split first source
        const bool every_operand =
            rule == &Planner::visit_flash_attn || rule == &Planner::visit_binary || rule == &Planner::rule_im2col;
        if (rule == nullptr || (!every_operand && in[0].kind != State::SPLIT)) {
            gather_all(n, in, np); // Note [all-gathered sources]
        } else if (!(this->*rule)(n, in, np)) {
            if (retry_) {
                return false; // an origin's unit was raised: planned again
            }
            gather_all(n, in, np); // the rule refused this split
        }
    }
    if (!ok) {
        return false;
    }
    // a split result the graph gives out: gathered into the main member's memory at the end
    np.gather = np.cache == nullptr && np.out.kind == State::SPLIT &&
                (i == gr_.g->n_nodes - 1 || (n->flags & WSP_GGML_TENSOR_FLAG_OUTPUT));
    states_[n] = np.out;
    return true;
}

bool Planner::run(Plan & p) {
    p_ = &p;
    p.nodes.assign(gr_.g->n_nodes, NodePlan{});
    p.n_origins     = 0;
    p.n_all_gathers = 0;
    std::unordered_map<const wsp_ggml_tensor *, int> readers, as_dst;
    for (int i = 0; i < gr_.g->n_nodes; ++i) {
        const wsp_ggml_tensor * n = gr_.g->nodes[i];
        p.index[n]                = i;
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            readers[n->src[j]] += n->src[j] != nullptr ? 1 : 0;
            as_dst[n->src[j]] += j == 1 && n->op == WSP_GGML_OP_CPY ? 1 : 0;
        }
    }
    for (int i = 0; i < gr_.g->n_nodes; ++i) {
        const wsp_ggml_tensor * n = gr_.g->nodes[i];
        if (n->op == WSP_GGML_OP_VIEW && n->view_src != nullptr && outside(n->view_src) && readers[n] > 0 &&
            readers[n] == as_dst[n]) {
            dst_only_.insert(n);
        }
    }
    for (int i = 0; i < gr_.g->n_nodes; ++i) {
        if (!visit(i, p)) {
            if (retry_) {
                return false;
            }
            p.why_not = why_;
            return true;
        }
    }
    for (int i = 0; i < gr_.g->n_nodes; ++i) {
        if (state_of(gr_.g->nodes[i]).kind == State::PARTIAL) {
            p.reduce_at_end.push_back(gr_.g->nodes[i]);
        }
    }
    // a reshape of a weight that every reader takes in pieces (a kernel read as a matrix) is not
    // made on the members: the main member's readers view the weight, the others read pieces
    std::unordered_map<const wsp_ggml_tensor *, int> whole_reads;
    for (int i = 0; i < gr_.g->n_nodes; ++i) {
        const wsp_ggml_tensor * n = gr_.g->nodes[i];
        for (int j = 0; j < WSP_GGML_MAX_SRC; ++j) {
            const Take::How how = p.nodes[(size_t) i].take[j].how;
            whole_reads[n->src[j]] += how != Take::ROWS && how != Take::COLUMNS ? 1 : 0;
        }
    }
    for (int i = 0; i < gr_.g->n_nodes; ++i) {
        const wsp_ggml_tensor * n = gr_.g->nodes[i];
        if (n->op == WSP_GGML_OP_RESHAPE && readers[n] > 0 && whole_reads[n] == 0 && outside(storage_of(n)) &&
            is_weight(storage_of(n)) && !(n->flags & WSP_GGML_TENSOR_FLAG_OUTPUT)) {
            p.nodes[(size_t) i].skip = true;
        }
    }
    return true;
}

// plans from the given units, raising them where an op needs
Plan plan_from(const Graph & graph, std::unordered_map<int, int64_t> & units) {
    // each attempt that does not end raises some origin's unit (at most a few times per node)
    for (int attempt = 0; attempt < 4 * graph.g->n_nodes + 8; ++attempt) {
        Plan    p;
        Planner planner(graph, units);
        if (planner.run(p)) {
            return p;
        }
    }
    Plan p;
    p.why_not = "no split boundaries satisfy every op";
    return p;
}

} // namespace

Plan make_plan(const Graph & graph, std::unordered_map<int, int64_t> * units) {
    std::unordered_map<int, int64_t> own;
    const bool                       seeded = units != nullptr && !units->empty();
    Plan                             p      = plan_from(graph, units != nullptr ? *units : own);
    if (seeded && !p.ok()) { // the units of an alike graph did not suit this one: from the start
        units->clear();
        p = plan_from(graph, *units);
    }
    return p;
}

Plan row_split_plan(const Graph & graph) {
    const wsp_ggml_cgraph * g = graph.g;
    Plan                    p;
    p.row_split = true;
    p.nodes.assign((size_t) g->n_nodes, NodePlan{});
    for (int i = 0; i < g->n_nodes; ++i) {
        p.index[g->nodes[i]] = i;
    }
    std::unordered_set<const wsp_ggml_tensor *> split;   // origins not gathered yet
    std::unordered_set<const wsp_ggml_tensor *> ever;    // origins (gathered or not)
    std::unordered_set<const wsp_ggml_tensor *> written; // memory outside the graph it writes
    for (int i = 0; i < g->n_nodes; ++i) {
        wsp_ggml_tensor * n   = g->nodes[i];
        NodePlan &        np  = p.nodes[(size_t) i];
        wsp_ggml_tensor * in  = n->src[1];
        const bool        out = p.index.count(in) == 0; // in: from outside the graph
        // an origin's input is the main member's whole (sent) or memory from outside that this
        // graph has not written (the members' copies are made as the run starts)
        bool origin = n->op == WSP_GGML_OP_MUL_MAT && graph.spreadable(n->src[0]) && in != nullptr &&
                      ever.count(in) == 0 && !(out && written.count(storage_of(in)) != 0);
        Ranges r;
        if (origin) {
            r          = partition::ranges(graph.proportions, n->src[0]->ne[1], 1); // Note [partition]
            int served = 0;
            for (const Range & x : r) {
                served += x.second > x.first ? 1 : 0;
            }
            origin = served > 1; // else the main member computes it whole
        }
        if (origin) {
            np.take[0] = Take{ Take::ROWS, 1, r };
            np.out     = State{ State::SPLIT, 0, r, p.n_origins++, 1, 1 };
            if (!out) {
                np.reduce_before.push_back(in); // sent (to each member once: the runner keeps it)
            }
            np.gather = i == g->n_nodes - 1 || (n->flags & WSP_GGML_TENSOR_FLAG_OUTPUT);
            split.insert(n);
            ever.insert(n);
            continue;
        }
        np.out.kind = State::MAIN;
        for (wsp_ggml_tensor * s : n->src) {
            if (s != nullptr && split.erase(s) != 0) {
                np.gather_before.push_back(s); // to the main member
                p.n_all_gathers++;
            }
        }
        if (!is_view_op(n->op) && n->view_src != nullptr && p.index.count(n->view_src) == 0) {
            written.insert(n->view_src);
        }
    }
    return p;
}

uint64_t structure_of(const wsp_ggml_cgraph * g) {
    uint64_t                                         h = 1469598103934665603ull; // FNV-1a
    std::unordered_map<const wsp_ggml_tensor *, int> index;
    auto                                             mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (int i = 0; i < g->n_nodes; ++i) {
        const wsp_ggml_tensor * n = g->nodes[i];
        index[n]                  = i;
        mix((uint64_t) n->op);
        mix((uint64_t) n->type);
        for (const wsp_ggml_tensor * s : n->src) {
            auto it = s != nullptr ? index.find(s) : index.end();
            mix(s == nullptr ? 0 : it != index.end() ? (uint64_t) it->second + 1 : (uintptr_t) storage_of(s));
        }
    }
    return h;
}

} // namespace wsp::allgpu::tp
