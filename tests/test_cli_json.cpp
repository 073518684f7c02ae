// The CLI's JSON writer (tools/cli/json.h): escaping, invalid UTF-8, commas and nesting, and the
// numbers JSON has no literal for.

#include "cli/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

using wsp::cli::json_quote;
using wsp::cli::JsonWriter;

TEST(CliJson, QuotesAndEscapes) {
    EXPECT_EQ(json_quote(""), "\"\"");
    EXPECT_EQ(json_quote("CUDA0"), "\"CUDA0\"");
    EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
    EXPECT_EQ(json_quote("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
    EXPECT_EQ(json_quote(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
    EXPECT_EQ(json_quote(std::string("a\0b", 3)), "\"a\\u0000b\"");
}

TEST(CliJson, KeepsValidUtf8AndReplacesInvalid) {
    EXPECT_EQ(json_quote("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    EXPECT_EQ(json_quote("\xff"), "\"\\ufffd\"");                       // never a UTF-8 byte
    EXPECT_EQ(json_quote("\xc3"), "\"\\ufffd\"");                       // truncated at the end
    EXPECT_EQ(json_quote("\xc3x"), "\"\\ufffdx\"");                     // continuation missing
    EXPECT_EQ(json_quote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");            // overlong '/'
    EXPECT_EQ(json_quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\""); // a surrogate
}

TEST(CliJson, NestsWithCommas) {
    JsonWriter j;
    j.begin_object().field("a", 1).key("b").begin_array().value(true).value("x").begin_object().end_object();
    j.begin_array().end_array().end_array().field("c", nullptr).key("d").null().end_object();
    EXPECT_EQ(j.str(), "{\"a\":1,\"b\":[true,\"x\",{},[]],\"c\":null,\"d\":null}");
}

TEST(CliJson, Numbers) {
    JsonWriter j;
    j.begin_array().value(0.5).value(-3.0).value(1e-7).value((int64_t) -42).value((uint64_t) 18446744073709551615ull);
    j.value(std::nan("")).value(std::numeric_limits<double>::infinity()).end_array();
    EXPECT_EQ(j.str(), "[0.5,-3,1e-07,-42,18446744073709551615,null,null]");
}
