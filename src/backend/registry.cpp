// The backend registry: backends compiled in (CPU always, CUDA/HIP when built) are registered
// on first use; backends built as shared libraries are loaded with dlopen, checked (entry
// point, score, API version) and registered with their devices, and removed again on unload.
// Regs made over another reg's devices (the all-GPU device) join through hooks (Note [reg hooks]
// in reg_hooks.h).

#include "ggml-backend-impl.h"
#include "ggml-cpu.h"
#include "ggml-sim.h"

#include "../core/impl.h"
#include "reg_hooks.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <dlfcn.h>

#ifdef WSP_GGML_USE_CUDA
#    include "ggml-cuda.h"
#endif

namespace {

namespace fs = std::filesystem;

struct DlCloser {
    void operator()(void * handle) const {
        if (handle != nullptr) {
            dlclose(handle);
        }
    }
};

struct RegEntry {
    wsp_ggml_backend_reg_t reg;
    void *                 handle; // NULL for backends compiled in
};

using wsp::backend::RegHook;

std::vector<RegHook> & reg_hooks() {
    static std::vector<RegHook> hooks;
    return hooks;
}

// the reg that `over` was made over by a hook, NULL where no hook made it
wsp_ggml_backend_reg_t made_over(wsp_ggml_backend_reg_t over) {
    for (const RegHook & h : reg_hooks()) {
        if (wsp_ggml_backend_reg_t under = h.made_over(over)) {
            return under;
        }
    }
    return nullptr;
}

class Registry {
public:
    Registry() {
        add(wsp_ggml_backend_cpu_reg(), nullptr);
#ifdef WSP_GGML_USE_CUDA
        add(wsp_ggml_backend_cuda_reg(), nullptr);
#endif
    }

    // sim devices on request (WSP_GGML_SIM_DEVICES=N), registered after the constructor so that
    // their registration can call back into the registry
    static void add_sim_from_env() {
        const char * env = std::getenv("WSP_GGML_SIM_DEVICES");
        if (env != nullptr && std::atoi(env) > 0) {
            wsp_ggml_backend_sim_register(std::atoi(env), 0);
        }
    }

    ~Registry() {
        // loaded libraries stay mapped until exit: their code may still be referenced by live objects
        regs_.clear();
    }

    void add(wsp_ggml_backend_reg_t reg, void * handle) {
        if (reg == nullptr) {
            return;
        }
        for (const RegEntry & e : regs_) {
            if (e.reg == reg) {
                return;
            }
        }
        regs_.push_back({ reg, handle });
        const size_t n = wsp_ggml_backend_reg_dev_count(reg);
        for (size_t i = 0; i < n; ++i) {
            add_device(wsp_ggml_backend_reg_dev_get(reg, i));
        }
        for (const RegHook & h : reg_hooks()) {
            add_made_over(h, reg);
        }
    }

    // what hook h makes over reg (Note [reg hooks])
    void add_made_over(const RegHook & h, wsp_ggml_backend_reg_t reg) {
        wsp_ggml_backend_reg_t over = h.make(reg);
        if (over == nullptr) {
            return;
        }
        regs_.push_back({ over, nullptr });
        for (size_t i = 0; i < wsp_ggml_backend_reg_dev_count(over); ++i) {
            wsp_ggml_backend_dev_t dev = wsp_ggml_backend_reg_dev_get(over, i);
            if (h.listed_first()) {
                auto first_gpu = std::find_if(devices_.begin(), devices_.end(), [](wsp_ggml_backend_dev_t d) {
                    return wsp_ggml_backend_dev_type(d) == WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
                });
                devices_.insert(first_gpu, dev);
            } else {
                add_device(dev);
            }
        }
    }

    void add_device(wsp_ggml_backend_dev_t dev) {
        if (dev != nullptr && std::find(devices_.begin(), devices_.end(), dev) == devices_.end()) {
            devices_.push_back(dev);
        }
    }

    bool remove(wsp_ggml_backend_reg_t reg, void ** handle) {
        auto it = std::find_if(regs_.begin(), regs_.end(), [&](const RegEntry & e) { return e.reg == reg; });
        if (it == regs_.end()) {
            return false;
        }
        *handle = it->handle;
        // the reg goes, and the regs made over it
        auto gone = [&](wsp_ggml_backend_reg_t r) { return r == reg || made_over(r) == reg; };
        devices_.erase(
            std::remove_if(devices_.begin(), devices_.end(), [&](wsp_ggml_backend_dev_t d) { return gone(d->reg); }),
            devices_.end());
        regs_.erase(std::remove_if(regs_.begin(), regs_.end(), [&](const RegEntry & e) { return gone(e.reg); }),
                    regs_.end());
        return true;
    }

