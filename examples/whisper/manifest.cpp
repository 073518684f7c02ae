// Shards, manifests, --resume and merge for whisper_transcribe.
//
// Note [manifest]
// - A shard is a fixed part of the inputs: sorted, each path once, every N-th from I on, so every
//   process of a job computes the same parts from the same inputs with no coordinator, and a
//   requeued task takes the same part again. The index comes from the engine where there is one:
//   Slurm's array task (ID less MIN, over STEP, of COUNT), Slurm's task rank (PROCID of NTASKS),
//   Kubernetes' Indexed Job (JOB_COMPLETION_INDEX, with the completions given as --shards or
//   WSP_SHARDS, which the Job does not put in the environment).
// - The manifest is JSON lines, one per file finished (path, size, mtime, status, outputs, audio
//   and wall seconds, device, error, shard, when), appended by the one process that owns it (the
//   parent; workers never write it) in one write(2) of a whole line on an O_APPEND descriptor: a
//   crash leaves whole lines and at most one cut last line, which reading skips. A file abandoned
//   by a stop has no line, so the next --resume does it.
// - --resume skips a file whose last line matches its size and mtime and is ok with every output
//   present, or failed (done again with --retry-failed); a changed file is done again.
// - Each shard also writes the list of its inputs beside its manifest (manifest-I-of-N.inputs), so
//   that merge knows what each shard had to do: an input without a line is missing, one with two
//   ok lines of the same size and mtime was done twice.

#include "manifest.h"

#include "outputs.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace wsp::transcribe {

namespace {

// a whole number from an environment variable, or -1 where it is unset or not one
long env_number(const char * name) {
    const char * v = std::getenv(name);
    if (!v || !*v) {
        return -1;
    }
    char *     end = nullptr;
    const long n   = std::strtol(v, &end, 10);
    return *end == '\0' && n >= 0 ? n : -1;
}

bool set_shard(Shard & s, long index, long count, const std::string & from, std::string & error) {
    if (count < 1 || index < 0 || index >= count) {
        error = from + " gives shard " + std::to_string(index) + " of " + std::to_string(count) +
                ", which is not a shard: give --shard I/N with 0 <= I < N";
        return false;
    }
    s.index = int(index);
    s.count = int(count);
    s.from  = from;
    return true;
}

// Slurm's array task: ID, MIN, STEP and COUNT (or MAX) of --array=MIN-MAX[:STEP]
bool slurm_array_shard(Shard & s, std::string & error) {
    const long id = env_number("SLURM_ARRAY_TASK_ID");
    if (id < 0) {
        return false;
    }
    const long min   = std::max(0L, env_number("SLURM_ARRAY_TASK_MIN"));
    const long step  = std::max(1L, env_number("SLURM_ARRAY_TASK_STEP"));
    long       count = env_number("SLURM_ARRAY_TASK_COUNT");
    if (count < 0 && env_number("SLURM_ARRAY_TASK_MAX") >= min) {
        count = (env_number("SLURM_ARRAY_TASK_MAX") - min) / step + 1;
    }
    if (count < 0 || (id - min) % step != 0) {
        error = "SLURM_ARRAY_TASK_ID=" + std::to_string(id) +
                " with no COUNT or MAX, or off the MIN-MAX:STEP range: give --shard I/N";
        return true; // the environment was there, and wrong
    }
    set_shard(s, (id - min) / step, count, "SLURM_ARRAY_TASK_ID", error);
    return true;
}

std::string line_of(const Entry & e) {
    nlohmann::ordered_json j = {
        // in this order in the file
        { "path", e.path },
        { "size", e.stamp.size },
        { "mtime_ns", e.stamp.mtime_ns },
        { "status", e.ok ? "ok" : "failed" },
        { "outputs", e.outputs },
        { "audio_s", e.audio_s },
        { "wall_s", e.wall_s },
        { "device", e.device },
        { "shard", e.shard },
        { "finished", e.finished },
    };
    if (!e.ok) {
        j["error"] = e.error;
    }
    return j.dump() + "\n";
}

bool entry_of(const std::string & line, Entry & e) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("path") || !j.contains("status")) {
        return false;
    }
    try {
        e.path           = j.at("path").get<std::string>();
        e.stamp.size     = j.value("size", int64_t(-1));
        e.stamp.mtime_ns = j.value("mtime_ns", int64_t(-1));
        e.ok             = j.at("status").get<std::string>() == "ok";
        e.outputs        = j.value("outputs", std::vector<std::string>{});
        e.audio_s        = j.value("audio_s", 0.0);
        e.wall_s         = j.value("wall_s", 0.0);
        e.finished       = j.value("finished", 0.0);
        e.device         = j.value("device", std::string());
        e.error          = j.value("error", std::string());
        e.shard          = j.value("shard", std::string());
    } catch (const nlohmann::json::exception &) {
        return false;
    }
    return true;
}

