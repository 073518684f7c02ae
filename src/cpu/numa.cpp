// wsp_ggml_numa_init / wsp_ggml_is_numa: the machine's NUMA nodes, read once from
// /sys/devices/system/node (Linux; one node elsewhere). The thread pool keeps the operating
// system's thread placement whatever the strategy: every accepted strategy is recorded and the
// log says so, where upstream ggml pins its threads to nodes.

#include "ggml-cpu.h"

#include "../core/log.h"

#include <fstream>
#include <mutex>
#include <string>

#if defined(__linux__)
#    include <sys/stat.h>
#endif

namespace {

struct NumaState {
    std::mutex                  mutex;
    bool                        initialized = false;
    int                         n_nodes     = 0;
    enum wsp_ggml_numa_strategy strategy    = WSP_GGML_NUMA_STRATEGY_DISABLED;
};

NumaState & numa_state() {
    static NumaState s;
    return s;
}

const char * strategy_name(enum wsp_ggml_numa_strategy s) {
    switch (s) {
        case WSP_GGML_NUMA_STRATEGY_DISABLED: return "disabled";
        case WSP_GGML_NUMA_STRATEGY_DISTRIBUTE: return "distribute";
        case WSP_GGML_NUMA_STRATEGY_ISOLATE: return "isolate";
        case WSP_GGML_NUMA_STRATEGY_NUMACTL: return "numactl";
        case WSP_GGML_NUMA_STRATEGY_MIRROR: return "mirror";
        default: return nullptr;
    }
}

// node0, node1, ... are numbered without gaps on the machines we know; counting stops at the first
// missing one, as upstream's does
int count_nodes() {
#if defined(__linux__)
    int n = 0;
    for (;; ++n) {
        const std::string path = "/sys/devices/system/node/node" + std::to_string(n);
        struct stat       st;
        if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            break;
        }
    }
    // no sysfs (a container without it): one node, as on a machine that is not NUMA
    return n > 0 ? n : 1;
#else
    return 1;
#endif
}

// automatic NUMA balancing moves pages behind a pinned placement's back; upstream warns about it
bool numa_balancing_enabled() {
    std::ifstream f("/proc/sys/kernel/numa_balancing");
    int           v = 0;
    return f && (f >> v) && v != 0;
}

} // namespace

extern "C" {

void wsp_ggml_numa_init(enum wsp_ggml_numa_strategy numa) {
    const char * name = strategy_name(numa);
    if (name == nullptr) {
        WSP_LOG_ERROR("%s: unknown NUMA strategy %d (expected 0..%d): ignored\n", __func__, (int) numa,
                      (int) WSP_GGML_NUMA_STRATEGY_COUNT - 1);
        return;
    }
    NumaState &                 s = numa_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.initialized) {
        WSP_LOG_INFO("%s: NUMA already initialized (%d node%s, strategy %s)\n", __func__, s.n_nodes,
                     s.n_nodes == 1 ? "" : "s", strategy_name(s.strategy));
        return;
    }
    s.n_nodes     = count_nodes();
    s.strategy    = numa;
    s.initialized = true;
    if (numa == WSP_GGML_NUMA_STRATEGY_DISABLED) {
        WSP_LOG_INFO("%s: %d NUMA node%s, strategy disabled\n", __func__, s.n_nodes, s.n_nodes == 1 ? "" : "s");
        return;
    }
    WSP_LOG_INFO("%s: %d NUMA node%s, strategy %s accepted: the CPU thread pool leaves thread placement to the "
                 "operating system (threads are not pinned to nodes)\n",
                 __func__, s.n_nodes, s.n_nodes == 1 ? "" : "s", name);
    if (s.n_nodes > 1 && numa_balancing_enabled()) {
        WSP_LOG_WARN("%s: /proc/sys/kernel/numa_balancing is enabled; this has been observed to impair "
                     "performance\n",
                     __func__);
    }
}

bool wsp_ggml_is_numa(void) {
    NumaState &                 s = numa_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.n_nodes > 1;
}

} // extern "C"
