// Runtime assembly from Config (bindings/runtime_factory.h).
#include "bindings/runtime_factory.h"

#include <string>
#include <utility>
#include <vector>

#include "bindings/placement.h"
#include "controller/channel_negotiator.h"
#include "core/cpu_share.h"
#include "core/logging.h"
#include "ops/cpu_executor.h"
#include "ops/mpi_transport.h"
#include "ops/net_interface.h"
#include "ops/tcp_transport.h"
#include "ops/transport_control_channel.h"

#ifdef ZEN_HAVE_MPI
#include <mpi.h>
#endif
#ifdef ZEN_HAVE_CUDA
#include "cuda/cuda_executor.h"
#include "cuda/dispatch_executor.h"
#endif

namespace zen::bindings {
namespace {

std::shared_ptr<spdlog::logger> loggerFor(const Config& config,
                                          int rank,
                                          std::shared_ptr<spdlog::logger> logger) {
  return logger ? std::move(logger) : makeLogger(rank, config.logLevel, !config.logHideTime);
}

// Where the data mesh's rendezvous is, as rank 0 broadcasts it: the port (0: it failed) and,
// under ZEN_IFACE, rank 0's IPv4 address on that interface as text ("": the control channel's
// host). 18 B.
struct DataRendezvous {
  uint16_t port = 0;
  char ipv4[16] = {};  // INET_ADDRSTRLEN, zero-terminated
};

// The data mesh's rendezvous: rank 0 listens on the control port + 1 (one rule for firewalls;
// both ephemeral in tests) and broadcasts the port it got over the control transport; 0 means
// it failed. When something else already holds port + 1 (another job on this host), rank 0
// takes any free port instead: the others learn it over the control transport either way.
// Under ZEN_IFACE rank 0 listens at its address on that interface instead of the control
// channel's host, and broadcasts the address too: the data plane runs on the chosen
// interface even where ZEN_CONTROLLER_ADDR names another.
Result<std::unique_ptr<ops::Transport>> connectTcpData(const Config& config,
                                                       ops::Transport& control,
                                                       ops::TcpOptions options) {
  const std::string& addr = config.controllerAddr;
  const size_t colon = addr.rfind(':');
  ZEN_CHECK_ARG(colon != std::string::npos, "ZEN_CONTROLLER_ADDR='{}': expected host:port", addr);
  std::string host = addr.substr(0, colon);
  if (control.rank() == 0) {
    DataRendezvous where;
    if (!options.localAddress.empty()) {
      host = options.localAddress;
      host.copy(where.ipv4, sizeof(where.ipv4) - 1);
    }
    const int controlPort = std::stoi(addr.substr(colon + 1));
    std::vector<int> ports = {0};
    if (controlPort != 0) ports.insert(ports.begin(), controlPort + 1);
    Status failed = ZEN_ERROR(StatusCode::kIoError, "rank 0 never bound the data rendezvous");
    for (int port : ports) {
      options.rendezvousAddr = host + ":" + std::to_string(port);
      Status told = failed;
      bool listening = false;
      options.onListening = [&](uint16_t bound) {
        listening = true;
        where.port = bound;
        told = control.broadcast(&where, sizeof(where), 0);
      };
      Result<std::unique_ptr<ops::Transport>> data = ops::createTcpTransport(options);
      if (listening) {
        if (!data.isOk()) return data.status();
        ZEN_RETURN_IF_ERROR(told);
        return data;
      }
      failed = data.status();  // could not bind: the next port
    }
    DataRendezvous none;
    (void)control.broadcast(&none, sizeof(none), 0);
    return failed;
  }
  DataRendezvous where;
  ZEN_RETURN_IF_ERROR(control.broadcast(&where, sizeof(where), 0));
  if (where.port == 0) {
    return ZEN_ERROR(StatusCode::kIoError,
                     "rank 0 could not open the data-plane rendezvous next to {}", addr);
  }
  where.ipv4[sizeof(where.ipv4) - 1] = '\0';
  if (where.ipv4[0] != '\0') host = where.ipv4;
  options.rendezvousAddr = host + ":" + std::to_string(where.port);
  return ops::createTcpTransport(options);
}

}  // namespace

const char* backendName(Backend backend) {
  switch (backend) {
    case Backend::kInProcess:
      return "in-process";
    case Backend::kTcp:
      return "tcp";
    case Backend::kMpi:
      return "mpi";
  }
  return "unknown";
}

Backend backendFor(const Config& config) {
  if (config.rank || config.size) return Backend::kTcp;
  return config.mpiSize ? Backend::kMpi : Backend::kTcp;
}

Result<std::unique_ptr<Runtime>> createRuntime(const Config& config,
                                               std::shared_ptr<spdlog::logger> logger) {
  if (backendFor(config) == Backend::kMpi) return createMpiRuntime(config, std::move(logger));
  return createTcpRuntime(config, {}, std::move(logger));
}

Result<std::unique_ptr<Runtime>> createTcpRuntime(const Config& config,
                                                  std::function<void(uint16_t)> onControlListening,
                                                  std::shared_ptr<spdlog::logger> logger) {
  const int rank = config.rank.value_or(0);
  const int size = config.size.value_or(1);
  ZEN_CHECK_ARG(rank < size, "rank {} of {}", rank, size);
  logger = loggerFor(config, rank, std::move(logger));
  ops::TcpOptions options = ops::TcpOptions::fromConfig(config);
  options.rank = rank;
  options.size = size;
  options.logger = logger;
  // Checked first, on every rank: a ZEN_IFACE this host lacks fails here, before any socket,
  // and the other ranks time out waiting for this one (ZEN_TIMEOUT) if their hosts have it.
  if (size > 1) {
    ZEN_ASSIGN_OR_RETURN(options.localAddress, ops::chosenInterfaceIpv4(config.ifaces));
  }
  ops::TcpOptions controlOptions = options;
  controlOptions.onListening = std::move(onControlListening);
  if (rank == 0) controlOptions.rendezvousFd = config.controllerFd.value_or(-1);
  ZEN_ASSIGN_OR_RETURN(std::unique_ptr<ops::Transport> control,
                       ops::createTcpTransport(controlOptions));
  std::unique_ptr<ops::Transport> data;
  if (size == 1) {
    ZEN_ASSIGN_OR_RETURN(data, ops::createTcpTransport(options));
  } else {
    ZEN_ASSIGN_OR_RETURN(data, connectTcpData(config, *control, options));
  }
  LaunchFacts launch;
  ZEN_ASSIGN_OR_RETURN(launch.homogeneous, hostsHomogeneous(config, *control));
  return assembleRuntime(config, std::move(control), std::move(data), std::move(logger), {},
                         launch);
}

Result<std::unique_ptr<Runtime>> createMpiRuntime(const Config& config,
                                                  std::shared_ptr<spdlog::logger> logger) {
#ifdef ZEN_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    // Horovod's choice: MULTIPLE unless disabled, so the user's own MPI calls may run beside
    // the background thread (mpi_threads_supported() says whether MPI granted it).
    const int required = config.mpiThreadsDisable ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
    MPI_Init_thread(nullptr, nullptr, required, &provided);
  } else {
    MPI_Query_thread(&provided);
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  logger = loggerFor(config, rank, std::move(logger));
  if (provided < MPI_THREAD_SERIALIZED) {
    logger->warn(
        "MPI provides thread level {} below MPI_THREAD_SERIALIZED; Zen's background "
        "thread drives MPI, which such an MPI does not allow",
        provided);
  }
  // Finalize only what this factory initialized, after the runtime's communicators are freed.
  std::function<void()> finalizer;
  if (!initialized) {
    finalizer = [] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    };
  }
  ops::MpiOptions options = ops::MpiOptions::fromConfig(config);
  options.logger = logger;
  Result<std::unique_ptr<ops::Transport>> control = ops::createMpiTransport(options);
  Result<std::unique_ptr<ops::Transport>> data =
      control.isOk() ? ops::createMpiTransport(options) : control.status();
  LaunchFacts launch;
  launch.mpiThreadsSupported = provided == MPI_THREAD_MULTIPLE;
  Result<bool> homogeneous = control.isOk() && data.isOk()
                                 ? hostsHomogeneous(config, *control.value())
                                 : Result<bool>(false);
  if (!control.isOk() || !data.isOk() || !homogeneous.isOk()) {
    const Status failed = !control.isOk() ? control.status()
                          : !data.isOk()  ? data.status()
                                          : homogeneous.status();
    control = Status::ok();  // frees the communicators before finalizing
    data = Status::ok();
    if (finalizer) finalizer();
    return failed;
  }
  launch.homogeneous = homogeneous.value();
  return assembleRuntime(config, std::move(control).value(), std::move(data).value(),
                         std::move(logger), std::move(finalizer), launch);
#else
  (void)config;
  (void)logger;
  return ZEN_ERROR(StatusCode::kUnimplemented, "this build of Zen has no MPI (ZEN_WITH_MPI=OFF)");
#endif
}

