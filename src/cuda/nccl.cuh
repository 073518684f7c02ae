#pragma once

// Note [NCCL transfers]: with WSP_GGML_NCCL, one communicator spans the physical GPUs (made when
// the first CUDA backend is created, Note [NCCL lifetime] in nccl.cu) and a copy between two GPUs can run as an NCCL
// send on the source stream paired with a receive on the destination stream, so the destination's later work is ordered
// after it without an event. NCCL is used where it beats a peer copy: between GPUs without peer access (a peer copy
// then stages through the host), and for transfers of at least WSP_GGML_NCCL_MIN_BYTES (default 4 MiB). Never under
// virtual devices (one GPU cannot be two ranks), nor with WSP_GGML_CUDA_NCCL=0. A failed NCCL call is logged and the
// caller falls back to a peer copy.
//
// Note [NCCL all-reduce]: the all-reduce of the reg's proc "wsp_ggml_backend_all_reduce" sums F32
// buffers in place, one per physical GPU, each on its backend's stream: ordered after the work
// queued there, and the stream's later work sees the sum. NCCL collectives need every rank of a
// communicator, and ours spans every GPU: the participants must be all of them. Under the same
// conditions as transfers (no virtual devices, WSP_GGML_CUDA_NCCL not 0); otherwise the caller
// gets false with nothing queued and sums by peer copies.

#include "common.cuh"

#include <cstddef>

namespace wsp::cuda::nccl {

// the communicators live while a CUDA backend does (Note [NCCL lifetime]): backend_init
// acquires, backend_free releases
void acquire();
void release();

// should a copy of `bytes` from physical device a to b go through NCCL
bool preferred(int a, int b, size_t bytes);

// send on src_stream (device a), receive on dst_stream (device b); false (logged) on failure
bool copy(int a, int b, const void * src, void * dst, size_t bytes, cudaStream_t src_stream, cudaStream_t dst_stream);

// sums the count floats at bufs[i] (on physical device devices[i]) in place on every rank, each
// on streams[i]. False with nothing queued where Note [NCCL all-reduce] rules it out (not
// logged), false (logged) when an NCCL call failed
bool all_reduce(int n, const int * devices, float * const * bufs, size_t count, const cudaStream_t * streams);

} // namespace wsp::cuda::nccl
