// Graph utilities of ggml.h: a graph written in Graphviz dot form (one record per node: name,
// op, type and shape; an edge per source, labelled with its slot; leafs as boxes), and fopen
// with a UTF-8 file name (a plain fopen on POSIX systems, where names are bytes).

#include "impl.h"

#include <string>
#include <unordered_set>

namespace {

std::string shape_of(const wsp_ggml_tensor * t) {
    std::string s = "[";
    for (int d = 0; d < WSP_GGML_MAX_DIMS; ++d) {
        s += std::to_string(t->ne[d]) + (d + 1 < WSP_GGML_MAX_DIMS ? ", " : "]");
    }
    return s;
}

// a record label: braces, bars and angle brackets are syntax in dot labels
std::string escaped(const char * text) {
    std::string s;
    for (const char * c = text; *c != '\0'; ++c) {
        if (std::string("{}|<>\"\\").find(*c) != std::string::npos) {
            s += '\\';
        }
        s += *c;
    }
    return s;
}

void write_tensor(FILE * f, const wsp_ggml_tensor * t, bool leaf, bool in_forward) {
    const char * name = t->name[0] != '\0' ? t->name : "(unnamed)";
    std::fprintf(f, "  \"%p\" [shape=%s, style=%s, label=\"{%s|%s %s|%s}\"];\n", (const void *) t,
                 leaf ? "box" : "record", in_forward ? "bold" : "solid", escaped(name).c_str(),
                 wsp_ggml_type_name(t->type), shape_of(t).c_str(),
                 leaf ? "leaf" : escaped(wsp_ggml_op_desc(t)).c_str());
}

} // namespace

extern "C" {

FILE * wsp_ggml_fopen(const char * fname, const char * mode) {
    return std::fopen(fname, mode);
}

void wsp_ggml_graph_dump_dot(const struct wsp_ggml_cgraph * gb, const struct wsp_ggml_cgraph * gf,
                             const char * filename) {
    if (gb == nullptr || filename == nullptr) {
        WSP_LOG_ERROR("%s: %s is NULL\n", __func__, gb == nullptr ? "the graph" : "the file name");
        return;
    }
    FILE * f = wsp_ggml_fopen(filename, "w");
    if (f == nullptr) {
        WSP_LOG_ERROR("%s: cannot open %s for writing\n", __func__, filename);
        return;
    }
    std::unordered_set<const wsp_ggml_tensor *> forward;
    if (gf != nullptr) {
        for (int i = 0; i < gf->n_nodes; ++i) {
            forward.insert(gf->nodes[i]);
        }
    }
    std::unordered_set<const wsp_ggml_tensor *> drawn;
    std::fprintf(f, "digraph G {\n  newrank = true;\n  rankdir = TB;\n");
    for (int i = 0; i < gb->n_leafs; ++i) {
        write_tensor(f, gb->leafs[i], true, false);
        drawn.insert(gb->leafs[i]);
    }
    for (int i = 0; i < gb->n_nodes; ++i) {
        write_tensor(f, gb->nodes[i], false, forward.count(gb->nodes[i]) > 0);
        drawn.insert(gb->nodes[i]);
    }
    for (int i = 0; i < gb->n_nodes; ++i) {
        const wsp_ggml_tensor * node = gb->nodes[i];
        for (int s = 0; s < WSP_GGML_MAX_SRC; ++s) {
            const wsp_ggml_tensor * src = node->src[s];
            if (src == nullptr) {
                continue;
            }
            if (drawn.insert(src).second) { // a source outside the graph (a view's base, say)
                write_tensor(f, src, src->op == WSP_GGML_OP_NONE, false);
            }
            std::fprintf(f, "  \"%p\" -> \"%p\" [label=\"src%d\"];\n", (const void *) src, (const void *) node, s);
        }
    }
    std::fprintf(f, "}\n");
    if (std::fclose(f) != 0) {
        WSP_LOG_ERROR("%s: writing %s failed\n", __func__, filename);
        return;
    }
    WSP_LOG_INFO("%s: wrote %s (dot -Tpng %s -o graph.png)\n", __func__, filename, filename);
}

} // extern "C"
