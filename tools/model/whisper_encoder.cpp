// Whisper-shaped encoder: weights, graph and double-precision reference (see whisper_encoder.h).

#include "whisper_encoder.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

namespace wsp::model {

namespace {

constexpr float LN_EPS = 1e-5f;

wsp_ggml_tensor * vec(wsp_ggml_context * ctx, int64_t n, const char * name) {
    return wsp_ggml_set_name(wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n), name);
}

wsp_ggml_tensor * mat(wsp_ggml_context * ctx, wsp_ggml_type type, int64_t ne0, int64_t ne1, const char * name) {
    return wsp_ggml_set_name(wsp_ggml_new_tensor_2d(ctx, type, ne0, ne1), name);
}

// host copy of a weight as doubles, in its logical order
std::vector<double> host_values(const wsp_ggml_tensor * t) {
    std::vector<uint8_t> raw(wsp_ggml_nbytes(t));
    wsp_ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
    std::vector<float> f((size_t) wsp_ggml_nelements(t));
    wsp_ggml_get_type_traits(t->type)->to_float(raw.data(), f.data(), (int64_t) f.size());
    return std::vector<double>(f.begin(), f.end());
}

double round_f16(double x) {
    return wsp_ggml_fp16_to_fp32(wsp_ggml_fp32_to_fp16((float) x));
}

double gelu(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// x [L][IC] (time-major) -> [OL][OC]; kernel [OC][IC][K] as stored (k fastest)
std::vector<double> conv1d(const std::vector<double> & x, int L, int IC, const std::vector<double> & k, int K, int OC,
                           const std::vector<double> & bias, int stride, bool round_input, int & OL) {
    const int pad = K / 2;
    OL            = (L + 2 * pad - (K - 1) - 1) / stride + 1;
    std::vector<double> out((size_t) OL * OC);
    for (int ol = 0; ol < OL; ++ol) {
        for (int oc = 0; oc < OC; ++oc) {
            double s = 0.0;
            for (int ic = 0; ic < IC; ++ic) {
                for (int kw = 0; kw < K; ++kw) {
                    const int t = ol * stride + kw - pad;
                    if (t < 0 || t >= L) {
                        continue;
                    }
                    const double xv = round_input ? round_f16(x[(size_t) t * IC + ic]) : x[(size_t) t * IC + ic];
                    s += k[((size_t) oc * IC + ic) * K + kw] * xv;
                }
            }
            out[(size_t) ol * OC + oc] = gelu(s + bias[(size_t) oc]);
        }
    }
    return out;
}

// y[t][n] = sum_k w[n][k] x[t][k] + b[n]
std::vector<double> linear(const std::vector<double> & x, int T, int K, const std::vector<double> & w, int N,
                           const std::vector<double> * b) {
    std::vector<double> y((size_t) T * N);
    for (int t = 0; t < T; ++t) {
        for (int n = 0; n < N; ++n) {
            double s = b ? (*b)[(size_t) n] : 0.0;
            for (int k = 0; k < K; ++k) {
                s += w[(size_t) n * K + k] * x[(size_t) t * K + k];
            }
            y[(size_t) t * N + n] = s;
        }
    }
    return y;
}

std::vector<double> layer_norm(const std::vector<double> & x, int T, int C, const std::vector<double> & w,
                               const std::vector<double> & b) {
    std::vector<double> y(x.size());
    for (int t = 0; t < T; ++t) {
        const double * r    = &x[(size_t) t * C];
        double         mean = 0.0, var = 0.0;
        for (int c = 0; c < C; ++c) {
            mean += r[c];
        }
        mean /= C;
        for (int c = 0; c < C; ++c) {
            var += (r[c] - mean) * (r[c] - mean);
        }
        var /= C;
        const double inv = 1.0 / std::sqrt(var + LN_EPS);
        for (int c = 0; c < C; ++c) {
            y[(size_t) t * C + c] = (r[c] - mean) * inv * w[(size_t) c] + b[(size_t) c];
        }
    }
    return y;
}

std::vector<double> attention(const std::vector<double> & q, const std::vector<double> & k,
                              const std::vector<double> & v, int T, int C, int n_head, bool round_kv) {
    const int           dh    = C / n_head;
    const double        scale = 1.0 / std::sqrt((double) dh);
    std::vector<double> out((size_t) T * C);
    std::vector<double> p((size_t) T);
    auto                kv = [&](const std::vector<double> & m, int s, int h, int d) {
        const double x = m[(size_t) s * C + h * dh + d];
        return round_kv ? round_f16(x) : x;
    };
    for (int h = 0; h < n_head; ++h) {
        for (int t = 0; t < T; ++t) {
            double mx = -INFINITY;
            for (int s = 0; s < T; ++s) {
                double dot = 0.0;
                for (int d = 0; d < dh; ++d) {
                    dot += q[(size_t) t * C + h * dh + d] * kv(k, s, h, d);
                }
                p[(size_t) s] = dot * scale;
                mx            = std::max(mx, p[(size_t) s]);
            }
            double sum = 0.0;
            for (int s = 0; s < T; ++s) {
                p[(size_t) s] = std::exp(p[(size_t) s] - mx);
                sum += p[(size_t) s];
            }
            for (int d = 0; d < dh; ++d) {
                double acc = 0.0;
                for (int s = 0; s < T; ++s) {
                    acc += p[(size_t) s] * kv(v, s, h, d);
                }
                out[(size_t) t * C + h * dh + d] = acc / sum;
            }
        }
    }
    return out;
}

void add_into(std::vector<double> & y, const std::vector<double> & x) {
    for (size_t i = 0; i < y.size(); ++i) {
        y[i] += x[i];
    }
}

} // namespace

std::string EncoderConfig::describe() const {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "n_mels %d, n_ctx %d, n_state %d, n_head %d, n_layer %d, weights %s, attention %s",
                  n_mels, n_ctx, n_state, n_head, n_layer, wsp_ggml_type_name(wtype),
                  flash_attn ? "flash_attn_ext" : "soft_max_ext");
    return buf;
}

