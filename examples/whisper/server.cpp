// wsp-whisper-server: the OpenAI audio API (POST /v1/audio/transcriptions and /translations,
// GET /v1/models) over whisper.cpp on wsp-ggml, with /health and Prometheus /metrics.
//
// Note [server requests]
// - An upload is checked and decoded on the connection's own thread (audio.h), before it is
//   queued: a file that is not audio, a missing field, an unknown response_format or language is
//   a 400 with an OpenAI-style error object, and costs the engine nothing.
// - The engine is a pool of runners fed by one queue: a worker process per GPU device
//   (--per-device, the default with two or more: Note [server workers]), or one whisper context on
//   the all-GPU device (--all-gpus, which spreads one request over every GPU), the one GPU, or the
//   CPU. Whichever runner is free takes the next request. At most --queue requests wait; one more
//   is a 429 with Retry-After. A request not answered within --timeout-s is a 504: whisper.cpp's
//   abort callback stops its work, or it is dropped before it starts.
// - SIGTERM or SIGINT: no new connection is accepted, what is in flight finishes within --grace-s
//   (then it is aborted and answered 503), and the process exits 0.
// - --api-key: "Authorization: Bearer KEY" on /v1, compared in time that does not depend on where
//   the first difference is.

#include "audio.h"
#include "decoding.h"
#include "ggml-all-gpu.h"
#include "ggml-backend.h"
#include "outputs.h"
#include "whisper.h"
#include "workers.h"

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
#include <iostream>
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
    std::string worker_device; // set in a worker process (Note [server workers]): its device
};

std::atomic<int> g_stop_signal{ 0 };

void on_stop_signal(int sig) {
    g_stop_signal.store(sig);
}

bool stopping() {
    return g_stop_signal.load() != 0;
}

// ---- the engine ---------------------------------------------------------------------------------

struct Result {
    bool        ok     = false;
    int         status = 200; // of a failure: 504 timed out, 503 stopped or lost, 500 whisper.cpp failed
    std::string error;
    Transcript  transcript;
    bool        worker_lost = false; // the worker process died (or was killed) with the job
};

struct Job {
    std::vector<float>   pcm;
    Decoding             decoding;
    Clock::time_point    deadline;
    std::atomic<bool>    abort{ false };
    bool                 retried = false; // once on another worker after its worker died
    std::promise<Result> done;
};

