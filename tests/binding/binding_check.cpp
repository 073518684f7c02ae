// A small client of whisper.rn's own binding (rn-whisper.cpp, rn-audioutils.cpp): links it with
// whisper.cpp and wsp-ggml and calls the functions that need no model. system_info() must list
// exactly the features wsp_ggml_cpu_has_* report; a realtime job takes PCM slices, converts them and
// writes them as a WAV file. Exits 0 when every check holds, 1 with the failures printed.

#include "rn-audioutils.h"
#include "rn-whisper.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace rnwhisper {
// defined in rn-whisper.cpp, not declared in its header (the React Native modules declare it)
const char * system_info(void);
} // namespace rnwhisper

namespace {

int failures = 0;

void check(bool ok, const std::string & what) {
    if (!ok) {
        std::fprintf(stderr, "FAILED: %s\n", what.c_str());
        ++failures;
    }
}

void check_system_info() {
    const std::string info = rnwhisper::system_info();
    std::printf("rnwhisper::system_info: \"%s\"\n", info.c_str());
    std::printf("whisper_print_system_info: %s\n", whisper_print_system_info());
    std::set<std::string> listed;
    std::istringstream    words(info);
    for (std::string w; words >> w;) {
        listed.insert(w);
    }
    const struct {
        const char * name;
        int (*has)(void);
    } features[] = {
        { "AVX", wsp_ggml_cpu_has_avx },       { "AVX2", wsp_ggml_cpu_has_avx2 },
        { "AVX512", wsp_ggml_cpu_has_avx512 }, { "FMA", wsp_ggml_cpu_has_fma },
        { "NEON", wsp_ggml_cpu_has_neon },     { "ARM_FMA", wsp_ggml_cpu_has_arm_fma },
        { "F16C", wsp_ggml_cpu_has_f16c },     { "FP16_VA", wsp_ggml_cpu_has_fp16_va },
        { "SSE3", wsp_ggml_cpu_has_sse3 },     { "SSSE3", wsp_ggml_cpu_has_ssse3 },
        { "VSX", wsp_ggml_cpu_has_vsx },
    };
    for (const auto & f : features) {
        check((listed.count(f.name) == 1) == (f.has() == 1),
              std::string("system_info lists ") + f.name + " exactly when wsp_ggml_cpu_has_* says so");
    }
}

void check_realtime_job(const std::string & wav_path) {
    whisper_full_params params = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    rnwhisper::job *    job    = rnwhisper::job_new(7, params);
    check(rnwhisper::job_get(7) == job, "job_get finds the new job");
    rnwhisper::vad_params vad;
    job->set_realtime_params(vad, 2, 1, 0.5f, wav_path.c_str());
    check(job->audio_sec == 2 && job->audio_slice_sec == 1, "set_realtime_params keeps 2 s of 1 s slices");

    // one slice of 1000 samples, a ramp
    std::vector<short> pcm(1000);
    for (size_t i = 0; i < pcm.size(); ++i) {
        pcm[i] = (short) ((int) i * 30 - 15000);
    }
    job->put_pcm_data(pcm.data(), 0, 0, (int) pcm.size());
    check(job->vad_simple(0, 0, (int) pcm.size()), "without VAD every slice counts as speech");
    float * f32 = job->pcm_slice_to_f32(0, (int) pcm.size());
    check(f32 != nullptr && f32[10] == (float) pcm[10] / 32768.0f, "pcm_slice_to_f32 scales by 1/32768");
    delete[] f32;

    const std::vector<uint8_t> raw =
        rnaudioutils::concat_short_buffers(job->pcm_slices, std::vector<int>{ (int) pcm.size() });
    check(raw.size() == pcm.size() * 2 && raw[0] == (uint8_t) (pcm[0] & 0xff), "concat_short_buffers: little-endian");
    rnaudioutils::save_wav_file(raw, wav_path);
    std::ifstream   wav(wav_path, std::ios::binary | std::ios::ate);
    const long long size = wav ? (long long) wav.tellg() : -1;
    check(size == 44 + (long long) raw.size(), "save_wav_file writes a 44-byte header and the samples");

    job->abort();
    check(job->is_aborted(), "a job aborts");
    rnwhisper::job_remove(7);
    check(rnwhisper::job_get(7) == nullptr, "job_remove forgets the job");
}

} // namespace

int main(int argc, char ** argv) {
    const std::string wav = argc > 1 ? argv[1] : "binding_check.wav";
    check_system_info();
    check_realtime_job(wav);
    if (failures == 0) {
        std::printf("PASS: whisper.rn's binding linked against wsp-ggml and ran\n");
    }
    return failures == 0 ? 0 : 1;
}
