// whisper_audio: a file as whisper_transcribe hears it (audio.h): 16 kHz mono float32
// little-endian samples on stdout, or with --info one JSON line of what was found and the process's
// peak memory. Exit 1 with FFmpeg's reason when the file cannot be decoded.
//   whisper_audio FILE > samples.f32
//   whisper_audio --info FILE

#include "audio.h"
#include "outputs.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstring>

int main(int argc, char ** argv) {
    const bool info_only = argc == 3 && std::strcmp(argv[1], "--info") == 0;
    if (argc != 2 && !info_only) {
        std::fprintf(stderr, "usage: whisper_audio [--info] FILE\n");
        return 2;
    }
    const std::string       path = argv[argc - 1];
    std::vector<float>      pcm;
    wsp::example::AudioInfo info;
    std::string             error;
    constexpr int           kRate = 16000; // whisper's
    if (!wsp::example::decode_audio(path, kRate, pcm, &info, &error)) {
        std::fprintf(stderr, "whisper_audio: %s: %s\n", path.c_str(), error.c_str());
        return 1;
    }
    if (!info_only) {
        // the host is little-endian on every target this builds for (x86-64, AArch64)
        return std::fwrite(pcm.data(), sizeof(float), pcm.size(), stdout) == pcm.size() ? 0 : 1;
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("{\"file\":%s,\"format\":%s,\"codec\":%s,\"rate\":%d,\"channels\":%d,\"declared_s\":%.3f,"
                "\"seconds\":%.3f,\"samples\":%zu,\"bad_packets\":%zu,\"peak_rss_mib\":%.1f}\n",
                wsp::transcribe::json_string(path).c_str(), wsp::transcribe::json_string(info.format).c_str(),
                wsp::transcribe::json_string(info.codec).c_str(), info.rate, info.channels, info.declared_s,
                info.decoded_s, pcm.size(), info.bad_packets, double(usage.ru_maxrss) / 1024.0);
    return 0;
}
