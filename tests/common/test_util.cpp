// Shared test helpers (see test_util.h).

#include "test_util.h"

#include "ggml-backend-impl.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <sstream>

namespace wsp::test {

std::vector<float> random_values(size_t n, uint32_t seed, float lo, float hi) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float>                    v(n);
    for (float & x : v) {
        x = dist(rng);
    }
    return v;
}

double nmse(const std::vector<float> & out, const std::vector<double> & ref) {
    EXPECT_EQ(out.size(), ref.size());
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < std::min(out.size(), ref.size()); ++i) {
        const double d = (double) out[i] - ref[i];
        err += d * d;
        norm += ref[i] * ref[i];
    }
    if (norm == 0.0) {
        return err;
    }
    return err / norm;
}

double nmse(const std::vector<float> & out, const std::vector<float> & ref) {
    return nmse(out, std::vector<double>(ref.begin(), ref.end()));
}

double max_abs_diff(const std::vector<float> & out, const std::vector<double> & ref) {
    double m = 0.0;
    for (size_t i = 0; i < std::min(out.size(), ref.size()); ++i) {
        m = std::max(m, std::fabs((double) out[i] - ref[i]));
    }
    return m;
}

std::vector<float> round_trip(wsp_ggml_type type, const std::vector<float> & values) {
    if (type == WSP_GGML_TYPE_F32) {
        return values;
    }
    const auto *  tr = wsp_ggml_get_type_traits(type);
    const int64_t bs = tr->blck_size;
    EXPECT_EQ(values.size() % (size_t) bs, 0u) << "round_trip: length not a multiple of the block size";
    std::vector<uint8_t> buf(wsp_ggml_row_size(type, (int64_t) values.size()));
    std::vector<float>   out(values.size());
    tr->from_float_ref(values.data(), buf.data(), (int64_t) values.size());
    tr->to_float(buf.data(), out.data(), (int64_t) values.size());
    return out;
}

namespace {

// visit every row of t in logical order: fn(row_index, pointer to the row's first element)
void for_rows(const wsp_ggml_tensor * t, const std::function<void(int64_t, char *)> & fn) {
    int64_t r = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                fn(r++, static_cast<char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
            }
        }
    }
}

} // namespace

void set_values(wsp_ggml_tensor * t, const std::vector<float> & values) {
    ASSERT_EQ((int64_t) values.size(), wsp_ggml_nelements(t)) << shape_str(t);
    ASSERT_NE(t->data, nullptr);
    const int64_t ne0 = t->ne[0];
    const auto *  tr  = wsp_ggml_get_type_traits(t->type);
    for_rows(t, [&](int64_t r, char * row) {
        const float * src = values.data() + r * ne0;
        if (wsp_ggml_is_quantized(t->type)) {
            tr->from_float_ref(src, row, ne0);
            return;
        }
        for (int64_t i = 0; i < ne0; ++i) {
            char * p = row + i * t->nb[0];
            switch (t->type) {
                case WSP_GGML_TYPE_F32: std::memcpy(p, &src[i], 4); break;
                case WSP_GGML_TYPE_F16: {
                    const wsp_ggml_fp16_t h = wsp_ggml_fp32_to_fp16(src[i]);
                    std::memcpy(p, &h, 2);
                    break;
                }
                case WSP_GGML_TYPE_BF16: {
                    const wsp_ggml_bf16_t b = wsp_ggml_fp32_to_bf16(src[i]);
                    std::memcpy(p, &b, 2);
                    break;
                }
                case WSP_GGML_TYPE_I32: {
                    const int32_t v = (int32_t) src[i];
                    std::memcpy(p, &v, 4);
                    break;
                }
                default: FAIL() << "set_values: unsupported type " << wsp_ggml_type_name(t->type);
            }
        }
    });
}

