#pragma once

// The runner of tensor-parallel plans (Note [tensor parallelism] in plan.h): on each member, a graph
// of local tensors (its pieces of the split ones, its own copies of the REPL ones; the main
// member's REPL and PARTIAL results land in the graph's own memory, so they need no copy back),
// run in segments between all-reduces. All asynchronous: each member's stream orders its own
// work, events and the all-reduce's copies order the streams among themselves.
//
// Note [kept member graphs]: what the runner builds for a graph (member graphs, their
// allocations, the all-reduces' tensors and sums, the inputs and the gathers) is kept under the
// graph's key (Note [graph keys] in graph_key.h), so a graph seen before, a repeated encode or a
// decoder step whose shapes repeat (its nodes may be elsewhere: Note [moved nodes] in
// kept.cpp), runs without planning, building or allocating, and without a host wait: the
// members' memory is ordered by events. A graph that tensor parallelism does not fit is kept
// with its row split plan (Note [row split plan] in plan.h). A graph is kept from its second sighting on (Note
// [graphs seen once]). At most CAPACITY builds are kept; the least recently run of those never
// found again goes first, else the least recently run. Builds share each member's compute
// buffer, one allocator per member: they run one after another on the members' streams, so their
// tensors may overlap. When a build grows that buffer, or a weight's piece or a sharded cache goes
// (the device's generation moves), the other builds read memory that is gone and are dropped.
//
// What keeping costs: a newly kept build's tensors land in host memory touched for the first
// time (about 0.6 ms of page faults per build over 2 members on this project's virtual machine)
// until CAPACITY builds are kept and the ones that go hand their memory on.

#include "ggml-alloc.h"
#include "ggml-backend.h"

#include "graph_key.h"
#include "plan.h"

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_set>
#include <vector>

namespace wsp::allgpu {
struct Device;
struct Replica;
} // namespace wsp::allgpu

namespace wsp::allgpu::tp {

// what one run moved between the members, in bytes (the device adds it to its traffic)
struct Moved {
    size_t sent = 0, gathered = 0, all_reduce = 0, n_all_reduces = 0;
};

class Runner {
public:
    static constexpr size_t CAPACITY = 32;

    struct Build; // a graph's member graphs, kept

    Runner(Device & device, std::vector<wsp_ggml_backend_t> members);
    ~Runner();
    Runner(const Runner &)             = delete;
    Runner & operator=(const Runner &) = delete;

