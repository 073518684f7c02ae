// The host NCCL's commands (Note [host NCCL]): a stream reaching the command of a bare call or a
// group registers its calls at their meetings, moves the data of the meetings it completes, and
// waits for the others until its partners have moved it, a meeting failed, or the timeout.

#include "nccl_impl.h"

#include "../core/fp16.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace wsp::host_target::nccl {

std::mutex & state_mutex() {
    static std::mutex m;
    return m;
}

std::condition_variable & state_cv() {
    static std::condition_variable cv;
    return cv;
}

namespace {

int timeout_ms() {
    const char * env = std::getenv("WSP_GGML_CUDA_HOST_NCCL_TIMEOUT_MS");
    const int    v   = env != nullptr ? std::atoi(env) : 0;
    return v > 0 ? v : 10000;
}

// ---- reductions, in the datatype (halves through float, rounded once)

template <typename T>
T combine(ncclRedOp_t op, T a, T b) {
    if constexpr (std::is_integral_v<T>) { // wrap around, as the GPU does
        using U = std::make_unsigned_t<T>;
        switch (op) {
            case ncclProd: return (T) (U) ((U) a * (U) b);
            case ncclMax: return std::max(a, b);
            case ncclMin: return std::min(a, b);
            default: return (T) (U) ((U) a + (U) b);
        }
    } else {
        switch (op) {
            case ncclProd: return a * b;
            case ncclMax: return std::max(a, b);
            case ncclMin: return std::min(a, b);
            default: return a + b;
        }
    }
}

template <typename T, typename A, typename Load, typename Store>
void reduce_as(ncclRedOp_t op, const std::vector<const void *> & src, size_t n, void * out, Load load, Store store) {
    for (size_t i = 0; i < n; ++i) {
        A acc = load(static_cast<const T *>(src[0])[i]);
        for (size_t r = 1; r < src.size(); ++r) {
            acc = combine<A>(op, acc, load(static_cast<const T *>(src[r])[i]));
        }
        if (op == ncclAvg) {
            acc = (A) (acc / (A) src.size());
        }
        static_cast<T *>(out)[i] = store(acc);
    }
}

template <typename T>
void reduce_plain(ncclRedOp_t op, const std::vector<const void *> & src, size_t n, void * out) {
    reduce_as<T, T>(
        op, src, n, out, [](T v) { return v; }, [](T v) { return v; });
}

// out[i] = src[0][i] op src[1][i] op ... in rank order
void reduce(ncclDataType_t t, ncclRedOp_t op, const std::vector<const void *> & src, size_t n, void * out) {
    switch (t) {
        case ncclInt8: reduce_plain<int8_t>(op, src, n, out); break;
        case ncclUint8: reduce_plain<uint8_t>(op, src, n, out); break;
        case ncclInt32: reduce_plain<int32_t>(op, src, n, out); break;
        case ncclUint32: reduce_plain<uint32_t>(op, src, n, out); break;
        case ncclInt64: reduce_plain<int64_t>(op, src, n, out); break;
        case ncclUint64: reduce_plain<uint64_t>(op, src, n, out); break;
        case ncclFloat32: reduce_plain<float>(op, src, n, out); break;
        case ncclFloat64: reduce_plain<double>(op, src, n, out); break;
        case ncclFloat16: reduce_as<uint16_t, float>(op, src, n, out, fp16_to_fp32, fp32_to_fp16); break;
        case ncclBfloat16: reduce_as<uint16_t, float>(op, src, n, out, bf16_to_fp32, fp32_to_bf16); break;
        default: break;
    }
}

// a collective's data movement, by the last rank to arrive, all ranks' buffers at hand
void run_collective(const std::vector<const Op *> & ops) {
    const Op &                o     = *ops[0];
    const size_t              ranks = ops.size();
    const size_t              bytes = o.count * type_size(o.type);
    std::vector<char>         result; // staged: a rank's recv may be any rank's send (in place)
    std::vector<const void *> src(ranks);
    switch (o.kind) {
        case Kind::ALL_GATHER:
            result.resize(bytes * ranks);
            for (size_t r = 0; r < ranks && bytes > 0; ++r) {
                std::memcpy(result.data() + r * bytes, ops[r]->send, bytes);
            }
            break;
        case Kind::BROADCAST:
            result.resize(bytes);
            if (bytes > 0) {
                std::memcpy(result.data(), ops[(size_t) o.peer]->send, bytes);
            }
            break;
        case Kind::ALL_REDUCE:
        case Kind::REDUCE_SCATTER: {
            const size_t n = o.kind == Kind::ALL_REDUCE ? o.count : o.count * ranks;
            result.resize(n * type_size(o.type));
            for (size_t r = 0; r < ranks; ++r) {
                src[r] = ops[r]->send;
            }
            if (n > 0) {
                reduce(o.type, o.redop, src, n, result.data());
            }
            break;
        }
        default: break;
    }
    for (size_t r = 0; r < ranks; ++r) {
        const size_t out = ops[r]->recv_bytes((int) ranks);
        const size_t at  = o.kind == Kind::REDUCE_SCATTER ? r * bytes : 0;
        if (out > 0) {
            std::memcpy(ops[r]->recv, result.data() + at, out);
        }
    }
}

// a part's place at its meeting
struct Seat {
    const Part * part;
    Meeting *    meeting;
    std::string  label;
    bool         moves = false; // this command arrived last: it moves the data
};

Meeting & meeting_of(const Part & p, uint64_t run) {
    Clique & c = *p.clique;
    return p.op.p2p() ? c.p2p_meetings[{ c.channel(p.op), p.seq, run }] : c.coll_meetings[{ p.seq, run }];
}

void leave(const Part & p, uint64_t run, Meeting & m) {
    Clique & c = *p.clique;
    if (++m.left == (int) c.slots(p.op)) { // every side has looked: the meeting is over
        if (p.op.p2p()) {
            c.p2p_meetings.erase({ c.channel(p.op), p.seq, run });
        } else {
            c.coll_meetings.erase({ p.seq, run });
        }
    }
}

void move_data(Meeting & m) {
    if (m.arrived.size() == 2 && m.arrived[0]->p2p()) {
        const Op & s = *m.arrived[0];
        if (s.count > 0) {
            std::memcpy(m.arrived[1]->recv, s.send, s.count * type_size(s.type));
        }
    } else {
        run_collective(m.arrived);
    }
}

// the partners a meeting still waits for
std::string missing(const Seat & s) {
    const Op &  op = s.part->op;
    std::string out;
    for (size_t r = 0; r < s.meeting->arrived.size(); ++r) {
        if (s.meeting->arrived[r] != nullptr) {
            continue;
        }
        out += out.empty() ? "" : ", ";
        out += op.p2p()
                   ? std::string(r == 0 ? "the ncclSend of rank " : "the ncclRecv of rank ") + std::to_string(op.peer)
                   : "rank " + std::to_string(r);
    }
    return out;
}

} // namespace