double seconds_left(Clock::time_point deadline) {
    return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// whisper_full over pcm on ctx, given up (whisper.cpp's abort callback) at the deadline, when
// *abort is set, or, in a worker process, on SIGTERM
Result transcribe_pcm(whisper_context * ctx, const std::vector<float> & pcm, const Decoding & d,
                      Clock::time_point deadline, const std::atomic<bool> & abort, bool on_signal) {
    struct When {
        Clock::time_point         deadline;
        const std::atomic<bool> * abort;
        bool                      on_signal;
    } when{ deadline, &abort, on_signal };
    Result r;
    if (Clock::now() >= deadline || abort) {
        r.status = Clock::now() >= deadline ? 504 : 503;
        r.error  = r.status == 504 ? "timed out waiting in the queue" : "the server is stopping";
        return r;
    }
    auto give_up = [](void * data) {
        const When * w = static_cast<const When *>(data);
        return w->abort->load() || (w->on_signal && g_stop_signal.load() != 0) || Clock::now() >= w->deadline;
    };
    const whisper_full_params p = full_params(d, give_up, &when);
    if (whisper_full(ctx, p, pcm.data(), int(pcm.size())) != 0) {
        r.status = Clock::now() >= deadline ? 504 : abort || (on_signal && g_stop_signal) ? 503 : 500;
        r.error  = r.status == 504   ? "timed out while transcribing"
                   : r.status == 503 ? "the server is stopping"
                                     : "whisper.cpp failed to transcribe";
        return r;
    }
    r.ok         = true;
    r.transcript = transcript_of(ctx, "", d.language);
    return r;
}

// What runs jobs: a whisper context in this process, or a worker process with one of its own.
class Runner {
public:
    explicit Runner(std::string device) : device_(std::move(device)) {}
    virtual ~Runner()                         = default;
    virtual bool   start(std::string & error) = 0; // the model loaded, ready for jobs
    virtual Result run(Job & job)             = 0;
    virtual void   interrupt() {} // the job running is aborted (job.abort is set)
    virtual void   stop() = 0;

    const std::string & device() const { return device_; }

private:
    std::string device_;
};

class ContextRunner : public Runner {
public:
    ContextRunner(const Options & o, bool use_gpu, std::string device)
        : Runner(std::move(device)), o_(o), use_gpu_(use_gpu) {}

    ~ContextRunner() override { stop(); }

    bool start(std::string & error) override {
        whisper_context_params cp = whisper_context_default_params();
        cp.use_gpu                = use_gpu_;
        cp.flash_attn             = o_.flash;
        cp.gpu_device             = 0;
        ctx_                      = whisper_init_from_file_with_params(o_.model.c_str(), cp);
        if (!ctx_) {
            error = "could not load the model " + o_.model;
        }
        return ctx_ != nullptr;
    }

    Result run(Job & job) override {
        return transcribe_pcm(ctx_, job.pcm, job.decoding, job.deadline, job.abort, false);
    }

    whisper_context * context() const { return ctx_; }

    void stop() override {
        if (ctx_) {
            whisper_free(ctx_);
            ctx_ = nullptr;
        }
    }

private:
    const Options &   o_;
    bool              use_gpu_;
    whisper_context * ctx_ = nullptr;
};

// Text goes between the processes as hex: a token's text may be part of a UTF-8 character, which
// JSON cannot carry.
std::string hex(const std::string & s) {
    static const char digits[] = "0123456789abcdef";
    std::string       h;
    for (unsigned char c : s) {
        h += digits[c >> 4];
        h += digits[c & 15];
    }
    return h;
}

std::string unhex(const std::string & h) {
    std::string s;
    for (size_t i = 0; i + 1 < h.size(); i += 2) {
        s += char(std::stoi(h.substr(i, 2), nullptr, 16));
    }
    return s;
}

// Note [server workers]
// --per-device runs one worker process per GPU device (Note [per-device workers] in workers.cpp):
// this program again with --worker-device, which loads the model on its only GPU and answers
// "ready". A job is one JSON line (the decoding, the seconds left, the sample count) and the
// samples as raw floats on the worker's stdin; the answer is one JSON line on its stdout (status,
// error, the transcript with its text in hex). A worker's end of output with a job unanswered is
// its death (killed, crashed): the pool restarts it and tries the job once more on whichever worker
// is free next, else answers 503. A worker silent 10 s past the job's deadline is killed (504). On
// SIGTERM a worker gives up its job (503) and ends; it also ends with the server (PR_SET_PDEATHSIG).
class ProcessRunner : public Runner {
public:
    ProcessRunner(const Options & o, wsp_ggml_backend_dev_t dev, std::string device)
        : Runner(device), o_(o), dev_(dev), process_(std::move(device)) {}

    ~ProcessRunner() override { stop(); }

    bool start(std::string & error) override {
        WorkerEnv env;
        if (!worker_env(dev_, env, error)) {
            return false;
        }
        std::vector<std::string> args = {
            "wsp-whisper-server", "--worker-device",         device(), "--model", o_.model,
            "--threads",          std::to_string(o_.threads)
        };
        if (o_.flash) {
            args.push_back("--flash");
        }
        if (!process_.start(args, env, error)) {
            return false;
        }
        std::string line;
        if (process_.read_line(line, 600 * 1000) != 1 || line != "ready") {
            error = "the worker for " + device() + " did not load the model (its log is above)";
            process_.signal(SIGKILL);
            process_.stop();
            return false;
        }
        return true;
    }

    Result run(Job & job) override {
        const Decoding & d      = job.decoding;
        const json       header = {
                  { "samples", job.pcm.size() },    { "seconds_left", seconds_left(job.deadline) },
                  { "language", d.language },       { "translate", d.translate },
                  { "beam_size", d.beam_size },     { "best_of", d.best_of },
                  { "temperature", d.temperature }, { "prompt", hex(d.prompt) },
                  { "max_tokens", d.max_tokens },   { "no_fallback", d.no_fallback },
                  { "threads", d.threads },
        };
        const std::string head = header.dump() + "\n";
        Result            r;
        std::string       line;
        const int         wait_ms = int(std::max(0.0, seconds_left(job.deadline) + 10.0) * 1000);
        if (!process_.write_all(head.data(), head.size()) ||
            !process_.write_all(job.pcm.data(), job.pcm.size() * sizeof(float))) {
            return lost(r);
        }
        const int got = process_.read_line(line, wait_ms);
        if (got == -1) { // silent past its deadline: stuck
            process_.signal(SIGKILL);
            lost(r);
            r.status = 504;
            r.error  = "timed out while transcribing";
            return r;
        }
        if (got == 0) {
            return lost(r);
        }
        try {
            const json a = json::parse(line);
            r.ok         = a.at("ok").get<bool>();
            r.status     = a.at("status").get<int>();
            r.error      = a.at("error").get<std::string>();
            if (r.ok) {
                r.transcript.language = a.at("language").get<std::string>();
                for (const auto & js : a.at("segments")) {
                    Segment s;
                    s.t0   = js.at("t0").get<int64_t>();
                    s.t1   = js.at("t1").get<int64_t>();
                    s.text = unhex(js.at("text").get<std::string>());
                    for (const auto & jt : js.at("tokens")) {
                        s.tokens.push_back(
                            { jt.at(0).get<int>(), unhex(jt.at(1).get<std::string>()), jt.at(2).get<float>() });
                    }
                    r.transcript.segments.push_back(std::move(s));
                }
            }
        } catch (const std::exception & e) {
            process_.signal(SIGKILL);
            lost(r);
            r.error = std::string("the worker's answer could not be read: ") + e.what();
        }
        return r;
    }

    void interrupt() override { process_.signal(SIGTERM); }

    void stop() override { process_.stop(); }

private:
    Result & lost(Result & r) {
        const int status = process_.stop();
        r.worker_lost    = true;
        r.status         = 503;
        r.error          = WIFSIGNALED(status)
                               ? "the worker for " + device() + " was killed by signal " + std::to_string(WTERMSIG(status))
                               : "the worker for " + device() + " exited with status " + std::to_string(WEXITSTATUS(status));
        return r;
    }

    const Options &        o_;
    wsp_ggml_backend_dev_t dev_;
    WorkerProcess          process_;
};

// the worker side of Note [server workers]
int worker_main(const Options & o) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const auto devs = gpu_devices();
    if (devs.size() != 1) {
        std::fprintf(stderr, "wsp-whisper-server: the worker for %s sees %zu GPU devices, expected exactly one\n",
                     o.worker_device.c_str(), devs.size());
        return 1;
    }
    ContextRunner ctx(o, true, o.worker_device);
    std::string   error;
    if (!ctx.start(error)) {
        std::fprintf(stderr, "wsp-whisper-server: worker for %s: %s\n", o.worker_device.c_str(), error.c_str());
        return 1;
    }
    std::printf("ready\n");
    std::fflush(stdout);
    const std::atomic<bool> never{ false };
    for (std::string head; g_stop_signal.load() == 0 && std::getline(std::cin, head);) {
        const json         h = json::parse(head, nullptr, false);
        std::vector<float> pcm;
        Decoding           d;
        double             left = 0;
        try {
            pcm.resize(h.at("samples").get<size_t>());
            left          = h.at("seconds_left").get<double>();
            d.language    = h.at("language").get<std::string>();
            d.translate   = h.at("translate").get<bool>();
            d.beam_size   = h.at("beam_size").get<int>();
            d.best_of     = h.at("best_of").get<int>();
            d.temperature = h.at("temperature").get<float>();
            d.prompt      = unhex(h.at("prompt").get<std::string>());
            d.max_tokens  = h.at("max_tokens").get<int>();
            d.no_fallback = h.at("no_fallback").get<bool>();
            d.threads     = h.at("threads").get<int>();
        } catch (const std::exception & e) {
            std::fprintf(stderr, "wsp-whisper-server: worker for %s: a bad job: %s\n", o.worker_device.c_str(),
                         e.what());
            return 1;
        }
        if (!std::cin.read(reinterpret_cast<char *>(pcm.data()), std::streamsize(pcm.size() * sizeof(float)))) {
            return 1; // the server is gone
        }
        const auto deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(left));
        const Result r        = transcribe_pcm(ctx.context(), pcm, d, deadline, never, true);
        json         segments = json::array();
        for (const auto & s : r.transcript.segments) {
            json tokens = json::array();
            for (const auto & t : s.tokens) {
                tokens.push_back(json::array({ t.id, hex(t.text), t.p }));
            }
            segments.push_back({ { "t0", s.t0 }, { "t1", s.t1 }, { "text", hex(s.text) }, { "tokens", tokens } });
        }
        const json a = { { "ok", r.ok },
                         { "status", r.status },
                         { "error", r.error },
                         { "language", r.transcript.language },
                         { "segments", segments } };
        std::printf("%s\n", a.dump().c_str());
        std::fflush(stdout);
    }
    return 0;
}

