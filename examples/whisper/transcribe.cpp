// whisper_transcribe: the batch job our users run. Transcribes audio and video files (anything
// FFmpeg's libraries decode: audio.h) with whisper.cpp, unchanged, on the CPU, on one context per GPU device, or on one
// context over the all-GPU device; one JSON line per file, transcript files (outputs.h), a progress bar and a summary.
// A file that cannot be read or transcribed is reported and skipped; the exit status is 0 when
// every file is transcribed, 1 when some failed, 2 on bad arguments (checked before the first
// file), 128 + the signal when SIGINT or SIGTERM stopped it (Note [stopping]). On sims the
// summary also gives the bytes moved to, from and between the devices per file.

#include "ggml-all-gpu.h"
#include "ggml-backend.h"
#include "ggml-sim.h"
#include "audio.h"
#include "decoding.h"
#include "manifest.h"
#include "outputs.h"
#include "whisper.h"
#include "workers.h"

#include <CLI/CLI.hpp>

#include <fnmatch.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace wsp::transcribe {
namespace {

namespace fs = std::filesystem;
using Clock  = std::chrono::steady_clock;

// Note [stopping]: SIGINT or SIGTERM (Ctrl-C, a cluster's scheduler) stops the run: the handler
// records the signal and passes SIGTERM on to the worker processes; no new file is started, the
// one a context is transcribing is abandoned (whisper.cpp's abort callback; a worker ends), every
// worker is waited for, and the summary says how many files were not started. The exit status is
// 128 + the signal. A worker also ends when its parent does (PR_SET_PDEATHSIG), so even a parent
// killed outright leaves none behind.
std::atomic<int> g_stop_signal{ 0 };

extern "C" void on_stop_signal(int sig) {
    g_stop_signal.store(sig);
    signal_workers(SIGTERM);
}

bool stopping() {
    return g_stop_signal.load() != 0;
}

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Gpu: the one GPU device there is (what Auto picks with exactly one)
enum class Placement { Auto, PerDevice, AllGpus, Gpu, Cpu };

struct Options {
    std::vector<std::string> inputs;
    std::string              list;
    // the files taken from folders: patterns separated by commas, the usual audio and video names
    std::string glob = "*.wav,*.mp3,*.flac,*.ogg,*.oga,*.opus,*.m4a,*.aac,*.wma,*.webm,*.mp4,*.mkv,*.mov,*.avi";
    std::string model;
    int         threads  = int(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
    std::string language = "en";
    bool        flash    = false;
    std::string srt_dir;
    std::string output_dir;            // --output-dir: the transcript files, mirrored
    std::string output_format = "all"; // --output-format, checked before work
    std::vector<std::string> formats;  // what output_format names
    std::string              json_path;
    int                      max_tokens  = 0;
    bool                     no_fallback = false;
    // decoding, as whisper.cpp's CLI names it; greedy unless --beam-size is over 1
    bool        translate   = false;
    int         beam_size   = 1;
    int         best_of     = 5; // candidates sampled at a temperature over 0 (whisper.cpp's default)
    float       temperature = 0.0f;
    std::string prompt;
    // resumable and sharded runs (manifest.h)
    std::string manifest;             // --manifest, else in --output-dir
    bool        resume       = false; // skip what the manifest says is done
    bool        retry_failed = false; // and do again what it says failed
    std::string shard;                // --shard I/N
    int         shards    = 0;        // --shards N, with JOB_COMPLETION_INDEX
    bool        progress  = false;
    bool        verbose   = false;
    Placement   placement = Placement::Auto;
    // set in a worker process of --per-device (Note [per-device workers]): the device it stands for
    std::string worker_device;

    Decoding decoding() const {
        return { language, translate, beam_size, best_of, temperature, prompt, max_tokens, no_fallback, threads };
    }
};

struct FileResult {
    std::string                file;
    bool                       ok = false;
    std::string                text;
    std::vector<whisper_token> tokens;
    double                     audio_s = 0.0;
    double                     wall_s  = 0.0;
    std::string                device;
    std::string                error;
    std::string                warning;   // of a file transcribed all the same (damaged packets skipped)
    size_t                     moved = 0; // bytes to, from and between sim devices while it ran
};

// ---- output -------------------------------------------------------------------------------------

std::string json_line(const FileResult & r) {
    std::ostringstream o;
    o << "{\"file\":" << json_string(r.file) << ",\"ok\":" << (r.ok ? "true" : "false")
      << ",\"text\":" << json_string(r.text) << ",\"tokens\":[";
    for (size_t i = 0; i < r.tokens.size(); ++i) {
        o << (i ? "," : "") << r.tokens[i];
    }
    char nums[96];
    std::snprintf(nums, sizeof nums, "],\"audio_s\":%.3f,\"wall_s\":%.3f", r.audio_s, r.wall_s);
    o << nums << ",\"device\":" << json_string(r.device);
    if (!r.ok) {
        o << ",\"error\":" << json_string(r.error);
    } else if (!r.warning.empty()) {
        o << ",\"warning\":" << json_string(r.warning);
    }
    o << "}";
    return o.str();
}

// the transcript files a file's run writes: --output-dir's formats, and --srt's .srt
std::string srt_path(const Options & o, const std::string & path) {
    return (fs::path(o.srt_dir) / fs::path(path).filename().replace_extension(".srt")).string();
}
std::vector<std::string> outputs_of(const Options & o, const std::string & path) {
    std::vector<std::string> out;
    for (const std::string & f : o.output_dir.empty() ? std::vector<std::string>{} : o.formats) {
        out.push_back(output_path(o.output_dir, path, f));
    }
    if (!o.srt_dir.empty()) {
        out.push_back(srt_path(o, path));
    }
    return out;
}

// ---- one context ------------------------------------------------------------------------------

struct ContextDeleter {
    void operator()(whisper_context * ctx) const { whisper_free(ctx); }
};
using ContextPtr = std::unique_ptr<whisper_context, ContextDeleter>;

// One whisper context on one device (or on the CPU); transcribes one file at a time.
class Transcriber {
public:
    Transcriber(const Options & o, std::string device) : o_(o), device_(std::move(device)) {}

