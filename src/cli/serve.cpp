// `seqtrain serve`: see serve.h.
#include "cli/serve.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "serve/server.h"
#include "serve/service.h"
#include "train/stop_token.h"
#include "train/trainer.h"

namespace seqtrain {

CLI::App* add_serve_command(CLI::App& app, ServeArgs& a) {
  auto* s = app.add_subcommand("serve",
                               "Run the training service: launch tasks from templates in a browser, queue them, watch "
                               "them live, resume them after a crash");
  s->add_option("--port", a.port, "TCP port (0 = any free port, printed at start)")->check(CLI::Range(0, 65535));
  s->add_option("--root", a.root, "directory of the task database, templates/ and tasks/ (created if absent)");
  s->add_option("--jobs", a.jobs, "tasks run at once (default: one per two cores and per 2 GiB of memory)")
      ->check(CLI::Range(0, 256));
  s->add_option("--threads", a.threads, "threads per task (default: the cores divided among --jobs)")
      ->check(CLI::Range(0, 1024));
  s->add_option("--host", a.host, "address to listen on; anything but loopback requires --token or --token-file");
  s->add_option("--token", a.token, "access token every request must carry (Authorization: Bearer TOKEN)");
  s->add_option("--token-file", a.token_file, "file holding the access token (first line)");
  return s;
}

int run_serve(const ServeArgs& a) {
  std::string token = a.token;
  if (!a.token_file.empty()) {
    ST_CHECK(token.empty(), "give --token or --token-file, not both");
    std::ifstream in(a.token_file);
    ST_CHECK(in.good(), "--token-file {}: cannot be read; give a readable file whose first line is the token",
             a.token_file);
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    ST_CHECK(!token.empty(), "--token-file {}: its first line is empty; write the token there", a.token_file);
  }
  ST_CHECK(token.empty() || token.size() >= 8, "--token: use at least 8 characters");
  serve::ServiceOptions so;
  so.root = a.root;
  so.binary = std::filesystem::canonical("/proc/self/exe");
  so.jobs = a.jobs;
  so.threads = a.threads;
  serve::Service service(so);
  serve::ServerOptions ho;
  ho.host = a.host;
  ho.port = a.port;
  ho.token = token;
  serve::HttpServer http(service, ho);
  const int port = http.bind();
  for (const std::string& n : service.notes()) std::fprintf(stderr, "seqtrain serve: %s\n", n.c_str());
  std::printf("seqtrain serve: listening on http://%s:%d/ (root %s, %d task%s at once x %d threads)\n",
              a.host.find(':') != std::string::npos ? ("[" + a.host + "]").c_str() : a.host.c_str(), port,
              service.root().c_str(), service.jobs(), service.jobs() == 1 ? "" : "s", service.threads_per_task());
  std::fflush(stdout);
  service.start();
  // SIGINT/SIGTERM reach the stop token (route_stop_signals); a second one ends the process.
  StopToken& stop = signal_stop_token();
  stop.arm(true);
  std::thread watcher([&] {
    while (!stop.requested()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    http.stop();
  });
  http.run();
  if (!stop.requested()) stop.request(0);
  watcher.join();
  std::fprintf(stderr, "seqtrain serve: stopping: running tasks write their last checkpoint\n");
  service.stop();
  stop.arm(false);
  return 0;
}

}  // namespace seqtrain
