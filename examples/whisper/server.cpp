// wsp-whisper-server: the OpenAI audio API (POST /v1/audio/transcriptions and /translations,
// GET /v1/models) over whisper.cpp on wsp-ggml, with /health and Prometheus /metrics.
//
// Note [server requests]
// - An upload is checked and decoded on the connection's own thread (audio.h), before it is
//   queued: a file that is not audio, a missing field, an unknown response_format or language is
//   a 400 with an OpenAI-style error object, and costs the engine nothing.
// - The engine is one whisper context (on the CPU, the one GPU, or the all-GPU device, which
//   spreads over every GPU) fed by one queue. At most --queue requests wait; one more is a 429 with
//   Retry-After. A request not answered within --timeout-s is a 504: whisper.cpp's abort callback
//   stops its work, or it is dropped before it starts.
// - SIGTERM or SIGINT: no new connection is accepted, what is in flight finishes within --grace-s
//   (then it is aborted and answered 503), and the process exits 0.
// - --api-key: "Authorization: Bearer KEY" on /v1, compared in time that does not depend on where
//   the first difference is.

#include "audio.h"
#include "decoding.h"
#include "ggml-backend.h"
#include "outputs.h"
#include "whisper.h"

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace fs = std::filesystem;
using json   = nlohmann::ordered_json;
using Clock  = std::chrono::steady_clock;

namespace wsp::transcribe {
namespace {

struct Options {
    std::string model;
    std::string host       = "127.0.0.1";
    int         port       = 8080; // 0: any free port (said on stderr)
    int         threads    = int(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
    bool        cpu        = false;
    bool        all_gpus   = false;
    bool        per_device = false;
    bool        flash      = false;
    int         queue      = 8;
    int         max_upload = 25; // MiB, as OpenAI's API limits an upload
    double      timeout_s  = 300;
    double      grace_s    = 30;
    std::string api_key;
    int         max_tokens  = 0;
    bool        no_fallback = false;
};

std::atomic<int> g_stop_signal{ 0 };

void on_stop_signal(int sig) {
    g_stop_signal.store(sig);
}

// ---- the engine ---------------------------------------------------------------------------------

struct Result {
    bool        ok     = false;
    int         status = 200; // of a failure: 504 timed out, 503 stopped, 500 whisper.cpp failed
    std::string error;
    Transcript  transcript;
};

struct Job {
    std::vector<float>   pcm;
    Decoding             decoding;
    Clock::time_point    deadline;
    std::atomic<bool>    abort{ false };
    std::promise<Result> done;
};

// One whisper context and the queue in front of it (Note [server requests]).
class Engine {
public:
    Engine(const Options & o) : o_(o) {}

    ~Engine() { shutdown(); }

    // loads the model (the caller's thread), then serves the queue on a thread of its own
    bool load(bool use_gpu, const std::string & device, std::string & error) {
        whisper_context_params cp = whisper_context_default_params();
        cp.use_gpu                = use_gpu;
        cp.flash_attn             = o_.flash;
        cp.gpu_device             = 0;
        ctx_                      = whisper_init_from_file_with_params(o_.model.c_str(), cp);
        if (!ctx_) {
            error = "could not load the model " + o_.model;
            return false;
        }
        device_ = device;
        thread_ = std::thread([this] { serve(); });
        return true;
    }

    // false when the queue is full (a 429)
    bool submit(const std::shared_ptr<Job> & job) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (closing_ || int(waiting_.size()) >= o_.queue) {
            return false;
        }
        waiting_.push_back(job);
        ready_.notify_one();
        return true;
    }

    // every job still waiting and the one running are aborted (answered 503)
    void abort_all() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto & j : waiting_) {
            j->abort = true;
        }
        if (running_) {
            running_->abort = true;
        }
    }

    void shutdown() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            closing_ = true;
            ready_.notify_all();
        }
        if (thread_.joinable()) {
            thread_.join();
        }
        if (ctx_) {
            whisper_free(ctx_);
            ctx_ = nullptr;
        }
    }

    size_t waiting() {
        std::lock_guard<std::mutex> lock(mutex_);
        return waiting_.size();
    }

    bool busy() {
        std::lock_guard<std::mutex> lock(mutex_);
        return running_ != nullptr;
    }

    const std::string & device() const { return device_; }

