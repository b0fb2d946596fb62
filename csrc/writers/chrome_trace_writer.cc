// Chrome trace JSON (Trace Event Format), for data="trace":
//
//   {"displayTimeUnit": "us", "baseTimeNanoseconds": <Unix time of ts 0>,
//    "traceEvents": [ warp slices, as triton.profiler writes them:
//                     {"ph": "X", "name": "load", "cat": "matmul", "ts": 1.0, "dur": 0.5,
//                      "pid": "matmul Core5 CTA3", "tid": "warp 4",
//                      "args": {"call_stack": ["ROOT", "step", "matmul"], "Init Time (ns)": ..,
//                               "Post Final Time (ns)": .., "Finalization Time (ns)": 0,
//                               "Frequency (MHz)": .., "sm": 5, "cycles": 900,
//                               "scope_path": ["load"]}},
//                     an event started in one warp and ended in another: two such slices of
//                     zero length, "bind_id": n and "flow_out": true on the start's,
//                     "flow_in": true on the end's (Chrome's flow events bound to slices),
//                     then (layout "full" only) kernel slices, CPU scopes and flows:
//                     {"ph": "X", "name": "gemm", "cat": "kernel", ..., "pid": "GPU 0",
//                      "tid": "Stream 7", "args": {"call_stack": [...]}},
//                     {"ph": "X", "name": "step", "cat": "scope", ..., "pid": "CPU",
//                      "tid": "Thread 1234", "args": {"call_stack": ["ROOT", "step"],
//                                                     "scope_id": 0}},
//                     {"ph": "X", "name": "load: <bytes, 64>", "cat": "metric", ...,
//                      "args": {"call_stack": [...], "scope_id": 1,
//                               "metrics": {"bytes": "64"}, "bytes": 64}},  metrics given
//                     {"ph": "X", "name": "iter_0", "cat": "scope", ..., "pid": "GPU 0",
//                      "tid": "Graph: Stream 7"},  a scope captured with a replayed graph
//                     {"ph": "s"/"f", "name": "launch->kernel", "bp": "e", "id": n, ...} ],
//    "otherData": {"proton_metadata": {...}}}
//
// Every pid and tid is a string naming its lane; layout "full" also names each graph lane
// with "M" events, as triton.profiler does (process_name, thread_name: {"ph": "M", "name":
// "thread_name", "pid": "GPU 0", "tid": "Graph: Stream 7", "args": {"name": "Graph: Stream
// 7"}}), after the graph's ranges. A flow starts at the innermost CPU slice open at its
// launch. A kernel slice is named as the tree names the kernel (launch metadata's name). Warp
// slices of scopes come first, ordered by launch, SM, CTA, warp and start, as triton.profiler
// orders them, then ("full") each warp's kernel-wide slice in the same order; a warp slice's
// call_stack is its launch's context down to the kernel (its scopes are in scope_path). Per CTA:
// Init Time (ns) and Post Final Time (ns) are the start of its first slice and the end of its last,
// in ns from the trace's origin; Finalization Time (ns) is 0, since a CTA's records leave with its
// last scope's exit and are not timed apart; Frequency (MHz) is the SM clock the CTA's slices
// measured (cycles over nanoseconds). Times are microseconds from the earliest event (layout
// "triton": displayTimeUnit "ns", as Triton's).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "writers/encode_common.h"
#include "writers/json_encoder.h"
#include "writers/writer.h"

