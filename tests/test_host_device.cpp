// The device side of the host target (src/host_target/device.h, run_grid): small kernels written
// as CUDA kernels, run through run_grid and checked against scalar references, plus the errors
// a GPU would hang on or tolerate (Note [stricter than hardware]). Adapts to the warp size.

#include "core/fp16.h"
#include "host_target/device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

using wsp::host_target::GridStatus;
using wsp::host_target::run_grid;

namespace {

constexpr int WS = WSP_GPU_WARP_SIZE;

template <typename F>
GridStatus launch(dim3 grid, dim3 block, F body, size_t dynamic_shared = 0) {
    return run_grid(grid, block, dynamic_shared, std::function<void()>(body));
}

// ---- indices

__global__ void record_indices(unsigned * visits, int * bad) {
    const unsigned tpb    = blockDim.x * blockDim.y * blockDim.z;
    const unsigned block  = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (threadIdx.x >= blockDim.x || threadIdx.y >= blockDim.y || threadIdx.z >= blockDim.z ||
        blockIdx.x >= gridDim.x || blockIdx.y >= gridDim.y || blockIdx.z >= gridDim.z || warpSize != WS) {
        atomicAdd(bad, 1);
    }
    atomicAdd(&visits[block * tpb + thread], 1u);
}

TEST(HostDevice, EveryBlockAndThreadOnce) {
    const dim3            grid(3, 4, 2), block(5, 3, 7);
    const unsigned        n = 3 * 4 * 2 * 5 * 3 * 7;
    std::vector<unsigned> visits(n, 0);
    int                   bad = 0;
    const GridStatus      s   = launch(grid, block, [&] { record_indices(visits.data(), &bad); });
    ASSERT_TRUE(s.ok) << s.error;
    EXPECT_EQ(bad, 0);
    for (unsigned i = 0; i < n; ++i) {
        ASSERT_EQ(visits[i], 1u) << "linear index " << i;
    }
}

TEST(HostDevice, EmptyGridRunsNothing) {
    int              calls = 0;
    const GridStatus s     = launch(dim3(0, 1, 1), dim3(32), [&] { ++calls; });
    EXPECT_TRUE(s.ok);
    EXPECT_EQ(calls, 0);
}

// ---- shared memory and barriers

constexpr int REDUCE_THREADS = 128;

__global__ void block_sum(const float * x, float * out) {
    __shared__ __align__(16) float partial[REDUCE_THREADS];
    const unsigned                 t = threadIdx.x;
    partial[t]                       = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride) {
            partial[t] += partial[t + stride];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[blockIdx.x] = partial[0];
    }
}

TEST(HostDevice, StaticSharedReduction) {
    const int          blocks = 97;
    std::vector<float> x(blocks * REDUCE_THREADS), out(blocks, -1.0f);
    std::mt19937       rng(7);
    for (float & v : x) {
        v = (float) (rng() % 1000) - 500.0f; // integers: the sum is exact in any order
    }
    const GridStatus s = launch(dim3(blocks), dim3(REDUCE_THREADS), [&] { block_sum(x.data(), out.data()); });
    ASSERT_TRUE(s.ok) << s.error;
    for (int b = 0; b < blocks; ++b) {
        double ref = 0;
        for (int i = 0; i < REDUCE_THREADS; ++i) {
            ref += x[b * REDUCE_THREADS + i];
        }
        ASSERT_EQ(out[b], (float) ref) << "block " << b;
    }
}

__global__ void dynamic_rotate(unsigned * out, int * unwritten) {
    unsigned *     buf = static_cast<unsigned *>(wsp::host_target::dynamic_shared_memory());
    const unsigned t = threadIdx.x, n = blockDim.x;
    if (buf[t] != 0xffffffffu) { // fresh per block: another block's data must not show
        atomicAdd(unwritten, 1);
    }
    __syncthreads();
    buf[t] = blockIdx.x * 1000 + t;
    __syncthreads();
    out[blockIdx.x * n + t] = buf[(t + 1) % n];
}

