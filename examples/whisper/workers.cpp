#include "workers.h"

#include "ggml-all-gpu.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

extern char ** environ;

namespace wsp::transcribe {

namespace {

constexpr size_t   MAX_WORKERS = 256;
std::atomic<pid_t> g_worker_pids[MAX_WORKERS]; // 0: a free slot
static_assert(std::atomic<pid_t>::is_always_lock_free, "signal handlers read these");

} // namespace

std::vector<wsp_ggml_backend_dev_t> gpu_devices() {
    std::vector<wsp_ggml_backend_dev_t> out;
    for (size_t i = 0; i < wsp_ggml_backend_dev_count(); ++i) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_get(i);
        if (wsp_ggml_backend_dev_type(dev) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU) {
            out.push_back(dev);
        }
    }
    return out;
}

std::vector<wsp_ggml_backend_dev_t> single_gpu_devices() {
    auto devs = gpu_devices();
    devs.erase(std::remove_if(devs.begin(), devs.end(), wsp_ggml_backend_dev_is_all_gpu), devs.end());
    return devs;
}

// Note [per-device workers]
// whisper.cpp 0.4.3 computes on the gpu_device-th GPU device (whisper_backend_init_gpu) but its
// buffer-type list for the weights (make_buft_list) holds the FIRST GPU device's buffer type ahead
// of the chosen one, and each weight takes the first buffer type that supports it: with
// gpu_device >= 1 the weights land on GPU 0 while the graphs run on GPU k, which fails. Only the
// first GPU device works, and the device order is fixed per process when the backend registry is
// first used. So each device gets a worker process (posix_spawn of this program, which execs, so
// no state of the parent's registry or threads is inherited) whose environment makes that device
// the only GPU it sees, and whisper.cpp runs there, unchanged, with gpu_device = 0:
//  - SIM k: WSP_GGML_SIM_DEVICES=1 and CUDA hidden; a sim is an emulated device with its own
//    arena, so the worker's SIM0 is device k's stand-in (its own memory, streams and threads);
//  - CUDA k / ROCm k: CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES = the k-th visible GPU, sims
//    off; with WSP_GGML_CUDA_VIRTUAL_DEVICES (every virtual device on GPU 0) each worker gets GPU
//    0 as a real device of its own.
// The parent keeps the shared queue: a thread per worker hands it one piece of work, reads its
// answer back and takes the next, so work goes to whichever context is free. A worker refuses to
// start unless it sees exactly one GPU device, and ends when its parent does (PR_SET_PDEATHSIG).
bool worker_env(wsp_ggml_backend_dev_t dev, WorkerEnv & env, std::string & error) {
    const std::string reg  = wsp_ggml_backend_reg_name(wsp_ggml_backend_dev_backend_reg(dev));
    const std::string name = wsp_ggml_backend_dev_name(dev);
    env.reg                = reg;
    const int index        = std::atoi(name.c_str() + std::min(name.size(), reg.size()));
    if (reg == "SIM") {
        env.set   = { { "WSP_GGML_SIM_DEVICES", "1" },
                      { "CUDA_VISIBLE_DEVICES", "-1" },
                      { "HIP_VISIBLE_DEVICES", "-1" } };
        env.unset = { "WSP_GGML_CUDA_VIRTUAL_DEVICES", "WSP_GGML_ALL_GPUS" };
        return true;
    }
    if (reg == "CUDA" || reg == "ROCm") {
        const char * var = reg == "CUDA" ? "CUDA_VISIBLE_DEVICES" : "HIP_VISIBLE_DEVICES";
        std::string  visible;
        if (std::getenv("WSP_GGML_CUDA_VIRTUAL_DEVICES") != nullptr) {
            visible = "0";
        } else if (const char * cur = std::getenv(var); cur != nullptr && *cur != '\0') {
            std::stringstream list(cur);
            for (int i = 0; std::getline(list, visible, ',') && i < index; ++i) {
            }
        } else {
            visible = std::to_string(index);
        }
        env.set   = { { var, visible } };
        env.unset = { "WSP_GGML_SIM_DEVICES", "WSP_GGML_CUDA_VIRTUAL_DEVICES", "WSP_GGML_ALL_GPUS" };
        return true;
    }
    error = "no way to give a process only " + name + " (reg " + reg + ")";
    return false;
}