// The runners and the one bounded queue in front of them (Note [server requests]): each runner has
// a thread that takes the next job, so jobs go to whichever is free.
class Pool {
public:
    Pool(const Options & o, std::vector<std::unique_ptr<Runner>> runners)
        : o_(o), runners_(std::move(runners)), running_(runners_.size()), restarts_(runners_.size(), 0) {}

    ~Pool() { shutdown(); }

    // every runner started at once (the models load side by side), each on the thread that then
    // serves it: a worker process ends with the thread that started it (PR_SET_PDEATHSIG)
    bool start(std::string & error) {
        std::vector<std::string> errors(runners_.size());
        size_t                   started = 0;
        serving_                         = runners_.size();
        for (size_t i = 0; i < runners_.size(); ++i) {
            threads_.emplace_back([&, i] {
                std::string e;
                const bool  ok = runners_[i]->start(e);
                {
                    std::lock_guard<std::mutex> lock(mutex_);
                    errors[i] = ok ? "" : e.empty() ? "could not start" : e;
                    started += 1;
                    ready_.notify_all();
                }
                if (ok) {
                    serve(i);
                }
                left();
            });
        }
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return started == runners_.size(); });
        for (size_t i = 0; i < runners_.size(); ++i) {
            if (!errors[i].empty()) {
                error = runners_[i]->device() + ": " + errors[i];
                return false;
            }
        }
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

    // takes the job back if no runner has it yet
    bool withdraw(const std::shared_ptr<Job> & job) {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto                  it = std::find(waiting_.begin(), waiting_.end(), job);
        if (it == waiting_.end()) {
            return false;
        }
        waiting_.erase(it);
        return true;
    }

    // every job still waiting and every one running are aborted (answered 503)
    void abort_all() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto & j : waiting_) {
            j->abort = true;
        }
        for (size_t i = 0; i < running_.size(); ++i) {
            if (running_[i]) {
                running_[i]->abort = true;
                runners_[i]->interrupt();
            }
        }
    }

    void shutdown() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            closing_ = true;
            ready_.notify_all();
        }
        for (auto & t : threads_) {
            t.join();
        }
        threads_.clear();
        for (auto & r : runners_) {
            r->stop();
        }
    }

    size_t size() const { return runners_.size(); }

    // what /metrics shows
    struct State {
        size_t                   waiting = 0;
        std::vector<std::string> devices;
        std::vector<int>         busy, restarts;
    };

    State state() {
        std::lock_guard<std::mutex> lock(mutex_);
        State                       s;
        s.waiting = waiting_.size();
        for (size_t i = 0; i < runners_.size(); ++i) {
            s.devices.push_back(runners_[i]->device());
            s.busy.push_back(running_[i] ? 1 : 0);
            s.restarts.push_back(restarts_[i]);
        }
        return s;
    }

