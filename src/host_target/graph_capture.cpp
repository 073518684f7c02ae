// Stream capture and graphs: a capturing stream records its commands into a capture instead of
// running them; the graph it ends in is instantiated into an exec whose launch queues the same
// commands again. CUDA's restrictions during capture are enforced (Note [capture]).

#include "runtime_impl.h"

#include <algorithm>
#include <unordered_set>

// a captured sequence of commands, in capture order, with the memory the capture allocated
struct CUgraph_st {
    std::vector<wsp::host_target::Command>         nodes;
    std::shared_ptr<wsp::host_target::GraphMemory> memory;
};

struct CUgraphExec_st {
    std::vector<wsp::host_target::Command>         nodes;
    std::shared_ptr<wsp::host_target::GraphMemory> memory;
    std::mutex                                     mutex;
    std::shared_ptr<wsp::host_target::Slot>        last_launch; // reached when the last launch is done
};

namespace wsp::host_target {

// Note [capture]: while a stream captures, everything queued on it (kernels, copies, fills, host
// work, the cuBLAS and NCCL work of enqueue(), note_accesses) becomes a node of the capture, in
// the order of the calls; a replay queues the nodes in that order on the launch stream, so a
// replay re-runs the work and reports its accesses at the launch stream's clocks. An event
// recorded in the capture only marks a point of it: another stream that waits on it joins the
// capture (its later work is appended to the same nodes, a valid serialization of the graph's
// branches) and leaves it when the capture ends. What CUDA forbids is an error, as there:
// synchronizing or querying a capturing stream (cudaErrorStreamCaptureUnsupported), a wait on an
// event recorded outside the capture (cudaErrorStreamCaptureIsolation), work on the legacy stream
// while a blocking stream of its device captures (cudaErrorStreamCaptureImplicit), and the
// "potentially unsafe" calls (cudaMalloc, cudaFree, synchronous copies and fills, device, stream
// and event synchronizes): prohibited for a thread that has a capture of mode Global or
// ThreadLocal going, and for a thread in Global interaction mode while another thread has a
// Global capture going (cudaErrorStreamCaptureUnsupported). Each of these invalidates the
// captures concerned: their end returns cudaErrorStreamCaptureInvalidated and no graph.

namespace {

std::mutex                            g_mutex;
std::vector<std::shared_ptr<Capture>> g_active; // captures going on, valid or not
std::unordered_set<CUgraph_st *>      g_graphs;
std::unordered_set<CUgraphExec_st *>  g_execs;
thread_local cudaStreamCaptureMode    t_mode = cudaStreamCaptureModeGlobal;

const char * mode_name(cudaStreamCaptureMode mode) {
    switch (mode) {
        case cudaStreamCaptureModeGlobal: return "global";
        case cudaStreamCaptureModeThreadLocal: return "thread-local";
        case cudaStreamCaptureModeRelaxed: return "relaxed";
    }
    return "?";
}

} // namespace

GraphMemory::~GraphMemory() {
    for (void * p : blocks) {
        release(p);
    }
}

void invalidate(const std::shared_ptr<Capture> & capture, const char * why) {
    std::lock_guard<std::mutex> lock(capture->mutex);
    if (!capture->invalidated) {
        capture->invalidated = true;
        WSP_LOG_WARN("host target: stream capture (%s mode) invalidated: %s\n", mode_name(capture->mode), why);
    }
}

cudaError_t check_capture_safe(const char * call) {
    const std::thread::id                 self = std::this_thread::get_id();
    std::vector<std::shared_ptr<Capture>> hit;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        for (const auto & c : g_active) {
            const bool own = c->thread == self && c->mode != cudaStreamCaptureModeRelaxed;
            const bool other =
                c->thread != self && c->mode == cudaStreamCaptureModeGlobal && t_mode == cudaStreamCaptureModeGlobal;
            if (own || other) {
                hit.push_back(c);
            }
        }
    }
    if (hit.empty()) {
        return cudaSuccess;
    }
    for (const auto & c : hit) {
        invalidate(c, call);
    }
    return fail(cudaErrorStreamCaptureUnsupported, "%s is not permitted during a %s stream capture (Note [capture])",
                call, mode_name(hit.front()->mode));
}

} // namespace wsp::host_target