    bool load(bool use_gpu, std::string & error) {
        whisper_context_params cp = whisper_context_default_params();
        cp.use_gpu                = use_gpu;
        cp.flash_attn             = o_.flash;
        cp.gpu_device             = 0; // the first GPU device: see Note [per-device workers]
        ctx_.reset(whisper_init_from_file_with_params(o_.model.c_str(), cp));
        if (!ctx_) {
            error = "could not load the model " + o_.model + " on " + device_;
        }
        return ctx_ != nullptr;
    }

    // one file; the sims' copy counter says what moved meanwhile (one context per process runs at
    // a time, so the whole delta is this file's)
    FileResult run(const std::string & path) {
        const size_t copied = wsp_ggml_backend_sim_bytes_copied();
        FileResult   r      = transcribe(path);
        r.moved             = wsp_ggml_backend_sim_bytes_copied() - copied;
        return r;
    }

private:
    FileResult transcribe(const std::string & path) {
        const auto t0 = Clock::now();
        FileResult r;
        r.file   = path;
        r.device = device_;
        std::vector<float>      pcm;
        wsp::example::AudioInfo audio;
        if (!wsp::example::decode_audio(path, WHISPER_SAMPLE_RATE, pcm, &audio, &r.error)) {
            r.wall_s = seconds_since(t0);
            return r;
        }
        if (audio.bad_packets > 0) {
            r.warning = std::to_string(audio.bad_packets) + " damaged packet(s) skipped: " + audio.bad_reason;
        }
        r.audio_s = double(pcm.size()) / WHISPER_SAMPLE_RATE;
        if (whisper_full(ctx_.get(), full_params(), pcm.data(), int(pcm.size())) != 0) {
            r.error  = "whisper_full failed";
            r.wall_s = seconds_since(t0);
            return r;
        }
        collect(r);
        if (!write_outputs(path, r.error)) {
            r.wall_s = seconds_since(t0);
            return r;
        }
        r.ok     = true;
        r.wall_s = seconds_since(t0);
        return r;
    }

    whisper_full_params full_params() {
        decoding_ = o_.decoding();
        return wsp::transcribe::full_params(
            decoding_, [](void *) { return stopping(); }, nullptr); // Note [stopping]
    }

    // the text, and the ids of the ordinary (text) tokens: those below EOT
    void collect(FileResult & r) const {
        const whisper_token eot = whisper_token_eot(ctx_.get());
        for (int s = 0; s < whisper_full_n_segments(ctx_.get()); ++s) {
            r.text += whisper_full_get_segment_text(ctx_.get(), s);
            for (int t = 0; t < whisper_full_n_tokens(ctx_.get(), s); ++t) {
                const whisper_token id = whisper_full_get_token_id(ctx_.get(), s, t);
                if (id < eot) {
                    r.tokens.push_back(id);
                }
            }
        }
    }

    // the transcript files: --output-dir's formats, and --srt's .srt (Note [output formats])
    bool write_outputs(const std::string & path, std::string & error) const {
        if (o_.output_dir.empty() && o_.srt_dir.empty()) {
            return true;
        }
        const Transcript t = transcript_of(ctx_.get(), path, o_.language);
        for (const std::string & f : o_.output_dir.empty() ? std::vector<std::string>{} : o_.formats) {
            if (!write_atomically(output_path(o_.output_dir, path, f), render(t, f), &error)) {
                return false;
            }
        }
        return o_.srt_dir.empty() || write_atomically(srt_path(o_, path), render(t, "srt"), &error);
    }

