// serve: an OpenAI-compatible HTTP server over one decodekit::Engine (the public API,
// api/decodekit.h), for the clients written against llama-server or OpenAI.
//
//   ./bazelw run //tools/serve -- --model /path/to/SmolLM2-135M-Instruct.Q4_1.gguf --port 8080
//   curl -s http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json'
//     -d '{"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 32}'
//
// Endpoints: POST /v1/completions and /v1/chat/completions ("stream": true answers
// with server-sent events, ending "data: [DONE]"), GET /v1/models, GET /health. The
// request fields taken, and those refused, are listed in tools/serve/openai_api.h.
//
// One model per server: --model FILE (its chain built and cached, as generate
// --model) or --elf with --weights and --tokenizer. It listens on 127.0.0.1 unless
// --host says otherwise; --port 0 picks a free port. Either way the first line on
// stdout is "serve: listening on http://HOST:PORT".
//
// Up to --parallel requests at a time, batched: one engine thread steps them together
// (decodekit::BatchEngine, api/batch.h: one run of the program per step, a decode row for
// each request generating and up to --prompt_rows_per_step prompt tokens of those
// joining), each giving the answer it gives alone. The rest wait in a queue, in arrival
// order, and join as others finish; more than --max_queue waiting is answered 429. A
// client that leaves mid-stream ends its generation at the next step. Each request
// starts with an empty KV cache (no prefix kept from an earlier request).
//
// SIGTERM or SIGINT: stop accepting connections, finish the requests already running
// or streaming (those still queued get 503), exit 0. A second signal exits 1 at once.
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/batch.h"
#include "api/decodekit.h"
#include "api/engine_internal.h"
#include "elf/elf.h"
#include "httplib.h"
#include "tools/flags/model_flags.h"
#include "tools/flags/runtime_flags.h"
#include "tools/serve/openai_api.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "util/user_path.h"

ABSL_FLAG(std::string, elf, "", "the decode ELF of a stage the rules built (instead of --model)");
ABSL_FLAG(std::string, weights, "synthetic",
          "with --elf: an HF checkpoint directory, a .gguf file, or synthetic[:SEED]");
ABSL_FLAG(std::string, tokenizer, "",
          "a .gguf, a tokenizer.json or a checkpoint directory with one (with --model: the model's own)");
ABSL_FLAG(std::string, chat_format, "",
          "how chat messages are formatted: the model's own template (\"\"), llama3, chatml, gemma or raw");
ABSL_FLAG(std::string, host, "127.0.0.1", "the address to listen on (loopback unless told otherwise)");
ABSL_FLAG(int, port, 8080, "the port (0: a free one, printed on the first line)");
ABSL_FLAG(std::string, model_name, "",
          "the model's id in /v1/models and the replies (\"\": the model file's name without extension)");
ABSL_FLAG(int, max_queue, 16, "requests that may wait for the engine; more are answered 429 (>= 1)");
ABSL_FLAG(int, parallel, 4,
          "requests generated at once, batched into one run a step (1: one after another); the rest wait. "
          "Each holds a KV cache of --max_context positions, allocated at start");
ABSL_FLAG(int, prompt_rows_per_step, 32,
          "the most prompt tokens one batched step reads beside the running requests' decode rows");

namespace {

using dk::UserPath;
using dk::serve::ApiError;
using dk::serve::Endpoint;
using dk::serve::Request;

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

ApiError ServerError(int status, std::string message, std::string type = "server_error") {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  return e;
}

// One request, from the handler that received it to the engine thread and back: the
// engine thread fills it in (prepared, the text as it comes, the result), the handler
// waits on it and writes the reply.
struct Job {
  Request request;
  std::string id;  // the response's, in the replies and the log
  std::atomic<bool> cancelled{false};  // the client left: generation stops at the next piece

  std::mutex mu;
  std::condition_variable cv;
  bool prepared = false;  // the prompt was tokenized and fits: a stream may start
  bool done = false;
  std::optional<ApiError> error;  // set before prepared (a bad request) or at the end
  dk::serve::Usage usage;
  std::deque<std::string> pieces;  // streamed text not yet written
  std::string text;                // the whole reply (not streamed)
  const char* finish_reason = nullptr;
  int joined_beside = 0;  // sequences in the batch when it joined (engine thread only)

