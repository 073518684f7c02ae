// Generic backend (stream) and event functions over the interface tables. Optional members
// fall back to synchronous behaviour: a backend without async copies copies synchronously, a
// backend without plans says so and returns NULL.

#include "ggml-backend-impl.h"

#include "../core/impl.h"

extern "C" {

wsp_ggml_guid_t wsp_ggml_backend_guid(wsp_ggml_backend_t backend) {
    return backend ? backend->guid : nullptr;
}

const char * wsp_ggml_backend_name(wsp_ggml_backend_t backend) {
    return backend ? backend->iface.get_name(backend) : "NULL";
}

void wsp_ggml_backend_free(wsp_ggml_backend_t backend) {
    if (backend != nullptr) {
        backend->iface.free(backend);
    }
}

wsp_ggml_backend_buffer_type_t wsp_ggml_backend_get_default_buffer_type(wsp_ggml_backend_t backend) {
    return wsp_ggml_backend_dev_buffer_type(backend->device);
}

wsp_ggml_backend_buffer_t wsp_ggml_backend_alloc_buffer(wsp_ggml_backend_t backend, size_t size) {
    return wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_get_default_buffer_type(backend), size);
}

size_t wsp_ggml_backend_get_alignment(wsp_ggml_backend_t backend) {
    return wsp_ggml_backend_buft_get_alignment(wsp_ggml_backend_get_default_buffer_type(backend));
}

size_t wsp_ggml_backend_get_max_size(wsp_ggml_backend_t backend) {
    return wsp_ggml_backend_buft_get_max_size(wsp_ggml_backend_get_default_buffer_type(backend));
}

void wsp_ggml_backend_tensor_set_async(wsp_ggml_backend_t backend, struct wsp_ggml_tensor * tensor, const void * data,
                                       size_t offset, size_t size) {
    if (backend->iface.set_tensor_async == nullptr) {
        wsp_ggml_backend_tensor_set(tensor, data, offset, size);
        return;
    }
    if (size == 0) {
        return;
    }
    if (tensor->data == nullptr || offset > wsp_ggml_nbytes(tensor) || size > wsp_ggml_nbytes(tensor) - offset) {
        WSP_LOG_ERROR("%s: range [%zu, %zu) is out of the bounds of %s or it has no data; nothing was written\n",
                      __func__, offset, offset + size, wsp::describe(tensor).c_str());
        return;
    }
    backend->iface.set_tensor_async(backend, tensor, data, offset, size);
}

void wsp_ggml_backend_tensor_get_async(wsp_ggml_backend_t backend, const struct wsp_ggml_tensor * tensor, void * data,
                                       size_t offset, size_t size) {
    if (backend->iface.get_tensor_async == nullptr) {
        wsp_ggml_backend_tensor_get(tensor, data, offset, size);
        return;
    }
    if (size == 0) {
        return;
    }
    if (tensor->data == nullptr || offset > wsp_ggml_nbytes(tensor) || size > wsp_ggml_nbytes(tensor) - offset) {
        WSP_LOG_ERROR("%s: range [%zu, %zu) is out of the bounds of %s or it has no data; nothing was read\n", __func__,
                      offset, offset + size, wsp::describe(tensor).c_str());
        return;
    }
    backend->iface.get_tensor_async(backend, tensor, data, offset, size);
}

void wsp_ggml_backend_synchronize(wsp_ggml_backend_t backend) {
    if (backend->iface.synchronize != nullptr) {
        // a failure of the asynchronous work is logged by the backend that reports it
        (void) backend->iface.synchronize(backend);
    }
}

wsp_ggml_backend_graph_plan_t wsp_ggml_backend_graph_plan_create(wsp_ggml_backend_t       backend,
                                                                 struct wsp_ggml_cgraph * cgraph) {
    if (backend->iface.graph_plan_create == nullptr) {
        WSP_LOG_ERROR("%s: backend %s has no graph plans; use wsp_ggml_backend_graph_compute\n", __func__,
                      wsp_ggml_backend_name(backend));
        return nullptr;
    }
    return backend->iface.graph_plan_create(backend, cgraph);
}

void wsp_ggml_backend_graph_plan_free(wsp_ggml_backend_t backend, wsp_ggml_backend_graph_plan_t plan) {
    if (plan == nullptr) {
        return;
    }
    if (backend->iface.graph_plan_free == nullptr) {
        WSP_LOG_ERROR("%s: backend %s has no graph plans\n", __func__, wsp_ggml_backend_name(backend));
        return;
    }
    backend->iface.graph_plan_free(backend, plan);
}