private:
    void serve() {
        for (;;) {
            std::shared_ptr<Job> job;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                ready_.wait(lock, [&] { return closing_ || !waiting_.empty(); });
                if (waiting_.empty()) {
                    return; // closing, and nothing left
                }
                job = waiting_.front();
                waiting_.pop_front();
                running_ = job;
            }
            job->done.set_value(run(*job));
            std::lock_guard<std::mutex> lock(mutex_);
            running_.reset();
        }
    }

    Result run(Job & job) {
        Result     r;
        const bool late = Clock::now() >= job.deadline;
        if (late || job.abort) {
            r.status = late ? 504 : 503;
            r.error  = late ? "timed out waiting in the queue" : "the server is stopping";
            return r;
        }
        // whisper.cpp polls this between its steps: past the deadline or stopping, it gives up
        auto abort = [](void * data) {
            const Job * j = static_cast<const Job *>(data);
            return j->abort.load() || Clock::now() >= j->deadline;
        };
        const whisper_full_params p = full_params(job.decoding, abort, &job);
        if (whisper_full(ctx_, p, job.pcm.data(), int(job.pcm.size())) != 0) {
            r.status = Clock::now() >= job.deadline ? 504 : job.abort ? 503 : 500;
            r.error  = r.status == 504   ? "timed out while transcribing"
                       : r.status == 503 ? "the server is stopping"
                                         : "whisper.cpp failed to transcribe";
            return r;
        }
        r.ok         = true;
        r.transcript = transcript_of(ctx_, "", job.decoding.language);
        return r;
    }

    const Options &                  o_;
    whisper_context *                ctx_ = nullptr;
    std::string                      device_;
    std::thread                      thread_;
    std::mutex                       mutex_;
    std::condition_variable          ready_;
    std::deque<std::shared_ptr<Job>> waiting_;
    std::shared_ptr<Job>             running_;
    bool                             closing_ = false;
};

// ---- metrics ------------------------------------------------------------------------------------

class Metrics {
public:
    void request(int status, double seconds, double audio_s) {
        std::lock_guard<std::mutex> lock(mutex_);
        by_status_[status] += 1;
        if (status == 200) {
            audio_s_ += audio_s;
        }
        latency_sum_ += seconds;
        latency_count_ += 1;
        for (size_t i = 0; i < kBuckets.size(); ++i) {
            buckets_[i] += seconds <= kBuckets[i] ? 1 : 0;
        }
    }

    // Prometheus' text format
    std::string text(size_t queue_depth, bool busy, const std::string & device) {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string                 o;
        o += "# HELP wsp_whisper_requests_total Transcription requests answered, by HTTP status.\n";
        o += "# TYPE wsp_whisper_requests_total counter\n";
        for (const auto & [status, n] : by_status_) {
            o += "wsp_whisper_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
        }
        o += "# HELP wsp_whisper_queue_depth Requests waiting for a worker.\n# TYPE wsp_whisper_queue_depth gauge\n";
        o += "wsp_whisper_queue_depth " + std::to_string(queue_depth) + "\n";
        o +=
            "# HELP wsp_whisper_busy_workers Workers transcribing, by device.\n# TYPE wsp_whisper_busy_workers gauge\n";
        o += "wsp_whisper_busy_workers{device=\"" + device + "\"} " + (busy ? "1" : "0") + "\n";
        o += "# HELP wsp_whisper_audio_seconds_total Seconds of audio transcribed.\n";
        o += "# TYPE wsp_whisper_audio_seconds_total counter\n";
        o += "wsp_whisper_audio_seconds_total " + number(audio_s_) + "\n";
        o += "# HELP wsp_whisper_request_seconds Time from upload received to answer.\n";
        o += "# TYPE wsp_whisper_request_seconds histogram\n";
        for (size_t i = 0; i < kBuckets.size(); ++i) {
            o += "wsp_whisper_request_seconds_bucket{le=\"" + number(kBuckets[i]) + "\"} " +
                 std::to_string(buckets_[i]) + "\n";
        }
        o += "wsp_whisper_request_seconds_bucket{le=\"+Inf\"} " + std::to_string(latency_count_) + "\n";
        o += "wsp_whisper_request_seconds_sum " + number(latency_sum_) + "\n";
        o += "wsp_whisper_request_seconds_count " + std::to_string(latency_count_) + "\n";
        return o;
    }

private:
    static std::string number(double v) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", v);
        return text;
    }

    static constexpr std::array<double, 10> kBuckets = { 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300 };
    std::mutex                              mutex_;
    std::map<int, size_t>                   by_status_;
    double                                  audio_s_ = 0.0, latency_sum_ = 0.0;
    size_t                                  latency_count_ = 0;
    std::array<size_t, kBuckets.size()>     buckets_{};
};

