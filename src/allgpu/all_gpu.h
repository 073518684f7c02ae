#pragma once

// Note [all-GPU device]: one GPU-type device over the GPU devices (members) of a reg, so that a
// client that picks one device uses all of them.
//  - Buffer type: its buffers are the main member's own buffers (the main member is the first),
//    so everything the client allocates through it is ordinary memory of that device: the
//    members' kernels, the scheduler's placement and the client's reads and writes work
//    unchanged. It only watches writes to them (a weight written again drops its pieces).
//  - Which weights spread is found from the graphs, not at allocation: a mat-mul whose weight
//    (src0, or src1 in a convolution) is a whole matrix in a weights buffer of the main member
//    (or all of a kernel read as one) is spread by the graph's plan, and each other member gets a
//    piece of it (its rows or its columns by tensor_split), copied once; the main member reads
//    its own rows and columns in the weight itself. The weight stays whole
//    for its other readers (get_rows of an embedding, a view of a positional table), which an
//    allocation-time guess from shapes cannot know.
//  - Backend: plans each graph (Note [tensor parallelism], else Note [row split plan] in plan.h)
//    and runs the plan's member graphs on the members' streams, ordered by events; what it built
//    for a graph is kept for the next graph like it (Note [kept member graphs] in runner.h).
//  - Cost: the main member holds every weight, the others their pieces of the spread ones. Less
//    memory needs the weight's main copy given up, which breaks its other readers; not done.
//
// The rooms: device.cpp (the reg, the device and its shares, the public functions), watched.cpp
// (the buffer type), weights.cpp (the weights' pieces), caches.cpp (sharded caches),
// replicas.cpp (results kept on every member, Note [member replicas]), cache_views.cpp (how a
// view lies on a sharded cache's parts), backend.cpp
// (a graph planned and run), plan.{h,cpp} (the tensor-parallel and row split plans),
// runner.{h,cpp} (running plans, builds kept across calls), graph_key.{h,cpp} (what makes two
// graphs the same build), counters.cpp (Note [all-GPU counters]).

#include "ggml-all-gpu.h"
#include "ggml-backend-impl.h"

