// Devices, regs and the registry: what the CPU and sim devices report (name, description,
// memory, type, props and caps, buffer types, buffers over host memory, op questions), the
// CPU reg's proc addresses (each one called and its effect checked), enumeration and lookup
// (case-insensitive names, by type), backend initialisation by name, type and "best", and
// registration of an extra device. Expectations about the registry's contents are derived from
// the registry itself, so the suite holds whether it runs as one process or one per test.

#include "backend_util.h"
#include "test_util.h"

#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>
#include <string>

namespace wsp::test {
namespace {

// how many threads a CPU backend gives a kernel that asks for all of them
int threads_used(wsp_ggml_backend_t cpu) {
    static std::atomic<int> seen{ 0 };
    seen.store(0);
    TensorSet         s;
    wsp_ggml_tensor * x    = s.f32({ 1 }, "x");
    auto              fn   = [](wsp_ggml_tensor *, const wsp_ggml_tensor *, int, int nth, void *) { seen.store(nth); };
    wsp_ggml_tensor * node = wsp_ggml_map_custom1(s.ctx.get(), x, fn, WSP_GGML_N_TASKS_MAX, nullptr);
    wsp_ggml_cgraph * g    = wsp_ggml_new_graph(s.ctx.get());
    wsp_ggml_build_forward_expand(g, node);
    EXPECT_TRUE(s.alloc(wsp_ggml_backend_cpu_buffer_type()));
    EXPECT_EQ(wsp_ggml_backend_graph_compute(cpu, g), WSP_GGML_STATUS_SUCCESS);
    return seen.load();
}

std::vector<wsp_ggml_backend_dev_t> listed_devices() {
    std::vector<wsp_ggml_backend_dev_t> devs;
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        devs.push_back(wsp_ggml_backend_dev_get(i));
    }
    return devs;
}

// the first listed device of a type, as dev_by_type must find it
wsp_ggml_backend_dev_t first_of_type(enum wsp_ggml_backend_dev_type type) {
    for (wsp_ggml_backend_dev_t d : listed_devices()) {
        if (wsp_ggml_backend_dev_type(d) == type) {
            return d;
        }
    }
    return nullptr;
}

TEST(Device, CpuDeviceReportsHostProperties) {
    wsp_ggml_backend_dev_t dev = cpu_device();
    ASSERT_NE(dev, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_dev_name(dev), "CPU");
    const std::string description = wsp_ggml_backend_dev_description(dev);
    EXPECT_FALSE(description.empty());
    size_t free = 0, total = 0;
    wsp_ggml_backend_dev_memory(dev, &free, &total);
    EXPECT_GT(total, 0u);
    EXPECT_LE(free, total);
    EXPECT_EQ(wsp_ggml_backend_dev_type(dev), WSP_GGML_BACKEND_DEVICE_TYPE_CPU);

    wsp_ggml_backend_dev_props props;
    wsp_ggml_backend_dev_get_props(dev, &props);
    EXPECT_STREQ(props.name, "CPU");
    EXPECT_EQ(props.description, description);
    EXPECT_EQ(props.memory_total, total);
    EXPECT_LE(props.memory_free, props.memory_total);
    EXPECT_EQ(props.type, WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
    EXPECT_FALSE(props.caps.async);
    EXPECT_FALSE(props.caps.host_buffer);
    EXPECT_TRUE(props.caps.buffer_from_host_ptr);
    EXPECT_FALSE(props.caps.events);

    EXPECT_EQ(wsp_ggml_backend_dev_backend_reg(dev), wsp_ggml_backend_cpu_reg());
    EXPECT_EQ(wsp_ggml_backend_dev_buffer_type(dev), wsp_ggml_backend_cpu_buffer_type());
    EXPECT_EQ(wsp_ggml_backend_dev_host_buffer_type(dev), nullptr);
}

TEST(Device, CpuDeviceInitTakesAThreadCount) {
    wsp_ggml_backend_ptr plain(wsp_ggml_backend_dev_init(cpu_device(), nullptr));
    wsp_ggml_backend_ptr three(wsp_ggml_backend_dev_init(cpu_device(), "n_threads=3"));
    ASSERT_NE(plain, nullptr);
    ASSERT_NE(three, nullptr);
    EXPECT_TRUE(wsp_ggml_backend_is_cpu(plain.get()));
    EXPECT_EQ(wsp_ggml_backend_get_device(three.get()), cpu_device());
    EXPECT_EQ(threads_used(three.get()), 3);
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_dev_init(nullptr, nullptr), nullptr);
    EXPECT_TRUE(log.contains("device is NULL")) << log.text();
}

TEST(Device, CpuBufferFromHostPtrWrapsTheMemory) {
    std::vector<float> host(64, 0.0f); // vector storage need not be 32-aligned: start at its first aligned float
    float *            p = host.data();
    while ((uintptr_t) p % 32 != 0) {
        ++p;
    }
    wsp_ggml_backend_buffer_t buf =
        wsp_ggml_backend_dev_buffer_from_host_ptr(cpu_device(), p, 32 * sizeof(float), 32 * sizeof(float));
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_base(buf), p);
    EXPECT_TRUE(wsp_ggml_backend_buffer_is_host(buf));
    TensorSet         s;
    wsp_ggml_tensor * t = s.f32({ 8 }, "t");
    ASSERT_EQ(wsp_ggml_backend_tensor_alloc(buf, t, p), WSP_GGML_STATUS_SUCCESS);
    upload(t, filled(8, 1.0f, 1.0f));
    EXPECT_EQ(std::vector<float>(p, p + 8), filled(8, 1.0f, 1.0f));
    wsp_ggml_backend_buffer_free(buf);
}

