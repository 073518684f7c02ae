// Generic buffer-type and buffer functions over the interface tables, tensor data access with
// bounds checks, tensor placement (tensor_alloc, view_init) and copies between buffers.
// Out-of-range accesses are refused with a message and nothing is written.

#include "ggml-backend-impl.h"

#include "../core/impl.h"
#include "../split/split_buffer.h"

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace {

using wsp::buffer_of;
using wsp::describe;

// common checks of tensor_set/get/memset; false (with a message) when the access is invalid
bool check_access(const wsp_ggml_tensor * t, size_t offset, size_t size, const char * fn) {
    if (buffer_of(t) == nullptr) {
        WSP_LOG_ERROR("%s: %s is not allocated in a buffer\n", fn, describe(t).c_str());
        return false;
    }
    if (t->data == nullptr && size > 0) {
        WSP_LOG_ERROR("%s: %s has no data\n", fn, describe(t).c_str());
        return false;
    }
    const size_t nbytes = wsp_ggml_nbytes(t);
    if (offset > nbytes || size > nbytes - offset) {
        WSP_LOG_ERROR("%s: range [%zu, %zu) is out of the bounds of %s (%zu bytes); nothing was transferred\n", fn,
                      offset, offset + size, describe(t).c_str(), nbytes);
        return false;
    }
    return true;
}

} // namespace

extern "C" {

//
// buffer type
//

const char * wsp_ggml_backend_buft_name(wsp_ggml_backend_buffer_type_t buft) {
    return buft->iface.get_name(buft);
}

wsp_ggml_backend_buffer_t wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_buffer_type_t buft, size_t size) {
    if (size == 0) {
        // a valid buffer without memory, so that empty contexts need no special case
        return wsp_ggml_backend_buffer_init(buft, {}, nullptr, 0);
    }
    const size_t max_size = wsp_ggml_backend_buft_get_max_size(buft);
    if (size > max_size) {
        WSP_LOG_ERROR("%s: %s cannot allocate %zu bytes (its maximum buffer size is %zu)\n", __func__,
                      wsp_ggml_backend_buft_name(buft), size, max_size);
        return nullptr;
    }
    return buft->iface.alloc_buffer(buft, size);
}

size_t wsp_ggml_backend_buft_get_alignment(wsp_ggml_backend_buffer_type_t buft) {
    return buft->iface.get_alignment(buft);
}

size_t wsp_ggml_backend_buft_get_max_size(wsp_ggml_backend_buffer_type_t buft) {
    return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX;
}

size_t wsp_ggml_backend_buft_get_alloc_size(wsp_ggml_backend_buffer_type_t buft,
                                            const struct wsp_ggml_tensor * tensor) {
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, tensor) : wsp_ggml_nbytes(tensor);
}

bool wsp_ggml_backend_buft_is_host(wsp_ggml_backend_buffer_type_t buft) {
    return buft->iface.is_host ? buft->iface.is_host(buft) : false;
}

wsp_ggml_backend_dev_t wsp_ggml_backend_buft_get_device(wsp_ggml_backend_buffer_type_t buft) {
    return buft->device;
}

//
// buffer
//

wsp_ggml_backend_buffer_t wsp_ggml_backend_buffer_init(wsp_ggml_backend_buffer_type_t   buft,
                                                       struct wsp_ggml_backend_buffer_i iface, void * context,
                                                       size_t size) {
    auto * buffer =
        new (std::nothrow) wsp_ggml_backend_buffer{ iface, buft, context, size, WSP_GGML_BACKEND_BUFFER_USAGE_ANY };
    if (buffer == nullptr) {
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
    }
    return buffer;
}

const char * wsp_ggml_backend_buffer_name(wsp_ggml_backend_buffer_t buffer) {
    return wsp_ggml_backend_buft_name(wsp_ggml_backend_buffer_get_type(buffer));
}

void wsp_ggml_backend_buffer_free(wsp_ggml_backend_buffer_t buffer) {
    if (buffer == nullptr) {
        return;
    }
    if (buffer->iface.free_buffer != nullptr) {
        buffer->iface.free_buffer(buffer);
    }
    delete buffer;
}

size_t wsp_ggml_backend_buffer_get_size(wsp_ggml_backend_buffer_t buffer) {
    return buffer->size;
}

