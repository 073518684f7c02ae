// The host target's NCCL subset (src/host_target/nccl.h) through its NCCL names: point-to-point,
// collectives and groups on 2 and 4 devices, and that every mismatch or missing partner is an
// error, never a hang. The machine has 4 devices.

#include "core/fp16.h"
#include "host_target/nccl.h"
#include "host_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace wsp::test::host;

// ---- NCCL

class HostNccl : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(machine_configured);
        setenv("WSP_GGML_CUDA_HOST_NCCL_TIMEOUT_MS", "10000", 1);
    }
    void TearDown() override {
        for (size_t i = 0; i < streams_.size(); ++i) {
            (void) cudaStreamSynchronize(streams_[i]);
            destroy_stream(streams_[i]);
        }
        for (ncclComm_t c : comms_) {
            EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
        }
        (void) cudaGetLastError();
    }
    void init(int n) {
        comms_.assign((size_t) n, nullptr);
        ASSERT_EQ(ncclCommInitAll(comms_.data(), n, nullptr), ncclSuccess);
        for (int d = 0; d < n; ++d) {
            streams_.push_back(make_stream(d));
        }
    }
    cudaError_t sync(int r) { return cudaStreamSynchronize(streams_[(size_t) r]); }
    void        sync_all() {
               for (size_t r = 0; r < streams_.size(); ++r) {
                   EXPECT_EQ(sync((int) r), cudaSuccess) << "rank " << r;
        }
    }
    // one buffer per rank, on the rank's device
    std::vector<std::unique_ptr<DeviceBuffer>> buffers(size_t bytes) {
        std::vector<std::unique_ptr<DeviceBuffer>> out;
        for (size_t r = 0; r < comms_.size(); ++r) {
            out.push_back(std::make_unique<DeviceBuffer>((int) r, bytes));
        }
        return out;
    }

    std::vector<ncclComm_t>   comms_;
    std::vector<cudaStream_t> streams_;
};

std::vector<float> iota_floats(size_t n, float start) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = start + (float) i;
    }
    return v;
}

TEST_F(HostNccl, CommunicatorQueries) {
    init(DEVICES);
    for (int r = 0; r < DEVICES; ++r) {
        int count = 0, dev = -1, rank = -1;
        EXPECT_EQ(ncclCommCount(comms_[(size_t) r], &count), ncclSuccess);
        EXPECT_EQ(ncclCommCuDevice(comms_[(size_t) r], &dev), ncclSuccess);
        EXPECT_EQ(ncclCommUserRank(comms_[(size_t) r], &rank), ncclSuccess);
        EXPECT_EQ(count, DEVICES);
        EXPECT_EQ(dev, r);
        EXPECT_EQ(rank, r);
    }
    ncclComm_t dup[2];
    const int  same[2] = { 1, 1 };
    EXPECT_EQ(ncclCommInitAll(dup, 2, same), ncclInvalidUsage);
    const int bad[1] = { DEVICES };
    EXPECT_EQ(ncclCommInitAll(dup, 1, bad), ncclInvalidArgument);
    EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
}

TEST_F(HostNccl, SendRecvPairOnTwoDevices) {
    init(2);
    const size_t n   = 1000;
    auto         buf = buffers(n * 4);
    upload(*buf[0], iota_floats(n, 1.0f));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(buf[0]->get(), n, ncclFloat32, 1, comms_[0], streams_[0]), ncclSuccess);
    ASSERT_EQ(ncclRecv(buf[1]->get(), n, ncclFloat32, 0, comms_[1], streams_[1]), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    sync_all();
    EXPECT_EQ(download<float>(*buf[1], n), iota_floats(n, 1.0f));
}

TEST_F(HostNccl, BareSendThenRecvMatch) {
    init(2);
    auto buf = buffers(64);
    upload(*buf[1], std::vector<int32_t>(16, 42));
    ASSERT_EQ(ncclSend(buf[1]->get(), 16, ncclInt32, 0, comms_[1], streams_[1]), ncclSuccess);
    ASSERT_EQ(ncclRecv(buf[0]->get(), 16, ncclInt32, 1, comms_[0], streams_[0]), ncclSuccess);
    sync_all();
    EXPECT_EQ(download<int32_t>(*buf[0], 16), std::vector<int32_t>(16, 42));
}

