#pragma once

// Worker processes, one per GPU device, for whisper_transcribe and wsp-whisper-server (Note
// [per-device workers] in workers.cpp): the environment that makes a device the only GPU a process
// sees, and the process itself with a pipe each way.

#include "ggml-backend.h"

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace wsp::transcribe {

// the GPU devices, the all-GPU device included; and without it
std::vector<wsp_ggml_backend_dev_t> gpu_devices();
std::vector<wsp_ggml_backend_dev_t> single_gpu_devices();

// what a worker's environment sets and removes so that dev is the only GPU device it sees
struct WorkerEnv {
    std::string                                      reg;
    std::vector<std::pair<std::string, std::string>> set;
    std::vector<std::string>                         unset;
};

bool worker_env(wsp_ggml_backend_dev_t dev, WorkerEnv & env, std::string & error);

// SIGTERM (or sig) to every worker process running; safe in a signal handler
void signal_workers(int sig);

// A worker process: this program again (posix_spawn of /proc/self/exe, which execs), its stdin and
// stdout a pipe each to the parent, and the device it stands for.
class WorkerProcess {
public:
    explicit WorkerProcess(std::string device) : device_(std::move(device)) {}
    WorkerProcess(const WorkerProcess &)             = delete;
    WorkerProcess & operator=(const WorkerProcess &) = delete;
    ~WorkerProcess() { stop(); }

    bool start(const std::vector<std::string> & args, const WorkerEnv & env, std::string & error);

    // false when the worker is gone
    bool write_all(const void * data, size_t n);

    // one line without its '\n': 1; the worker gone (end of its output): 0; nothing within
    // timeout_ms (-1: no limit): -1
    int read_line(std::string & line, int timeout_ms = -1);

    // sig to the worker, if it runs
    void signal(int sig);

    // closes the pipes and waits for the worker to end; its exit status as waitpid gives it
    int stop();

    bool                running() const { return pid_ > 0; }
    pid_t               pid() const { return pid_; }
    const std::string & device() const { return device_; }

private:
    std::string device_;
    pid_t       pid_  = -1;
    int         slot_ = -1; // in the registry signal_workers reads
    int         to_ = -1, from_ = -1;
    std::string buffered_; // read past the last line
};

} // namespace wsp::transcribe