    std::vector<RegEntry>               regs_;
    std::vector<wsp_ggml_backend_dev_t> devices_;
};

std::recursive_mutex & registry_mutex() {
    static std::recursive_mutex m;
    return m;
}

Registry * made_registry = nullptr; // set once registry() made it; guarded by registry_mutex()

// callers hold registry_mutex(); the sim check runs once, and its own registration re-enters here
Registry & registry() {
    static Registry r;
    static bool     sim_checked = false;
    made_registry               = &r;
    if (!sim_checked) {
        sim_checked = true;
        Registry::add_sim_from_env();
    }
    return r;
}

// a library file name "libwsp-ggml-<name>[-variant].so" gives <name>
std::string backend_name_of(const std::string & file) {
    const std::string prefix = "libwsp-ggml-";
    if (file.rfind(prefix, 0) != 0) {
        return "";
    }
    std::string  rest = file.substr(prefix.size());
    const size_t end  = rest.find_first_of("-.");
    return rest.substr(0, end);
}

wsp_ggml_backend_reg_t load_library(const std::string & path, bool quiet_if_not_backend) {
    void * handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        WSP_LOG_ERROR("wsp_ggml_backend_load: cannot load %s: %s\n", path.c_str(), dlerror());
        return nullptr;
    }
    auto init = reinterpret_cast<wsp_ggml_backend_init_t>(dlsym(handle, "wsp_ggml_backend_init"));
    if (init == nullptr) {
        if (!quiet_if_not_backend) {
            WSP_LOG_ERROR("wsp_ggml_backend_load: %s is not a backend library (no wsp_ggml_backend_init)\n",
                          path.c_str());
        }
        dlclose(handle);
        return nullptr;
    }
    auto score = reinterpret_cast<wsp_ggml_backend_score_t>(dlsym(handle, "wsp_ggml_backend_score"));
    if (score != nullptr && score() == 0) {
        WSP_LOG_INFO("wsp_ggml_backend_load: %s reports that it cannot run on this system (score 0)\n", path.c_str());
        dlclose(handle);
        return nullptr;
    }
    wsp_ggml_backend_reg_t reg = init();
    if (reg == nullptr) {
        WSP_LOG_ERROR("wsp_ggml_backend_load: wsp_ggml_backend_init of %s returned NULL\n", path.c_str());
        dlclose(handle);
        return nullptr;
    }
    if (reg->api_version != WSP_GGML_BACKEND_API_VERSION) {
        WSP_LOG_ERROR("wsp_ggml_backend_load: %s has backend API version %d, this library needs %d\n", path.c_str(),
                      reg->api_version, WSP_GGML_BACKEND_API_VERSION);
        dlclose(handle);
        return nullptr;
    }
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    registry().add(reg, handle);
    WSP_LOG_INFO("wsp_ggml_backend_load: loaded %s backend from %s\n", wsp_ggml_backend_reg_name(reg), path.c_str());
    return reg;
}

// directories searched by load_all: next to this library, next to the executable, the working dir
std::vector<fs::path> default_search_dirs() {
    std::vector<fs::path> dirs;
    Dl_info               info;
    if (dladdr(reinterpret_cast<void *>(&default_search_dirs), &info) != 0 && info.dli_fname != nullptr) {
        dirs.push_back(fs::path(info.dli_fname).parent_path());
    }
    std::error_code ec;
    const fs::path  exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        dirs.push_back(exe.parent_path());
    }
    dirs.push_back(fs::current_path(ec));
    return dirs;
}

} // namespace

void wsp::backend::add_reg_hook(const RegHook & hook) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    reg_hooks().push_back(hook);
    if (made_registry != nullptr) { // regs registered before the hook: offered now
        const std::vector<RegEntry> regs = made_registry->regs_;
        for (const RegEntry & e : regs) {
            if (made_over(e.reg) == nullptr) {
                made_registry->add_made_over(hook, e.reg);
            }
        }
    }
}

extern "C" {

void wsp_ggml_backend_register(wsp_ggml_backend_reg_t reg) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    registry().add(reg, nullptr);
}

void wsp_ggml_backend_device_register(wsp_ggml_backend_dev_t device) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    registry().add_device(device);
}

size_t wsp_ggml_backend_reg_count(void) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    return registry().regs_.size();
}

wsp_ggml_backend_reg_t wsp_ggml_backend_reg_get(size_t index) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    if (index >= registry().regs_.size()) {
        WSP_LOG_ERROR("%s: index %zu is out of range (%zu regs)\n", __func__, index, registry().regs_.size());
        return nullptr;
    }
    return registry().regs_[index].reg;
}

wsp_ggml_backend_reg_t wsp_ggml_backend_reg_by_name(const char * name) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    for (const RegEntry & e : registry().regs_) {
        if (strcasecmp(wsp_ggml_backend_reg_name(e.reg), name) == 0) {
            return e.reg;
        }
    }
    return nullptr;
}

size_t wsp_ggml_backend_dev_count(void) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    return registry().devices_.size();
}