private:
    void serve(size_t i) {
        Runner & runner = *runners_[i];
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
                running_[i] = job;
            }
            Result r = runner.run(*job);
            if (!r.worker_lost) {
                finish(i, job, std::move(r));
                continue;
            }
            // Note [server workers]: a worker lost with the job
            const bool again = !job->retried && !job->abort && r.status != 504 && Clock::now() < job->deadline;
            std::fprintf(stderr, "wsp-whisper-server: %s: restarting it; its request %s\n", r.error.c_str(),
                         again ? "is tried again" : "fails");
            {
                std::lock_guard<std::mutex> lock(mutex_);
                restarts_[i] += 1;
                running_[i].reset();
                if (again) {
                    job->retried = true;
                    waiting_.push_front(job);
                    ready_.notify_one();
                }
            }
            if (!again) {
                r.error = job->retried ? "the workers transcribing it died twice" : r.error;
                job->done.set_value(std::move(r));
            }
            std::string error;
            const auto  t0 = Clock::now();
            while (!stopping() && !runner.start(error)) {
                std::fprintf(stderr, "wsp-whisper-server: %s: no new worker: %s\n", runner.device().c_str(),
                             error.c_str());
                std::unique_lock<std::mutex> lock(mutex_);
                if (ready_.wait_for(lock, std::chrono::seconds(1), [&] { return closing_; })) {
                    return;
                }
            }
            if (stopping()) { // no new worker while the server stops: the others finish the queue
                return;
            }
            std::fprintf(stderr, "wsp-whisper-server: the worker for %s is back after %.2f s\n",
                         runner.device().c_str(), std::chrono::duration<double>(Clock::now() - t0).count());
        }
    }

    // a runner's thread ended; the last one answers what still waits (no runner will take it)
    void left() {
        std::deque<std::shared_ptr<Job>> orphans;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (--serving_ > 0) {
                return;
            }
            orphans.swap(waiting_);
        }
        for (auto & j : orphans) {
            Result r;
            r.status = 503;
            r.error  = "no worker was left to take it";
            j->done.set_value(r);
        }
    }

    void finish(size_t i, const std::shared_ptr<Job> & job, Result r) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            running_[i].reset();
        }
        job->done.set_value(std::move(r));
    }

    const Options &                      o_;
    std::vector<std::unique_ptr<Runner>> runners_;
    std::vector<std::thread>             threads_;
    std::mutex                           mutex_;
    std::condition_variable              ready_;
    std::deque<std::shared_ptr<Job>>     waiting_;
    std::vector<std::shared_ptr<Job>>    running_; // per runner
    std::vector<int>                     restarts_;
    size_t                               serving_ = 0; // runners' threads not ended
    bool                                 closing_ = false;
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
    std::string text(const Pool::State & pool) {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string                 o;
        o += "# HELP wsp_whisper_requests_total Transcription requests answered, by HTTP status.\n";
        o += "# TYPE wsp_whisper_requests_total counter\n";
        for (const auto & [status, n] : by_status_) {
            o += "wsp_whisper_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
        }
        o += "# HELP wsp_whisper_queue_depth Requests waiting for a worker.\n# TYPE wsp_whisper_queue_depth gauge\n";
        o += "wsp_whisper_queue_depth " + std::to_string(pool.waiting) + "\n";
        o +=
            "# HELP wsp_whisper_busy_workers Workers transcribing, by device.\n# TYPE wsp_whisper_busy_workers gauge\n";
        for (size_t i = 0; i < pool.devices.size(); ++i) {
            o += "wsp_whisper_busy_workers{device=\"" + pool.devices[i] + "\"} " + std::to_string(pool.busy[i]) + "\n";
        }
        o += "# HELP wsp_whisper_worker_restarts_total Worker processes restarted after they died, by device.\n";
        o += "# TYPE wsp_whisper_worker_restarts_total counter\n";
        for (size_t i = 0; i < pool.devices.size(); ++i) {
            o += "wsp_whisper_worker_restarts_total{device=\"" + pool.devices[i] + "\"} " +
                 std::to_string(pool.restarts[i]) + "\n";
        }
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
    Server(const Options & o, Pool & pool, Metrics & metrics) : o_(o), pool_(pool), metrics_(metrics) {}

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
            s.set_content(metrics_.text(pool_.state()), "text/plain; version=0.0.4");
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
        if (!pool_.submit(job)) {
            s.set_header("Retry-After", "1");
            error_reply(s, 429, "the queue is full: try again shortly", "", "rate_limit_exceeded");
            return;
        }
        // the pool answers every job it took: whisper.cpp gives up at the deadline by itself, a
        // stuck worker is killed; one still waiting long past it (no worker left) is taken back
        const auto late = job->deadline + std::chrono::seconds(30);
        if (done.wait_until(late) != std::future_status::ready && pool_.withdraw(job)) {
            error_reply(s, 504, "timed out waiting for a worker", "", "server_error");
            return;
        }
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
    Pool &            pool_;
    Metrics &         metrics_;
    std::atomic<bool> ready_{ false };
};

