// The CLI's JSON writer (json.h). Strings are written as UTF-8 with the characters JSON requires
// escaped; a byte that does not start a well-formed UTF-8 sequence becomes U+FFFD, so a device
// description in another encoding cannot make the output unparsable.

#include "cli/json.h"

#include <cmath>
#include <cstdio>

namespace wsp::cli {

namespace {

// the length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, no surrogates,
// at most U+10FFFF), 0 where there is none
size_t utf8_length(const std::string & s, size_t i) {
    const auto   b    = [&](size_t k) { return (unsigned char) s[k]; };
    const size_t left = s.size() - i;
    const auto   cont = [&](size_t k) { return (b(i + k) & 0xC0) == 0x80; };
    const int    c    = b(i);
    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        return left >= 2 && cont(1) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        const int lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return left >= 3 && b(i + 1) >= lo && b(i + 1) <= hi && cont(2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        const int lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return left >= 4 && b(i + 1) >= lo && b(i + 1) <= hi && cont(2) && cont(3) ? 4 : 0;
    }
    return 0;
}

} // namespace

std::string json_quote(const std::string & s) {
    std::string out = "\"";
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = (unsigned char) s[i];
        const size_t        n = utf8_length(s, i);
        if (n == 0) {
            out += "\\ufffd";
            ++i;
            continue;
        }
        if (n > 1) {
            out.append(s, i, n);
        } else if (c == '"' || c == '\\') {
            out += '\\';
            out += (char) c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\b') {
            out += "\\b";
        } else if (c == '\f') {
            out += "\\f";
        } else if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
        } else {
            out += (char) c;
        }
        i += n;
    }
    return out + "\"";
}

void JsonWriter::separate() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (!first_.empty()) {
        if (!first_.back()) {
            out_ += ',';
        }
        first_.back() = false;
    }
}

JsonWriter & JsonWriter::begin_object() {
    separate();
    out_ += '{';
    first_.push_back(true);
    return *this;
}

JsonWriter & JsonWriter::end_object() {
    first_.pop_back();
    out_ += '}';
    return *this;
}

JsonWriter & JsonWriter::begin_array() {
    separate();
    out_ += '[';
    first_.push_back(true);
    return *this;
}

JsonWriter & JsonWriter::end_array() {
    first_.pop_back();
    out_ += ']';
    return *this;
}

JsonWriter & JsonWriter::key(const std::string & name) {
    separate();
    out_ += json_quote(name);
    out_ += ':';
    after_key_ = true;
    return *this;
}

JsonWriter & JsonWriter::value(const std::string & s) {
    separate();
    out_ += json_quote(s);
    return *this;
}

JsonWriter & JsonWriter::value(const char * s) {
    return s == nullptr ? null() : value(std::string(s));
}

JsonWriter & JsonWriter::value(double v) {
    if (!std::isfinite(v)) {
        return null();
    }
    separate();
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.10g", v);
    out_ += buf;
    return *this;
}

JsonWriter & JsonWriter::value(int64_t v) {
    separate();
    out_ += std::to_string(v);
    return *this;
}

JsonWriter & JsonWriter::value(uint64_t v) {
    separate();
    out_ += std::to_string(v);
    return *this;
}

JsonWriter & JsonWriter::value(bool v) {
    separate();
    out_ += v ? "true" : "false";
    return *this;
}

JsonWriter & JsonWriter::null() {
    separate();
    out_ += "null";
    return *this;
}

} // namespace wsp::cli
