// Vector math shared by the kernels (see vec.h). Every map runs whole vectors and then one
// partial vector (masked load/store), so a row's tail is computed by the same code as its body.

#include "vec.h"

#include <algorithm>

namespace wsp::cpu {

using namespace simd;

namespace {

// y[i] = f(x[i]) for a vector function f
template <typename F>
inline void map_values(const float * x, float * y, int64_t n, F f) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        vstore(y + i, f(vload(x + i)));
    }
    if (i < n) {
        const int r = (int) (n - i);
        vstore_n(y + i, f(vload_n(x + i, r)), r);
    }
}

// 1 / (1 + exp(-t)) written as a quotient so callers can put x on top (silu, gelu)
inline VecF ratio_exp(VecF num, VecF t) {
    return vdiv(num, vadd(vexp(vsub(vzero(), t)), vset1(1.0f)));
}

inline VecF tanh_v(VecF x) {
    // |x| >= 0.625: 1 - 2 / (exp(2x) + 1) saturates to +-1 cleanly (exp -> 0 or inf);
    // below, that form cancels, so an odd minimax polynomial (Cephes tanhf) takes over
    const VecF e     = vexp(vadd(x, x));
    const VecF large = vsub(vset1(1.0f), vdiv(vset1(2.0f), vadd(e, vset1(1.0f))));
    const VecF z     = vmul(x, x);
    VecF       p     = vfma(vset1(-5.70498872745e-3f), z, vset1(2.06390887954e-2f));
    p                = vfma(p, z, vset1(-5.37397155531e-2f));
    p                = vfma(p, z, vset1(1.33314422036e-1f));
    p                = vfma(p, z, vset1(-3.33332819422e-1f));
    const VecF small = vfma(vmul(p, z), x, x);
    return vselect_lt(vabs(x), vset1(0.625f), small, large);
}

} // namespace

void row_to_f32(wsp_ggml_type t, const void * src, float * dst, int64_t n) {
    wsp_ggml_get_type_traits(t)->to_float(src, dst, n);
}

void row_from_f32(wsp_ggml_type t, const float * src, void * dst, int64_t n) {
    wsp_ggml_get_type_traits(t)->from_float_ref(src, dst, n);
}

void strided_row_to_f32(wsp_ggml_type t, const char * src, size_t stride, float * dst, int64_t n) {
    if (stride == wsp_ggml_type_size(t)) {
        row_to_f32(t, src, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = load_f(t, src + (size_t) i * stride);
    }
}

void strided_row_from_f32(wsp_ggml_type t, const float * src, char * dst, size_t stride, int64_t n) {
    if (stride == wsp_ggml_type_size(t)) {
        row_from_f32(t, src, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        store_f(t, dst + (size_t) i * stride, src[i]);
    }
}

void vec_exp(const float * x, float * y, int64_t n) {
    map_values(x, y, n, [](VecF v) { return vexp(v); });
}

float vec_exp_sub_sum(const float * x, float * y, int64_t n, float m) {
    const VecF vm  = vset1(m);
    VecF       acc = vzero();
    int64_t    i   = 0;
    for (; i + LANES <= n; i += LANES) {
        const VecF e = vexp(vsub(vload(x + i), vm));
        vstore(y + i, e);
        acc = vadd(acc, e);
    }
    float sum = vhsum(acc);
    if (i < n) {
        // masked-off lanes would add exp(-m): sum the stored tail instead
        const int r = (int) (n - i);
        vstore_n(y + i, vexp(vsub(vload_n(x + i, r), vm)), r);
        for (int j = 0; j < r; ++j) {
            sum += y[i + j];
        }
    }
    return sum;
}

void vec_tanh(const float * x, float * y, int64_t n) {
    map_values(x, y, n, tanh_v);
}

void vec_sigmoid(const float * x, float * y, int64_t n) {
    map_values(x, y, n, [](VecF v) { return ratio_exp(vset1(1.0f), v); });
}

void vec_gelu(const float * x, float * y, int64_t n) {
    constexpr float C = 0.7978845608028654f; // sqrt(2/pi)
    constexpr float A = 0.044715f;
    // 0.5 x (1 + tanh(u)) == x / (1 + exp(-2u)): no cancellation for negative x, and
    // exp(-2u) -> inf gives -0 where the true value underflows
    map_values(x, y, n, [](VecF v) {
        const VecF v3 = vmul(vmul(v, v), v);
        const VecF u2 = vmul(vset1(2.0f * C), vfma(vset1(A), v3, v));
        return ratio_exp(v, u2);
    });
}

void vec_gelu_quick(const float * x, float * y, int64_t n) {
    map_values(x, y, n, [](VecF v) { return ratio_exp(v, vmul(vset1(1.702f), v)); });
}

void vec_silu(const float * x, float * y, int64_t n) {
    map_values(x, y, n, [](VecF v) { return ratio_exp(v, v); });
}

void vec_sqrt(const float * x, float * y, int64_t n) {
    map_values(x, y, n, [](VecF v) { return vsqrt(v); });
}

float vec_max(const float * x, int64_t n) {
    VecF    vm = vset1(-INFINITY);
    int64_t i  = 0;
    for (; i + LANES <= n; i += LANES) {
        vm = vmax(vm, vload(x + i));
    }
    float m = vhmax(vm);
    for (; i < n; ++i) {
        m = std::max(m, x[i]);
    }
    return m;
}

void vec_scale(float * y, int64_t n, float s) {
    const VecF vs = vset1(s);
    map_values(y, y, n, [vs](VecF v) { return vmul(v, vs); });
}

void vec_scale_bias(const float * x, float * y, int64_t n, float a, float b) {
    const VecF va = vset1(a), vb = vset1(b);
    map_values(x, y, n, [va, vb](VecF v) { return vfma(v, va, vb); });
}

float vec_dot_f32(const float * x, const float * y, int64_t n) {
    // two accumulators hide the FMA latency
    VecF    a0 = vzero(), a1 = vzero();
    int64_t i = 0;
    for (; i + 2 * LANES <= n; i += 2 * LANES) {
        a0 = vfma(vload(x + i), vload(y + i), a0);
        a1 = vfma(vload(x + i + LANES), vload(y + i + LANES), a1);
    }
    for (; i + LANES <= n; i += LANES) {
        a0 = vfma(vload(x + i), vload(y + i), a0);
    }
    if (i < n) {
        const int r = (int) (n - i);
        a1          = vfma(vload_n(x + i, r), vload_n(y + i, r), a1);
    }
    return vhsum(vadd(a0, a1));
}

void vec_axpy(float * y, const float * x, int64_t n, float a) {
    const VecF va = vset1(a);
    int64_t    i  = 0;
    for (; i + LANES <= n; i += LANES) {
        vstore(y + i, vfma(va, vload(x + i), vload(y + i)));
    }
    if (i < n) {
        const int r = (int) (n - i);
        vstore_n(y + i, vfma(va, vload_n(x + i, r), vload_n(y + i, r)), r);
    }
}

float alibi_slope(float max_bias, int64_t head, int64_t n_head) {
    if (max_bias <= 0.0f) {
        return 1.0f;
    }
    const int64_t n_head_log2 = (int64_t) 1 << (int64_t) std::floor(std::log2((double) n_head));
    const float   m0          = std::pow(2.0f, -max_bias / (float) n_head_log2);
    const float   m1          = std::pow(2.0f, -(max_bias / 2.0f) / (float) n_head_log2);
    return head < n_head_log2 ? std::pow(m0, (float) (head + 1)) : std::pow(m1, (float) (2 * (head - n_head_log2) + 1));
}

} // namespace wsp::cpu
