#pragma once

// The host NCCL's shared objects (nccl.cpp issues calls, nccl_exec.cpp runs them on the
// streams): a call as its command needs it, the clique of communicators with the calls known at
// issue and the meetings of their commands, all guarded by one mutex. Note [host NCCL].

#include "nccl.h"
#include "runtime.h"
#include "target.h"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace wsp::host_target::nccl {

enum class Kind { SEND, RECV, ALL_GATHER, ALL_REDUCE, BROADCAST, REDUCE_SCATTER };

inline const char * kind_name(Kind k) {
    switch (k) {
        case Kind::SEND: return "ncclSend";
        case Kind::RECV: return "ncclRecv";
        case Kind::ALL_GATHER: return "ncclAllGather";
        case Kind::ALL_REDUCE: return "ncclAllReduce";
        case Kind::BROADCAST: return "ncclBroadcast";
        case Kind::REDUCE_SCATTER: return "ncclReduceScatter";
    }
    return "nccl?";
}

inline size_t type_size(ncclDataType_t t) {
    static const size_t sizes[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2 };
    return sizes[(int) t];
}

inline const char * type_name(ncclDataType_t t) {
    static const char * names[] = { "int8",   "uint8",   "int32",   "uint32",  "int64",
                                    "uint64", "float16", "float32", "float64", "bfloat16" };
    return names[(int) t];
}

inline const char * op_name(ncclRedOp_t op) {
    static const char * names[] = { "sum", "prod", "max", "min", "avg" };
    return names[(int) op];
}

// guards every clique's state; notified whenever a meeting or a rejection changes
std::mutex &              state_mutex();
std::condition_variable & state_cv();

// one call as its stream command needs it
struct Op {
    Kind           kind;
    int            rank, device;
    const void *   send;
    void *         recv;
    size_t         count; // per rank: sendcount of an all-gather, recvcount of a reduce-scatter
    ncclDataType_t type;
    ncclRedOp_t    redop;
    int            peer; // the partner of a send or recv, the root of a broadcast
    cudaStream_t   stream;

    bool p2p() const { return kind == Kind::SEND || kind == Kind::RECV; }

    size_t send_bytes(int ranks) const {
        const size_t b = count * type_size(type);
        switch (kind) {
            case Kind::RECV: return 0;
            case Kind::REDUCE_SCATTER: return b * (size_t) ranks;
            case Kind::BROADCAST: return rank == peer ? b : 0;
            default: return b;
        }
    }
    size_t recv_bytes(int ranks) const {
        const size_t b = count * type_size(type);
        return kind == Kind::SEND ? 0 : kind == Kind::ALL_GATHER ? b * (size_t) ranks : b;
    }
    // partners agree: a send and its recv on count and type, a collective's calls on everything
    bool agrees(const Op & o) const {
        if (p2p()) {
            return count == o.count && type == o.type;
        }
        const bool reduces = kind == Kind::ALL_REDUCE || kind == Kind::REDUCE_SCATTER;
        return kind == o.kind && count == o.count && type == o.type && (!reduces || redop == o.redop) &&
               (kind != Kind::BROADCAST || peer == o.peer);
    }
    std::string shape() const {
        std::string s = std::string(kind_name(kind)) + " of " + std::to_string(count) + " x " + type_name(type);
        if (kind == Kind::ALL_REDUCE || kind == Kind::REDUCE_SCATTER) {
            s += std::string(" (") + op_name(redop) + ")";
        } else if (kind == Kind::BROADCAST) {
            s += " from root " + std::to_string(peer);
        }
        return s;
    }
    std::string who() const { return "rank " + std::to_string(rank) + " (device " + std::to_string(device) + ")"; }
};

// the calls of one number as known at issue
struct Issued {
    std::vector<std::unique_ptr<Op>> by_slot; // p2p: [0] the send, [1] the recv; collectives: by rank
    int                              count = 0;
    std::string                      rejected; // why the number failed at issue
};

// the commands of one number meeting on the streams, per run (graph replays run commands again)
struct Meeting {
    std::vector<const Op *> arrived; // by slot, as Issued
    int                     present = 0, left = 0;
    bool                    claimed = false; // the data is moving: no timeout from now
    bool                    done    = false;
    std::string             failed;
};

struct Clique {
    int              size;
    std::vector<int> devices;

    // issue: p2p numbers by channel (from * size + to), collective numbers by rank
    std::vector<uint64_t>                                  sends, recvs;
    std::vector<std::map<uint64_t, Issued>>                p2p_issued;
    std::vector<uint64_t>                                  collectives;
    std::map<uint64_t, Issued>                             coll_issued;
    std::map<std::tuple<int, uint64_t, uint64_t>, Meeting> p2p_meetings;  // (channel, number, run)
    std::map<std::pair<uint64_t, uint64_t>, Meeting>       coll_meetings; // (number, run)
    std::vector<std::string>                               last_error;    // by rank

    explicit Clique(std::vector<int> devs)
        : size((int) devs.size()), devices(std::move(devs)), sends((size_t) size * size), recvs((size_t) size * size),
          p2p_issued((size_t) size * size), collectives((size_t) size), last_error((size_t) size) {}

    int channel(const Op & op) const {
        return op.kind == Kind::SEND ? op.rank * size + op.peer : op.peer * size + op.rank;
    }
    // where the op sits in its Issued and Meeting
    static size_t slot(const Op & op) { return op.p2p() ? (op.kind == Kind::SEND ? 0 : 1) : (size_t) op.rank; }
    size_t        slots(const Op & op) const { return op.p2p() ? 2 : (size_t) size; }
    std::map<uint64_t, Issued> & issued(const Op & op) {
        return op.p2p() ? p2p_issued[(size_t) channel(op)] : coll_issued;
    }
    // why the op's number failed at issue, "" when it did not (state_mutex held)
    std::string rejected_at_issue(const Op & op, uint64_t seq) {
        auto &     map = issued(op);
        const auto it  = map.find(seq);
        return it == map.end() ? "" : it->second.rejected;
    }
};

// one issued call: its clique, itself and its number
struct Part {
    std::shared_ptr<Clique> clique;
    Op                      op;
    uint64_t                seq;
};

// "" when the op's buffers lie inside live device allocations, else what is wrong
std::string buffer_problem(const Op & op, int ranks);

// The command of the parts one stream got from a bare call or a group: all of them meet their
// partners together (as NCCL fuses a group's calls), `run` counting the command's runs.
cudaError_t run_parts(const std::vector<Part> & parts, uint64_t run, std::string & message);

} // namespace wsp::host_target::nccl
