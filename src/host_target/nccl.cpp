// NCCL on the host target: communicators from ncclCommInitAll (a clique, one rank per device),
// and the issue of calls: each is numbered and checked against its partners when it is issued (a
// bare call at once, a group at its outermost ncclGroupEnd), then becomes a command on its stream
// that nccl_exec.cpp runs. Note [host NCCL].

#include "nccl_impl.h"

#include "../core/log.h"

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <unordered_set>

// Note [host NCCL]: matching, and why nothing hangs.
//
// Issue. Each call is numbered when it is issued: the s-th send from rank a to rank b pairs with
// the s-th recv of b from a; the s-th collective of every rank forms one collective. When both
// sides of a number are known at issue, count and type (and op and root) must agree; a
// disagreement rejects the call that reveals it (ncclInvalidUsage, logged, nothing queued) and
// marks the number failed, so that a partner already queued fails as soon as its stream reaches
// it. At the outermost ncclGroupEnd a send or recv of the group whose partner was neither issued
// before nor is in the group is rejected too: one host thread driving several ranks must group
// both sides (as NCCL asks), and an unmatched call would otherwise only show after the timeout. A
// rejected group queues nothing, and its numbers are marked failed.
//
// Execution. A group's calls on one stream become one command (NCCL fuses them into one kernel:
// a ring of sends and recvs in a group must not wait on itself); a bare call is a command of its
// own. Commands run on the streams' workers (a thread per stream): the command registers its
// calls at their meetings, the one that completes a meeting moves its data (device memory is
// host memory here) while the others wait. A wait longer than WSP_GGML_CUDA_HOST_NCCL_TIMEOUT_MS
// (default 10000) milliseconds fails the meeting ("unmatched"), so that a partner arriving later
// fails at once; a failed command is reported by its stream's next synchronize, as a failed
// kernel is. A command run again by a graph replay meets its partners' runs of the same replay
// (runs are counted per command); a send and its recv captured into one graph whose replay runs
// them one after the other would time out. The ordering NCCL gives between the ranks' streams is
// not told to the race checker: the backend orders the buffers with events.

struct ncclComm {
    std::shared_ptr<wsp::host_target::nccl::Clique> clique;
    int                                             rank;
    int                                             device;
};