  void Prepare(int prompt_tokens) {
    std::lock_guard<std::mutex> lock(mu);
    usage.prompt_tokens = prompt_tokens;
    prepared = true;
    cv.notify_all();
  }
  void Push(std::string_view piece) {
    std::lock_guard<std::mutex> lock(mu);
    pieces.emplace_back(piece);
    cv.notify_all();
  }
  void Finish(std::optional<ApiError> e) {
    std::lock_guard<std::mutex> lock(mu);
    if (e) error = std::move(e);
    done = true;
    cv.notify_all();
  }
  // Waits until the job is prepared or done; the error if it ended before starting.
  std::optional<ApiError> WaitPrepared() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return prepared || done; });
    return prepared ? std::nullopt : error;
  }
  void WaitDone() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
};

// The batch engine and the one thread that drives it: up to --parallel jobs run at
// once, one step of all of them at a time (decodekit::BatchEngine); the rest wait in
// arrival order and join as others finish.
class EngineWorker {
 public:
  EngineWorker(std::unique_ptr<decodekit::BatchEngine> batch, int max_queue)
      : batch_(std::move(batch)), max_queue_(max_queue), thread_([this] { Loop(); }) {}
  ~EngineWorker() { Stop(); }

  // Queues a job; nullopt, or the 429 / 503 that refuses it.
  std::optional<ApiError> Submit(std::shared_ptr<Job> job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) return ServerError(503, "the server is shutting down");
    if (static_cast<int>(queue_.size()) >= max_queue_) {
      ApiError e = ServerError(429, absl::StrCat("too many requests: ", queue_.size(),
                                                 " are waiting for the engine (--max_queue)"),
                               "rate_limit_error");
      return e;
    }
    queue_.push_back(std::move(job));
    cv_.notify_all();
    return std::nullopt;
  }
  // From now on queued and new jobs are refused with 503; the running ones finish.
  void Drain() {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    cv_.notify_all();
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = draining_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }

 private:
  void Loop() {
    decodekit::BatchEngine& batch = *batch_;
    for (;;) {
      std::vector<std::shared_ptr<Job>> joining;
      bool refuse = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        // Idle: sleep until a job comes. Busy: take what the free slots allow, and step.
        if (!batch.busy()) cv_.wait(lock, [&] { return !queue_.empty() || stopped_; });
        if (queue_.empty() && !batch.busy()) return;  // stopped, nothing left
        refuse = draining_;
        const int free = batch.options().sequences - batch.running() - batch.waiting();
        while (!queue_.empty() && (refuse || static_cast<int>(joining.size()) < free)) {
          joining.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      for (std::shared_ptr<Job>& job : joining) {
        if (refuse) {
          job->Finish(ServerError(503, "the server is shutting down"));
        } else if (job->cancelled) {
          job->Finish(ServerError(499, "the client closed the connection"));
        } else {
          Start(std::move(job));
        }
      }
      // Clients gone before their first piece of text (a callback would end the others).
      for (auto& [id, job] : running_) {
        if (job->cancelled) batch.Cancel(id);
      }
      for (decodekit::BatchDone& done : batch.Step()) {
        auto it = running_.find(done.id);
        if (it == running_.end()) continue;
        End(*it->second, done.result);
        running_.erase(it);
      }
    }
  }

  // Tokenizes the prompt (to check it against the context before a stream starts),
  // then adds it to the batch as Engine::Complete / Chat would run it.
  void Start(std::shared_ptr<Job> job_ptr) {
    Job& job = *job_ptr;
    const Request& r = job.request;
    decodekit::BatchEngine& batch = *batch_;
    const decodekit::Engine& engine = batch.engine();
    absl::StatusOr<std::vector<int32_t>> ids;
    if (r.endpoint == Endpoint::kChat) {
      absl::StatusOr<std::string> text = engine.FormatChat(r.messages);
      ids = text.ok() ? engine.Tokenize(*text, /*add_special=*/false) : text.status();
    } else {
      ids = engine.Tokenize(r.prompt);
    }
    if (!ids.ok()) return job.Finish(BadRequest(ids.status().message()));
    if (ids->empty()) return job.Finish(BadRequest(absl::string_view("the prompt encodes to no tokens")));
    const int n = static_cast<int>(ids->size());
    const int max_tokens = r.max_tokens.value_or(dk::serve::DefaultMaxTokens(r.endpoint, n, engine.max_context()));
    if (auto e = dk::serve::CheckContext(n, max_tokens, engine.max_context())) return job.Finish(std::move(e));

    decodekit::GenerateOptions options;
    options.max_new_tokens = max_tokens;
    options.sampling = r.sampling;
    if (!r.seed_given) options.sampling.seed = rng_();
    options.stop_strings = r.stop;
    options.stop_at_end_of_generation = !r.ignore_eos;
    if (absl::Status s = decodekit::ValidateGenerateOptions(options); !s.ok()) {
      return job.Finish(BadRequest(s.message()));
    }
    // The callback runs on this thread inside Step; the job outlives its sequence.
    Job* j = &job;
    const auto on_text = [j](std::string_view text) {
      if (j->cancelled) return false;
      if (j->request.stream) j->Push(text);
      return true;
    };
    job.joined_beside = batch.running() + batch.waiting();
    absl::StatusOr<int> id = r.endpoint == Endpoint::kChat ? batch.AddChat(r.messages, options, on_text)
                                                           : batch.AddCompletion(r.prompt, options, on_text);
    if (!id.ok()) return job.Finish(BadRequest(id.status().message()));
    job.Prepare(n);
    running_[*id] = std::move(job_ptr);
  }

  void End(Job& job, const absl::StatusOr<decodekit::GenerateResult>& result) {
    if (!result.ok()) {
      return job.Finish(ServerError(500, absl::StrCat("generation failed: ", result.status().message())));
    }
    // One line a request: what it cost, how many ran beside it when it joined, and why
    // it stopped ("client gone": the stream's reader left, the generation ended there).
    std::fprintf(stderr,
                 "[serve] %s: %d prompt tokens, joined beside %d, %zu new tokens in %.0f + %.0f ms, stopped: %s\n",
                 job.id.c_str(), result->prompt_tokens, job.joined_beside, result->tokens.size(), result->prompt_ms,
                 result->decode_ms,
                 result->stop == decodekit::StopReason::kCallback ? "client gone" : dk::serve::FinishReason(result->stop));
    {
      std::lock_guard<std::mutex> lock(job.mu);
      job.text = result->text;
      job.usage.completion_tokens = static_cast<int>(result->tokens.size());
      job.finish_reason = dk::serve::FinishReason(result->stop);
    }
    job.Finish(std::nullopt);
  }

  static ApiError BadRequest(absl::string_view message) {
    ApiError e;
    e.message = std::string(message);
    return e;
  }

  std::unique_ptr<decodekit::BatchEngine> batch_;
  const int max_queue_;
  std::mt19937_64 rng_{std::random_device{}()};  // seeds of requests that name none
  std::map<int, std::shared_ptr<Job>> running_;   // by batch id (engine thread only)
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool draining_ = false;
  bool stopped_ = false;
  std::thread thread_;  // last: started once the members above exist
};

