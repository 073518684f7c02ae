// Scalar accessors of ggml-cpu.h for tensors whose data is in host memory.

#include "ggml-cpu.h"

#include "vec.h"

#include "../core/impl.h"

namespace {

using wsp::describe;

char * element_ptr(const wsp_ggml_tensor * t, int i0, int i1, int i2, int i3) {
    return static_cast<char *>(t->data) + (size_t) i0 * t->nb[0] + (size_t) i1 * t->nb[1] + (size_t) i2 * t->nb[2] +
           (size_t) i3 * t->nb[3];
}

void check_host(const wsp_ggml_tensor * t, const char * fn) {
    if (t->data == nullptr || (t->buffer != nullptr && !wsp_ggml_backend_buffer_is_host(t->buffer))) {
        WSP_GGML_ABORT("%s: %s has no host data", fn, describe(t).c_str());
    }
}

void set_value(const wsp_ggml_tensor * t, char * p, double v) {
    switch (t->type) {
        case WSP_GGML_TYPE_I8: *reinterpret_cast<int8_t *>(p) = (int8_t) v; break;
        case WSP_GGML_TYPE_I16: *reinterpret_cast<int16_t *>(p) = (int16_t) v; break;
        case WSP_GGML_TYPE_I32: *reinterpret_cast<int32_t *>(p) = (int32_t) v; break;
        case WSP_GGML_TYPE_F32:
        case WSP_GGML_TYPE_F16:
        case WSP_GGML_TYPE_BF16: wsp::cpu::store_f(t->type, p, (float) v); break;
        default:
            WSP_GGML_ABORT("scalar access to %s: type %s has no scalar elements", describe(t).c_str(),
                           wsp_ggml_type_name(t->type));
    }
}

double get_value(const wsp_ggml_tensor * t, const char * p) {
    switch (t->type) {
        case WSP_GGML_TYPE_I8: return *reinterpret_cast<const int8_t *>(p);
        case WSP_GGML_TYPE_I16: return *reinterpret_cast<const int16_t *>(p);
        case WSP_GGML_TYPE_I32: return *reinterpret_cast<const int32_t *>(p);
        case WSP_GGML_TYPE_F32:
        case WSP_GGML_TYPE_F16:
        case WSP_GGML_TYPE_BF16: return wsp::cpu::load_f(t->type, p);
        default:
            WSP_GGML_ABORT("scalar access to %s: type %s has no scalar elements", describe(t).c_str(),
                           wsp_ggml_type_name(t->type));
    }
}

void fill(const wsp_ggml_tensor * t, double v, const char * fn) {
    check_host(t, fn);
    const int64_t n = wsp_ggml_nelements(t);
    for (int64_t i = 0; i < n; ++i) {
        int64_t i0, i1, i2, i3;
        wsp_ggml_unravel_index(t, i, &i0, &i1, &i2, &i3);
        set_value(t, element_ptr(t, (int) i0, (int) i1, (int) i2, (int) i3), v);
    }
}

char * flat_ptr(const wsp_ggml_tensor * t, int i, const char * fn) {
    check_host(t, fn);
    if (i < 0 || i >= wsp_ggml_nelements(t)) {
        WSP_GGML_ABORT("%s: index %d is out of the %lld elements of %s", fn, i, (long long) wsp_ggml_nelements(t),
                       describe(t).c_str());
    }
    int64_t i0, i1, i2, i3;
    wsp_ggml_unravel_index(t, i, &i0, &i1, &i2, &i3);
    return element_ptr(t, (int) i0, (int) i1, (int) i2, (int) i3);
}

} // namespace

extern "C" {

struct wsp_ggml_tensor * wsp_ggml_new_i32(struct wsp_ggml_context * ctx, int32_t value) {
    wsp_ggml_tensor * t = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, 1);
    wsp_ggml_set_i32(t, value);
    return t;
}

struct wsp_ggml_tensor * wsp_ggml_new_f32(struct wsp_ggml_context * ctx, float value) {
    wsp_ggml_tensor * t = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 1);
    wsp_ggml_set_f32(t, value);
    return t;
}

struct wsp_ggml_tensor * wsp_ggml_set_i32(struct wsp_ggml_tensor * tensor, int32_t value) {
    fill(tensor, value, __func__);
    return tensor;
}

struct wsp_ggml_tensor * wsp_ggml_set_f32(struct wsp_ggml_tensor * tensor, float value) {
    fill(tensor, value, __func__);
    return tensor;
}

int32_t wsp_ggml_get_i32_1d(const struct wsp_ggml_tensor * tensor, int i) {
    return (int32_t) get_value(tensor, flat_ptr(tensor, i, __func__));
}

void wsp_ggml_set_i32_1d(const struct wsp_ggml_tensor * tensor, int i, int32_t value) {
    set_value(tensor, flat_ptr(tensor, i, __func__), value);
}

int32_t wsp_ggml_get_i32_nd(const struct wsp_ggml_tensor * tensor, int i0, int i1, int i2, int i3) {
    check_host(tensor, __func__);
    return (int32_t) get_value(tensor, element_ptr(tensor, i0, i1, i2, i3));
}

void wsp_ggml_set_i32_nd(const struct wsp_ggml_tensor * tensor, int i0, int i1, int i2, int i3, int32_t value) {
    check_host(tensor, __func__);
    set_value(tensor, element_ptr(tensor, i0, i1, i2, i3), value);
}

float wsp_ggml_get_f32_1d(const struct wsp_ggml_tensor * tensor, int i) {
    return (float) get_value(tensor, flat_ptr(tensor, i, __func__));
}

void wsp_ggml_set_f32_1d(const struct wsp_ggml_tensor * tensor, int i, float value) {
    set_value(tensor, flat_ptr(tensor, i, __func__), value);
}

float wsp_ggml_get_f32_nd(const struct wsp_ggml_tensor * tensor, int i0, int i1, int i2, int i3) {
    check_host(tensor, __func__);
    return (float) get_value(tensor, element_ptr(tensor, i0, i1, i2, i3));
}

void wsp_ggml_set_f32_nd(const struct wsp_ggml_tensor * tensor, int i0, int i1, int i2, int i3, float value) {
    check_host(tensor, __func__);
    set_value(tensor, element_ptr(tensor, i0, i1, i2, i3), value);
}

} // extern "C"
