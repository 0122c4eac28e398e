// HttpServer: see server.h.
#include "serve/server.h"

#include <httplib.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "serve/assets.h"
#include "serve/paths.h"

namespace seqtrain::serve {
namespace fs = std::filesystem;
namespace {

void send_json(httplib::Response& res, const nlohmann::json& j, int status = 200) {
  res.status = status;
  res.set_content(j.dump(), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& key = {}) {
  nlohmann::json j = {{"error", message}};
  if (!key.empty()) j["key"] = key;
  send_json(res, j, status);
}

// Equal strings in time that does not depend on where they differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= (unsigned char)(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

std::string cookie_value(const std::string& cookies, const std::string& name) {
  size_t at = 0;
  while (at < cookies.size()) {
    size_t end = cookies.find(';', at);
    if (end == std::string::npos) end = cookies.size();
    std::string kv = cookies.substr(at, end - at);
    const size_t first = kv.find_first_not_of(' ');
    kv = first == std::string::npos ? "" : kv.substr(first);
    if (kv.rfind(name + "=", 0) == 0) return kv.substr(name.size() + 1);
    at = end + 1;
  }
  return {};
}

int64_t task_id(const httplib::Request& req) {
  try {
    return std::stoll(req.matches[1].str());
  } catch (const std::exception&) {
    throw RequestError(400, "the task id must be a number");
  }
}

const char* mime_of(const fs::path& p) {
  const std::string ext = p.extension().string();
  if (ext == ".json") return "application/json";
  if (ext == ".jsonl" || ext == ".log" || ext == ".txt" || ext == ".yaml" || ext == ".csv") return "text/plain; charset=utf-8";
  if (ext == ".svg") return "image/svg+xml";
  return "application/octet-stream";
}

// New complete lines of a file a child appends to, from where the last call stopped.
struct Tail {
  fs::path file;
  std::streamoff offset = 0;
  std::string partial;
  std::vector<std::string> read(size_t max_bytes) {
    std::vector<std::string> lines;
    std::ifstream in(file, std::ios::binary);
    if (!in) return lines;
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < offset) {  // rewritten (a resume trims its metrics): start over
      offset = 0;
      partial.clear();
    }
    if (size == offset) return lines;
    in.seekg(offset);
    std::string chunk((size_t)std::min<std::streamoff>(size - offset, (std::streamoff)max_bytes), '\0');
    in.read(chunk.data(), (std::streamsize)chunk.size());
    chunk.resize((size_t)in.gcount());
    offset += (std::streamoff)chunk.size();
    partial += chunk;
    size_t start = 0;
    for (size_t i = 0; i < partial.size(); ++i)
      if (partial[i] == '\n' || partial[i] == '\r') {
        if (i > start) lines.push_back(partial.substr(start, i - start));
        start = i + 1;
      }
    partial.erase(0, start);
    return lines;
  }
};

const char* kLoginPage = R"(<!doctype html><html><head><meta charset="utf-8"><title>seqtrain: token</title></head>
<body style="font-family:sans-serif;max-width:30em;margin:4em auto">
<h1>seqtrain</h1><p>This server needs its access token (the one given to <code>seqtrain serve --token</code>).</p>
<form id="f"><input id="t" type="password" autofocus size="40" placeholder="token"> <button>Open</button></form>
<script>document.getElementById('f').onsubmit=function(e){e.preventDefault();
document.cookie='seqtrain_token='+encodeURIComponent(document.getElementById('t').value)+'; path=/; SameSite=Strict';
location.reload();};</script></body></html>)";

}  // namespace

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

HttpServer::HttpServer(Service& service, ServerOptions options)
    : service_(service), opt_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  ST_CHECK(!(!is_loopback(opt_.host) && opt_.token.empty()),
           "--host {} is not loopback: anyone who reaches it could run tasks. Pass --token (or --token-file), or "
           "keep the default --host 127.0.0.1",
           opt_.host);
  const int threads = opt_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool((size_t)threads); };
  http_->set_payload_max_length(opt_.max_body);
  http_->set_keep_alive_timeout(2);
  routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  if (opt_.port == 0) {
    port_ = http_->bind_to_any_port(opt_.host);
    ST_CHECK(port_ > 0, "cannot listen on {}: no free port (or the address is not this machine's)", opt_.host);
  } else {
    ST_CHECK(http_->bind_to_port(opt_.host, opt_.port),
             "cannot listen on {}:{}: the port is in use or the address is not this machine's; pass another --port "
             "(or --port 0 for any free one) or stop what holds it",
             opt_.host, opt_.port);
    port_ = opt_.port;
  }
  return port_;
}

void HttpServer::run() { http_->listen_after_bind(); }

