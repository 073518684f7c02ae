#pragma once

// Packing for the GEMM: rows of any supported storage type (F32, F16, BF16 with any element
// stride; quantized rows of whole blocks) converted to F32 and transposed into panels where
// the P values of one k are adjacent. The F32 values are exactly the stored values (fp16/bf16
// widen exactly, quantized blocks dequantize as the type's to_float does), so the GEMM computes
// with the weights as stored.

#include "ggml.h"

#include <cstddef>
#include <cstdint>

namespace wsp::cpu::gemm {

// rows of one matrix: row r starts at base + r * row_stride, its elements elem_stride apart
struct RowSource {
    wsp_ggml_type type;
    const char *  base;
    size_t        row_stride;
    size_t        elem_stride;
};

// elements [k0, k0 + n) of a row -> F32. For quantized types k0 and n are multiples of the block size.
void row_segment_to_f32(const RowSource & src, const char * row, int64_t k0, int64_t n, float * out);

// panel[k * P + r] = row (r0 + r)[k0 + k] for r < n_rows, 0 for n_rows <= r < P, k < kc.
// scratch: (P + 1) * kc floats, used when the rows must be converted first.
void pack_panel(const RowSource & src, int64_t r0, int n_rows, int P, int64_t k0, int64_t kc, float * panel,
                float * scratch);

} // namespace wsp::cpu::gemm
