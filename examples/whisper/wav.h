#pragma once

// Audio input of the test tools (whisper_check, whisper_bench, whisper_tokens): the tests' own
// 16-bit PCM WAV files mixed down to mono, and a band-limited resampler to whisper's 16 kHz (Note
// [resampler] in wav.cpp). They run on GPU machines that have no FFmpeg; whisper_transcribe, which
// reads what users have, decodes with FFmpeg (audio.h).

#include <string>
#include <vector>

namespace wsp::example {

// Reads a RIFF/WAVE file of 16-bit integer PCM (format 1, or WAVE_FORMAT_EXTENSIBLE with the PCM
// sub-format), any rate, any channel count; the channels are averaged into mono in [-1, 1).
// false with a message on anything else.
bool read_wav_mono(const std::string & path, std::vector<float> & mono, int & sample_rate, std::string * error);

// The signal resampled from src_rate to dst_rate with a Blackman-windowed sinc (Note [resampler]).
std::vector<float> resample(const std::vector<float> & in, int src_rate, int dst_rate);

} // namespace wsp::example
