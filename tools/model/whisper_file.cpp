// whisper.cpp model files with random weights (see whisper_file.h). The file is, in order: the magic,
// eleven int32 hparams, the mel filterbank, the regular tokens of the vocab, then one record per
// tensor (int32 n_dims, name length, type, ne[0..n_dims), the name, the raw data, no padding).

#include "whisper_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

namespace wsp::model {

namespace {

constexpr int32_t kFirstVocab   = 51864; // English-only: eot at 50256, timestamps up to 51863
constexpr int32_t kLastVocab    = 51866; // multilingual with 100 languages (whisper.cpp knows 100)
constexpr int32_t kMaxAudioCtx  = 1500;  // 30 s of mel frames after the stride-2 conv
constexpr int     kSampleRate   = 16000;
constexpr int     kFrameSize    = 400; // whisper.cpp's WHISPER_N_FFT
constexpr float   kBiasStd      = 0.02f;
constexpr float   kGainStd      = 0.05f;
constexpr float   kDecoderPeStd = 0.02f;
constexpr double  kTwoPi        = 6.283185307179586;

// splitmix64: a portable generator, so one seed gives the same weights with every standard library
class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}

    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    // standard normal by Box-Muller; the uniform is in (0, 1) so the logarithm stays finite
    float normal() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        const double u1 = ((double) (next() >> 11) + 0.5) * 0x1.0p-53;
        const double u2 = ((double) (next() >> 11) + 0.5) * 0x1.0p-53;
        const double r  = std::sqrt(-2.0 * std::log(u1));
        spare_          = (float) (r * std::sin(kTwoPi * u2));
        has_spare_      = true;
        return (float) (r * std::cos(kTwoPi * u2));
    }

private:
    uint64_t state_;
    float    spare_     = 0.0f;
    bool     has_spare_ = false;
};

uint64_t tensor_seed(uint64_t seed, const std::string & name) {
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a of the name, so values do not depend on the tensor order
    for (unsigned char c : name) {
        h = (h ^ c) * 0x100000001b3ull;
    }
    return Rng(seed).next() ^ h;
}

enum class Init {
    Normal,   // N(0, std)
    Gain,     // 1 + N(0, std): layer-norm gains
    Sinusoid, // whisper's fixed encoder positional embedding
};

// a tensor of the file and how write-model draws its values
struct TensorSpec : WhisperTensor {
    Init  init;
    float std;
};

// The tensors of the model, with the names, shapes and types whisper.cpp's loader declares (it checks
// a record only by name, shape and byte size). Matrices, conv kernels and the token embedding are
// scaled by 1/sqrt(fan-in) so that every projection of a layer-normed input keeps unit variance:
// attention scores are of order one and the logits (the token embedding is also the output
// projection) have a standard deviation near one, finite and far from constant.
class SpecBuilder {
public:
    explicit SpecBuilder(const WhisperFileConfig & cfg)
        : cfg_(cfg), vtype_(cfg.wtype == WSP_GGML_TYPE_F32 ? WSP_GGML_TYPE_F32 : WSP_GGML_TYPE_F16) {}

    std::vector<TensorSpec> build() {
        const int32_t s = cfg_.n_audio_state;
        add("encoder.positional_embedding", { s, cfg_.n_audio_ctx }, WSP_GGML_TYPE_F32, Init::Sinusoid, 0.0f);
        add("encoder.conv1.weight", { 3, cfg_.n_mels, s }, vtype_, Init::Normal, fan_in_std(3 * cfg_.n_mels));
        add("encoder.conv1.bias", { 1, s }, WSP_GGML_TYPE_F32, Init::Normal, kBiasStd);
        add("encoder.conv2.weight", { 3, s, s }, vtype_, Init::Normal, fan_in_std(3 * s));
        add("encoder.conv2.bias", { 1, s }, WSP_GGML_TYPE_F32, Init::Normal, kBiasStd);
        for (int i = 0; i < cfg_.n_audio_layer; ++i) {
            const std::string p = "encoder.blocks." + std::to_string(i) + ".";
            attention(p + "attn_ln", p + "attn", s);
            mlp(p, s);
        }
        norm("encoder.ln_post", s);

        const int32_t t = cfg_.n_text_state;
        add("decoder.positional_embedding", { t, cfg_.n_text_ctx }, WSP_GGML_TYPE_F32, Init::Normal, kDecoderPeStd);
        add("decoder.token_embedding.weight", { t, cfg_.n_vocab }, cfg_.wtype, Init::Normal, fan_in_std(t));
        for (int i = 0; i < cfg_.n_text_layer; ++i) {
            const std::string p = "decoder.blocks." + std::to_string(i) + ".";
            attention(p + "attn_ln", p + "attn", t);
            attention(p + "cross_attn_ln", p + "cross_attn", t);
            mlp(p, t);
        }
        norm("decoder.ln", t);
        return std::move(specs_);
    }

private:
    static float fan_in_std(int64_t fan_in) { return (float) (1.0 / std::sqrt((double) fan_in)); }