TEST(HostDevice, DynamicSharedIsPerBlockAndPoisoned) {
    const unsigned        blocks = 40, threads = 48;
    std::vector<unsigned> out(blocks * threads);
    int                   stale = 0;
    const GridStatus      s     = launch(
                 dim3(blocks), dim3(threads), [&] { dynamic_rotate(out.data(), &stale); }, threads * sizeof(unsigned));
    ASSERT_TRUE(s.ok) << s.error;
    EXPECT_EQ(stale, 0);
    for (unsigned b = 0; b < blocks; ++b) {
        for (unsigned t = 0; t < threads; ++t) {
            ASSERT_EQ(out[b * threads + t], b * 1000 + (t + 1) % threads);
        }
    }
}

__global__ void early_exit_then_barrier(int cut, bool low_exits) {
    const bool leaves = low_exits ? (int) threadIdx.x < cut : (int) threadIdx.x >= cut;
    if (leaves) {
        return;
    }
    __syncthreads();
}

TEST(HostDevice, BarrierNotReachedIsReported) {
    for (bool low_exits : { false, true }) {
        const GridStatus s = launch(dim3(2), dim3(64), [&] { early_exit_then_barrier(16, low_exits); });
        ASSERT_FALSE(s.ok) << "low_exits " << low_exits;
        EXPECT_NE(s.error.find("__syncthreads"), std::string::npos) << s.error;
        EXPECT_NE(s.error.find("exited"), std::string::npos) << s.error;
        EXPECT_NE(s.error.find("block (0,0,0)"), std::string::npos) << s.error;
    }
}

__global__ void two_barrier_sites() {
    if (threadIdx.x % 2) {
        __syncthreads();
    } else {
        __syncthreads();
    }
}

TEST(HostDevice, DifferentBarrierSitesAreReported) {
    const GridStatus s = launch(dim3(1), dim3(8), [] { two_barrier_sites(); });
    ASSERT_FALSE(s.ok);
    EXPECT_NE(s.error.find("different __syncthreads"), std::string::npos) << s.error;
    EXPECT_NE(s.error.find("test_host_device.cpp"), std::string::npos) << s.error;
}

TEST(HostDevice, TrapNamesBlockAndThread) {
    const GridStatus s = launch(dim3(4, 2), dim3(8, 2), [] {
        if (blockIdx.x == 3 && blockIdx.y == 1 && threadIdx.x == 5 && threadIdx.y == 1) {
            __trap();
        }
    });
    ASSERT_FALSE(s.ok);
    EXPECT_NE(s.error.find("trap in block (3,1,0) thread (5,1,0)"), std::string::npos) << s.error;
}

TEST(HostDevice, ExceptionDoesNotEscape) {
    const GridStatus s = launch(dim3(3), dim3(4), [] {
        if (threadIdx.x == 2) {
            throw std::runtime_error("boom");
        }
    });
    ASSERT_FALSE(s.ok);
    EXPECT_NE(s.error.find("boom"), std::string::npos) << s.error;
}

// ---- shuffles

// CUDA's documented semantics, written independently of the emulation
int shuffle_ref_source(int op, int lane, int arg, int width) {
    const int seg = lane / width * width;
    switch (op) {
        case 0: return seg + ((arg % width) + width) % width;              // idx
        case 1: return lane % width - arg < 0 ? lane : lane - arg;         // up
        case 2: return lane % width + arg >= width ? lane : lane + arg;    // down
        default: return (lane ^ arg) >= seg + width ? lane : (lane ^ arg); // xor
    }
}

template <typename T>
__global__ void shuffle_kernel(int op, int arg, int width, T * out) {
    const unsigned i = threadIdx.x;
    const T        v = (T) (i * 3 + 1);
    T              r;
    switch (op) {
        case 0: r = __shfl_sync(WSP_GPU_FULL_MASK, v, arg, width); break;
        case 1: r = __shfl_up_sync(WSP_GPU_FULL_MASK, v, (unsigned) arg, width); break;
        case 2: r = __shfl_down_sync(WSP_GPU_FULL_MASK, v, (unsigned) arg, width); break;
        default: r = __shfl_xor_sync(WSP_GPU_FULL_MASK, v, arg, width); break;
    }
    out[i] = r;
}

