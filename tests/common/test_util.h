#pragma once

// Shared test helpers: seeded random data, NMSE against a double reference, conversion of
// host values to and from any tensor type, and a small harness that allocates a graph on the
// CPU backend, sets inputs, computes and reads results.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace wsp::test {

// uniform values in [lo, hi) from a fixed seed
std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// normalised mean squared error: sum (out - ref)^2 / sum ref^2 (0 when both are 0)
double nmse(const std::vector<float> & out, const std::vector<double> & ref);
double nmse(const std::vector<float> & out, const std::vector<float> & ref);

// max |out - ref|
double max_abs_diff(const std::vector<float> & out, const std::vector<double> & ref);

// values of t's element type after a round trip (what the kernel will read), e.g. fp16-rounded
std::vector<float> round_trip(wsp_ggml_type type, const std::vector<float> & values);

// tensor data <-> f32 values in logical (row-major, ne0 fastest) order, any layout and any
// type with converters; the tensor must be allocated in a host buffer
void               set_values(wsp_ggml_tensor * t, const std::vector<float> & values);
std::vector<float> get_values(const wsp_ggml_tensor * t);
void               set_i32(wsp_ggml_tensor * t, const std::vector<int32_t> & values);

// seeded random blocks of a super-block type with finite scales (the fields type_dump sets)
std::vector<uint8_t> random_blocks(wsp_ggml_type type, int64_t n_blocks, uint32_t seed);

// for a quantized type nothing quantizes to (the grid i-quants: no from_float_ref), each row of
// t random_blocks (seed + row) and true; false for every other type
bool fill_random_blocks(wsp_ggml_tensor * t, uint32_t seed);

// element (i0, i1, i2, i3) of a logical array with the shape of t
inline size_t flat_index(const wsp_ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (size_t) (((i3 * t->ne[2] + i2) * t->ne[1] + i1) * t->ne[0] + i0);
}

// Builds a graph in a no_alloc context, allocates it on the CPU backend and computes it.
//   Graph g;
//   auto * a = g.input(WSP_GGML_TYPE_F32, {7, 3});
//   auto * out = wsp_ggml_add(g.ctx(), a, a);
//   g.compute(out, n_threads);          // allocates on the first call
//   auto v = get_values(out);
class Graph {
public:
    explicit Graph(size_t max_tensors = 512);
    ~Graph();

    Graph(const Graph &)             = delete;
    Graph & operator=(const Graph &) = delete;

    wsp_ggml_context * ctx() const { return ctx_; }

    // a new tensor flagged as input (ne: up to 4 dims)
    wsp_ggml_tensor * input(wsp_ggml_type type, std::vector<int64_t> ne, const char * name = nullptr);

    // build the graph ending in `out` (and any extra outputs) and allocate it; then callers set inputs
    void build(wsp_ggml_tensor * out, std::vector<wsp_ggml_tensor *> extra_outputs = {});

    // compute with n_threads (build() must have been called); returns the status
    wsp_ggml_status run(int n_threads);

    // build + fill inputs with fill(tensor) + run: convenience for one-shot tests
    wsp_ggml_status compute(wsp_ggml_tensor * out, int n_threads);

    wsp_ggml_cgraph *  graph() const { return graph_; }
    wsp_ggml_backend_t backend() const { return backend_; }
    size_t             compute_buffer_size() const;

private:
    wsp_ggml_context * ctx_     = nullptr;
    wsp_ggml_cgraph *  graph_   = nullptr;
    wsp_ggml_backend_t backend_ = nullptr;
    wsp_ggml_gallocr_t galloc_  = nullptr;
};

// the element types every float op must accept
inline std::vector<wsp_ggml_type> float_types() {
    return { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16 };
}

inline std::vector<wsp_ggml_type> quant_types() {
    return { WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_0 };
}

// NMSE bound for values stored in `type` (its rounding error squared, with margin)
double nmse_bound(wsp_ggml_type type);

// fails the test when there is no reference to compare with (guards against empty comparisons)
std::string shape_str(const wsp_ggml_tensor * t);

// IEEE 754 references written from the definitions (round to nearest, ties to even), independent
// of the library's conversions: binary16 bits of f, the value of binary16 bits, bfloat16 bits of f
uint16_t ieee_fp16_bits(float f);
double   ieee_fp16_value(uint16_t h);
uint16_t ieee_bf16_bits(float f);

// Captures what the library logs while it is alive (thread-safe); the destructor restores the
// default sink (stderr).
class LogCapture {
public:
    LogCapture();
    ~LogCapture();

    LogCapture(const LogCapture &)             = delete;
    LogCapture & operator=(const LogCapture &) = delete;

    std::string text() const;                          // every message, concatenated
    bool        contains(const std::string & s) const; // some message contains s
    int         count(wsp_ggml_log_level level) const; // messages of this level
    void        clear();

private:
    static void on_log(wsp_ggml_log_level level, const char * text, void * user_data);

    struct State;
    State * state_;
};

// Compares out with a double reference element by element: |out - ref| <= atol + rtol * |ref|.
// Prints the first mismatches with their flat index; returns true when all match.
bool all_close(const std::vector<float> & out, const std::vector<double> & ref, double atol, double rtol,
               const std::string & what);

// relative rounding step of values stored in `type` (2^-23 for f32, 2^-10 for f16, 2^-7 for bf16)
double type_eps(wsp_ggml_type type);

// How an op's operand is laid out in memory
enum class Layout {
    Contiguous, // a fresh input tensor
    Permuted,   // dims 0 and 1 swapped: a permute of an input of shape [ne1, ne0, ne2, ne3]
    Strided,    // rows of ne0 inside rows of ne0 + 3, starting one element in
};

const char * layout_name(Layout layout);

// an operand of the given logical shape and layout over a new input of g
wsp_ggml_tensor * make_operand(Graph & g, wsp_ggml_type type, std::vector<int64_t> ne, Layout layout);

// set every input tensor of g's context (allocated) to random values in [lo, hi); returns how many
int fill_inputs(Graph & g, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// A host-memory buffer type written against ggml-backend-impl.h, with a configurable name,
// tensor alignment and maximum buffer size; it records every buffer it allocates and frees so
// that tests can check where tensors were placed.
class HostBufferType {
public:
    HostBufferType(const char * name, size_t alignment, size_t max_size);
    ~HostBufferType();

    HostBufferType(const HostBufferType &)             = delete;
    HostBufferType & operator=(const HostBufferType &) = delete;

    wsp_ggml_backend_buffer_type_t buft();

    struct Allocation {
        const char * base;
        size_t       size;
    };
    const std::vector<Allocation> & allocations() const { return allocations_; }
    int                             n_freed() const { return n_freed_; }

    // the allocation holding [p, p + n), or -1
    int allocation_of(const void * p, size_t n) const;

private:
    struct Impl;
    Impl *                  impl_;
    std::vector<Allocation> allocations_;
    int                     n_freed_ = 0;
    friend struct Impl;
};

} // namespace wsp::test
