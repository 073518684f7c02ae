// What makes a tensor whole between two segments of the members' graphs (Runner::Boundary):
// an all-reduce of PARTIAL parts (Note [all-reduce by copies]), a send of the main member's copy,
// an all-gather of a SPLIT tensor's parts (Note [all-gathered sources]).

#include "runner_types.h"

#include "all_gpu.h"

#include <algorithm>

namespace wsp::allgpu::tp {

namespace {

constexpr size_t SLOT_ALIGN = 256;

size_t align_up(size_t n) {
    return (n + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
}

// chunk c of n elements over n_mem members
Range chunk_of(int64_t n, int n_mem, int c) {
    return Range{ n * c / n_mem, n * (c + 1) / n_mem };
}

// the receiving slot of one chunk: the largest chunk's floats, aligned
size_t slot_bytes(const wsp_ggml_tensor * part, int n_mem) {
    return align_up((size_t) ((wsp_ggml_nelements(part) + n_mem - 1) / n_mem) * sizeof(float));
}

// gives every view in g (nodes and leafs) its data from its source
bool init_views(wsp_ggml_cgraph * g) {
    for (int i = 0; i < g->n_nodes; ++i) {
        wsp_ggml_tensor * t = g->nodes[i];
        if (t->data == nullptr && t->view_src != nullptr && wsp_ggml_backend_view_init(t) != WSP_GGML_STATUS_SUCCESS) {
            return false;
        }
    }
    return true;
}

} // namespace

// src (contiguous) into dst, a view of rows at a wider pitch (a member's rows of a gathered
// result): the backends' own copy where it takes such layouts, else through the host row by row
bool copy_rows(wsp_ggml_backend_t from, wsp_ggml_backend_t to, wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    if (to->iface.cpy_tensor_async != nullptr && to->iface.cpy_tensor_async(from, to, src, dst)) {
        return true;
    }
    wsp_ggml_backend_synchronize(from);
    wsp_ggml_backend_synchronize(to);
    const size_t         row = wsp_ggml_row_size(src->type, src->ne[0]);
    std::vector<uint8_t> bytes(wsp_ggml_nbytes(src));
    wsp_ggml_backend_tensor_get(src, bytes.data(), 0, bytes.size());
    for (int64_t r = 0; r < wsp_ggml_nrows(src); ++r) {
        const int64_t i1 = r % src->ne[1], i2 = r / src->ne[1] % src->ne[2], i3 = r / (src->ne[1] * src->ne[2]);
        const size_t  at = i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        wsp_ggml_backend_tensor_set(dst, bytes.data() + (size_t) r * row, at, row);
    }
    return true;
}

// p (MAIN) sent from the main member to the members that compute `reader` and have not received
// it before in this build: its copy there is a leaf of their graph, which later readers read too
Runner::Boundary Runner::from_main(Building & at, const wsp_ggml_tensor * p, const NodePlan & reader) {
    Boundary x;
    x.kind = Boundary::FROM_MAIN;
    x.parts.push_back(at.local[0].at(p));
    for (size_t m = 1; m < members_.size(); ++m) {
        if (!on_member(reader, (int) m) || at.local[m].count(p) != 0) {
            x.parts.push_back(nullptr);
            continue;
        }
        wsp_ggml_tensor * copy = wsp_ggml_new_tensor(at.b.members[m].ctx, p->type, WSP_GGML_MAX_DIMS, p->ne);
        wsp_ggml_set_name(copy, p->name);
        wsp_ggml_build_forward_expand(at.b.members[m].graph, copy);
        at.local[m][p] = copy;
        x.parts.push_back(copy);
    }
    return x;
}

// p (PARTIAL): every member's term, summed by the all-reduce
Runner::Boundary Runner::all_reduced(Building & at, const wsp_ggml_tensor * p) {
    Boundary x;
    x.kind = Boundary::ALL_REDUCE;
    for (size_t m = 0; m < members_.size(); ++m) {
        x.parts.push_back(at.local[m].at(p));
    }
    return x;
}

// Note [all-gathered sources]: p (SPLIT by `split`) made whole on every member before the node
// that reads it: each member's whole is a leaf of its graph, its own part copied in by a node of
// its graph, the others' parts by the boundary's copies; what reads p from here on reads the whole.
// to_main: only the main member gets the whole (Note [row split plan])
Runner::Boundary Runner::all_gather(Building & at, const wsp_ggml_tensor * p, const State & split, bool to_main) {
    const size_t n_mem = members_.size();
    Boundary     x;
    x.kind = Boundary::ALL_GATHER;
    x.into.assign(n_mem, std::vector<wsp_ggml_tensor *>(n_mem, nullptr));
    for (size_t m = 0; m < n_mem; ++m) { // NULL: no part there (Note [row split plan])
        auto it = at.local[m].find(p);
        x.parts.push_back(it != at.local[m].end() ? it->second : nullptr);
    }
    for (size_t e = 0; e < (to_main ? 1 : n_mem); ++e) {
        wsp_ggml_context * ctx   = at.b.members[e].ctx;
        wsp_ggml_tensor *  whole = wsp_ggml_new_tensor(ctx, p->type, WSP_GGML_MAX_DIMS, p->ne);
        wsp_ggml_format_name(whole, "%s (gathered)", p->name);
        for (size_t d = 0; d < n_mem; ++d) {
            if (x.parts[d] == nullptr) {
                continue;
            }
            wsp_ggml_tensor * place = cut(ctx, whole, split.dim, split.ranges[d]);
            if (d == e) {
                wsp_ggml_build_forward_expand(at.b.members[e].graph, wsp_ggml_cpy(ctx, x.parts[e], place));
            } else {
                x.into[e][d] = place;
            }
        }
        at.local[e][p] = whole;
    }
    return x;
}

wsp_ggml_status Runner::prepare_all_reduces(Build & b) {
    const int n_mem = (int) members_.size();
    size_t    slot = 0, n_ar = 0;
    for (const auto & seg : b.boundaries) {
        for (const Boundary & x : seg) {
            if (x.kind == Boundary::ALL_REDUCE) {
                slot = std::max(slot, slot_bytes(x.parts[0], n_mem));
                ++n_ar;
            }
        }
    }
    if (n_ar == 0) {
        return WSP_GGML_STATUS_SUCCESS;
    }
    // the slots, shared by every build's all-reduces (each member's receives come one after
    // another on its stream): grown here, where the members are idle (add() waited)
    const size_t want  = slot * (size_t) (n_mem - 1);
    bool         grown = false;
    for (auto & mb : members_) {
        if (mb->scratch == nullptr || wsp_ggml_backend_buffer_get_size(mb->scratch) < want) {
            if (mb->scratch != nullptr) {
                wsp_ggml_backend_buffer_free(mb->scratch);
            }
            mb->scratch = wsp_ggml_backend_alloc_buffer(mb->backend, want);
            grown       = true;
            if (mb->scratch == nullptr) {
                WSP_LOG_ERROR("%s: no room for the all-reduce's %zu bytes on %s\n", device_.name.c_str(), want,
                              wsp_ggml_backend_name(mb->backend));
                return WSP_GGML_STATUS_ALLOC_FAILED;
            }
        }
    }
    if (grown) { // the other builds' slots were in the buffers just freed
        builds_.remove_if([&b](const std::unique_ptr<Build> & k) { return k.get() != &b; });
    }
    for (int m = 0; m < n_mem; ++m) {
        Build::PerMember & pm  = b.members[(size_t) m];
        const size_t       n_t = n_ar * (size_t) (4 * n_mem + 4) + 16;
        pm.ar_mem =
            take_block(n_t * wsp_ggml_tensor_overhead() + n_ar * wsp_ggml_graph_overhead_custom(n_mem + 4, false));
        pm.ar_ctx = wsp_ggml_init({ pm.ar_mem.size, pm.ar_mem.bytes.get(), true });
        if (pm.ar_ctx == nullptr) {
            return WSP_GGML_STATUS_ALLOC_FAILED;
        }
    }
    for (auto & seg : b.boundaries) {
        for (Boundary & x : seg) {
            if (x.kind != Boundary::ALL_REDUCE) {
                continue;
            }
            const int64_t n = wsp_ggml_nelements(x.parts[0]);
            x.piece.assign((size_t) n_mem, {});
            x.slots.assign((size_t) n_mem, {});
            x.add.assign((size_t) n_mem, nullptr);
            for (int m = 0; m < n_mem; ++m) {
                wsp_ggml_context * ctx = b.members[(size_t) m].ar_ctx;
                for (int c = 0; c < n_mem; ++c) {
                    const Range       r = chunk_of(n, n_mem, c);
                    wsp_ggml_tensor * v = wsp_ggml_view_1d(ctx, x.parts[(size_t) m], r.second - r.first,
                                                           (size_t) r.first * sizeof(float));
                    wsp_ggml_backend_view_init(v);
                    x.piece[(size_t) m].push_back(v);
                }
            }
            for (int e = 0; e < n_mem; ++e) {
                wsp_ggml_context * ctx  = b.members[(size_t) e].ar_ctx;
                const Range        r    = chunk_of(n, n_mem, e);
                char *             base = (char *) wsp_ggml_backend_buffer_get_base(members_[(size_t) e]->scratch);
                wsp_ggml_cgraph *  add  = wsp_ggml_new_graph_custom(ctx, n_mem + 4, false);
                wsp_ggml_tensor *  sum  = x.piece[(size_t) e][(size_t) e];
                for (int d = 0; d < n_mem; ++d) {
                    if (d == e) {
                        continue;
                    }
                    wsp_ggml_tensor * s = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, r.second - r.first);
                    wsp_ggml_backend_tensor_alloc(members_[(size_t) e]->scratch, s,
                                                  base + slot * x.slots[(size_t) e].size());
                    x.slots[(size_t) e].push_back(s);
                    // added by hand: expanding would take in the graph before
                    sum = wsp_ggml_add_inplace(ctx, sum, s);
                    wsp_ggml_graph_add_node(add, sum);
                }
                if (!init_views(add)) {
                    return WSP_GGML_STATUS_FAILED;
                }
                x.add[(size_t) e] = add;
            }
        }
    }
    return WSP_GGML_STATUS_SUCCESS;
}

// Note [all-reduce by copies]: without the reg's own all-reduce, a reduce-scatter then an
// all-gather by peer copies. parts[m] is split in as many chunks as members; member e receives
// chunk e of every other member into its slots and adds them to its own (so it holds the sum of
// chunk e), then sends that chunk to every other member. Each member sends and receives
// 2 (N-1)/N of the tensor, the least an all-reduce can move. Every copy runs on its source's
// stream after the work queued there, and its destination's stream waits for it; the all-gather
// also orders each member's next writes into another's slots after that member's sums (a swap of
// whole parts between two members would save a phase but let the next all-reduce overwrite a
// slot still being read; the sims' checker caught it). Every member ends with the same bits (one
// member sums each chunk), so the REPL work after it, done on every member, agrees everywhere.
bool Runner::all_reduce(const Boundary & x, Moved & moved) {
    const int n_mem = (int) members_.size();
    moved.all_reduce += 2 * (size_t) (n_mem - 1) * wsp_ggml_nbytes(x.parts[0]); // both ways, 2 (N-1)/N per member
    moved.n_all_reduces++;
    if (fast_all_reduce_ != nullptr &&
        fast_all_reduce_(backends_.data(), const_cast<wsp_ggml_tensor **>(x.parts.data()), n_mem)) {
        return true;
    }
    // reduce-scatter: e receives chunk e from every d into its slots, in member order
    for (int e = 0; e < n_mem; ++e) {
        size_t k = 0;
        for (int d = 0; d < n_mem; ++d) {
            if (d != e) {
                wsp_ggml_backend_tensor_copy_async(backends_[(size_t) d], backends_[(size_t) e],
                                                   x.piece[(size_t) d][(size_t) e], x.slots[(size_t) e][k++]);
            }
        }
    }
    for (int e = 0; e < n_mem; ++e) {
        if (wsp_ggml_backend_graph_compute_async(backends_[(size_t) e], x.add[(size_t) e]) != WSP_GGML_STATUS_SUCCESS) {
            WSP_LOG_ERROR("%s: the all-reduce's sum failed on %s\n", device_.name.c_str(),
                          wsp_ggml_backend_name(backends_[(size_t) e]));
            return false;
        }
    }
    // all-gather: e's summed chunk to every other member
    for (int e = 0; e < n_mem; ++e) {
        for (int d = 0; d < n_mem; ++d) {
            if (d != e) {
                wsp_ggml_backend_tensor_copy_async(backends_[(size_t) e], backends_[(size_t) d],
                                                   x.piece[(size_t) e][(size_t) e], x.piece[(size_t) d][(size_t) e]);
            }
        }
    }
    return true;
}

// the copies (and sums) of one boundary, queued after the segment before it
bool Runner::cross(const Boundary & x, Moved & moved) {
    const size_t n_mem = members_.size();
    if (x.kind == Boundary::FROM_MAIN) { // the main member's, to those that read it
        for (size_t m = 1; m < n_mem; ++m) {
            if (x.parts[m] == nullptr) {
                continue;
            }
            order_after(0, (int) m); // its copy is a leaf there, in memory m may have used before
            wsp_ggml_backend_tensor_copy_async(backends_[0], backends_[m], x.parts[0], x.parts[m]);
            moved.sent += wsp_ggml_nbytes(x.parts[m]);
        }
        return true;
    }
    if (x.kind == Boundary::ALL_GATHER) { // every part to every other member's whole
        for (size_t e = 0; e < n_mem; ++e) {
            for (size_t d = 0; d < n_mem; ++d) {
                if (x.into[e][d] == nullptr) { // e's own part, no part of d's, or e gets no whole
                    continue;
                }
                order_after((int) d, (int) e); // e's whole is a leaf, in memory e may have used before
                if (!copy_rows(backends_[d], backends_[e], x.parts[d], x.into[e][d])) {
                    return false;
                }
                moved.gathered += wsp_ggml_nbytes(x.parts[d]);
            }
        }
        return true;
    }
    return all_reduce(x, moved);
}

} // namespace wsp::allgpu::tp
