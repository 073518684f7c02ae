// POOL_1D and POOL_2D: max or average over windows of dims 0 (and 1), F32/F16/BF16 in, F32 out,
// any strides. Padded positions are no elements (Note [pooling padding] in ops_conv.cpp): MAX
// skips them (-FLT_MAX for an empty window), AVG divides by the count of input elements. POOL_1D
// is POOL_2D with a window of one row. Tasks split dst rows (oh, c, n).

#include "ops.h"
#include "vec.h"

#include <cfloat>

namespace wsp::cpu {

namespace {

struct Pool {
    int op;
    int k0, k1, s0, s1, p0, p1;
};

Pool pool_of(const wsp_ggml_tensor * dst) {
    Pool q;
    q.op = get_op_param_i32(dst, 0);
    if (dst->op == WSP_GGML_OP_POOL_1D) {
        q.k0 = get_op_param_i32(dst, 1);
        q.s0 = get_op_param_i32(dst, 2);
        q.p0 = get_op_param_i32(dst, 3);
        q.k1 = q.s1 = 1;
        q.p1        = 0;
    } else {
        q.k0 = get_op_param_i32(dst, 1);
        q.k1 = get_op_param_i32(dst, 2);
        q.s0 = get_op_param_i32(dst, 3);
        q.s1 = get_op_param_i32(dst, 4);
        q.p0 = get_op_param_i32(dst, 5);
        q.p1 = get_op_param_i32(dst, 6);
    }
    return q;
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a  = dst->src[0];
    const Pool              q  = pool_of(dst);
    const int64_t           IW = a->ne[0], IH = a->ne[1];
    const int64_t           OW = dst->ne[0], OH = dst->ne[1], C = dst->ne[2];
    const bool              avg = q.op == WSP_GGML_OP_POOL_AVG;
    const bool              f32 = a->type == WSP_GGML_TYPE_F32;
    int64_t                 r0, r1;
    split_range(OH * C * dst->ne[3], p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t oh = r % OH, c = (r / OH) % C, n = r / (OH * C);
        const char *  plane = static_cast<const char *>(a->data) + c * a->nb[2] + n * a->nb[3];
        char *        drow  = static_cast<char *>(dst->data) + oh * dst->nb[1] + c * dst->nb[2] + n * dst->nb[3];
        const int64_t ih0   = oh * q.s1 - q.p1;
        const int64_t y0 = ih0 < 0 ? 0 : ih0, y1 = ih0 + q.k1 < IH ? ih0 + q.k1 : IH;
        for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t iw0 = ow * q.s0 - q.p0;
            const int64_t x0 = iw0 < 0 ? 0 : iw0, x1 = iw0 + q.k0 < IW ? iw0 + q.k0 : IW;
            float         acc = avg ? 0.0f : -FLT_MAX;
            for (int64_t y = y0; y < y1; ++y) {
                const char * row = plane + y * a->nb[1];
                for (int64_t x = x0; x < x1; ++x) {
                    const char * e = row + x * a->nb[0];
                    const float  v = f32 ? *reinterpret_cast<const float *>(e) : load_f(a->type, e);
                    acc            = avg ? acc + v : (v > acc ? v : acc);
                }
            }
            const int64_t count = (y1 > y0 ? y1 - y0 : 0) * (x1 > x0 ? x1 - x0 : 0);
            if (avg) {
                acc = count > 0 ? acc / (float) count : 0.0f;
            }
            *reinterpret_cast<float *>(drow + ow * dst->nb[0]) = acc;
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    return dst->type == WSP_GGML_TYPE_F32 && is_float_type(dst->src[0]->type);
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const Pool    q    = pool_of(dst);
    const int64_t rows = dst->ne[1] * dst->ne[2] * dst->ne[3];
    const int     by   = tasks_for_elements(wsp_ggml_nelements(dst) * q.k0 * q.k1, n_threads);
    return (int) (rows < by ? (rows < 1 ? 1 : rows) : by);
}

} // namespace

const OpKernel kernel_pool = { supported, n_tasks, nullptr, compute };

} // namespace wsp::cpu
