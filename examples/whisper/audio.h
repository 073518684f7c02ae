#pragma once

// Audio input of whisper_transcribe: any file FFmpeg's libraries read (WAV of any PCM or float
// format, MP3, FLAC, Ogg Vorbis, Opus, M4A/AAC, the first audio stream of a video file), decoded
// and resampled to whisper's rate, mono, by libswresample, packet by packet (Note [audio decoding]
// in audio.cpp).

#include <cstddef>
#include <string>
#include <vector>

namespace wsp::example {

// What the decoder found in a file.
struct AudioInfo {
    std::string format;             // the container, as FFmpeg names it ("wav", "mp3", "ogg", ...)
    std::string codec;              // the audio stream's codec ("pcm_s16le", "opus", ...)
    int         rate        = 0;    // the stream's own sample rate
    int         channels    = 0;    // and channel count, averaged into one
    double      declared_s  = -1.0; // the duration the file declares, -1 where it declares none
    double      decoded_s   = 0.0;  // the samples decoded, in seconds at the output rate
    size_t      bad_packets = 0;    // packets the decoder refused and skipped (a damaged stretch)
    std::string bad_reason;         // the first of those refusals, in FFmpeg's words
};

// Decodes path's first audio stream into mono float samples in [-1, 1] at out_rate: the channels
// averaged, the rate converted by libswresample. On failure (no such file, not audio, no decoder,
// no samples, shorter than the file declares) false with the reason in *error, FFmpeg's words where
// it gave some; the path is not part of it.
bool decode_audio(const std::string & path, int out_rate, std::vector<float> & out, AudioInfo * info,
                  std::string * error);

} // namespace wsp::example