    void add(const std::string & name, std::vector<int32_t> ne, wsp_ggml_type type, Init init, float std) {
        TensorSpec t;
        t.name = name;
        t.ne   = std::move(ne);
        t.type = type;
        t.init = init;
        t.std  = std;
        specs_.push_back(std::move(t));
    }

    void norm(const std::string & prefix, int32_t n) {
        add(prefix + ".weight", { n }, WSP_GGML_TYPE_F32, Init::Gain, kGainStd);
        add(prefix + ".bias", { n }, WSP_GGML_TYPE_F32, Init::Normal, kBiasStd);
    }

    void matrix(const std::string & name, int32_t n_in, int32_t n_out, bool bias) {
        add(name + ".weight", { n_in, n_out }, cfg_.wtype, Init::Normal, fan_in_std(n_in));
        if (bias) {
            add(name + ".bias", { n_out }, WSP_GGML_TYPE_F32, Init::Normal, kBiasStd);
        }
    }

    // whisper's key projection has no bias
    void attention(const std::string & ln, const std::string & attn, int32_t n) {
        norm(ln, n);
        matrix(attn + ".query", n, n, true);
        matrix(attn + ".key", n, n, false);
        matrix(attn + ".value", n, n, true);
        matrix(attn + ".out", n, n, true);
    }

    void mlp(const std::string & block, int32_t n) {
        norm(block + "mlp_ln", n);
        matrix(block + "mlp.0", n, 4 * n, true);
        matrix(block + "mlp.2", 4 * n, n, true);
    }

    const WhisperFileConfig & cfg_;
    const wsp_ggml_type       vtype_;
    std::vector<TensorSpec>   specs_;
};

// rows [r0, r0 + n_rows) of the tensor's values in F32
void fill_rows(const TensorSpec & spec, Rng & rng, int64_t r0, int64_t n_rows, std::vector<float> & out) {
    const int64_t n = spec.ne[0];
    out.resize((size_t) (n_rows * n));
    if (spec.init == Init::Sinusoid) {
        // row r is position r: sin of r / 10000^(c / (half - 1)) in the first half, cos in the second
        const int64_t half = n / 2;
        const double  step = half > 1 ? std::log(10000.0) / (double) (half - 1) : 0.0;
        for (int64_t r = 0; r < n_rows; ++r) {
            for (int64_t c = 0; c < n; ++c) {
                const double x = (double) (r0 + r) * std::exp(-step * (double) (c % std::max<int64_t>(half, 1)));
                out[r * n + c] = c >= 2 * half ? 0.0f : (float) (c < half ? std::sin(x) : std::cos(x));
            }
        }
        return;
    }
    const float base = spec.init == Init::Gain ? 1.0f : 0.0f;
    for (float & v : out) {
        v = base + spec.std * rng.normal();
    }
}

void set_error(std::string * error, const std::string & message) {
    if (error != nullptr) {
        *error = message;
    }
}

// Sequential writes to a file; remembers the first failure (with errno) and the bytes written.
class FileWriter {
public:
    explicit FileWriter(const std::string & path) : file_(std::fopen(path.c_str(), "wb")) {
        if (!file_) {
            error_ = std::strerror(errno);
        }
    }

