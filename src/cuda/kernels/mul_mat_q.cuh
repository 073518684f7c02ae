#pragma once

// MUL_MAT with quantized weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, and the K-quants Q2_K ... Q6_K):
// dst[N, M, b2, b3] = W[K, N]^T x[K, M, b2, b3], W's rows whole blocks (K a multiple of 32, or 256),
// broadcast over dims 2-3. Two paths, chosen from M alone (Note [mmq paths]): a dot kernel on
// 8-bit activations for few rows (for the K-quants one on F32 activations: Note [K-quant dot] in
// mul_mat_q.cu), and the weight dequantized to F16 for cuBLAS for many.

#include "../ops.cuh"

namespace wsp::cuda {

// Note [mmq paths]: up to mmq_dot_max_rows() activation rows per batch (8, overridden by
// WSP_GGML_CUDA_MMQ_DOT_MAX_ROWS for measurements) the activations are quantized once to 8-bit
// blocks (d = amax / 127, q = round-to-even(x / d), s = d * sum(q), bit-exact with the CPU's
// dot_q8 path) and a warp takes two weight rows against up to 8 activation rows with __dp4a, so
// each weight byte is read once per 8 rows. Above that, the weight is dequantized to F16 in
// scratch (in slabs of rows within a memory budget) and multiplied on tensor cores by cuBLAS
// with F16 activations and F32 accumulation.
//
// Why 8: the dot kernel spends ~9 instructions per quarter block (8 weights) per activation row
// (3 loads, 2 dp4a, conversion and 2-3 FMAs), ~1.7 us per pass of 8 rows over a 1280 x 5120 weight
// on an H200 (132 SMs x 4 schedulers), plus ~1 us to stream a Q4_0 weight from DRAM once; the
// GEMM path pays ~5 us to write and read the F16 copy (2 bytes per weight) plus a GEMM of ~2 us
// at M = 64. The estimate puts the speed crossover near M = 32-40, but the dot path also costs
// precision (8-bit activations: NMSE ~1.6e-5 against ~1.6e-7 for F16), and whisper runs either
// decode steps (M = 1..5, beams) or prompts of tens to hundreds of rows, so the dot path is kept
// to one pass of 8. Measure the speed crossover with bench_cuda_ops (BM_mul_mat, M = 8..64) under
// WSP_GGML_CUDA_MMQ_DOT_MAX_ROWS=64 and with the default: the smallest M at which the default is
// faster is where the GEMM path starts to pay.
int64_t mmq_dot_max_rows();

// weight types with a kernel here
bool mmq_type_supported(wsp_ggml_type t);

// the node's shape and layout are ones mul_mat_q can run (weight quantized, see mul_mat.cu)
bool mul_mat_q_supported(const wsp_ggml_tensor * t);
bool mul_mat_q_launch(LaunchCtx & ctx, wsp_ggml_tensor * t);

// the dot path (mul_mat_q_dot.cu)
bool mul_mat_q_dot(LaunchCtx & ctx, wsp_ggml_tensor * t);

} // namespace wsp::cuda
