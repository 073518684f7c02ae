// The GEMM driver. Per batch: (1) the tasks pack b's rows into MR-row panels shared in the work
// buffer, barrier; (2) items of NB weight rows x a range of b rows are taken with next_chunk();
// per block of KS values of k the task packs the item's weights into NR-wide panels (its own
// scratch) and sweeps them with each MR-row panel of b. Item boundaries fall on panel
// boundaries and every output sums its k slices in order, so the partition never changes what
// any output computes.

#include "mul_mat_gemm.h"

#include "gemm_kernel.h"
#include "gemm_pack.h"

namespace wsp::cpu::mm {

namespace {

using gemm::MR;
using gemm::NR;

// Note [GEMM blocking]: an NB x KS block of packed weights (512 KiB) stays in L2 while each
// MR-row panel of b sweeps it slice by slice; the KC x MR panel of b of a slice (12 KiB with
// AVX-512) stays in L1 across the NB / NR micro-kernel calls, and the MR x NB tile of dst stays
// in L1/L2 across the slices, so dst goes through memory once per KS (K = 1280: 3 times).
// NB = 256 / KS = 512 measured 3-6% faster than 128 / 1024 and level with 512 / 256 at the
// encoder and im2col shapes; the smaller NB balances better. KC is a multiple of 256 so
// quantized blocks (32 or 256 values) never straddle a slice.
constexpr int64_t KC = 256;
constexpr int64_t KS = 512;
constexpr int64_t NB = 256;
static_assert(KS % KC == 0, "a block holds whole slices");
static_assert(NB % NR == 0, "an item holds whole weight panels");

// at least this many items per task so that dynamic scheduling evens out the tails
constexpr int64_t ITEMS_PER_TASK = 4;

struct Blocking {
    int64_t m_panels; // MR-row panels of b per batch
    int64_t n_blocks; // items along N
    int64_t m_blocks; // items along M
    int64_t mb;       // b rows per item along M (a multiple of MR)
};

Blocking blocking(const Geometry & g, int nth) {
    Blocking bl;
    bl.m_panels         = (g.M + MR - 1) / MR;
    bl.n_blocks         = (g.N + NB - 1) / NB;
    const int64_t want  = ITEMS_PER_TASK * nth;
    int64_t       split = bl.n_blocks >= want ? 1 : (want + bl.n_blocks - 1) / bl.n_blocks;
    split               = split < bl.m_panels ? split : bl.m_panels;
    bl.mb               = (bl.m_panels + split - 1) / split * MR;
    bl.m_blocks         = (g.M + bl.mb - 1) / bl.mb;
    return bl;
}

size_t scratch_floats(const Geometry & g) {
    const size_t for_b = (size_t) (MR + 1) * (size_t) g.K;
    const size_t for_a = (size_t) (NR + 1) * (size_t) KC;
    return for_b > for_a ? for_b : for_a;
}

struct TaskBuffers {
    float * a_block; // NB x KS packed weights
    float * scratch; // row conversion before packing
    float * tile;    // MR x NR outputs of an edge tile
};

struct Item {
    int64_t batch, n0, nn, m0, m1;
};

// adds (or stores) an MR x NR tile computed into scratch to the rows x cols corner of dst
void merge_tile(const Geometry & g, const Item & it, int64_t n, int64_t m, int rows, int cols, const float * tile,
                bool accumulate) {
    const size_t nb0 = g.dst->nb[0];
    for (int r = 0; r < rows; ++r) {
        char *        d = g.dst_row(m + r, it.batch) + (size_t) n * nb0;
        const float * t = tile + r * NR;
        for (int j = 0; j < cols; ++j) {
            float * o = reinterpret_cast<float *>(d + (size_t) j * nb0);
            *o        = accumulate ? *o + t[j] : t[j];
        }
    }
}

// packs weight rows [n0, n0 + nn) x k in [ks0, ks1) as NR-wide panels, slice by slice of KC
void pack_a_block(const Geometry & g, const Item & it, int64_t ks0, int64_t ks1, const TaskBuffers & buf) {
    const gemm::RowSource src      = { g.a->type, g.a_row(0, it.batch), g.a->nb[1], g.a->nb[0] };
    const int64_t         n_panels = (it.nn + NR - 1) / NR;
    for (int64_t k0 = ks0; k0 < ks1; k0 += KC) {
        const int64_t kc = ks1 - k0 < KC ? ks1 - k0 : KC;
        float *       sl = buf.a_block + (k0 - ks0) * n_panels * NR;
        for (int64_t pn = 0; pn < n_panels; ++pn) {
            const int64_t left = it.nn - pn * NR;
            gemm::pack_panel(src, it.n0 + pn * NR, (int) (left < NR ? left : NR), NR, k0, kc, sl + pn * NR * kc,
                             buf.scratch);
        }
    }
}

void compute_item(const Geometry & g, const Item & it, const float * b_packed, const TaskBuffers & buf) {
    const int64_t n_panels = (it.nn + NR - 1) / NR;
    const size_t  ldc      = g.dst->nb[1];
    const bool    direct   = g.dst->nb[0] == sizeof(float);
    for (int64_t ks0 = 0; ks0 < g.K; ks0 += KS) {
        const int64_t ks1 = g.K - ks0 < KS ? g.K : ks0 + KS;
        pack_a_block(g, it, ks0, ks1, buf);
        for (int64_t m = it.m0; m < it.m1; m += MR) {
            const int rows = (int) (it.m1 - m < MR ? it.m1 - m : MR);
            // the dst tile of these rows stays in cache while the slices accumulate into it
            for (int64_t k0 = ks0; k0 < ks1; k0 += KC) {
                const int64_t kc         = ks1 - k0 < KC ? ks1 - k0 : KC;
                const bool    accumulate = k0 > 0;
                const float * bp         = b_packed + (m / MR) * MR * g.K + k0 * MR;
                const float * sl         = buf.a_block + (k0 - ks0) * n_panels * NR;
                for (int64_t pn = 0; pn < n_panels; ++pn) {
                    const int64_t n    = it.n0 + pn * NR;
                    const int     cols = (int) (it.nn - pn * NR < NR ? it.nn - pn * NR : NR);
                    const float * ap   = sl + pn * NR * kc;
                    if (cols == NR && direct) {
                        gemm::micro_kernel(rows, kc, ap, bp, g.dst_at(n, m, it.batch), ldc, accumulate);
                    } else {
                        gemm::micro_kernel(rows, kc, ap, bp, buf.tile, NR * sizeof(float), false);
                        merge_tile(g, it, n, m, rows, cols, buf.tile, accumulate);
                    }
                }
            }
        }
    }
}

void pack_b(const ComputeParams & p, const Geometry & g, const Blocking & bl, int64_t batch, float * b_packed,
            float * scratch) {
    const gemm::RowSource src = { g.b->type, g.b_row(0, batch), g.b->nb[1], g.b->nb[0] };
    int64_t               p0, p1;
    split_range(bl.m_panels, p.ith, p.nth, p0, p1);
    for (int64_t pi = p0; pi < p1; ++pi) {
        const int64_t left = g.M - pi * MR;
        gemm::pack_panel(src, pi * MR, (int) (left < MR ? left : MR), MR, 0, g.K, b_packed + pi * MR * g.K, scratch);
    }
}

} // namespace

size_t gemm_work_size(const Geometry & g, int nth) {
    const Blocking bl       = blocking(g, nth);
    const size_t   b_packed = align_up((size_t) bl.m_panels * MR * (size_t) g.K * sizeof(float));
    const size_t   per_task = align_up((size_t) NB * KS * sizeof(float)) + align_up(scratch_floats(g) * sizeof(float)) +
                            align_up((size_t) MR * NR * sizeof(float));
    return ALIGN + b_packed + (size_t) nth * per_task;
}

void gemm_compute(const ComputeParams & p, const Geometry & g) {
    const Blocking bl = blocking(g, p.nth);
    WorkCarver     carve(p.wdata);
    float *        b_packed = carve.take<float>((size_t) bl.m_panels * MR * (size_t) g.K);
    TaskBuffers    buf      = {};
    for (int t = 0; t <= p.ith; ++t) {
        buf.a_block = carve.take<float>((size_t) NB * KS);
        buf.scratch = carve.take<float>(scratch_floats(g));
        buf.tile    = carve.take<float>((size_t) MR * NR);
    }

    ChunkCursor   cursor(p);
    const int64_t n_items = bl.n_blocks * bl.m_blocks;
    for (int64_t batch = 0; batch < g.n_batch; ++batch) {
        pack_b(p, g, bl, batch, b_packed, buf.scratch);
        p.barrier();
        for (int64_t i = cursor.next(n_items); i >= 0; i = cursor.next(n_items)) {
            Item it;
            it.batch = batch;
            it.n0    = (i / bl.m_blocks) * NB;
            it.nn    = g.N - it.n0 < NB ? g.N - it.n0 : NB;
            it.m0    = (i % bl.m_blocks) * bl.mb;
            it.m1    = g.M - it.m0 < bl.mb ? g.M : it.m0 + bl.mb;
            compute_item(g, it, b_packed, buf);
        }
        // b_packed is repacked for the next batch only after every task is done with it
        p.barrier();
        cursor.end_phase(n_items);
    }
}

} // namespace wsp::cpu::mm