void signal_workers(int sig) {
    for (auto & pid : g_worker_pids) {
        const pid_t p = pid.load();
        if (p > 0) {
            kill(p, sig);
        }
    }
}

bool WorkerProcess::start(const std::vector<std::string> & args, const WorkerEnv & env, std::string & error) {
    stop();
    int to_child[2], from_child[2];
    // close-on-exec: a later worker must not hold this one's pipe ends, or this worker would never
    // see the end of its input (dup2 onto 0 and 1 clears the flag for the child's copies)
    if (pipe2(to_child, O_CLOEXEC) != 0) {
        error = std::string("pipe: ") + std::strerror(errno);
        return false;
    }
    if (pipe2(from_child, O_CLOEXEC) != 0) {
        error = std::string("pipe: ") + std::strerror(errno);
        close(to_child[0]);
        close(to_child[1]);
        return false;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    std::vector<std::string> envs;
    for (char ** e = environ; *e != nullptr; ++e) {
        const std::string kv(*e), key = kv.substr(0, kv.find('='));
        const bool        replaced = std::find(env.unset.begin(), env.unset.end(), key) != env.unset.end() ||
                              std::any_of(env.set.begin(), env.set.end(), [&](auto & p) { return p.first == key; });
        if (!replaced) {
            envs.push_back(kv);
        }
    }
    for (const auto & [k, v] : env.set) {
        envs.push_back(k + "=" + v);
    }
    std::vector<char *> argv, envp;
    for (const auto & a : args) {
        argv.push_back(const_cast<char *>(a.c_str()));
    }
    argv.push_back(nullptr);
    for (const auto & e : envs) {
        envp.push_back(const_cast<char *>(e.c_str()));
    }
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    to_   = to_child[1];
    from_ = from_child[0];
    if (rc != 0) {
        pid_  = -1;
        error = std::string("posix_spawn: ") + std::strerror(rc);
        stop();
        return false;
    }
    for (size_t i = 0; slot_ < 0 && i < MAX_WORKERS; ++i) {
        pid_t free_slot = 0;
        if (g_worker_pids[i].compare_exchange_strong(free_slot, pid_)) {
            slot_ = int(i);
        }
    }
    return true;
}

bool WorkerProcess::write_all(const void * data, size_t n) {
    const char * p = static_cast<const char *>(data);
    while (n > 0 && to_ >= 0) {
        const ssize_t w = ::write(to_, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return false; // EPIPE: the worker is gone (SIGPIPE is ignored by whoever runs workers)
        }
        p += w;
        n -= size_t(w);
    }
    return n == 0;
}

int WorkerProcess::read_line(std::string & line, int timeout_ms) {
    for (;;) {
        const size_t nl = buffered_.find('\n');
        if (nl != std::string::npos) {
            line = buffered_.substr(0, nl);
            buffered_.erase(0, nl + 1);
            return 1;
        }
        if (from_ < 0) {
            return 0;
        }
        pollfd    pfd   = { from_, POLLIN, 0 };
        const int ready = poll(&pfd, 1, timeout_ms);
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready == 0) {
            return -1;
        }
        char          buf[65536];
        const ssize_t r = ready < 0 ? -1 : ::read(from_, buf, sizeof buf);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return 0;
        }
        buffered_.append(buf, size_t(r));
    }
}

void WorkerProcess::signal(int sig) {
    if (pid_ > 0) {
        kill(pid_, sig);
    }
}

int WorkerProcess::stop() {
    for (int * fd : { &to_, &from_ }) {
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
    }
    buffered_.clear();
    int status = 0;
    if (pid_ > 0) {
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
    }
    if (slot_ >= 0) {
        g_worker_pids[slot_].store(0);
        slot_ = -1;
    }
    return status;
}

} // namespace wsp::transcribe
