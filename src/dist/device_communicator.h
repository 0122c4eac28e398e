// device_communicator: the Communicator a data-parallel run's step uses when its model lives in
// a device's memory (the CUDA backend: NCCL inside the plugin). The device's collective library
// needs a bootstrap id that one rank makes and every rank joins with; the ranks already talk
// through the host communicator (MPI, in this binary), so the primary makes the id (the backend
// registry's comm_id), the host communicator broadcasts its bytes, and every rank makes its
// device communicator from them (BackendEntry::communicator), which keeps the plugin's seam to
// two plain entries: the id, and a communicator from (device, host, id).
#pragma once
#include <memory>
#include <string_view>

#include "train/communicator.h"

namespace seqtrain::dist {

// Collective over `host`: for a run on backend `name` (backend_for's "cpu", "cuda:N", ...), the
// device's communicator (host.rank() of host.world(), serving host memory through `host`), or
// null when `host` itself serves the backend (its memory is the host's). Errors name the key and
// the fix (runtime.device asks for a GPU that this machine or build does not have); ranks that
// disagree on whether they run on a GPU get a RankAgreedError on every rank.
std::unique_ptr<Communicator> device_communicator(Communicator& host, std::string_view name);

}  // namespace seqtrain::dist