    bool ok() const { return error_.empty(); }

    const std::string & error() const { return error_; }

    size_t size() const { return size_; }

    void bytes(const void * data, size_t n) {
        if (ok() && n > 0 && std::fwrite(data, 1, n, file_.get()) != n) {
            error_ = std::strerror(errno);
        }
        size_ += n;
    }

    void i32(int32_t v) { bytes(&v, sizeof(v)); }

    bool close() {
        if (file_ && std::fclose(file_.release()) != 0 && ok()) {
            error_ = std::strerror(errno);
        }
        return ok();
    }

private:
    struct Closer {
        void operator()(FILE * f) const { std::fclose(f); }
    };

    std::unique_ptr<FILE, Closer> file_;
    std::string                   error_;
    size_t                        size_ = 0;
};

// whisper.cpp's ftype for a weight type; -1 where it has none
int32_t file_ftype(wsp_ggml_type type) {
    switch (type) {
        case WSP_GGML_TYPE_F32: return WSP_GGML_FTYPE_ALL_F32;
        case WSP_GGML_TYPE_F16: return WSP_GGML_FTYPE_MOSTLY_F16;
        case WSP_GGML_TYPE_Q4_0: return WSP_GGML_FTYPE_MOSTLY_Q4_0;
        case WSP_GGML_TYPE_Q4_1: return WSP_GGML_FTYPE_MOSTLY_Q4_1;
        case WSP_GGML_TYPE_Q5_0: return WSP_GGML_FTYPE_MOSTLY_Q5_0;
        case WSP_GGML_TYPE_Q5_1: return WSP_GGML_FTYPE_MOSTLY_Q5_1;
        case WSP_GGML_TYPE_Q8_0: return WSP_GGML_FTYPE_MOSTLY_Q8_0;
        case WSP_GGML_TYPE_Q2_K: return WSP_GGML_FTYPE_MOSTLY_Q2_K;
        case WSP_GGML_TYPE_Q3_K: return WSP_GGML_FTYPE_MOSTLY_Q3_K;
        case WSP_GGML_TYPE_Q4_K: return WSP_GGML_FTYPE_MOSTLY_Q4_K;
        case WSP_GGML_TYPE_Q5_K: return WSP_GGML_FTYPE_MOSTLY_Q5_K;
        case WSP_GGML_TYPE_Q6_K: return WSP_GGML_FTYPE_MOSTLY_Q6_K;
        default: return -1;
    }
}

void write_hparams(FileWriter & w, const WhisperFileConfig & cfg) {
    w.i32((int32_t) WSP_GGML_FILE_MAGIC);
    for (int32_t v : { cfg.n_vocab, cfg.n_audio_ctx, cfg.n_audio_state, cfg.n_audio_head, cfg.n_audio_layer,
                       cfg.n_text_ctx, cfg.n_text_state, cfg.n_text_head, cfg.n_text_layer, cfg.n_mels }) {
        w.i32(v);
    }
    // whisper.cpp's quantizer stamps the quantisation version into quantized files' ftype
    const int32_t ftype = file_ftype(cfg.wtype);
    w.i32(wsp_ggml_is_quantized(cfg.wtype) ? WSP_GGML_QNT_VERSION * WSP_GGML_QNT_VERSION_FACTOR + ftype : ftype);
}

void write_filters_and_vocab(FileWriter & w, const WhisperFileConfig & cfg, const std::vector<std::string> & tokens) {
    const int32_t            n_bins  = kFrameSize / 2 + 1;
    const std::vector<float> filters = slaney_mel_filters(cfg.n_mels, kFrameSize, kSampleRate);
    w.i32(cfg.n_mels);
    w.i32(n_bins);
    w.bytes(filters.data(), filters.size() * sizeof(float));

    w.i32((int32_t) tokens.size());
    for (const std::string & text : tokens) {
        w.i32((int32_t) text.size());
        w.bytes(text.data(), text.size());
    }
}