template <typename T>
void check_shuffles() {
    const int      threads = 2 * WS;
    std::vector<T> out(threads);
    for (int width : { 8, 16, 32, WS }) {
        for (int op = 0; op < 4; ++op) {
            for (int arg : { 1, 2, 3, 5, 7, 12, width - 1 }) {
                const GridStatus s =
                    launch(dim3(1), dim3(threads), [&] { shuffle_kernel<T>(op, arg, width, out.data()); });
                ASSERT_TRUE(s.ok) << s.error;
                for (int i = 0; i < threads; ++i) {
                    const int lane = i % WS, base = i - lane;
                    const int src = base + shuffle_ref_source(op, lane, arg, width);
                    ASSERT_EQ(out[i], (T) (src * 3 + 1))
                        << "op " << op << " arg " << arg << " width " << width << " thread " << i;
                }
            }
        }
    }
}

TEST(HostDevice, ShufflesMatchReference) {
    check_shuffles<int>();
    check_shuffles<unsigned>();
    check_shuffles<float>();
    check_shuffles<double>();
    check_shuffles<unsigned long long>();
}

// the reduction the kernels use (block_reduce.cuh): every lane gets the warp's sum
__global__ void warp_sum(const float * x, float * out) {
    float v = x[threadIdx.x];
    for (int offset = WS / 2; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(WSP_GPU_FULL_MASK, v, offset);
    }
    out[threadIdx.x] = v;
}

TEST(HostDevice, XorReductionGivesEveryLaneTheSum) {
    std::vector<float> x(3 * WS), out(3 * WS);
    for (int i = 0; i < 3 * WS; ++i) {
        x[i] = (float) (i % 17);
    }
    const GridStatus s = launch(dim3(1), dim3(3 * WS), [&] { warp_sum(x.data(), out.data()); });
    ASSERT_TRUE(s.ok) << s.error;
    for (int w = 0; w < 3; ++w) {
        float ref = 0;
        for (int l = 0; l < WS; ++l) {
            ref += x[w * WS + l];
        }
        for (int l = 0; l < WS; ++l) {
            ASSERT_EQ(out[w * WS + l], ref);
        }
    }
}

__global__ void votes(wsp_lane_mask_t * ballots, int * anys, int * alls) {
    const unsigned        lane = threadIdx.x % WS;
    const wsp_lane_mask_t half = ((wsp_lane_mask_t) 1 << (WS / 2)) - 1;
    const wsp_lane_mask_t mine = lane < WS / 2 ? half : (wsp_lane_mask_t) (half << (WS / 2));
    const int             pred = (lane % 3 == 0) || lane >= WS / 2;
    ballots[threadIdx.x]       = __ballot_sync(mine, pred);
    anys[threadIdx.x]          = __any_sync(mine, lane % 5 == 1);
    alls[threadIdx.x]          = __all_sync(mine, pred);
    __syncwarp();
}

TEST(HostDevice, BallotAnyAllOnPartialMasks) {
    const int                    n = 2 * WS;
    std::vector<wsp_lane_mask_t> ballots(n);
    std::vector<int>             anys(n), alls(n);
    const GridStatus             s = launch(dim3(1), dim3(n), [&] { votes(ballots.data(), anys.data(), alls.data()); });
    ASSERT_TRUE(s.ok) << s.error;
    wsp_lane_mask_t low = 0, high = 0;
    for (int l = 0; l < WS; ++l) {
        if (l < WS / 2 && l % 3 == 0) {
            low |= (wsp_lane_mask_t) 1 << l;
        }
        if (l >= WS / 2) {
            high |= (wsp_lane_mask_t) 1 << l;
        }
    }
    for (int i = 0; i < n; ++i) {
        const int lane = i % WS;
        EXPECT_EQ(ballots[i], lane < WS / 2 ? low : high) << i;
        EXPECT_EQ(anys[i], 1) << i; // lanes 1 and WS/2 + 1 (a multiple of 5 plus 1 in each half)
        EXPECT_EQ(alls[i], lane < WS / 2 ? 0 : 1) << i;
    }
}

