// A backend built as a shared library for test_dynamic_backend: reg "TESTDL" with one ACCEL
// device "TESTDL0" whose backend adds F32 tensors in host memory (CPU buffers). One source,
// several libraries: the macros below make the good variants (told apart by their score, which
// the device description repeats) and the broken ones the loader must refuse.
//   TESTDL_SCORE        value of wsp_ggml_backend_score (no score function when undefined)
//   TESTDL_NO_ENTRY     no wsp_ggml_backend_init at all
//   TESTDL_INIT_NULL    wsp_ggml_backend_init returns NULL
//   TESTDL_WRONG_VERSION the reg reports an API version other than the loader's

#include "ggml-backend-impl.h"

#include <cstring>
#include <string>

#ifdef TESTDL_WRONG_VERSION
#    define TESTDL_API_VERSION (WSP_GGML_BACKEND_API_VERSION + 1)
#else
#    define TESTDL_API_VERSION WSP_GGML_BACKEND_API_VERSION
#endif

namespace {

wsp_ggml_guid testdl_guid = { 0x7e, 0x57, 0xd1, 0x00, 0x01, 0x02, 0x03, 0x04,
                              0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c };

bool is_f32_add(const wsp_ggml_tensor * t) {
    return t->op == WSP_GGML_OP_ADD && t->type == WSP_GGML_TYPE_F32 && t->src[0]->type == WSP_GGML_TYPE_F32 &&
           t->src[1]->type == WSP_GGML_TYPE_F32 && wsp_ggml_are_same_shape(t->src[0], t->src[1]) &&
           wsp_ggml_is_contiguous(t) && wsp_ggml_is_contiguous(t->src[0]) && wsp_ggml_is_contiguous(t->src[1]);
}

//
// backend: computes F32 ADD nodes, nothing else
//

const char * backend_name(wsp_ggml_backend_t) {
    return "TESTDL0";
}

void backend_free(wsp_ggml_backend_t backend) {
    delete backend;
}

wsp_ggml_status graph_compute(wsp_ggml_backend_t, wsp_ggml_cgraph * graph) {
    for (int i = 0; i < wsp_ggml_graph_n_nodes(graph); ++i) {
        wsp_ggml_tensor * node = wsp_ggml_graph_node(graph, i);
        if (node->op == WSP_GGML_OP_NONE) {
            continue;
        }
        if (!is_f32_add(node)) {
            return WSP_GGML_STATUS_FAILED;
        }
        const float * a = static_cast<const float *>(node->src[0]->data);
        const float * b = static_cast<const float *>(node->src[1]->data);
        float *       d = static_cast<float *>(node->data);
        for (int64_t k = 0; k < wsp_ggml_nelements(node); ++k) {
            d[k] = a[k] + b[k];
        }
    }
    return WSP_GGML_STATUS_SUCCESS;
}

const wsp_ggml_backend_i backend_iface = {
    /* .get_name           = */ backend_name,
    /* .free               = */ backend_free,
    /* .set_tensor_async   = */ nullptr,
    /* .get_tensor_async   = */ nullptr,
    /* .cpy_tensor_async   = */ nullptr,
    /* .synchronize        = */ nullptr,
    /* .graph_plan_create  = */ nullptr,
    /* .graph_plan_free    = */ nullptr,
    /* .graph_plan_update  = */ nullptr,
    /* .graph_plan_compute = */ nullptr,
    /* .graph_compute      = */ graph_compute,
    /* .event_record       = */ nullptr,
    /* .event_wait         = */ nullptr,
};

//
// device
//

const char * dev_name(wsp_ggml_backend_dev_t) {
    return "TESTDL0";
}

const char * dev_description(wsp_ggml_backend_dev_t) {
#ifdef TESTDL_SCORE
    static const std::string d = "test backend, score " + std::to_string(TESTDL_SCORE);
#else
    static const std::string d = "test backend, no score";
#endif
    return d.c_str();
}

void dev_memory(wsp_ggml_backend_dev_t, size_t * free, size_t * total) {
    *free  = 0;
    *total = 0;
}

enum wsp_ggml_backend_dev_type dev_type(wsp_ggml_backend_dev_t) {
    return WSP_GGML_BACKEND_DEVICE_TYPE_ACCEL;
}

void dev_props(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_dev_props * props) {
    props->name        = dev_name(dev);
    props->description = dev_description(dev);
    dev_memory(dev, &props->memory_free, &props->memory_total);
    props->type = dev_type(dev);
    props->caps = { false, false, false, false };
}

wsp_ggml_backend_t dev_init(wsp_ggml_backend_dev_t dev, const char *) {
    return new wsp_ggml_backend{ &testdl_guid, backend_iface, dev, nullptr };
}

wsp_ggml_backend_buffer_type_t dev_buffer_type(wsp_ggml_backend_dev_t) {
    return wsp_ggml_backend_cpu_buffer_type();
}

bool dev_supports_op(wsp_ggml_backend_dev_t, const wsp_ggml_tensor * op) {
    return op->op == WSP_GGML_OP_NONE || is_f32_add(op);
}

bool dev_supports_buft(wsp_ggml_backend_dev_t, wsp_ggml_backend_buffer_type_t buft) {
    return wsp_ggml_backend_buft_is_host(buft);
}

const wsp_ggml_backend_device_i device_iface = {
    /* .get_name             = */ dev_name,
    /* .get_description      = */ dev_description,
    /* .get_memory           = */ dev_memory,
    /* .get_type             = */ dev_type,
    /* .get_props            = */ dev_props,
    /* .init_backend         = */ dev_init,
    /* .get_buffer_type      = */ dev_buffer_type,
    /* .get_host_buffer_type = */ nullptr,
    /* .buffer_from_host_ptr = */ nullptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ nullptr,
    /* .event_new            = */ nullptr,
    /* .event_free           = */ nullptr,
    /* .event_synchronize    = */ nullptr,
};

//
// reg
//

wsp_ggml_backend_device testdl_device = { device_iface, nullptr, nullptr };

const char * reg_name(wsp_ggml_backend_reg_t) {
    return "TESTDL";
}

size_t reg_device_count(wsp_ggml_backend_reg_t) {
    return 1;
}

wsp_ggml_backend_dev_t reg_device(wsp_ggml_backend_reg_t, size_t index) {
    return index == 0 ? &testdl_device : nullptr;
}

wsp_ggml_backend_reg testdl_reg = { TESTDL_API_VERSION, { reg_name, reg_device_count, reg_device, nullptr }, nullptr };

[[maybe_unused]] wsp_ggml_backend_reg_t the_reg() {
    testdl_device.reg = &testdl_reg;
#ifdef TESTDL_INIT_NULL
    return nullptr; // like a backend that finds none of its hardware
#else
    return &testdl_reg;
#endif
}

#ifdef TESTDL_SCORE
int the_score() {
    return TESTDL_SCORE;
}
#endif

} // namespace

#ifndef TESTDL_NO_ENTRY
WSP_GGML_BACKEND_DL_IMPL(the_reg)
#else
// something else is exported, so that the library is loadable but not a backend
extern "C" {
WSP_GGML_BACKEND_API int wsp_testdl_not_a_backend(void);
}
int wsp_testdl_not_a_backend(void) {
    return 1;
}
#endif

#ifdef TESTDL_SCORE
WSP_GGML_BACKEND_DL_SCORE_IMPL(the_score)
#endif
