// Files built into the binary (cmake/embed.cmake): "page.html" (the service's browser page)
// and "CONFIG.md" (the config reference whose key table the template form shows).
#pragma once
#include <string_view>

namespace seqtrain::serve {

// The bytes of the named asset; empty when there is none.
std::string_view asset(std::string_view name);

}  // namespace seqtrain::serve
