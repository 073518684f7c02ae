#pragma once

// Internal core definitions shared by the core, allocator, backends and kernels: the context
// arena, the graph, the pointer hash set, op-parameter access and check helpers.
// Invariant: every object in a context arena is an object header followed by its payload,
// and the header list is in allocation order.

#include "ggml.h"
#include "log.h"
#include "tensor_roles.h"

#include <cstring>
#include <string>

// object header in a context arena; payload follows at offs
struct wsp_ggml_object {
    size_t                    offs;
    size_t                    size;
    struct wsp_ggml_object *  next;
    enum wsp_ggml_object_type type;
    char                      padding[4];
};

static constexpr size_t WSP_GGML_OBJECT_SIZE = sizeof(struct wsp_ggml_object);

struct wsp_ggml_context {
    size_t mem_size;
    void * mem_buffer;
    bool   mem_buffer_owned;
    bool   no_alloc;

    int n_objects;

    struct wsp_ggml_object * objects_begin;
    struct wsp_ggml_object * objects_end;
};

namespace wsp {

// Open-addressing set of tensor pointers (linear probing, power-of-two capacity).
struct HashSet {
    size_t                    size; // capacity, a power of two
    uint32_t *                used; // bitset of occupied slots
    struct wsp_ggml_tensor ** keys;

    static constexpr size_t FULL = (size_t) -1;

    WSP_INTERNAL_API static size_t capacity_for(size_t min_elems); // >= 2 * min_elems, power of two
    static size_t                  bitset_words(size_t size) { return (size + 31) / 32; }

    bool is_used(size_t i) const { return (used[i >> 5] >> (i & 31)) & 1u; }
    void set_used(size_t i) { used[i >> 5] |= 1u << (i & 31); }

    size_t hash(const wsp_ggml_tensor * p) const {
        const uint64_t h = (uint64_t) (uintptr_t) p * 0x9E3779B97F4A7C15ull;
        return (size_t) (h >> 17) & (size - 1);
    }

    // slot holding key, or the free slot where it would go; FULL if neither exists
    size_t find(const wsp_ggml_tensor * key) const {
        size_t i = hash(key);
        for (size_t n = 0; n < size; ++n) {
            if (!is_used(i) || keys[i] == key) {
                return i;
            }
            i = (i + 1) & (size - 1);
        }
        return FULL;
    }

    bool contains(const wsp_ggml_tensor * key) const {
        const size_t i = find(key);
        return i != FULL && is_used(i);
    }

    // returns the slot; `inserted` tells whether the key is new
    WSP_INTERNAL_API size_t insert(wsp_ggml_tensor * key, bool & inserted);

    void reset() { std::memset(used, 0, bitset_words(size) * sizeof(uint32_t)); }
};

} // namespace wsp

struct wsp_ggml_cgraph {
    int size;    // capacity of nodes and leafs
    int n_nodes; // tensors computed by an op
    int n_leafs; // inputs, weights and constants

    struct wsp_ggml_tensor ** nodes;
    struct wsp_ggml_tensor ** grads;     // NULL unless created with grads (no backward pass here)
    struct wsp_ggml_tensor ** grad_accs; // NULL unless created with grads
    struct wsp_ggml_tensor ** leafs;

    wsp::HashSet visited_hash_set;
};

namespace wsp {

// a view of nodes [i0, i1) of a graph, sharing its arrays (used by schedulers and tests)
WSP_INTERNAL_API wsp_ggml_cgraph graph_view(wsp_ggml_cgraph * g, int i0, int i1);

// op parameters, stored in tensor->op_params
inline void set_op_params(wsp_ggml_tensor * t, const void * params, size_t size) {
    WSP_GGML_ASSERT(size <= WSP_GGML_MAX_OP_PARAMS);
    std::memcpy(t->op_params, params, size);
}

inline int32_t get_op_param_i32(const wsp_ggml_tensor * t, int i) {
    return t->op_params[i];
}

inline void set_op_param_i32(wsp_ggml_tensor * t, int i, int32_t v) {
    t->op_params[i] = v;
}

inline float get_op_param_f32(const wsp_ggml_tensor * t, int i) {
    float v;
    std::memcpy(&v, &t->op_params[i], sizeof(v));
    return v;
}

inline void set_op_param_f32(wsp_ggml_tensor * t, int i, float v) {
    std::memcpy(&t->op_params[i], &v, sizeof(v));
}

// op_params of WSP_GGML_OP_MAP_CUSTOM1
struct CustomOp1Params {
    wsp_ggml_custom1_op_t fun;
    int                   n_tasks;
    void *                userdata;
};

// payload of `size` bytes in the context arena (aborts with a message when ctx is full)
WSP_INTERNAL_API void * context_alloc(wsp_ggml_context * ctx, wsp_ggml_object_type type, size_t size);

// host memory for a backend buffer of `size` bytes, 64-byte aligned, on huge pages where large
// (Note [huge pages], backend/cpu_buffer.cpp); std::free releases it; NULL when out of memory
WSP_INTERNAL_API void * host_buffer_alloc(size_t size);

// new tensor (or view of view_src at view_offs) in ctx; aborts with a message when ctx is full
WSP_INTERNAL_API wsp_ggml_tensor * new_tensor_impl(wsp_ggml_context * ctx, wsp_ggml_type type, int n_dims,
                                                   const int64_t * ne, wsp_ggml_tensor * view_src, size_t view_offs);

// Shape and type checks of op builders: on failure abort with the op, the tensors and the rule.
[[noreturn]] WSP_INTERNAL_API void op_check_failed(const char * op, const char * rule, const wsp_ggml_tensor * a,
                                                   const wsp_ggml_tensor * b, const wsp_ggml_tensor * c);

} // namespace wsp

#define WSP_OP_CHECK(cond, op, a, b, c)                         \
    do {                                                        \
        if (!(cond)) {                                          \
            ::wsp::op_check_failed((op), #cond, (a), (b), (c)); \
        }                                                       \
    } while (0)