void Reply(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.Body(), "application/json");
}

class Server {
 public:
  Server(EngineWorker& worker, std::string model) : worker_(worker), model_(std::move(model)) {}

  void Routes(httplib::Server& http) {
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dk::serve::ModelsBody(model_, started_), "application/json");
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Handle(Endpoint::kCompletions, req, res);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Handle(Endpoint::kChat, req, res);
    });
    // Every other error (an unknown path, a body over the size limit) in the same shape.
    http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req,
                                                                   httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      ApiError e = ServerError(res.status, res.status == 404
                                               ? absl::StrCat("no route ", req.method, " ", req.path)
                                               : absl::StrCat("HTTP ", res.status, " for ", req.method, " ", req.path),
                               "invalid_request_error");
      Reply(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      Reply(res, ServerError(500, "internal error: " + what));
    });
  }

 private:
  void Handle(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    std::variant<Request, ApiError> parsed = dk::serve::ParseRequest(req.body, endpoint);
    if (auto* e = std::get_if<ApiError>(&parsed)) return Reply(res, *e);
    auto job = std::make_shared<Job>();
    job->request = std::move(std::get<Request>(parsed));
    if (!job->request.model.empty() && job->request.model != model_) {
      ApiError e;
      e.status = 404;
      e.param = "model";
      e.code = "model_not_found";
      e.message = absl::StrCat("The model '", job->request.model, "' does not exist: this server serves '", model_,
                               "' (GET /v1/models)");
      return Reply(res, e);
    }
    job->id = absl::StrFormat("%s-%d-%d", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", started_,
                              next_id_.fetch_add(1));
    const std::string& id = job->id;
    if (auto e = worker_.Submit(job)) return Reply(res, *e);
    if (auto e = job->WaitPrepared()) return Reply(res, *e);
    if (!job->request.stream) {
      job->WaitDone();
      std::lock_guard<std::mutex> lock(job->mu);
      if (job->error) return Reply(res, *job->error);
      res.set_content(dk::serve::CompletionBody(endpoint, id, Now(), model_, job->text, job->finish_reason, job->usage),
                      "application/json");
      return;
    }
    // The stream's writer runs after this handler returns; the releaser runs when the
    // response goes, written or not (the client left before it started), and stops
    // the generation if it still runs.
    const int64_t created = Now();
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, id, created, endpoint](size_t, httplib::DataSink& sink) {
          return Stream(*job, id, created, endpoint, sink);
        },
        [job](bool) { job->cancelled = true; });
  }

  // Writes the job's text as server-sent events as it comes, then the last chunk (its
  // finish reason), the usage when asked, and [DONE]. false when the client is gone.
  bool Stream(Job& job, const std::string& id, int64_t created, Endpoint endpoint, httplib::DataSink& sink) {
    const auto write = [&](const std::string& event) {
      if (sink.write(event.data(), event.size())) return true;
      job.cancelled = true;
      return false;
    };
    if (endpoint == Endpoint::kChat &&
        !write(dk::serve::StreamChunk(endpoint, id, created, model_, "", nullptr, /*role_only=*/true))) {
      return false;
    }
    std::unique_lock<std::mutex> lock(job.mu);
    for (;;) {
      job.cv.wait(lock, [&] { return !job.pieces.empty() || job.done; });
      if (job.pieces.empty()) break;  // done, all written
      std::string piece = std::move(job.pieces.front());
      job.pieces.pop_front();
      lock.unlock();
      const bool ok = write(dk::serve::StreamChunk(endpoint, id, created, model_, piece, nullptr));
      lock.lock();
      if (!ok) return false;
    }
    std::string tail;
    if (job.error) {
      tail = dk::serve::StreamError(*job.error);
    } else {
      tail = dk::serve::StreamChunk(endpoint, id, created, model_, "", job.finish_reason);
      if (job.request.include_usage) tail += dk::serve::StreamUsage(endpoint, id, created, model_, job.usage);
    }
    tail += dk::serve::kStreamDone;
    lock.unlock();
    if (!write(tail)) return false;
    sink.done();
    return true;
  }

  EngineWorker& worker_;
  const std::string model_;
  const int64_t started_ = Now();
  std::atomic<int64_t> next_id_{1};
};