void * wsp_ggml_backend_buffer_get_base(wsp_ggml_backend_buffer_t buffer) {
    // get_base may be absent for zero-sized buffers
    if (buffer->size == 0 || buffer->iface.get_base == nullptr) {
        return nullptr;
    }
    void * base = buffer->iface.get_base(buffer);
    if (base == nullptr) {
        WSP_LOG_ERROR("%s: buffer of %s returned a NULL base\n", __func__, wsp_ggml_backend_buffer_name(buffer));
    }
    return base;
}

enum wsp_ggml_status wsp_ggml_backend_buffer_init_tensor(wsp_ggml_backend_buffer_t buffer,
                                                         struct wsp_ggml_tensor *  tensor) {
    if (buffer->iface.init_tensor != nullptr) {
        return buffer->iface.init_tensor(buffer, tensor);
    }
    return WSP_GGML_STATUS_SUCCESS;
}

void wsp_ggml_backend_buffer_clear(wsp_ggml_backend_buffer_t buffer, uint8_t value) {
    if (buffer->size == 0) {
        return;
    }
    buffer->iface.clear(buffer, value);
}

size_t wsp_ggml_backend_buffer_get_alignment(wsp_ggml_backend_buffer_t buffer) {
    return wsp_ggml_backend_buft_get_alignment(wsp_ggml_backend_buffer_get_type(buffer));
}

size_t wsp_ggml_backend_buffer_get_max_size(wsp_ggml_backend_buffer_t buffer) {
    return wsp_ggml_backend_buft_get_max_size(wsp_ggml_backend_buffer_get_type(buffer));
}

size_t wsp_ggml_backend_buffer_get_alloc_size(wsp_ggml_backend_buffer_t buffer, const struct wsp_ggml_tensor * tensor) {
    return wsp_ggml_backend_buft_get_alloc_size(wsp_ggml_backend_buffer_get_type(buffer), tensor);
}

bool wsp_ggml_backend_buffer_is_host(wsp_ggml_backend_buffer_t buffer) {
    return wsp_ggml_backend_buft_is_host(wsp_ggml_backend_buffer_get_type(buffer));
}

void wsp_ggml_backend_buffer_set_usage(wsp_ggml_backend_buffer_t buffer, enum wsp_ggml_backend_buffer_usage usage) {
    buffer->usage = usage;
    if (wsp_ggml_backend_buffer_is_multi_buffer(buffer)) {
        wsp_ggml_backend_multi_buffer_set_usage(buffer, usage);
    }
    if (wsp::split::is_split_buffer(buffer)) {
        wsp::split::set_usage(buffer, usage); // the per-device buffers steer the scheduler
    }
}

enum wsp_ggml_backend_buffer_usage wsp_ggml_backend_buffer_get_usage(wsp_ggml_backend_buffer_t buffer) {
    return buffer->usage;
}

wsp_ggml_backend_buffer_type_t wsp_ggml_backend_buffer_get_type(wsp_ggml_backend_buffer_t buffer) {
    return buffer->buft;
}

void wsp_ggml_backend_buffer_reset(wsp_ggml_backend_buffer_t buffer) {
    if (buffer->iface.reset != nullptr) {
        buffer->iface.reset(buffer);
    }
}

bool wsp_ggml_backend_buffer_copy_tensor(const struct wsp_ggml_tensor * src, struct wsp_ggml_tensor * dst) {
    wsp_ggml_backend_buffer_t dst_buf = buffer_of(dst);
    if (dst_buf != nullptr && dst_buf->iface.cpy_tensor != nullptr) {
        return dst_buf->iface.cpy_tensor(dst_buf, src, dst);
    }
    return false;
}

//
// tensor data access
//

void wsp_ggml_backend_tensor_set(struct wsp_ggml_tensor * tensor, const void * data, size_t offset, size_t size) {
    if (size == 0 || !check_access(tensor, offset, size, __func__)) {
        return;
    }
    wsp_ggml_backend_buffer_t buf = buffer_of(tensor);
    buf->iface.set_tensor(buf, tensor, data, offset, size);
}

void wsp_ggml_backend_tensor_get(const struct wsp_ggml_tensor * tensor, void * data, size_t offset, size_t size) {
    if (size == 0 || !check_access(tensor, offset, size, __func__)) {
        return;
    }
    wsp_ggml_backend_buffer_t buf = buffer_of(tensor);
    buf->iface.get_tensor(buf, tensor, data, offset, size);
}