namespace proton {
namespace {

std::string laneProcess(const Lane &lane) {
  return lane.kind == Lane::Kind::kCpuThread ? std::string("CPU")
                                             : "GPU " + std::to_string(lane.device);
}

std::string laneThread(const Lane &lane) {
  return lane.kind == Lane::Kind::kCpuThread ? "Thread " + std::to_string(lane.id)
                                             : "Stream " + std::to_string(lane.id);
}

// A metric value as triton.profiler's traces write it: ints in decimal, floats with six
// decimals ("1.000000"), strings as they are, lists as "[a,b]" (six significant digits).
std::string metricText(const MetricValue &value) {
  switch (metricTypeOf(value)) {
    case MetricType::kInt:
      return std::to_string(std::get<int64_t>(value));
    case MetricType::kFloat:
      return std::to_string(std::get<double>(value));
    case MetricType::kString:
      return std::get<std::string>(value);
    case MetricType::kList: {
      std::string out = "[";
      char buf[32];
      for (double d : std::get<std::vector<double>>(value)) {
        std::snprintf(buf, sizeof(buf), "%g", d);
        if (out.size() > 1) out.push_back(',');
        out.append(buf);
      }
      return out + "]";
    }
  }
  return {};
}

// One CTA of one launch: what its warp slices' shared args are made of.
struct CtaSpan {
  uint64_t firstNs = UINT64_MAX;
  uint64_t lastNs = 0;
  uint64_t cycles = 0;
  uint64_t ns = 0;
};
using CtaKey = std::tuple<uint64_t, uint32_t, uint32_t>;  // (launch, kernel node, CTA)

CtaKey ctaKey(const TraceEvent &ev) {
  return {ev.launchNs, ev.kernel.value, Lane::ctaOf(ev.lane.id)};
}

class ChromeTraceEmitter {
 public:
  ChromeTraceEmitter(const ProfileView &view, JsonEncoder &e) : v_(view), e_(e) {
    origin_ = UINT64_MAX;
    for (const TraceEvent &ev : events()) {
      if (!kept(ev)) continue;
      origin_ = std::min(origin_, ev.beginNs);
      if (ev.launchNs && ev.lane.kind == Lane::Kind::kGpuStream)
        origin_ = std::min(origin_, ev.launchNs);
    }
    if (origin_ == UINT64_MAX) origin_ = 0;
  }

  void emit() {
    const bool based = v_.metadata.monotonicToUnixNs != 0;
    e_.beginMap(based ? 4 : 3);
    e_.key("displayTimeUnit");
    e_.string(full() ? "us" : "ns");
    if (based) {  // Unix time of ts 0, to line up with other tools' traces (as torch's do)
      e_.key("baseTimeNanoseconds");
      e_.integer(static_cast<int64_t>(origin_) + v_.metadata.monotonicToUnixNs);
    }
    e_.key("traceEvents");
    e_.beginArray(0);
    emitWarpSlices();
    if (full()) {
      for (const TraceEvent &ev : events())
        if (ev.lane.kind != Lane::Kind::kWarp) emitSlice(ev);
      emitGraphScopes();
      indexCpuScopes();
      for (const TraceEvent &ev : events())
        if (ev.lane.kind == Lane::Kind::kGpuStream && ev.launchNs) emitFlow(ev);
    }
    e_.endArray();
    e_.key("otherData");
    e_.beginMap(1);
    e_.key("proton_metadata");
    encodeMetadata(e_, v_.metadata);
    e_.endMap();
    e_.endMap();
  }

 private:
  const ChunkedVector<TraceEvent> &events() const { return v_.phase.events(); }
  bool full() const { return v_.traceLayout == TraceLayout::kFull; }
  // Layout "triton" keeps the warp slices of scopes only: triton.profiler writes no slice for
  // a warp's whole kernel (its kernel scope, which "full" shows too).
  bool kept(const TraceEvent &ev) const {
    return full() || (ev.lane.kind == Lane::Kind::kWarp && ev.context != ev.kernel);
  }

  void micros(uint64_t ns) { e_.floating(static_cast<double>(ns - origin_) / 1000.0); }

  // Opens an "X" event up to its args map; the caller writes the args and closes both maps.
  // link: a cross-warp event's end (bind_id, flow_out on its start, flow_in on its end).
  void openSlice(std::string_view name, std::string_view category, uint64_t beginNs, uint64_t endNs,
                 const std::string &pid, const std::string &tid, const TraceEvent *link = nullptr) {
    e_.beginMap(0);
    e_.key("ph");
    e_.string("X");
    e_.key("name");
    e_.string(name);
    e_.key("cat");
    e_.string(category);
    e_.key("ts");
    micros(beginNs);
    e_.key("dur");
    e_.floating(static_cast<double>(endNs - beginNs) / 1000.0);
    e_.key("pid");
    e_.string(pid);
    e_.key("tid");
    e_.string(tid);
    if (link && link->link) {
      e_.key("bind_id");
      e_.unsignedInteger(link->link);
      e_.key(link->linkEnd ? "flow_in" : "flow_out");
      e_.boolean(true);
    }
    e_.key("args");
    e_.beginMap(0);
  }

