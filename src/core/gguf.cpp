// GGUF context: creation, the key-value getters and setters, tensor infos and their layout.
// Reading lives in gguf_read.cpp, serialising in gguf_write.cpp. Getters check the key id and
// the stored type and answer 0 / NULL with a logged error on a mismatch instead of aborting.
// Tensor offsets of a built context are laid out in index order, each padded to the alignment
// (Note [gguf layout]); they are recomputed whenever a size or the alignment changes.

#include "gguf_impl.h"

#include "impl.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <new>
#include <utility>

namespace wsp::gguf {

size_t type_size(int type) {
    switch (type) {
        case WSP_GGUF_TYPE_UINT8:
        case WSP_GGUF_TYPE_INT8:
        case WSP_GGUF_TYPE_BOOL: return 1;
        case WSP_GGUF_TYPE_UINT16:
        case WSP_GGUF_TYPE_INT16: return 2;
        case WSP_GGUF_TYPE_UINT32:
        case WSP_GGUF_TYPE_INT32:
        case WSP_GGUF_TYPE_FLOAT32: return 4;
        case WSP_GGUF_TYPE_UINT64:
        case WSP_GGUF_TYPE_INT64:
        case WSP_GGUF_TYPE_FLOAT64: return 8;
        default: return 0;
    }
}

bool valid_tensor_type(int type) {
    return type >= 0 && type < WSP_GGML_TYPE_COUNT && wsp_ggml_blck_size((wsp_ggml_type) type) > 0;
}

void set_strides(wsp_ggml_tensor & t) {
    t.nb[0] = wsp_ggml_type_size(t.type);
    t.nb[1] = t.nb[0] * (size_t) (t.ne[0] / wsp_ggml_blck_size(t.type));
    for (int i = 2; i < WSP_GGML_MAX_DIMS; ++i) {
        t.nb[i] = t.nb[i - 1] * (size_t) t.ne[i - 1];
    }
}

} // namespace wsp::gguf

