#pragma once

// The device list, read once: one entry per GPU, or with WSP_GGML_CUDA_VIRTUAL_DEVICES=N, N
// entries that all live on GPU 0 (own streams and allocations, copies between them), so that
// every multi-GPU path runs on one GPU. Without a driver or a GPU the list is empty (one info
// message). Peer access is enabled once, at the first read, where the hardware allows it.

#include "common.cuh"

#include <string>
#include <vector>

namespace wsp::cuda {

struct DeviceInfo {
    int         index;       // our index: the device "CUDA<index>"
    int         physical;    // the CUDA device id
    std::string name;        // "CUDA0"
    std::string description; // "<card> (PCI <bus id>)", plus "virtual i of N"
    size_t      total_memory;
    int         cc_major, cc_minor;
    int         sm_count;
};

const std::vector<DeviceInfo> & devices();

// why devices() is empty ("no usable GPU (CUDA driver version is insufficient ...)"), "" where it
// is not: the reg reports it as its NO_DEVICES feature, so `wsp-ggml-cli devices` says it without -v
const std::string & no_devices_reason();

// can a kernel on physical device a read memory of physical device b directly (cudaMalloc memory
// and its memory pool's, Note [peer access])
bool peer_access(int a, int b);

// does the physical device have stream-ordered memory pools (cudaMallocAsync); without them (or
// with WSP_GGML_CUDA_POOLS=0, pools_wanted) scratch comes from cudaMalloc (Note [memory pool])
bool pools_supported(int physical);

// N of WSP_GGML_CUDA_VIRTUAL_DEVICES=N (N >= 1), or 0 when it is unset, 0 or not a number
int virtual_device_count();

// the physical device of a device index (asserts the index is valid)
inline int physical_of(int index) {
    return devices()[(size_t) index].physical;
}

} // namespace wsp::cuda