EncoderWeights::EncoderWeights(const EncoderConfig & cfg) : cfg_(cfg) {
    const size_t         n_tensors = 8 + 15 * (size_t) cfg.n_layer;
    wsp_ggml_init_params params    = { n_tensors * wsp_ggml_tensor_overhead(), nullptr, true };
    ctx_                           = wsp_ggml_init(params);
    const int64_t S = cfg.n_state, F = 4 * (int64_t) cfg.n_state;
    conv1_w = wsp_ggml_set_name(wsp_ggml_new_tensor_3d(ctx_, WSP_GGML_TYPE_F16, 3, cfg.n_mels, S), "conv1.w");
    conv1_b = mat(ctx_, WSP_GGML_TYPE_F32, 1, S, "conv1.b");
    conv2_w = wsp_ggml_set_name(wsp_ggml_new_tensor_3d(ctx_, WSP_GGML_TYPE_F16, 3, S, S), "conv2.w");
    conv2_b = mat(ctx_, WSP_GGML_TYPE_F32, 1, S, "conv2.b");
    pos     = mat(ctx_, WSP_GGML_TYPE_F32, S, cfg.n_ctx, "pos");
    for (int i = 0; i < cfg.n_layer; ++i) {
        EncoderLayer l;
        l.attn_ln_w = vec(ctx_, S, "attn_ln.w");
        l.attn_ln_b = vec(ctx_, S, "attn_ln.b");
        l.q_w       = mat(ctx_, cfg.wtype, S, S, "q.w");
        l.q_b       = vec(ctx_, S, "q.b");
        l.k_w       = mat(ctx_, cfg.wtype, S, S, "k.w");
        l.v_w       = mat(ctx_, cfg.wtype, S, S, "v.w");
        l.v_b       = vec(ctx_, S, "v.b");
        l.o_w       = mat(ctx_, cfg.wtype, S, S, "o.w");
        l.o_b       = vec(ctx_, S, "o.b");
        l.mlp_ln_w  = vec(ctx_, S, "mlp_ln.w");
        l.mlp_ln_b  = vec(ctx_, S, "mlp_ln.b");
        l.mlp0_w    = mat(ctx_, cfg.wtype, S, F, "mlp0.w");
        l.mlp0_b    = vec(ctx_, F, "mlp0.b");
        l.mlp1_w    = mat(ctx_, cfg.wtype, F, S, "mlp1.w");
        l.mlp1_b    = vec(ctx_, S, "mlp1.b");
        layers_.push_back(l);
    }
    ln_post_w = vec(ctx_, S, "ln_post.w");
    ln_post_b = vec(ctx_, S, "ln_post.b");
}