wsp_ggml_backend_dev_t wsp_ggml_backend_dev_get(size_t index) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    if (index >= registry().devices_.size()) {
        WSP_LOG_ERROR("%s: index %zu is out of range (%zu devices)\n", __func__, index, registry().devices_.size());
        return nullptr;
    }
    return registry().devices_[index];
}

wsp_ggml_backend_dev_t wsp_ggml_backend_dev_by_name(const char * name) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    for (wsp_ggml_backend_dev_t dev : registry().devices_) {
        if (strcasecmp(wsp_ggml_backend_dev_name(dev), name) == 0) {
            return dev;
        }
    }
    return nullptr;
}

wsp_ggml_backend_dev_t wsp_ggml_backend_dev_by_type(enum wsp_ggml_backend_dev_type type) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    for (wsp_ggml_backend_dev_t dev : registry().devices_) {
        if (wsp_ggml_backend_dev_type(dev) == type) {
            return dev;
        }
    }
    return nullptr;
}

wsp_ggml_backend_t wsp_ggml_backend_init_by_name(const char * name, const char * params) {
    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_by_name(name);
    if (dev == nullptr) {
        WSP_LOG_ERROR("%s: no device named %s\n", __func__, name);
        return nullptr;
    }
    return wsp_ggml_backend_dev_init(dev, params);
}

wsp_ggml_backend_t wsp_ggml_backend_init_by_type(enum wsp_ggml_backend_dev_type type, const char * params) {
    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_by_type(type);
    if (dev == nullptr) {
        WSP_LOG_ERROR("%s: no device of type %d\n", __func__, (int) type);
        return nullptr;
    }
    return wsp_ggml_backend_dev_init(dev, params);
}

wsp_ggml_backend_t wsp_ggml_backend_init_best(void) {
    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_GPU);
    if (dev == nullptr) {
        dev = wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
    }
    return dev ? wsp_ggml_backend_dev_init(dev, nullptr) : nullptr;
}

wsp_ggml_backend_reg_t wsp_ggml_backend_load(const char * path) {
    if (path == nullptr) {
        WSP_LOG_ERROR("%s: path is NULL\n", __func__);
        return nullptr;
    }
    return load_library(path, false);
}

void wsp_ggml_backend_unload(wsp_ggml_backend_reg_t reg) {
    void * handle = nullptr;
    {
        std::lock_guard<std::recursive_mutex> lock(registry_mutex());
        auto &                                regs = registry().regs_;
        auto it = std::find_if(regs.begin(), regs.end(), [&](const RegEntry & e) { return e.reg == reg; });
        if (it == regs.end()) {
            WSP_LOG_ERROR("%s: backend %p is not registered\n", __func__, (void *) reg);
            return;
        }
        if (it->handle == nullptr) {
            WSP_LOG_ERROR("%s: %s was not loaded from a library; it stays registered\n", __func__,
                          wsp_ggml_backend_reg_name(reg));
            return;
        }
        registry().remove(reg, &handle);
    }
    if (handle != nullptr) {
        dlclose(handle);
    }
}

void wsp_ggml_backend_load_all_from_path(const char * dir_path) {
    std::vector<fs::path> dirs;
    if (dir_path != nullptr) {
        dirs.emplace_back(dir_path);
    } else {
        dirs = default_search_dirs();
    }
    // best score per backend name, skipping backends that are already registered
    struct Candidate {
        std::string name;
        fs::path    path;
        int         score;
    };
    std::vector<Candidate> best;
    for (const fs::path & dir : dirs) {
        std::error_code ec;
        for (const fs::directory_entry & entry : fs::directory_iterator(dir, ec)) {
            const std::string file = entry.path().filename().string();
            const std::string name = backend_name_of(file);
            if (name.empty() || name == "base" || name == "cpu" || entry.path().extension() != ".so") {
                continue;
            }
            if (wsp_ggml_backend_reg_by_name(name.c_str()) != nullptr) {
                continue;
            }
            void * h = dlopen(entry.path().c_str(), RTLD_NOW | RTLD_LOCAL);
            if (h == nullptr) {
                continue;
            }
            const bool is_backend = dlsym(h, "wsp_ggml_backend_init") != nullptr;
            auto       score_fn   = reinterpret_cast<wsp_ggml_backend_score_t>(dlsym(h, "wsp_ggml_backend_score"));
            const int  score      = score_fn ? score_fn() : 1;
            dlclose(h);
            if (!is_backend || score <= 0) {
                continue;
            }
            auto it = std::find_if(best.begin(), best.end(), [&](const Candidate & c) { return c.name == name; });
            if (it == best.end()) {
                best.push_back({ name, entry.path(), score });
            } else if (score > it->score) {
                *it = { name, entry.path(), score };
            }
        }
    }
    for (const Candidate & c : best) {
        load_library(c.path.string(), true);
    }
}

void wsp_ggml_backend_load_all(void) {
    wsp_ggml_backend_load_all_from_path(nullptr);
}

} // extern "C"
