#pragma once

// Note [tensor parallelism]: how the all-GPU device runs a transformer graph Megatron-style.
//
// The plan (plan.cpp) gives every node of the graph a state, found from the graph alone:
//  - REPL: every member computes it whole (layer norms, residual adds, the graph's inputs);
//  - SPLIT(dim, ranges): member m holds indices ranges[m] of dimension dim;
//  - PARTIAL: every member holds a whole-shaped term; the value is their sum.
// A mat-mul whose weight is a spreadable matrix (Note [all-GPU device]) and whose input is REPL
// takes the weight's rows by member: its result is SPLIT on dim 0 (an "origin"). Reshapes,
// permutes, casts and per-row or per-head ops carry a split along (a reshape of the rows into
// [head size, heads] moves it onto the heads); attention (mat-muls of two SPLIT operands,
// soft_max_ext, flash_attn_ext) runs on each member's own heads. A mat-mul whose weight is
// spreadable and whose input is SPLIT on dim 0 (the weight's columns) takes the weight's columns
// by the same ranges: its result is PARTIAL, and one all-reduce makes it REPL before its first
// reader. So a whisper encoder layer moves two all-reduces of [n_state, n_tokens] and nothing
// else (a decoder layer three: its cross-attention is a block of its own); its convolutions split
// by channels (Note [split convolutions] in plan.cpp), one all-reduce. A split result the
// graph gives out (its last node, an output) is gathered into the main member's memory; a node
// that reads few rows of a big table (get_rows of an embedding) runs on the main member alone
// (MAIN) and is sent to the others, so the table is not copied to every member.
//
// Units: an origin's ranges are whole multiples of a unit (initially 1 row). When a later op
// needs coarser boundaries (a reshape into heads needs whole heads, a column split of a quantized
// weight whole blocks, two operands the same ranges), the plan raises that origin's unit and
// starts again; ranges follow tensor_split per unit.
//
// Note [all-gathered sources]: an op with no rule for a split source (Note [split rules] in
// plan.cpp), or whose rule refuses how it is split (a norm over split rows, a soft_max along
// them, a view of part of it), has its split sources all-gathered first: every member receives
// the others' parts and the node, and what reads it, computes whole (REPL), as a PARTIAL source
// is all-reduced first. So an op without a rule costs bytes, not the plan.
//
// A graph that does not fit (a sharded cache read whole, a write into memory outside the graph
// that is not a cache in the device's own buffers, no mat-mul to split) gets no tensor-parallel
// plan, and the reason: the caller plans it by the row split instead (Note [row split plan]) and
// logs that once.
//
// Note [row split plan]: the plan every graph fits, run by the same runner. Each mat-mul whose
// weight is spreadable and whose input is whole on the main member is an origin: member m
// computes the weight's rows ranges[m] (tensor_split over every member, a member without a
// share computes none of it). Every other node runs on the main member alone (MAIN), after the
// split results it reads are gathered there; an origin's input is sent from the main member
// before it (once per member). Sharded caches are made whole on the main member first, and the
// graph's writes land in its own memory there, as on one device. So the row split moves each
// origin's input out and its result back, and needs no scheduler, no copy of a weight beside
// its pieces and no tensor of the caller's changed.

#include "ggml.h"

#include "../core/tensor_roles.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace wsp::allgpu::tp {

using Range  = std::pair<int64_t, int64_t>; // [begin, end)
using Ranges = std::vector<Range>;          // one per member

struct State {
    // MAIN: only the main member computes it (it reads a table too big to copy to every member
    // for the little it takes, an embedding's rows); sent to the others before their first read
    enum Kind : uint8_t { REPL, SPLIT, PARTIAL, MAIN };
    Kind   kind = REPL;
    int    dim  = -1; // SPLIT
    Ranges ranges;    // SPLIT: per member, along dim
    int    origin = -1;
    // elements of dim per element of the origin's rows, as num / den (a reshape into heads
    // divides it by the head size, merging heads back into rows multiplies it again)
    int64_t num = 1, den = 1;
    int64_t fixed_unit = 0; // origin < 0 (a cache's split kept from an earlier graph): the unit
};

// Note [sharded caches]: memory outside the graph that the graph writes with split data (a KV
// cache, whisper's cross-attention cache, a padded K/V scratch) is kept sharded: seen as blocks
// of W elements (a token's row of K, a layer's [n_ctx, n_state] of transposed V), member m keeps
// elements parts[m] of every block in memory of its own, so the cache is written and read where
// its heads are computed and never moves. A later graph finds the layout again; the main
// member's whole copy is brought up to date only when something else reads it.
struct Layout {
    int64_t W = 0;            // elements per block
    Ranges  parts;            // per member, within each block
    int64_t unit   = 0;       // the parts' boundaries are multiples of this
    int     origin = -1;      // made by this plan's origin (else kept from an earlier graph)
    int64_t num = 1, den = 1; // elements of a block per element of the origin's rows
};