namespace wsp::host_target::nccl {
namespace {

// ---- errors and communicators

thread_local std::string thread_last_error;

std::unordered_set<ncclComm *> & live_comms() { // guarded by state_mutex()
    static std::unordered_set<ncclComm *> s;
    return s;
}

WSP_GGML_ATTRIBUTE_FORMAT(3, 4)
ncclResult_t report(ncclResult_t r, ncclComm * comm, const char * fmt, ...) {
    char    buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    WSP_LOG_ERROR("NCCL (host target): %s: %s\n", buf, ncclGetErrorString(r));
    thread_last_error = buf;
    if (comm != nullptr) {
        std::lock_guard<std::mutex> lock(state_mutex());
        if (live_comms().count(comm) != 0) {
            comm->clique->last_error[(size_t) comm->rank] = buf;
        }
    }
    return r;
}

bool is_live(ncclComm * comm) {
    std::lock_guard<std::mutex> lock(state_mutex());
    return comm != nullptr && live_comms().count(comm) != 0;
}

// ---- issue (state_mutex held)

// marks a number failed at issue, for the partners that will reach it
void reject_number(Clique & c, const Op & op, uint64_t seq, const std::string & why) {
    Issued & is = c.issued(op)[seq];
    is.by_slot.resize(c.slots(op));
    if (is.rejected.empty()) {
        is.rejected = why;
    }
    state_cv().notify_all();
}

// Numbers the op and records it; "" when it may be queued, else why it is rejected (it disagrees
// with a partner, a partner was rejected, or `reject` from the caller). A rejected op still uses
// its number, marked failed, so that its partners fail at once.
std::string number(Clique & c, const Op & op, const std::string & reject, uint64_t * seq) {
    *seq        = op.p2p() ? (op.kind == Kind::SEND ? c.sends : c.recvs)[(size_t) c.channel(op)]++
                           : c.collectives[(size_t) op.rank]++;
    Issued & is = c.issued(op)[*seq];
    is.by_slot.resize(c.slots(op));
    std::string why = reject;
    for (const auto & other : is.by_slot) {
        if (why.empty() && other != nullptr && !other->agrees(op)) {
            why = op.who() + "'s " + op.shape() + " #" + std::to_string(*seq) + " meets " + other->who() + "'s " +
                  other->shape();
        }
    }
    if (why.empty() && !is.rejected.empty()) {
        why = "its partner call was rejected: " + is.rejected;
    }
    is.by_slot[Clique::slot(op)] = std::make_unique<Op>(op);
    ++is.count;
    if (!why.empty()) {
        reject_number(c, op, *seq, why);
    } else if (is.count == (int) is.by_slot.size() && is.rejected.empty()) {
        c.issued(op).erase(*seq); // every call of the number agreed: nothing left to check
    }
    return why;
}

// a group's sends and recvs that nothing issued before nor in the group pairs with
std::vector<std::string> unmatched_in_group(const std::vector<Part> & parts) {
    using Key = std::pair<Clique *, int>; // (clique, channel)
    std::map<Key, uint64_t> in_group[2];  // [send, recv] counts
    for (const Part & p : parts) {
        if (p.op.p2p()) {
            ++in_group[Clique::slot(p.op)][{ p.clique.get(), p.clique->channel(p.op) }];
        }
    }
    std::vector<std::string> out;
    std::map<Key, uint64_t>  seen[2];
    for (const Part & p : parts) {
        if (!p.op.p2p()) {
            continue;
        }
        const Clique & c    = *p.clique;
        const Key      key  = { p.clique.get(), c.channel(p.op) };
        const size_t   mine = Clique::slot(p.op), theirs = 1 - mine;
        const auto &   issued_mine   = mine == 0 ? c.sends : c.recvs;
        const auto &   issued_theirs = mine == 0 ? c.recvs : c.sends;
        const uint64_t number        = issued_mine[(size_t) key.second] + seen[mine][key]++;
        const uint64_t partners      = issued_theirs[(size_t) key.second] + in_group[theirs][key];
        if (number >= partners) {
            out.push_back(p.op.who() + "'s " + p.op.shape() + (mine == 0 ? " to rank " : " from rank ") +
                          std::to_string(p.op.peer) + " (#" + std::to_string(number) + ") has no matching " +
                          (mine == 0 ? "ncclRecv" : "ncclSend") + ": rank " + std::to_string(p.op.peer) + " issued " +
                          std::to_string(partners) + " so far");
        }
    }
    return out;
}

// ---- commands

// host threads issue one at a time, so that numbers follow each stream's order
std::mutex & issue_mutex() {
    static std::mutex m;
    return m;
}

// one command for the parts of one stream
ncclResult_t enqueue_parts(std::vector<Part> parts) {
    std::vector<race::Range> reads, writes;
    std::string              what;
    for (const Part & p : parts) {
        const uintptr_t s = reinterpret_cast<uintptr_t>(p.op.send), r = reinterpret_cast<uintptr_t>(p.op.recv);
        if (const size_t n = p.op.send_bytes(p.clique->size); n > 0) {
            reads.push_back({ s, s + n });
        }
        if (const size_t n = p.op.recv_bytes(p.clique->size); n > 0) {
            writes.push_back({ r, r + n });
        }
        what += (what.empty() ? p.op.who() + ": " : ", ") + p.op.shape();
    }
    const cudaStream_t stream = parts[0].op.stream;
    auto               runs   = std::make_shared<std::atomic<uint64_t>>(0);
    auto               shared = std::make_shared<const std::vector<Part>>(std::move(parts));
    const Work work = [shared, runs](std::string & message) { return run_parts(*shared, runs->fetch_add(1), message); };
    const cudaError_t err = enqueue(stream, what, work, std::move(reads), std::move(writes));
    if (err != cudaSuccess) {
        return report(ncclUnhandledCudaError, nullptr, "%s: the stream refused the command (CUDA error %d)",
                      what.c_str(), (int) err);
    }
    return ncclSuccess;
}

// issues a group's calls (or one bare call): numbered and queued, or all rejected
ncclResult_t issue(std::vector<Part> parts, bool group) {
    std::lock_guard<std::mutex> issuing(issue_mutex());
    std::vector<std::string>    problems;
    {
        std::lock_guard<std::mutex> lock(state_mutex());
        std::string                 reject;
        if (group) {
            problems = unmatched_in_group(parts);
            if (!problems.empty()) {
                reject = "rejected with its group: " + problems[0];
            }
        }
        for (size_t i = 0; i < parts.size(); ++i) {
            const std::string why = number(*parts[i].clique, parts[i].op, reject, &parts[i].seq);
            if (!why.empty() && reject.empty()) { // the calls numbered before it go too
                reject = "rejected with its group: " + why;
                problems.push_back(why);
                for (size_t j = 0; j < i; ++j) {
                    reject_number(*parts[j].clique, parts[j].op, parts[j].seq, reject);
                }
            }
        }
    }
    if (!problems.empty()) {
        for (const std::string & p : problems) {
            report(ncclInvalidUsage, nullptr, "%s", p.c_str());
        }
        return ncclInvalidUsage;
    }
    // a command per stream, the calls in their order
    std::vector<std::vector<Part>> commands;
    for (Part & p : parts) {
        auto it = std::find_if(commands.begin(), commands.end(),
                               [&](const std::vector<Part> & c) { return c[0].op.stream == p.op.stream; });
        if (it == commands.end()) {
            commands.emplace_back();
            it = commands.end() - 1;
        }
        it->push_back(std::move(p));
    }
    ncclResult_t result = ncclSuccess;
    for (auto & c : commands) {
        if (const ncclResult_t r = enqueue_parts(std::move(c)); r != ncclSuccess) {
            result = r;
        }
    }
    return result;
}

// ---- calls and groups

thread_local int               group_depth = 0;
thread_local std::vector<Part> group_parts;

// the checks of one call's arguments, then into the group or issued
ncclResult_t call(ncclComm * comm, Op op) {
    const char * name = kind_name(op.kind);
    if (!is_live(comm)) {
        return report(ncclInvalidArgument, nullptr, "%s: comm %p is not a live communicator", name, (void *) comm);
    }
    const int ranks = comm->clique->size;
    op.rank         = comm->rank;
    op.device       = comm->device;
    if ((int) op.type < 0 || (int) op.type >= (int) ncclNumTypes) {
        return report(ncclInvalidArgument, comm, "%s: datatype %d is not an NCCL type", name, (int) op.type);
    }
    if ((int) op.redop < 0 || (int) op.redop >= (int) ncclNumOps) {
        return report(ncclInvalidArgument, comm, "%s: op %d is not a reduction", name, (int) op.redop);
    }
    if (op.peer < 0 || op.peer >= ranks) {
        return report(ncclInvalidArgument, comm, "%s: %s %d is not a rank of the %d-rank communicator", name,
                      op.kind == Kind::BROADCAST ? "root" : "peer", op.peer, ranks);
    }
    const int sd = stream_device(op.stream);
    if (sd != op.device) {
        return report(ncclInvalidArgument, comm, "%s: %s: stream %p is %s%d, not of the rank's device", name,
                      op.who().c_str(), (void *) op.stream, sd < 0 ? "invalid " : "of device ", sd);
    }
    if (const std::string bad = buffer_problem(op, ranks); !bad.empty()) {
        return report(ncclInvalidArgument, comm, "%s: %s: %s", name, op.who().c_str(), bad.c_str());
    }
    Part p{ comm->clique, op, 0 };
    if (group_depth > 0) {
        group_parts.push_back(std::move(p));
        return ncclSuccess;
    }
    std::vector<Part> one;
    one.push_back(std::move(p));
    return issue(std::move(one), false);
}

Op make_op(Kind kind, const void * send, void * recv, size_t count, ncclDataType_t type, ncclRedOp_t redop, int peer,
           cudaStream_t stream) {
    return Op{ kind, -1, -1, send, recv, count, type, redop, peer, stream };
}

} // namespace
} // namespace wsp::host_target::nccl