std::vector<float> get_values(const wsp_ggml_tensor * t) {
    std::vector<float> out((size_t) wsp_ggml_nelements(t));
    const int64_t      ne0 = t->ne[0];
    const auto *       tr  = wsp_ggml_get_type_traits(t->type);
    for_rows(t, [&](int64_t r, char * row) {
        float * dst = out.data() + r * ne0;
        if (wsp_ggml_is_quantized(t->type)) {
            tr->to_float(row, dst, ne0);
            return;
        }
        for (int64_t i = 0; i < ne0; ++i) {
            const char * p = row + i * t->nb[0];
            switch (t->type) {
                case WSP_GGML_TYPE_F32: std::memcpy(&dst[i], p, 4); break;
                case WSP_GGML_TYPE_F16: {
                    wsp_ggml_fp16_t h;
                    std::memcpy(&h, p, 2);
                    dst[i] = wsp_ggml_fp16_to_fp32(h);
                    break;
                }
                case WSP_GGML_TYPE_BF16: {
                    wsp_ggml_bf16_t b;
                    std::memcpy(&b, p, 2);
                    dst[i] = wsp_ggml_bf16_to_fp32(b);
                    break;
                }
                case WSP_GGML_TYPE_I32: {
                    int32_t v;
                    std::memcpy(&v, p, 4);
                    dst[i] = (float) v;
                    break;
                }
                default: ADD_FAILURE() << "get_values: unsupported type " << wsp_ggml_type_name(t->type); return;
            }
        }
    });
    return out;
}

void set_i32(wsp_ggml_tensor * t, const std::vector<int32_t> & values) {
    ASSERT_EQ(t->type, WSP_GGML_TYPE_I32);
    ASSERT_EQ((int64_t) values.size(), wsp_ggml_nelements(t));
    const int64_t ne0 = t->ne[0];
    for_rows(t, [&](int64_t r, char * row) {
        for (int64_t i = 0; i < ne0; ++i) {
            std::memcpy(row + i * t->nb[0], &values[(size_t) (r * ne0 + i)], 4);
        }
    });
}

Graph::Graph(size_t max_tensors) {
    wsp_ggml_init_params params = { max_tensors * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr,
                                    true };
    ctx_                        = wsp_ggml_init(params);
    backend_                    = wsp_ggml_backend_cpu_init();
}

Graph::~Graph() {
    wsp_ggml_gallocr_free(galloc_);
    wsp_ggml_backend_free(backend_);
    wsp_ggml_free(ctx_);
}

wsp_ggml_tensor * Graph::input(wsp_ggml_type type, std::vector<int64_t> ne, const char * name) {
    while (ne.size() < 4) {
        ne.push_back(1);
    }
    wsp_ggml_tensor * t = wsp_ggml_new_tensor_4d(ctx_, type, ne[0], ne[1], ne[2], ne[3]);
    wsp_ggml_set_input(t);
    if (name != nullptr) {
        wsp_ggml_set_name(t, name);
    }
    return t;
}

void Graph::build(wsp_ggml_tensor * out, std::vector<wsp_ggml_tensor *> extra_outputs) {
    graph_ = wsp_ggml_new_graph(ctx_);
    wsp_ggml_set_output(out);
    wsp_ggml_build_forward_expand(graph_, out);
    for (wsp_ggml_tensor * t : extra_outputs) {
        wsp_ggml_set_output(t);
        wsp_ggml_build_forward_expand(graph_, t);
    }
    galloc_ = wsp_ggml_gallocr_new(wsp_ggml_backend_get_default_buffer_type(backend_));
    ASSERT_TRUE(wsp_ggml_gallocr_alloc_graph(galloc_, graph_));
}

wsp_ggml_status Graph::run(int n_threads) {
    wsp_ggml_backend_cpu_set_n_threads(backend_, n_threads);
    return wsp_ggml_backend_graph_compute(backend_, graph_);
}

wsp_ggml_status Graph::compute(wsp_ggml_tensor * out, int n_threads) {
    if (graph_ == nullptr) {
        build(out);
    }
    return run(n_threads);
}

size_t Graph::compute_buffer_size() const {
    return galloc_ ? wsp_ggml_gallocr_get_buffer_size(galloc_, 0) : 0;
}

double nmse_bound(wsp_ggml_type type) {
    switch (type) {
        case WSP_GGML_TYPE_F32: return 1e-10;
        case WSP_GGML_TYPE_F16: return 1e-6;
        case WSP_GGML_TYPE_BF16: return 1e-4;
        default: return 5e-3;
    }
}

std::string shape_str(const wsp_ggml_tensor * t) {
    char buf[160];
    snprintf(buf, sizeof(buf), "%s [%lld, %lld, %lld, %lld] nb [%zu, %zu, %zu, %zu]", wsp_ggml_type_name(t->type),
             (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], t->nb[0], t->nb[1],
             t->nb[2], t->nb[3]);
    return buf;
}

