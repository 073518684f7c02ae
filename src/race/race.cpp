// The happens-before checker (Note [happens-before checker] in race.h).

#include "race.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <unordered_map>

namespace wsp::race {

void VectorClock::set(int agent, Clock v) {
    if ((size_t) agent >= c_.size()) {
        c_.resize((size_t) agent + 1, 0);
    }
    c_[(size_t) agent] = v;
}

void VectorClock::join(const VectorClock & other) {
    if (other.c_.size() > c_.size()) {
        c_.resize(other.c_.size(), 0);
    }
    for (size_t i = 0; i < other.c_.size(); ++i) {
        c_[i] = std::max(c_[i], other.c_[i]);
    }
}

//
// byte ranges of tensors
//

void tensor_ranges(const wsp_ggml_tensor * t, std::vector<Range> & out) {
    if (t->data == nullptr || wsp_ggml_is_empty(t)) {
        return;
    }
    const uintptr_t base = (uintptr_t) t->data;
    // the innermost piece: a whole row when elements (or blocks) lie back to back
    const size_t blck = (size_t) wsp_ggml_blck_size(t->type);
    size_t       piece;
    int          d0;
    if (t->nb[0] == wsp_ggml_type_size(t->type)) {
        piece = wsp_ggml_row_size(t->type, t->ne[0]);
        d0    = 1;
    } else {
        piece = wsp_ggml_type_size(t->type);
        d0    = 0;
    }
    // the outer dimensions, innermost first, with dimensions that continue the piece folded in
    int64_t count[WSP_GGML_MAX_DIMS];
    size_t  stride[WSP_GGML_MAX_DIMS];
    int     n      = 0;
    int64_t pieces = 1;
    for (int d = d0; d < WSP_GGML_MAX_DIMS; ++d) {
        const int64_t ne = d == 0 ? t->ne[0] / (int64_t) blck : t->ne[d];
        if (ne == 1) {
            continue;
        }
        if (n == 0 && t->nb[d] == piece) {
            piece *= (size_t) ne; // contiguous with what is inside
            continue;
        }
        count[n]  = ne;
        stride[n] = t->nb[d];
        pieces *= ne;
        ++n;
    }
    if (pieces > MAX_PIECES) {
        uintptr_t hi = base + piece;
        for (int i = 0; i < n; ++i) {
            hi += (uintptr_t) (count[i] - 1) * stride[i];
        }
        out.push_back({ base, hi });
        return;
    }
    const size_t first                  = out.size();
    int64_t      idx[WSP_GGML_MAX_DIMS] = { 0, 0, 0, 0 };
    for (int64_t p = 0; p < pieces; ++p) {
        uintptr_t off = base;
        for (int i = 0; i < n; ++i) {
            off += (uintptr_t) idx[i] * stride[i];
        }
        out.push_back({ off, off + piece });
        for (int i = 0; i < n && ++idx[i] == count[i]; ++i) {
            idx[i] = 0;
        }
    }
    std::vector<Range> mine(out.begin() + (std::ptrdiff_t) first, out.end());
    normalize(mine);
    out.resize(first);
    out.insert(out.end(), mine.begin(), mine.end());
}

void normalize(std::vector<Range> & r) {
    std::sort(r.begin(), r.end(), [](const Range & a, const Range & b) { return a.begin < b.begin; });
    size_t k = 0;
    for (size_t i = 0; i < r.size(); ++i) {
        if (r[i].begin >= r[i].end) {
            continue;
        }
        if (k > 0 && r[i].begin <= r[k - 1].end) {
            r[k - 1].end = std::max(r[k - 1].end, r[i].end);
        } else {
            r[k++] = r[i];
        }
    }
    r.resize(k);
}

//
// the checker
//

namespace {

std::atomic<uint64_t> g_next_checker{ 1 };

std::string describe_access(const char * kind, const What & what) {
    return std::string(kind) + " by " + (what ? what->text() : std::string("(unlabelled)"));
}

class TextLabel : public Label {
public:
    explicit TextLabel(std::string text) : text_(std::move(text)) {}
    std::string text() const override { return text_; }

private:
    std::string text_;
};

} // namespace

What text_label(std::string text) {
    return std::make_shared<const TextLabel>(std::move(text));
}

Checker::Checker() : id_(g_next_checker.fetch_add(1)) {}

VectorClock & Checker::clock_locked(int agent) {
    if ((size_t) agent >= clocks_.size()) {
        clocks_.resize((size_t) agent + 1);
    }
    return clocks_[(size_t) agent];
}

int Checker::new_stream_agent() {
    std::lock_guard<std::mutex> lock(mutex_);
    const int                   a = (int) clocks_.size();
    clock_locked(a).set(a, 1);
    return a;
}

int Checker::host_agent() {
    thread_local std::unordered_map<uint64_t, int> mine; // checker id -> this thread's agent
    auto                                           it = mine.find(id_);
    if (it != mine.end()) {
        return it->second;
    }
    const int a = new_stream_agent();
    mine.emplace(id_, a);
    return a;
}

VectorClock Checker::release_host() {
    const int                   h = host_agent();
    std::lock_guard<std::mutex> lock(mutex_);
    VectorClock &               c    = clock_locked(h);
    VectorClock                 copy = c;
    c.set(h, c.get(h) + 1);
    return copy;
}

void Checker::begin_command(int stream, const VectorClock & queued) {
    std::lock_guard<std::mutex> lock(mutex_);
    VectorClock &               c = clock_locked(stream);
    c.join(queued);
    c.set(stream, c.get(stream) + 1);
}

VectorClock Checker::clock_of(int agent) {
    std::lock_guard<std::mutex> lock(mutex_);
    return clock_locked(agent);
}

void Checker::acquire(int agent, const VectorClock & clock) {
    std::lock_guard<std::mutex> lock(mutex_);
    clock_locked(agent).join(clock);
}

bool Checker::read(int agent, const Range * ranges, size_t n, const What & what, std::string * conflict) {
    return access(agent, ranges, n, false, what, conflict);
}

bool Checker::write(int agent, const Range * ranges, size_t n, const What & what, std::string * conflict) {
    return access(agent, ranges, n, true, what, conflict);
}

size_t Checker::races() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return races_;
}

