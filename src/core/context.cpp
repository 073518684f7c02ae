// The context arena: a block of memory holding object headers, tensor structs, graphs and
// (unless no_alloc) tensor data, in allocation order. Running out of room is a programmer
// error (mem_size too small) and aborts with the sizes involved.

#include "impl.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace {

wsp_ggml_object * new_object(wsp_ggml_context * ctx, wsp_ggml_object_type type, size_t size) {
    const wsp_ggml_object * last    = ctx->objects_end;
    const size_t            cur_end = last ? last->offs + last->size : 0;
    const size_t            needed  = WSP_GGML_PAD(size, (size_t) WSP_GGML_MEM_ALIGN);
    if (cur_end + WSP_GGML_OBJECT_SIZE + needed > ctx->mem_size) {
        WSP_GGML_ABORT("context memory is full: %s of %zu bytes needs %zu bytes with its header, but only %zu of "
                       "the context's %zu bytes are free (create the context with a larger mem_size)",
                       type == WSP_GGML_OBJECT_TYPE_TENSOR  ? "tensor"
                       : type == WSP_GGML_OBJECT_TYPE_GRAPH ? "graph"
                                                            : "buffer",
                       size, WSP_GGML_OBJECT_SIZE + needed, ctx->mem_size - cur_end, ctx->mem_size);
    }
    auto * obj = reinterpret_cast<wsp_ggml_object *>(static_cast<char *>(ctx->mem_buffer) + cur_end);
    obj->offs  = cur_end + WSP_GGML_OBJECT_SIZE;
    obj->size  = needed;
    obj->next  = nullptr;
    obj->type  = type;
    if (last) {
        ctx->objects_end->next = obj;
    } else {
        ctx->objects_begin = obj;
    }
    ctx->objects_end = obj;
    ctx->n_objects++;
    return obj;
}

} // namespace

namespace wsp {

void * context_alloc(wsp_ggml_context * ctx, wsp_ggml_object_type type, size_t size) {
    wsp_ggml_object * obj = new_object(ctx, type, size);
    return static_cast<char *>(ctx->mem_buffer) + obj->offs;
}

wsp_ggml_tensor * new_tensor_impl(wsp_ggml_context * ctx, wsp_ggml_type type, int n_dims, const int64_t * ne,
                                  wsp_ggml_tensor * view_src, size_t view_offs) {
    if (type < 0 || type >= WSP_GGML_TYPE_COUNT || wsp_ggml_blck_size(type) == 0) {
        WSP_GGML_ABORT("wsp_ggml_new_tensor: invalid tensor type id %d", (int) type);
    }
    if (n_dims < 1 || n_dims > WSP_GGML_MAX_DIMS) {
        WSP_GGML_ABORT("wsp_ggml_new_tensor: n_dims must be 1 to %d, got %d", WSP_GGML_MAX_DIMS, n_dims);
    }
    int64_t shape[WSP_GGML_MAX_DIMS] = { 1, 1, 1, 1 };
    for (int i = 0; i < n_dims; ++i) {
        if (ne[i] < 0) {
            WSP_GGML_ABORT("wsp_ggml_new_tensor: dimension %d is negative (%lld)", i, (long long) ne[i]);
        }
        shape[i] = ne[i];
    }
    if (view_src != nullptr && view_src->view_src != nullptr) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }

    size_t data_size = wsp_ggml_row_size(type, shape[0]);
    for (int i = 1; i < WSP_GGML_MAX_DIMS; ++i) {
        data_size *= (size_t) shape[i];
    }
    if (view_src != nullptr && view_offs + data_size > wsp_ggml_nbytes(view_src)) {
        WSP_GGML_ABORT("view of %zu bytes at offset %zu is out of the bounds of %s (%zu bytes)", data_size, view_offs,
                       describe(view_src).c_str(), wsp_ggml_nbytes(view_src));
    }

    void * data = nullptr;
    if (view_src != nullptr && view_src->data != nullptr) {
        data = static_cast<char *>(view_src->data) + view_offs;
    }
    const size_t own_data = (view_src == nullptr && !ctx->no_alloc) ? data_size : 0;

