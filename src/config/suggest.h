// Spelling suggestions for error messages ("did you mean 'train.batch_size'?").
// Used for config keys, choice values and CSV column names: a typo should cost the user one
// glance at the message, not a trip to the docs.
#pragma once
#include <string>
#include <vector>

namespace seqtrain {

// Edit distance with adjacent transpositions (insert, delete, substitute and swapping two
// neighbours all cost 1: "gtp" is one edit from "gpt"), case-sensitive.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `query`, or "" when none is close enough to be a plausible typo.
// Dotted names are also compared by their last component, so "batchsize" at the wrong level
// still finds "train.batch_size".
std::string closest_match(const std::string& query, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" — ready to append to a message.
std::string did_you_mean(const std::string& query, const std::vector<std::string>& candidates);

// "'a', 'b', 'c'" for listing the valid choices in a message.
std::string quoted_list(const std::vector<std::string>& items);

}  // namespace seqtrain
