// Audio decoding with FFmpeg's libraries (libavformat, libavcodec, libswresample).
//
// Note [audio decoding]
// - One pass, packet by packet: each decoded frame goes straight through the resampler into the
//   output, so the file's own samples (an hour of 48 kHz stereo is 1.4 GB as floats) are never
//   held whole; what is held is the output, 16 kHz mono, which whisper.cpp takes whole anyway.
//   The output is reserved from the declared duration, so it does not grow by doubling.
// - Mono is the average of the channels, set as the resampler's matrix (1/C per channel), not
//   libswresample's default downmix, which weights by channel position and may exceed 1.
// - Codec delay and padding (MP3's encoder delay, Opus's pre-skip, AAC's priming) are dropped by
//   libavcodec from the side data it reads, so the samples line up with the source's.
// - A packet the decoder refuses is skipped, as FFmpeg's own tools do, and counted; the run fails
//   only when nothing could be decoded. A file cut short fails as truncated: the demuxer marks the
//   packet it could read only in part corrupt (a WAV whose data chunk runs past the end), or the
//   file ends before the duration it declares (an MP3's Xing header). Durations estimated from the
//   bit rate are not trusted for this (an MP3 without a Xing header gives what it holds).
// - FFmpeg's log is kept off stderr (the transcriber's JSON and progress lines own it); its last
//   error on this thread is attached to the reason a file failed.

#include "audio.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>

namespace wsp::example {

namespace {

thread_local std::string t_last_ffmpeg_error; // "mp3float: Header missing"

void ffmpeg_log(void * avcl, int level, const char * fmt, va_list args) {
    if (level > AV_LOG_ERROR) {
        return;
    }
    char text[512];
    std::vsnprintf(text, sizeof text, fmt, args);
    std::string message = text;
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
        message.pop_back();
    }
    const AVClass * cls = avcl ? *static_cast<const AVClass * const *>(avcl) : nullptr;
    if (cls && cls->item_name) {
        message = std::string(cls->item_name(avcl)) + ": " + message;
    }
    t_last_ffmpeg_error = message;
}

void quiet_ffmpeg() {
    static std::once_flag once;
    std::call_once(once, [] { av_log_set_callback(ffmpeg_log); });
}

std::string av_error(int code) {
    char text[AV_ERROR_MAX_STRING_SIZE] = {};
    av_strerror(code, text, sizeof text);
    return text;
}

// FFmpeg's reason for code, with what it logged meanwhile where that adds something
std::string reason(int code) {
    std::string r = av_error(code);
    if (!t_last_ffmpeg_error.empty() && t_last_ffmpeg_error.find(r) == std::string::npos) {
        r += " (" + t_last_ffmpeg_error + ")";
    }
    return r;
}

bool fail(std::string * error, const std::string & message) {
    if (error) {
        *error = message;
    }
    return false;
}

struct CloseInput {
    void operator()(AVFormatContext * c) const { avformat_close_input(&c); }
};
struct FreeCodec {
    void operator()(AVCodecContext * c) const { avcodec_free_context(&c); }
};
struct FreePacket {
    void operator()(AVPacket * p) const { av_packet_free(&p); }
};
struct FreeFrame {
    void operator()(AVFrame * f) const { av_frame_free(&f); }
};
struct FreeSwr {
    void operator()(SwrContext * s) const { swr_free(&s); }
};

// Frames in, mono floats at the output rate appended to out. Made for the first frame's format and
// made again (after a flush) if the stream changes format, rate or channels midway.
class Resampler {
public:
    Resampler(int out_rate, std::vector<float> & out) : out_rate_(out_rate), out_(out) {}

    bool add(const AVFrame * f, std::string * error) {
        if (!swr_ || f->format != in_format_ || f->sample_rate != in_rate_ ||
            f->ch_layout.nb_channels != in_channels_) {
            flush();
            if (!make(f, error)) {
                return false;
            }
        }
        return convert(const_cast<const uint8_t **>(f->extended_data), f->nb_samples, error);
    }