TEST(Device, SimDevicesReportGpuProperties) {
    for (int i = 0; i < API_SIM_DEVICES; ++i) {
        wsp_ggml_backend_dev_t dev = sim_device(i);
        ASSERT_NE(dev, nullptr);
        const std::string name = "SIM" + std::to_string(i);
        EXPECT_EQ(wsp_ggml_backend_dev_name(dev), name);
        const std::string description = wsp_ggml_backend_dev_description(dev);
        EXPECT_NE(description.find("Simulated GPU " + std::to_string(i)), std::string::npos) << description;
        EXPECT_EQ(wsp_ggml_backend_dev_type(dev), WSP_GGML_BACKEND_DEVICE_TYPE_GPU);
        size_t free = 0, total = 0;
        wsp_ggml_backend_dev_memory(dev, &free, &total);
        EXPECT_EQ(total, API_SIM_MEMORY_MB * 1024 * 1024);
        EXPECT_EQ(free, total - wsp_ggml_backend_sim_memory_used(dev));

        wsp_ggml_backend_dev_props props;
        wsp_ggml_backend_dev_get_props(dev, &props);
        EXPECT_EQ(props.name, name);
        EXPECT_EQ(props.description, description);
        EXPECT_EQ(props.memory_total, total);
        EXPECT_EQ(props.type, WSP_GGML_BACKEND_DEVICE_TYPE_GPU);
        EXPECT_TRUE(props.caps.async);
        EXPECT_FALSE(props.caps.host_buffer);
        EXPECT_FALSE(props.caps.buffer_from_host_ptr);
        EXPECT_TRUE(props.caps.events);

        EXPECT_EQ(wsp_ggml_backend_dev_backend_reg(dev), wsp_ggml_backend_sim_reg());
        EXPECT_EQ(wsp_ggml_backend_buft_name(wsp_ggml_backend_dev_buffer_type(dev)), name);
        EXPECT_EQ(wsp_ggml_backend_dev_host_buffer_type(dev), nullptr);
        wsp_ggml_backend_ptr be(wsp_ggml_backend_dev_init(dev, nullptr));
        ASSERT_NE(be, nullptr);
        EXPECT_TRUE(wsp_ggml_backend_is_sim(be.get()));
        EXPECT_EQ(wsp_ggml_backend_name(be.get()), name);
    }
}