std::string buffer_problem(const Op & op, int ranks) {
    const struct {
        const char * name;
        const void * p;
        size_t       n;
    } bufs[] = { { "sendbuff", op.send, op.send_bytes(ranks) }, { "recvbuff", op.recv, op.recv_bytes(ranks) } };
    for (const auto & b : bufs) {
        if (b.n == 0) {
            continue;
        }
        // inside one live allocation: its own device reaches all of it
        std::string why;
        if (b.p == nullptr || device_of(b.p) < 0 || check_access(device_of(b.p), b.p, b.n, &why) != cudaSuccess) {
            char buf[160];
            std::snprintf(buf, sizeof(buf), "%s %p (%zu bytes) is not inside live device memory", b.name, b.p, b.n);
            return buf;
        }
    }
    return "";
}

cudaError_t run_parts(const std::vector<Part> & parts, uint64_t run, std::string & message) {
    std::vector<std::string> bad(parts.size()); // before the lock: the runtime takes its own
    for (size_t i = 0; i < parts.size(); ++i) {
        bad[i] = buffer_problem(parts[i].op, parts[i].clique->size);
    }

    std::unique_lock<std::mutex> lock(state_mutex());
    std::vector<Seat>            seats;
    bool                         moves = false;
    for (size_t i = 0; i < parts.size(); ++i) {
        const Part & p  = parts[i];
        const Op &   op = p.op;
        Seat         s{ &p, &meeting_of(p, run),
                op.who() + "'s " + op.shape() + " #" + std::to_string(p.seq) +
                    (op.p2p() ? (op.kind == Kind::SEND ? " to rank " : " from rank ") + std::to_string(op.peer)
                                      : std::string()) };
        Meeting &    m = *s.meeting;
        m.arrived.resize(p.clique->slots(op), nullptr);
        m.arrived[Clique::slot(op)] = &op;
        ++m.present;
        if (m.failed.empty() && !bad[i].empty()) {
            m.failed = s.label + ": " + bad[i];
        }
        if (m.failed.empty() && !p.clique->rejected_at_issue(op, p.seq).empty()) {
            m.failed = s.label + ": rejected at issue: " + p.clique->rejected_at_issue(op, p.seq);
        }
        if (m.failed.empty() && (size_t) m.present == m.arrived.size()) {
            m.claimed = s.moves = moves = true;
        }
        seats.push_back(std::move(s));
    }
    state_cv().notify_all();
    if (moves) { // the partners wait for this command: no lock while the bytes move
        lock.unlock();
        for (Seat & s : seats) {
            if (s.moves) {
                move_data(*s.meeting);
            }
        }
        lock.lock();
        for (Seat & s : seats) {
            s.meeting->done = s.meeting->done || s.moves;
        }
        state_cv().notify_all();
    }

    // settled: moved or moving, or failed (here, at a partner, or at issue)
    auto settled = [&] {
        bool all = true;
        for (Seat & s : seats) {
            Meeting & m = *s.meeting;
            if (m.failed.empty() && !s.part->clique->rejected_at_issue(s.part->op, s.part->seq).empty()) {
                m.failed =
                    s.label + ": rejected at issue: " + s.part->clique->rejected_at_issue(s.part->op, s.part->seq);
            }
            all = all && (m.done || m.claimed || !m.failed.empty());
        }
        return all;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms());
    if (!state_cv().wait_until(lock, deadline, settled)) {
        for (Seat & s : seats) {
            Meeting & m = *s.meeting;
            if (!m.done && !m.claimed && m.failed.empty()) {
                m.failed = s.label + ": unmatched: " + missing(s) + " did not reach it within " +
                           std::to_string(timeout_ms()) + " ms";
            }
        }
        state_cv().notify_all();
    }
    state_cv().wait(lock, [&] {
        return std::all_of(seats.begin(), seats.end(),
                           [](const Seat & s) { return s.meeting->done || !s.meeting->failed.empty(); });
    });

    for (Seat & s : seats) {
        if (!s.meeting->failed.empty()) {
            message += (message.empty() ? "" : "; ") + s.meeting->failed;
            s.part->clique->last_error[(size_t) s.part->op.rank] = s.meeting->failed;
        }
        leave(*s.part, run, *s.meeting);
    }
    return message.empty() ? cudaSuccess : cudaErrorLaunchFailure;
}

} // namespace wsp::host_target::nccl