// one tensor record; the values read, converted and written in chunks of rows to bound memory
bool write_tensor(FileWriter & w, const WhisperTensor & spec, const WhisperValues & source, std::string * error) {
    w.i32((int32_t) spec.ne.size());
    w.i32((int32_t) spec.name.size());
    w.i32((int32_t) spec.type);
    for (int32_t n : spec.ne) {
        w.i32(n);
    }
    w.bytes(spec.name.data(), spec.name.size());

    const int64_t        n_per_row  = spec.ne[0];
    const int64_t        rows       = spec.rows();
    const size_t         row_bytes  = wsp_ggml_row_size(spec.type, n_per_row);
    const int64_t        chunk_rows = std::max<int64_t>(1, (int64_t{ 1 } << 20) / n_per_row);
    std::vector<float>   values;
    std::vector<uint8_t> converted;
    for (int64_t r0 = 0; r0 < rows && w.ok(); r0 += chunk_rows) {
        const int64_t n_rows = std::min(chunk_rows, rows - r0);
        values.assign((size_t) (n_rows * n_per_row), 0.0f);
        if (!source(spec, r0, n_rows, values.data(), error)) {
            return false;
        }
        if (spec.type == WSP_GGML_TYPE_F32) {
            w.bytes(values.data(), values.size() * sizeof(float));
            continue;
        }
        converted.resize(row_bytes * (size_t) n_rows);
        if (spec.type == WSP_GGML_TYPE_F16) {
            wsp_ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<wsp_ggml_fp16_t *>(converted.data()),
                                      (int64_t) values.size());
        } else if (wsp_ggml_quantize_chunk(spec.type, values.data(), converted.data(), 0, n_rows, n_per_row, nullptr) !=
                   converted.size()) {
            set_error(error, "quantizing " + spec.name + " to " + wsp_ggml_type_name(spec.type) + " failed");
            return false;
        }
        w.bytes(converted.data(), converted.size());
    }
    return true;
}

} // namespace

bool WhisperFileConfig::validate(std::string * error) const {
    auto fail = [&](const std::string & message) {
        set_error(error, message);
        return false;
    };
    if (n_vocab < kFirstVocab || n_vocab > kLastVocab) {
        return fail("n_vocab must be 51864 (English-only), 51865 (multilingual) or 51866 (large-v3 layout): "
                    "whisper.cpp puts its special tokens at fixed ids from 50256 on and names one language per "
                    "id above them, of which it knows 100");
    }
    if (n_audio_ctx < 1 || n_audio_ctx > kMaxAudioCtx) {
        return fail("n_audio_ctx must be in 1..1500 (the encoder reads 2 * n_audio_ctx mel frames of a 30 s window)");
    }
    if (n_text_ctx < 1) {
        return fail("n_text_ctx must be positive");
    }
    if (n_audio_state != n_text_state) {
        return fail("whisper.cpp requires n_audio_state == n_text_state (the cross-attention applies text-sized "
                    "key/value matrices to the encoder output)");
    }
    if (n_audio_state < 1 || n_audio_head < 1 || n_audio_layer < 1 || n_text_head < 1 || n_text_layer < 1 ||
        n_mels < 1) {
        return fail("state, heads, layers and mels must be positive");
    }
    if (n_audio_state % n_audio_head != 0 || n_text_state % n_text_head != 0) {
        return fail("the state must be a multiple of the number of heads");
    }
    if (file_ftype(wtype) < 0) {
        return fail(std::string("whisper.cpp model files cannot hold ") + wsp_ggml_type_name(wtype) + " weights");
    }
    if (n_audio_state % wsp_ggml_blck_size(wtype) != 0) {
        return fail(std::string(wsp_ggml_type_name(wtype)) + " weights need the state to be a multiple of " +
                    std::to_string(wsp_ggml_blck_size(wtype)));
    }
    // the loader counts elements in int32
    const int64_t s       = n_audio_state;
    const int64_t largest = std::max({ s * n_vocab, 4 * s * s, 3 * s * n_mels, s * n_audio_ctx, s * n_text_ctx,
                                       (int64_t) n_mels * (kFrameSize / 2 + 1) });
    if (largest > std::numeric_limits<int32_t>::max()) {
        return fail("a tensor would have more than 2^31 - 1 elements, which whisper.cpp's loader cannot count");
    }
    return true;
}