namespace {

using wsp::gguf::Kv;
using wsp::gguf::TensorInfo;

// Note [gguf layout]: tensors follow each other in index order, each starting at a multiple of
// the alignment; the first at offset 0 of the data section.
void relayout(wsp_gguf_context & ctx) {
    uint64_t offset = 0;
    for (TensorInfo & ti : ctx.tensors) {
        ti.offset = offset;
        offset += WSP_GGML_PAD(wsp_ggml_nbytes(&ti.t), ctx.alignment);
    }
}

const Kv * kv_at(const wsp_gguf_context * ctx, int64_t key_id, const char * fn) {
    if (ctx == nullptr) {
        WSP_LOG_ERROR("%s: the context is NULL\n", fn);
        return nullptr;
    }
    if (key_id < 0 || key_id >= (int64_t) ctx->kv.size()) {
        WSP_LOG_ERROR("%s: key id %" PRId64 " is out of range (the context has %zu keys)\n", fn, key_id,
                      ctx->kv.size());
        return nullptr;
    }
    return &ctx->kv[(size_t) key_id];
}

const TensorInfo * tensor_at(const wsp_gguf_context * ctx, int64_t id, const char * fn) {
    if (ctx == nullptr) {
        WSP_LOG_ERROR("%s: the context is NULL\n", fn);
        return nullptr;
    }
    if (id < 0 || id >= (int64_t) ctx->tensors.size()) {
        WSP_LOG_ERROR("%s: tensor id %" PRId64 " is out of range (the context has %zu tensors)\n", fn, id,
                      ctx->tensors.size());
        return nullptr;
    }
    return &ctx->tensors[(size_t) id];
}

// the pair of a scalar of the given type, or NULL with a logged error
const Kv * scalar_at(const wsp_gguf_context * ctx, int64_t key_id, wsp_gguf_type type, const char * fn) {
    const Kv * kv = kv_at(ctx, key_id, fn);
    if (kv == nullptr) {
        return nullptr;
    }
    if (kv->is_array || kv->type != type) {
        WSP_LOG_ERROR("%s: key \"%s\" holds %s%s, not %s\n", fn, kv->key.c_str(), kv->is_array ? "an array of " : "",
                      wsp_gguf_type_name(kv->type), wsp_gguf_type_name(type));
        return nullptr;
    }
    return kv;
}

template <typename T>
T get_scalar(const wsp_gguf_context * ctx, int64_t key_id, wsp_gguf_type type, const char * fn) {
    const Kv * kv = scalar_at(ctx, key_id, type, fn);
    T          v{};
    if (kv != nullptr) {
        std::memcpy(&v, kv->data.data(), sizeof(T));
    }
    return v;
}

// the alignment a "general.alignment" pair asks for, or 0 when it is not a valid one
size_t alignment_of(const Kv & kv) {
    if (kv.is_array || kv.type != WSP_GGUF_TYPE_UINT32) {
        return 0;
    }
    uint32_t a = 0;
    std::memcpy(&a, kv.data.data(), sizeof a);
    return (a != 0 && (a & (a - 1)) == 0) ? a : 0;
}

void set_pair(wsp_gguf_context * ctx, Kv && kv, const char * fn) {
    if (ctx == nullptr) {
        WSP_LOG_ERROR("%s: the context is NULL\n", fn);
        return;
    }
    const bool is_alignment = kv.key == WSP_GGUF_KEY_GENERAL_ALIGNMENT;
    if (is_alignment && alignment_of(kv) == 0) {
        WSP_LOG_ERROR("%s: \"%s\" must be a uint32 power of two; the key is left unchanged\n", fn,
                      WSP_GGUF_KEY_GENERAL_ALIGNMENT);
        return;
    }
    try {
        wsp_gguf_remove_key(ctx, kv.key.c_str());
        ctx->kv.push_back(std::move(kv));
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: out of memory\n", fn);
        return;
    }
    if (is_alignment) {
        ctx->alignment = alignment_of(ctx->kv.back());
        relayout(*ctx);
    }
}

template <typename T>
void set_scalar(wsp_gguf_context * ctx, const char * key, wsp_gguf_type type, T val, const char * fn) {
    if (key == nullptr) {
        WSP_LOG_ERROR("%s: the key is NULL\n", fn);
        return;
    }
    Kv kv;
    try {
        kv.key  = key;
        kv.type = type;
        kv.data.resize(sizeof(T));
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: out of memory\n", fn);
        return;
    }
    std::memcpy(kv.data.data(), &val, sizeof(T));
    set_pair(ctx, std::move(kv), fn);
}

TensorInfo * find_tensor_info(wsp_gguf_context * ctx, const char * name, const char * fn) {
    if (ctx == nullptr || name == nullptr) {
        WSP_LOG_ERROR("%s: the context or the name is NULL\n", fn);
        return nullptr;
    }
    const int64_t id = wsp_gguf_find_tensor(ctx, name);
    if (id < 0) {
        WSP_LOG_ERROR("%s: no tensor named \"%s\"\n", fn, name);
        return nullptr;
    }
    return &ctx->tensors[(size_t) id];
}

} // namespace