// ---- requests -----------------------------------------------------------------------------------

void error_reply(httplib::Response & res, int status, const std::string & message, const std::string & param = "",
                 const std::string & type = "invalid_request_error", const std::string & code = "") {
    json e = { { "message", message }, { "type", type }, { "param", nullptr }, { "code", nullptr } };
    if (!param.empty()) {
        e["param"] = param;
    }
    if (!code.empty()) {
        e["code"] = code;
    }
    res.status = status;
    res.set_content(json{ { "error", e } }.dump(), "application/json");
}

// equal in time that depends on the lengths alone, not on where they first differ
bool same_secret(const std::string & a, const std::string & b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) {
        diff |= (unsigned char) (a[i] ^ (i < b.size() ? b[i] : 0));
    }
    return diff == 0;
}

// the transcript's whole text: its segments' joined, the space whisper.cpp puts first dropped
std::string text_of(const Transcript & t) {
    std::string text;
    for (const auto & s : t.segments) {
        text += s.text;
    }
    const size_t first = text.find_first_not_of(' ');
    return first == std::string::npos ? "" : text.substr(first);
}

std::string verbose_json(const Transcript & t, double audio_s, bool translate, const Decoding & d) {
    json segments = json::array();
    for (size_t i = 0; i < t.segments.size(); ++i) {
        const Segment & s   = t.segments[i];
        json            ids = json::array();
        for (const auto & tok : s.tokens) {
            ids.push_back(tok.id);
        }
        segments.push_back({ { "id", i },
                             { "start", double(s.t0) / 100.0 },
                             { "end", double(std::max(s.t0, s.t1)) / 100.0 },
                             { "text", s.text },
                             { "tokens", ids },
                             { "temperature", d.temperature } });
    }
    const int lang = whisper_lang_id(t.language.c_str());
    return json{
        { "task", translate ? "translate" : "transcribe" },
        { "language", lang >= 0 ? whisper_lang_str_full(lang) : t.language },
        { "duration", audio_s },
        { "text", text_of(t) },
        { "segments", segments }
    }.dump();
}

class Server {
public:
    Server(const Options & o, Engine & engine, Metrics & metrics) : o_(o), engine_(engine), metrics_(metrics) {}

    void routes(httplib::Server & svr) {
        svr.Post("/v1/audio/transcriptions",
                 [this](const httplib::Request & q, httplib::Response & s) { transcribe(q, s, false); });
        svr.Post("/v1/audio/translations",
                 [this](const httplib::Request & q, httplib::Response & s) { transcribe(q, s, true); });
        svr.Get("/v1/models", [this](const httplib::Request & q, httplib::Response & s) { models(q, s); });
        svr.Get("/health", [this](const httplib::Request &, httplib::Response & s) {
            const bool up = ready_.load();
            s.status      = up ? 200 : 503;
            s.set_content(json{ { "status", up ? "ok" : "loading" } }.dump(), "application/json");
        });
        svr.Get("/metrics", [this](const httplib::Request &, httplib::Response & s) {
            s.set_content(metrics_.text(engine_.waiting(), engine_.busy(), engine_.device()),
                          "text/plain; version=0.0.4");
        });
        // httplib's own refusals (413 over --max-upload-mb, 404) in the API's shape
        svr.set_error_handler([this](const httplib::Request & q, httplib::Response & s) {
            if (!s.body.empty()) {
                return;
            }
            const int status = s.status;
            if (q.path.rfind("/v1/audio/", 0) == 0) { // refused before the handler: counted here
                metrics_.request(status, 0.0, 0.0);
            }
            error_reply(s, status,
                        status == 413   ? "the upload is larger than the server's --max-upload-mb"
                        : status == 404 ? "no such endpoint"
                                        : "the request could not be served");
        });
    }