using namespace wsp::host_target;
namespace race = wsp::race;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed) {
        return set_last(cudaErrorInvalidValue);
    }
    if (is_legacy(s.get())) {
        return fail(cudaErrorStreamCaptureUnsupported, "the legacy stream cannot be captured");
    }
    auto capture    = std::make_shared<Capture>();
    capture->origin = s.get();
    capture->mode   = mode;
    capture->thread = std::this_thread::get_id();
    {
        std::lock_guard<std::mutex> lock(s->mutex);
        if (s->capture != nullptr) {
            return set_last(cudaErrorIllegalState);
        }
        s->capture = capture;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    g_active.push_back(capture);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t * graph) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    if (graph == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    std::shared_ptr<Capture> capture;
    {
        std::lock_guard<std::mutex> lock(s->mutex);
        capture = s->capture;
        if (capture == nullptr) {
            return set_last(cudaErrorIllegalState);
        }
        if (capture->origin != s.get()) {
            return set_last(cudaErrorStreamCaptureUnmatched);
        }
        if (capture->mode != cudaStreamCaptureModeRelaxed && capture->thread != std::this_thread::get_id()) {
            return set_last(cudaErrorStreamCaptureWrongThread);
        }
        s->capture = nullptr;
    }
    std::vector<std::weak_ptr<CUstream_st>> joined;
    {
        std::lock_guard<std::mutex> lock(capture->mutex);
        joined = capture->joined;
    }
    for (const auto & w : joined) {
        if (auto j = w.lock()) {
            std::lock_guard<std::mutex> lock(j->mutex);
            if (j->capture == capture) {
                j->capture = nullptr;
            }
        }
    }
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_active.erase(std::remove(g_active.begin(), g_active.end(), capture), g_active.end());
    }
    *graph         = nullptr;
    CUgraph_st * g = nullptr;
    {
        std::lock_guard<std::mutex> lock(capture->mutex);
        if (capture->invalidated) {
            return set_last(cudaErrorStreamCaptureInvalidated);
        }
        g = new CUgraph_st{ std::move(capture->nodes), capture->memory };
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    g_graphs.insert(g);
    *graph = g;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus * status) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    if (status == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->capture == nullptr) {
        *status = cudaStreamCaptureStatusNone;
        return cudaSuccess;
    }
    std::lock_guard<std::mutex> capture_lock(s->capture->mutex);
    *status = s->capture->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode * mode) {
    if (mode == nullptr || *mode < cudaStreamCaptureModeGlobal || *mode > cudaStreamCaptureModeRelaxed) {
        return set_last(cudaErrorInvalidValue);
    }
    std::swap(*mode, t_mode);
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t * exec, cudaGraph_t graph, unsigned long long flags) {
    if (exec == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_graphs.count(graph) == 0) {
        return set_last(cudaErrorInvalidResourceHandle);
    }
    auto * e  = new CUgraphExec_st;
    e->nodes  = graph->nodes;
    e->memory = graph->memory;
    *exec     = e;
    g_execs.insert(e);
    return cudaSuccess;
}

namespace {

// Note [graph update]: an exec takes a new graph's parameters when the graphs have the same
// nodes in the same order: a kernel may change its function, grid and arguments, a copy or a fill
// its parameters (the same call), an event node its event; memory nodes cannot be updated (CUDA
// refuses changed allocations; here any graph with one is refused, stricter). CUDA's topology is
// a DAG; a capture here is a sequence, so the same sequence of node kinds is the same topology.
cudaGraphExecUpdateResult update_result(const std::vector<Command> & old_nodes,
                                        const std::vector<Command> & new_nodes) {
    if (old_nodes.size() != new_nodes.size()) {
        return cudaGraphExecUpdateErrorTopologyChanged;
    }
    auto is_kernel = [](const Command & c) { return c.what.rfind("kernel ", 0) == 0; };
    auto is_memory = [](const Command & c) { return c.what.rfind("graph memory ", 0) == 0; };
    for (size_t i = 0; i < old_nodes.size(); ++i) {
        const Command & a = old_nodes[i];
        const Command & b = new_nodes[i];
        if (is_memory(a) || is_memory(b)) {
            return cudaGraphExecUpdateErrorNotSupported;
        }
        if (is_kernel(a) != is_kernel(b) || (!is_kernel(a) && a.what != b.what)) {
            return cudaGraphExecUpdateErrorNodeTypeChanged;
        }
    }
    return cudaGraphExecUpdateSuccess;
}

} // namespace

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo * result_info) {
    if (result_info == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_execs.count(exec) == 0 || g_graphs.count(graph) == 0) {
        return set_last(cudaErrorInvalidResourceHandle);
    }
    std::lock_guard<std::mutex> exec_lock(exec->mutex);
    *result_info = { update_result(exec->nodes, graph->nodes), nullptr, nullptr };
    if (result_info->result != cudaGraphExecUpdateSuccess) {
        return set_last(cudaErrorGraphExecUpdateFailure);
    }
    // launches already queued keep what they were given (each queued its own copy of the nodes)
    exec->nodes  = graph->nodes;
    exec->memory = graph->memory;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_execs.count(exec) == 0) {
            return set_last(cudaErrorInvalidResourceHandle);
        }
    }
    bool capturing = false;
    {
        std::lock_guard<std::mutex> lock(s->mutex);
        capturing = s->capture != nullptr;
    }
    // launches of one exec run one after another, whatever their streams (as CUDA orders them)
    std::shared_ptr<Slot>        previous, done;
    std::vector<Command>         nodes;
    std::shared_ptr<GraphMemory> memory;
    {
        std::lock_guard<std::mutex> lock(exec->mutex); // against a concurrent cudaGraphExecUpdate
        nodes  = exec->nodes;
        memory = exec->memory;
    }
    if (!capturing) {
        std::lock_guard<std::mutex> lock(exec->mutex);
        previous          = exec->last_launch;
        done              = std::make_shared<Slot>();
        exec->last_launch = done;
        if (previous != nullptr) {
            s->submit({ "graph launch: wait for the previous launch", [previous](const Exec & x, std::string &) {
                           race::checker().acquire(x.agent, previous->wait(true));
                           return cudaSuccess;
                       } });
        }
    }
    for (const Command & node : nodes) {
        Run run = [run = node.run, memory](const Exec & x, std::string & message) { return run(x, message); };
        if (const cudaError_t e = s->submit({ node.what + " (graph replay)", std::move(run) }); e != cudaSuccess) {
            return set_last(e);
        }
    }
    if (done != nullptr) {
        s->submit({ "graph launch: done", [done](const Exec & x, std::string &) {
                       done->complete(race::checker().clock_of(x.agent));
                       return cudaSuccess;
                   } });
    }
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_graphs.erase(graph) == 0) {
            return set_last(cudaErrorInvalidResourceHandle);
        }
    }
    delete graph; // its memory stays while an exec or a replay holds it (Note [graph memory])
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_execs.erase(exec) == 0) {
            return set_last(cudaErrorInvalidResourceHandle);
        }
    }
    delete exec;
    return cudaSuccess;
}
