#pragma once

// The CLI's subcommands, one file each (convert.cpp, devices.cpp, encode.cpp, write_model.cpp), and the
// options they take once the command line is parsed (tools/cli.cpp). Each prints plain text to
// stdout, or one JSON object with the same figures when its options ask for JSON, and returns
// the process's exit status; errors go to stderr.

#include "model/whisper_encoder.h"
#include "model/whisper_file.h"

#include <string>
#include <vector>

namespace wsp::cli {

// Note [exit codes]: what wsp-ggml-cli's status means (README lists them; a test per code in
// tests/CMakeLists.txt): 0 done (or --help), 1 the work failed (no device, an allocation, a
// compute, a file that cannot be written), 2 `encode --check` found the result wrong, 64 (BSD's
// EX_USAGE) the command line is wrong: an unknown command or option, a missing or bad value, a
// --tensor-split that does not fit the devices found. The message says which, on stderr.
constexpr int EXIT_FAILED = 1;
constexpr int EXIT_CHECK  = 2;
constexpr int EXIT_USAGE  = 64;

enum class Mode { Split, Layers, All };

struct EncodeOptions {
    wsp::model::EncoderConfig cfg;
    int                       n_threads = 2;
    int                       runs      = 3;
    bool                      check     = false;
    bool                      json      = false;
    std::string               device    = "auto"; // auto (every GPU, else the CPU), cpu, or a device name
    int                       n_sim     = 0;      // > 0: this many sim devices instead of GPUs
    Mode                      mode      = Mode::Split;
    std::string               tensor_split; // --tensor-split as given (empty: the default shares); parsed
                                            // by partition::parse once the devices are known
};

// 0; the registered backends, devices and registries
int cmd_devices(bool json);

// 0, EXIT_FAILED (no device, compute failed, ...), EXIT_CHECK or EXIT_USAGE (a bad --tensor-split)
int cmd_encode(const EncodeOptions & o);

// 0, or 1 with a message when the file (the checkpoint folder, with hf) cannot be written
int cmd_write_model(const wsp::model::WhisperFileConfig & cfg, const std::string & out, bool hf, bool json);

// 0, or 1 with a message when the checkpoint cannot be read or the file written
int cmd_convert(const std::string & dir, wsp_ggml_type type, const std::string & out, bool json);

} // namespace wsp::cli