std::string WhisperFileConfig::describe() const {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "vocab %d, audio ctx %d state %d heads %d layers %d, text ctx %d state %d heads %d layers %d, "
                  "%d mels, %s",
                  n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state,
                  n_text_head, n_text_layer, n_mels, wsp_ggml_type_name(wtype));
    return buf;
}

bool whisper_file_preset(const std::string & size, WhisperFileConfig & cfg) {
    struct Preset {
        const char * name;
        int32_t      state, heads, layers;
    };
    static const Preset presets[] = {
        { "tiny", 384, 6, 4 },      { "base", 512, 8, 6 },     { "small", 768, 12, 12 },
        { "medium", 1024, 16, 24 }, { "large", 1280, 20, 32 },
    };
    for (const Preset & p : presets) {
        if (size == p.name) {
            cfg.n_audio_state = cfg.n_text_state = p.state;
            cfg.n_audio_head = cfg.n_text_head = p.heads;
            cfg.n_audio_layer = cfg.n_text_layer = p.layers;
            return true;
        }
    }
    return false;
}

bool whisper_file_type(const std::string & name, wsp_ggml_type & type) {
    for (wsp_ggml_type t : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_Q5_1,
                             WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q6_K,
                             WSP_GGML_TYPE_Q5_K, WSP_GGML_TYPE_Q4_K, WSP_GGML_TYPE_Q3_K, WSP_GGML_TYPE_Q2_K }) {
        if (name == wsp_ggml_type_name(t)) {
            type = t;
            return true;
        }
    }
    return false;
}

std::vector<WhisperTensor> whisper_file_tensors(const WhisperFileConfig & cfg) {
    std::vector<TensorSpec>    specs = SpecBuilder(cfg).build();
    std::vector<WhisperTensor> tensors(specs.begin(), specs.end());
    return tensors;
}

std::vector<std::string> whisper_file_tokens(int32_t n_vocab) {
    std::vector<std::string> tokens((size_t) whisper_regular_tokens(n_vocab));
    for (size_t id = 0; id < tokens.size(); ++id) {
        tokens[id] = whisper_token_text((int32_t) id);
    }
    return tokens;
}

WhisperValues whisper_random_values(const WhisperFileConfig & cfg) {
    // the rows of a tensor are asked for in order, each tensor once: a tensor's generator starts at
    // its first row
    struct State {
        std::vector<TensorSpec> specs;
        Rng                     rng{ 0 };
        uint64_t                seed;
    };
    auto state   = std::make_shared<State>();
    state->specs = SpecBuilder(cfg).build();
    state->seed  = cfg.seed;
    return [state](const WhisperTensor & t, int64_t r0, int64_t n_rows, float * out, std::string * error) {
        const auto it = std::find_if(state->specs.begin(), state->specs.end(),
                                     [&](const TensorSpec & s) { return s.name == t.name; });
        if (it == state->specs.end()) {
            set_error(error, "no random values for a tensor named " + t.name);
            return false;
        }
        if (r0 == 0) {
            state->rng = Rng(tensor_seed(state->seed, t.name));
        }
        std::vector<float> values;
        fill_rows(*it, state->rng, r0, n_rows, values);
        std::copy(values.begin(), values.end(), out);
        return true;
    };
}

bool write_whisper_model(const WhisperFileConfig & cfg, const std::string & path, std::string * error,
                         size_t * bytes_written) {
    return write_whisper_model(cfg, whisper_file_tokens(cfg.n_vocab), whisper_random_values(cfg), path, error,
                               bytes_written);
}