// a segment boundary at p (a segment that contains p is cut in two)
void Checker::split_at(uintptr_t p) {
    auto it = shadow_.upper_bound(p);
    if (it == shadow_.begin()) {
        return;
    }
    --it;
    if (it->first < p && p < it->second.end) {
        Segment tail   = it->second;
        it->second.end = p;
        shadow_.emplace(p, std::move(tail));
    }
}

bool Checker::check_and_update(int agent, const VectorClock & vc, Range r, bool is_write, const What & what,
                               std::string & message) {
    split_at(r.begin);
    split_at(r.end);
    const Access me{ agent, vc.get(agent), what };
    auto unordered = [&](const Access & a) { return a.agent >= 0 && a.agent != agent && vc.get(a.agent) < a.clock; };
    bool ok        = true;
    auto report    = [&](const Access & a, const char * kind, uintptr_t b, uintptr_t e) {
        if (ok) {
            char range[96];
            std::snprintf(range, sizeof(range), "bytes [0x%" PRIxPTR ", 0x%" PRIxPTR ")", b, e);
            message = std::string(range) + ": " + describe_access(is_write ? "write" : "read", what) + " and " +
                      describe_access(kind, a.what) + " are not ordered by any event, wait or synchronize";
        }
        ok = false;
    };
    uintptr_t cur = r.begin;
    auto      it  = shadow_.lower_bound(r.begin);
    while (cur < r.end) {
        if (it == shadow_.end() || it->first >= r.end || it->first > cur) {
            // a gap never accessed (or forgotten): a new segment
            const uintptr_t gap_end = (it == shadow_.end() || it->first >= r.end) ? r.end : it->first;
            Segment         seg{ gap_end, {}, {} };
            if (is_write) {
                seg.write = me;
            } else {
                seg.reads.push_back(me);
            }
            it  = std::next(shadow_.emplace(cur, std::move(seg)).first);
            cur = gap_end;
            continue;
        }
        Segment & seg = it->second;
        if (unordered(seg.write)) {
            report(seg.write, "write", it->first, seg.end);
        }
        if (is_write) {
            for (const Access & rd : seg.reads) {
                if (unordered(rd)) {
                    report(rd, "read", it->first, seg.end);
                }
            }
            seg.write = me;
            seg.reads.clear();
        } else {
            auto mine =
                std::find_if(seg.reads.begin(), seg.reads.end(), [&](const Access & a) { return a.agent == agent; });
            if (mine != seg.reads.end()) {
                *mine = me;
            } else {
                seg.reads.push_back(me);
            }
        }
        cur = seg.end;
        ++it;
    }
    return ok;
}

bool Checker::access(int agent, const Range * ranges, size_t n, bool is_write, const What & what,
                     std::string * conflict) {
    if (n == 0 || !enabled_.load(std::memory_order_relaxed)) {
        return true;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const VectorClock &         vc = clock_locked(agent);
    std::string                 message;
    bool                        ok = true;
    for (size_t i = 0; i < n; ++i) {
        if (ranges[i].begin < ranges[i].end && !check_and_update(agent, vc, ranges[i], is_write, what, message)) {
            ok = false;
        }
    }
    if (!ok) {
        ++races_;
        WSP_LOG_ERROR("RACE: %s\n", message.c_str());
        if (conflict != nullptr) {
            *conflict = message;
        }
    }
    return ok;
}

void Checker::forget(Range r) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (r.begin >= r.end) {
        return;
    }
    split_at(r.begin);
    split_at(r.end);
    shadow_.erase(shadow_.lower_bound(r.begin), shadow_.lower_bound(r.end));
}

Checker & checker() {
    static Checker * c = new Checker; // never destroyed: streams may outlive static destruction
    return *c;
}

} // namespace wsp::race