// how a view of a sharded root reads member m's piece: the view's dim `dim` cut to ranges[m]
struct ViewMap {
    int     dim    = -1;
    int64_t stride = 0; // of dim, in elements of the root
    Ranges  ranges;
};

// how a view lies on a sharded root's parts
enum class ViewFit {
    MAPPED,       // each member reads its own part (out is set)
    OFF_PARTS,    // the split dim is found, but the parts do not fall on its boundaries (out.stride
                  // says which: whole heads)
    ACROSS_PARTS, // the view reads across the parts
};

// (cache_views.cpp) how a view (ne, nb and offset in bytes, of elements of es bytes) of a root
// with layout L lies on its parts; out is set where it is MAPPED (its stride also where OFF_PARTS)
ViewFit map_view_fit(const Layout & L, const int64_t * ne, const size_t * nb, size_t offs, size_t es, ViewMap & out);

// maps a view (ne, nb and offset in bytes, of elements of es bytes) of a root with layout L:
// false where it reads across the parts
bool map_view(const Layout & L, const int64_t * ne, const size_t * nb, size_t offs, size_t es, ViewMap & out);

// member m's view of its piece: ne, nb (bytes) and offset for the view mapped by vm
void local_view(const Layout & L, int m, const ViewMap & vm, const int64_t * ne, const size_t * nb, size_t offs,
                size_t es, int64_t * lne, size_t * lnb, size_t * loffs);

// how a node reads one source on member m
struct Take {
    enum How : uint8_t {
        AS_IS,   // the source's own local tensor
        SLICE,   // a REPL source viewed at ranges[m] along dim
        ROWS,    // a spreadable weight's rows ranges[m]
        COLUMNS, // a spreadable weight's columns ranges[m]
    };
    How    how = AS_IS;
    int    dim = -1;
    Ranges ranges;
};

struct NodePlan {
    State                          out;
    bool                           gather = false;                // a split result the graph gives out: to main
    const wsp_ggml_tensor *        cache  = nullptr;              // the sharded root it views or writes
    ViewMap                        cache_view;                    // how (a write: its destination's view)
    int64_t                        cache_ne[WSP_GGML_MAX_DIMS]{}; // that view of the root
    size_t                         cache_nb[WSP_GGML_MAX_DIMS]{};
    size_t                         cache_offs = 0;
    bool                           skip       = false; // a cache view only written through
    Take                           take[WSP_GGML_MAX_SRC];
    std::vector<wsp_ggml_tensor *> reduce_before; // PARTIAL (all-reduced) and MAIN (sent) sources
    // Note [all-gathered sources]: SPLIT sources made whole on every member first, for an op
    // with no rule for them (their parts sent to every member; the node then computes whole)
    std::vector<wsp_ggml_tensor *> gather_before;
};

struct Plan {
    std::vector<NodePlan>                            nodes; // per graph node
    std::unordered_map<const wsp_ggml_tensor *, int> index; // graph node -> its index
    std::vector<wsp_ggml_tensor *>                   reduce_at_end;
    int                                              n_origins = 0; // mat-muls split by rows
    int         n_all_gathers = 0;                               // sources all-gathered (Note [all-gathered sources])
    std::string why_not;                                         // set: no plan (the reason)
    std::unordered_map<const wsp_ggml_tensor *, Layout> layouts; // caches sharded from this graph on
    // Note [row split plan]: gather_before gathers to the main member only, and split ranges may
    // be empty (a member without a share)
    bool row_split = false;
    bool ok() const { return why_not.empty() && (n_origins > 0 || row_split); }
};

struct Graph {
    const wsp_ggml_cgraph *                      g;
    std::vector<float>                           proportions; // per member, > 0
    std::function<bool(const wsp_ggml_tensor *)> spreadable;  // a weight whose rows or columns can go per member
    // the layout a root was sharded with by an earlier graph, NULL if none
    std::function<const Layout *(const wsp_ggml_tensor *)> sharded;
    // memory outside the graph that may be kept sharded (the device's own buffers)
    std::function<bool(const wsp_ggml_tensor *)> keepable;
};

// units: the origins' units to start from (those an alike graph ended with), updated; NULL: none
Plan make_plan(const Graph & graph, std::unordered_map<int, int64_t> * units = nullptr);

// the row split's plan of the graph (Note [row split plan]); graph.sharded is not asked: the
// caller makes the graph's sharded caches whole on the main member before each run
Plan row_split_plan(const Graph & graph);

// the graph's structure (ops, types, which node or outside tensor each source is) without shapes:
// a decoder's graphs are alike from step to step, so their plans start from the same units
uint64_t structure_of(const wsp_ggml_cgraph * g);

// ranges of n indices in whole units over members by proportions, by Note [partition]
// (src/split/partition.h); ok = false when n is not whole units or a range is empty
Ranges spread(int64_t n, int64_t unit, const std::vector<float> & proportions, bool * ok);

} // namespace wsp::allgpu::tp