// (lanes run in turn here, so __activemask sees lanes that exited, not convergence)
TEST(HostDevice, ActiveMaskLeavesOutExitedLanes) {
    wsp_lane_mask_t  seen = 0;
    const GridStatus s    = launch(dim3(1), dim3(WS), [&] {
        if (threadIdx.x < 3) {
            return;
        }
        __syncwarp(WSP_GPU_FULL_MASK & ~(wsp_lane_mask_t) 7);
        if (threadIdx.x == WS - 1) {
            seen = __activemask();
        }
    });
    ASSERT_TRUE(s.ok) << s.error;
    EXPECT_EQ(seen, (wsp_lane_mask_t) WSP_GPU_FULL_MASK & ~(wsp_lane_mask_t) 7);
}

GridStatus expect_failure(dim3 block, std::function<void()> body, const char * what) {
    const GridStatus s = run_grid(dim3(2), block, 0, body);
    EXPECT_FALSE(s.ok) << what;
    return s;
}

TEST(HostDevice, MaskErrorsAreReported) {
    const wsp_lane_mask_t full = WSP_GPU_FULL_MASK;
    GridStatus            s;

    s = expect_failure(
        dim3(WS), [] { __shfl_xor_sync((wsp_lane_mask_t) 1, 1.0f, 1); }, "lane not in mask");
    EXPECT_NE(s.error.find("does not name the calling lane"), std::string::npos) << s.error;

    // a partial last warp: the full mask names lanes that do not exist
    s = expect_failure(
        dim3(WS + 20), [full] { __shfl_xor_sync(full, 1, 1); }, "missing lanes");
    EXPECT_NE(s.error.find("does not have"), std::string::npos) << s.error;

    s = expect_failure(
        dim3(WS),
        [full] {
            if (threadIdx.x == 7) {
                return;
            }
            __shfl_down_sync(full, 1, 1);
        },
        "exited lane");
    EXPECT_NE(s.error.find("exited"), std::string::npos) << s.error;

    s = expect_failure(
        dim3(WS),
        [full] {
            if (threadIdx.x % 2) {
                __shfl_xor_sync(full, 1, 1);
            } else {
                __shfl_down_sync(full, 1, 1);
            }
        },
        "different collectives");
    EXPECT_NE(s.error.find("another collective"), std::string::npos) << s.error;

    s = expect_failure(
        dim3(WS), [full] { __shfl_sync(full, 1, 0, 3); }, "width 3");
    EXPECT_NE(s.error.find("width 3"), std::string::npos) << s.error;

    // a lane at the barrier while its warp waits for it at a shuffle: a hang on a GPU
    s = expect_failure(
        dim3(WS),
        [full] {
            if (threadIdx.x == 0) {
                __syncthreads();
            } else {
                __shfl_sync(full, 1, 0);
            }
        },
        "barrier against shuffle");
    EXPECT_NE(s.error.find("__syncthreads"), std::string::npos) << s.error;
}

// three lanes each waiting for the next at its own pairwise collective: no single check sees
// it, the scheduler finds every live fiber waiting
TEST(HostDevice, CycleOfCollectivesIsReportedNotHung) {
    const GridStatus s = launch(dim3(1), dim3(3), [] {
        const unsigned        lane = threadIdx.x;
        const wsp_lane_mask_t pair = ((wsp_lane_mask_t) 1 << lane) | ((wsp_lane_mask_t) 1 << ((lane + 1) % 3));
        __syncwarp(pair);
    });
    ASSERT_FALSE(s.ok);
    EXPECT_NE(s.error.find("cannot go on"), std::string::npos) << s.error;
}