    auto * t = static_cast<wsp_ggml_tensor *>(
        context_alloc(ctx, WSP_GGML_OBJECT_TYPE_TENSOR, WSP_GGML_TENSOR_SIZE + own_data));
    std::memset(t, 0, WSP_GGML_TENSOR_SIZE);
    t->type      = type;
    t->op        = WSP_GGML_OP_NONE;
    t->view_src  = view_src;
    t->view_offs = view_offs;
    t->data      = own_data > 0 ? static_cast<void *>(t + 1) : data;
    for (int i = 0; i < WSP_GGML_MAX_DIMS; ++i) {
        t->ne[i] = shape[i];
    }
    t->nb[0] = wsp_ggml_type_size(type);
    t->nb[1] = t->nb[0] * (size_t) (t->ne[0] / wsp_ggml_blck_size(type));
    for (int i = 2; i < WSP_GGML_MAX_DIMS; ++i) {
        t->nb[i] = t->nb[i - 1] * (size_t) t->ne[i - 1];
    }
    return t;
}

} // namespace wsp

extern "C" {

struct wsp_ggml_context * wsp_ggml_init(struct wsp_ggml_init_params params) {
    auto * ctx = new (std::nothrow) wsp_ggml_context();
    if (ctx == nullptr) {
        WSP_LOG_ERROR("wsp_ggml_init: out of memory allocating a context\n");
        return nullptr;
    }
    size_t mem_size = params.mem_size == 0 ? WSP_GGML_MEM_ALIGN : params.mem_size;
    mem_size        = WSP_GGML_PAD(mem_size, (size_t) WSP_GGML_MEM_ALIGN);
    if (params.mem_buffer == nullptr) {
        void * mem = std::aligned_alloc(64, WSP_GGML_PAD(mem_size, (size_t) 64));
        if (mem == nullptr) {
            WSP_LOG_ERROR("wsp_ggml_init: failed to allocate %zu bytes for the context arena\n", mem_size);
            delete ctx;
            return nullptr;
        }
        ctx->mem_buffer       = mem;
        ctx->mem_buffer_owned = true;
    } else {
        if (((uintptr_t) params.mem_buffer) % WSP_GGML_MEM_ALIGN != 0) {
            WSP_GGML_ABORT("wsp_ggml_init: mem_buffer %p is not aligned to %d bytes", params.mem_buffer,
                           WSP_GGML_MEM_ALIGN);
        }
        ctx->mem_buffer       = params.mem_buffer;
        ctx->mem_buffer_owned = false;
        mem_size = params.mem_size / WSP_GGML_MEM_ALIGN * WSP_GGML_MEM_ALIGN; // never beyond the caller's buffer
    }
    ctx->mem_size      = mem_size;
    ctx->no_alloc      = params.no_alloc;
    ctx->n_objects     = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end   = nullptr;
    return ctx;
}

void wsp_ggml_reset(struct wsp_ggml_context * ctx) {
    if (ctx == nullptr) {
        return;
    }
    ctx->n_objects     = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end   = nullptr;
}

void wsp_ggml_free(struct wsp_ggml_context * ctx) {
    if (ctx == nullptr) {
        return;
    }
    if (ctx->mem_buffer_owned) {
        std::free(ctx->mem_buffer);
    }
    delete ctx;
}

size_t wsp_ggml_used_mem(const struct wsp_ggml_context * ctx) {
    return ctx->objects_end ? ctx->objects_end->offs + ctx->objects_end->size : 0;
}

bool wsp_ggml_get_no_alloc(struct wsp_ggml_context * ctx) {
    return ctx->no_alloc;
}

void wsp_ggml_set_no_alloc(struct wsp_ggml_context * ctx, bool no_alloc) {
    ctx->no_alloc = no_alloc;
}

void * wsp_ggml_get_mem_buffer(const struct wsp_ggml_context * ctx) {
    return ctx->mem_buffer;
}

size_t wsp_ggml_get_mem_size(const struct wsp_ggml_context * ctx) {
    return ctx->mem_size;
}

size_t wsp_ggml_get_max_tensor_size(const struct wsp_ggml_context * ctx) {
    size_t max_size = 0;
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        max_size = std::max(max_size, wsp_ggml_nbytes(t));
    }
    return max_size;
}

size_t wsp_ggml_tensor_overhead(void) {
    return WSP_GGML_OBJECT_SIZE + WSP_GGML_TENSOR_SIZE;
}

