// Strict text-to-value parsing shared by the config loader and the CSV reader.
// The whole text must be the value: "12abc" is not 12. std::from_chars is used instead of
// strtod/strtol because it ignores the process locale (a German locale would otherwise read
// "0,5" and reject "0.5") and never skips leading whitespace behind our back.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace seqtrain {

// Decimal or scientific notation, optional leading '+' or '-'; "nan", "inf" and "infinity"
// (any case) parse to non-finite values so callers can apply their own policy.
std::optional<double> parse_double(std::string_view text);

// A decimal integer; a number written as a float with an integral value ("1e4", "20.0") is
// accepted too, since YAML users write large step counts that way.
std::optional<int64_t> parse_int64(std::string_view text);
std::optional<uint64_t> parse_uint64(std::string_view text);

// A memory size: a number > 0 of bytes with an optional unit, binary (KiB, MiB, GiB, TiB) or
// decimal (KB, MB, GB, TB; B for bytes), case-insensitive, a space allowed before it: "512MiB",
// "8 GiB", "1.5GB", "1e9". Whole bytes (rounded down), at least 1, below 2^63.
std::optional<int64_t> parse_bytes(std::string_view text);

// YAML 1.1 and 1.2 spellings: true/false, yes/no, on/off (case-insensitive).
std::optional<bool> parse_bool(std::string_view text);

}  // namespace seqtrain
