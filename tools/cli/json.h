#pragma once

// A small JSON writer for the CLI's --json output: objects, arrays, strings (escaped, invalid
// UTF-8 replaced by U+FFFD so that the text is always valid JSON), numbers (NaN and infinities
// become null, which JSON has no number for) and booleans. The caller pairs begin/end; commas
// are placed by the writer.

#include <cstdint>
#include <string>
#include <vector>

namespace wsp::cli {

class JsonWriter {
public:
    JsonWriter & begin_object();
    JsonWriter & end_object();
    JsonWriter & begin_array();
    JsonWriter & end_array();

    // the key of the next value in the enclosing object
    JsonWriter & key(const std::string & name);

    JsonWriter & value(const std::string & s);
    JsonWriter & value(const char * s); // NULL writes null
    JsonWriter & value(double v);
    JsonWriter & value(int64_t v);
    JsonWriter & value(uint64_t v);
    JsonWriter & value(int v) { return value((int64_t) v); }
    JsonWriter & value(bool v);
    JsonWriter & null();

    // key(name).value(v)
    template <typename T>
    JsonWriter & field(const std::string & name, const T & v) {
        return key(name).value(v);
    }

    const std::string & str() const { return out_; }

private:
    void separate(); // the comma before a value or key, where one is due

    std::string       out_;
    std::vector<bool> first_; // per open object or array: nothing written in it yet
    bool              after_key_ = false;
};

// s as a JSON string literal, quotes included
std::string json_quote(const std::string & s);

} // namespace wsp::cli