extern "C" {

struct wsp_gguf_context * wsp_gguf_init_empty(void) {
    auto * ctx = new (std::nothrow) wsp_gguf_context;
    if (ctx == nullptr) {
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
    }
    return ctx;
}

void wsp_gguf_free(struct wsp_gguf_context * ctx) {
    delete ctx;
}

const char * wsp_gguf_type_name(enum wsp_gguf_type type) {
    static const char * const names[WSP_GGUF_TYPE_COUNT] = { "u8",   "i8",  "u16", "i16", "u32", "i32", "f32",
                                                             "bool", "str", "arr", "u64", "i64", "f64" };
    return (type >= 0 && type < WSP_GGUF_TYPE_COUNT) ? names[type] : nullptr;
}

uint32_t wsp_gguf_get_version(const struct wsp_gguf_context * ctx) {
    return ctx ? ctx->version : 0;
}

size_t wsp_gguf_get_alignment(const struct wsp_gguf_context * ctx) {
    return ctx ? ctx->alignment : 0;
}

size_t wsp_gguf_get_data_offset(const struct wsp_gguf_context * ctx) {
    return ctx ? ctx->data_offset : 0;
}

int64_t wsp_gguf_get_n_kv(const struct wsp_gguf_context * ctx) {
    return ctx ? (int64_t) ctx->kv.size() : 0;
}

int64_t wsp_gguf_find_key(const struct wsp_gguf_context * ctx, const char * key) {
    if (ctx == nullptr || key == nullptr) {
        return -1;
    }
    for (size_t i = 0; i < ctx->kv.size(); ++i) {
        if (ctx->kv[i].key == key) {
            return (int64_t) i;
        }
    }
    return -1;
}

const char * wsp_gguf_get_key(const struct wsp_gguf_context * ctx, int64_t key_id) {
    const Kv * kv = kv_at(ctx, key_id, __func__);
    return kv ? kv->key.c_str() : nullptr;
}

enum wsp_gguf_type wsp_gguf_get_kv_type(const struct wsp_gguf_context * ctx, int64_t key_id) {
    const Kv * kv = kv_at(ctx, key_id, __func__);
    if (kv == nullptr) {
        return WSP_GGUF_TYPE_COUNT;
    }
    return kv->is_array ? WSP_GGUF_TYPE_ARRAY : kv->type;
}

enum wsp_gguf_type wsp_gguf_get_arr_type(const struct wsp_gguf_context * ctx, int64_t key_id) {
    const Kv * kv = kv_at(ctx, key_id, __func__);
    if (kv == nullptr) {
        return WSP_GGUF_TYPE_COUNT;
    }
    if (!kv->is_array) {
        WSP_LOG_ERROR("%s: key \"%s\" holds a %s, not an array\n", __func__, kv->key.c_str(),
                      wsp_gguf_type_name(kv->type));
        return WSP_GGUF_TYPE_COUNT;
    }
    return kv->type;
}

uint8_t wsp_gguf_get_val_u8(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint8_t>(ctx, key_id, WSP_GGUF_TYPE_UINT8, __func__);
}

int8_t wsp_gguf_get_val_i8(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<int8_t>(ctx, key_id, WSP_GGUF_TYPE_INT8, __func__);
}

uint16_t wsp_gguf_get_val_u16(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint16_t>(ctx, key_id, WSP_GGUF_TYPE_UINT16, __func__);
}

int16_t wsp_gguf_get_val_i16(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<int16_t>(ctx, key_id, WSP_GGUF_TYPE_INT16, __func__);
}

uint32_t wsp_gguf_get_val_u32(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint32_t>(ctx, key_id, WSP_GGUF_TYPE_UINT32, __func__);
}

int32_t wsp_gguf_get_val_i32(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<int32_t>(ctx, key_id, WSP_GGUF_TYPE_INT32, __func__);
}

float wsp_gguf_get_val_f32(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<float>(ctx, key_id, WSP_GGUF_TYPE_FLOAT32, __func__);
}

uint64_t wsp_gguf_get_val_u64(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint64_t>(ctx, key_id, WSP_GGUF_TYPE_UINT64, __func__);
}

int64_t wsp_gguf_get_val_i64(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<int64_t>(ctx, key_id, WSP_GGUF_TYPE_INT64, __func__);
}

double wsp_gguf_get_val_f64(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<double>(ctx, key_id, WSP_GGUF_TYPE_FLOAT64, __func__);
}

bool wsp_gguf_get_val_bool(const struct wsp_gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint8_t>(ctx, key_id, WSP_GGUF_TYPE_BOOL, __func__) != 0;
}

const char * wsp_gguf_get_val_str(const struct wsp_gguf_context * ctx, int64_t key_id) {
    const Kv * kv = scalar_at(ctx, key_id, WSP_GGUF_TYPE_STRING, __func__);
    return kv ? kv->strs[0].c_str() : nullptr;
}

const void * wsp_gguf_get_val_data(const struct wsp_gguf_context * ctx, int64_t key_id) {
    const Kv * kv = kv_at(ctx, key_id, __func__);
    if (kv == nullptr) {
        return nullptr;
    }
    if (kv->is_array || kv->type == WSP_GGUF_TYPE_STRING) {
        WSP_LOG_ERROR("%s: key \"%s\" holds %s, not a numeric or bool scalar\n", __func__, kv->key.c_str(),
                      kv->is_array ? "an array" : "a string");
        return nullptr;
    }
    return kv->data.data();
}

size_t wsp_gguf_get_arr_n(const struct wsp_gguf_context * ctx, int64_t key_id) {
    const Kv * kv = kv_at(ctx, key_id, __func__);
    return kv ? kv->n() : 0; // a scalar counts as one element
}

const void * wsp_gguf_get_arr_data(const struct wsp_gguf_context * ctx, int64_t key_id) {
    const Kv * kv = kv_at(ctx, key_id, __func__);
    if (kv == nullptr) {
        return nullptr;
    }
    if (kv->type == WSP_GGUF_TYPE_STRING) {
        WSP_LOG_ERROR("%s: key \"%s\" holds strings: read them with wsp_gguf_get_arr_str\n", __func__, kv->key.c_str());
        return nullptr;
    }
    return kv->data.data();
}

const char * wsp_gguf_get_arr_str(const struct wsp_gguf_context * ctx, int64_t key_id, size_t i) {
    const Kv * kv = kv_at(ctx, key_id, __func__);
    if (kv == nullptr) {
        return nullptr;
    }
    if (kv->type != WSP_GGUF_TYPE_STRING) {
        WSP_LOG_ERROR("%s: key \"%s\" holds %s, not strings\n", __func__, kv->key.c_str(),
                      wsp_gguf_type_name(kv->type));
        return nullptr;
    }
    if (i >= kv->strs.size()) {
        WSP_LOG_ERROR("%s: index %zu is out of range for key \"%s\" (%zu strings)\n", __func__, i, kv->key.c_str(),
                      kv->strs.size());
        return nullptr;
    }
    return kv->strs[i].c_str();
}

int64_t wsp_gguf_get_n_tensors(const struct wsp_gguf_context * ctx) {
    return ctx ? (int64_t) ctx->tensors.size() : 0;
}

int64_t wsp_gguf_find_tensor(const struct wsp_gguf_context * ctx, const char * name) {
    if (ctx == nullptr || name == nullptr) {
        return -1;
    }
    for (size_t i = 0; i < ctx->tensors.size(); ++i) {
        if (std::strcmp(ctx->tensors[i].t.name, name) == 0) {
            return (int64_t) i;
        }
    }
    return -1;
}

size_t wsp_gguf_get_tensor_offset(const struct wsp_gguf_context * ctx, int64_t tensor_id) {
    const TensorInfo * ti = tensor_at(ctx, tensor_id, __func__);
    return ti ? (size_t) ti->offset : 0;
}

const char * wsp_gguf_get_tensor_name(const struct wsp_gguf_context * ctx, int64_t tensor_id) {
    const TensorInfo * ti = tensor_at(ctx, tensor_id, __func__);
    return ti ? ti->t.name : nullptr;
}

enum wsp_ggml_type wsp_gguf_get_tensor_type(const struct wsp_gguf_context * ctx, int64_t tensor_id) {
    const TensorInfo * ti = tensor_at(ctx, tensor_id, __func__);
    return ti ? ti->t.type : WSP_GGML_TYPE_COUNT;
}

size_t wsp_gguf_get_tensor_size(const struct wsp_gguf_context * ctx, int64_t tensor_id) {
    const TensorInfo * ti = tensor_at(ctx, tensor_id, __func__);
    return ti ? wsp_ggml_nbytes(&ti->t) : 0;
}

int64_t wsp_gguf_remove_key(struct wsp_gguf_context * ctx, const char * key) {
    const int64_t id = wsp_gguf_find_key(ctx, key);
    if (id < 0) {
        return -1;
    }
    const bool was_alignment = ctx->kv[(size_t) id].key == WSP_GGUF_KEY_GENERAL_ALIGNMENT;
    ctx->kv.erase(ctx->kv.begin() + id);
    if (was_alignment) {
        ctx->alignment = WSP_GGUF_DEFAULT_ALIGNMENT;
        relayout(*ctx);
    }
    return id;
}

void wsp_gguf_set_val_u8(struct wsp_gguf_context * ctx, const char * key, uint8_t val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_UINT8, val, __func__);
}