TEST_F(HostNccl, RingOfSendsAndRecvsOnFourDevices) {
    init(DEVICES);
    const size_t n   = 257;
    auto         src = buffers(n * 4), dst = buffers(n * 4);
    for (int r = 0; r < DEVICES; ++r) {
        upload(*src[(size_t) r], iota_floats(n, 1000.0f * r));
    }
    // twice around, in one group: FIFO per pair
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int round = 0; round < 2; ++round) {
        for (int r = 0; r < DEVICES; ++r) {
            ASSERT_EQ(ncclSend(src[(size_t) r]->get(), n, ncclFloat32, (r + 1) % DEVICES, comms_[(size_t) r],
                               streams_[(size_t) r]),
                      ncclSuccess);
            ASSERT_EQ(ncclRecv(dst[(size_t) r]->get(), n, ncclFloat32, (r + DEVICES - 1) % DEVICES, comms_[(size_t) r],
                               streams_[(size_t) r]),
                      ncclSuccess);
        }
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    sync_all();
    for (int r = 0; r < DEVICES; ++r) {
        EXPECT_EQ(download<float>(*dst[(size_t) r], n), iota_floats(n, 1000.0f * ((r + DEVICES - 1) % DEVICES)))
            << "rank " << r;
    }
}

TEST_F(HostNccl, NestedGroupsIssueAtTheOutermostEnd) {
    init(2);
    auto buf = buffers(16);
    upload(*buf[0], std::vector<uint8_t>(16, 7));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclRecv(buf[1]->get(), 16, ncclUint8, 0, comms_[1], streams_[1]), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess); // inner: nothing issued yet, the recv's send comes next
    ASSERT_EQ(ncclSend(buf[0]->get(), 16, ncclUint8, 1, comms_[0], streams_[0]), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    sync_all();
    EXPECT_EQ(download<uint8_t>(*buf[1], 16), std::vector<uint8_t>(16, 7));
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage); // no group open
}