void wsp_ggml_backend_tensor_memset(struct wsp_ggml_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    if (size == 0 || !check_access(tensor, offset, size, __func__)) {
        return;
    }
    wsp_ggml_backend_buffer_t buf = buffer_of(tensor);
    if (buf->iface.memset_tensor == nullptr) {
        WSP_LOG_ERROR("%s: buffers of type %s do not support memset\n", __func__, wsp_ggml_backend_buffer_name(buf));
        return;
    }
    buf->iface.memset_tensor(buf, tensor, value, offset, size);
}

//
// tensor placement
//

enum wsp_ggml_status wsp_ggml_backend_tensor_alloc(wsp_ggml_backend_buffer_t buffer, struct wsp_ggml_tensor * tensor,
                                                   void * addr) {
    if (tensor->buffer != nullptr || tensor->data != nullptr || tensor->view_src != nullptr) {
        WSP_LOG_ERROR("%s: %s is already allocated or is a view\n", __func__, describe(tensor).c_str());
        return WSP_GGML_STATUS_FAILED;
    }
    char * const base = static_cast<char *>(wsp_ggml_backend_buffer_get_base(buffer));
    const size_t need = wsp_ggml_backend_buffer_get_alloc_size(buffer, tensor);
    char * const p    = static_cast<char *>(addr);
    if (p < base || p > base + buffer->size || need > (size_t) (base + buffer->size - p)) {
        WSP_LOG_ERROR("%s: %s needs %zu bytes at offset %td, outside its buffer of %zu bytes\n", __func__,
                      describe(tensor).c_str(), need, p - base, buffer->size);
        return WSP_GGML_STATUS_FAILED;
    }
    tensor->buffer = buffer;
    tensor->data   = addr;
    return wsp_ggml_backend_buffer_init_tensor(buffer, tensor);
}

enum wsp_ggml_status wsp_ggml_backend_view_init(struct wsp_ggml_tensor * tensor) {
    const wsp_ggml_tensor * src = tensor->view_src;
    if (src == nullptr || src->buffer == nullptr || src->data == nullptr) {
        WSP_LOG_ERROR("%s: %s is not a view of an allocated tensor\n", __func__, describe(tensor).c_str());
        return WSP_GGML_STATUS_FAILED;
    }
    tensor->buffer = src->buffer;
    tensor->data   = static_cast<char *>(src->data) + tensor->view_offs;
    return wsp_ggml_backend_buffer_init_tensor(src->buffer, tensor);
}

//
// copies between buffers
//

void wsp_ggml_backend_tensor_copy(struct wsp_ggml_tensor * src, struct wsp_ggml_tensor * dst) {
    if (src == dst) {
        return;
    }
    if (src->type != dst->type || !wsp_ggml_are_same_shape(src, dst) || !wsp_ggml_are_same_stride(src, dst)) {
        WSP_LOG_ERROR("%s: %s and %s differ in type or layout; nothing was copied\n", __func__, describe(src).c_str(),
                      describe(dst).c_str());
        return;
    }
    const size_t n = wsp_ggml_nbytes(src);
    if (buffer_of(src) == nullptr || buffer_of(dst) == nullptr) {
        WSP_LOG_ERROR("%s: %s or %s is not allocated; nothing was copied\n", __func__, describe(src).c_str(),
                      describe(dst).c_str());
        return;
    }
    if (wsp_ggml_backend_buffer_is_host(buffer_of(src))) {
        wsp_ggml_backend_tensor_set(dst, src->data, 0, n);
    } else if (wsp_ggml_backend_buffer_is_host(buffer_of(dst))) {
        wsp_ggml_backend_tensor_get(src, dst->data, 0, n);
    } else if (!wsp_ggml_backend_buffer_copy_tensor(src, dst)) {
        // neither side is host memory and there is no direct path: stage through the host
        std::vector<uint8_t> staging;
        try {
            staging.resize(n);
        } catch (const std::bad_alloc &) {
            WSP_LOG_ERROR("%s: cannot allocate %zu bytes of staging memory; nothing was copied\n", __func__, n);
            return;
        }
        wsp_ggml_backend_tensor_get(src, staging.data(), 0, n);
        wsp_ggml_backend_tensor_set(dst, staging.data(), 0, n);
    }
}

} // extern "C"