    // the samples still inside the resampler's filter
    void flush() {
        if (swr_) {
            convert(nullptr, 0, nullptr);
        }
    }

private:
    bool make(const AVFrame * f, std::string * error) {
        swr_.reset();
        AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
        SwrContext *    s    = nullptr;
        // FFmpeg 5's prototype takes the input layout as non-const; it is only read
        int rc =
            swr_alloc_set_opts2(&s, &mono, AV_SAMPLE_FMT_FLT, out_rate_, const_cast<AVChannelLayout *>(&f->ch_layout),
                                AVSampleFormat(f->format), f->sample_rate, 0, nullptr);
        swr_.reset(s);
        const int channels = f->ch_layout.nb_channels;
        if (rc < 0 || channels < 1) {
            return fail(error, "cannot convert " + std::to_string(channels) + " channels of " +
                                   std::to_string(f->sample_rate) + " Hz: " + reason(rc));
        }
        const std::vector<double> average(size_t(channels), 1.0 / channels);
        if ((rc = swr_set_matrix(s, average.data(), channels)) < 0 || (rc = swr_init(s)) < 0) {
            return fail(error, "cannot set up the resampler: " + reason(rc));
        }
        in_format_   = f->format;
        in_rate_     = f->sample_rate;
        in_channels_ = channels;
        return true;
    }

    bool convert(const uint8_t ** in, int n, std::string * error) {
        for (;;) {
            const int    room = std::max(swr_get_out_samples(swr_.get(), n), 256);
            const size_t at   = out_.size();
            out_.resize(at + size_t(room));
            uint8_t * dst = reinterpret_cast<uint8_t *>(out_.data() + at);
            const int got = swr_convert(swr_.get(), &dst, room, in, n);
            out_.resize(at + size_t(std::max(got, 0)));
            if (got < 0) {
                return fail(error, "resampling failed: " + reason(got));
            }
            if (in || got < room) { // input consumed; or, flushing, nothing more to come
                return true;
            }
        }
    }

    const int                            out_rate_;
    std::vector<float> &                 out_;
    std::unique_ptr<SwrContext, FreeSwr> swr_;
    int                                  in_format_   = -1;
    int                                  in_rate_     = 0;
    int                                  in_channels_ = 0;
};

// the duration the file declares, in seconds; -1 where none, or only one guessed from the bit rate
double declared_seconds(const AVFormatContext * fc, const AVStream * st) {
    if (fc->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE) {
        return -1.0;
    }
    if (st->duration != AV_NOPTS_VALUE && st->duration > 0) {
        return double(st->duration) * av_q2d(st->time_base);
    }
    if (fc->duration != AV_NOPTS_VALUE && fc->duration > 0) {
        return double(fc->duration) / AV_TIME_BASE;
    }
    return -1.0;
}

// every frame the decoder has ready, through the resampler
bool drain(AVCodecContext * codec, AVFrame * frame, Resampler & resampler, std::string * error) {
    for (;;) {
        const int rc = avcodec_receive_frame(codec, frame);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) {
            return true;
        }
        if (rc < 0) {
            return fail(error, "decoding failed: " + reason(rc));
        }
        const bool ok = resampler.add(frame, error);
        av_frame_unref(frame);
        if (!ok) {
            return false;
        }
    }
}

} // namespace