TEST(Device, SimMemoryFollowsAllocations) {
    wsp_ggml_backend_dev_t dev   = sim_device(1);
    size_t                 free0 = 0, total = 0, free1 = 0;
    wsp_ggml_backend_dev_memory(dev, &free0, &total);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_dev_buffer_type(dev), 1 << 20);
    ASSERT_NE(buf, nullptr);
    wsp_ggml_backend_dev_memory(dev, &free1, &total);
    EXPECT_LE(free1 + (1 << 20), free0);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_backend_dev_memory(dev, &free1, &total);
    EXPECT_EQ(free1, free0);
}

TEST(Device, SimRefusesBuffersFromHostMemory) {
    std::vector<uint8_t> host(4096);
    LogCapture           log;
    EXPECT_EQ(wsp_ggml_backend_dev_buffer_from_host_ptr(sim_device(0), host.data(), host.size(), host.size()), nullptr);
    EXPECT_TRUE(log.contains("cannot create buffers from host memory")) << log.text();
}

TEST(Device, OpAndBufferTypeQuestions) {
    wsp_ggml_backend_dev_t sim0 = sim_device(0), sim1 = sim_device(1), cpu = cpu_device();
    TensorSet              s;
    wsp_ggml_tensor *      w   = s.f32({ 64, 16 }, "w");
    wsp_ggml_tensor *      add = wsp_ggml_add(s.ctx.get(), w, w);
    wsp_ggml_tensor *      mm  = wsp_ggml_mul_mat(s.ctx.get(), w, s.f32({ 64, 48 }, "x"));
    EXPECT_TRUE(wsp_ggml_backend_dev_supports_op(cpu, add));
    EXPECT_TRUE(wsp_ggml_backend_dev_supports_op(sim1, add));
    wsp_ggml_backend_sim_set_op_supported(sim1, WSP_GGML_OP_MUL_MAT, false);
    EXPECT_FALSE(wsp_ggml_backend_dev_supports_op(sim1, mm));
    EXPECT_TRUE(wsp_ggml_backend_dev_supports_op(sim0, mm));
    EXPECT_TRUE(wsp_ggml_backend_dev_supports_op(sim1, add)) << "only MUL_MAT was switched off";
    wsp_ggml_backend_sim_set_op_supported(sim1, WSP_GGML_OP_MUL_MAT, true);
    EXPECT_TRUE(wsp_ggml_backend_dev_supports_op(sim1, mm));

    EXPECT_TRUE(wsp_ggml_backend_dev_supports_buft(cpu, wsp_ggml_backend_cpu_buffer_type()));
    EXPECT_FALSE(wsp_ggml_backend_dev_supports_buft(cpu, wsp_ggml_backend_dev_buffer_type(sim0)));
    EXPECT_TRUE(wsp_ggml_backend_dev_supports_buft(sim0, wsp_ggml_backend_dev_buffer_type(sim0)));
    EXPECT_FALSE(wsp_ggml_backend_dev_supports_buft(sim0, wsp_ggml_backend_dev_buffer_type(sim1)));

    EXPECT_TRUE(wsp_ggml_backend_dev_offload_op(sim0, mm)); // a batch of 48 rows
    EXPECT_FALSE(wsp_ggml_backend_dev_offload_op(sim0, add));
    EXPECT_FALSE(wsp_ggml_backend_dev_offload_op(cpu, mm));
}

TEST(Reg, NamesAndDevicesOfTheCpuAndSimRegs) {
    sim_device(0);
    wsp_ggml_backend_reg_t cpu = wsp_ggml_backend_cpu_reg();
    wsp_ggml_backend_reg_t sim = wsp_ggml_backend_sim_reg();
    ASSERT_NE(sim, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_reg_name(cpu), "CPU");
    EXPECT_STREQ(wsp_ggml_backend_reg_name(sim), "SIM");
    EXPECT_EQ(wsp_ggml_backend_reg_dev_count(cpu), 1u);
    EXPECT_EQ(wsp_ggml_backend_reg_dev_count(sim), (size_t) API_SIM_DEVICES);
    EXPECT_EQ(wsp_ggml_backend_reg_dev_get(cpu, 0), cpu_device());
    for (int i = 0; i < API_SIM_DEVICES; ++i) {
        wsp_ggml_backend_dev_t d = wsp_ggml_backend_reg_dev_get(sim, (size_t) i);
        ASSERT_NE(d, nullptr);
        EXPECT_EQ(wsp_ggml_backend_dev_name(d), "SIM" + std::to_string(i));
        EXPECT_EQ(wsp_ggml_backend_dev_backend_reg(d), sim);
    }
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_reg_dev_get(cpu, 1), nullptr);
    EXPECT_EQ(wsp_ggml_backend_reg_dev_get(sim, API_SIM_DEVICES), nullptr);
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 2) << log.text();
    EXPECT_TRUE(log.contains("has no device")) << log.text();
}