void HttpServer::stop() {
  stopping_ = true;
  if (http_) http_->stop();
}

void HttpServer::routes() {
  guard_requests();
  api_routes();
  file_route();
  event_route();
}

// What every request passes before its route: the token (or, without one, a loopback Host), JSON
// for writes; and how errors and exceptions become JSON answers.
void HttpServer::guard_requests() {
  using httplib::Request;
  using httplib::Response;
  using Handled = httplib::Server::HandlerResponse;
  auto& s = *http_;

  s.set_pre_routing_handler([this](const Request& req, Response& res) {
    // No compression: cpp-httplib would brotli-compress every JSON answer at its slowest
    // setting (0.4 s for the list of 1,000 tasks, 12 ms uncompressed). The request object is
    // cpp-httplib's own non-const one; this handler is only handed it as const.
    const_cast<Request&>(req).headers.erase("Accept-Encoding");
    if (!opt_.token.empty()) {
      std::string given = req.get_header_value("Authorization");
      given = given.rfind("Bearer ", 0) == 0 ? given.substr(7) : "";
      if (given.empty()) given = httplib::detail::decode_url(cookie_value(req.get_header_value("Cookie"), "seqtrain_token"), false);
      if (!same_secret(given, opt_.token)) {
        if (req.path == "/") {
          res.status = 401;
          res.set_content(kLoginPage, "text/html; charset=utf-8");
        } else {
          send_error(res, 401, "this server needs its token: send 'Authorization: Bearer TOKEN'");
        }
        return Handled::Handled;
      }
    } else {
      // No token means loopback only; a Host naming anything else is a page elsewhere talking
      // to this server through DNS rebinding.
      std::string host = req.get_header_value("Host");
      host = host.substr(0, host.rfind(':') == std::string::npos || host.back() == ']' ? host.size() : host.rfind(':'));
      if (!is_loopback(host)) {
        send_error(res, 403, "this server answers only requests addressed to loopback (Host: " + host + ")");
        return Handled::Handled;
      }
    }
    // A form or a script on another site cannot send JSON without asking first (CORS), and
    // this server never says yes: every write must be application/json.
    if (req.method == "POST" && req.get_header_value("Content-Type").rfind("application/json", 0) != 0) {
      send_error(res, 415, "send the request body as JSON (Content-Type: application/json)");
      return Handled::Handled;
    }
    return Handled::Unhandled;
  });
  s.set_error_handler([](const Request&, Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) send_error(res, 413, "the request body is larger than this server accepts");
    else if (res.status == 404) send_error(res, 404, "no such route; the API is under /api/ (templates, tasks)");
    else send_error(res, res.status, fmt::format("HTTP {}", res.status));
  });
  s.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const RequestError& e) {
      send_error(res, e.status, e.what(), e.key);
    } catch (const std::exception& e) {
      send_error(res, 500, std::string("internal error: ") + e.what());
    }
  });
}