bool decode_audio(const std::string & path, int out_rate, std::vector<float> & out, AudioInfo * info,
                  std::string * error) {
    quiet_ffmpeg();
    t_last_ffmpeg_error.clear();
    out.clear();
    AudioInfo   local;
    AudioInfo & in = info ? *info : local;
    in             = AudioInfo{};

    AVFormatContext * raw = nullptr;
    int               rc  = avformat_open_input(&raw, path.c_str(), nullptr, nullptr);
    if (rc < 0) {
        return fail(error, reason(rc));
    }
    std::unique_ptr<AVFormatContext, CloseInput> fc(raw);
    in.format = fc->iformat->name;
    if ((rc = avformat_find_stream_info(fc.get(), nullptr)) < 0) {
        return fail(error, "cannot read the streams: " + reason(rc));
    }
    const AVCodec * decoder = nullptr;
    const int       index   = av_find_best_stream(fc.get(), AVMEDIA_TYPE_AUDIO, -1, -1, &decoder, 0);
    if (index == AVERROR_STREAM_NOT_FOUND) {
        return fail(error, "no audio stream (" + in.format + ")");
    }
    if (index < 0) {
        return fail(error, "no decoder for its audio stream: " + reason(index));
    }
    AVStream * st = fc->streams[index];
    for (unsigned i = 0; i < fc->nb_streams; ++i) { // a video's other streams are not even demuxed
        fc->streams[i]->discard = int(i) == index ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
    }
    in.codec      = avcodec_get_name(st->codecpar->codec_id);
    in.rate       = st->codecpar->sample_rate;
    in.channels   = st->codecpar->ch_layout.nb_channels;
    in.declared_s = declared_seconds(fc.get(), st);

    std::unique_ptr<AVCodecContext, FreeCodec> codec(avcodec_alloc_context3(decoder));
    if (!codec || (rc = avcodec_parameters_to_context(codec.get(), st->codecpar)) < 0 ||
        (codec->pkt_timebase = st->time_base, rc = avcodec_open2(codec.get(), decoder, nullptr)) < 0) {
        return fail(error, "cannot open the " + in.codec + " decoder: " + reason(codec ? rc : AVERROR(ENOMEM)));
    }
    std::unique_ptr<AVPacket, FreePacket> packet(av_packet_alloc());
    std::unique_ptr<AVFrame, FreeFrame>   frame(av_frame_alloc());
    if (!packet || !frame) {
        return fail(error, "out of memory");
    }
    if (in.declared_s > 0) {
        out.reserve(size_t(in.declared_s * out_rate) + size_t(out_rate)); // a second to spare
    }

    Resampler resampler(out_rate, out);
    while ((rc = av_read_frame(fc.get(), packet.get())) >= 0) {
        if (packet->stream_index == index && (packet->flags & AV_PKT_FLAG_CORRUPT)) {
            // the demuxer's short read: the data ends before the file says it does
            const double at = packet->pts == AV_NOPTS_VALUE ? double(out.size()) / out_rate
                                                            : double(packet->pts) * av_q2d(st->time_base);
            char         text[128];
            std::snprintf(text, sizeof text, "truncated or damaged: FFmpeg found a corrupt packet at %.2f s", at);
            return fail(error, text);
        }
        if (packet->stream_index == index) {
            t_last_ffmpeg_error.clear();
            const int sent = avcodec_send_packet(codec.get(), packet.get());
            if (sent < 0 && sent != AVERROR(EAGAIN)) { // a damaged packet: skipped, counted
                if (in.bad_packets++ == 0) {
                    in.bad_reason = reason(sent);
                }
            }
        }
        av_packet_unref(packet.get());
        if (!drain(codec.get(), frame.get(), resampler, error)) {
            return false;
        }
    }
    if (rc != AVERROR_EOF) {
        return fail(error, "reading failed: " + reason(rc));
    }
    avcodec_send_packet(codec.get(), nullptr); // the decoder's last frames
    if (!drain(codec.get(), frame.get(), resampler, error)) {
        return false;
    }
    resampler.flush();

    in.decoded_s = double(out.size()) / out_rate;
    if (out.empty()) {
        return fail(error, in.bad_packets ? "no audio could be decoded: " + in.bad_reason
                                          : std::string("no audio samples (the file is empty or truncated)"));
    }
    // a few tenths of a second of slack: declared durations may count a codec's padding
    if (in.declared_s > 0 && in.decoded_s < in.declared_s * 0.98 - 0.25) {
        char text[160];
        std::snprintf(text, sizeof text, "truncated: %.2f s of audio where the file declares %.2f s", in.decoded_s,
                      in.declared_s);
        return fail(error, text);
    }
    return true;
}

} // namespace wsp::example
