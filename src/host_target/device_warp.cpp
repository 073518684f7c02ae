// Warp collectives of the host target: shuffles, votes, __syncwarp and mma.sync. The lanes of a
// warp are fibers of one OS thread (grid_block.h), so a collective needs no locks: each lane
// posts its part and waits; the last lane of the mask to arrive computes every lane's result,
// writes it through the lanes' `out` pointers (their stacks stay put while they wait) and wakes
// them. The checks are those of Note [stricter than hardware] (grid_block.cpp).

#include "grid_block.h"

#include <cstdio>
#include <cstring>

namespace wsp::host_target {

namespace {

using detail::BlockRunner;
using detail::FiberThread;
using detail::ThreadState;
using detail::WarpPost;

constexpr unsigned WARP = WSP_HOST_WARP_SIZE;

wsp_lane_mask_t bit(unsigned lane) {
    return (wsp_lane_mask_t) 1 << lane;
}

const char * op_name(WarpOp op) {
    switch (op) {
        case WarpOp::sync: return "__syncwarp";
        case WarpOp::shfl_idx: return "__shfl_sync";
        case WarpOp::shfl_up: return "__shfl_up_sync";
        case WarpOp::shfl_down: return "__shfl_down_sync";
        case WarpOp::shfl_xor: return "__shfl_xor_sync";
        case WarpOp::ballot: return "__ballot_sync";
        case WarpOp::any: return "__any_sync";
        case WarpOp::all: return "__all_sync";
        case WarpOp::mma: return "mma.sync";
    }
    return "?";
}

bool is_shuffle(WarpOp op) {
    return op == WarpOp::shfl_idx || op == WarpOp::shfl_up || op == WarpOp::shfl_down || op == WarpOp::shfl_xor;
}

std::string hex(wsp_lane_mask_t mask) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long) mask);
    return buf;
}

std::string describe(const WarpPost & p) {
    std::string s = std::string(op_name(p.op)) + " (" + detail::where(p.site) + ") with mask " + hex(p.mask);
    if (is_shuffle(p.op)) {
        s += ", width " + std::to_string(p.width) + ", " + std::to_string(p.size) + "-byte value";
    }
    return s;
}

// the lanes of one call must agree on everything but their own source lane / offset
bool same_collective(const WarpPost & a, const WarpPost & b) {
    return a.op == b.op && a.mask == b.mask && a.width == b.width && a.size == b.size;
}

// The lane whose value `lane` receives, as PTX shfl.sync computes it from the 5-bit (6-bit
// with 64 lanes) operand and the segment of `width` lanes: a source past the segment's end
// (down, xor) or before its start (up) gives the lane its own value.
unsigned shuffle_source(const WarpPost & p, unsigned lane) {
    const unsigned w     = (unsigned) p.width;
    const unsigned b     = (unsigned) p.arg & (WARP - 1);
    const unsigned first = lane & ~(w - 1), last = first + w - 1;
    switch (p.op) {
        case WarpOp::shfl_idx: return first + (b & (w - 1));
        case WarpOp::shfl_up: return lane >= first + b ? lane - b : lane;
        case WarpOp::shfl_down: return lane + b <= last ? lane + b : lane;
        case WarpOp::shfl_xor: return (lane ^ b) <= last ? (lane ^ b) : lane;
        default: return lane;
    }
}

// Note [mma emulation] (device.h): the lanes' fragments are assembled into A, B and C, and each
// lane's D elements computed from them; F16 products are exact in float, summed in k order.
struct MmaIn {
    uint32_t a[4];
    uint32_t b0, b1;
    float    c[4];
};

void complete_mma(const WarpPost * const * posts) {
    float A[16][16], B[16][8], C[16][8];
    auto  lo = [](uint32_t w) { return wsp::fp16_to_fp32((uint16_t) (w & 0xffffu)); };
    auto  hi = [](uint32_t w) { return wsp::fp16_to_fp32((uint16_t) (w >> 16)); };
    for (unsigned lane = 0; lane < 32; ++lane) {
        const MmaIn &  m = *static_cast<const MmaIn *>(posts[lane]->in);
        const unsigned g = lane / 4, t = lane % 4;
        for (unsigned r = 0; r < 4; ++r) {
            const unsigned row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
            A[row][col]     = lo(m.a[r]);
            A[row][col + 1] = hi(m.a[r]);
        }
        B[2 * t][g]     = lo(m.b0);
        B[2 * t + 1][g] = hi(m.b0);
        B[2 * t + 8][g] = lo(m.b1);
        B[2 * t + 9][g] = hi(m.b1);
        for (unsigned i = 0; i < 4; ++i) {
            C[g + 8 * (i >> 1)][2 * t + (i & 1)] = m.c[i];
        }
    }
    for (unsigned lane = 0; lane < 32; ++lane) {
        const unsigned g = lane / 4, t = lane % 4;
        float *        d = static_cast<float *>(posts[lane]->out);
        for (unsigned i = 0; i < 4; ++i) {
            const unsigned row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
            float          acc = 0.0f;
            for (unsigned k = 0; k < 16; ++k) {
                acc += A[row][k] * B[k][col];
            }
            d[i] = C[row][col] + acc;
        }
    }
}