std::vector<std::string> proc_address_names() {
    std::ifstream            in(std::string(WSP_TESTS_DIR) + "/api/client-proc-addresses.txt");
    std::vector<std::string> names;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty()) {
            names.push_back(line);
        }
    }
    return names;
}

void check_set_n_threads(void * fn) {
    auto                 set_n_threads = reinterpret_cast<wsp_ggml_backend_set_n_threads_t>(fn);
    wsp_ggml_backend_ptr cpu(wsp_ggml_backend_cpu_init());
    set_n_threads(cpu.get(), 3);
    EXPECT_EQ(threads_used(cpu.get()), 3);
    set_n_threads(cpu.get(), 1);
    EXPECT_EQ(threads_used(cpu.get()), 1);
}

void check_get_features(void * fn) {
    auto                       get_features = reinterpret_cast<wsp_ggml_backend_get_features_t>(fn);
    wsp_ggml_backend_feature * f            = get_features(wsp_ggml_backend_cpu_reg());
    ASSERT_NE(f, nullptr);
    std::set<std::string> names;
    size_t                n = 0;
    for (; n < 64 && f[n].name != nullptr; ++n) {
        EXPECT_NE(f[n].value, nullptr) << f[n].name;
        EXPECT_TRUE(names.insert(f[n].name).second) << "listed twice: " << f[n].name;
    }
    ASSERT_LT(n, 64u) << "the feature list is not NULL-terminated";
    // the list agrees with what the build reports
    EXPECT_EQ(names.count("AVX2") == 1, wsp_ggml_cpu_has_avx2() != 0);
    EXPECT_EQ(names.count("FMA") == 1, wsp_ggml_cpu_has_fma() != 0);
    EXPECT_EQ(names.count("NEON") == 1, wsp_ggml_cpu_has_neon() != 0);
}

void check_extra_bufts(void * fn) {
    auto                             get_extra = reinterpret_cast<wsp_ggml_backend_dev_get_extra_bufts_t>(fn);
    wsp_ggml_backend_buffer_type_t * bufts     = get_extra(cpu_device());
    ASSERT_NE(bufts, nullptr);
    size_t n = 0;
    for (; n < 16 && bufts[n] != nullptr; ++n) {
        EXPECT_NE(wsp_ggml_backend_buft_name(bufts[n]), nullptr);
        // the CPU's own types, whose bytes are in another layout: not host memory to anyone else
        EXPECT_EQ(wsp_ggml_backend_buft_get_device(bufts[n]), cpu_device());
        EXPECT_TRUE(wsp_ggml_backend_dev_supports_buft(cpu_device(), bufts[n]));
        EXPECT_FALSE(wsp_ggml_backend_buft_is_host(bufts[n]));
    }
    EXPECT_LT(n, 16u) << "the extra buffer type list is not NULL-terminated";
    ASSERT_EQ(n, 1u);
    EXPECT_STREQ(wsp_ggml_backend_buft_name(bufts[0]), "CPU_REPACK");
}

