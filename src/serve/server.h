// HttpServer: the service's HTTP face over cpp-httplib. A JSON API under /api/ and the page at
// /, and nothing else: every route checks the token (when one is set), every path parameter
// goes through paths.h, bodies are size-limited, and event streams are capped below the
// thread pool so they can never starve the API of threads.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "serve/service.h"

namespace httplib {
class Server;
}

namespace seqtrain::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0 = any free port
  std::string token;           // empty: no token (loopback only)
  size_t max_body = 256 * 1024;
  int threads = 64;            // the pool; each open event stream holds one
  int max_streams = 48;        // event streams at once; past it, 503
};

class HttpServer {
 public:
  HttpServer(Service& service, ServerOptions options);
  ~HttpServer();
  // Binds host:port; throws Error (port in use, bad host) naming the address and a fix.
  // Returns the bound port.
  int bind();
  void run();   // serves until stop()
  void stop();  // from any thread; open event streams end

 private:
  void routes();  // all of the below
  void guard_requests();
  void api_routes();
  void file_route();
  void event_route();
  Service& service_;
  ServerOptions opt_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<int> streams_{0};
  std::atomic<bool> stopping_{false};
  int port_ = 0;
};

// True for 127.0.0.1, ::1, localhost and the rest of 127.0.0.0/8.
bool is_loopback(const std::string& host);

}  // namespace seqtrain::serve