  void closeSlice() {
    e_.endMap();
    e_.endMap();
  }

  void callStack(NodeId node) {
    e_.key("call_stack");
    e_.beginArray(0);
    e_.string("ROOT");
    if (node != kNoNode)
      for (StringId name : v_.phase.tree.path(node)) e_.string(v_.strings.view(name));
    e_.endArray();
  }

  void userMetrics(const TraceEvent &ev) {
    if (ev.flexSlot == UINT32_MAX) return;
    for (const NamedMetric &m : v_.phase.eventMetrics(ev.flexSlot).entries) {
      e_.key(v_.strings.view(m.spec.name));
      encodeMetricValue(e_, m.value);
    }
  }

  // Warp slices in triton.profiler's order: by launch, SM, CTA, warp and start. The slices
  // of scopes come first, as Triton writes them; in layout "full" each warp's kernel-wide
  // slice (its kernel scope, which Triton does not write) follows them all.
  void emitWarpSlices() {
    std::vector<const TraceEvent *> scopes, wholes;
    std::map<CtaKey, CtaSpan> ctas;
    for (const TraceEvent &ev : events()) {
      if (ev.lane.kind != Lane::Kind::kWarp || !kept(ev)) continue;
      (ev.context == ev.kernel ? wholes : scopes).push_back(&ev);
      CtaSpan &span = ctas[ctaKey(ev)];
      span.firstNs = std::min(span.firstNs, ev.beginNs);
      span.lastNs = std::max(span.lastNs, ev.endNs);
      span.cycles += ev.cycles;
      span.ns += ev.endNs - ev.beginNs;
    }
    auto order = [](const TraceEvent *ev) {
      return std::make_tuple(ev->launchNs, ev->sm, Lane::ctaOf(ev->lane.id),
                             Lane::warpOf(ev->lane.id), ev->beginNs, ev->endNs);
    };
    for (auto *slices : {&scopes, &wholes}) {
      std::stable_sort(
          slices->begin(), slices->end(),
          [&](const TraceEvent *a, const TraceEvent *b) { return order(a) < order(b); });
      for (const TraceEvent *ev : *slices) emitWarpSlice(*ev, ctas[ctaKey(*ev)]);
    }
  }

  void emitWarpSlice(const TraceEvent &ev, const CtaSpan &cta) {
    std::string kernel = ev.kernel != kNoNode
                             ? std::string(v_.strings.view(v_.phase.tree.node(ev.kernel).name))
                             : std::string("kernel");
    openSlice(
        v_.strings.view(ev.name), kernel, ev.beginNs, ev.endNs,
        kernel + " Core" + std::to_string(ev.sm) + " CTA" + std::to_string(Lane::ctaOf(ev.lane.id)),
        "warp " + std::to_string(Lane::warpOf(ev.lane.id)), &ev);
    callStack(ev.kernel);
    e_.key("Init Time (ns)");
    e_.unsignedInteger(cta.firstNs - origin_);
    e_.key("Post Final Time (ns)");
    e_.unsignedInteger(cta.lastNs - origin_);
    e_.key("Finalization Time (ns)");
    e_.unsignedInteger(0);
    e_.key("Frequency (MHz)");
    e_.floating(cta.ns ? 1000.0 * static_cast<double>(cta.cycles) / static_cast<double>(cta.ns)
                       : 1000.0);
    e_.key("sm");
    e_.unsignedInteger(ev.sm);
    e_.key("cycles");
    e_.unsignedInteger(ev.cycles);
    e_.key("scope_path");
    e_.beginArray(0);
    std::vector<StringId> path = v_.phase.tree.path(ev.context);
    size_t kernelDepth = ev.kernel != kNoNode ? v_.phase.tree.path(ev.kernel).size() : 0;
    for (size_t i = std::min(kernelDepth, path.size()); i < path.size(); ++i)
      e_.string(v_.strings.view(path[i]));
    e_.endArray();
    userMetrics(ev);
    closeSlice();
  }

