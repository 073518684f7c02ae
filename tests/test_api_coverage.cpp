// The API lists of the contract (tests/api/*.txt, copies of the shared lists) against what
// we build and what we test: every listed function is exported by the library a client links
// (found with dlsym through libwsp-ggml and the libraries it depends on), and every function of
// the seed's header is called by some test source; and every name of whisper.rn 0.4.0's public
// headers is declared by ours and exported (the surface test). A failure names the missing ones.

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef WSP_TESTS_DIR
#    error "WSP_TESTS_DIR (the tests source directory) must be defined"
#endif
#ifndef WSP_INCLUDE_DIR
#    error "WSP_INCLUDE_DIR (the public headers' directory) must be defined"
#endif
#ifndef WSP_GGML_LIBRARY
#    error "WSP_GGML_LIBRARY (the file of the wsp-ggml library) must be defined"
#endif

namespace wsp::test {
namespace {

namespace fs = std::filesystem;

constexpr const char * SCHED_PREFIX = "wsp_ggml_backend_sched_";

std::vector<std::string> read_list(const std::string & file) {
    std::ifstream            in(std::string(WSP_TESTS_DIR) + "/api/" + file);
    std::vector<std::string> names;
    for (std::string line; std::getline(in, line);) {
        while (!line.empty() && std::isspace((unsigned char) line.back())) {
            line.pop_back();
        }
        if (!line.empty()) {
            names.push_back(line);
        }
    }
    return names;
}

std::string join(const std::vector<std::string> & names) {
    std::string s;
    for (const std::string & n : names) {
        s += "\n  " + n;
    }
    return s;
}

bool is_ident(char c) {
    return std::isalnum((unsigned char) c) || c == '_';
}

// "HEADER NAME" lines (declared-functions.txt): name -> the package headers that declare it
std::map<std::string, std::set<std::string>> read_declared(const std::string & file) {
    std::map<std::string, std::set<std::string>> names;
    for (const std::string & line : read_list(file)) {
        std::istringstream in(line);
        std::string        header, name;
        if (line[0] != '#' && (in >> header >> name)) {
            names[name].insert(header);
        }
    }
    return names;
}

// the source with comments and the contents of string and character literals blanked out, so
// that a name mentioned in a comment or a message does not count as a call
std::string code_only(const std::string & src) {
    std::string out(src.size(), ' ');
    size_t      i = 0;
    while (i < src.size()) {
        const char c = src[i];
        if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {
            i = src.find('\n', i);
            i = i == std::string::npos ? src.size() : i;
        } else if (c == '/' && i + 1 < src.size() && src[i + 1] == '*') {
            const size_t end = src.find("*/", i + 2);
            i                = end == std::string::npos ? src.size() : end + 2;
        } else if (c == 'R' && i + 1 < src.size() && src[i + 1] == '"' && (i == 0 || !is_ident(src[i - 1]))) {
            const size_t open = src.find('(', i);
            const size_t close =
                open == std::string::npos ? open : src.find(")" + src.substr(i + 2, open - i - 2) + "\"", open);
            i = close == std::string::npos ? src.size() : close + (open - i - 2) + 2;
        } else if (c == '"' || c == '\'') {
            // a digit separator (1'000) is not a literal
            if (c == '\'' && i > 0 && std::isxdigit((unsigned char) src[i - 1])) {
                ++i;
                continue;
            }
            ++i;
            while (i < src.size() && src[i] != c) {
                i += src[i] == '\\' ? 2 : 1;
            }
            ++i;
        } else {
            out[i] = c;
            ++i;
        }
    }
    return out;
}

// identifiers followed by '(' in the code of one source
void collect_calls(const std::string & code, std::set<std::string> & called) {
    size_t i = 0;
    while (i < code.size()) {
        if (!is_ident(code[i]) || (i > 0 && is_ident(code[i - 1]))) {
            ++i;
            continue;
        }
        size_t end = i;
        while (end < code.size() && is_ident(code[end])) {
            ++end;
        }
        size_t next = end;
        while (next < code.size() && std::isspace((unsigned char) code[next])) {
            ++next;
        }
        if (next < code.size() && code[next] == '(') {
            called.insert(code.substr(i, end - i));
        }
        i = end;
    }
}

std::set<std::string> calls_in_tests() {
    std::set<std::string> called;
    for (const fs::directory_entry & e : fs::directory_iterator(WSP_TESTS_DIR)) {
        const fs::path p = e.path();
        if (p.extension() != ".cpp" || p.filename() == "test_api_coverage.cpp") {
            continue;
        }
        std::ifstream      in(p);
        std::ostringstream text;
        text << in.rdbuf();
        collect_calls(code_only(text.str()), called);
    }
    return called;
}

TEST(ApiCoverage, TheListsAreComplete) {
    const std::vector<std::string> seed   = read_list("seed-backend-functions.txt");
    const std::vector<std::string> client = read_list("client-functions.txt");
    EXPECT_EQ(seed.size(), 105u);
    EXPECT_EQ(client.size(), 99u);
    size_t n_sched = 0;
    for (const std::string & n : seed) {
        n_sched += n.rfind(SCHED_PREFIX, 0) == 0 ? 1 : 0;
        EXPECT_EQ(n.rfind("wsp_ggml_", 0), 0u) << n;
    }
    EXPECT_EQ(n_sched, 16u);
    EXPECT_EQ(std::set<std::string>(seed.begin(), seed.end()).size(), seed.size()) << "duplicates";
    EXPECT_EQ(std::set<std::string>(client.begin(), client.end()).size(), client.size()) << "duplicates";
}

TEST(ApiCoverage, EveryListedFunctionIsExported) {
    void * lib = dlopen(WSP_GGML_LIBRARY, RTLD_NOW);
    ASSERT_NE(lib, nullptr) << dlerror();
    for (const char * file : { "seed-backend-functions.txt", "client-functions.txt" }) {
        const std::vector<std::string> names = read_list(file);
        ASSERT_FALSE(names.empty()) << "cannot read tests/api/" << file;
        std::vector<std::string> missing;
        for (const std::string & n : names) {
            if (dlsym(lib, n.c_str()) == nullptr) {
                missing.push_back(n);
            }
        }
        EXPECT_TRUE(missing.empty()) << missing.size() << " functions of " << file << " are not exported by "
                                     << WSP_GGML_LIBRARY << ":" << join(missing);
    }
    dlclose(lib);
}

TEST(ApiCoverage, TheScannerSeesCallsOnly) {
    // the rule the next test relies on, checked on a sample
    std::set<std::string> called;
    collect_calls(code_only("a_fn (1); // b_fn(2)\n/* c_fn(3) */ x = \"d_fn(4)\"; y = 'e'; z = 1'000; "
                            "R\"q(f_fn(5))q\"; g_fn\n(6); xh_fn(7); h_fn;"),
                  called);
    EXPECT_EQ(called, std::set<std::string>({ "a_fn", "g_fn", "xh_fn" }));
}

TEST(ApiCoverage, EverySeedFunctionIsCalledByATest) {
    const std::vector<std::string> seed = read_list("seed-backend-functions.txt");
    ASSERT_FALSE(seed.empty()) << "cannot read tests/api/seed-backend-functions.txt";
    const std::set<std::string> called = calls_in_tests();
    std::vector<std::string>    backend_missing, sched_missing;
    for (const std::string & n : seed) {
        if (called.count(n) == 0) {
            (n.rfind(SCHED_PREFIX, 0) == 0 ? sched_missing : backend_missing).push_back(n);
        }
    }
    EXPECT_TRUE(backend_missing.empty()) << backend_missing.size()
                                         << " backend functions are never called in tests/*.cpp:"
                                         << join(backend_missing);
    EXPECT_TRUE(sched_missing.empty()) << sched_missing.size()
                                       << " scheduler functions are never called in tests/*.cpp:"
                                       << join(sched_missing);
}

// the code of every public header (include/*.h), comments and literals blanked out
std::string public_header_code() {
    std::string code;
    for (const fs::directory_entry & e : fs::directory_iterator(WSP_INCLUDE_DIR)) {
        if (e.path().extension() == ".h") {
            std::ifstream      in(e.path());
            std::ostringstream text;
            text << in.rdbuf();
            code += code_only(text.str()) + "\n";
        }
    }
    return code;
}

// Every name of whisper.rn 0.4.0's public headers (tests/api/declared-functions.txt, a copy of the
// shared list: 540 lines, 530 names) is declared by our headers and, for functions, exported by
// the library a client links. One name of the list is a type: the package's function-pointer
// typedef wsp_ggml_backend_split_buffer_type_t returns wsp_ggml_backend_buffer_type_t, which the
// list's extractor read as a call; a typedef in our headers satisfies it.
TEST(ApiSurface, EveryDeclaredNameIsDeclaredAndExported) {
    const std::map<std::string, std::set<std::string>> declared = read_declared("declared-functions.txt");
    ASSERT_EQ(declared.size(), 530u) << "cannot read tests/api/declared-functions.txt";
    const std::string code = public_header_code();
    ASSERT_FALSE(code.empty()) << "no headers in " << WSP_INCLUDE_DIR;
    std::set<std::string> called;
    collect_calls(code, called);
    void * lib = dlopen(WSP_GGML_LIBRARY, RTLD_NOW);
    ASSERT_NE(lib, nullptr) << dlerror();
    std::vector<std::string> undeclared, unexported, types;
    for (const auto & entry : declared) {
        const std::string & n = entry.first;
        if (std::regex_search(code, std::regex("typedef[^;]*\\b" + n + "\\s*;"))) {
            types.push_back(n);
            continue;
        }
        if (called.count(n) == 0) {
            undeclared.push_back(n + " (" + *entry.second.begin() + ")");
        }
        if (dlsym(lib, n.c_str()) == nullptr) {
            unexported.push_back(n);
        }
    }
    dlclose(lib);
    EXPECT_TRUE(undeclared.empty()) << undeclared.size() << " functions of whisper.rn's headers are not declared in "
                                    << WSP_INCLUDE_DIR << ":" << join(undeclared);
    EXPECT_TRUE(unexported.empty()) << unexported.size() << " functions of whisper.rn's headers are not exported by "
                                    << WSP_GGML_LIBRARY << ":" << join(unexported);
    EXPECT_EQ(types, std::vector<std::string>({ "wsp_ggml_backend_buffer_type_t" }));
}

} // namespace
} // namespace wsp::test