#include "../backend/counters.h"
#include "../core/log.h"
#include "../race/race.h"
#include "plan.h"

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace wsp::allgpu {

// a weight's piece on one member for tensor parallelism (Note [tensor parallelism] in plan.h):
// the whole weight, some of its rows or some of its columns, copied once into the member's memory
enum class PieceKind { WHOLE, ROWS, COLUMNS };

struct Piece {
    wsp_ggml_context *        ctx         = nullptr; // owned: holds tensor
    wsp_ggml_backend_buffer_t buffer      = nullptr; // owned
    wsp_ggml_tensor *         tensor      = nullptr;
    const void *              weight_data = nullptr;   // the weight it was made of, to tell a new
                                                       // tensor at a reused address apart
    wsp_ggml_backend_buffer_t weight_buffer = nullptr; // where the weight lives (forget_buffer)
    int                       member        = 0;
    // the making thread's clock once its bytes were copied: another thread that takes the piece
    // (under the device's mutex, which orders them) joins it, so emulated devices'
    // happens-before checker sees that ordering too (Note [happens-before checker])
    race::VectorClock made;
};

// a cache kept sharded (Note [sharded caches] in plan.h): member m's part of every block
struct ShardedCache {
    tp::Layout                layout;           // origin -1: kept from the graph that made it
    std::vector<Piece>        pieces;           // per member, 1-D
    const void *              data   = nullptr; // the root's memory when sharded
    wsp_ggml_backend_buffer_t buffer = nullptr; // the root's buffer (forget_buffer)
};

// Note [member replicas] (replicas.cpp): a result that every member computed whole (REPL) and
// that the graph gives out, kept on each member beside the caller's copy on the main member, so
// that a later graph of the same backend that reads it finds it there instead of being sent it
// (whisper's front end output read by its encoder, the encoder output by the cross graph)
struct Replica {
    const void *       owner    = nullptr; // the runner whose members' streams write and read it
    const void *       made_for = nullptr; // the caller's memory it was made for
    size_t             bytes    = 0;
    wsp_ggml_type      type     = WSP_GGML_TYPE_F32;
    int64_t            ne[WSP_GGML_MAX_DIMS]{};
    std::vector<Piece> copies; // per member ([0] unused: the caller's memory is the main member's)
    // the caller's bytes the copies equal now (queued on the members' streams in order), NULL when
    // they may not: a write to those bytes makes it NULL
    const void * of = nullptr;
};

struct Device {
    wsp_ggml_backend_reg_t              member_reg = nullptr;
    std::vector<wsp_ggml_backend_dev_t> members;       // main first
    std::vector<float>                  tensor_split;  // per device of member_reg; set under mutex
    std::vector<float>                  default_split; // what tensor_split was when the device was made
    std::string                         name;
    // the description by the shares, latest last; earlier ones are kept (a few bytes each) because
    // clients may hold the pointer get_description gave them
    std::list<std::string>       descriptions;
    wsp_ggml_backend_device      dev{};
    wsp_ggml_backend_reg         reg{};
    wsp_ggml_backend_buffer_type buft{};

    // the weights' pieces (the one store of their copies), guarded by mutex
    std::recursive_mutex mutex; // recursive: a weight read while it is held may look at caches
    std::map<std::tuple<const wsp_ggml_tensor *, int, PieceKind, int64_t, int64_t>, Piece> pieces;
    std::set<std::string>                                     said; // what the log was told once
    std::unordered_map<const wsp_ggml_tensor *, ShardedCache> caches;
    wsp_ggml_backend_all_gpu_traffic                          traffic{}; // guarded by mutex
    wsp_ggml_backend_all_gpu_graph_cb graph_cb    = nullptr;             // with its user data, guarded by mutex
    void *                            graph_cb_ud = nullptr;
    // bumped whenever a piece or a sharded cache goes or a cache is sharded anew: member graphs
    // built before read memory that may be gone (Note [kept member graphs] in runner.h)
    std::atomic<uint64_t> generation{ 0 };

    // Note [all-GPU counters]: its own graph computes and plans, and its members' work in its calls
    Counters                               counters;
    std::mutex                             calls_mutex;
    int                                    calls = 0;  // entry points running now, on every thread
    std::vector<wsp_ggml_backend_counters> calls_base; // the members' counters when the first began

    wsp_ggml_backend_dev_t main() const { return members[0]; }

    // weight w's piece on member m (kind, and the rows or columns [begin, end)), made on first use;
    // NULL (logged) when it cannot be made
    wsp_ggml_tensor * piece_of(const wsp_ggml_tensor * w, int m, PieceKind kind, int64_t begin, int64_t end);
    // b is a buffer of this device's buffer type
    bool owns(wsp_ggml_backend_buffer_t b);
    // the layout root r is sharded with, NULL if it is not
    const tp::Layout * cache_layout(const wsp_ggml_tensor * r);
    // member m's part of sharded root r
    wsp_ggml_tensor * cache_piece(const wsp_ggml_tensor * r, int m);
    // shards r by L from the main member's copy (synchronously); false, logged, on failure
    bool shard(const wsp_ggml_tensor * r, const tp::Layout & L);
    // the main member's copy of r (if sharded) made whole again from the parts (the members'
    // queued work must be done); drop: the parts go too
    void unshard(const wsp_ggml_tensor * r, bool drop);
    // logs msg at info level the first time it comes
    void say_once(const std::string & msg);
    // w (or every tensor of buffer b) changed: its pieces go
    void forget(const wsp_ggml_tensor * w);
    void forget_buffer(wsp_ggml_backend_buffer_t b, bool with_caches = true);
    // buffer b is cleared to v: so are the parts of the caches sharded from it
    void clear_caches(wsp_ggml_backend_buffer_t b, uint8_t v);
    // Note [new shares]: tensor_split becomes `shares` (checked by the caller); everything laid out
    // by the old shares goes: pieces, and sharded caches (made whole first)
    void set_shares(const std::vector<float> & shares);

    // Note [member replicas]: owner's replica of t's memory (same bytes, type and shape), made
    // where create is set and there is room (at most MAX_REPLICAS); NULL otherwise
    static constexpr size_t MAX_REPLICAS = 8;
    Replica *               replica_for(const void * owner, const wsp_ggml_tensor * t, bool create);
    // r (may be NULL) equals the caller's bytes at data now
    bool current(const Replica * r, const void * data);
    // the caller's bytes [lo, lo + n) were written: the replicas of any of them are stale
    void stale(const void * lo, size_t n);
    // the owner is gone: its replicas too
    void               drop_replicas(const void * owner);
    std::list<Replica> replicas; // guarded by mutex
};

// Note [all-GPU counters]: the device counts its own graph computes (calls on its backends) and
// the plans it builds (a plan, tensor-parallel or the row split's, and one member graph per
// member),
// and adds what its members were asked to do while one of its entry points (backend or buffer
// calls that drive members) ran: their kernels, device graphs, host waits and allocations, the
// members' counters after less before. Calls that overlap, nested on one thread or on several
// threads at once, make one window: the members are read when the first begins and when the last
// ends, so their work is counted once, and lands when no call is running. The members' counters
// cannot tell callers apart: work that someone else asks of a member directly while a window is
// open (another client of SIM0, say) is counted here too. So the figures are exact when the
// members are used only through this device, or not at the same time.
class MemberWork {
public:
    explicit MemberWork(Device & d);
    ~MemberWork();
    MemberWork(const MemberWork &)             = delete;
    MemberWork & operator=(const MemberWork &) = delete;

private:
    Device & d_;
};

// the all-GPU reg over reg's GPU devices, NULL where it has fewer than two (or is one itself)
wsp_ggml_backend_reg_t make_reg(wsp_ggml_backend_reg_t reg);
bool                   is_all_gpu_reg(wsp_ggml_backend_reg_t reg);
// the reg an all-GPU reg spans
wsp_ggml_backend_reg_t member_reg(wsp_ggml_backend_reg_t all_reg);

Device & device_of(wsp_ggml_backend_dev_t dev);

// the buffer type's interface: the main member's buffers, watched (watched.cpp)
wsp_ggml_backend_buffer_type_i watched_buffer_type_iface();
// the bytes of d's weights buffers (they live on the main member)
size_t main_weight_bytes(const Device & d);
// writes t's first `size` bytes (t in a watched buffer) through the buffer's own interface: its
// spread copies stay (a sharded cache's bytes coming home)
void set_unwatched(const wsp_ggml_tensor * t, const void * data, size_t size);

// frees a piece's buffer and context (weights.cpp)
void free_piece(Piece & p);

// the device's backend (backend.cpp)
wsp_ggml_backend_t backend_init(Device & d);

// a mat-mul weight the backend spreads: a whole matrix in a weights buffer of the main member, or
// a reshape of all of such a weight into a matrix (a convolution's kernel as its mat-mul reads it)
bool spreadable(const Device & d, const wsp_ggml_tensor * w);

} // namespace wsp::allgpu