EncoderWeights::~EncoderWeights() {
    for (wsp_ggml_backend_buffer_t b : buffers_) {
        wsp_ggml_backend_buffer_free(b);
    }
    wsp_ggml_free(ctx_);
}

std::vector<wsp_ggml_tensor *> EncoderWeights::all() const {
    std::vector<wsp_ggml_tensor *> v = { conv1_w, conv1_b, conv2_w, conv2_b, pos };
    for (const EncoderLayer & l : layers_) {
        v.insert(v.end(), { l.attn_ln_w, l.attn_ln_b, l.q_w, l.q_b, l.k_w, l.v_w, l.v_b, l.o_w, l.o_b, l.mlp_ln_w,
                            l.mlp_ln_b, l.mlp0_w, l.mlp0_b, l.mlp1_w, l.mlp1_b });
    }
    v.insert(v.end(), { ln_post_w, ln_post_b });
    return v;
}

bool EncoderWeights::allocate(wsp_ggml_backend_buffer_type_t                      front,
                              const std::vector<wsp_ggml_backend_buffer_type_t> & layer_bufts,
                              wsp_ggml_backend_buffer_type_t                      matmul_buft) {
    // group tensors by buffer type and place each group with a bump allocator
    std::vector<wsp_ggml_backend_buffer_type_t> bufts;
    std::vector<std::vector<wsp_ggml_tensor *>> groups;
    auto                                        add = [&](wsp_ggml_backend_buffer_type_t buft, wsp_ggml_tensor * t) {
        size_t g = 0;
        while (g < bufts.size() && bufts[g] != buft) {
            ++g;
        }
        if (g == bufts.size()) {
            bufts.push_back(buft);
            groups.emplace_back();
        }
        groups[g].push_back(t);
    };
    for (wsp_ggml_tensor * t : { conv1_w, conv1_b, conv2_w, conv2_b, pos, ln_post_w, ln_post_b }) {
        add(front, t);
    }
    for (size_t i = 0; i < layers_.size(); ++i) {
        const EncoderLayer &           l    = layers_[i];
        wsp_ggml_backend_buffer_type_t buft = layer_bufts.empty() ? front : layer_bufts[i % layer_bufts.size()];
        for (wsp_ggml_tensor * t :
             { l.attn_ln_w, l.attn_ln_b, l.q_b, l.v_b, l.o_b, l.mlp_ln_w, l.mlp_ln_b, l.mlp0_b, l.mlp1_b }) {
            add(buft, t);
        }
        for (wsp_ggml_tensor * t : { l.q_w, l.k_w, l.v_w, l.o_w, l.mlp0_w, l.mlp1_w }) {
            add(matmul_buft ? matmul_buft : buft, t);
        }
    }
    for (size_t g = 0; g < bufts.size(); ++g) {
        const size_t align = wsp_ggml_backend_buft_get_alignment(bufts[g]);
        size_t       size  = 0;
        for (wsp_ggml_tensor * t : groups[g]) {
            size += WSP_GGML_PAD(wsp_ggml_backend_buft_get_alloc_size(bufts[g], t), align);
        }
        wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_buft_alloc_buffer(bufts[g], size);
        if (buf == nullptr) {
            return false;
        }
        buffers_.push_back(buf);
        wsp_ggml_tallocr talloc = wsp_ggml_tallocr_new(buf);
        for (wsp_ggml_tensor * t : groups[g]) {
            if (wsp_ggml_tallocr_alloc(&talloc, t) != WSP_GGML_STATUS_SUCCESS) {
                return false;
            }
        }
        // after placement: a split buffer passes the usage on to the memory of its tensors
        wsp_ggml_backend_buffer_set_usage(buf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    return true;
}

void EncoderWeights::randomize(uint32_t seed) {
    std::mt19937 rng(seed);
    for (wsp_ggml_tensor * t : all()) {
        const std::string name = t->name;
        // layer-norm gains near 1, everything else small and centred, scaled by fan-in
        const bool  gain  = name.find("ln") != std::string::npos && name.back() == 'w';
        const float fan   = (float) (t->ne[0] * (t->ne[2] > 1 ? t->ne[1] : 1));
        const float range = gain ? 0.2f : (t->ne[1] > 1 && name != "pos" ? 1.0f / std::sqrt(fan) : 0.1f);
        std::uniform_real_distribution<float> dist(-range, range);
        std::vector<float>                    v((size_t) wsp_ggml_nelements(t));
        for (float & x : v) {
            x = dist(rng) + (gain ? 1.0f : 0.0f);
        }
        std::vector<uint8_t> raw(wsp_ggml_nbytes(t));
        wsp_ggml_get_type_traits(t->type)->from_float_ref(v.data(), raw.data(), (int64_t) v.size());
        wsp_ggml_backend_tensor_set(t, raw.data(), 0, raw.size());
    }
}

size_t encoder_graph_size(const EncoderConfig & cfg) {
    return 64 + 48 * (size_t) cfg.n_layer;
}

size_t encoder_graph_tensors(const EncoderConfig & cfg) {
    return 2 * encoder_graph_size(cfg);
}

wsp_ggml_cgraph * build_encoder_graph(const EncoderWeights & w, wsp_ggml_context * ctx, wsp_ggml_tensor ** mel_out) {
    const EncoderConfig & cfg = w.config();
    const int64_t         S = cfg.n_state, T = cfg.n_ctx, H = cfg.n_head, D = S / H;
    wsp_ggml_cgraph *     gf = wsp_ggml_new_graph_custom(ctx, encoder_graph_size(cfg), false);

    wsp_ggml_tensor * mel = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 2 * T, cfg.n_mels);
    wsp_ggml_set_name(mel, "mel");
    wsp_ggml_set_input(mel);
    *mel_out = mel;

    wsp_ggml_tensor * cur =
        wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_conv_1d_ph(ctx, w.conv1_w, mel, 1, 1), w.conv1_b));
    cur = wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_conv_1d_ph(ctx, w.conv2_w, cur, 2, 1), w.conv2_b));
    cur = wsp_ggml_add(ctx, wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, cur)), w.pos); // [S, T]

    const float scale = 1.0f / std::sqrt((float) D);
    for (const EncoderLayer & l : w.layers()) {
        wsp_ggml_tensor * inp = cur;
        cur = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, wsp_ggml_norm(ctx, cur, LN_EPS), l.attn_ln_w), l.attn_ln_b);
        wsp_ggml_tensor * q = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l.q_w, cur), l.q_b);
        wsp_ggml_tensor * k = wsp_ggml_mul_mat(ctx, l.k_w, cur);
        wsp_ggml_tensor * v = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l.v_w, cur), l.v_b);

        wsp_ggml_tensor * qh = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, q, D, H, T), 0, 2, 1, 3); // [D, T, H]
        wsp_ggml_tensor * kh = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, k, D, H, T), 0, 2, 1, 3);
        if (cfg.flash_attn) {
            // K and V in F16, as a KV cache holds them
            wsp_ggml_tensor * kf = wsp_ggml_cast(ctx, kh, WSP_GGML_TYPE_F16);
            wsp_ggml_tensor * vf = wsp_ggml_cast(
                ctx, wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, v, D, H, T), 0, 2, 1, 3), WSP_GGML_TYPE_F16);
            wsp_ggml_tensor * att = wsp_ggml_flash_attn_ext(ctx, qh, kf, vf, nullptr, scale, 0.0f, 0.0f); // [D, H, T]
            wsp_ggml_flash_attn_ext_set_prec(att, WSP_GGML_PREC_F32);
            cur = wsp_ggml_reshape_2d(ctx, att, S, T);
        } else {
            wsp_ggml_tensor * kq = wsp_ggml_soft_max_ext(ctx, wsp_ggml_mul_mat(ctx, kh, qh), nullptr, scale, 0.0f);
            wsp_ggml_tensor * vt =
                wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, v, D, H, T), 1, 2, 0, 3));
            wsp_ggml_tensor * kqv = wsp_ggml_mul_mat(ctx, vt, kq); // [D, T, H]
            cur                   = wsp_ggml_cont_2d(ctx, wsp_ggml_permute(ctx, kqv, 0, 2, 1, 3), S, T);
        }
        cur = wsp_ggml_add(ctx, wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l.o_w, cur), l.o_b), inp);

        wsp_ggml_tensor * ffn_in = cur;
        cur = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, wsp_ggml_norm(ctx, cur, LN_EPS), l.mlp_ln_w), l.mlp_ln_b);
        cur = wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l.mlp0_w, cur), l.mlp0_b));
        cur = wsp_ggml_add(ctx, wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l.mlp1_w, cur), l.mlp1_b), ffn_in);
    }
    cur = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, wsp_ggml_norm(ctx, cur, LN_EPS), w.ln_post_w), w.ln_post_b);
    wsp_ggml_set_name(cur, "encoder_out");
    wsp_ggml_set_output(cur);
    wsp_ggml_build_forward_expand(gf, cur);
    return gf;
}

