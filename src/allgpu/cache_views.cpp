// How a view of a sharded root (Note [sharded caches] in plan.h) lies on its parts, and each
// member's view of its own part.

#include "plan.h"

namespace wsp::allgpu::tp {

ViewFit map_view_fit(const Layout & L, const int64_t * ne, const size_t * nb, size_t offs, size_t es, ViewMap & out) {
    if (offs % es != 0 || L.W <= 0 || nb[0] != es) {
        return ViewFit::ACROSS_PARTS;
    }
    const int64_t r0   = (int64_t) (offs / es) % L.W;
    int           best = -1; // the outermost dim inside a block
    for (int d = 0; d < WSP_GGML_MAX_DIMS; ++d) {
        const int64_t s = (int64_t) (nb[d] / es);
        if (ne[d] == 1) {
            continue;
        }
        if (nb[d] % es != 0 || (s >= L.W && s % L.W != 0)) {
            return ViewFit::ACROSS_PARTS;
        }
        if (s < L.W && (best < 0 || s > (int64_t) (nb[best] / es))) {
            best = d;
        }
    }
    if (best < 0) {
        return ViewFit::ACROSS_PARTS;
    }
    const int64_t s     = (int64_t) (nb[best] / es);
    int64_t       inner = r0; // the farthest element the other dims inside a block reach
    for (int d = 0; d < WSP_GGML_MAX_DIMS; ++d) {
        const int64_t sd = (int64_t) (nb[d] / es);
        inner += d != best && ne[d] > 1 && sd < L.W ? (ne[d] - 1) * sd : 0;
    }
    if (inner >= s || ne[best] * s != L.W) {
        return ViewFit::ACROSS_PARTS;
    }
    out.dim    = best;
    out.stride = s;
    out.ranges.clear();
    for (const Range & p : L.parts) {
        if (p.first % s != 0 || p.second % s != 0) {
            return ViewFit::OFF_PARTS;
        }
        out.ranges.push_back({ p.first / s, p.second / s });
    }
    return ViewFit::MAPPED;
}

bool map_view(const Layout & L, const int64_t * ne, const size_t * nb, size_t offs, size_t es, ViewMap & out) {
    return map_view_fit(L, ne, nb, offs, es, out) == ViewFit::MAPPED;
}

void local_view(const Layout & L, int m, const ViewMap & vm, const int64_t * ne, const size_t * nb, size_t offs,
                size_t es, int64_t * lne, size_t * lnb, size_t * loffs) {
    const int64_t w = L.parts[m].second - L.parts[m].first;
    const int64_t o = (int64_t) (offs / es);
    for (int d = 0; d < WSP_GGML_MAX_DIMS; ++d) {
        const int64_t s = (int64_t) (nb[d] / es);
        lne[d]          = d == vm.dim ? vm.ranges[m].second - vm.ranges[m].first : ne[d];
        lnb[d]          = s >= L.W && s % L.W == 0 ? (size_t) (s / L.W * w) * es : nb[d]; // blocks are w long here
    }
    *loffs = (size_t) (o / L.W * w + o % L.W) * es;
}

} // namespace wsp::allgpu::tp
