// The CUDA devices' counters (see counters.cuh).

#include "counters.cuh"

#include <memory>

namespace wsp::cuda {

namespace {

thread_local int  t_count_for = -1;    // CountFor's index
thread_local bool t_capturing = false; // Capturing

} // namespace

Counters & counters(int index) {
    static const std::unique_ptr<Counters[]> per_device(new Counters[devices().size()]);
    static Counters                          nobody;
    return index >= 0 && (size_t) index < devices().size() ? per_device[(size_t) index] : nobody;
}

int index_of_physical(int physical) {
    for (const DeviceInfo & d : devices()) {
        if (d.physical == physical) {
            return d.index;
        }
    }
    return -1;
}

CountFor::CountFor(int index) : previous_(t_count_for) {
    t_count_for = index;
}

CountFor::~CountFor() {
    t_count_for = previous_;
}

Capturing::Capturing() : previous_(t_capturing) {
    t_capturing = true;
}

Capturing::~Capturing() {
    t_capturing = previous_;
}

void count_launch(int index) {
    if (!t_capturing) {
        ++counters(index).kernel_launches;
    }
}

void count_launch() {
    if (t_capturing) {
        return;
    }
    int index = t_count_for;
    if (index < 0) {
        int physical = 0;
        index        = cudaGetDevice(&physical) == cudaSuccess ? index_of_physical(physical) : -1;
    }
    count_launch(index);
}

} // namespace wsp::cuda