void wsp_gguf_set_val_i8(struct wsp_gguf_context * ctx, const char * key, int8_t val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_INT8, val, __func__);
}

void wsp_gguf_set_val_u16(struct wsp_gguf_context * ctx, const char * key, uint16_t val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_UINT16, val, __func__);
}

void wsp_gguf_set_val_i16(struct wsp_gguf_context * ctx, const char * key, int16_t val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_INT16, val, __func__);
}

void wsp_gguf_set_val_u32(struct wsp_gguf_context * ctx, const char * key, uint32_t val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_UINT32, val, __func__);
}

void wsp_gguf_set_val_i32(struct wsp_gguf_context * ctx, const char * key, int32_t val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_INT32, val, __func__);
}

void wsp_gguf_set_val_f32(struct wsp_gguf_context * ctx, const char * key, float val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_FLOAT32, val, __func__);
}

void wsp_gguf_set_val_u64(struct wsp_gguf_context * ctx, const char * key, uint64_t val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_UINT64, val, __func__);
}

void wsp_gguf_set_val_i64(struct wsp_gguf_context * ctx, const char * key, int64_t val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_INT64, val, __func__);
}

void wsp_gguf_set_val_f64(struct wsp_gguf_context * ctx, const char * key, double val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_FLOAT64, val, __func__);
}