namespace {

// round m >= 0 to an integer, ties to even
double round_half_even(double m) {
    const double fl   = std::floor(m);
    const double frac = m - fl;
    if (frac != 0.5) {
        return frac > 0.5 ? fl + 1.0 : fl;
    }
    return std::fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
}

} // namespace

uint16_t ieee_fp16_bits(float f) {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (std::isnan(f)) {
        return sign | 0x7e00;
    }
    const double a = std::fabs((double) f);
    if (std::isinf(f) || a >= 65536.0) {
        return sign | 0x7c00;
    }
    if (a == 0.0) {
        return sign;
    }
    int e = 0;
    std::frexp(a, &e); // a = frac * 2^e, frac in [0.5, 1): the unbiased exponent is e - 1
    // the spacing of halves is 2^(exponent - 10), and stays 2^-24 below 2^-14 (subnormals)
    const double quantum = std::ldexp(1.0, std::max(e - 1, -14) - 10);
    const double r       = round_half_even(a / quantum) * quantum;
    if (r >= 65536.0) { // from 65520 on, the nearest half is past 65504, the largest finite one
        return sign | 0x7c00;
    }
    if (r < std::ldexp(1.0, -14)) {
        return sign | (uint16_t) (r / std::ldexp(1.0, -24));
    }
    int re = 0;
    std::frexp(r, &re);
    const uint16_t mant = (uint16_t) ((std::ldexp(r, 1 - re) - 1.0) * 1024.0);
    return sign | (uint16_t) ((re - 1 + 15) << 10) | mant;
}

double ieee_fp16_value(uint16_t h) {
    const int    e    = (h >> 10) & 0x1f;
    const int    m    = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) {
        return sign * std::ldexp((double) m, -24);
    }
    if (e == 31) {
        return m == 0 ? sign * INFINITY : NAN;
    }
    return sign * std::ldexp(1.0 + m / 1024.0, e - 15);
}

uint16_t ieee_bf16_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t) ((u >> 16) & 0x8000);
    const double   a    = std::fabs((double) f);
    if (std::isnan(f)) {
        return sign | 0x7fc0;
    }
    if (std::isinf(f) || a == 0.0) {
        return (uint16_t) (u >> 16);
    }
    int e = 0;
    std::frexp(a, &e);
    // bf16 keeps float's exponent range and 7 mantissa bits; float subnormals are spaced 2^-133
    const double quantum = std::ldexp(1.0, std::max(e - 1, -126) - 7);
    const double r       = round_half_even(a / quantum) * quantum;
    if (r >= std::ldexp(1.0, 128)) {
        return sign | 0x7f80;
    }
    const float rf = (float) r; // exact: r has at most 8 significant bits
    std::memcpy(&u, &rf, 4);
    return sign | (uint16_t) (u >> 16);
}

struct LogCapture::State {
    mutable std::mutex                                      mutex;
    std::vector<std::pair<wsp_ggml_log_level, std::string>> messages;
};

LogCapture::LogCapture() : state_(new State) {
    wsp_ggml_log_set(on_log, state_);
}

LogCapture::~LogCapture() {
    wsp_ggml_log_set(nullptr, nullptr);
    delete state_;
}

void LogCapture::on_log(wsp_ggml_log_level level, const char * text, void * user_data) {
    auto *                      s = static_cast<State *>(user_data);
    std::lock_guard<std::mutex> lock(s->mutex);
    s->messages.emplace_back(level, text);
}

std::string LogCapture::text() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::string                 all;
    for (const auto & m : state_->messages) {
        all += m.second;
    }
    return all;
}

bool LogCapture::contains(const std::string & s) const {
    return text().find(s) != std::string::npos;
}

int LogCapture::count(wsp_ggml_log_level level) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    int                         n = 0;
    for (const auto & m : state_->messages) {
        n += m.first == level ? 1 : 0;
    }
    return n;
}

void LogCapture::clear() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->messages.clear();
}

bool all_close(const std::vector<float> & out, const std::vector<double> & ref, double atol, double rtol,
               const std::string & what) {
    EXPECT_EQ(out.size(), ref.size()) << what;
    EXPECT_FALSE(ref.empty()) << what << ": nothing to compare";
    int                n_bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < std::min(out.size(), ref.size()); ++i) {
        const double err = std::fabs((double) out[i] - ref[i]);
        if (!(err <= atol + rtol * std::fabs(ref[i]))) {
            if (n_bad < 8) {
                first << "\n  [" << i << "] got " << out[i] << ", expected " << ref[i];
            }
            ++n_bad;
        }
    }
    EXPECT_EQ(n_bad, 0) << what << ": " << n_bad << " of " << ref.size() << " values differ" << first.str();
    return n_bad == 0 && out.size() == ref.size();
}

