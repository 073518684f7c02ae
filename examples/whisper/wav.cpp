// WAV reading and resampling for whisper_check. The reader walks the RIFF chunks (fmt, data, and
// any others it skips) with every field read little-endian byte by byte, so it runs on any host;
// a data chunk whose size runs past the end of the file (a streamed WAV) is cut at the end.

#include "wav.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>

namespace wsp::example {

namespace {

uint32_t le16(const uint8_t * p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8;
}
uint32_t le32(const uint8_t * p) {
    return le16(p) | le16(p + 2) << 16;
}

bool fail(std::string * error, const std::string & message) {
    if (error) {
        *error = message;
    }
    return false;
}

struct Format {
    uint32_t tag      = 0;
    uint32_t channels = 0;
    uint32_t rate     = 0;
    uint32_t align    = 0;
    uint32_t bits     = 0;
};

constexpr uint32_t kFormatPcm        = 1;
constexpr uint32_t kFormatExtensible = 0xFFFE;

bool parse_format(const uint8_t * p, uint32_t size, Format & f, std::string * error) {
    if (size < 16) {
        return fail(error, "fmt chunk too short");
    }
    f.tag      = le16(p);
    f.channels = le16(p + 2);
    f.rate     = le32(p + 4);
    f.align    = le16(p + 12);
    f.bits     = le16(p + 14);
    if (f.tag == kFormatExtensible) {
        // cbSize, valid bits, channel mask, then the sub-format GUID whose first two bytes are the tag
        if (size < 40) {
            return fail(error, "WAVE_FORMAT_EXTENSIBLE fmt chunk too short");
        }
        f.tag = le16(p + 24);
    }
    if (f.tag != kFormatPcm) {
        return fail(error, "not integer PCM (format tag " + std::to_string(f.tag) + ")");
    }
    if (f.bits != 16) {
        return fail(error, "not 16-bit samples (" + std::to_string(f.bits) + " bits)");
    }
    if (f.channels == 0 || f.rate == 0 || f.align != 2 * f.channels) {
        return fail(error, "inconsistent fmt chunk (channels " + std::to_string(f.channels) + ", rate " +
                               std::to_string(f.rate) + ", block align " + std::to_string(f.align) + ")");
    }
    return true;
}

} // namespace

bool read_wav_mono(const std::string & path, std::vector<float> & mono, int & sample_rate, std::string * error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return fail(error, "cannot open " + path);
    }
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() < 12 || std::string(bytes.begin(), bytes.begin() + 4) != "RIFF" ||
        std::string(bytes.begin() + 8, bytes.begin() + 12) != "WAVE") {
        return fail(error, path + ": not a RIFF/WAVE file");
    }
    Format format;
    bool   have_format = false;
    size_t pos         = 12;
    while (pos + 8 <= bytes.size()) {
        const std::string id(bytes.begin() + pos, bytes.begin() + pos + 4);
        const size_t      body = pos + 8;
        const size_t      size = std::min<size_t>(le32(&bytes[pos + 4]), bytes.size() - body);
        if (id == "fmt ") {
            if (!parse_format(&bytes[body], uint32_t(size), format, error)) {
                return fail(error, path + ": " + *error);
            }
            have_format = true;
        } else if (id == "data") {
            if (!have_format) {
                return fail(error, path + ": data chunk before the fmt chunk");
            }
            const size_t frames = size / format.align;
            mono.assign(frames, 0.0f);
            for (size_t i = 0; i < frames; ++i) {
                int32_t sum = 0;
                for (uint32_t c = 0; c < format.channels; ++c) {
                    sum += int16_t(le16(&bytes[body + i * format.align + 2 * c]));
                }
                mono[i] = float(sum) / (32768.0f * float(format.channels));
            }
            sample_rate = int(format.rate);
            return true;
        }
        pos = body + size + (size & 1); // chunks are padded to an even size
    }
    return fail(error, path + (have_format ? ": no data chunk" : ": no fmt chunk"));
}

// Note [resampler]: band-limited interpolation. Output sample n sits at source position
// x = n * src / dst and is the sum of the source samples k within the kernel's reach, weighted by
// h(x - k) = sinc(fc * (x - k)) * blackman((x - k) / half), where fc = min(1, dst / src) is the
// cutoff relative to the source's Nyquist frequency: when downsampling the kernel stretches by
// src / dst so that nothing above the target's Nyquist frequency folds back into the band.
// kZeroCrossings zero crossings of the sinc on each side (half = kZeroCrossings / fc source
// samples). The weights are normalised to sum to 1 at every position, so DC passes unchanged;
// sums in double. Samples outside the signal count as silence.
std::vector<float> resample(const std::vector<float> & in, int src_rate, int dst_rate) {
    if (src_rate == dst_rate || in.empty()) {
        return in;
    }
    constexpr double   kZeroCrossings = 16.0;
    const double       pi             = std::acos(-1.0);
    const double       step           = double(src_rate) / double(dst_rate);
    const double       fc             = std::min(1.0, 1.0 / step);
    const double       half           = kZeroCrossings / fc;
    const size_t       n_out          = size_t(std::floor(double(in.size()) / step));
    const int64_t      n_in           = int64_t(in.size());
    std::vector<float> out(n_out);
    for (size_t n = 0; n < n_out; ++n) {
        const double  x   = double(n) * step;
        const int64_t k0  = int64_t(std::ceil(x - half));
        const int64_t k1  = int64_t(std::floor(x + half));
        double        acc = 0.0, norm = 0.0;
        for (int64_t k = k0; k <= k1; ++k) {
            const double d    = x - double(k);
            const double u    = d / half;
            const double t    = fc * d;
            const double sinc = t == 0.0 ? 1.0 : std::sin(pi * t) / (pi * t);
            const double w    = 0.42 + 0.5 * std::cos(pi * u) + 0.08 * std::cos(2.0 * pi * u);
            if (k >= 0 && k < n_in) {
                acc += double(in[size_t(k)]) * sinc * w;
            }
            norm += sinc * w;
        }
        out[n] = norm != 0.0 ? float(acc / norm) : 0.0f;
    }
    return out;
}

} // namespace wsp::example