// The page, the templates and the tasks: listing, submitting, cancelling, resuming.
void HttpServer::api_routes() {
  using httplib::Request;
  using httplib::Response;
  auto& s = *http_;

  s.Get("/", [](const Request&, Response& res) {
    const std::string_view page = asset("page.html");
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  s.Get("/api/templates", [this](const Request&, Response& res) { send_json(res, service_.templates()); });
  s.Get("/api/tasks", [this](const Request&, Response& res) { send_json(res, service_.tasks()); });
  s.Post("/api/tasks", [this](const Request& req, Response& res) {
    const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    if (body.is_discarded()) throw RequestError(400, "the body is not valid JSON: send {\"template\": NAME, \"overrides\": {KEY: VALUE}}");
    if (!body.is_object() || !body.contains("template") || !body["template"].is_string())
      throw RequestError(400, "the body needs \"template\": the name of a file in templates/", "template");
    const nlohmann::json overrides = body.value("overrides", nlohmann::json::object());
    const int64_t id = service_.submit(body["template"].get<std::string>(), overrides);
    send_json(res, service_.task(id), 201);
  });
  s.Get(R"(/api/tasks/(\d+))", [this](const Request& req, Response& res) { send_json(res, service_.task(task_id(req))); });
  s.Post(R"(/api/tasks/(\d+)/cancel)", [this](const Request& req, Response& res) {
    send_json(res, service_.cancel(task_id(req)));
  });
  s.Post(R"(/api/tasks/(\d+)/resume)", [this](const Request& req, Response& res) {
    send_json(res, service_.resume(task_id(req)));
  });
}

// A file of a task's run directory (a directory lists as JSON), resolved inside it or refused.
void HttpServer::file_route() {
  using httplib::Request;
  using httplib::Response;
  auto& s = *http_;

  s.Get(R"(/api/tasks/(\d+)/files(/.*)?)", [this](const Request& req, Response& res) {
    const int64_t id = task_id(req);
    if (!service_.state(id)) throw RequestError(404, fmt::format("no task {}", id));
    const fs::path run = service_.run_dir(id);
    std::string rel = req.matches[2].str();
    while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
    fs::path file = fs::weakly_canonical(run);
    if (!rel.empty()) {
      if (rel.front() == '/' || req.matches[2].str().rfind("//", 0) == 0)
        throw RequestError(400, "an absolute path: give one relative to the task's run directory");
      std::string why;
      file = resolve_inside(run, rel, &why);
      if (file.empty()) throw RequestError(400, fmt::format("'{}' is refused: {}", rel, why));
    }
    std::error_code ec;
    if (fs::is_directory(file, ec)) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& e : fs::directory_iterator(file, ec)) {
        const bool dir = e.is_directory(ec);
        list.push_back({{"name", e.path().filename().string()}, {"dir", dir},
                        {"size", dir ? 0 : (int64_t)e.file_size(ec)}});
      }
      send_json(res, list);
      return;
    }
    if (!fs::is_regular_file(file, ec)) throw RequestError(404, fmt::format("task {} has no file '{}'", id, rel));
    auto in = std::make_shared<std::ifstream>(file, std::ios::binary);
    const size_t size = (size_t)fs::file_size(file, ec);
    const char* mime = mime_of(file);
    if (std::string(mime) == "application/octet-stream")
      res.set_header("Content-Disposition", "attachment; filename=\"" + file.filename().string() + "\"");
    res.set_content_provider(size, mime, [in](size_t offset, size_t length, httplib::DataSink& sink) {
      std::vector<char> buf(std::min<size_t>(length, 1 << 20));
      in->seekg((std::streamoff)offset);
      in->read(buf.data(), (std::streamsize)buf.size());
      const std::streamsize n = in->gcount();
      if (n <= 0) return false;
      return sink.write(buf.data(), (size_t)n);
    });
  });
}

// Server-sent events of one task: its log and metrics lines as they are written, its changes,
// then `end`. Each stream holds a pool thread, so their number is capped below the pool's.
void HttpServer::event_route() {
  using httplib::Request;
  using httplib::Response;
  auto& s = *http_;

  s.Get(R"(/api/tasks/(\d+)/events)", [this](const Request& req, Response& res) {
    const int64_t id = task_id(req);
    if (!service_.state(id)) throw RequestError(404, fmt::format("no task {}", id));
    if (streams_.fetch_add(1) >= opt_.max_streams) {
      streams_.fetch_sub(1);
      throw RequestError(503, "too many open event streams; close a page or try again");
    }
    struct Stream {
      Tail metrics, log;
      std::string last_task;
      std::chrono::steady_clock::time_point last_sent = std::chrono::steady_clock::now();
    };
    auto st = std::make_shared<Stream>();
    st->metrics.file = service_.run_dir(id) / "metrics.jsonl";
    st->log.file = service_.run_dir(id) / "train.log";
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, id, st](size_t, httplib::DataSink& sink) {
          if (stopping_) {
            sink.done();
            return true;
          }
          std::string out;
          for (const std::string& line : st->log.read(256 * 1024)) out += "event: log\ndata: " + line + "\n\n";
          for (const std::string& line : st->metrics.read(1 << 20)) out += "event: metric\ndata: " + line + "\n\n";
          const bool files_quiet = out.empty();
          nlohmann::json task = service_.task(id);
          const bool final = is_final(*parse_state(task["state"].get<std::string>()));
          nlohmann::json seen = task;
          seen.erase("duration_s");  // changes every call while running: not news by itself
          if (const std::string t = seen.dump(); t != st->last_task) {
            out += "event: task\ndata: " + task.dump() + "\n\n";
            st->last_task = t;
          }
          const auto now = std::chrono::steady_clock::now();
          if (out.empty() && now - st->last_sent > std::chrono::seconds(15)) out = ": keep-alive\n\n";
          if (!out.empty()) {
            if (!sink.write(out.data(), out.size())) return false;
            st->last_sent = now;
          }
          if (final && files_quiet) {  // everything the run wrote has been sent
            const std::string end = "event: end\ndata: {}\n\n";
            sink.write(end.data(), end.size());
            sink.done();
            return true;
          }
          if (files_quiet) std::this_thread::sleep_for(std::chrono::milliseconds(250));
          return sink.is_writable();
        },
        [this](bool) { streams_.fetch_sub(1); });
  });
}

}  // namespace seqtrain::serve