void check_set_abort_callback(void * fn) {
    auto                 set_abort = reinterpret_cast<wsp_ggml_backend_set_abort_callback_t>(fn);
    wsp_ggml_backend_ptr cpu(wsp_ggml_backend_cpu_init());
    TensorSet            s;
    wsp_ggml_tensor *    x  = s.f32({ 8 }, "x");
    wsp_ggml_tensor *    y1 = wsp_ggml_add(s.ctx.get(), x, x);
    wsp_ggml_tensor *    y2 = wsp_ggml_add(s.ctx.get(), y1, x);
    wsp_ggml_cgraph *    g  = wsp_ggml_new_graph(s.ctx.get());
    wsp_ggml_build_forward_expand(g, y2);
    ASSERT_TRUE(s.alloc(wsp_ggml_backend_cpu_buffer_type()));
    upload(x, filled(8, 1.0f, 1.0f));
    upload(y1, std::vector<float>(8, 0.0f));
    upload(y2, std::vector<float>(8, 0.0f));
    // asked before every node: allow the first node, stop before the second
    int calls = 0;
    set_abort(
        cpu.get(), [](void * data) { return ++*static_cast<int *>(data) > 1; }, &calls);
    EXPECT_EQ(wsp_ggml_backend_graph_compute(cpu.get(), g), WSP_GGML_STATUS_ABORTED);
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(download(y1), filled(8, 2.0f, 2.0f));
    EXPECT_EQ(download(y2), std::vector<float>(8, 0.0f));
    set_abort(cpu.get(), nullptr, nullptr);
    EXPECT_EQ(wsp_ggml_backend_graph_compute(cpu.get(), g), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(download(y2), filled(8, 3.0f, 3.0f));
}

TEST(Reg, CpuProcAddressesWorkAndUnknownNamesAreNull) {
    const std::vector<std::string> names = proc_address_names();
    ASSERT_FALSE(names.empty()) << "cannot read tests/api/client-proc-addresses.txt";
    wsp_ggml_backend_reg_t cpu = wsp_ggml_backend_cpu_reg();
    for (const std::string & name : names) {
        SCOPED_TRACE(name);
        void * fn = wsp_ggml_backend_reg_get_proc_address(cpu, name.c_str());
        ASSERT_NE(fn, nullptr);
        if (name == "wsp_ggml_backend_set_n_threads") {
            check_set_n_threads(fn);
        } else if (name == "wsp_ggml_backend_get_features") {
            check_get_features(fn);
        } else if (name == "wsp_ggml_backend_dev_get_extra_bufts") {
            check_extra_bufts(fn);
        } else if (name == "wsp_ggml_backend_set_abort_callback") {
            check_set_abort_callback(fn);
        } else {
            ADD_FAILURE() << "no check written for this proc address";
        }
    }
    for (const char * unknown : { "wsp_ggml_backend_no_such_function", "", "wsp_ggml_backend_split_buffer_type" }) {
        EXPECT_EQ(wsp_ggml_backend_reg_get_proc_address(cpu, unknown), nullptr) << unknown;
    }
    sim_device(0);
    EXPECT_EQ(wsp_ggml_backend_reg_get_proc_address(wsp_ggml_backend_sim_reg(), "wsp_ggml_backend_set_n_threads"),
              nullptr);
    EXPECT_EQ(wsp_ggml_backend_reg_get_proc_address(nullptr, "wsp_ggml_backend_set_n_threads"), nullptr);
}

TEST(Registry, EnumeratesRegsAndTheirDevices) {
    sim_device(0);
    const size_t n_regs = wsp_ggml_backend_reg_count();
    ASSERT_GE(n_regs, 2u);
    std::set<std::string>               reg_names;
    std::vector<wsp_ggml_backend_dev_t> devs = listed_devices();
    ASSERT_EQ(devs.size(), wsp_ggml_backend_dev_count());
    for (size_t i = 0; i < n_regs; ++i) {
        wsp_ggml_backend_reg_t reg = wsp_ggml_backend_reg_get(i);
        ASSERT_NE(reg, nullptr);
        EXPECT_TRUE(reg_names.insert(wsp_ggml_backend_reg_name(reg)).second) << wsp_ggml_backend_reg_name(reg);
        for (size_t j = 0; j < wsp_ggml_backend_reg_dev_count(reg); ++j) {
            wsp_ggml_backend_dev_t d = wsp_ggml_backend_reg_dev_get(reg, j);
            EXPECT_NE(std::find(devs.begin(), devs.end(), d), devs.end())
                << wsp_ggml_backend_dev_name(d) << " of " << wsp_ggml_backend_reg_name(reg) << " is not listed";
        }
    }
    EXPECT_EQ(reg_names.count("CPU"), 1u);
    EXPECT_EQ(reg_names.count("SIM"), 1u);
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_reg_get(n_regs), nullptr);
    EXPECT_EQ(wsp_ggml_backend_dev_get(devs.size()), nullptr);
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 2) << log.text();
    EXPECT_TRUE(log.contains("out of range")) << log.text();
}