TEST_F(HostNccl, AllGather) {
    init(DEVICES);
    const size_t n   = 33;
    auto         src = buffers(n * 4), dst = buffers(n * 4 * DEVICES);
    for (int r = 0; r < DEVICES; ++r) {
        upload(*src[(size_t) r], iota_floats(n, 100.0f * r));
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < DEVICES; ++r) {
        ASSERT_EQ(ncclAllGather(src[(size_t) r]->get(), dst[(size_t) r]->get(), n, ncclFloat32, comms_[(size_t) r],
                                streams_[(size_t) r]),
                  ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    sync_all();
    std::vector<float> expected;
    for (int r = 0; r < DEVICES; ++r) {
        const std::vector<float> part = iota_floats(n, 100.0f * r);
        expected.insert(expected.end(), part.begin(), part.end());
    }
    for (int r = 0; r < DEVICES; ++r) {
        EXPECT_EQ(download<float>(*dst[(size_t) r], n * DEVICES), expected) << "rank " << r;
    }
}

TEST_F(HostNccl, AllReduceSumFloatHalfAndInt) {
    init(DEVICES);
    const size_t n = 100;
    auto         f = buffers(n * 4), h = buffers(n * 2), in = buffers(n * 4), out = buffers(n * 4);
    for (int r = 0; r < DEVICES; ++r) {
        std::vector<float>    fv(n);
        std::vector<uint16_t> hv(n);
        std::vector<int32_t>  iv(n);
        for (size_t i = 0; i < n; ++i) {
            fv[i] = 0.25f * (float) (i + r);
            hv[i] = wsp::fp32_to_fp16(0.1f * (float) (i + 1) * (float) (r + 1));
            iv[i] = (int32_t) (i * 10 + (size_t) r);
        }
        upload(*f[(size_t) r], fv);
        upload(*h[(size_t) r], hv);
        upload(*in[(size_t) r], iv);
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < DEVICES; ++r) {
        const auto c = comms_[(size_t) r];
        const auto s = streams_[(size_t) r];
        ASSERT_EQ(ncclAllReduce(f[(size_t) r]->get(), f[(size_t) r]->get(), n, ncclFloat32, ncclSum, c, s),
                  ncclSuccess); // in place
        ASSERT_EQ(ncclAllReduce(h[(size_t) r]->get(), h[(size_t) r]->get(), n, ncclFloat16, ncclSum, c, s),
                  ncclSuccess);
        ASSERT_EQ(ncclAllReduce(in[(size_t) r]->get(), out[(size_t) r]->get(), n, ncclInt32, ncclMax, c, s),
                  ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    sync_all();
    for (int r = 0; r < DEVICES; ++r) {
        const std::vector<float>    fv = download<float>(*f[(size_t) r], n);
        const std::vector<uint16_t> hv = download<uint16_t>(*h[(size_t) r], n);
        const std::vector<int32_t>  iv = download<int32_t>(*out[(size_t) r], n);
        for (size_t i = 0; i < n; ++i) {
            float fs = 0, hs = 0;
            for (int q = 0; q < DEVICES; ++q) {
                fs += 0.25f * (float) (i + q);
                hs += wsp::fp16_to_fp32(wsp::fp32_to_fp16(0.1f * (float) (i + 1) * (float) (q + 1)));
            }
            ASSERT_EQ(fv[i], fs) << "rank " << r << " element " << i;
            ASSERT_EQ(hv[i], wsp::fp32_to_fp16(hs)) << "rank " << r << " element " << i;
            ASSERT_EQ(iv[i], (int32_t) (i * 10 + DEVICES - 1));
        }
    }
}

TEST_F(HostNccl, BroadcastAndReduceScatter) {
    init(DEVICES);
    const size_t n   = 20;
    auto         buf = buffers(n * 4 * DEVICES), out = buffers(n * 4);
    for (int r = 0; r < DEVICES; ++r) {
        upload(*buf[(size_t) r], iota_floats(n * DEVICES, (float) r));
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < DEVICES; ++r) {
        ASSERT_EQ(ncclReduceScatter(buf[(size_t) r]->get(), out[(size_t) r]->get(), n, ncclFloat32, ncclSum,
                                    comms_[(size_t) r], streams_[(size_t) r]),
                  ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    sync_all();
    for (int r = 0; r < DEVICES; ++r) {
        const std::vector<float> got = download<float>(*out[(size_t) r], n);
        for (size_t i = 0; i < n; ++i) {
            float s = 0;
            for (int q = 0; q < DEVICES; ++q) {
                s += (float) q + (float) (r * n + i);
            }
            ASSERT_EQ(got[i], s) << "rank " << r;
        }
    }
    // broadcast from rank 2, in place at the root
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < DEVICES; ++r) {
        ASSERT_EQ(ncclBroadcast(buf[(size_t) r]->get(), buf[(size_t) r]->get(), n, ncclFloat32, 2, comms_[(size_t) r],
                                streams_[(size_t) r]),
                  ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    sync_all();
    for (int r = 0; r < DEVICES; ++r) {
        EXPECT_EQ(download<float>(*buf[(size_t) r], n), iota_floats(n, 2.0f)) << "rank " << r;
    }
}

TEST_F(HostNccl, MismatchedCountInAGroupIsInvalidUsage) {
    init(2);
    auto buf = buffers(64);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(buf[0]->get(), 10, ncclFloat32, 1, comms_[0], streams_[0]), ncclSuccess);
    ASSERT_EQ(ncclRecv(buf[1]->get(), 12, ncclFloat32, 0, comms_[1], streams_[1]), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    sync_all(); // nothing was queued
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("10 x float32"), std::string::npos)
        << ncclGetLastError(nullptr);
}

TEST_F(HostNccl, MismatchedBareCallsFailFastOnBothSides) {
    setenv("WSP_GGML_CUDA_HOST_NCCL_TIMEOUT_MS", "5000", 1);
    init(2);
    auto       buf = buffers(64);
    const auto t0  = std::chrono::steady_clock::now();
    ASSERT_EQ(ncclSend(buf[0]->get(), 10, ncclFloat32, 1, comms_[0], streams_[0]), ncclSuccess); // queued
    EXPECT_EQ(ncclRecv(buf[1]->get(), 10, ncclInt32, 0, comms_[1], streams_[1]), ncclInvalidUsage);
    EXPECT_NE(sync(0), cudaSuccess) << "the queued send fails";
    EXPECT_EQ(sync(1), cudaSuccess);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(ms, 2500) << "the send waited for the timeout instead of failing at once";
}

TEST_F(HostNccl, UnmatchedRecvFailsAfterTheTimeout) {
    setenv("WSP_GGML_CUDA_HOST_NCCL_TIMEOUT_MS", "200", 1);
    init(2);
    auto       buf = buffers(64);
    const auto t0  = std::chrono::steady_clock::now();
    ASSERT_EQ(ncclRecv(buf[1]->get(), 4, ncclFloat32, 0, comms_[1], streams_[1]), ncclSuccess);
    EXPECT_NE(sync(1), cudaSuccess);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(ms, 150);
    EXPECT_NE(std::string(ncclGetLastError(comms_[1])).find("unmatched"), std::string::npos)
        << ncclGetLastError(comms_[1]);
    // the late send of that pair fails at once instead of waiting for a recv that gave up
    setenv("WSP_GGML_CUDA_HOST_NCCL_TIMEOUT_MS", "5000", 1);
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_EQ(ncclSend(buf[0]->get(), 4, ncclFloat32, 1, comms_[0], streams_[0]), ncclSuccess);
    EXPECT_NE(sync(0), cudaSuccess);
    const double late = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    EXPECT_LT(late, 2500);
}

TEST_F(HostNccl, UnmatchedSendInAGroupIsInvalidUsage) {
    init(2);
    auto buf = buffers(64);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(buf[0]->get(), 4, ncclFloat32, 1, comms_[0], streams_[0]), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    sync_all(); // nothing queued: no hang, no error on the streams
}

TEST_F(HostNccl, CollectiveMismatchAndMissingRank) {
    setenv("WSP_GGML_CUDA_HOST_NCCL_TIMEOUT_MS", "200", 1);
    init(2);
    auto buf = buffers(64);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(buf[0]->get(), buf[0]->get(), 8, ncclFloat32, ncclSum, comms_[0], streams_[0]),
              ncclSuccess);
    ASSERT_EQ(ncclAllReduce(buf[1]->get(), buf[1]->get(), 8, ncclFloat32, ncclMax, comms_[1], streams_[1]),
              ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    sync_all();
    // rank 1 never calls: rank 0's all-reduce fails after the timeout
    ASSERT_EQ(ncclAllReduce(buf[0]->get(), buf[0]->get(), 8, ncclFloat32, ncclSum, comms_[0], streams_[0]),
              ncclSuccess);
    EXPECT_NE(sync(0), cudaSuccess);
}

TEST_F(HostNccl, InvalidArguments) {
    init(2);
    auto              buf = buffers(64);
    std::vector<char> host(64);
    EXPECT_EQ(ncclSend(buf[0]->get(), 4, ncclFloat32, 1, comms_[0], streams_[1]), ncclInvalidArgument); // wrong device
    EXPECT_EQ(ncclSend(host.data(), 4, ncclFloat32, 1, comms_[0], streams_[0]), ncclInvalidArgument);
    EXPECT_EQ(ncclSend(buf[0]->get(), 100, ncclFloat32, 1, comms_[0], streams_[0]), ncclInvalidArgument); // past end
    EXPECT_EQ(ncclSend(buf[0]->get(), 4, ncclFloat32, 2, comms_[0], streams_[0]), ncclInvalidArgument);   // peer
    EXPECT_EQ(ncclSend(buf[0]->get(), 4, (ncclDataType_t) 42, 1, comms_[0], streams_[0]), ncclInvalidArgument);
    EXPECT_EQ(ncclAllReduce(buf[0]->get(), buf[0]->get(), 4, ncclFloat32, (ncclRedOp_t) 9, comms_[0], streams_[0]),
              ncclInvalidArgument);
    EXPECT_EQ(ncclSend(buf[0]->get(), 4, ncclFloat32, 1, nullptr, streams_[0]), ncclInvalidArgument);
    sync_all();
}

} // namespace
