// CRC-32C (Castagnoli): the checksum TFRecord framing puts around every TensorBoard record
// (obs/tensorboard.h), and the one storage formats beyond it use (LevelDB, ext4, iSCSI). A
// table-driven byte loop: the records it covers are a few hundred bytes per log interval, so
// the SSE4.2 instruction would save nothing worth a CPU check.
#pragma once
#include <cstdint>
#include <string_view>

namespace seqtrain {

// CRC-32C of `bytes` (reflected polynomial 0x82F63B78, initial and final XOR 0xFFFFFFFF):
// crc32c("123456789") == 0xE3069283. `crc` continues an earlier result over more bytes.
uint32_t crc32c(std::string_view bytes, uint32_t crc = 0);

}  // namespace seqtrain