void wsp_gguf_set_val_bool(struct wsp_gguf_context * ctx, const char * key, bool val) {
    set_scalar(ctx, key, WSP_GGUF_TYPE_BOOL, (uint8_t) (val ? 1 : 0), __func__);
}

void wsp_gguf_set_val_str(struct wsp_gguf_context * ctx, const char * key, const char * val) {
    if (key == nullptr || val == nullptr) {
        WSP_LOG_ERROR("%s: the key or the value is NULL\n", __func__);
        return;
    }
    Kv kv;
    try {
        kv.key  = key;
        kv.type = WSP_GGUF_TYPE_STRING;
        kv.strs.emplace_back(val);
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
        return;
    }
    set_pair(ctx, std::move(kv), __func__);
}

void wsp_gguf_set_arr_data(struct wsp_gguf_context * ctx, const char * key, enum wsp_gguf_type type, const void * data,
                           size_t n) {
    const size_t esize = wsp::gguf::type_size(type);
    if (key == nullptr || esize == 0 || (data == nullptr && n > 0) || n > SIZE_MAX / esize) {
        WSP_LOG_ERROR("%s: needs a key, a numeric or bool element type (got %d) and %zu elements of data\n", __func__,
                      (int) type, n);
        return;
    }
    Kv kv;
    try {
        kv.key      = key;
        kv.is_array = true;
        kv.type     = type;
        kv.data.resize(n * esize);
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: out of memory for %zu elements\n", __func__, n);
        return;
    }
    if (n > 0) {
        std::memcpy(kv.data.data(), data, n * esize);
    }
    set_pair(ctx, std::move(kv), __func__);
}