  // A CPU scope that carries metrics is a "metric" slice named as triton.profiler names it,
  // "<scope>: <name, value>, ...", with the values as strings in args.metrics (and typed, as
  // args of their own); one without is a "scope" slice. Each CPU slice has a scope_id.
  void emitSlice(const TraceEvent &ev) {
    const bool gpu = ev.lane.kind == Lane::Kind::kGpuStream;
    std::vector<const NamedMetric *> metrics;
    if (!gpu && ev.flexSlot != UINT32_MAX) {
      for (const NamedMetric &m : v_.phase.eventMetrics(ev.flexSlot).entries) metrics.push_back(&m);
      std::sort(metrics.begin(), metrics.end(), [&](const NamedMetric *a, const NamedMetric *b) {
        return v_.strings.view(a->spec.name) < v_.strings.view(b->spec.name);
      });
    }
    std::vector<std::string> texts;
    std::string name(v_.strings.view(ev.name));
    for (size_t i = 0; i < metrics.size(); ++i) {
      texts.push_back(metricText(metrics[i]->value));
      name += i ? ", <" : ": <";
      name += std::string(v_.strings.view(metrics[i]->spec.name)) + ", " + texts.back() + ">";
    }
    openSlice(name,
              gpu               ? "kernel"
              : metrics.empty() ? "scope"
                                : "metric",
              ev.beginNs, ev.endNs, laneProcess(ev.lane), laneThread(ev.lane));
    callStack(ev.context);
    if (!gpu) {
      e_.key("scope_id");
      e_.unsignedInteger(nextScopeId_++);
    }
    if (!metrics.empty()) {
      e_.key("metrics");
      e_.beginMap(metrics.size());
      for (size_t i = 0; i < metrics.size(); ++i) {
        e_.key(v_.strings.view(metrics[i]->spec.name));
        e_.string(texts[i]);
      }
      e_.endMap();
    }
    userMetrics(ev);
    closeSlice();
  }

  // Each replay of a CUDA graph (its kernels share the graph launch's correlation) gets, per
  // frame of the context it was captured in (<captured_at> and the names below it), one
  // "scope" range from the first of its kernels under that frame to the last, on the lane
  // "Graph: Stream <s>" of the replay's GPU: the scopes captured with the graph, as
  // triton.profiler draws them (with no metrics: the values are the replay's kernels').
  void emitGraphScopes() {
    struct Range {
      uint64_t beginNs = UINT64_MAX, endNs = 0;
      Lane lane;
    };
    // (correlation, node of the captured frame) -> range, in first-seen order.
    std::map<std::pair<uint64_t, uint32_t>, Range> ranges;
    std::vector<std::pair<uint64_t, uint32_t>> order;
    const ContextTree &tree = v_.phase.tree;
    for (const TraceEvent &ev : events()) {
      if (ev.lane.kind != Lane::Kind::kGpuStream || ev.context == kNoNode) continue;
      // The captured frames: the ancestors of the kernel's node below <captured_at>.
      std::vector<NodeId> frames;
      bool captured = false;
      for (NodeId n = tree.node(ev.context).parent; n != kNoNode && n != kRootNode;
           n = tree.node(n).parent) {
        frames.push_back(n);
        if (v_.strings.view(tree.node(n).name) == "<captured_at>") {
          captured = true;
          break;
        }
      }
      if (!captured) continue;
      for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {  // outermost first
        auto key = std::make_pair(ev.correlation, frame->value);
        auto [it, fresh] = ranges.try_emplace(key);
        if (fresh) order.push_back(key);
        Range &r = it->second;
        r.beginNs = std::min(r.beginNs, ev.beginNs);
        r.endNs = std::max(r.endNs, ev.endNs);
        if (fresh) r.lane = ev.lane;
      }
    }
    std::set<std::pair<std::string, std::string>> lanes;  // (pid, tid)
    for (const auto &key : order) {
      const Range &r = ranges[key];
      NodeId frame{key.second};
      std::string pid = laneProcess(r.lane), tid = "Graph: Stream " + std::to_string(r.lane.id);
      openSlice(v_.strings.view(tree.node(frame).name), "scope", r.beginNs, r.endNs, pid, tid);
      callStack(frame);
      closeSlice();
      lanes.emplace(std::move(pid), std::move(tid));
    }
    // Each graph lane is also named by metadata events (process_name, thread_name) carrying
    // its pid and tid, as triton.profiler names it, for readers that look it up by them.
    // Other lanes are not: triton.profiler's traces have none for them, and scripts count
    // their events.
    std::string lastProcess;
    for (const auto &[pid, tid] : lanes) {
      if (pid != lastProcess) laneName("process_name", pid, nullptr);
      lastProcess = pid;
      laneName("thread_name", pid, &tid);
    }
  }

