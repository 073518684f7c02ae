#pragma once

// The split buffer type: a weight's rows spread over the devices of one reg in proportions
// given by tensor_split. Each device holds its rows contiguously in a buffer of its own type;
// the tensor in the split buffer is a handle (its data pointer is never read by a kernel) whose
// extra lists the per-device slices. Written against the backend interface only, so it serves
// sim, CUDA and HIP devices alike; the scheduler turns a mul_mat with a split weight into one
// mul_mat per slice (src/sched/expand_split.cpp).

#include "ggml-backend-impl.h"

#include "../core/log.h"

#include <vector>

namespace wsp::split {

struct Slice {
    int                       device;    // index in the reg
    int64_t                   row_begin; // rows [row_begin, row_end) of the full tensor
    int64_t                   row_end;
    wsp_ggml_backend_buffer_t buffer; // the device buffer holding the slice (owned by the split buffer)
    wsp_ggml_tensor           tensor; // the slice as an ordinary tensor on that device
};

struct SplitTensor {
    std::vector<Slice> slices; // devices that hold at least one row, in device order
};

// the split buffer type of a reg's devices (cached per main device and normalised split);
// row boundaries are multiples of `quant_rows` for quantized types (1 for the others)
WSP_INTERNAL_API wsp_ggml_backend_buffer_type_t buffer_type(wsp_ggml_backend_reg_t reg, int main_device,
                                                            const float * tensor_split, int quant_rows);

WSP_INTERNAL_API bool is_split_buffer_type(wsp_ggml_backend_buffer_type_t buft);
WSP_INTERNAL_API bool is_split_buffer(wsp_ggml_backend_buffer_t buffer);

// the slices of a tensor allocated in a split buffer, NULL for any other tensor
WSP_INTERNAL_API const SplitTensor * split_of(const wsp_ggml_tensor * t);

// the main device of a split buffer type
WSP_INTERNAL_API wsp_ggml_backend_dev_t main_device(wsp_ggml_backend_buffer_type_t buft);

// Note [one allocation per device]: a split buffer that is about to receive the tensors
// [first, last) of a context (wsp_ggml_backend_alloc_ctx_tensors does this) allocates, on each
// device, one buffer for all their slices; tensors that come otherwise get a buffer per device
// each. Returns false, logged, when a device cannot hold its share.
WSP_INTERNAL_API bool reserve(wsp_ggml_backend_buffer_t buffer, wsp_ggml_context * ctx, wsp_ggml_tensor * first,
                              wsp_ggml_tensor * last);

// applies a usage to the per-device buffers (weights usage steers the scheduler)
WSP_INTERNAL_API void set_usage(wsp_ggml_backend_buffer_t buffer, wsp_ggml_backend_buffer_usage usage);

// rows of each device for a tensor of nrows rows (row_begin/row_end per reg device)
WSP_INTERNAL_API std::vector<std::pair<int64_t, int64_t>> row_ranges(wsp_ggml_backend_buffer_type_t buft,
                                                                     wsp_ggml_type type, int64_t nrows);

} // namespace wsp::split