double type_eps(wsp_ggml_type type) {
    switch (type) {
        case WSP_GGML_TYPE_F16: return std::ldexp(1.0, -10);
        case WSP_GGML_TYPE_BF16: return std::ldexp(1.0, -7);
        default: return std::ldexp(1.0, -23);
    }
}

const char * layout_name(Layout layout) {
    switch (layout) {
        case Layout::Contiguous: return "contiguous";
        case Layout::Permuted: return "permuted";
        default: return "strided";
    }
}

wsp_ggml_tensor * make_operand(Graph & g, wsp_ggml_type type, std::vector<int64_t> ne, Layout layout) {
    ne.resize(4, 1);
    wsp_ggml_context * ctx = g.ctx();
    switch (layout) {
        case Layout::Contiguous: return g.input(type, ne);
        case Layout::Permuted: {
            wsp_ggml_tensor * base = g.input(type, { ne[1], ne[0], ne[2], ne[3] });
            return wsp_ggml_permute(ctx, base, 1, 0, 2, 3);
        }
        default: {
            wsp_ggml_tensor * base = g.input(type, { ne[0] + 3, ne[1], ne[2], ne[3] });
            return wsp_ggml_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], base->nb[1], base->nb[2], base->nb[3],
                                    wsp_ggml_type_size(type));
        }
    }
}

int fill_inputs(Graph & g, uint32_t seed, float lo, float hi) {
    int n = 0;
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(g.ctx()); t != nullptr;
         t                   = wsp_ggml_get_next_tensor(g.ctx(), t)) {
        if ((t->flags & WSP_GGML_TENSOR_FLAG_INPUT) && t->data != nullptr) {
            if (!fill_random_blocks(t, seed + (uint32_t) n)) {
                set_values(t, random_values((size_t) wsp_ggml_nelements(t), seed + (uint32_t) n, lo, hi));
            }
            ++n;
        }
    }
    return n;
}

// seeded random blocks of a super-block type with finite scales (the fields type_dump sets)
std::vector<uint8_t> random_blocks(wsp_ggml_type type, int64_t n_blocks, uint32_t seed) {
    const size_t         bs = wsp_ggml_type_size(type);
    std::vector<uint8_t> b(bs * (size_t) n_blocks);
    std::mt19937         rng(seed);
    for (uint8_t & v : b) {
        v = (uint8_t) rng();
    }
    std::vector<int> fp16_at;
    switch (type) {
        case WSP_GGML_TYPE_Q2_K: fp16_at = { 80, 82 }; break;
        case WSP_GGML_TYPE_Q3_K: fp16_at = { 108 }; break;
        case WSP_GGML_TYPE_Q4_K:
        case WSP_GGML_TYPE_Q5_K: fp16_at = { 0, 2 }; break;
        case WSP_GGML_TYPE_Q6_K: fp16_at = { 208 }; break;
        case WSP_GGML_TYPE_TQ1_0: fp16_at = { 52 }; break;
        case WSP_GGML_TYPE_TQ2_0: fp16_at = { 64 }; break;
        case WSP_GGML_TYPE_IQ1_M: break; // its d is in the scales' top nibbles: below
        default: fp16_at = { 0 }; break; // IQ4_NL, IQ4_XS and the grid i-quants
    }
    std::uniform_real_distribution<float> scale(-0.1f, 0.1f);
    for (int64_t i = 0; i < n_blocks; ++i) {
        for (int at : fp16_at) {
            const wsp_ggml_fp16_t h = wsp_ggml_fp32_to_fp16(scale(rng));
            std::memcpy(&b[(size_t) i * bs + at], &h, sizeof(h));
        }
        if (type == WSP_GGML_TYPE_IQ1_M) { // the top nibble of each of the 4 scale words at byte 48
            const wsp_ggml_fp16_t h = wsp_ggml_fp32_to_fp16(scale(rng));
            for (int w = 0; w < 4; ++w) {
                uint8_t & top = b[(size_t) i * bs + 48 + 2 * w + 1];
                top           = (uint8_t) ((top & 0x0f) | (((h >> (4 * w)) & 0xf) << 4));
            }
        }
    }
    return b;
}