  void flowEnd(const char *ph, uint64_t ts, const Lane &lane, uint64_t id) {
    e_.beginMap(0);
    e_.key("ph");
    e_.string(ph);
    e_.key("name");
    e_.string("launch->kernel");
    e_.key("cat");
    e_.string("flow");
    e_.key("id");
    e_.unsignedInteger(id);
    e_.key("ts");
    micros(ts);
    e_.key("pid");
    e_.string(laneProcess(lane));
    e_.key("tid");
    e_.string(laneThread(lane));
    e_.key("bp");
    e_.string("e");
    e_.endMap();
  }

  // A flow starts where triton.profiler starts it: at the beginning of the innermost CPU slice
  // open on the launching thread at the launch (the slice it binds to), or at the launch when
  // none is open.
  void emitFlow(const TraceEvent &ev) {
    flowEnd("s", flowStart(ev.launchThread, ev.launchNs),
            Lane{Lane::Kind::kCpuThread, 0, ev.launchThread}, ev.correlation);
    flowEnd("f", ev.beginNs, ev.lane, ev.correlation);
  }

  // Each thread's CPU slices of some length by start (outer first at equal starts), with the
  // index of the innermost slice enclosing each (-1: none), for flowStart.
  struct CpuSlices {
    std::vector<std::pair<uint64_t, uint64_t>> spans;  // (begin, end)
    std::vector<int64_t> parent;
  };
  void indexCpuScopes() {
    // Not zero-length slices: those of values a graph replay recorded are at its launch.
    for (const TraceEvent &ev : events())
      if (ev.lane.kind == Lane::Kind::kCpuThread && ev.endNs > ev.beginNs)
        cpu_[ev.lane.id].spans.emplace_back(ev.beginNs, ev.endNs);
    for (auto &[thread, slices] : cpu_) {
      auto &spans = slices.spans;
      std::sort(spans.begin(), spans.end(), [](const auto &a, const auto &b) {
        return a.first != b.first ? a.first < b.first : a.second > b.second;
      });
      slices.parent.assign(spans.size(), -1);
      std::vector<int64_t> open;
      for (size_t i = 0; i < spans.size(); ++i) {
        while (!open.empty() && spans[open.back()].second < spans[i].first) open.pop_back();
        if (!open.empty()) slices.parent[i] = open.back();
        open.push_back(static_cast<int64_t>(i));
      }
    }
  }
  // Slices on one thread nest, so one that encloses `at` and starts before the last slice
  // starting by `at` also encloses that slice: it is among its ancestors.
  uint64_t flowStart(uint64_t thread, uint64_t at) const {
    auto it = cpu_.find(thread);
    if (it == cpu_.end()) return at;
    const auto &spans = it->second.spans;
    auto after = std::upper_bound(spans.begin(), spans.end(), at,
                                  [](uint64_t t, const auto &span) { return t < span.first; });
    int64_t i = static_cast<int64_t>(after - spans.begin()) - 1;
    while (i >= 0 && spans[i].second < at) i = it->second.parent[i];
    return i >= 0 ? spans[i].first : at;
  }

  void laneName(const char *kind, const std::string &pid, const std::string *tid) {
    e_.beginMap(0);
    e_.key("ph");
    e_.string("M");
    e_.key("name");
    e_.string(kind);
    e_.key("pid");
    e_.string(pid);
    if (tid) {
      e_.key("tid");
      e_.string(*tid);
    }
    e_.key("args");
    e_.beginMap(1);
    e_.key("name");
    e_.string(tid ? *tid : pid);
    e_.endMap();
    e_.endMap();
  }

  const ProfileView &v_;
  JsonEncoder &e_;
  uint64_t origin_;
  uint64_t nextScopeId_ = 0;
  std::map<uint64_t, CpuSlices> cpu_;  // by thread id
};

}  // namespace

Status writeChromeTrace(const ProfileView &view, ByteSink &sink) {
  JsonEncoder encoder(sink);
  ChromeTraceEmitter(view, encoder).emit();
  sink.put('\n');
  return {};
}

}  // namespace proton
