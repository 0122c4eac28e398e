// device_communicator: see device_communicator.h.
#include "dist/device_communicator.h"

#include <string>
#include <vector>

#include "backend/registry.h"
#include "train/rank_start.h"

namespace seqtrain::dist {

std::unique_ptr<Communicator> device_communicator(Communicator& host, std::string_view name) {
  const BackendEntry& entry = backend_entry(name);
  // Every rank or none joins the device's clique: a rank left out would wait in another collective.
  double on_device = entry.communicator ? 1.0 : 0.0;
  host.all_reduce_sum(&on_device, 1);
  if (on_device == 0) return nullptr;
  if (on_device != host.world())
    throw RankAgreedError(fmt::format("runtime.device: {} of the {} ranks run on a GPU and the others on the CPU "
                                      "(this one on {}); give every rank the same runtime.device",
                                      on_device, host.world(), name));
  entry.make(name);  // the device's own error first (no GPU, no such index), on every rank
  std::vector<char> id;
  if (host.primary()) id = entry.comm_id();
  const std::string bytes = broadcast_string(host, std::string(id.begin(), id.end()));
  return entry.communicator(name, host, std::vector<char>(bytes.begin(), bytes.end()));
}

}  // namespace seqtrain::dist