TEST(Registry, LooksUpByNameIgnoringCaseAndByType) {
    sim_device(0);
    for (const char * name : { "CPU", "cpu", "Cpu" }) {
        EXPECT_EQ(wsp_ggml_backend_reg_by_name(name), wsp_ggml_backend_cpu_reg()) << name;
        EXPECT_EQ(wsp_ggml_backend_dev_by_name(name), cpu_device()) << name;
    }
    EXPECT_EQ(wsp_ggml_backend_reg_by_name("sim"), wsp_ggml_backend_sim_reg());
    EXPECT_EQ(wsp_ggml_backend_dev_by_name("sim1"), sim_device(1));
    EXPECT_EQ(wsp_ggml_backend_dev_by_name("Sim0"), sim_device(0));
    EXPECT_EQ(wsp_ggml_backend_reg_by_name("no-such-backend"), nullptr);
    EXPECT_EQ(wsp_ggml_backend_dev_by_name("SIM"), nullptr) << "device names are matched whole";

    EXPECT_EQ(wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU), cpu_device());
    wsp_ggml_backend_dev_t gpu = wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_GPU);
    ASSERT_NE(gpu, nullptr);
    EXPECT_EQ(gpu, first_of_type(WSP_GGML_BACKEND_DEVICE_TYPE_GPU));
    EXPECT_EQ(wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL),
              first_of_type(WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL));
}

TEST(Registry, InitBestPrefersAGpu) {
    if (first_of_type(WSP_GGML_BACKEND_DEVICE_TYPE_GPU) == nullptr) {
        // no GPU yet (the sim devices are registered below): the CPU is the best there is
        wsp_ggml_backend_ptr best(wsp_ggml_backend_init_best());
        ASSERT_NE(best, nullptr);
        EXPECT_TRUE(wsp_ggml_backend_is_cpu(best.get()));
    }
    sim_device(0);
    wsp_ggml_backend_dev_t gpu = first_of_type(WSP_GGML_BACKEND_DEVICE_TYPE_GPU);
    ASSERT_NE(gpu, nullptr);
    wsp_ggml_backend_ptr best(wsp_ggml_backend_init_best());
    ASSERT_NE(best, nullptr);
    EXPECT_EQ(wsp_ggml_backend_get_device(best.get()), gpu);
    if (wsp_ggml_backend_dev_backend_reg(gpu) == wsp_ggml_backend_sim_reg()) {
        EXPECT_STREQ(wsp_ggml_backend_name(best.get()), "SIM0");
    }
}

TEST(Registry, InitByNameAndByType) {
    sim_device(0);
    wsp_ggml_backend_ptr sim1(wsp_ggml_backend_init_by_name("sim1", nullptr));
    ASSERT_NE(sim1, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_name(sim1.get()), "SIM1");
    wsp_ggml_backend_ptr cpu(wsp_ggml_backend_init_by_name("CPU", "n_threads=2"));
    ASSERT_NE(cpu, nullptr);
    EXPECT_EQ(threads_used(cpu.get()), 2);
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_init_by_name("no-such-device", nullptr), nullptr);
    EXPECT_TRUE(log.contains("no device named no-such-device")) << log.text();

    wsp_ggml_backend_ptr by_cpu(wsp_ggml_backend_init_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU, nullptr));
    ASSERT_NE(by_cpu, nullptr);
    EXPECT_TRUE(wsp_ggml_backend_is_cpu(by_cpu.get()));
    wsp_ggml_backend_ptr by_gpu(wsp_ggml_backend_init_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_GPU, nullptr));
    ASSERT_NE(by_gpu, nullptr);
    EXPECT_EQ(wsp_ggml_backend_get_device(by_gpu.get()), first_of_type(WSP_GGML_BACKEND_DEVICE_TYPE_GPU));
    if (first_of_type(WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL) == nullptr) {
        log.clear();
        EXPECT_EQ(wsp_ggml_backend_init_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL, nullptr), nullptr);
        EXPECT_TRUE(log.contains("no device of type")) << log.text();
    }
}