bool write_whisper_model(const WhisperFileConfig & cfg, const std::vector<std::string> & tokens,
                         const WhisperValues & values, const std::string & path, std::string * error,
                         size_t * bytes_written) {
    if (!cfg.validate(error)) {
        return false;
    }
    if (tokens.empty() || tokens.size() > (size_t) cfg.n_vocab) {
        set_error(error, "the vocab has " + std::to_string(tokens.size()) + " tokens, not 1.." +
                             std::to_string(cfg.n_vocab) + " (n_vocab)");
        return false;
    }
    // written under a temporary name and renamed when complete: a reader never sees half a model, and
    // a failure removes only the file this function created
    const std::string part = path + ".part";
    FileWriter        w(part);
    if (!w.ok()) {
        set_error(error, "cannot create " + part + ": " + w.error());
        return false;
    }
    write_hparams(w, cfg);
    write_filters_and_vocab(w, cfg, tokens);
    bool ok = true;
    for (const WhisperTensor & spec : whisper_file_tensors(cfg)) {
        if (!(ok = write_tensor(w, spec, values, error)) || !w.ok()) {
            break;
        }
    }
    const bool closed = w.close();
    if (ok && !closed) {
        set_error(error, "writing " + part + " failed: " + w.error());
    }
    if (ok && closed && std::rename(part.c_str(), path.c_str()) != 0) {
        set_error(error, "cannot rename " + part + " to " + path + ": " + std::strerror(errno));
        ok = false;
    }
    if (!ok || !closed) {
        std::remove(part.c_str());
        return false;
    }
    if (bytes_written != nullptr) {
        *bytes_written = w.size();
    }
    return true;
}

std::vector<float> slaney_mel_filters(int n_mels, int n_fft, int sample_rate) {
    // Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above (27 mels per factor 6.4)
    const double f_sp     = 200.0 / 3.0;
    const double log_step = std::log(6.4) / 27.0;
    const double knee_mel = 1000.0 / f_sp;
    auto hz_to_mel = [&](double hz) { return hz < 1000.0 ? hz / f_sp : knee_mel + std::log(hz / 1000.0) / log_step; };
    auto mel_to_hz = [&](double mel) {
        return mel < knee_mel ? mel * f_sp : 1000.0 * std::exp((mel - knee_mel) * log_step);
    };

    // n_mels + 2 points evenly spaced in mel from 0 Hz to Nyquist: filter m rises from point m to point
    // m + 1 and falls to point m + 2, scaled by 2 / (bandwidth in Hz) so that every triangle has equal area
    const int           n_bins  = n_fft / 2 + 1;
    const double        max_mel = hz_to_mel(sample_rate / 2.0);
    std::vector<double> points((size_t) n_mels + 2);
    for (size_t i = 0; i < points.size(); ++i) {
        points[i] = mel_to_hz(max_mel * (double) i / (double) (n_mels + 1));
    }
    std::vector<float> filters((size_t) n_mels * n_bins);
    for (int m = 0; m < n_mels; ++m) {
        const double lo = points[m], mid = points[m + 1], hi = points[m + 2];
        const double area_norm = 2.0 / (hi - lo);
        for (int k = 0; k < n_bins; ++k) {
            const double f      = (double) k * sample_rate / n_fft;
            const double rising = (f - lo) / (mid - lo), falling = (hi - f) / (hi - mid);
            filters[(size_t) m * n_bins + k] = (float) (std::max(0.0, std::min(rising, falling)) * area_norm);
        }
    }
    return filters;
}

std::string whisper_token_text(int32_t id) {
    constexpr int32_t kFirstPrintable = '!', kLastPrintable = '~', kSpaceToken = 220;
    if (id >= 0 && id <= kLastPrintable - kFirstPrintable) {
        return std::string(1, (char) (kFirstPrintable + id));
    }
    if (id == kSpaceToken) {
        return " ";
    }
    std::string letters;
    for (int64_t n = (int64_t) id + 1; n > 0; n = (n - 1) / 26) {
        letters.insert(letters.begin(), (char) ('a' + (n - 1) % 26));
    }
    return " " + letters;
}

int32_t whisper_regular_tokens(int32_t n_vocab) {
    // whisper.cpp moves eot (the first special token) from 50256 to 50257 in multilingual vocabs
    return std::min(n_vocab, n_vocab >= 51865 ? 50257 : 50256);
}

} // namespace wsp::model
