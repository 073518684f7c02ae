#pragma once

// What `wsp-ggml-cli encode` prints, stage by stage: as plain text lines, each printed when its
// stage is reached (the lines README and the tests know: "encoder:", "device:", "weights:",
// "graph:", "result:", "time:", "moved:", "tensor parallel:", "check:"), or as one JSON object
// with the same figures (bytes unscaled, times in ms), printed by finish() with "ok" last.

#include "cli/commands.h"
#include "cli/json.h"

#include "ggml-all-gpu.h"
#include "ggml-backend.h"
#include "ggml-counters.h"

#include <cstdint>
#include <string>
#include <vector>

namespace wsp::cli {

// the timed evaluations of the encoder graph
struct Timing {
    bool                             ok      = false;
    int                              runs    = 0;
    double                           best_ms = 1e30, total_ms = 0.0;
    double                           moved = 0.0; // bytes to, from and between sim devices per timed evaluation
    wsp_ggml_backend_all_gpu_traffic tp{};        // an all-GPU device's tensor-parallel traffic, per evaluation
    // what each device (and an all-GPU device's members) was asked to do over the timed runs
    // (Note [counters] in src/backend/counters.h); reported per evaluation
    std::vector<std::pair<wsp_ggml_backend_dev_t, wsp_ggml_backend_counters>> counters;
};

struct GraphFigures {
    int    nodes = 0, splits = 0, copies = 0;
    size_t compute_bytes = 0; // the scheduler's compute buffers over all backends
    size_t weight_bytes  = 0;
};

struct ResultFigures {
    int64_t ne0 = 0, ne1 = 0;
    double  mean = 0.0, sd = 0.0;
    float   first[4] = {};
};

class EncodeReport {
public:
    explicit EncodeReport(const EncodeOptions & o);

    // the configuration, the devices (and an all-GPU device's members) and the CPU's threads;
    // cpu_device: the CPU is the (first) device rather than the fallback for unsupported ops;
    // why: why these devices ("--device cpu", "no GPU: CUDA has none: no usable GPU (...)", ...)
    void devices(const std::vector<wsp_ggml_backend_dev_t> & devs, bool cpu_device, const std::string & why);

    // where the weights are (absent for one plain device)
    void placement(const std::string & text);

    void graph(const GraphFigures & g);
    void result(const ResultFigures & r);

    // time and frames/s; on sims the bytes moved; for --mode all the tensor-parallel traffic and
    // each member's weights (dev0: the all-GPU device)
    void timing(const Timing & t, wsp_ggml_backend_dev_t dev0);

    void check(double nmse, bool ok);

    // the JSON object (with "ok": rc == 0) where JSON was asked for; returns rc
    int finish(int rc);

private:
    void moved(const Timing & t, wsp_ggml_backend_dev_t dev0);
    void counters(const Timing & t);

    const EncodeOptions & o_;
    JsonWriter            j_;
};

} // namespace wsp::cli