using namespace wsp::host_target;
using namespace wsp::host_target::nccl;

ncclResult_t ncclCommInitAll(ncclComm_t * comm, int ndev, const int * devlist) {
    if (comm == nullptr || ndev < 1) {
        return report(ncclInvalidArgument, nullptr, "ncclCommInitAll: comm %p, ndev %d", (void *) comm, ndev);
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) {
        (void) cudaGetLastError();
        return report(ncclUnhandledCudaError, nullptr, "ncclCommInitAll: cudaGetDeviceCount failed");
    }
    std::vector<int> devs((size_t) ndev);
    for (int i = 0; i < ndev; ++i) {
        devs[(size_t) i] = devlist != nullptr ? devlist[i] : i;
        if (devs[(size_t) i] < 0 || devs[(size_t) i] >= devices) {
            return report(ncclInvalidArgument, nullptr,
                          "ncclCommInitAll: devlist[%d] = %d is not one of the %d devices", i, devs[(size_t) i],
                          devices);
        }
        for (int j = 0; j < i; ++j) {
            if (devs[(size_t) j] == devs[(size_t) i]) {
                return report(ncclInvalidUsage, nullptr, "ncclCommInitAll: device %d is listed twice (ranks %d and %d)",
                              devs[(size_t) i], j, i);
            }
        }
    }
    auto                        clique = std::make_shared<Clique>(devs);
    std::lock_guard<std::mutex> lock(state_mutex());
    for (int i = 0; i < ndev; ++i) {
        comm[i] = new ncclComm{ clique, i, devs[(size_t) i] };
        live_comms().insert(comm[i]);
    }
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    {
        std::lock_guard<std::mutex> lock(state_mutex());
        if (comm == nullptr || live_comms().erase(comm) == 0) {
            comm = nullptr;
        }
    }
    if (comm == nullptr) {
        return report(ncclInvalidArgument, nullptr, "ncclCommDestroy: not a live communicator");
    }
    delete comm; // queued commands hold the clique
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int * count) {
    if (!is_live(comm) || count == nullptr) {
        return report(ncclInvalidArgument, nullptr, "ncclCommCount: comm %p, count %p", (void *) comm, (void *) count);
    }
    *count = comm->clique->size;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int * device) {
    if (!is_live(comm) || device == nullptr) {
        return report(ncclInvalidArgument, nullptr, "ncclCommCuDevice: comm %p, device %p", (void *) comm,
                      (void *) device);
    }
    *device = comm->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int * rank) {
    if (!is_live(comm) || rank == nullptr) {
        return report(ncclInvalidArgument, nullptr, "ncclCommUserRank: comm %p, rank %p", (void *) comm, (void *) rank);
    }
    *rank = comm->rank;
    return ncclSuccess;
}

