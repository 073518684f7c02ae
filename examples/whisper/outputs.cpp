// Note [output formats]: what each transcript file holds.
//  - txt: each segment's text on a line of its own (the leading space whisper.cpp gives dropped).
//  - srt: numbered cues, "HH:MM:SS,mmm --> HH:MM:SS,mmm", the text, a blank line.
//  - vtt: "WEBVTT", then cues "HH:MM:SS.mmm --> HH:MM:SS.mmm" and the text with &, < and >
//    escaped as WebVTT cue text requires.
//  - tsv: a header "start\tend\ttext", then integer milliseconds and the text, its tabs and line
//    breaks made spaces (as openai-whisper writes it).
//  - json: the file, the language and the segments (start and end in seconds, text, tokens with
//    id, text and probability).
// Times never run backwards: a cue starts no earlier than the one before it and ends no earlier
// than it starts (whisper.cpp's timestamps may do either).

#include "outputs.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace wsp::transcribe {

namespace fs = std::filesystem;

namespace {

// "HH:MM:SS<sep>mmm" of centiseconds
std::string clock_time(int64_t cs, char sep) {
    const int64_t ms = cs * 10;
    char          buf[40];
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", (long long) (ms / 3600000),
                  (long long) (ms / 60000 % 60), (long long) (ms / 1000 % 60), sep, (long long) (ms % 1000));
    return buf;
}

std::string trimmed(const std::string & s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    const size_t e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string vtt_escaped(const std::string & s) {
    std::string out;
    for (const char c : s) {
        out += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : std::string(1, c);
    }
    return out;
}

// the segments' times made monotonic (Note [output formats])
std::vector<std::pair<int64_t, int64_t>> cue_times(const Transcript & t) {
    std::vector<std::pair<int64_t, int64_t>> out;
    int64_t                                  last = 0;
    for (const Segment & s : t.segments) {
        const int64_t t0 = std::max(s.t0, last);
        const int64_t t1 = std::max(s.t1, t0);
        out.emplace_back(t0, t1);
        last = t0;
    }
    return out;
}

} // namespace

std::string json_string(const std::string & s) {
    std::string out = "\"";
    for (const unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += char(c);
                }
        }
    }
    return out + "\"";
}

const std::vector<std::string> & output_formats() {
    static const std::vector<std::string> all = { "txt", "vtt", "srt", "tsv", "json" };
    return all;
}

bool parse_output_formats(const std::string & list, std::vector<std::string> & out, std::string * bad) {
    out.clear();
    std::stringstream in(list);
    for (std::string name; std::getline(in, name, ',');) {
        if (name == "all") {
            out = output_formats();
            return true;
        }
        if (std::find(output_formats().begin(), output_formats().end(), name) == output_formats().end()) {
            *bad = name;
            return false;
        }
        if (std::find(out.begin(), out.end(), name) == out.end()) {
            out.push_back(name);
        }
    }
    *bad = list;
    return !out.empty();
}

std::string render(const Transcript & t, const std::string & format) {
    const auto         times = cue_times(t);
    std::ostringstream o;
    if (format == "vtt") {
        o << "WEBVTT\n\n";
    } else if (format == "tsv") {
        o << "start\tend\ttext\n";
    } else if (format == "json") {
        o << "{\"file\":" << json_string(t.file) << ",\"language\":" << json_string(t.language) << ",\"segments\":[";
    }
    for (size_t i = 0; i < t.segments.size(); ++i) {
        const Segment &   s    = t.segments[i];
        const std::string text = trimmed(s.text);
        const auto [t0, t1]    = times[i];
        if (format == "txt") {
            o << text << "\n";
        } else if (format == "srt") {
            o << i + 1 << "\n" << clock_time(t0, ',') << " --> " << clock_time(t1, ',') << "\n" << text << "\n\n";
        } else if (format == "vtt") {
            o << clock_time(t0, '.') << " --> " << clock_time(t1, '.') << "\n" << vtt_escaped(text) << "\n\n";
        } else if (format == "tsv") {
            std::string flat = text;
            std::replace_if(
                flat.begin(), flat.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
            o << t0 * 10 << "\t" << t1 * 10 << "\t" << flat << "\n";
        } else if (format == "json") {
            char times_s[64];
            std::snprintf(times_s, sizeof times_s, "\"start\":%.2f,\"end\":%.2f", t0 / 100.0, t1 / 100.0);
            o << (i ? "," : "") << "{" << times_s << ",\"text\":" << json_string(text) << ",\"tokens\":[";
            for (size_t k = 0; k < s.tokens.size(); ++k) {
                char p[32];
                std::snprintf(p, sizeof p, "%.6f", s.tokens[k].p);
                o << (k ? "," : "") << "{\"id\":" << s.tokens[k].id << ",\"text\":" << json_string(s.tokens[k].text)
                  << ",\"p\":" << p << "}";
            }
            o << "]}";
        }
    }
    if (format == "json") {
        o << "]}\n";
    }
    return o.str();
}

std::string output_path(const std::string & dir, const std::string & path, const std::string & format) {
    fs::path rel;
    bool     leading = true;
    for (const fs::path & part : fs::path(path).relative_path()) {
        if (leading && (part == "." || part == "..")) {
            continue;
        }
        leading = false;
        rel /= part;
    }
    return (fs::path(dir) / rel).replace_extension("." + format).string();
}

bool write_atomically(const std::string & path, const std::string & text, std::string * error) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    const std::string tmp = path + ".tmp-" + std::to_string(getpid());
    {
        std::ofstream f(tmp, std::ios::binary);
        f << text;
        f.flush();
        if (!f) {
            fs::remove(tmp, ec);
            *error = "could not write " + path;
            return false;
        }
    }
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        *error = "could not write " + path;
        return false;
    }
    return true;
}

} // namespace wsp::transcribe