TEST(HostDevice, ShuffleFromLaneOutsideMaskIsPoison) {
    std::vector<float> out(WS);
    const GridStatus   s = launch(dim3(1), dim3(WS), [&] {
        const unsigned        lane = threadIdx.x;
        const wsp_lane_mask_t low  = 0xffu; // lanes 0-7 shuffle among themselves, reading lane 8's value
        if (lane < 8) {
            out[lane] = __shfl_sync(low, (float) lane, 8, 16);
        }
    });
    ASSERT_TRUE(s.ok) << s.error;
    for (int l = 0; l < 8; ++l) {
        EXPECT_TRUE(std::isnan(out[l])) << l;
    }
}

// ---- atomics

struct Totals {
    int                add_i;
    unsigned           add_u, and_u, or_u, xor_u, inc_u;
    unsigned long long add_ull;
    float              add_f;
    double             add_d;
    int                max_i, min_i;
    unsigned           cas_counter;
    int                sub_i;
    unsigned           exch_u;
};

__global__ void atomics_kernel(Totals * t) {
    const unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&t->add_i, 1);
    atomicAdd(&t->add_u, 2u);
    atomicAnd(&t->and_u, ~(1u << (id % 32)));
    atomicOr(&t->or_u, 1u << (id % 32));
    atomicXor(&t->xor_u, 1u << (id % 8));
    atomicInc(&t->inc_u, 999u);
    atomicAdd(&t->add_ull, 1ull << 33);
    atomicAdd(&t->add_f, 1.0f);
    atomicAdd(&t->add_d, 0.5);
    atomicMax(&t->max_i, (int) id - 1000);
    atomicMin(&t->min_i, (int) id - 1000);
    atomicSub(&t->sub_i, 3);
    atomicExch(&t->exch_u, id);
    unsigned seen = t->cas_counter, prev;
    while ((prev = atomicCAS(&t->cas_counter, seen, seen + 1)) != seen) {
        seen = prev;
    }
}

TEST(HostDevice, AtomicsFromManyBlocksAreExact) {
    const unsigned blocks = 512, threads = 64, n = blocks * threads; // 32768 = 8 * 4096
    Totals         t{};
    t.and_u            = 0xffffffffu;
    t.max_i            = INT32_MIN;
    t.min_i            = INT32_MAX;
    t.exch_u           = 0xdeadbeefu;
    const GridStatus s = launch(dim3(blocks), dim3(threads), [&] { atomics_kernel(&t); });
    ASSERT_TRUE(s.ok) << s.error;
    EXPECT_EQ(t.add_i, (int) n);
    EXPECT_EQ(t.add_u, 2 * n);
    EXPECT_EQ(t.and_u, 0u);
    EXPECT_EQ(t.or_u, 0xffffffffu);
    EXPECT_EQ(t.xor_u, 0u); // each of the 8 bits flipped n / 8 (even) times
    EXPECT_EQ(t.inc_u, n % 1000);
    EXPECT_EQ(t.add_ull, (unsigned long long) n << 33);
    EXPECT_EQ(t.add_f, (float) n); // integers below 2^24: exact in any order
    EXPECT_EQ(t.add_d, n * 0.5);
    EXPECT_EQ(t.max_i, (int) n - 1 - 1000);
    EXPECT_EQ(t.min_i, -1000);
    EXPECT_EQ(t.sub_i, -3 * (int) n);
    EXPECT_LT(t.exch_u, n);
    EXPECT_EQ(t.cas_counter, n);
}

TEST(HostDevice, AtomicReturnValues) {
    unsigned u = 5;
    EXPECT_EQ(atomicInc(&u, 5u), 5u);
    EXPECT_EQ(u, 0u);
    EXPECT_EQ(atomicDec(&u, 7u), 0u);
    EXPECT_EQ(u, 7u);
    int i = 10;
    EXPECT_EQ(atomicCAS(&i, 11, 3), 10);
    EXPECT_EQ(i, 10);
    EXPECT_EQ(atomicCAS(&i, 10, 3), 10);
    EXPECT_EQ(i, 3);
    float f = 1.5f;
    EXPECT_EQ(atomicExch(&f, 2.5f), 1.5f);
    EXPECT_EQ(atomicAdd(&f, 1.0f), 2.5f);
    EXPECT_EQ(f, 3.5f);
}