    void set_ready() { ready_ = true; }

private:
    bool authorized(const httplib::Request & q, httplib::Response & s) {
        if (o_.api_key.empty() || same_secret(q.get_header_value("Authorization"), "Bearer " + o_.api_key)) {
            return true;
        }
        error_reply(s, 401, "a valid API key is needed: Authorization: Bearer KEY", "", "invalid_request_error",
                    "invalid_api_key");
        return false;
    }

    void models(const httplib::Request & q, httplib::Response & s) {
        if (!authorized(q, s)) {
            return;
        }
        const json model = { { "id", fs::path(o_.model).stem().string() },
                             { "object", "model" },
                             { "owned_by", "wsp-ggml" } };
        s.set_content(json{ { "object", "list" }, { "data", json::array({ model }) } }.dump(), "application/json");
    }

    void transcribe(const httplib::Request & q, httplib::Response & s, bool translate) {
        const auto t0      = Clock::now();
        double     audio_s = 0.0;
        answer(q, s, translate, audio_s);
        metrics_.request(s.status, std::chrono::duration<double>(Clock::now() - t0).count(), audio_s);
    }

    // the checks of Note [server requests], then the engine's answer
    void answer(const httplib::Request & q, httplib::Response & s, bool translate, double & audio_s) {
        if (!authorized(q, s)) {
            return;
        }
        if (!ready_) {
            error_reply(s, 503, "the model is still loading", "", "server_error");
            return;
        }
        if (!q.is_multipart_form_data() || !q.has_file("file")) {
            error_reply(s, 400, "the upload needs a multipart/form-data field 'file' with the audio", "file");
            return;
        }
        Decoding d;
        d.threads         = o_.threads;
        d.translate       = translate;
        d.max_tokens      = o_.max_tokens;
        d.no_fallback     = o_.no_fallback;
        d.language        = q.has_file("language") ? q.get_file_value("language").content : "auto";
        d.prompt          = q.has_file("prompt") ? q.get_file_value("prompt").content : "";
        const auto format = q.has_file("response_format") ? q.get_file_value("response_format").content : "json";
        if (format != "json" && format != "text" && format != "srt" && format != "vtt" && format != "verbose_json") {
            error_reply(s, 400, "response_format '" + format + "' is not one of json, text, srt, verbose_json, vtt",
                        "response_format");
            return;
        }
        if (!language_known(d.language)) {
            error_reply(s, 400, "language '" + d.language + "' is not one whisper knows (" + known_languages() + ")",
                        "language");
            return;
        }
        if (q.has_file("temperature")) {
            const std::string t   = q.get_file_value("temperature").content;
            char *            end = nullptr;
            d.temperature         = std::strtof(t.c_str(), &end);
            if (end == t.c_str() || *end != '\0' || d.temperature < 0.0f || d.temperature > 1.0f) {
                error_reply(s, 400, "temperature '" + t + "' is not a number from 0 to 1", "temperature");
                return;
            }
        }
        for (const auto & g : { "timestamp_granularities[]", "timestamp_granularities" }) {
            if (q.has_file(g) && q.get_file_value(g).content != "segment") {
                error_reply(s, 400, "timestamp_granularities: only 'segment' is served", "timestamp_granularities");
                return;
            }
        }
        auto        job = std::make_shared<Job>();
        std::string error;
        if (!decode_upload(q.get_file_value("file"), job->pcm, error)) {
            error_reply(s, 400, "the file is not audio this server can read: " + error, "file");
            return;
        }
        audio_s       = double(job->pcm.size()) / WHISPER_SAMPLE_RATE;
        job->decoding = d;
        job->deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout_s));
        auto done = job->done.get_future();
        if (!engine_.submit(job)) {
            s.set_header("Retry-After", "1");
            error_reply(s, 429, "the queue is full: try again shortly", "", "rate_limit_exceeded");
            return;
        }
        // the engine answers every job it took: whisper.cpp gives up at the deadline by itself
        done.wait();
        const Result r = done.get();
        if (!r.ok) {
            error_reply(s, r.status, r.error, "", "server_error");
            return;
        }
        reply(s, format, r.transcript, audio_s, d);
    }

    // FFmpeg reads files: the upload goes to a temporary one, removed at once
    static bool decode_upload(const httplib::MultipartFormData & f, std::vector<float> & pcm, std::string & error) {
        const char * tmp  = std::getenv("TMPDIR");
        std::string  path = std::string(tmp && *tmp ? tmp : "/tmp") + "/wsp-whisper-upload-XXXXXX";
        const int    fd   = mkstemp(path.data());
        if (fd < 0) {
            error = "no temporary file for the upload";
            return false;
        }
        const bool written = ::write(fd, f.content.data(), f.content.size()) == ssize_t(f.content.size());
        ::close(fd);
        const bool ok = written && wsp::example::decode_audio(path, WHISPER_SAMPLE_RATE, pcm, nullptr, &error);
        ::unlink(path.c_str());
        if (!written) {
            error = "the upload could not be stored";
        }
        return ok;
    }

    static void reply(httplib::Response & s, const std::string & format, const Transcript & t, double audio_s,
                      const Decoding & d) {
        s.status = 200;
        if (format == "json") {
            s.set_content(json{ { "text", text_of(t) } }.dump(), "application/json");
        } else if (format == "verbose_json") {
            s.set_content(verbose_json(t, audio_s, d.translate, d), "application/json");
        } else if (format == "text") {
            s.set_content(text_of(t) + "\n", "text/plain; charset=utf-8");
        } else {
            s.set_content(render(t, format), format == "srt" ? "application/x-subrip" : "text/vtt");
        }
    }

    const Options &   o_;
    Engine &          engine_;
    Metrics &         metrics_;
    std::atomic<bool> ready_{ false };
};