// every whole entry of a manifest file, in order; the count of lines that were not one
std::vector<Entry> read_entries(const std::string & path, size_t & bad) {
    std::vector<Entry> out;
    std::ifstream      in(path);
    bad = 0;
    for (std::string line; std::getline(in, line);) {
        Entry e;
        if (entry_of(line, e)) {
            out.push_back(std::move(e));
        } else if (!line.empty()) {
            ++bad;
        }
    }
    return out;
}

bool same(const Stamp & a, const Stamp & b) {
    return a.size == b.size && a.mtime_ns == b.mtime_ns;
}

} // namespace

bool find_shard(const std::string & flag, int shards, Shard & s, std::string & error) {
    s = Shard{};
    if (!flag.empty()) {
        long index = -1, count = -1;
        char rest = 0;
        if (std::sscanf(flag.c_str(), "%ld/%ld%c", &index, &count, &rest) != 2) {
            error = "--shard " + flag + " is not I/N (for example 0/4)";
            return false;
        }
        return set_shard(s, index, count, "--shard", error);
    }
    if (slurm_array_shard(s, error)) {
        return error.empty();
    }
    if (env_number("SLURM_NTASKS") > 1 && env_number("SLURM_PROCID") >= 0) {
        return set_shard(s, env_number("SLURM_PROCID"), env_number("SLURM_NTASKS"), "SLURM_PROCID", error);
    }
    const long count = shards > 0 ? shards : env_number("WSP_SHARDS");
    if (env_number("JOB_COMPLETION_INDEX") >= 0) {
        if (count < 1) {
            error = "JOB_COMPLETION_INDEX is set but not the number of shards: give --shards N or WSP_SHARDS "
                    "(the Job's completions)";
            return false;
        }
        return set_shard(s, env_number("JOB_COMPLETION_INDEX"), count, "JOB_COMPLETION_INDEX", error);
    }
    if (shards > 0) {
        error = "--shards N needs JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) or --shard I/N";
        return false;
    }
    return true;
}

std::vector<std::string> take_shard(std::vector<std::string> files, const Shard & s) {
    std::sort(files.begin(), files.end());
    files.erase(std::unique(files.begin(), files.end()), files.end());
    std::vector<std::string> mine;
    for (size_t i = size_t(s.index); i < files.size(); i += size_t(s.count)) {
        mine.push_back(files[i]);
    }
    return mine;
}

bool stamp_of(const std::string & path, Stamp & stamp) {
    struct stat st = {};
    if (::stat(path.c_str(), &st) != 0) {
        stamp = Stamp{};
        return false;
    }
    stamp.size     = int64_t(st.st_size);
    stamp.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    return true;
}

Manifest::~Manifest() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

bool Manifest::open(const std::string & path, std::string & error) {
    size_t bad = 0;
    for (Entry & e : read_entries(path, bad)) {
        last_[e.path] = std::move(e);
    }
    if (bad > 0) { // a line cut by a crash: its file is done again
        std::fprintf(stderr, "whisper_transcribe: %s: %zu line(s) that are not entries skipped\n", path.c_str(), bad);
    }
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path(), ec);
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
        error = "cannot write the manifest " + path + ": " + std::strerror(errno);
        return false;
    }
    return true;
}

bool Manifest::append(const Entry & e, std::string & error) {
    const std::string line = line_of(e);
    const ssize_t     n    = ::write(fd_, line.data(), line.size());
    if (n != ssize_t(line.size())) {
        error = std::string("cannot append to the manifest: ") + (n < 0 ? std::strerror(errno) : "short write");
        return false;
    }
    last_[e.path] = e;
    return true;
}

const Entry * Manifest::last(const std::string & path) const {
    const auto it = last_.find(path);
    return it == last_.end() ? nullptr : &it->second;
}

std::string manifest_path(const std::string & flag, const std::string & output_dir, const Shard & s) {
    if (!flag.empty()) {
        return flag;
    }
    if (output_dir.empty()) {
        return "";
    }
    const std::string name = s.from.empty()
                                 ? "manifest.jsonl"
                                 : "manifest-" + std::to_string(s.index) + "-of-" + std::to_string(s.count) + ".jsonl";
    return (fs::path(output_dir) / name).string();
}

std::string inputs_path(const std::string & manifest) {
    return fs::path(manifest).replace_extension(".inputs").string();
}

bool done_before(const Entry * e, const Stamp & now, bool retry_failed) {
    if (!e || !same(e->stamp, now)) {
        return false;
    }
    if (!e->ok) {
        return !retry_failed;
    }
    std::error_code ec;
    return std::all_of(e->outputs.begin(), e->outputs.end(), [&](const std::string & p) { return fs::exists(p, ec); });
}

namespace {

struct ShardLoad {
    size_t files   = 0;
    double audio_s = 0.0, busy_s = 0.0, first = 1e300, last = 0.0;