// ---- half and bfloat16

TEST(HostDevice, HalfAndBfloat16MatchFp16) {
    static_assert(sizeof(__half) == 2 && sizeof(__nv_bfloat16) == 2 && sizeof(__half2) == 4);
    for (uint32_t b = 0; b < 65536; ++b) {
        const float hf = __half2float(__ushort_as_half((unsigned short) b));
        const float bf = __bfloat162float(__ushort_as_bfloat16((unsigned short) b));
        const float hr = wsp::fp16_to_fp32((uint16_t) b), br = wsp::bf16_to_fp32((uint16_t) b);
        ASSERT_EQ(std::memcmp(&hf, &hr, 4), 0) << b;
        ASSERT_EQ(std::memcmp(&bf, &br, 4), 0) << b;
        if (!std::isnan(hf)) {
            ASSERT_EQ(__half_as_ushort(__float2half_rn(hf)), b) << b;
        }
        if (!std::isnan(bf)) {
            ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(bf)), b) << b;
        }
    }
    std::mt19937 rng(11);
    for (int i = 0; i < 100000; ++i) {
        const float f = wsp::bits_f32(rng());
        ASSERT_EQ(__half_as_ushort(__float2half_rn(f)), wsp::fp32_to_fp16(f));
        ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(f)), wsp::fp32_to_bf16(f));
    }
    EXPECT_EQ(__half2float(__hadd(__float2half_rn(1.0f), __float2half_rn(0.5f))), 1.5f);
    EXPECT_EQ(__half2float(__hmul(__float2half_rn(3.0f), __float2half_rn(-0.25f))), -0.75f);
    const float2 p = __half22float2(__floats2half2_rn(0.25f, -8.0f));
    EXPECT_EQ(p.x, 0.25f);
    EXPECT_EQ(p.y, -8.0f);
}

// ---- integer and float intrinsics

TEST(HostDevice, Dp4aAndBytePermMatchReference) {
    std::mt19937 rng(3);
    for (int i = 0; i < 20000; ++i) {
        const uint32_t a = rng(), b = rng(), c = rng();
        int            ref_s = (int) c;
        uint32_t       ref_u = c;
        uint8_t        ab[4], bb[4];
        std::memcpy(ab, &a, 4);
        std::memcpy(bb, &b, 4);
        for (int k = 0; k < 4; ++k) {
            ref_s += (int) (int8_t) ab[k] * (int) (int8_t) bb[k];
            ref_u += (uint32_t) ab[k] * bb[k];
        }
        ASSERT_EQ(__dp4a((int) a, (int) b, (int) c), ref_s);
        ASSERT_EQ(__dp4a(a, b, c), ref_u);

        uint8_t src[8];
        std::memcpy(src, &a, 4);
        std::memcpy(src + 4, &b, 4);
        const uint32_t s = rng() & 0xffffu;
        uint8_t        r[4];
        for (int k = 0; k < 4; ++k) {
            const uint32_t nib = (s >> (4 * k)) & 0xf;
            r[k]               = src[nib & 7];
            if (nib & 8) {
                r[k] = (r[k] & 0x80) ? 0xff : 0x00;
            }
        }
        uint32_t ref;
        std::memcpy(&ref, r, 4);
        ASSERT_EQ(__byte_perm(a, b, s), ref) << std::hex << a << " " << b << " " << s;
    }
    // the selectors of flash_attn_mma.cu: interleave the low (high) halves of two words
    EXPECT_EQ(__byte_perm(0x33221100u, 0x77665544u, 0x5410), 0x55441100u);
    EXPECT_EQ(__byte_perm(0x33221100u, 0x77665544u, 0x7632), 0x77663322u);
}