const char * ncclGetErrorString(ncclResult_t result) {
    switch (result) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
        case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        case ncclRemoteError: return "remote process exited or there was a network error";
        case ncclInProgress: return "NCCL operation in progress";
        default: return "unknown result code";
    }
}

const char * ncclGetLastError(ncclComm_t comm) {
    thread_local std::string copy;
    copy = thread_last_error;
    if (comm != nullptr) {
        std::lock_guard<std::mutex> lock(state_mutex());
        if (live_comms().count(comm) != 0 && !comm->clique->last_error[(size_t) comm->rank].empty()) {
            copy = comm->clique->last_error[(size_t) comm->rank];
        }
    }
    return copy.c_str();
}

ncclResult_t ncclGroupStart() {
    ++group_depth;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    if (group_depth == 0) {
        return report(ncclInvalidUsage, nullptr, "ncclGroupEnd without ncclGroupStart");
    }
    if (--group_depth > 0) {
        return ncclSuccess;
    }
    std::vector<Part> parts;
    parts.swap(group_parts);
    return parts.empty() ? ncclSuccess : issue(std::move(parts), true);
}

ncclResult_t ncclSend(const void * sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return call(comm, make_op(Kind::SEND, sendbuff, nullptr, count, datatype, ncclSum, peer, stream));
}

ncclResult_t ncclRecv(void * recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return call(comm, make_op(Kind::RECV, nullptr, recvbuff, count, datatype, ncclSum, peer, stream));
}

ncclResult_t ncclAllGather(const void * sendbuff, void * recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    return call(comm, make_op(Kind::ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, stream));
}

ncclResult_t ncclAllReduce(const void * sendbuff, void * recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return call(comm, make_op(Kind::ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0, stream));
}

ncclResult_t ncclBroadcast(const void * sendbuff, void * recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    return call(comm, make_op(Kind::BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, stream));
}

ncclResult_t ncclReduceScatter(const void * sendbuff, void * recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return call(comm, make_op(Kind::REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, stream));
}