void quiet_log(enum wsp_ggml_log_level level, const char * text, void *) {
    if (level == WSP_GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

// the GPU devices whisper.cpp could pick
size_t gpu_count() {
    size_t n = 0;
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        n += wsp_ggml_backend_dev_type(wsp_ggml_backend_dev_get(i)) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU ? 1 : 0;
    }
    return n;
}

std::string first_gpu_name() {
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        auto * dev = wsp_ggml_backend_dev_get(i);
        if (wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU) {
            return wsp_ggml_backend_dev_name(dev);
        }
    }
    return "CPU";
}

int serve(Options & o) {
    if (o.per_device) {
        std::fprintf(stderr, "wsp-whisper-server: --per-device is not supported yet: use --all-gpus (one context "
                             "over every GPU) or --cpu\n");
        return 2;
    }
    std::error_code ec;
    if (!fs::is_regular_file(o.model, ec) || !std::ifstream(o.model)) {
        std::fprintf(stderr, "wsp-whisper-server: cannot read the model %s\n", o.model.c_str());
        return 2;
    }
    if (o.all_gpus) { // before any wsp_ggml call: the registry orders its devices at its first use
        setenv("WSP_GGML_ALL_GPUS", "1", 1);
    }
    whisper_log_set(quiet_log, nullptr);
    wsp_ggml_log_set(quiet_log, nullptr);
    const size_t gpus = o.cpu ? 0 : gpu_count();
    if (o.all_gpus && gpus < 2) {
        std::fprintf(stderr, "wsp-whisper-server: --all-gpus needs two or more GPU devices\n");
        return 2;
    }
    if (!o.cpu && gpus >= 2 && !o.all_gpus) { // one context over every GPU (see --per-device)
        setenv("WSP_GGML_ALL_GPUS", "1", 1);
    }
    const std::string device = gpus > 0 ? first_gpu_name() : "CPU";

    Engine          engine(o);
    Metrics         metrics;
    Server          server(o, engine, metrics);
    httplib::Server svr;
    svr.set_payload_max_length(size_t(o.max_upload) << 20);
    server.routes(svr);
    const int port = o.port == 0 ? svr.bind_to_any_port(o.host) : (svr.bind_to_port(o.host, o.port) ? o.port : -1);
    if (port < 0) {
        std::fprintf(stderr, "wsp-whisper-server: cannot listen on %s:%d\n", o.host.c_str(), o.port);
        return 1;
    }
    std::fprintf(stderr, "wsp-whisper-server: listening on http://%s:%d (loading %s on %s)\n", o.host.c_str(), port,
                 o.model.c_str(), device.c_str());
    std::thread http([&] { svr.listen_after_bind(); });

    std::string error;
    if (!engine.load(gpus > 0, device, error)) {
        std::fprintf(stderr, "wsp-whisper-server: %s\n", error.c_str());
        svr.stop();
        http.join();
        return 1;
    }
    server.set_ready();
    std::fprintf(stderr, "wsp-whisper-server: ready\n");

    while (g_stop_signal.load() == 0) { // Note [server requests]: stopping
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::fprintf(stderr, "wsp-whisper-server: stopping: finishing what is in flight (up to %.0f s)\n", o.grace_s);
    std::atomic<bool> stopped{ false };
    std::thread       grace([&] {
        const auto until =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.grace_s));
        while (!stopped && Clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (!stopped) {
            engine.abort_all();
        }
    });
    svr.stop(); // returns once the connections' threads have answered
    http.join();
    stopped = true;
    grace.join();
    engine.shutdown();
    std::fprintf(stderr, "wsp-whisper-server: stopped\n");
    return 0;
}

} // namespace
} // namespace wsp::transcribe