TEST(HostDevice, RoundedOpsAreNotContracted) {
    // a * b rounds to 1 + 2^-11 (its 2^-24 term is a tie to even); fused with + c it would not
    volatile float a = 1.0f + 0x1p-12f, c = -(1.0f + 0x1p-11f);
    EXPECT_EQ(__fadd_rn(__fmul_rn(a, a), c), 0.0f);
    EXPECT_EQ(__fadd_rn(a * a, c), 0.0f);
    EXPECT_EQ(__fmaf_rn(a, a, c), 0x1p-24f);
    EXPECT_EQ(__fsub_rn(3.0f, 0.5f), 2.5f);
    EXPECT_EQ(__fdiv_rn(1.0f, 4.0f), 0.25f);
}

TEST(HostDevice, FloatToIntRoundsToNearestEven) {
    EXPECT_EQ(__float2int_rn(0.5f), 0);
    EXPECT_EQ(__float2int_rn(1.5f), 2);
    EXPECT_EQ(__float2int_rn(2.5f), 2);
    EXPECT_EQ(__float2int_rn(-0.5f), 0);
    EXPECT_EQ(__float2int_rn(-1.5f), -2);
    EXPECT_EQ(__float2int_rn(-2.7f), -3);
    EXPECT_EQ(__float2int_rn(NAN), 0);
    EXPECT_EQ(__float2int_rn(1e10f), INT32_MAX);
    EXPECT_EQ(__float2int_rn(-1e10f), INT32_MIN);
    EXPECT_EQ(rsqrtf(4.0f), 0.5f);
}

} // namespace

namespace some_kernels {
// CUDA's min and max are global: found unqualified from a namespace, for mixed types too
inline int64_t clamp_rows(int64_t rows, int cap) {
    return min(rows, cap) + max(0, -cap) + (int64_t) min(2u, 3u) - 2 + (int64_t) fminf(0.0f, 1.0f);
}
} // namespace some_kernels