    const Options & o_;
    std::string     device_;
    ContextPtr      ctx_;
    Decoding        decoding_; // what full_params' pointers point into
};

// ---- devices ----------------------------------------------------------------------------------

// a sim, or an all-GPU device over sims: what the sims' copy counter sees
bool on_sims(wsp_ggml_backend_dev_t dev) {
    if (wsp_ggml_backend_dev_is_all_gpu(dev)) {
        dev = wsp_ggml_backend_all_gpu_member(dev, 0);
    }
    return dev != nullptr && wsp_ggml_backend_sim_reg() != nullptr &&
           wsp_ggml_backend_dev_backend_reg(dev) == wsp_ggml_backend_sim_reg();
}

// The worker's result line: "<ok> <audio_s> <wall_s> <moved>\t<error or warning>\t<json line>",
// read back by the parent (the error, or for a file done the warning, without tabs or newlines;
// the JSON line has neither).
std::string encode_result(const FileResult & r) {
    char head[128];
    std::snprintf(head, sizeof head, "%d %.6f %.6f %zu\t", r.ok ? 1 : 0, r.audio_s, r.wall_s, r.moved);
    std::string error = r.ok ? r.warning : r.error;
    std::replace_if(
        error.begin(), error.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
    return head + error + "\t" + json_line(r);
}

bool decode_result(const std::string & line, FileResult & r, std::string & json) {
    const size_t tab1 = line.find('\t');
    const size_t tab2 = tab1 == std::string::npos ? tab1 : line.find('\t', tab1 + 1);
    int          ok   = 0;
    if (tab2 == std::string::npos ||
        std::sscanf(line.c_str(), "%d %lf %lf %zu", &ok, &r.audio_s, &r.wall_s, &r.moved) != 4) {
        return false;
    }
    r.ok                         = ok != 0;
    (r.ok ? r.warning : r.error) = line.substr(tab1 + 1, tab2 - tab1 - 1);
    json                         = line.substr(tab2 + 1);
    return true;
}

// ---- the batch --------------------------------------------------------------------------------

// Collects results from every context: JSON output, stderr reports, progress, per-device load and,
// for the sim devices named, the bytes moved.
class Batch {
public:
    Batch(size_t total, FILE * json, bool progress, std::set<std::string> sims)
        : total_(total), json_(json), progress_(progress), sims_(std::move(sims)) {}

    // each file's outcome appended to m (Note [manifest]), with the size and mtime it had when the
    // run began; a file a stop abandoned gets no line, so a resumed run does it
    void record_to(Manifest * m, const Options * o, std::map<std::string, Stamp> stamps, std::string shard) {
        manifest_ = m;
        options_  = o;
        stamps_   = std::move(stamps);
        shard_    = std::move(shard);
    }

    void add(const FileResult & r, const std::string & json) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (progress_) { // the bar's line cleared first: on one terminal the JSON line starts a line of its own
            std::fprintf(stderr, "\r\033[K");
            std::fflush(stderr);
        }
        std::fprintf(json_, "%s\n", json.c_str());
        std::fflush(json_);
        if (!r.ok) {
            std::fprintf(stderr, "whisper_transcribe: %s: %s\n", r.file.c_str(), r.error.c_str());
        } else if (!r.warning.empty()) {
            std::fprintf(stderr, "whisper_transcribe: %s: %s\n", r.file.c_str(), r.warning.c_str());
        }
        if (manifest_ && (r.ok || !stopping())) {
            record(r);
        }
        ++done_;
        (r.ok ? ok_ : failed_) += 1;
        audio_s_ += r.audio_s;
        Load & l = load_[r.device];
        l.files += 1;
        l.audio_s += r.audio_s;
        l.busy_s += r.wall_s;
        l.moved += r.moved;
        if (r.ok && l.ok++ == 0) {
            l.first_moved = r.moved;
        }
        if (progress_) {
            draw();
        }
    }

    void summary(FILE * out, double wall_s, const std::string & placement) const {
        if (progress_) {
            std::fprintf(stderr, "\n");
        }
        std::fprintf(out,
                     "summary: %zu files ok, %zu failed, %zu skipped (done before), %.2f s (%.3f h) of audio in %.2f s "
                     "wall, %.2f audio s/s (%s)\n",
                     ok_, failed_, skipped_, audio_s_, audio_s_ / 3600.0, wall_s, wall_s > 0 ? audio_s_ / wall_s : 0.0,
                     placement.c_str());
        size_t moved = 0, first = 0, n_first = 0;
        for (const auto & [device, l] : load_) {
            std::fprintf(out, "  %-12s %4zu files %9.2f s of audio %8.2f audio s/s busy", device.c_str(), l.files,
                         l.audio_s, l.busy_s > 0 ? l.audio_s / l.busy_s : 0.0);
            if (sims_.count(device) != 0) {
                std::fprintf(out, " %9.2f MiB moved", l.moved / 1048576.0);
                moved += l.moved;
                first += l.first_moved;
                n_first += l.ok > 0 ? 1 : 0;
            }
            std::fprintf(out, "\n");
        }
        if (sims_.empty()) {
            return;
        }
        // a context's first file also carries its one-time copies (the all-GPU device spreads the
        // weights then), so it is told apart from the files after it
        const double mib = 1048576.0;
        std::fprintf(out, "moved: %.2f MiB to, from and between the sim devices: %.2f MiB per context's first file",
                     moved / mib, n_first ? first / mib / double(n_first) : 0.0);
        if (ok_ > n_first) {
            std::fprintf(out, ", %.2f MiB per later file", (moved - first) / mib / double(ok_ - n_first));
        }
        std::fprintf(out, "\n");
    }

    size_t failed() const { return failed_; }

    void skipped(size_t n) { skipped_ = n; }

    size_t reported() const { return done_; }

private:
    struct Load {
        size_t files   = 0;
        double audio_s = 0.0, busy_s = 0.0;        // busy: the files' wall seconds
        size_t ok = 0, moved = 0, first_moved = 0; // the sims' bytes, in all and in the first ok file
    };

    void record(const FileResult & r) {
        Entry e;
        e.path     = r.file;
        e.stamp    = stamps_[r.file];
        e.ok       = r.ok;
        e.outputs  = r.ok ? outputs_of(*options_, r.file) : std::vector<std::string>{};
        e.audio_s  = r.audio_s;
        e.wall_s   = r.wall_s;
        e.finished = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        e.device   = r.device;
        e.error    = r.error;
        e.shard    = shard_;
        std::string error;
        if (!manifest_->append(e, error) && manifest_errors_++ == 0) {
            std::fprintf(stderr, "whisper_transcribe: %s\n", error.c_str());
        }
    }

    void draw() const {
        const int    width   = 30;
        const int    filled  = total_ ? int(width * done_ / total_) : width;
        const double elapsed = seconds_since(t0_);
        std::fprintf(stderr, "\r[%s%s] %zu/%zu files, %.1f s audio, %.1f s elapsed", std::string(filled, '#').c_str(),
                     std::string(width - filled, '.').c_str(), done_, total_, audio_s_, elapsed);
        if (done_ > 0 && done_ < total_) { // at the pace so far
            std::fprintf(stderr, ", ETA %.0f s", elapsed / double(done_) * double(total_ - done_));
        }
        std::fflush(stderr);
    }

    std::mutex                   mutex_;
    size_t                       total_, done_ = 0, ok_ = 0, failed_ = 0, skipped_ = 0;
    double                       audio_s_ = 0.0;
    FILE *                       json_;
    bool                         progress_;
    std::set<std::string>        sims_; // the devices whose moved bytes are reported
    Manifest *                   manifest_ = nullptr;
    const Options *              options_  = nullptr;
    std::map<std::string, Stamp> stamps_;
    std::string                  shard_;
    size_t                       manifest_errors_ = 0;
    Clock::time_point            t0_              = Clock::now();
    std::map<std::string, Load>  load_;
};

std::string stopped_error() {
    return std::string("stopped by ") + (g_stop_signal.load() == SIGINT ? "SIGINT" : "SIGTERM") + " before it finished";
}

FileResult failure(const std::string & path, const std::string & device, const std::string & error) {
    FileResult r;
    r.file   = path;
    r.device = device;
    r.error  = error;
    return r;
}

// what each member of an all-GPU device holds of the weights; asked while the context lives
std::string weight_bytes(wsp_ggml_backend_dev_t dev) {
    std::string out = std::string("  weights on ") + wsp_ggml_backend_dev_name(dev) + " by member:";
    for (size_t i = 0; i < wsp_ggml_backend_all_gpu_member_count(dev); ++i) {
        char buf[160];
        std::snprintf(buf, sizeof buf, " %s %.2f MiB",
                      wsp_ggml_backend_dev_name(wsp_ggml_backend_all_gpu_member(dev, i)),
                      wsp_ggml_backend_all_gpu_weight_bytes(dev, i) / 1048576.0);
        out += buf;
    }
    return out + "\n";
}

// one context in this process: the CPU, the only GPU, or the all-GPU device
// the weight bytes per member when dev is the all-GPU device (else "")
std::string run_in_process(const Options & o, const std::vector<std::string> & files, wsp_ggml_backend_dev_t dev,
                           Batch & batch) {
    const bool        use_gpu = dev != nullptr;
    const std::string device  = use_gpu ? wsp_ggml_backend_dev_name(dev) : "CPU";
    Transcriber       t(o, device);
    std::string       error;
    const bool        loaded = t.load(use_gpu, error);
    for (size_t i = 0; i < files.size() && !stopping(); ++i) {
        FileResult r = loaded ? t.run(files[i]) : failure(files[i], device, error);
        if (!r.ok && stopping()) {
            r.error = stopped_error();
        }
        batch.add(r, json_line(r));
    }
    return loaded && use_gpu && wsp_ggml_backend_dev_is_all_gpu(dev) ? weight_bytes(dev) : "";
}

std::vector<std::string> worker_args(const Options & o, const std::string & device) {
    std::vector<std::string> a = { "whisper_transcribe",
                                   "--worker-device",
                                   device,
                                   "--model",
                                   o.model,
                                   "--threads",
                                   std::to_string(o.threads),
                                   "--language",
                                   o.language,
                                   "--max-tokens",
                                   std::to_string(o.max_tokens),
                                   "--beam-size",
                                   std::to_string(o.beam_size),
                                   "--best-of",
                                   std::to_string(o.best_of),
                                   "--temperature",
                                   std::to_string(o.temperature) };
    if (o.translate) {
        a.push_back("--translate");
    }
    if (!o.prompt.empty()) {
        a.insert(a.end(), { "--prompt", o.prompt });
    }
    if (o.flash) {
        a.push_back("--flash");
    }
    if (o.no_fallback) {
        a.push_back("--no-fallback");
    }
    if (o.verbose) {
        a.push_back("--verbose");
    }
    if (!o.srt_dir.empty()) {
        a.insert(a.end(), { "--srt", o.srt_dir });
    }
    if (!o.output_dir.empty()) {
        a.insert(a.end(), { "--output-dir", o.output_dir, "--output-format", o.output_format });
    }
    return a;
}

// one worker process per single GPU device, fed from one queue (Note [per-device workers])
void run_per_device(const Options & o, const std::vector<std::string> & files,
                    const std::vector<wsp_ggml_backend_dev_t> & devs, Batch & batch) {
    std::vector<std::unique_ptr<WorkerProcess>> workers;
    for (auto * dev : devs) {
        const std::string name = wsp_ggml_backend_dev_name(dev);
        auto              w    = std::make_unique<WorkerProcess>(name);
        WorkerEnv         env;
        std::string       error;
        if (!worker_env(dev, env, error) || !w->start(worker_args(o, name), env, error)) {
            std::fprintf(stderr, "whisper_transcribe: no worker for %s: %s\n", name.c_str(), error.c_str());
            continue;
        }
        if (stopping()) { // the signal came while it started (Note [stopping])
            w->signal(SIGTERM);
        }
        workers.push_back(std::move(w));
    }
    std::atomic<size_t>      next{ 0 };
    std::vector<std::thread> threads;
    for (auto & w : workers) {
        threads.emplace_back([&, wp = w.get()] {
            for (size_t i; !stopping() && (i = next.fetch_add(1)) < files.size();) {
                std::string       line, json;
                FileResult        r       = failure(files[i], wp->device(), "");
                const std::string request = files[i] + "\n"; // a path; its result line back
                if (wp->write_all(request.data(), request.size()) && wp->read_line(line) == 1 &&
                    decode_result(line, r, json)) {
                    r.file   = files[i];
                    r.device = wp->device();
                    batch.add(r, json);
                    continue;
                }
                // the worker is gone (it could not load the model, or died, or was stopped): this
                // file fails, the others go to the remaining workers
                r.error = stopping() ? stopped_error() : "the worker process for " + wp->device() + " exited";
                batch.add(r, json_line(r));
                return;
            }
        });
    }
    for (auto & t : threads) {
        t.join();
    }
    for (auto & w : workers) {
        w->stop();
    }
    // files no worker could take (no worker started, or every one exited)
    for (size_t i; !stopping() && (i = next.fetch_add(1)) < files.size();) {
        const FileResult r = failure(files[i], "(none)", "no worker process left to transcribe it");
        batch.add(r, json_line(r));
    }
}

// the worker side: one context on this process's only GPU device, paths on stdin, results on stdout
int worker_main(const Options & o) {
    const auto devs = gpu_devices();
    if (devs.size() != 1) {
        std::fprintf(stderr, "whisper_transcribe: worker for %s sees %zu GPU devices, expected exactly one\n",
                     o.worker_device.c_str(), devs.size());
        return 1;
    }
    Transcriber t(o, o.worker_device);
    std::string error;
    if (!t.load(true, error)) {
        std::fprintf(stderr, "whisper_transcribe: worker: %s\n", error.c_str());
        return 1;
    }
    for (std::string path; std::getline(std::cin, path);) {
        std::printf("%s\n", encode_result(t.run(path)).c_str());
        std::fflush(stdout);
    }
    return 0;
}

// ---- arguments --------------------------------------------------------------------------------

// the paths of a list, one a line (a list file, or standard input)
// whether a file name matches one of --glob's comma-separated patterns, case-insensitively
bool matches_glob(const std::string & globs, const std::string & name) {
    std::istringstream patterns(globs);
    for (std::string p; std::getline(patterns, p, ',');) {
        if (!p.empty() && fnmatch(p.c_str(), name.c_str(), FNM_CASEFOLD) == 0) {
            return true;
        }
    }
    return false;
}

void read_list(std::istream & in, std::vector<std::string> & inputs) {
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        if (!line.empty()) {
            inputs.push_back(line);
        }
    }
}

bool expand_inputs(const Options & o, std::vector<std::string> & files) {
    std::vector<std::string> inputs;
    for (const auto & in : o.inputs) {
        if (in == "-") { // the paths on standard input
            read_list(std::cin, inputs);
        } else {
            inputs.push_back(in);
        }
    }
    if (!o.list.empty()) {
        std::ifstream f(o.list);
        if (!f) {
            std::fprintf(stderr, "whisper_transcribe: cannot read the list %s\n", o.list.c_str());
            return false;
        }
        read_list(f, inputs);
    }
    for (const auto & in : inputs) {
        std::error_code ec;
        if (!fs::is_directory(in, ec)) {
            files.push_back(in); // a missing or unreadable file is reported when it is read
            continue;
        }
        std::vector<std::string> found;
        for (const auto & e : fs::recursive_directory_iterator(in, fs::directory_options::skip_permission_denied, ec)) {
            if (!e.is_regular_file()) {
                continue;
            }
            if (matches_glob(o.glob, e.path().filename().string())) {
                found.push_back(e.path().string());
            } else {
                std::fprintf(stderr, "whisper_transcribe: skipped %s: its name does not match --glob %s\n",
                             e.path().c_str(), o.glob.c_str());
            }
        }
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
    }
    return true;
}

void log_callback(enum wsp_ggml_log_level level, const char * text, void * user) {
    const bool verbose = *static_cast<const bool *>(user);
    if (verbose || level == WSP_GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

// everything a run needs, checked before the first file (a missing model or an unwritable folder
// is one error, not one per file): false, said on stderr
bool check_before_work(const Options & o) {
    std::error_code ec;
    if (!fs::is_regular_file(o.model, ec) || !std::ifstream(o.model)) {
        std::fprintf(stderr, "whisper_transcribe: cannot read the model %s\n", o.model.c_str());
        return false;
    }
    if (!language_known(o.language)) {
        std::fprintf(stderr, "whisper_transcribe: --language %s is not a language whisper knows (one of %s)\n",
                     o.language.c_str(), known_languages().c_str());
        return false;
    }
    for (const auto & [flag, dir] :
         { std::make_pair("--srt", o.srt_dir), std::make_pair("--output-dir", o.output_dir) }) {
        if (dir.empty()) {
            continue;
        }
        fs::create_directories(dir, ec);
        const fs::path probe = fs::path(dir) / ".whisper_transcribe.probe";
        const bool     ok    = bool(std::ofstream(probe));
        fs::remove(probe, ec);
        if (!ok) {
            std::fprintf(stderr, "whisper_transcribe: cannot write into the %s folder %s\n", flag, dir.c_str());
            return false;
        }
    }
    return true;
}

// The shard's files, less what --resume finds done, with the manifest opened and the shard's list
// of inputs written beside it (Note [manifest]); false with a message on stderr.
bool plan_files(const Options & o, std::vector<std::string> & files, Manifest & manifest,
                std::map<std::string, Stamp> & stamps, Shard & shard, std::string & manifest_file, size_t & skipped) {
    std::string error;
    if (!find_shard(o.shard, o.shards, shard, error)) {
        std::fprintf(stderr, "whisper_transcribe: %s\n", error.c_str());
        return false;
    }
    if (!shard.from.empty()) {
        const size_t all = files.size();
        files            = take_shard(std::move(files), shard);
        std::fprintf(stderr, "whisper_transcribe: shard %s (from %s): %zu of %zu files\n", shard.name().c_str(),
                     shard.from.c_str(), files.size(), all);
    }
    manifest_file = manifest_path(o.manifest, o.output_dir, shard);
    if (manifest_file.empty()) {
        if (o.resume || o.retry_failed) {
            std::fprintf(stderr, "whisper_transcribe: --resume needs a manifest: give --output-dir or --manifest\n");
            return false;
        }
        return true;
    }
    std::string list;
    for (const auto & f : files) {
        list += f + "\n";
    }
    if (!manifest.open(manifest_file, error) || !write_atomically(inputs_path(manifest_file), list, &error)) {
        std::fprintf(stderr, "whisper_transcribe: %s\n", error.c_str());
        return false;
    }
    std::vector<std::string> todo;
    for (const auto & f : files) {
        stamp_of(f, stamps[f]); // a missing file fails when it is read
        if (!(o.resume || o.retry_failed) || !done_before(manifest.last(f), stamps[f], o.retry_failed)) {
            todo.push_back(f);
        }
    }
    if (todo.size() < files.size()) {
        std::fprintf(stderr, "whisper_transcribe: resume: %zu of %zu files done before (%s), skipped\n",
                     files.size() - todo.size(), files.size(), manifest_file.c_str());
    }
    skipped = files.size() - todo.size();
    files   = std::move(todo);
    return true;
}

int batch_main(Options & o) {
    std::vector<std::string> files;
    if (!expand_inputs(o, files)) {
        return 2;
    }
    if (files.empty()) {
        std::fprintf(stderr, "whisper_transcribe: no input files\n");
        return 2;
    }
    if (!check_before_work(o)) {
        return 2;
    }
    Manifest                     manifest;
    std::map<std::string, Stamp> stamps;
    Shard                        shard;
    std::string                  manifest_file;
    size_t                       skipped = 0;
    if (!plan_files(o, files, manifest, stamps, shard, manifest_file, skipped)) {
        return 2;
    }
    if (files.empty()) {
        std::fprintf(stderr, "whisper_transcribe: nothing to do\n");
        return 0;
    }
    FILE * json = stdout;
    if (!o.json_path.empty() && (json = std::fopen(o.json_path.c_str(), "w")) == nullptr) {
        std::fprintf(stderr, "whisper_transcribe: cannot write %s\n", o.json_path.c_str());
        return 2;
    }
    const auto singles = single_gpu_devices();
    if (o.placement == Placement::Auto) { // one GPU: that GPU, in this process
        o.placement = singles.size() >= 2   ? Placement::PerDevice
                      : singles.size() == 1 ? Placement::Gpu
                                            : Placement::Cpu;
    }
    const auto gpus = gpu_devices();
    if (o.placement == Placement::AllGpus && (gpus.empty() || !wsp_ggml_backend_dev_is_all_gpu(gpus[0]))) {
        std::fprintf(stderr, "whisper_transcribe: --all-gpus needs two or more GPU devices of one reg\n");
        return 2;
    }
    if (o.placement == Placement::PerDevice && singles.empty()) {
        std::fprintf(stderr, "whisper_transcribe: --per-device needs a GPU device\n");
        return 2;
    }
    // the devices (as the results name them) that are sims or span sims
    std::set<std::string> sims;
    if (o.placement == Placement::PerDevice) {
        for (auto * dev : singles) {
            if (on_sims(dev)) {
                sims.insert(wsp_ggml_backend_dev_name(dev));
            }
        }
    } else if (o.placement == Placement::AllGpus && on_sims(gpus[0])) {
        sims.insert(wsp_ggml_backend_dev_name(gpus[0]));
    } else if (o.placement == Placement::Gpu && on_sims(singles[0])) {
        sims.insert(wsp_ggml_backend_dev_name(singles[0]));
    }
    const bool progress = o.progress || isatty(2);
    Batch      batch(files.size(), json, progress, sims);
    batch.skipped(skipped);
    if (!manifest_file.empty()) {
        batch.record_to(&manifest, &o, std::move(stamps), shard.from.empty() ? "" : shard.name());
    }
    const auto  t0 = Clock::now();
    std::string placement, weights;
    if (o.placement == Placement::PerDevice) {
        run_per_device(o, files, singles, batch);
        placement = "per-device, " + std::to_string(singles.size()) + " contexts";
    } else if (o.placement == Placement::AllGpus) {
        weights   = run_in_process(o, files, gpus[0], batch);
        placement = std::string("all-gpus, one context on ") + wsp_ggml_backend_dev_name(gpus[0]);
    } else if (o.placement == Placement::Gpu) {
        run_in_process(o, files, singles[0], batch);
        placement = std::string("the one GPU, one context on ") + wsp_ggml_backend_dev_name(singles[0]);
    } else {
        run_in_process(o, files, nullptr, batch);
        placement = "cpu";
    }
    if (!shard.from.empty()) {
        placement += ", shard " + shard.name();
    }
    batch.summary(stderr, seconds_since(t0), placement);
    std::fputs(weights.c_str(), stderr);
    if (json != stdout) {
        std::fclose(json);
    }
    if (const int sig = g_stop_signal.load()) {
        std::fprintf(stderr, "whisper_transcribe: stopped by %s: %zu of %zu files not started\n",
                     sig == SIGINT ? "SIGINT" : "SIGTERM", files.size() - batch.reported(), files.size());
        return 128 + sig;
    }
    return batch.failed() == 0 ? 0 : 1;
}

// a whole number in lo..hi, refused in plain words ("0 is not a whole number from 1 to 1024")
CLI::Validator whole_number(long lo, long hi) {
    const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
    return CLI::Validator(
        [lo, hi, range](std::string & v) {
            char *     end = nullptr;
            const long n   = std::strtol(v.c_str(), &end, 10);
            const bool ok  = end != v.c_str() && *end == '\0' && n >= lo && n <= hi;
            return ok ? std::string() : v + " is not a whole number from " + range;
        },
        std::to_string(lo) + ".." + std::to_string(hi));
}

void add_options(CLI::App & app, Options & o) {
    app.add_option("inputs", o.inputs,
                   "audio or video files, folders searched (with their subfolders) for --glob's files, - for "
                   "paths on stdin");
    app.add_option("--list", o.list, "a file of input paths, one a line");
    app.add_option("--glob", o.glob,
                   "the names of the files taken from folders: patterns separated by commas (case-insensitive)")
        ->capture_default_str();
    app.add_option("--model", o.model, "the whisper model (ggml .bin)")->required();
    app.add_option("--threads", o.threads, "CPU threads per context")->check(whole_number(1, 1024));
    app.add_option("--language", o.language, "spoken language");
    app.add_flag("--flash", o.flash, "flash attention");
    app.add_option("--srt", o.srt_dir, "write one .srt per input into this folder (its file name alone)");
    app.add_option("--output-dir", o.output_dir,
                   "write the transcripts here, in the inputs' folders as given (no two inputs share an output)");
    app.add_option("--output-format", o.output_format, "txt, vtt, srt, tsv, json, a list of them, or all")
        ->capture_default_str()
        ->check(CLI::Validator(
            [&o](std::string & v) {
                std::string bad;
                return parse_output_formats(v, o.formats, &bad)
                           ? std::string()
                           : "'" + bad + "' is not an output format (txt, vtt, srt, tsv, json, all)";
            },
            "FORMATS"));
    app.add_option("--json", o.json_path, "write the JSON lines here instead of stdout");
    app.add_option("--max-tokens", o.max_tokens, "at most this many tokens per segment (0: no limit)")
        ->check(whole_number(0, 100000));
    app.add_flag("--no-fallback", o.no_fallback, "no retries at higher temperatures");
    app.add_flag("--translate", o.translate, "translate into English");
    // whisper.cpp runs at most 8 decoders (WHISPER_MAX_DECODERS)
    app.add_option("--beam-size", o.beam_size, "beam search with this many beams (1: greedy)")
        ->capture_default_str()
        ->check(whole_number(1, 8));
    app.add_option("--best-of", o.best_of, "candidates sampled when the temperature is over 0")
        ->capture_default_str()
        ->check(whole_number(1, 8));
    app.add_option("--temperature", o.temperature, "sampling temperature (0: the most likely token)")
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string & v) {
                char *       end = nullptr;
                const double t   = std::strtod(v.c_str(), &end);
                return end != v.c_str() && *end == '\0' && t >= 0.0 && t <= 1.0
                           ? std::string()
                           : v + " is not a temperature from 0 to 1";
            },
            "0..1"));
    app.add_option("--prompt", o.prompt, "text that comes before the first window (names, spellings, style)");
    app.add_option("--manifest", o.manifest,
                   "append a JSON line per file here (default: manifest.jsonl in --output-dir, "
                   "manifest-I-of-N.jsonl for a shard)");
    app.add_flag("--resume", o.resume, "skip the files the manifest has done, unchanged, with their outputs");
    app.add_flag("--retry-failed", o.retry_failed, "as --resume, and do again the files that failed");
    app.add_option("--shard", o.shard,
                   "do shard I of N (I/N) of the sorted inputs; by default from Slurm's or Kubernetes' environment");
    app.add_option("--shards", o.shards, "the number of shards, with Kubernetes' JOB_COMPLETION_INDEX (or WSP_SHARDS)")
        ->check(whole_number(1, 1000000));
    app.add_flag("--progress", o.progress, "draw the progress bar even when stderr is not a terminal");
    app.add_flag("--verbose", o.verbose, "show whisper.cpp's and ggml's log");
    auto * per = app.add_flag_callback(
        "--per-device", [&] { o.placement = Placement::PerDevice; },
        "one context per GPU device, files dealt to whichever is free "
        "(default with 2+ GPU devices)");
    auto * all = app.add_flag_callback(
        "--all-gpus", [&] { o.placement = Placement::AllGpus; },
        "one context on the all-GPU device, which spreads over every GPU");
    auto * cpu = app.add_flag_callback(
        "--cpu", [&] { o.placement = Placement::Cpu; }, "one context on the CPU");
    per->excludes(all)->excludes(cpu);
    all->excludes(cpu);
    app.add_option("--worker-device", o.worker_device)->group(""); // Note [per-device workers]
}

} // namespace
} // namespace wsp::transcribe

