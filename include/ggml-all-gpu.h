#pragma once

// The all-GPU device: where a reg has two or more GPU devices (CUDA, ROCm, the host target, sims),
// one more device of type GPU, "<reg>_All" (CUDA_All, SIM_All, ...), presents them as one. Its
// buffer type keeps tensors on the main (first) member; its backend runs each graph over every
// member, each mat-mul with a weight spreading its rows over the members by tensor_split
// (WSP_GGML_TENSOR_SPLIT=3,1 or wsp_ggml_backend_all_gpu_set_tensor_split; default: by free
// memory), so a client that picks one GPU device (as whisper.cpp does) uses every GPU. Listed after the single devices, or first among the GPU
// devices with WSP_GGML_ALL_GPUS=1. Note [all-GPU device] in src/allgpu/all_gpu.h has the design.

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

WSP_GGML_BACKEND_API bool wsp_ggml_backend_dev_is_all_gpu(wsp_ggml_backend_dev_t dev);

// the members of an all-GPU device, main first (0 for any other device)
WSP_GGML_BACKEND_API size_t                 wsp_ggml_backend_all_gpu_member_count(wsp_ggml_backend_dev_t dev);
WSP_GGML_BACKEND_API wsp_ggml_backend_dev_t wsp_ggml_backend_all_gpu_member(wsp_ggml_backend_dev_t dev, size_t i);

// Sets the shares of the members (one per member, main first, as wsp_ggml_backend_all_gpu_member
// lists them; 3,1 gives the main member 75% of the rows and heads), in place of those the device
// was made with (WSP_GGML_TENSOR_SPLIT, or by free memory); NULL: back to those. Shares that are
// negative, not finite or all 0, or a dev that is not an all-GPU device: logged, false, nothing
// changed. What was spread by the old shares (the members' rows of the weights, sharded caches,
// made whole first in the main member's memory) is let go and spread anew when next used. Call it
// between graphs: not while a graph is being computed on the device's backends, and after they
// were synchronized (wsp_ggml_backend_synchronize, wsp_ggml_backend_sched_synchronize).
WSP_GGML_BACKEND_API bool wsp_ggml_backend_all_gpu_set_tensor_split(wsp_ggml_backend_dev_t dev, const float * shares);

// bytes of weights member i holds for the device: the main member the weight buffers made with
// the device's buffer type, every member the ranges of weights its pieces hold (rows or columns
// of spread mat-mul weights, whole small weights its graphs read), each range once
WSP_GGML_BACKEND_API size_t wsp_ggml_backend_all_gpu_weight_bytes(wsp_ggml_backend_dev_t dev, size_t i);

// What the device's plans (Note [tensor parallelism] and Note [row split plan] in
// src/allgpu/plan.h) moved between the members since start, in bytes summed over the members that sent them: the all-reduces of the
// blocks' partial sums, what the main member sent the others (a graph's inputs, an embedding's
// rows, an origin's input under the row split) and the split results gathered into the main
// member. Graphs that run with the row split count their bytes too; n_graphs counts only the
// tensor-parallel ones. Weights and caches placed once are not in it.
struct wsp_ggml_backend_all_gpu_traffic {
    size_t all_reduce;    // bytes
    size_t n_all_reduces; // all-reduces run
    size_t sent;          // bytes, main member to the others
    size_t gathered;      // bytes, the others to the main member
    size_t n_graphs;      // graphs run tensor-parallel
};
WSP_GGML_BACKEND_API struct wsp_ggml_backend_all_gpu_traffic wsp_ggml_backend_all_gpu_get_traffic(
    wsp_ggml_backend_dev_t dev);

// What each graph moved, graph by graph: after each graph the device's backends compute (queued on
// the members, not necessarily done), cb is called on the computing thread with the caller's
// graph (valid during the call) and the traffic of that graph alone (n_graphs 1 where it ran
// tensor-parallel, 0 by the row split); the calls' sums are what get_traffic adds up. A client
// that knows its graphs tells them apart by their ops (whisper_check: the conv front end, the
// encoder, the cross K/V, a decoder step). NULL cb: no more calls. False (logged) for a dev that
// is not an all-GPU device. Set it between graphs, not while one is being computed.
typedef void (*wsp_ggml_backend_all_gpu_graph_cb)(const struct wsp_ggml_cgraph *                   graph,
                                                  const struct wsp_ggml_backend_all_gpu_traffic * moved,
                                                  void *                                          user_data);
WSP_GGML_BACKEND_API bool wsp_ggml_backend_all_gpu_set_graph_callback(wsp_ggml_backend_dev_t           dev,
                                                                      wsp_ggml_backend_all_gpu_graph_cb cb,
                                                                      void *                            user_data);

#ifdef __cplusplus
}
#endif