enum wsp_ggml_status wsp_ggml_backend_graph_plan_compute(wsp_ggml_backend_t            backend,
                                                         wsp_ggml_backend_graph_plan_t plan) {
    if (backend->iface.graph_plan_compute == nullptr || plan == nullptr) {
        WSP_LOG_ERROR("%s: backend %s has no graph plans or the plan is NULL\n", __func__,
                      wsp_ggml_backend_name(backend));
        return WSP_GGML_STATUS_FAILED;
    }
    return backend->iface.graph_plan_compute(backend, plan);
}

enum wsp_ggml_status wsp_ggml_backend_graph_compute(wsp_ggml_backend_t backend, struct wsp_ggml_cgraph * cgraph) {
    const wsp_ggml_status status = wsp_ggml_backend_graph_compute_async(backend, cgraph);
    // an asynchronous backend reports kernel failures when its queue drains
    const wsp_ggml_status sync =
        backend->iface.synchronize ? backend->iface.synchronize(backend) : WSP_GGML_STATUS_SUCCESS;
    return status != WSP_GGML_STATUS_SUCCESS ? status : sync;
}

enum wsp_ggml_status wsp_ggml_backend_graph_compute_async(wsp_ggml_backend_t backend, struct wsp_ggml_cgraph * cgraph) {
    return backend->iface.graph_compute(backend, cgraph);
}

bool wsp_ggml_backend_supports_op(wsp_ggml_backend_t backend, const struct wsp_ggml_tensor * op) {
    return wsp_ggml_backend_dev_supports_op(backend->device, op);
}

bool wsp_ggml_backend_supports_buft(wsp_ggml_backend_t backend, wsp_ggml_backend_buffer_type_t buft) {
    return wsp_ggml_backend_dev_supports_buft(backend->device, buft);
}

bool wsp_ggml_backend_offload_op(wsp_ggml_backend_t backend, const struct wsp_ggml_tensor * op) {
    return wsp_ggml_backend_dev_offload_op(backend->device, op);
}

wsp_ggml_backend_dev_t wsp_ggml_backend_get_device(wsp_ggml_backend_t backend) {
    return backend->device;
}

void wsp_ggml_backend_tensor_copy_async(wsp_ggml_backend_t backend_src, wsp_ggml_backend_t backend_dst,
                                        struct wsp_ggml_tensor * src, struct wsp_ggml_tensor * dst) {
    if (src == dst) {
        return;
    }
    if (src->type != dst->type || !wsp_ggml_are_same_shape(src, dst) || !wsp_ggml_are_same_stride(src, dst)) {
        WSP_LOG_ERROR("%s: %s and %s differ in type or layout; nothing was copied\n", __func__,
                      wsp::describe(src).c_str(), wsp::describe(dst).c_str());
        return;
    }
    if (backend_dst->iface.cpy_tensor_async != nullptr &&
        backend_dst->iface.cpy_tensor_async(backend_src, backend_dst, src, dst)) {
        return;
    }
    // no async path: finish the queued work on both sides, then copy synchronously
    wsp_ggml_backend_synchronize(backend_src);
    wsp_ggml_backend_synchronize(backend_dst);
    wsp_ggml_backend_tensor_copy(src, dst);
}

//
// events
//

wsp_ggml_backend_event_t wsp_ggml_backend_event_new(wsp_ggml_backend_dev_t device) {
    if (device == nullptr || device->iface.event_new == nullptr) {
        WSP_LOG_ERROR("%s: device %s does not support events\n", __func__,
                      device ? wsp_ggml_backend_dev_name(device) : "NULL");
        return nullptr;
    }
    return device->iface.event_new(device);
}

void wsp_ggml_backend_event_free(wsp_ggml_backend_event_t event) {
    if (event == nullptr) {
        return;
    }
    event->device->iface.event_free(event->device, event);
}

void wsp_ggml_backend_event_record(wsp_ggml_backend_event_t event, wsp_ggml_backend_t backend) {
    if (backend->iface.event_record == nullptr) {
        WSP_LOG_ERROR("%s: backend %s cannot record events\n", __func__, wsp_ggml_backend_name(backend));
        return;
    }
    backend->iface.event_record(backend, event);
}

void wsp_ggml_backend_event_synchronize(wsp_ggml_backend_event_t event) {
    event->device->iface.event_synchronize(event->device, event);
}

