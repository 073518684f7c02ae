#pragma once

// What the MUL_MAT paths share: the node's geometry (a is broadcast over b's dims 2-3, every
// row addressed through its byte strides), a cursor over next_chunk() for several dynamically
// scheduled phases within one node, and carving of the node's work buffer.

#include "kernel.h"

#include <cstddef>
#include <cstdint>

namespace wsp::cpu::mm {

struct Geometry {
    const wsp_ggml_tensor * a;
    const wsp_ggml_tensor * b;
    const wsp_ggml_tensor * dst;
    int64_t                 K, N, M;    // inner length, weight rows, activation rows per batch
    int64_t                 ne12, ne13; // batch dims of b (and dst)
    int64_t                 r2, r3;     // broadcast ratios of a over b
    int64_t                 n_batch;    // ne12 * ne13

    explicit Geometry(const wsp_ggml_tensor * node)
        : a(node->src[0]), b(node->src[1]), dst(node), K(node->src[0]->ne[0]), N(node->src[0]->ne[1]),
          M(node->src[1]->ne[1]), ne12(node->src[1]->ne[2]), ne13(node->src[1]->ne[3]),
          r2(node->src[1]->ne[2] / node->src[0]->ne[2]), r3(node->src[1]->ne[3] / node->src[0]->ne[3]),
          n_batch(node->src[1]->ne[2] * node->src[1]->ne[3]) {}

    // batch index = i3 * ne12 + i2
    const char * a_row(int64_t i0, int64_t batch) const {
        const int64_t i2 = batch % ne12, i3 = batch / ne12;
        return static_cast<const char *>(a->data) + i0 * a->nb[1] + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
    }
    const char * b_row(int64_t i1, int64_t batch) const {
        const int64_t i2 = batch % ne12, i3 = batch / ne12;
        return static_cast<const char *>(b->data) + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
    }
    // dst row i1 of a batch; elements are dst->nb[0] bytes apart
    char * dst_row(int64_t i1, int64_t batch) const {
        const int64_t i2 = batch % ne12, i3 = batch / ne12;
        return static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
    }
    float * dst_at(int64_t i0, int64_t i1, int64_t batch) const {
        return reinterpret_cast<float *>(dst_row(i1, batch) + i0 * dst->nb[0]);
    }
    // a's rows are stored elements of its type back to back (quantized blocks always are)
    bool a_rows_contiguous() const { return a->nb[0] == wsp_ggml_type_size(a->type); }
};

// Note [chunk cursor]: next_chunk() counts across the whole node and is never reset. Every task
// drains a phase by fetching until it gets an index past the phase's end, so each task fetches
// exactly one index too many and the counter ends at base + n + nth. With a barrier between
// phases every task can compute the next base by itself.
class ChunkCursor {
public:
    explicit ChunkCursor(const ComputeParams & p) : p_(p) {}

    // next item of a phase of n items, or -1 when the phase is drained
    int64_t next(int64_t n) const {
        const int64_t c = p_.next_chunk() - base_;
        return c < n ? c : -1;
    }
    // after the barrier that ends a phase of n items
    void end_phase(int64_t n) { base_ += n + p_.nth; }

private:
    const ComputeParams & p_;
    int64_t               base_ = 0;
};

// fn(batch, i0, i1) over the weight rows of every batch (n_batch x N rows, batch-major), in
// guided claims of at least min_rows rows (Note [guided claims], threadpool.h); a claim that
// crosses a batch boundary is cut there
template <class Fn>
void for_claimed_rows(const ComputeParams & p, const Geometry & g, int64_t min_rows, Fn && fn) {
    int64_t begin, end;
    while (p.claim(g.n_batch * g.N, min_rows, begin, end)) {
        for (int64_t r = begin; r < end;) {
            const int64_t batch = r / g.N, i0 = r % g.N;
            const int64_t i1 = i0 + (end - r) < g.N ? i0 + (end - r) : g.N;
            fn(batch, i0, i1);
            r += i1 - i0;
        }
    }
}

// Note [two streams] (mul_mat_repack.cpp): items [i0, i1) read as two streams, item i beside item
// i + half, pair(i, i + half) for each i of the first half; returns the first item left over (the
// odd one, or i0 itself for a range of one), for the caller's one-at-a-time loop
template <class Pair>
int64_t two_streams(int64_t i0, int64_t i1, Pair && pair) {
    const int64_t half = (i1 - i0) / 2;
    for (int64_t i = i0; i < i0 + half; ++i) {
        pair(i, i + half);
    }
    return i0 + 2 * half;
}

// Note [stream heads]: a stream's software prefetch runs a fixed distance ahead of its reads, so
// a claimed range would start with that distance not yet asked for and read on demand, line by
// line; the first `bytes` of both streams are asked for at once before the range is read.
// CPU_REPACK at one b row, 8 KiB (its prefetch distance): better in 22 of 24 interleaved pairs
// (Q4_x, Q5_x, both whisper shapes, median +4.4%); 4 KiB +1.3%, 16 KiB 3% below 8 KiB.
// Non-temporal, as CPU_REPACK's one-row reads (the only user: for F16/BF16 and Q8_0 rows the same
// made no difference, 7 of 18 interleaved pairs better, median -4%).
inline void prefetch_heads(const char * a, const char * b, int64_t bytes) {
    for (int64_t off = 0; off < bytes; off += 64) {
        __builtin_prefetch(a + off, 0, 0);
        __builtin_prefetch(b + off, 0, 0);
    }
}

constexpr size_t ALIGN = 64;

inline size_t align_up(size_t n) {
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

// hands out 64-byte aligned pieces of the work buffer in a fixed order
class WorkCarver {
public:
    explicit WorkCarver(void * base) : base_(static_cast<char *>(base)) {
        const uintptr_t addr = reinterpret_cast<uintptr_t>(base_);
        off_                 = (ALIGN - addr % ALIGN) % ALIGN;
    }
    template <class T>
    T * take(size_t count) {
        T * p = reinterpret_cast<T *>(base_ + off_);
        off_ += align_up(count * sizeof(T));
        return p;
    }

private:
    char * base_;
    size_t off_ = 0;
};

} // namespace wsp::cpu::mm