decodekit::EngineOptions EngineOptionsFromFlags(const dk::tools::RuntimeOptions& runtime) {
  decodekit::EngineOptions options;
  if (const std::string model = absl::GetFlag(FLAGS_model); !model.empty()) {
    options.model = UserPath(model);
    options.stage = absl::GetFlag(FLAGS_stage);
    options.cache_dir = UserPath(absl::GetFlag(FLAGS_cache_dir));
    if (absl::GetFlag(FLAGS_weights) != "synthetic") options.weights = UserPath(absl::GetFlag(FLAGS_weights));
  } else {
    options.elf = UserPath(absl::GetFlag(FLAGS_elf));
    options.weights = UserPath(absl::GetFlag(FLAGS_weights));
  }
  options.tokenizer = UserPath(absl::GetFlag(FLAGS_tokenizer));
  options.max_context = absl::GetFlag(FLAGS_max_context);
  options.prefill_chunk = runtime.prefill_rows;
  options.chat_format = absl::GetFlag(FLAGS_chat_format);
  return options;
}

// The id clients name: --model_name, else the model file's (or the weights', or the
// ELF's) name without its extension.
std::string ModelName(const decodekit::EngineOptions& options) {
  if (!absl::GetFlag(FLAGS_model_name).empty()) return absl::GetFlag(FLAGS_model_name);
  const std::string& file = !options.model.empty()                                        ? options.model
                            : options.weights.rfind("synthetic", 0) != 0 && !options.weights.empty() ? options.weights
                                                                                                     : options.elf;
  return std::filesystem::path(file).stem().string();
}