// every lane of `mask` has arrived: compute and deliver the results
void complete(const WarpPost * const * posts, wsp_lane_mask_t mask, WarpOp op) {
    switch (op) {
        case WarpOp::sync: return;
        case WarpOp::ballot:
        case WarpOp::any:
        case WarpOp::all: {
            wsp_lane_mask_t votes = 0;
            for (unsigned l = 0; l < WARP; ++l) {
                if (((mask >> l) & 1) && *static_cast<const int *>(posts[l]->in)) {
                    votes |= bit(l);
                }
            }
            for (unsigned l = 0; l < WARP; ++l) {
                if (!((mask >> l) & 1)) {
                    continue;
                }
                if (op == WarpOp::ballot) {
                    *static_cast<wsp_lane_mask_t *>(posts[l]->out) = votes;
                } else {
                    *static_cast<int *>(posts[l]->out) = op == WarpOp::any ? votes != 0 : votes == mask;
                }
            }
            return;
        }
        case WarpOp::mma: complete_mma(posts); return;
        default: break;
    }
    for (unsigned l = 0; l < WARP; ++l) {
        if (!((mask >> l) & 1)) {
            continue;
        }
        const WarpPost & p   = *posts[l];
        const unsigned   src = shuffle_source(p, l);
        if ((mask >> src) & 1) {
            std::memcpy(p.out, posts[src]->in, p.size);
        } else {
            std::memset(p.out, 0xff, p.size); // undefined on a GPU: a NaN here
        }
    }
}

} // namespace

void warp_collective(WarpOp op, wsp_lane_mask_t mask, int arg, int width, size_t size, const void * in, void * out,
                     Site site) {
    BlockRunner &         r        = detail::this_runner();
    FiberThread &         t        = r.current();
    const unsigned        base     = t.warp * WARP;
    const unsigned        lanes    = r.thread_count() - base < WARP ? r.thread_count() - base : WARP;
    const wsp_lane_mask_t existing = lanes == WARP ? (wsp_lane_mask_t) WSP_GPU_FULL_MASK : bit(lanes) - 1;
    const WarpPost        post{ op, mask, arg, width, size, in, out, site };
    auto                  here = [&] {
        return describe(post) + " in " + r.name(t) + " (lane " + std::to_string(t.lane) + " of warp " +
               std::to_string(t.warp) + ")";
    };
    if (!((mask >> t.lane) & 1)) {
        r.fail(here() + ": the mask does not name the calling lane");
    }
    if (mask & ~existing) {
        r.fail(here() + ": the mask names lanes the block does not have (this warp has " + std::to_string(lanes) +
               " lanes)");
    }
    if (is_shuffle(op) && (width < 1 || width > (int) WARP || (width & (width - 1)) != 0)) {
        r.fail(here() + ": width " + std::to_string(width) + " is not a power of two up to the warp size " +
               std::to_string(WARP));
    }
    unsigned arrived = 1;
    for (unsigned l = 0; l < lanes; ++l) {
        const FiberThread & o = r.thread(base + l);
        if (l == t.lane) {
            continue;
        }
        if ((mask >> l) & 1) {
            switch (o.state) {
                case ThreadState::exited: r.fail(here() + ": lane " + std::to_string(l) + " of the mask has exited");
                case ThreadState::barrier:
                    r.fail(here() + ": lane " + std::to_string(l) + " of the mask waits at __syncthreads");
                case ThreadState::warp:
                    if (same_collective(o.post, post)) {
                        ++arrived;
                    } else if ((o.post.mask >> t.lane) & 1) {
                        // each waits for the other: a hang on a GPU
                        r.fail(here() + ": lane " + std::to_string(l) +
                               " of the mask waits for this lane at another "
                               "collective, " +
                               describe(o.post));
                    }
                    break; // else it may finish that one (without us) and come
                default: break;
            }
        }
    }
    if (arrived < (unsigned) __builtin_popcountll((unsigned long long) mask)) {
        t.post  = post;
        t.state = ThreadState::warp;
        r.suspend(); // the last lane to arrive has written our result
        return;
    }
    const WarpPost * posts[WARP] = {};
    for (unsigned l = 0; l < lanes; ++l) {
        if ((mask >> l) & 1) {
            posts[l] = l == t.lane ? &post : &r.thread(base + l).post;
        }
    }
    complete(posts, mask, op);
    for (unsigned l = 0; l < lanes; ++l) {
        if (l != t.lane && ((mask >> l) & 1)) {
            r.wake(r.thread(base + l));
        }
    }
}

wsp_lane_mask_t active_mask() {
    BlockRunner &   r    = detail::this_runner();
    FiberThread &   t    = r.current();
    const unsigned  base = t.warp * WARP;
    wsp_lane_mask_t mask = 0;
    for (unsigned l = 0; l < WARP && base + l < r.thread_count(); ++l) {
        if (r.thread(base + l).state != ThreadState::exited) {
            mask |= bit(l);
        }
    }
    return mask;
}

void mma_m16n8k16_f32_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Site site) {
    if (WARP != 32) {
        BlockRunner & r = detail::this_runner();
        r.fail("mma.sync (" + detail::where(site) + ") in " + r.name(r.current()) +
               ": m16n8k16 is a 32-lane operation and this build has " + std::to_string(WARP) + "-lane warps");
    }
    const MmaIn in{ { a[0], a[1], a[2], a[3] }, b0, b1, { d[0], d[1], d[2], d[3] } };
    float       out[4];
    warp_collective(WarpOp::mma, WSP_GPU_FULL_MASK, 0, WARP, sizeof(in), &in, out, site);
    for (int i = 0; i < 4; ++i) {
        d[i] = out[i];
    }
}

} // namespace wsp::host_target
