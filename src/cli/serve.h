// `seqtrain serve [--port P] [--root DIR] [--jobs N] [--host H --token T|--token-file F]`: the
// training service (src/serve/). Binds loopback unless told otherwise (then a token is
// required), keeps its task database, templates and runs under --root, and runs tasks as
// `seqtrain train` children of this binary. SIGINT/SIGTERM stop it: running tasks write their
// `last` checkpoint and are marked interrupted, to be resumed after a restart.
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace seqtrain {

struct ServeArgs {
  std::string host = "127.0.0.1", root = "serve", token, token_file;
  int port = 8080, jobs = 0, threads = 0;
};

CLI::App* add_serve_command(CLI::App& app, ServeArgs& args);
int run_serve(const ServeArgs& args);

}  // namespace seqtrain