    // the build kept for graphs with this key, NULL if none (made the most recently used)
    Build * find(const GraphKey & key);
    // builds g's member graphs by plan (plan.ok(): tensor-parallel or the row split's) and keeps
    // them under key; NULL, with *status set (logged), where they cannot be built
    Build * add(GraphKey key, GraphKey alike, wsp_ggml_cgraph * g, const Plan & plan, wsp_ggml_status * status);
    // Note [grown shapes] (reshape.cpp): a build kept for a graph alike to g but for its shapes
    // (alike: alike_key_of(g)), made to run g in place, without a plan or a member graph built;
    // NULL where there is none or it cannot follow g's shapes (g is then planned and built)
    Build * reshaped(const GraphKey & alike, GraphKey key, const wsp_ggml_cgraph * g);
    // the build runs by the row split (Note [row split plan] in plan.h)
    static bool row_split(const Build & b);
    // points a build at where g's nodes are (g has the build's key; Note [moved nodes] in
    // kept.cpp); false where it cannot follow them (drop it, then add g anew)
    bool follow(Build & b, const wsp_ggml_cgraph * g);
    // drops a build (after the members' queued work)
    void drop(Build * b);
    // the members were synchronized by the device's backend: nothing queued reads a build
    void members_idle();
    // Note [joined members]: a run starts with every member's stream waiting for the main
    // member's work so far (what the client queued there: inputs, event waits) and ends with the
    // main member's stream waiting for every member's work (events), so waiting for the main
    // member waits for all of it: the device's synchronize is one host wait, not one per member,
    // and its events are the main member's (Note [all-GPU events] in device.cpp). False after a
    // run that failed.
    bool joined() const { return joined_; }
    // runs a build: its inputs sent, its segments and all-reduces queued, its results gathered
    wsp_ggml_status run(Build & b, Moved & moved);
    // after a run of b for g: what g's nodes wrote makes replicas of those bytes stale, and the
    // replicas b wrote are current if it ran (Note [member replicas] in replicas.cpp)
    void wrote(const Build & b, const wsp_ggml_cgraph * g, bool ran);

private:
    struct Member;
    struct Building;
    struct Boundary; // what an all-reduce or a send from the main member makes whole
    Device &                             device_;
    std::vector<wsp_ggml_backend_t>      backends_;
    std::vector<std::unique_ptr<Member>> members_;
    wsp_ggml_backend_all_reduce_t        fast_all_reduce_ = nullptr; // the member reg's own, if any
    // Note [graphs seen once]: the hashes of the keys of graphs built so far (at most SIGHTED,
    // then forgotten): a graph seen for the first time is built to run once, in the blocks of
    // the graph before it seen once; only a graph seen again is kept. A decoder whose every step
    // has new shapes (whisper.cpp's cache grows a position a step where it is not padded) then
    // builds each step in warm memory, as without a cache, and keeps none of them.
    // Note [grown shapes]: on unless WSP_GGML_ALL_GPU_RESHAPE=0 (for an A/B of the host time)
    bool                         reshape_on_ = true;
    static constexpr size_t      SIGHTED     = 4096;
    std::unordered_set<uint64_t> sighted_;
    // host memory for the builds' contexts: a build that goes hands its blocks on to the next one
    // made, whose tensors then land in pages touched before (a fresh block costs a page fault for
    // each page it touches, which on a virtual machine was most of a build's time)
    struct Block {
        std::unique_ptr<uint8_t[]> bytes;
        size_t                     size = 0;
    };
    static constexpr size_t           SPARE_BLOCKS = 16;
    std::vector<Block>                spare_; // before builds_: a build hands its blocks back as it goes
    Block                             take_block(size_t size);
    std::list<std::unique_ptr<Build>> builds_;            // most recently run first
    uint64_t                          generation_ = 0;    // the device's, when they were built
    bool                              idle_       = true; // nothing run since the members were waited for
    bool                              joined_     = true; // Note [joined members]

    // waits for every member's queued work (before a build it may read is freed or rebuilt)
    void            wait_members();
    void            drop_all();
    wsp_ggml_status build(Build & b, wsp_ggml_cgraph * g, const Plan & plan);
    wsp_ggml_status prepare_all_reduces(Build & b); // the boundaries' all-reduces, made once
    // reshape.cpp: what a build records of g for Note [grown shapes], and the reshaping itself
    void              remember_shapes(Build & b, const wsp_ggml_cgraph * g, const Plan & plan, Building & at);
    bool              reshape(Build & b, const wsp_ggml_cgraph * g, bool * touched); // touched: b changed
    wsp_ggml_tensor * local_of(Building & at, int m, const wsp_ggml_tensor * t);
    wsp_ggml_tensor * take(Building & at, int m, const wsp_ggml_tensor * src, const Take & how);
    wsp_ggml_tensor * make_node(Building & at, int m, const wsp_ggml_tensor * n, const NodePlan & np);
    wsp_ggml_tensor * cache_view(Building & at, int m, const NodePlan & np);
    Boundary          from_main(Building & at, const wsp_ggml_tensor * p, const NodePlan & reader);
    Boundary          all_reduced(Building & at, const wsp_ggml_tensor * p);
    Boundary          all_gather(Building & at, const wsp_ggml_tensor * p, const State & split, bool to_main);

    // boundaries.cpp: one boundary's copies (and an all-reduce's sums), queued after its segment
    bool cross(const Boundary & x, Moved & moved);
    bool all_reduce(const Boundary & x, Moved & moved);
    // member `waiter`'s later work comes after member m's work so far (an event; a synchronize
    // where the member has none): a copy into m's memory must not land before m is done with it
    void                                  order_after(int waiter, int m);
    std::vector<wsp_ggml_backend_event_t> events_; // per member, made on first use
};

} // namespace wsp::allgpu::tp