int main(int argc, char ** argv) {
    using namespace wsp::transcribe;
    Options  o;
    CLI::App app{ "wsp-whisper-server: the OpenAI audio API over whisper.cpp on wsp-ggml" };
    app.add_option("--model", o.model, "the whisper model (ggml .bin)")->required();
    app.add_option("--host", o.host, "the address to listen on")->capture_default_str();
    app.add_option("--port", o.port, "the port (0: any free one, said on stderr)")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    app.add_option("--threads", o.threads, "CPU threads of the context")->check(CLI::Range(1, 1024));
    auto * cpu = app.add_flag("--cpu", o.cpu, "the context on the CPU");
    auto * all = app.add_flag("--all-gpus", o.all_gpus, "one context on the all-GPU device (default with 2+ GPUs)");
    auto * per = app.add_flag("--per-device", o.per_device, "a worker per GPU (not supported yet)");
    cpu->excludes(all)->excludes(per);
    all->excludes(per);
    app.add_flag("--flash", o.flash, "flash attention");
    app.add_option("--queue", o.queue, "requests that may wait; one more gets 429")
        ->capture_default_str()
        ->check(CLI::Range(0, 100000));
    app.add_option("--max-upload-mb", o.max_upload, "the largest upload; larger gets 413")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--timeout-s", o.timeout_s, "a request not answered by then gets 504")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 1e6));
    app.add_option("--grace-s", o.grace_s, "on SIGTERM, how long what is in flight may take")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1e6));
    app.add_option("--api-key", o.api_key, "the key clients give as Authorization: Bearer KEY");
    app.add_option("--max-tokens", o.max_tokens, "at most this many tokens per segment (0: no limit)")
        ->check(CLI::Range(0, 100000));
    app.add_flag("--no-fallback", o.no_fallback, "no retries at higher temperatures");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError & e) {
        const int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    }
    std::signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {};
    sa.sa_handler       = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return serve(o);
}