void wsp_ggml_backend_event_wait(wsp_ggml_backend_t backend, wsp_ggml_backend_event_t event) {
    if (backend->iface.event_wait == nullptr) {
        WSP_LOG_ERROR("%s: backend %s cannot wait for events\n", __func__, wsp_ggml_backend_name(backend));
        return;
    }
    backend->iface.event_wait(backend, event);
}

//
// devices
//

const char * wsp_ggml_backend_dev_name(wsp_ggml_backend_dev_t device) {
    return device->iface.get_name(device);
}

const char * wsp_ggml_backend_dev_description(wsp_ggml_backend_dev_t device) {
    return device->iface.get_description(device);
}

void wsp_ggml_backend_dev_memory(wsp_ggml_backend_dev_t device, size_t * free, size_t * total) {
    device->iface.get_memory(device, free, total);
}

enum wsp_ggml_backend_dev_type wsp_ggml_backend_dev_type(wsp_ggml_backend_dev_t device) {
    return device->iface.get_type(device);
}

void wsp_ggml_backend_dev_get_props(wsp_ggml_backend_dev_t device, struct wsp_ggml_backend_dev_props * props) {
    std::memset(props, 0, sizeof(*props));
    device->iface.get_props(device, props);
}

wsp_ggml_backend_reg_t wsp_ggml_backend_dev_backend_reg(wsp_ggml_backend_dev_t device) {
    return device->reg;
}

wsp_ggml_backend_t wsp_ggml_backend_dev_init(wsp_ggml_backend_dev_t device, const char * params) {
    if (device == nullptr) {
        WSP_LOG_ERROR("%s: device is NULL\n", __func__);
        return nullptr;
    }
    return device->iface.init_backend(device, params);
}

wsp_ggml_backend_buffer_type_t wsp_ggml_backend_dev_buffer_type(wsp_ggml_backend_dev_t device) {
    return device->iface.get_buffer_type(device);
}

wsp_ggml_backend_buffer_type_t wsp_ggml_backend_dev_host_buffer_type(wsp_ggml_backend_dev_t device) {
    return device->iface.get_host_buffer_type ? device->iface.get_host_buffer_type(device) : nullptr;
}

wsp_ggml_backend_buffer_t wsp_ggml_backend_dev_buffer_from_host_ptr(wsp_ggml_backend_dev_t device, void * ptr,
                                                                    size_t size, size_t max_tensor_size) {
    if (device->iface.buffer_from_host_ptr == nullptr) {
        WSP_LOG_ERROR("%s: device %s cannot create buffers from host memory\n", __func__,
                      wsp_ggml_backend_dev_name(device));
        return nullptr;
    }
    return device->iface.buffer_from_host_ptr(device, ptr, size, max_tensor_size);
}

bool wsp_ggml_backend_dev_supports_op(wsp_ggml_backend_dev_t device, const struct wsp_ggml_tensor * op) {
    return device->iface.supports_op(device, op);
}

bool wsp_ggml_backend_dev_supports_buft(wsp_ggml_backend_dev_t device, wsp_ggml_backend_buffer_type_t buft) {
    return device->iface.supports_buft(device, buft);
}

bool wsp_ggml_backend_dev_offload_op(wsp_ggml_backend_dev_t device, const struct wsp_ggml_tensor * op) {
    return device->iface.offload_op ? device->iface.offload_op(device, op) : false;
}

//
// regs
//

const char * wsp_ggml_backend_reg_name(wsp_ggml_backend_reg_t reg) {
    return reg->iface.get_name(reg);
}

size_t wsp_ggml_backend_reg_dev_count(wsp_ggml_backend_reg_t reg) {
    return reg->iface.get_device_count(reg);
}

wsp_ggml_backend_dev_t wsp_ggml_backend_reg_dev_get(wsp_ggml_backend_reg_t reg, size_t index) {
    if (index >= wsp_ggml_backend_reg_dev_count(reg)) {
        WSP_LOG_ERROR("%s: %s has no device %zu\n", __func__, wsp_ggml_backend_reg_name(reg), index);
        return nullptr;
    }
    return reg->iface.get_device(reg, index);
}

void * wsp_ggml_backend_reg_get_proc_address(wsp_ggml_backend_reg_t reg, const char * name) {
    if (reg == nullptr || reg->iface.get_proc_address == nullptr) {
        return nullptr;
    }
    return reg->iface.get_proc_address(reg, name);
}

} // extern "C"
