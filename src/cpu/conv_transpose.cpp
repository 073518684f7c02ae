// CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D: every input element scatters the kernel, scaled by
// it, into the output at (x*s, y*s): dst[x*s + kx, y*s + ky, oc, n] += sum_ic k[kx, ky, oc, ic] *
// src[x, y, ic, n]. The 1-D op is the 2-D one with one row (k [K, OC, IC], src [L, IC]). Kernel
// and input F32/F16/BF16, any strides; dst F32. The input is converted to F32 once (shared, then
// a barrier); each task owns whole (oc, n) output planes, accumulated in its own scratch.

#include "ops.h"
#include "vec.h"

#include "mul_mat_common.h"

#include <cstring>

namespace wsp::cpu {

namespace {

// the op's tensors as 4-D [KW, KH, OC, IC], [W, H, IC, N], [OW, OH, OC, N] (1-D: H = KH = N = 1)
struct Geo {
    wsp_ggml_tensor k, b, d;
    int             s;
};

Geo geo_of(const wsp_ggml_tensor * dst) {
    Geo g{ *dst->src[0], *dst->src[1], *dst, get_op_param_i32(dst, 0) };
    if (dst->op == WSP_GGML_OP_CONV_TRANSPOSE_1D) {
        const auto remap = [](wsp_ggml_tensor & t, int64_t n2, int64_t n3, size_t b2, size_t b3) {
            t.ne[1] = 1;
            t.ne[2] = n2;
            t.ne[3] = n3;
            t.nb[2] = b2;
            t.nb[3] = b3;
        };
        remap(g.k, dst->src[0]->ne[1], dst->src[0]->ne[2], dst->src[0]->nb[1], dst->src[0]->nb[2]);
        remap(g.b, dst->src[1]->ne[1], 1, dst->src[1]->nb[1], dst->src[1]->nb[2]);
        remap(g.d, dst->ne[1], 1, dst->nb[1], dst->nb[2]);
    }
    return g;
}

size_t input_floats(const Geo & g) {
    return (size_t) (g.b.ne[0] * g.b.ne[1] * g.b.ne[2] * g.b.ne[3]);
}

size_t task_floats(const Geo & g) {
    return mm::align_up((size_t) (g.d.ne[0] * g.d.ne[1] + g.k.ne[0] * g.k.ne[1]) * sizeof(float)) / sizeof(float);
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    const Geo g = geo_of(dst);
    return mm::ALIGN + mm::align_up(input_floats(g) * sizeof(float)) +
           (size_t) n_tasks * task_floats(g) * sizeof(float);
}

// one output plane (oc, n) into acc [OH][OW]
void plane(const Geo & g, const float * bf, float * acc, float * kt, int64_t oc, int64_t n) {
    const int64_t W = g.b.ne[0], H = g.b.ne[1], IC = g.b.ne[2];
    const int64_t KW = g.k.ne[0], KH = g.k.ne[1], OW = g.d.ne[0];
    std::memset(acc, 0, (size_t) (OW * g.d.ne[1]) * sizeof(float));
    for (int64_t ic = 0; ic < IC; ++ic) {
        const char * ks = static_cast<const char *>(g.k.data) + oc * g.k.nb[2] + ic * g.k.nb[3];
        for (int64_t ky = 0; ky < KH; ++ky) {
            strided_row_to_f32(g.k.type, ks + ky * g.k.nb[1], g.k.nb[0], kt + ky * KW, KW);
        }
        const float * in = bf + (n * IC + ic) * W * H;
        for (int64_t y = 0; y < H; ++y) {
            for (int64_t x = 0; x < W; ++x) {
                const float v = in[y * W + x];
                for (int64_t ky = 0; ky < KH; ++ky) {
                    vec_axpy(acc + (y * g.s + ky) * OW + x * g.s, kt + ky * KW, KW, v);
                }
            }
        }
    }
}

void compute(const ComputeParams & p, wsp_ggml_tensor * node) {
    const Geo      g = geo_of(node);
    mm::WorkCarver carve(p.wdata);
    float *        bf   = carve.take<float>(input_floats(g));
    float *        mine = carve.take<float>((size_t) p.nth * task_floats(g)) + (size_t) p.ith * task_floats(g);
    const int64_t  W = g.b.ne[0], H = g.b.ne[1], IC = g.b.ne[2], N = g.b.ne[3];
    const int64_t  OW = g.d.ne[0], OH = g.d.ne[1], OC = g.d.ne[2];

    int64_t r0, r1; // input rows (y, ic, n) to F32
    split_range(H * IC * N, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t y = r % H, ic = (r / H) % IC, n = r / (H * IC);
        strided_row_to_f32(g.b.type,
                           static_cast<const char *>(g.b.data) + y * g.b.nb[1] + ic * g.b.nb[2] + n * g.b.nb[3],
                           g.b.nb[0], bf + r * W, W);
    }
    p.barrier();

    float * acc = mine;
    float * kt  = mine + OW * OH;
    for (int64_t u = p.next_chunk(); u < OC * N; u = p.next_chunk()) {
        const int64_t oc = u % OC, n = u / OC;
        plane(g, bf, acc, kt, oc, n);
        for (int64_t oy = 0; oy < OH; ++oy) {
            char * drow = static_cast<char *>(g.d.data) + oy * g.d.nb[1] + oc * g.d.nb[2] + n * g.d.nb[3];
            for (int64_t ox = 0; ox < OW; ++ox) {
                *reinterpret_cast<float *>(drow + ox * g.d.nb[0]) = acc[oy * OW + ox];
            }
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return dst->type == WSP_GGML_TYPE_F32 && is_float_type(dst->src[0]->type) && is_float_type(dst->src[1]->type);
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const Geo     g     = geo_of(dst);
    const int64_t flops = wsp_ggml_nelements(dst->src[1]) * g.k.ne[0] * g.k.ne[1] * g.k.ne[2];
    const int64_t units = g.d.ne[2] * g.d.ne[3];
    const int     by    = tasks_for_elements(flops, n_threads, 65536);
    return (int) (units < by ? (units < 1 ? 1 : units) : by);
}

} // namespace

const OpKernel kernel_conv_transpose = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
