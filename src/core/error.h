// Error: the one exception type seqtrain throws for bad input and broken invariants.
// Every message says where the problem is (file, line/column, config key or tensor name)
// and what would fix it; the CLI prints it and exits non-zero.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace seqtrain {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace seqtrain

// ST_CHECK(cond, "format {}", args...): throw seqtrain::Error with the message when cond is false.
#define ST_CHECK(cond, ...)                 \
  do {                                      \
    if (!(cond)) ::seqtrain::fail(__VA_ARGS__); \
  } while (0)
