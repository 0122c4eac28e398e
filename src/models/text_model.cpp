// TextModel's batch check (text_model.h).
#include "models/text_model.h"

#include "models/token_ids.h"

namespace seqtrain {

void TextModel::check_batch(const Batch& host) const { check_token_ids(host.inputs, spec_.type, spec_.vocab_size); }

}  // namespace seqtrain
