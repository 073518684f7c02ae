#pragma once

// The transcript files whisper_transcribe writes (--output-format): txt, vtt, srt, tsv and json,
// by the formats' rules, each written under a temporary name and renamed into place, so that a
// crash never leaves half a file (Note [output formats] in outputs.cpp).

#include <cstdint>
#include <string>
#include <vector>

namespace wsp::transcribe {

struct Token {
    int         id = 0;
    std::string text;
    float       p = 0.0f; // the model's probability of it
};

struct Segment {
    int64_t            t0 = 0, t1 = 0; // centiseconds, as whisper.cpp gives them
    std::string        text;
    std::vector<Token> tokens;
};

struct Transcript {
    std::string          file;
    std::string          language;
    std::vector<Segment> segments;
};

// s as a JSON string, quotes included
std::string json_string(const std::string & s);

// the formats by name, in the order "all" means
const std::vector<std::string> & output_formats();

// "txt,srt" or "all" into format names; false with the offending name in *bad
bool parse_output_formats(const std::string & list, std::vector<std::string> & out, std::string * bad);

// the file's text in one format (Note [output formats])
std::string render(const Transcript & t, const std::string & format);

// where input `path`'s output of `format` goes under `dir`: the path as given, its root and any
// leading "." or ".." taken off, so inputs in different folders never share an output
std::string output_path(const std::string & dir, const std::string & path, const std::string & format);

// writes `text` to `path` (its folders made) under a temporary name, then renames it; false with
// *error set
bool write_atomically(const std::string & path, const std::string & text, std::string * error);

} // namespace wsp::transcribe
