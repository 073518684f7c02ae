// The all-GPU device's counters (Note [all-GPU counters] in all_gpu.h): the window of its calls
// over which its members' work is added to its own.

#include "all_gpu.h"

#include <vector>

namespace wsp::allgpu {

namespace {

std::vector<wsp_ggml_backend_counters> members_counters(const Device & d) {
    std::vector<wsp_ggml_backend_counters> c(d.members.size());
    for (size_t m = 0; m < d.members.size(); ++m) {
        wsp_ggml_backend_dev_get_counters(d.members[m], &c[m]);
    }
    return c;
}

} // namespace

MemberWork::MemberWork(Device & d) : d_(d) {
    std::lock_guard<std::mutex> lock(d.calls_mutex);
    if (d.calls++ == 0) {
        d.calls_base = members_counters(d);
    }
}

MemberWork::~MemberWork() {
    std::lock_guard<std::mutex> lock(d_.calls_mutex);
    if (--d_.calls > 0) {
        return; // the last call to end counts the window
    }
    const std::vector<wsp_ggml_backend_counters> now = members_counters(d_);
    for (size_t m = 0; m < now.size(); ++m) {
        // not their graph computes and plans: the device counts its own
        const wsp_ggml_backend_counters & was = d_.calls_base[m];
        d_.counters.kernel_launches += now[m].kernel_launches - was.kernel_launches;
        d_.counters.graph_captures += now[m].graph_captures - was.graph_captures;
        d_.counters.graph_replays += now[m].graph_replays - was.graph_replays;
        d_.counters.host_syncs += now[m].host_syncs - was.host_syncs;
        d_.counters.device_allocs += now[m].device_allocs - was.device_allocs;
    }
}

} // namespace wsp::allgpu
