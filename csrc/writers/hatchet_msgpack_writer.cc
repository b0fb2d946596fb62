#include "writers/hatchet_writer.h"
#include "writers/msgpack_encoder.h"

namespace proton {

Status writeHatchetMsgpack(const ProfileView &view, ByteSink &sink) {
  MsgpackEncoder encoder(sink);
  HatchetEmitter<MsgpackEncoder>(view, encoder).emit();
  return {};
}

}  // namespace proton