// Summary and reports go to stderr, so stdout carries the JSON lines alone.
int main(int argc, char ** argv) {
    using namespace wsp::transcribe;
    if (argc >= 2 && std::strcmp(argv[1], "merge") == 0) { // whisper_transcribe merge DIR
        if (argc != 3 || argv[2][0] == '-') {
            std::fprintf(stderr, "usage: whisper_transcribe merge DIR (the folder of the shards' manifests)\n");
            return 2;
        }
        return merge_main(argv[2]);
    }
    Options  o;
    CLI::App app{ "whisper_transcribe: batch transcription with whisper.cpp on wsp-ggml" };
    add_options(app, o);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError & e) {
        const int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    }
    std::string bad; // the default's formats ("all"), or the ones --output-format named
    parse_output_formats(o.output_format, o.formats, &bad);
    if (o.list.empty() && o.inputs.empty() && o.worker_device.empty()) {
        std::fprintf(stderr, "whisper_transcribe: give audio files, folders or --list\n%s", app.help().c_str());
        return 2;
    }
    // the registry orders its devices at its first use: the all-GPU device goes first among the GPU
    // devices (so whisper.cpp's gpu_device = 0 picks it) only when this is set before any wsp_ggml
    // or whisper call
    if (o.placement == Placement::AllGpus) {
        setenv("WSP_GGML_ALL_GPUS", "1", 1);
    }
    std::signal(SIGPIPE, SIG_IGN); // a worker that died is seen as a failed write, not a signal
    if (o.worker_device.empty()) { // Note [stopping]
        struct sigaction sa = {};
        sa.sa_handler       = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);
    } else {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
    }
    whisper_log_set(log_callback, &o.verbose);
    wsp_ggml_log_set(log_callback, &o.verbose);
    return o.worker_device.empty() ? batch_main(o) : worker_main(o);
}
