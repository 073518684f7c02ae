// Backends loaded from shared libraries (tests/backends/testdl.cpp, built into WSP_DL_DIR as
// libwsp-ggml-<name>.so): a good library registers its reg and device, computes a graph and
// goes away again on unload; broken libraries (no entry point, another API version, an init
// that returns NULL, score 0, a missing file) are refused with a logged reason and change
// nothing; load_all_from_path picks the best-scored variant of a backend, once.

#include "backend_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <string>

#ifndef WSP_DL_DIR
#    error "WSP_DL_DIR (the directory of the test backend libraries) must be defined"
#endif

namespace wsp::test {
namespace {

std::string library(const char * name) {
    return std::string(WSP_DL_DIR) + "/libwsp-ggml-" + name + ".so";
}

struct Counts {
    size_t regs = wsp_ggml_backend_reg_count();
    size_t devs = wsp_ggml_backend_dev_count();
};

void expect_counts(const Counts & c, size_t extra) {
    EXPECT_EQ(wsp_ggml_backend_reg_count(), c.regs + extra);
    EXPECT_EQ(wsp_ggml_backend_dev_count(), c.devs + extra);
}

// out = a + b on `backend`, in its default buffer type; checks the values
void expect_add_computes(wsp_ggml_backend_t backend) {
    TensorSet         s;
    wsp_ggml_tensor * a   = s.f32({ 7, 3 }, "a");
    wsp_ggml_tensor * b   = s.f32({ 7, 3 }, "b");
    wsp_ggml_tensor * out = wsp_ggml_add(s.ctx.get(), a, b);
    wsp_ggml_cgraph * g   = wsp_ggml_new_graph(s.ctx.get());
    wsp_ggml_build_forward_expand(g, out);
    ASSERT_TRUE(s.alloc(wsp_ggml_backend_get_default_buffer_type(backend)));
    const std::vector<float> va = random_values(21, 3), vb = random_values(21, 4);
    upload(a, va);
    upload(b, vb);
    upload(out, std::vector<float>(21, 0.0f));
    EXPECT_TRUE(wsp_ggml_backend_supports_op(backend, out));
    ASSERT_EQ(wsp_ggml_backend_graph_compute(backend, g), WSP_GGML_STATUS_SUCCESS);
    std::vector<float> want(21);
    for (size_t i = 0; i < want.size(); ++i) {
        want[i] = va[i] + vb[i];
    }
    EXPECT_EQ(download(out), want);
    EXPECT_FALSE(wsp_ggml_backend_supports_op(backend, wsp_ggml_mul(s.ctx.get(), a, b))) << "it only adds";
}

TEST(DynamicBackend, LoadRegistersComputesAndUnloadRemoves) {
    const Counts           before;
    LogCapture             log;
    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_load(library("testdl").c_str());
    ASSERT_NE(reg, nullptr) << log.text();
    EXPECT_TRUE(log.contains("loaded TESTDL backend")) << log.text();
    EXPECT_STREQ(wsp_ggml_backend_reg_name(reg), "TESTDL");
    expect_counts(before, 1);
    EXPECT_EQ(wsp_ggml_backend_reg_by_name("testdl"), reg);
    ASSERT_EQ(wsp_ggml_backend_reg_dev_count(reg), 1u);

    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_by_name("TESTDL0");
    ASSERT_NE(dev, nullptr);
    EXPECT_EQ(dev, wsp_ggml_backend_reg_dev_get(reg, 0));
    EXPECT_EQ(wsp_ggml_backend_dev_backend_reg(dev), reg);
    EXPECT_EQ(wsp_ggml_backend_dev_type(dev), WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL);
    EXPECT_STREQ(wsp_ggml_backend_dev_description(dev), "test backend, score 10");
    EXPECT_EQ(wsp_ggml_backend_dev_get(before.devs), dev) << "a loaded device goes to the end of the list";

    wsp_ggml_backend_t backend = wsp_ggml_backend_init_by_name("testdl0", nullptr);
    ASSERT_NE(backend, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_name(backend), "TESTDL0");
    expect_add_computes(backend);
    wsp_ggml_backend_free(backend);

    // loading the same library again registers nothing new
    EXPECT_EQ(wsp_ggml_backend_load(library("testdl").c_str()), reg);
    expect_counts(before, 1);

    wsp_ggml_backend_unload(reg);
    expect_counts(before, 0);
    EXPECT_EQ(wsp_ggml_backend_reg_by_name("TESTDL"), nullptr);
    EXPECT_EQ(wsp_ggml_backend_dev_by_name("TESTDL0"), nullptr);
}

struct BadCase {
    const char * file;   // libwsp-ggml-<file>.so in WSP_DL_DIR
    const char * reason; // what the log must say
};

class BadLibrary : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadLibrary, IsRefusedWithAReason) {
    const Counts before;
    LogCapture   log;
    EXPECT_EQ(wsp_ggml_backend_load(library(GetParam().file).c_str()), nullptr);
    EXPECT_TRUE(log.contains(GetParam().reason)) << log.text();
    EXPECT_TRUE(log.contains(library(GetParam().file))) << "the message names the file: " << log.text();
    expect_counts(before, 0);
    EXPECT_EQ(wsp_ggml_backend_reg_by_name("TESTDL"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Libraries, BadLibrary,
                         ::testing::Values(BadCase{ "noentry", "no wsp_ggml_backend_init" },
                                           BadCase{ "badversion", "API version" },
                                           BadCase{ "nullinit", "returned NULL" }, BadCase{ "score0", "score 0" },
                                           BadCase{ "missing", "cannot load" }),
                         [](const auto & info) { return std::string(info.param.file); });

TEST(DynamicBackend, NullPathIsRefused) {
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_load(nullptr), nullptr);
    EXPECT_TRUE(log.contains("path is NULL")) << log.text();
}

TEST(DynamicBackend, UnloadOfAnUnregisteredRegIsRefused) {
    const Counts                before;
    static wsp_ggml_backend_reg stranger = { WSP_GGML_BACKEND_API_VERSION, {}, nullptr };
    LogCapture                  log;
    wsp_ggml_backend_unload(&stranger);
    EXPECT_TRUE(log.contains("is not registered")) << log.text();
    expect_counts(before, 0);
}

TEST(DynamicBackend, LoadAllFromPathLoadsTheBestVariantOnce) {
    const Counts before;
    LogCapture   log;
    wsp_ggml_backend_load_all_from_path(WSP_DL_DIR);
    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_reg_by_name("TESTDL");
    ASSERT_NE(reg, nullptr) << log.text();
    expect_counts(before, 1);
    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_by_name("TESTDL0");
    ASSERT_NE(dev, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_dev_description(dev), "test backend, score 10") << "the score-5 variant won";
    // the broken libraries in the same directory were tried, refused with their reasons, and skipped
    EXPECT_TRUE(log.contains("API version")) << log.text();
    EXPECT_TRUE(log.contains("returned NULL")) << log.text();

    wsp_ggml_backend_load_all_from_path(WSP_DL_DIR); // already registered: not loaded again
    expect_counts(before, 1);

    wsp_ggml_backend_ptr backend(wsp_ggml_backend_dev_init(dev, nullptr));
    ASSERT_NE(backend, nullptr);
    expect_add_computes(backend.get());
    backend.reset();
    wsp_ggml_backend_unload(reg);
    expect_counts(before, 0);
}

TEST(DynamicBackend, LoadAllFromAMissingDirectoryDoesNothing) {
    const Counts before;
    LogCapture   log;
    wsp_ggml_backend_load_all_from_path((std::string(WSP_DL_DIR) + "/no-such-dir").c_str());
    expect_counts(before, 0);
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 0) << log.text();
}

TEST(DynamicBackend, LoadAllRunsWithoutError) {
    const Counts before;
    LogCapture   log;
    wsp_ggml_backend_load_all();
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 0) << log.text();
    EXPECT_GE(wsp_ggml_backend_reg_count(), before.regs);
    EXPECT_EQ(wsp_ggml_backend_reg_by_name("CPU"), wsp_ggml_backend_cpu_reg());
    // the test libraries live in a directory of their own, which load_all does not search
    EXPECT_EQ(wsp_ggml_backend_reg_by_name("TESTDL"), nullptr);
}

} // namespace
} // namespace wsp::test
