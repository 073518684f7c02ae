// ACC and SET: dst = a (skipped when dst is a's memory: in place), then b added to (ACC) or
// written over (SET) the view of dst whose element (i0, i1, i2, i3) lies at offset + i0 * elem +
// i1 * nb1 + i2 * nb2 + i3 * nb3 bytes (op_params { nb1, nb2, nb3, offset, inplace }). Two
// kernels on the stream, so the copy is complete before b lands. F32/F16/BF16 in any mix, or SET
// between equal non-float types as raw elements (I32 and the like).

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

// elem_bytes > 0: raw element copy of that many bytes; 0: float conversion
__device__ __forceinline__ void copy_elem(const char * ps, int st, char * pd, int dt, int elem_bytes) {
    if (elem_bytes > 0) {
        for (int k = 0; k < elem_bytes; ++k) {
            pd[k] = ps[k];
        }
    } else {
        store_f(dt, pd, load_f(st, ps));
    }
}

__global__ void copy_kernel(TensorView a, TensorView d, int64_t rows, int elem_bytes) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        copy_elem(elem(a, i0, i1, i2, i3), a.type, elem(d, i0, i1, i2, i3), d.type, elem_bytes);
    });
}

// w: the view of dst that b lands in (b's shape, strides nb1..nb3, data at dst + offset)
template <bool ACC>
__global__ void write_kernel(TensorView b, TensorView w, int64_t rows, int elem_bytes) {
    for_each_element(b, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const char * pb = elem(b, i0, i1, i2, i3);
        char *       pw = elem(w, i0, i1, i2, i3);
        if (ACC) {
            store_f(w.type, pw, load_f(w.type, pw) + load_f(b.type, pb));
        } else {
            copy_elem(pb, b.type, pw, w.type, elem_bytes);
        }
    });
}

int raw_bytes(const wsp_ggml_tensor * s, const wsp_ggml_tensor * d) {
    return s->type == d->type ? (int) wsp_ggml_type_size(s->type) : 0;
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const wsp_ggml_tensor * b = t->src[1];
    if (t->type != a->type || !wsp_ggml_are_same_shape(t, a)) {
        return false;
    }
    if (is_float_type(a->type) && is_float_type(b->type)) {
        return true;
    }
    return t->op == WSP_GGML_OP_SET && a->type == b->type && !wsp_ggml_is_quantized(a->type);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const wsp_ggml_tensor * b = t->src[1];
    if (t->data != a->data) {
        const int64_t rows = wsp_ggml_nrows(t);
        const RowGrid g    = row_grid(t->ne[0], rows);
        gpu::launch(copy_kernel, g.grid, g.block, 0, ctx.stream, view_of(a), view_of(t), rows, raw_bytes(a, t));
        if (!WSP_CUDA_LAUNCH_OK(ctx.physical)) {
            return false;
        }
    }
    if (wsp_ggml_is_empty(b)) {
        return true;
    }
    TensorView w = view_of(b);
    w.type       = (int) t->type;
    w.data       = static_cast<char *>(t->data) + t->op_params[3];
    w.nb[0]      = (int64_t) wsp_ggml_type_size(t->type);
    for (int i = 1; i < 4; ++i) {
        w.nb[i] = t->op_params[i - 1];
    }
    const int64_t rows = wsp_ggml_nrows(b);
    const RowGrid g    = row_grid(b->ne[0], rows);
    if (t->op == WSP_GGML_OP_ACC) {
        gpu::launch(write_kernel<true>, g.grid, g.block, 0, ctx.stream, view_of(b), w, rows, 0);
    } else {
        gpu::launch(write_kernel<false>, g.grid, g.block, 0, ctx.stream, view_of(b), w, rows, raw_bytes(b, t));
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_set() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
