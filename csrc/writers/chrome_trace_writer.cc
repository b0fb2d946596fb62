// Chrome trace JSON (Trace Event Format), for data="trace":
//
//   {"displayTimeUnit": "us",
//    "traceEvents": [ {"ph": "M", "name": "process_name", ...},      lane names
//                     {"ph": "X", "name": "step", "cat": "scope", "ts": 0.0, "dur": 12.5,
//                      "pid": 0, "tid": <os tid>, "args": {"call_stack": ["ROOT", "step"]}},
//                     {"ph": "s"/"f", "name": "launch->kernel", "bp": "e", "id": n, ...} ],
//    "otherData": {"proton_metadata": {...}}}
//
// CPU scopes sit on pid 0 with one tid per OS thread; a GPU device d is pid d + 1 with one tid
// per stream, named "GPU <d> Stream <s>", and, for intra-kernel instrumentation, one tid per
// (CTA, warp), named "CTA <c> Warp <w>" and ordered by CTA then warp. Times are microseconds
// from the earliest event.
#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "writers/encode_common.h"
#include "writers/json_encoder.h"
#include "writers/writer.h"

namespace proton {
namespace {

constexpr uint64_t kCpuPid = 0;
// Warp lanes sit after every stream lane of their GPU (stream ids are far below this).
constexpr uint64_t kWarpTidBase = uint64_t{1} << 40;

uint64_t tidOf(const Lane &lane) {
  return lane.kind == Lane::Kind::kWarp ? kWarpTidBase + lane.id : lane.id;
}

std::string laneName(uint64_t pid, uint64_t tid) {
  if (pid == kCpuPid) return "Thread " + std::to_string(tid);
  if (tid >= kWarpTidBase)
    return "CTA " + std::to_string(Lane::ctaOf(tid - kWarpTidBase)) + " Warp " +
           std::to_string(Lane::warpOf(tid - kWarpTidBase));
  return "GPU " + std::to_string(pid - 1) + " Stream " + std::to_string(tid);
}

uint64_t pidOf(const Lane &lane) {
  return lane.kind == Lane::Kind::kCpuThread ? kCpuPid : uint64_t{lane.device} + 1;
}

class ChromeTraceEmitter {
 public:
  ChromeTraceEmitter(const ProfileView &view, JsonEncoder &e) : v_(view), e_(e) {
    origin_ = UINT64_MAX;
    for (const TraceEvent &ev : events()) {
      origin_ = std::min(origin_, ev.beginNs);
      if (ev.launchNs) origin_ = std::min(origin_, ev.launchNs);
    }
    if (origin_ == UINT64_MAX) origin_ = 0;
  }

  void emit() {
    e_.beginMap(3);
    e_.key("displayTimeUnit");
    e_.string("us");
    e_.key("traceEvents");
    e_.beginArray(0);
    emitLaneNames();
    for (const TraceEvent &ev : events()) emitSlice(ev);
    for (const TraceEvent &ev : events())
      if (ev.lane.kind == Lane::Kind::kGpuStream && ev.launchNs) emitFlow(ev);
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

  void micros(uint64_t ns) { e_.floating(static_cast<double>(ns - origin_) / 1000.0); }

  void metadataEvent(const char *name, uint64_t pid, const uint64_t *tid,
                     const std::string &value) {
    e_.beginMap(0);
    e_.key("ph");
    e_.string("M");
    e_.key("name");
    e_.string(name);
    e_.key("pid");
    e_.unsignedInteger(pid);
    if (tid) {
      e_.key("tid");
      e_.unsignedInteger(*tid);
    }
    e_.key("args");
    e_.beginMap(1);
    e_.key("name");
    e_.string(value);
    e_.endMap();
    e_.endMap();
  }

  void emitLaneNames() {
    std::set<std::pair<uint64_t, uint64_t>> lanes;  // (pid, tid)
    std::set<uint64_t> pids;
    for (const TraceEvent &ev : events()) {
      lanes.insert({pidOf(ev.lane), tidOf(ev.lane)});
      pids.insert(pidOf(ev.lane));
      if (ev.lane.kind == Lane::Kind::kGpuStream && ev.launchNs) {
        lanes.insert({kCpuPid, ev.launchThread});
        pids.insert(kCpuPid);
      }
    }
    for (uint64_t pid : pids)
      metadataEvent("process_name", pid, nullptr,
                    pid == kCpuPid ? std::string("CPU") : "GPU " + std::to_string(pid - 1));
    for (const auto &[pid, tid] : lanes)
      metadataEvent("thread_name", pid, &tid, laneName(pid, tid));
  }

  void emitSlice(const TraceEvent &ev) {
    const char *category = ev.lane.kind == Lane::Kind::kGpuStream ? "kernel"
                           : ev.lane.kind == Lane::Kind::kWarp    ? "warp"
                                                                  : "scope";
    e_.beginMap(0);
    e_.key("ph");
    e_.string("X");
    e_.key("name");
    e_.string(v_.strings.view(ev.name));
    e_.key("cat");
    e_.string(category);
    e_.key("ts");
    micros(ev.beginNs);
    e_.key("dur");
    e_.floating(static_cast<double>(ev.endNs - ev.beginNs) / 1000.0);
    e_.key("pid");
    e_.unsignedInteger(pidOf(ev.lane));
    e_.key("tid");
    e_.unsignedInteger(tidOf(ev.lane));
    e_.key("args");
    e_.beginMap(0);
    e_.key("call_stack");
    e_.beginArray(0);
    e_.string("ROOT");
    for (StringId name : v_.phase.tree.path(ev.context)) e_.string(v_.strings.view(name));
    e_.endArray();
    if (ev.lane.kind == Lane::Kind::kWarp) {
      e_.key("sm");
      e_.unsignedInteger(ev.sm);
      e_.key("cycles");
      e_.unsignedInteger(ev.cycles);
    }
    if (ev.flexSlot != UINT32_MAX) {
      for (const NamedMetric &m : v_.phase.eventMetrics(ev.flexSlot).entries) {
        e_.key(v_.strings.view(m.spec.name));
        encodeMetricValue(e_, m.value);
      }
    }
    e_.endMap();
    e_.endMap();
  }

  void flowEnd(const char *ph, uint64_t ts, uint64_t pid, uint64_t tid, uint64_t id) {
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
    e_.unsignedInteger(pid);
    e_.key("tid");
    e_.unsignedInteger(tid);
    if (ph[0] == 'f') {
      e_.key("bp");
      e_.string("e");
    }
    e_.endMap();
  }

  void emitFlow(const TraceEvent &ev) {
    flowEnd("s", ev.launchNs, kCpuPid, ev.launchThread, ev.correlation);
    flowEnd("f", ev.beginNs, pidOf(ev.lane), ev.lane.id, ev.correlation);
  }

  const ProfileView &v_;
  JsonEncoder &e_;
  uint64_t origin_;
};

}  // namespace

Status writeChromeTrace(const ProfileView &view, ByteSink &sink) {
  JsonEncoder encoder(sink);
  ChromeTraceEmitter(view, encoder).emit();
  sink.put('\n');
  return {};
}

}  // namespace proton