// A device registered on its own (no reg lists it): an accelerator that has no backend
namespace testdev {

const char * name(wsp_ggml_backend_dev_t) {
    return "TESTDEV";
}

const char * description(wsp_ggml_backend_dev_t) {
    return "a device registered by the test";
}

void memory(wsp_ggml_backend_dev_t, size_t * free, size_t * total) {
    *free  = 4096;
    *total = 4096;
}

enum wsp_ggml_backend_dev_type type(wsp_ggml_backend_dev_t) {
    return WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL;
}

void props(wsp_ggml_backend_dev_t d, wsp_ggml_backend_dev_props * p) {
    p->name        = name(d);
    p->description = description(d);
    memory(d, &p->memory_free, &p->memory_total);
    p->type = type(d);
}

wsp_ggml_backend_t init(wsp_ggml_backend_dev_t, const char *) {
    return nullptr;
}

wsp_ggml_backend_buffer_type_t buft(wsp_ggml_backend_dev_t) {
    return wsp_ggml_backend_cpu_buffer_type();
}

bool supports_op(wsp_ggml_backend_dev_t, const wsp_ggml_tensor *) {
    return false;
}

bool supports_buft(wsp_ggml_backend_dev_t, wsp_ggml_backend_buffer_type_t) {
    return false;
}

wsp_ggml_backend_device device = {
    /* .iface   = */ {
        /* .get_name             = */ name,
        /* .get_description      = */ description,
        /* .get_memory           = */ memory,
        /* .get_type             = */ type,
        /* .get_props            = */ props,
        /* .init_backend         = */ init,
        /* .get_buffer_type      = */ buft,
        /* .get_host_buffer_type = */ nullptr,
        /* .buffer_from_host_ptr = */ nullptr,
        /* .supports_op          = */ supports_op,
        /* .supports_buft        = */ supports_buft,
        /* .offload_op           = */ nullptr,
        /* .event_new            = */ nullptr,
        /* .event_free           = */ nullptr,
        /* .event_synchronize    = */ nullptr,
    },
    /* .reg     = */ nullptr,
    /* .context = */ nullptr,
};

} // namespace testdev

TEST(Registry, DeviceRegisterAddsADevice) {
    wsp_ggml_backend_dev_t dev      = &testdev::device;
    const size_t           n        = wsp_ggml_backend_dev_count();
    const bool             new_here = wsp_ggml_backend_dev_by_name("TESTDEV") == nullptr;
    wsp_ggml_backend_device_register(dev);
    EXPECT_EQ(wsp_ggml_backend_dev_count(), new_here ? n + 1 : n);
    wsp_ggml_backend_device_register(dev); // registering again changes nothing
    const size_t m = wsp_ggml_backend_dev_count();
    EXPECT_EQ(m, new_here ? n + 1 : n);
    if (new_here) {
        EXPECT_EQ(wsp_ggml_backend_dev_get(m - 1), dev) << "a new device goes to the end of the list";
    }
    EXPECT_EQ(wsp_ggml_backend_dev_by_name("testdev"), dev);
    EXPECT_EQ(wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL),
              first_of_type(WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL));
    EXPECT_NE(first_of_type(WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL), nullptr);
    EXPECT_STREQ(wsp_ggml_backend_dev_description(wsp_ggml_backend_dev_by_name("TESTDEV")),
                 "a device registered by the test");
}

} // namespace
} // namespace wsp::test
