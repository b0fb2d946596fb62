#include "backends/kernel_attributor.h"

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/pc_sample_attributor.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton {
namespace {

Counter &unmatched() {
  static Counter &c = Stats::global().counter("kernel_records_unmatched");
  return c;
}

Counter &uncaptured() {
  static Counter &c = Stats::global().counter("graph_kernels_without_capture_context");
  return c;
}

// Records that are not KernelRecord::timed(): the launch counts; its time, unknown, does not.
Counter &untimed() {
  static Counter &c = Stats::global().counter("kernel_records_untimed");
  return c;
}

}  // namespace

std::string readableKernelName(const char *name) {
  if (!name || !*name) return "<unnamed kernel>";
  if (name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char *out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = status == 0 && out ? out : name;
  std::free(out);
  return result;
}

KernelAttributor::KernelAttributor(LaunchTable &launches, CaptureRegistry &captures)
    : launches_(launches),
      captures_(captures),
      capturedAt_(StringTable::global().intern("<captured_at>")) {
  unmatched();
  uncaptured();
  typeConflictCounter();
  untimed();
}

StringId KernelAttributor::kernelName(const char *name) {
  auto it = names_.find(name);
  // The vendor keeps one string per kernel; check the text in case an unloaded module's
  // string was freed and its address reused by another kernel.
  if (it != names_.end() && name && it->second.text == name) return it->second.id;
  std::string readable = readableKernelName(name);
  StringId id = StringTable::global().intern(readable);
  names_[name] = CachedName{name ? name : "", id};
  return id;
}

void KernelAttributor::add(const KernelRecord &r) {
  LaunchInfo launch;
  if (!launches_.resolve(r.correlation, launch)) {
    unmatched().add();
    if (observer_) observer_(r, nullptr, 0, StringId{});
    return;
  }
  if (launch.count == 0) {  // launched while no session was recording
    // Its instruction samples must not be credited to another launch of the same function.
    if (samples_) samples_->noteKernel(kernelName(r.name), nullptr, 0, r.startNs, r.endNs);
    if (observer_) observer_(r, nullptr, 0, StringId{});
    return;
  }
  const bool timed = r.timed();
  if (!timed) untimed().add();
  LaunchEntry filedUnder[LaunchInfo::kMaxEntries];
  size_t numFiled = 0;
  StringId name = kernelName(r.name);
  SampleTarget sampled[LaunchInfo::kMaxEntries];
  size_t numSampled = 0;
  // A graph's kernel: filed under <captured_at>/<capture context>, named as the launch
  // metadata evaluated at capture named it, with its metrics, in the sessions recording then.
  std::shared_ptr<const CaptureContext> captured;
  if (r.graphNodeId != 0) {
    captured = captures_.find(r.graphNodeId);
    if (!captured) {
      uncaptured().add();
      if (!warnedUncaptured_) {
        warnedUncaptured_ = true;
        // triton.profiler's words lead, for scripts that look for them.
        std::fprintf(stderr,
                     "[PROTON] Cannot find graph for graphExecId: the CUDA graph of node %llu "
                     "was captured before profiling started; its kernels are filed under the "
                     "graph's launch context only (counted in "
                     "graph_kernels_without_capture_context). To keep their capture context, "
                     "start profiling before the graph is created.\n",
                     static_cast<unsigned long long>(r.graphNodeId));
      }
    }
  }
  for (uint32_t i = 0; i < launch.count; ++i) {
    const LaunchEntry &e = launch.entries[i];
    Session &s = *e.session;
    NodeId parent = e.node;
    StringId frame = e.named ? launch.name : name;
    if (captured) {
      if (!captured->records(s.id())) continue;  // deactivated when the graph was captured
      parent = s.child(e.phase, parent, capturedAt_);
      for (StringId f : captured->names)
        if (parent != kNoNode) parent = s.child(e.phase, parent, f);
      frame = captured->kernelName != StringId{} ? captured->kernelName : name;
    }
    NodeId node = parent == kNoNode ? kNoNode : s.child(e.phase, parent, frame);
    if (observer_ && parent != kNoNode)
      filedUnder[numFiled++] = {&s, parent, e.phase,
                                captured ? captured->kernelName != StringId{} : e.named};
    if (s.options().data == DataKind::kTrace) {
      if (!timed) continue;  // a slice needs both ends (counted above)
      TraceEvent event;
      event.name = frame;  // as the tree names it: launch metadata's name, <metric>
      event.context = node;
      event.lane = Lane{Lane::Kind::kGpuStream, static_cast<uint32_t>(r.device), r.stream};
      event.beginNs = r.startNs;
      event.endNs = r.endNs;
      event.launchNs = launch.launchNs;
      event.launchThread = launch.threadId;
      event.correlation = r.correlation;
      s.addDeviceEvent(e.phase, event, r.deviceType, r.device);
    } else {
      s.addKernel(e.phase, node, timed ? r.endNs - r.startNs : 0, r.device, r.deviceType);
      if (captured && !captured->metrics.empty() && node != kNoNode)
        if (Status st = s.addMetrics(e.phase, node, captured->metrics); !st.isOk())
          dropConflictingMetrics(st, frame);
      if (samples_ && node != kNoNode && PcSampleAttributor::samples(s))
        sampled[numSampled++] = SampleTarget{&s, e.phase, node};
    }
  }
  if (samples_) samples_->noteKernel(name, sampled, numSampled, r.startNs, r.endNs);
  if (observer_) observer_(r, filedUnder, numFiled, captured ? captured->kernelName : launch.name);
}

}  // namespace proton