namespace {

TEST(HostDevice, GlobalMinMax) {
    EXPECT_EQ(some_kernels::clamp_rows(100, 7), 7);
    EXPECT_EQ(min(-1.0f, 2.0f), -1.0f);
    EXPECT_EQ(max(3.0f, NAN), 3.0f);
}

// ---- mma.sync m16n8k16

uint32_t pack(float lo, float hi) {
    return (uint32_t) wsp::fp32_to_fp16(lo) | ((uint32_t) wsp::fp32_to_fp16(hi) << 16);
}

// each lane loads its fragments from row-major A (16x16), B (16x8), C (16x8) per the PTX layout
__global__ void mma_kernel(const float * A, const float * B, const float * C, float * D, bool swap_b) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    uint32_t  a[4];
    a[0]        = pack(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
    a[1]        = pack(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
    a[2]        = pack(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
    a[3]        = pack(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
    uint32_t b0 = pack(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    uint32_t b1 = pack(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    if (swap_b) {
        std::swap(b0, b1);
    }
    float d[4] = { C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1] };
    wsp::host_target::mma_m16n8k16_f32_f16(d, a, b0, b1);
    D[g * 8 + 2 * t]           = d[0];
    D[g * 8 + 2 * t + 1]       = d[1];
    D[(g + 8) * 8 + 2 * t]     = d[2];
    D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

TEST(HostDevice, MmaMatchesReferenceGemm) {
    std::vector<float> A(16 * 16), B(16 * 8), C(16 * 8), D(16 * 8), ref(16 * 8);
    std::mt19937       rng(5);
    // small integers and halves: exact in F16, so every product and sum is exact and D is too
    for (float & v : A) {
        v = (float) ((int) (rng() % 9) - 4) * 0.5f;
    }
    for (float & v : B) {
        v = (float) ((int) (rng() % 7) - 3);
    }
    for (float & v : C) {
        v = (float) ((int) (rng() % 11) - 5);
    }
    for (int i = 0; i < 16; ++i) {
        for (int j = 0; j < 8; ++j) {
            double acc = C[i * 8 + j];
            for (int k = 0; k < 16; ++k) {
                acc += (double) A[i * 16 + k] * B[k * 8 + j];
            }
            ref[i * 8 + j] = (float) acc;
        }
    }
    const GridStatus s = launch(dim3(1), dim3(WS), [&] { mma_kernel(A.data(), B.data(), C.data(), D.data(), false); });
    if (WS != 32) {
        ASSERT_FALSE(s.ok);
        EXPECT_NE(s.error.find("32-lane"), std::string::npos) << s.error;
        return;
    }
    ASSERT_TRUE(s.ok) << s.error;
    for (int i = 0; i < 16 * 8; ++i) {
        ASSERT_EQ(D[i], ref[i]) << "D(" << i / 8 << "," << i % 8 << ")";
    }
    // a fragment in the wrong register gives a wrong D, as it would on a GPU
    const GridStatus w = launch(dim3(1), dim3(32), [&] { mma_kernel(A.data(), B.data(), C.data(), D.data(), true); });
    ASSERT_TRUE(w.ok) << w.error;
    int wrong = 0;
    for (int i = 0; i < 16 * 8; ++i) {
        wrong += D[i] != ref[i];
    }
    EXPECT_GT(wrong, 64);
}

TEST(HostDevice, MmaNeedsAFullWarp) {
    float            d[4] = {};
    const uint32_t   a[4] = {};
    const GridStatus s    = launch(dim3(1), dim3(16), [&] { wsp::host_target::mma_m16n8k16_f32_f16(d, a, 0, 0); });
    EXPECT_FALSE(s.ok);
}

// ---- concurrency and throughput

__global__ void count_with_barrier(unsigned * total) {
    __shared__ unsigned local[64];
    local[threadIdx.x] = 1;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned sum = 0;
        for (unsigned i = 0; i < blockDim.x; ++i) {
            sum += local[i];
        }
        atomicAdd(total, sum);
    }
}

TEST(HostDevice, ConcurrentLaunchesFromTwoThreads) {
    unsigned   totals[2] = {};
    GridStatus status[2];
    auto       go = [&](int k) {
        for (int rep = 0; rep < 5; ++rep) {
            status[k] = launch(dim3(400 + 100 * k), dim3(64), [&] { count_with_barrier(&totals[k]); });
            if (!status[k].ok) {
                return;
            }
        }
    };
    std::thread a(go, 0), b(go, 1);
    a.join();
    b.join();
    ASSERT_TRUE(status[0].ok) << status[0].error;
    ASSERT_TRUE(status[1].ok) << status[1].error;
    EXPECT_EQ(totals[0], 5u * 400 * 64);
    EXPECT_EQ(totals[1], 5u * 500 * 64);
}

TEST(HostDevice, TenThousandBlocks) {
    std::atomic<unsigned> blocks{ 0 };
    unsigned              lanes = 0;
    const GridStatus      s     = launch(dim3(100, 100), dim3(WS), [&] {
        const int v = __shfl_xor_sync(WSP_GPU_FULL_MASK, 1, 1);
        if (threadIdx.x == 0) {
            blocks.fetch_add(1, std::memory_order_relaxed);
            atomicAdd(&lanes, (unsigned) v);
        }
    });
    ASSERT_TRUE(s.ok) << s.error;
    EXPECT_EQ(blocks.load(), 10000u);
    EXPECT_EQ(lanes, 10000u);
}

TEST(HostDevice, FailureStopsTheGridAndTheNextLaunchWorks) {
    const GridStatus f = launch(dim3(5000), dim3(32), [&] {
        if (blockIdx.x == 10 && threadIdx.x == 3) {
            __trap();
        }
        __syncthreads();
    });
    ASSERT_FALSE(f.ok);
    EXPECT_NE(f.error.find("trap in block (10,0,0) thread (3,0,0)"), std::string::npos) << f.error;
    const GridStatus again = launch(dim3(3), dim3(32), [] { __syncthreads(); });
    EXPECT_TRUE(again.ok) << again.error;
}

} // namespace