void * wsp_ggml_new_buffer(struct wsp_ggml_context * ctx, size_t nbytes) {
    if (ctx->no_alloc) {
        WSP_LOG_ERROR("wsp_ggml_new_buffer: the context was created with no_alloc; it holds no data\n");
        return nullptr;
    }
    return wsp::context_alloc(ctx, WSP_GGML_OBJECT_TYPE_WORK_BUFFER, nbytes);
}

struct wsp_ggml_tensor * wsp_ggml_new_tensor(struct wsp_ggml_context * ctx, enum wsp_ggml_type type, int n_dims,
                                             const int64_t * ne) {
    return wsp::new_tensor_impl(ctx, type, n_dims, ne, nullptr, 0);
}

struct wsp_ggml_tensor * wsp_ggml_new_tensor_1d(struct wsp_ggml_context * ctx, enum wsp_ggml_type type, int64_t ne0) {
    return wsp_ggml_new_tensor(ctx, type, 1, &ne0);
}

struct wsp_ggml_tensor * wsp_ggml_new_tensor_2d(struct wsp_ggml_context * ctx, enum wsp_ggml_type type, int64_t ne0,
                                                int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    return wsp_ggml_new_tensor(ctx, type, 2, ne);
}

struct wsp_ggml_tensor * wsp_ggml_new_tensor_3d(struct wsp_ggml_context * ctx, enum wsp_ggml_type type, int64_t ne0,
                                                int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return wsp_ggml_new_tensor(ctx, type, 3, ne);
}

struct wsp_ggml_tensor * wsp_ggml_new_tensor_4d(struct wsp_ggml_context * ctx, enum wsp_ggml_type type, int64_t ne0,
                                                int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return wsp_ggml_new_tensor(ctx, type, 4, ne);
}

struct wsp_ggml_tensor * wsp_ggml_dup_tensor(struct wsp_ggml_context * ctx, const struct wsp_ggml_tensor * src) {
    return wsp_ggml_new_tensor(ctx, src->type, WSP_GGML_MAX_DIMS, src->ne);
}

struct wsp_ggml_tensor * wsp_ggml_get_first_tensor(const struct wsp_ggml_context * ctx) {
    for (wsp_ggml_object * obj = ctx->objects_begin; obj != nullptr; obj = obj->next) {
        if (obj->type == WSP_GGML_OBJECT_TYPE_TENSOR) {
            return reinterpret_cast<wsp_ggml_tensor *>(static_cast<char *>(ctx->mem_buffer) + obj->offs);
        }
    }
    return nullptr;
}

struct wsp_ggml_tensor * wsp_ggml_get_next_tensor(const struct wsp_ggml_context * ctx,
                                                  struct wsp_ggml_tensor *        tensor) {
    auto * obj = reinterpret_cast<wsp_ggml_object *>(reinterpret_cast<char *>(tensor) - WSP_GGML_OBJECT_SIZE);
    for (obj = obj->next; obj != nullptr; obj = obj->next) {
        if (obj->type == WSP_GGML_OBJECT_TYPE_TENSOR) {
            return reinterpret_cast<wsp_ggml_tensor *>(static_cast<char *>(ctx->mem_buffer) + obj->offs);
        }
    }
    return nullptr;
}

struct wsp_ggml_tensor * wsp_ggml_get_tensor(struct wsp_ggml_context * ctx, const char * name) {
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        if (std::strcmp(t->name, name) == 0) {
            return t;
        }
    }
    return nullptr;
}

void wsp_ggml_print_object(const struct wsp_ggml_object * obj) {
    WSP_LOG_INFO(" - wsp_ggml_object: type = %d, offset = %zu, size = %zu, next = %p\n", (int) obj->type, obj->offs,
                 obj->size, (const void *) obj->next);
}

void wsp_ggml_print_objects(const struct wsp_ggml_context * ctx) {
    WSP_LOG_INFO("%s: objects in context %p:\n", __func__, (const void *) ctx);
    for (const wsp_ggml_object * obj = ctx->objects_begin; obj != nullptr; obj = obj->next) {
        wsp_ggml_print_object(obj);
    }
    WSP_LOG_INFO("%s: --- end ---\n", __func__);
}

} // extern "C"
