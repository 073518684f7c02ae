// wsp-ggml-cli devices: every registered device (name, type, description, memory, registry),
// then every registry with its device count and the features it reports (GPU targets, NCCL,
// BLAS; NO_DEVICES: why a GPU reg has none, said beside its count in the text), as text or as one JSON object
// {"backends", "devices": [...], "regs": [...]}.

#include "cli/commands.h"
#include "cli/json.h"

#include "ggml-backend.h"

#include <cstdio>
#include <cstring>

namespace wsp::cli {

namespace {

const char * type_name(enum wsp_ggml_backend_dev_type type) {
    return type == WSP_GGML_BACKEND_DEVICE_TYPE_CPU   ? "CPU"
           : type == WSP_GGML_BACKEND_DEVICE_TYPE_GPU ? "GPU"
                                                      : "ACCEL";
}

// the features a registry reports, NULL-name terminated; NULL where it reports none
const wsp_ggml_backend_feature * features(wsp_ggml_backend_reg_t reg) {
    auto get_features = reinterpret_cast<wsp_ggml_backend_get_features_t>(
        wsp_ggml_backend_reg_get_proc_address(reg, "wsp_ggml_backend_get_features"));
    return get_features ? get_features(reg) : nullptr;
}

const char * plural(size_t n, const char * one, const char * many) {
    return n == 1 ? one : many;
}

void print_text() {
    const size_t n_regs = wsp_ggml_backend_reg_count(), n_devs = wsp_ggml_backend_dev_count();
    std::printf("%zu %s, %zu %s\n", n_regs, plural(n_regs, "backend", "backends"), n_devs,
                plural(n_devs, "device", "devices"));
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        wsp_ggml_backend_dev_t     dev = wsp_ggml_backend_dev_get(i);
        wsp_ggml_backend_dev_props props;
        wsp_ggml_backend_dev_get_props(dev, &props);
        std::printf("  %-8s %-5s %-40s %8.0f / %8.0f MiB free (reg %s)\n", props.name, type_name(props.type),
                    props.description, props.memory_free / 1048576.0, props.memory_total / 1048576.0,
                    wsp_ggml_backend_reg_name(wsp_ggml_backend_dev_backend_reg(dev)));
    }
    for (size_t i = 0; i < wsp_ggml_backend_reg_count(); ++i) {
        wsp_ggml_backend_reg_t reg = wsp_ggml_backend_reg_get(i);
        const size_t           n   = wsp_ggml_backend_reg_dev_count(reg);
        std::printf("  reg %-6s %zu %s", wsp_ggml_backend_reg_name(reg), n, plural(n, "device", "devices"));
        for (const wsp_ggml_backend_feature * f = features(reg); f && f->name; ++f) {
            if (std::strcmp(f->name, "NO_DEVICES") == 0) { // why there are none, said first
                std::printf(": %s", f->value);
            }
        }
        for (const wsp_ggml_backend_feature * f = features(reg); f && f->name; ++f) {
            if (std::strcmp(f->name, "NO_DEVICES") != 0) {
                std::printf("  %s=%s", f->name, f->value);
            }
        }
        std::printf("\n");
    }
}

void print_json() {
    JsonWriter j;
    j.begin_object().field("backends", (uint64_t) wsp_ggml_backend_reg_count()).key("devices").begin_array();
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        wsp_ggml_backend_dev_t     dev = wsp_ggml_backend_dev_get(i);
        wsp_ggml_backend_dev_props props;
        wsp_ggml_backend_dev_get_props(dev, &props);
        j.begin_object()
            .field("name", props.name)
            .field("type", type_name(props.type))
            .field("description", props.description)
            .field("memory_free", (uint64_t) props.memory_free)
            .field("memory_total", (uint64_t) props.memory_total)
            .field("reg", wsp_ggml_backend_reg_name(wsp_ggml_backend_dev_backend_reg(dev)))
            .end_object();
    }
    j.end_array().key("regs").begin_array();
    for (size_t i = 0; i < wsp_ggml_backend_reg_count(); ++i) {
        wsp_ggml_backend_reg_t reg = wsp_ggml_backend_reg_get(i);
        j.begin_object()
            .field("name", wsp_ggml_backend_reg_name(reg))
            .field("devices", (uint64_t) wsp_ggml_backend_reg_dev_count(reg))
            .key("features")
            .begin_object();
        for (const wsp_ggml_backend_feature * f = features(reg); f && f->name; ++f) {
            j.field(f->name, f->value);
        }
        j.end_object().end_object();
    }
    j.end_array().end_object();
    std::printf("%s\n", j.str().c_str());
}

} // namespace

int cmd_devices(bool json) {
    wsp_ggml_backend_load_all();
    if (json) {
        print_json();
    } else {
        print_text();
    }
    return 0;
}

} // namespace wsp::cli