bool fill_random_blocks(wsp_ggml_tensor * t, uint32_t seed) {
    if (!wsp_ggml_is_quantized(t->type) || wsp_ggml_get_type_traits(t->type)->from_float_ref != nullptr) {
        return false;
    }
    const int64_t n_blocks = t->ne[0] / wsp_ggml_blck_size(t->type);
    for_rows(t, [&](int64_t r, char * row) {
        const std::vector<uint8_t> b = random_blocks(t->type, n_blocks, seed + (uint32_t) r);
        std::memcpy(row, b.data(), b.size());
    });
    return true;
}

struct HostBufferType::Impl {
    HostBufferType *             owner;
    std::string                  name;
    size_t                       alignment;
    size_t                       max_size;
    wsp_ggml_backend_buffer_type buft;

    static Impl * of(wsp_ggml_backend_buffer_type_t b) { return static_cast<Impl *>(b->context); }

    static void * get_base(wsp_ggml_backend_buffer_t b) { return b->context; }

    static void free_buffer(wsp_ggml_backend_buffer_t b) {
        of(b->buft)->owner->n_freed_ += 1;
        std::free(b->context);
    }

    static void memset_tensor(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, uint8_t v, size_t off, size_t n) {
        std::memset(static_cast<char *>(t->data) + off, v, n);
    }

    static void set_tensor(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, const void * d, size_t off, size_t n) {
        std::memcpy(static_cast<char *>(t->data) + off, d, n);
    }

    static void get_tensor(wsp_ggml_backend_buffer_t, const wsp_ggml_tensor * t, void * d, size_t off, size_t n) {
        std::memcpy(d, static_cast<const char *>(t->data) + off, n);
    }

    static void clear(wsp_ggml_backend_buffer_t b, uint8_t v) { std::memset(b->context, v, b->size); }

    static const char * get_name(wsp_ggml_backend_buffer_type_t b) { return of(b)->name.c_str(); }

    static wsp_ggml_backend_buffer_t alloc_buffer(wsp_ggml_backend_buffer_type_t b, size_t size) {
        void * mem = std::aligned_alloc(64, WSP_GGML_PAD(size, (size_t) 64));
        if (mem == nullptr) {
            return nullptr;
        }
        const wsp_ggml_backend_buffer_i iface = {
            /* .free_buffer   = */ free_buffer,
            /* .get_base      = */ get_base,
            /* .init_tensor   = */ nullptr,
            /* .memset_tensor = */ memset_tensor,
            /* .set_tensor    = */ set_tensor,
            /* .get_tensor    = */ get_tensor,
            /* .cpy_tensor    = */ nullptr,
            /* .clear         = */ clear,
            /* .reset         = */ nullptr,
        };
        of(b)->owner->allocations_.push_back({ static_cast<const char *>(mem), size });
        return wsp_ggml_backend_buffer_init(b, iface, mem, size);
    }

    static size_t get_alignment(wsp_ggml_backend_buffer_type_t b) { return of(b)->alignment; }

    static size_t get_max_size(wsp_ggml_backend_buffer_type_t b) { return of(b)->max_size; }

    static bool is_host(wsp_ggml_backend_buffer_type_t) { return true; }
};

HostBufferType::HostBufferType(const char * name, size_t alignment, size_t max_size) : impl_(new Impl) {
    impl_->owner     = this;
    impl_->name      = name;
    impl_->alignment = alignment;
    impl_->max_size  = max_size;
    impl_->buft      = {
             /* .iface = */ {
                 /* .get_name       = */ Impl::get_name,
            /* .alloc_buffer   = */ Impl::alloc_buffer,
            /* .get_alignment  = */ Impl::get_alignment,
            /* .get_max_size   = */ Impl::get_max_size,
            /* .get_alloc_size = */ nullptr,
            /* .is_host        = */ Impl::is_host,
        },
        /* .device  = */ nullptr,
        /* .context = */ impl_,
    };
}

HostBufferType::~HostBufferType() {
    delete impl_;
}

wsp_ggml_backend_buffer_type_t HostBufferType::buft() {
    return &impl_->buft;
}

int HostBufferType::allocation_of(const void * p, size_t n) const {
    const char * c = static_cast<const char *>(p);
    for (size_t i = 0; i < allocations_.size(); ++i) {
        if (c >= allocations_[i].base && c + n <= allocations_[i].base + allocations_[i].size) {
            return (int) i;
        }
    }
    return -1;
}

} // namespace wsp::test