void wsp_gguf_set_arr_str(struct wsp_gguf_context * ctx, const char * key, const char ** data, size_t n) {
    if (key == nullptr || (data == nullptr && n > 0)) {
        WSP_LOG_ERROR("%s: the key or the strings are NULL\n", __func__);
        return;
    }
    Kv kv;
    try {
        kv.key      = key;
        kv.is_array = true;
        kv.type     = WSP_GGUF_TYPE_STRING;
        kv.strs.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            if (data[i] == nullptr) {
                WSP_LOG_ERROR("%s: string %zu of key \"%s\" is NULL\n", __func__, i, key);
                return;
            }
            kv.strs.emplace_back(data[i]);
        }
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: out of memory for %zu strings\n", __func__, n);
        return;
    }
    set_pair(ctx, std::move(kv), __func__);
}

void wsp_gguf_set_kv(struct wsp_gguf_context * ctx, const struct wsp_gguf_context * src) {
    if (ctx == nullptr || src == nullptr) {
        WSP_LOG_ERROR("%s: a context is NULL\n", __func__);
        return;
    }
    if (ctx == src) {
        return;
    }
    for (const Kv & kv : src->kv) {
        try {
            Kv copy = kv;
            set_pair(ctx, std::move(copy), __func__);
        } catch (const std::bad_alloc &) {
            WSP_LOG_ERROR("%s: out of memory copying key \"%s\"\n", __func__, kv.key.c_str());
            return;
        }
    }
}

void wsp_gguf_add_tensor(struct wsp_gguf_context * ctx, const struct wsp_ggml_tensor * tensor) {
    if (ctx == nullptr || tensor == nullptr) {
        WSP_LOG_ERROR("%s: the context or the tensor is NULL\n", __func__);
        return;
    }
    if (!wsp::gguf::valid_tensor_type(tensor->type)) {
        WSP_LOG_ERROR("%s: tensor \"%s\" has an invalid type %d\n", __func__, tensor->name, (int) tensor->type);
        return;
    }
    if (wsp_gguf_find_tensor(ctx, tensor->name) >= 0) {
        WSP_LOG_ERROR("%s: a tensor named \"%s\" is already in the context\n", __func__, tensor->name);
        return;
    }
    if (!wsp_ggml_is_contiguous(tensor)) {
        WSP_LOG_WARN("%s: %s is not contiguous: its data would be written as if it were\n", __func__,
                     wsp::describe(tensor).c_str());
    }
    TensorInfo ti;
    ti.t                             = *tensor;
    ti.t.name[WSP_GGML_MAX_NAME - 1] = '\0';
    wsp::gguf::set_strides(ti.t);
    ti.offset = 0;
    for (const TensorInfo & other : ctx->tensors) {
        ti.offset =
            std::max<uint64_t>(ti.offset, other.offset + WSP_GGML_PAD(wsp_ggml_nbytes(&other.t), ctx->alignment));
    }
    try {
        ctx->tensors.push_back(ti);
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
    }
}

void wsp_gguf_set_tensor_type(struct wsp_gguf_context * ctx, const char * name, enum wsp_ggml_type type) {
    TensorInfo * ti = find_tensor_info(ctx, name, __func__);
    if (ti == nullptr) {
        return;
    }
    if (!wsp::gguf::valid_tensor_type(type) || ti->t.ne[0] % wsp_ggml_blck_size(type) != 0) {
        WSP_LOG_ERROR("%s: tensor \"%s\" cannot take type %d (invalid, or rows of %" PRId64
                      " elements are not whole blocks)\n",
                      __func__, name, (int) type, ti->t.ne[0]);
        return;
    }
    ti->t.type = type;
    wsp::gguf::set_strides(ti->t);
    relayout(*ctx);
}

void wsp_gguf_set_tensor_data(struct wsp_gguf_context * ctx, const char * name, const void * data) {
    TensorInfo * ti = find_tensor_info(ctx, name, __func__);
    if (ti == nullptr) {
        return;
    }
    ti->t.data   = const_cast<void *>(data);
    ti->t.buffer = nullptr; // host memory from now on
}

} // extern "C"