    void add(const Entry & e) {
        files += 1;
        audio_s += e.audio_s;
        busy_s += e.wall_s;
        first = std::min(first, e.finished - e.wall_s);
        last  = std::max(last, e.finished);
    }
};

void name_files(const char * what, const std::vector<std::string> & files) {
    for (const auto & f : files) {
        std::fprintf(stderr, "merge: %s: %s\n", what, f.c_str());
    }
}

} // namespace

int merge_main(const std::string & dir) {
    const std::regex        shard_name(R"(manifest-(\d+)-of-(\d+)\.jsonl)");
    std::map<int, fs::path> manifests;
    std::set<int>           counts;
    std::error_code         ec;
    for (const auto & e : fs::directory_iterator(dir, ec)) {
        std::smatch       m;
        const std::string name = e.path().filename().string();
        if (std::regex_match(name, m, shard_name)) {
            manifests[std::stoi(m[1])] = e.path();
            counts.insert(std::stoi(m[2]));
        }
    }
    if (manifests.empty()) {
        std::fprintf(stderr, "merge: no shard's manifest (manifest-I-of-N.jsonl) in %s\n", dir.c_str());
        return 2;
    }
    if (counts.size() != 1) {
        std::fprintf(stderr, "merge: %s holds manifests of runs with different shard counts\n", dir.c_str());
        return 1;
    }
    const int                        n = *counts.begin();
    std::vector<std::string>         missing_shards, missing, failed, twice;
    std::map<std::string, Entry>     final; // each input's last entry
    std::map<std::string, int>       owner; // each input's shard
    std::map<std::string, ShardLoad> by_shard, by_device;
    for (int i = 0; i < n; ++i) {
        const auto it = manifests.find(i);
        if (it == manifests.end() || !fs::exists(inputs_path(it->second.string()))) {
            missing_shards.push_back(std::to_string(i) + "/" + std::to_string(n));
            continue;
        }
        size_t                                    bad = 0;
        std::map<std::string, std::vector<Entry>> entries;
        for (Entry & e : read_entries(it->second.string(), bad)) {
            entries[e.path].push_back(std::move(e));
        }
        std::ifstream inputs(inputs_path(it->second.string()));
        for (std::string path; std::getline(inputs, path);) {
            if (path.empty()) {
                continue;
            }
            if (!owner.emplace(path, i).second) {
                twice.push_back(path + " (in shards " + std::to_string(owner[path]) + " and " + std::to_string(i) +
                                ")");
                continue;
            }
            const auto found = entries.find(path);
            if (found == entries.end()) {
                missing.push_back(path);
                continue;
            }
            const Entry & last = found->second.back();
            const size_t  oks  = size_t(std::count_if(found->second.begin(), found->second.end(), [&](const Entry & e) {
                return e.ok && same(e.stamp, last.stamp);
            }));
            if (oks > 1) {
                twice.push_back(path + " (" + std::to_string(oks) + " times)");
            }
            if (!last.ok) {
                failed.push_back(path + ": " + last.error);
            }
            for (const Entry & e : found->second) { // every run counts toward the rates
                by_shard[std::to_string(i) + "/" + std::to_string(n)].add(e);
                by_device[e.device].add(e);
            }
            final[path] = last;
        }
    }
    std::string text, error;
    double      audio_s = 0.0;
    for (const auto & [path, e] : final) {
        text += line_of(e);
        audio_s += e.ok ? e.audio_s : 0.0;
    }
    const std::string merged = (fs::path(dir) / "manifest.jsonl").string();
    if (!write_atomically(merged, text, &error)) {
        std::fprintf(stderr, "merge: %s\n", error.c_str());
        return 1;
    }
    std::fprintf(stderr,
                 "merge: %zu inputs over %d shards into %s: %zu done, %zu failed, %zu missing, %zu done twice, "
                 "%zu shards missing; %.3f h of audio\n",
                 owner.size(), n, merged.c_str(), final.size() - failed.size(), failed.size(), missing.size(),
                 twice.size(), missing_shards.size(), audio_s / 3600.0);
    for (const auto * table : { &by_shard, &by_device }) {
        for (const auto & [name, l] : *table) {
            const double span = l.last - l.first;
            std::fprintf(stderr,
                         "  %-8s %-10s %5zu files %9.2f s of audio, %7.2f audio s/s over %.2f s, %7.2f per busy s\n",
                         table == &by_shard ? "shard" : "device", name.c_str(), l.files, l.audio_s,
                         span > 0 ? l.audio_s / span : 0.0, span, l.busy_s > 0 ? l.audio_s / l.busy_s : 0.0);
        }
    }
    name_files("shard missing", missing_shards);
    name_files("missing", missing);
    name_files("failed", failed);
    name_files("done twice", twice);
    return missing_shards.empty() && missing.empty() && failed.empty() && twice.empty() ? 0 : 1;
}

} // namespace wsp::transcribe