std::vector<float> random_mel(const EncoderConfig & cfg, uint32_t seed) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float>                    mel((size_t) 2 * cfg.n_ctx * cfg.n_mels);
    for (float & x : mel) {
        x = dist(rng);
    }
    return mel;
}

std::vector<double> reference_encoder(const EncoderWeights & w, const std::vector<float> & mel_in) {
    const EncoderConfig & cfg = w.config();
    const int             S = cfg.n_state, T = cfg.n_ctx, M = cfg.n_mels, L = 2 * T;

    // the graph's mel is [2T, M] with time fastest; the reference works time-major [t][c]
    std::vector<double> x((size_t) L * M);
    for (int m = 0; m < M; ++m) {
        for (int t = 0; t < L; ++t) {
            x[(size_t) t * M + m] = mel_in[(size_t) m * L + t];
        }
    }
    int  ol                       = 0;
    auto h                        = conv1d(x, L, M, host_values(w.conv1_w), 3, S, host_values(w.conv1_b), 1, true, ol);
    h                             = conv1d(h, ol, S, host_values(w.conv2_w), 3, S, host_values(w.conv2_b), 2, true, ol);
    const std::vector<double> pos = host_values(w.pos);
    for (size_t i = 0; i < h.size(); ++i) {
        h[i] += pos[i];
    }
    for (const EncoderLayer & l : w.layers()) {
        auto       cur = layer_norm(h, T, S, host_values(l.attn_ln_w), host_values(l.attn_ln_b));
        const auto qb = host_values(l.q_b), vb = host_values(l.v_b), ob = host_values(l.o_b);
        const auto q   = linear(cur, T, S, host_values(l.q_w), S, &qb);
        const auto k   = linear(cur, T, S, host_values(l.k_w), S, nullptr);
        const auto v   = linear(cur, T, S, host_values(l.v_w), S, &vb);
        const auto att = attention(q, k, v, T, S, cfg.n_head, cfg.flash_attn);
        add_into(h, linear(att, T, S, host_values(l.o_w), S, &ob));

        cur           = layer_norm(h, T, S, host_values(l.mlp_ln_w), host_values(l.mlp_ln_b));
        const auto b0 = host_values(l.mlp0_b), b1 = host_values(l.mlp1_b);
        auto       ffn = linear(cur, T, S, host_values(l.mlp0_w), 4 * S, &b0);
        for (double & f : ffn) {
            f = gelu(f);
        }
        add_into(h, linear(ffn, T, 4 * S, host_values(l.mlp1_w), S, &b1));
    }
    return layer_norm(h, T, S, host_values(w.ln_post_w), host_values(w.ln_post_b));
}

double encoder_flops(const EncoderConfig & cfg) {
    const double S = cfg.n_state, T = cfg.n_ctx, M = cfg.n_mels;
    const double conv = 2.0 * (2 * T) * S * M * 3 + 2.0 * T * S * S * 3;
    const double proj = 2.0 * T * S * S * 4;
    const double attn = 4.0 * T * T * S;
    const double mlp  = 2.0 * T * S * 4 * S * 2;
    return conv + cfg.n_layer * (proj + attn + mlp);
}

} // namespace wsp::model
