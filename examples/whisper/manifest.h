#pragma once

// What makes whisper_transcribe resumable and shardable (Note [manifest] in manifest.cpp): the
// shard a process takes (--shard, or the engine's environment: Slurm, Kubernetes), the manifest
// of JSON lines it appends one per file, --resume's decision, and `merge`, which joins the
// shards' manifests and checks that every input was done exactly once.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wsp::transcribe {

struct Shard {
    int         index = 0;
    int         count = 1;
    std::string from; // what said so ("--shard", "SLURM_ARRAY_TASK_ID", ...); empty: not sharded

    std::string name() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// This process's shard: --shard "I/N" when given, else from the environment (Slurm's array task or
// task rank, Kubernetes' JOB_COMPLETION_INDEX with `shards` or WSP_SHARDS), else one shard of one.
// false with a message when what is given does not make a shard.
bool find_shard(const std::string & flag, int shards, Shard & s, std::string & error);

// The files of shard s: the inputs sorted, each once, and every count-th from index on.
std::vector<std::string> take_shard(std::vector<std::string> files, const Shard & s);

// What a file was when it was done: its size and modification time (ns); false when it is gone.
struct Stamp {
    int64_t size     = -1;
    int64_t mtime_ns = -1;
};
bool stamp_of(const std::string & path, Stamp & stamp);

// One line of a manifest: one file's outcome.
struct Entry {
    std::string              path;
    Stamp                    stamp;
    bool                     ok = false;
    std::vector<std::string> outputs; // the transcript files written for it
    double                   audio_s = 0.0, wall_s = 0.0;
    double                   finished = 0.0; // seconds since the epoch
    std::string              device, error, shard;
};

// A manifest file: the entries read at open (the last one of each path) and new ones appended,
// each in one write(2) of a whole line.
class Manifest {
public:
    Manifest()                             = default;
    Manifest(const Manifest &)             = delete;
    Manifest & operator=(const Manifest &) = delete;
    ~Manifest();

    bool open(const std::string & path, std::string & error);
    bool append(const Entry & e, std::string & error);

    // the last entry of path, or null
    const Entry * last(const std::string & path) const;

private:
    int                          fd_ = -1;
    std::map<std::string, Entry> last_;
};

// Where a run's manifest and its list of inputs go: --manifest, else <output-dir>/manifest.jsonl,
// or manifest-<I>-of-<N>.jsonl for a shard; empty when there is neither.
std::string manifest_path(const std::string & flag, const std::string & output_dir, const Shard & s);
std::string inputs_path(const std::string & manifest);

// --resume's decision for a file: done already (ok, unchanged, every output there), or failed
// already and unchanged, unless retry_failed.
bool done_before(const Entry * e, const Stamp & now, bool retry_failed);

// `whisper_transcribe merge DIR`: DIR's manifest-*-of-N.jsonl and their lists of inputs joined into
// DIR/manifest.jsonl, one entry per input, and a summary per shard and device on stderr. Exit 0
// when every shard is there and every input was done once; 1 naming the missing, failed and twice
// done files; 2 when DIR holds no shard's manifest.
int merge_main(const std::string & dir);

} // namespace wsp::transcribe