int Fail(const absl::Status& s, int code = dk::kExitFailure) { return dk::ExitWithError("serve", s, code); }

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: the signals go to the one thread that waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a kill

  absl::SetProgramUsageMessage(
      "serve (--model FILE.gguf|CHECKPOINT_DIR [--stage S] | --elf DECODE.elf --weights W --tokenizer T) "
      "[--host 127.0.0.1] [--port 8080 (0: any free one)] [--model_name NAME] [--max_queue 16] [--parallel 4]\n"
      "An OpenAI-compatible HTTP server: POST /v1/completions, POST /v1/chat/completions (stream: true for "
      "server-sent events), GET /v1/models, GET /health. Up to --parallel requests run at once, batched into "
      "one run a step; the rest queue. SIGTERM finishes the running requests and exits 0.");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = dk::cli::RequireNoPositional(args); !s.ok()) return Fail(s, dk::kExitUsage);
  const bool model = !absl::GetFlag(FLAGS_model).empty();
  if (absl::Status s = dk::tools::CheckModelFlags(absl::GetFlag(FLAGS_elf)); !s.ok()) return Fail(s, dk::kExitUsage);
  for (const absl::Status& s :
       {model ? absl::OkStatus() : dk::cli::RequireFlag("elf", absl::GetFlag(FLAGS_elf)),
        model ? absl::OkStatus() : dk::cli::RequireFlag("tokenizer", absl::GetFlag(FLAGS_tokenizer)),
        dk::cli::RequireRange("port", absl::GetFlag(FLAGS_port), 0, 65535),
        dk::cli::RequireRange("max_queue", absl::GetFlag(FLAGS_max_queue), 1, 4096),
        dk::cli::RequireRange("parallel", absl::GetFlag(FLAGS_parallel), 1, 256),
        dk::cli::RequireRange("prompt_rows_per_step", absl::GetFlag(FLAGS_prompt_rows_per_step), 1, 65536),
        dk::cli::RequireRange("max_context", absl::GetFlag(FLAGS_max_context), 0, dk::elf::kMaxDimension)}) {
    if (!s.ok()) return Fail(s, dk::kExitUsage);
  }
  for (const absl::Status& s :
       {model ? absl::OkStatus() : dk::cli::RequireFile("elf", UserPath(absl::GetFlag(FLAGS_elf))),
        model && absl::GetFlag(FLAGS_tokenizer).empty()
            ? absl::OkStatus()
            : dk::cli::RequirePath("tokenizer", UserPath(absl::GetFlag(FLAGS_tokenizer)),
                                   dk::cli::PathKind::kFileOrDirectory),
        dk::cli::RequireWeightsSpec("weights", UserPath(absl::GetFlag(FLAGS_weights)))}) {
    if (!s.ok()) return Fail(s);
  }
  absl::StatusOr<dk::tools::RuntimeOptions> runtime = dk::tools::ApplyRuntimeFlags();
  if (!runtime.ok()) return Fail(runtime.status(), dk::kExitUsage);
  const decodekit::EngineOptions options = EngineOptionsFromFlags(*runtime);
  if (absl::Status s = decodekit::ValidateEngineOptions(options); !s.ok()) return Fail(s, dk::kExitUsage);

  std::fprintf(stderr, "[serve] loading %s ...\n", model ? options.model.c_str() : options.elf.c_str());
  decodekit::internal::ToolOptions tool;
  tool.pool = &dk::SharedThreadPool();
  tool.cpu = runtime->cpu;
  decodekit::BatchOptions batch_options;
  batch_options.sequences = absl::GetFlag(FLAGS_parallel);
  batch_options.prompt_rows = absl::GetFlag(FLAGS_prompt_rows_per_step);
  absl::StatusOr<std::unique_ptr<decodekit::BatchEngine>> batch =
      decodekit::internal::EngineAccess::OpenBatch(options, batch_options, tool);
  if (!batch.ok()) return Fail(batch.status());
  std::fprintf(stderr, "[serve] %s\n[serve] parallel=%d prompt_rows_per_step=%d; runtime: %s\n",
               (*batch)->engine().Describe().c_str(), batch_options.sequences, batch_options.prompt_rows,
               runtime->Describe().c_str());

  const int max_queue = absl::GetFlag(FLAGS_max_queue);
  const int parallel = batch_options.sequences;
  EngineWorker worker(std::move(*batch), max_queue);
  Server server(worker, ModelName(options));
  httplib::Server http;
  // A thread per running or waiting request (each blocks on its job), and a few for
  // /health and /v1/models while the queue is full.
  http.new_task_queue = [max_queue, parallel] {
    return new httplib::ThreadPool(static_cast<size_t>(max_queue + parallel) + 5);
  };
  http.set_payload_max_length(size_t{16} << 20);
  http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    std::fprintf(stderr, "[serve] %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });
  server.Routes(http);

  // cpp-httplib (Debian's compiled library) listens with a backlog of 5; clients whose
  // requests end in the same batched step reconnect together. The listening socket is
  // kept here and listened on again with a longer backlog (Linux takes a second listen).
  int listen_fd = -1;
  http.set_socket_options([&listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd = sock;
  });
  const std::string host = absl::GetFlag(FLAGS_host);
  int port = absl::GetFlag(FLAGS_port);
  if (port == 0) {
    port = http.bind_to_any_port(host);
  } else if (!http.bind_to_port(host, port)) {
    port = -1;
  }
  if (port < 0) {
    return Fail(absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", absl::GetFlag(FLAGS_port),
                                                    " (in use, or not an address of this machine)")));
  }
  if (listen_fd >= 0 && ::listen(listen_fd, 256) != 0) {
    std::fprintf(stderr, "[serve] warning: a listen backlog of 256 was refused (%s); cpp-httplib's 5 stays\n",
                 std::strerror(errno));
  }
  std::printf("serve: listening on http://%s:%d\n", host.c_str(), port);
  std::fflush(stdout);

  std::atomic<bool> listening_ended{false};
  std::thread signal_thread([&] {
    for (int received = 0;; ++received) {
      int sig = 0;
      sigwait(&signals, &sig);
      if (listening_ended) return;  // main's wake-up: the server has stopped
      if (received > 0) {
        std::fprintf(stderr, "[serve] %s again: exiting without finishing\n", strsignal(sig));
        std::_Exit(dk::kExitFailure);
      }
      std::fprintf(stderr, "[serve] %s: finishing the requests in progress, then exiting\n", strsignal(sig));
      worker.Drain();
      // stop() acts only once listen has started: wait for it (a signal may come first).
      while (!http.is_running() && !listening_ended) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      http.stop();
    }
  });
  // Returns once stop() closed the socket and every connection's thread has finished.
  const bool listened = http.listen_after_bind();
  listening_ended = true;
  worker.Stop();
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // blocked everywhere: its sigwait takes it
  signal_thread.join();
  if (!listened) return Fail(absl::InternalError("the HTTP server stopped with an error"));
  std::fprintf(stderr, "[serve] stopped\n");
  return dk::kExitOk;
}
