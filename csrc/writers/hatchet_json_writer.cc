#include "writers/hatchet_writer.h"
#include "writers/json_encoder.h"

namespace proton {

Status writeHatchetJson(const ProfileView &view, ByteSink &sink) {
  JsonEncoder encoder(sink);
  HatchetEmitter<JsonEncoder>(view, encoder).emit();
  sink.put('\n');
  return {};
}

}  // namespace proton
