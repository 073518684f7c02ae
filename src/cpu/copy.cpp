// DUP, CONT and CPY: copy src into dst (which may differ in type and shape but not in element
// count), element i of src going to element i of dst in row-major order.
//  - same type, both contiguous: memcpy in parallel chunks;
//  - same row length (ne0): row by row, converting through F32 when the types differ, which
//    also quantizes (F32/F16/BF16 -> Q4_0 ... Q8_0) and dequantizes;
//  - otherwise (float types only): element by element with flat-index mapping.

#include "ops.h"
#include "vec.h"

#include <cstring>

namespace wsp::cpu {

namespace {

bool has_to_float(wsp_ggml_type t) {
    return wsp_ggml_get_type_traits(t)->to_float != nullptr;
}

bool has_from_float(wsp_ggml_type t) {
    return wsp_ggml_get_type_traits(t)->from_float_ref != nullptr && t != WSP_GGML_TYPE_Q8_1;
}

const char * row_ptr(const wsp_ggml_tensor * t, int64_t r) {
    const int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
    return static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * ((size_t) dst->ne[0] * sizeof(float) + 64);
}

void copy_contiguous(const ComputeParams & p, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    const size_t n = wsp_ggml_nbytes(src);
    int64_t      b0, b1;
    split_range((int64_t) n, p.ith, p.nth, b0, b1);
    if (b1 > b0) {
        std::memcpy(static_cast<char *>(dst->data) + b0, static_cast<const char *>(src->data) + b0, (size_t) (b1 - b0));
    }
}

void copy_rows(const ComputeParams & p, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    const int64_t ne0 = src->ne[0];
    int64_t       r0, r1;
    split_range(wsp_ggml_nrows(src), p.ith, p.nth, r0, r1);
    float * tmp =
        reinterpret_cast<float *>(static_cast<char *>(p.wdata) + (size_t) p.ith * ((size_t) ne0 * sizeof(float) + 64));
    const bool   same_type  = src->type == dst->type;
    const size_t elem       = wsp_ggml_type_size(src->type);
    const bool   src_packed = wsp_ggml_is_contiguous_rows(src);
    const bool   dst_packed = wsp_ggml_is_contiguous_rows(dst);
    for (int64_t r = r0; r < r1; ++r) {
        const char * s = row_ptr(src, r);
        char *       d = const_cast<char *>(row_ptr(dst, r));
        if (same_type && src_packed && dst_packed) {
            std::memcpy(d, s, wsp_ggml_row_size(src->type, ne0));
            continue;
        }
        if (same_type && !wsp_ggml_is_quantized(src->type)) {
            for (int64_t i = 0; i < ne0; ++i) {
                std::memcpy(d + i * dst->nb[0], s + i * src->nb[0], elem);
            }
            continue;
        }
        // through f32
        if (wsp_ggml_is_quantized(src->type)) {
            row_to_f32(src->type, s, tmp, ne0);
        } else {
            strided_row_to_f32(src->type, s, src->nb[0], tmp, ne0);
        }
        if (dst_packed) {
            row_from_f32(dst->type, tmp, d, ne0);
        } else {
            for (int64_t i = 0; i < ne0; ++i) {
                store_f(dst->type, d + i * dst->nb[0], tmp[i]);
            }
        }
    }
}

// an element index walked in row-major order: unravelled once, then stepped (the whisper
// encoder's cross-attention copies run 770k elements a layer through here)
class ElementWalk {
public:
    ElementWalk(const wsp_ggml_tensor * t, int64_t e) : t_(t) {
        wsp_ggml_unravel_index(t, e, &i_[0], &i_[1], &i_[2], &i_[3]);
    }
    char * ptr() const {
        return static_cast<char *>(t_->data) + i_[0] * t_->nb[0] + i_[1] * t_->nb[1] + i_[2] * t_->nb[2] +
               i_[3] * t_->nb[3];
    }
    void step() {
        for (int d = 0; d < 4; ++d) {
            if (++i_[d] < t_->ne[d] || d == 3) {
                return;
            }
            i_[d] = 0;
        }
    }

private:
    const wsp_ggml_tensor * t_;
    int64_t                 i_[4];
};

void copy_elements(const ComputeParams & p, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    const int64_t n = wsp_ggml_nelements(src);
    int64_t       e0, e1;
    split_range(n, p.ith, p.nth, e0, e1);
    if (e1 <= e0) {
        return;
    }
    const bool   same_type = src->type == dst->type;
    const size_t elem      = wsp_ggml_type_size(src->type);
    ElementWalk  s(src, e0), d(dst, e0);
    for (int64_t e = e0; e < e1; ++e, s.step(), d.step()) {
        if (same_type) {
            std::memcpy(d.ptr(), s.ptr(), elem);
        } else {
            store_f(dst->type, d.ptr(), load_f(src->type, s.ptr()));
        }
    }
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * src = dst->src[0];
    if (src->type == dst->type && wsp_ggml_is_contiguous(src) && wsp_ggml_is_contiguous(dst)) {
        copy_contiguous(p, src, dst);
    } else if (src->ne[0] == dst->ne[0]) {
        copy_rows(p, src, dst);
    } else {
        copy_elements(p, src, dst);
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * src = dst->src[0];
    if (wsp_ggml_nelements(src) != wsp_ggml_nelements(dst)) {
        return false;
    }
    if (src->type == dst->type) {
        if (wsp_ggml_is_contiguous(src) && wsp_ggml_is_contiguous(dst)) {
            return true; // bytes are bytes, whatever the type
        }
        return !wsp_ggml_is_quantized(src->type) ||
               (src->ne[0] == dst->ne[0] && wsp_ggml_is_contiguous_rows(src) && wsp_ggml_is_contiguous_rows(dst));
    }
    const bool rows_match = src->ne[0] == dst->ne[0];
    if (wsp_ggml_is_quantized(dst->type)) {
        return rows_match && has_from_float(dst->type) && wsp_ggml_is_contiguous_rows(dst) &&
               (is_float_type(src->type) || (wsp_ggml_is_quantized(src->type) && has_to_float(src->type)));
    }
    if (wsp_ggml_is_quantized(src->type)) {
        return rows_match && has_to_float(src->type) && wsp_ggml_is_contiguous_rows(src) && is_float_type(dst->type);
    }
    return is_float_type(src->type) && is_float_type(dst->type);
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    return tasks_for_elements(wsp_ggml_nelements(dst), n_threads);
}

} // namespace

const OpKernel kernel_copy = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