InProcessJob InProcessJob::make(int size) {
  return InProcessJob{ops::makeInProcessHub(size), ops::makeInProcessHub(size), size};
}

Result<std::unique_ptr<Runtime>> createInProcessRuntime(const Config& config,
                                                        int rank,
                                                        const InProcessJob& job,
                                                        std::shared_ptr<spdlog::logger> logger) {
  logger = loggerFor(config, rank, std::move(logger));
  ops::TransportOptions options = ops::TransportOptions::fromConfig(config);
  options.rank = rank;
  options.size = job.size;
  options.logger = logger;
  ZEN_ASSIGN_OR_RETURN(std::unique_ptr<ops::Transport> control,
                       ops::createInProcessTransport(job.control, options));
  ZEN_ASSIGN_OR_RETURN(std::unique_ptr<ops::Transport> data,
                       ops::createInProcessTransport(job.data, options));
  return assembleRuntime(config, std::move(control), std::move(data), std::move(logger));
}

Result<std::unique_ptr<Runtime>> assembleRuntime(const Config& config,
                                                 std::unique_ptr<ops::Transport> control,
                                                 std::unique_ptr<ops::Transport> data,
                                                 std::shared_ptr<spdlog::logger> logger,
                                                 std::function<void()> finalizer,
                                                 LaunchFacts launch) {
  ZEN_CHECK_ARG(control && data, "a runtime needs a control and a data transport");
  const int rank = control->rank();
  const int size = control->size();
  ZEN_CHECK_ARG(data->rank() == rank && data->size() == size,
                "the control transport is rank {} of {}, the data transport rank {} of {}", rank,
                size, data->rank(), data->size());
  RuntimeOptions options = RuntimeOptions::fromConfig(config, rank, size);
  options.launch = launch;
  if (logger) options.logger = logger;
  for (const std::string& warning : config.warnings) options.logger->warn("{}", warning);
  std::unique_ptr<controller::ParameterManager> tuner;
  if (config.autotune && rank == 0) {
    ZEN_ASSIGN_OR_RETURN(
        tuner, controller::ParameterManager::create(controller::autotuneOptionsFrom(config)));
  }
  auto negotiator = std::make_unique<controller::ChannelNegotiator>(
      controller::NegotiatorOptions::fromConfig(config, rank, size), options.logger,
      std::move(tuner));
  auto channel = std::make_unique<ops::TransportControlChannel>(std::move(control));
  ops::CpuExecutorOptions cpuOptions = ops::CpuExecutorOptions::fromConfig(config);
  if (cpuOptions.threads <= 0) {
    cpuOptions.threads = cpuShareOfThisProcess(placementFor(config, rank, size, "").localSize);
  }
  options.logger->debug("rank {}: {} CPU threads for the schemes (ZEN_THREADS {})", rank,
                        cpuOptions.threads, config.threads);
  std::unique_ptr<Executor> executor =
      std::make_unique<ops::CpuExecutor>(std::move(data), cpuOptions);
#ifdef ZEN_HAVE_CUDA
  // GPU buckets to the CUDA executor, which bootstraps NCCL over the CPU executor's transport.
  ops::Transport& bootstrap = static_cast<ops::CpuExecutor&>(*executor).transport();
  cuda::CudaExecutorOptions gpuOptions = cuda::CudaExecutorOptions::fromConfig(config);
  gpuOptions.logger = options.logger;
  auto gpu = std::make_unique<cuda::CudaExecutor>(bootstrap, std::move(gpuOptions));
  cuda::DeviceStaging* staging = &gpu->staging();
  executor =
      std::make_unique<cuda::DispatchExecutor>(rank, std::move(executor), std::move(gpu), staging);
#endif
  return Runtime::create(std::move(options), std::move(channel), std::move(negotiator),
                         std::move(executor), std::move(finalizer));
}

}  // namespace zen::bindings