void quiet_log(enum wsp_ggml_log_level level, const char * text, void *) {
    if (level == WSP_GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

// The runners of o's placement: a worker process per GPU device (--per-device, the default with
// two or more), one context on the all-GPU device (--all-gpus), on the one GPU, or on the CPU.
bool make_runners(const Options & o, std::vector<std::unique_ptr<Runner>> & runners, std::string & placement) {
    if (o.all_gpus) { // before any wsp_ggml call: the registry orders its devices at its first use
        setenv("WSP_GGML_ALL_GPUS", "1", 1);
    }
    const auto singles = o.cpu ? std::vector<wsp_ggml_backend_dev_t>{} : single_gpu_devices();
    if ((o.all_gpus || o.per_device) && singles.empty()) {
        std::fprintf(stderr, "wsp-whisper-server: %s needs GPU devices, and there are none\n",
                     o.all_gpus ? "--all-gpus" : "--per-device");
        return false;
    }
    if (o.all_gpus) {
        const auto all = gpu_devices();
        const auto it  = std::find_if(all.begin(), all.end(), wsp_ggml_backend_dev_is_all_gpu);
        if (singles.size() < 2 || it == all.end()) {
            std::fprintf(stderr, "wsp-whisper-server: --all-gpus needs two or more GPU devices\n");
            return false;
        }
        runners.push_back(std::make_unique<ContextRunner>(o, true, wsp_ggml_backend_dev_name(*it)));
        placement = "one context on the all-GPU device";
    } else if (o.per_device || singles.size() >= 2) {
        for (auto * dev : singles) {
            runners.push_back(std::make_unique<ProcessRunner>(o, dev, wsp_ggml_backend_dev_name(dev)));
        }
        placement = "a worker process per GPU device (" + std::to_string(singles.size()) + ")";
    } else if (singles.size() == 1) {
        runners.push_back(std::make_unique<ContextRunner>(o, true, wsp_ggml_backend_dev_name(singles[0])));
        placement = std::string("one context on ") + wsp_ggml_backend_dev_name(singles[0]);
    } else {
        runners.push_back(std::make_unique<ContextRunner>(o, false, "CPU"));
        placement = "one context on the CPU";
    }
    return true;
}

int serve(Options & o) {
    std::error_code ec;
    if (!fs::is_regular_file(o.model, ec) || !std::ifstream(o.model)) {
        std::fprintf(stderr, "wsp-whisper-server: cannot read the model %s\n", o.model.c_str());
        return 2;
    }
    whisper_log_set(quiet_log, nullptr);
    wsp_ggml_log_set(quiet_log, nullptr);
    std::vector<std::unique_ptr<Runner>> runners;
    std::string                          placement;
    if (!make_runners(o, runners, placement)) {
        return 2;
    }
    Pool            pool(o, std::move(runners));
    Metrics         metrics;
    Server          server(o, pool, metrics);
    httplib::Server svr;
    svr.set_payload_max_length(size_t(o.max_upload) << 20);
    // a connection thread for every request the pool can hold (running or waiting) and a few more,
    // so one past them is answered 429 at once rather than left unread behind httplib's default
    // pool of 8
    const size_t connections = size_t(o.queue) + pool.size() + 8;
    svr.new_task_queue       = [connections] { return new httplib::ThreadPool(connections); };
    server.routes(svr);
    const int port = o.port == 0 ? svr.bind_to_any_port(o.host) : (svr.bind_to_port(o.host, o.port) ? o.port : -1);
    if (port < 0) {
        std::fprintf(stderr, "wsp-whisper-server: cannot listen on %s:%d\n", o.host.c_str(), o.port);
        return 1;
    }
    std::fprintf(stderr, "wsp-whisper-server: listening on http://%s:%d (loading %s: %s)\n", o.host.c_str(), port,
                 o.model.c_str(), placement.c_str());
    std::thread http([&] { svr.listen_after_bind(); });

    std::string error;
    if (!pool.start(error)) {
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
            pool.abort_all();
        }
    });
    svr.stop(); // returns once the connections' threads have answered
    http.join();
    stopped = true;
    grace.join();
    pool.shutdown();
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
    auto * all = app.add_flag("--all-gpus", o.all_gpus, "one context on the all-GPU device, over every GPU");
    auto * per = app.add_flag("--per-device", o.per_device, "a worker process per GPU (the default with 2+ GPUs)");
    cpu->excludes(all)->excludes(per);
    all->excludes(per);
    app.add_flag("--flash", o.flash, "flash attention");
    app.add_option("--queue", o.queue, "requests that may wait; one more gets 429")
        ->capture_default_str()
        ->check(CLI::Range(0, 1024));
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
    app.add_option("--worker-device", o.worker_device)->group(""); // Note [server workers]
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
    sigaction(SIGTERM, &sa, nullptr);
    if (!o.worker_device.empty()) { // Ctrl-C reaches the server, which stops its workers in its time
        std::signal(SIGINT, SIG_IGN);
        whisper_log_set(quiet_log, nullptr);
        wsp_ggml_log_set(quiet_log, nullptr);
        return worker_main(o);
    }
    sigaction(SIGINT, &sa, nullptr);
    return serve(o);
}
