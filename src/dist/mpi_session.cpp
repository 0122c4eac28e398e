// MpiSession: see mpi_session.h.
#include "dist/mpi_session.h"

#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's deprecated C++ bindings warn under -Wpedantic
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace seqtrain::dist {
namespace {
std::atomic<bool> g_active{false};
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

MpiSession::MpiSession() {
  if (!launched_by_mpirun()) return;
  // FUNNELED: only the training thread communicates; the watchdog thread only calls MPI_Abort,
  // which OpenMPI allows from any thread as the last thing a process does.
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "seqtrain: error: mpirun started this process but MPI_Init failed; check the MPI "
                         "installation (docs/DISTRIBUTED.md)\n");
    std::exit(2);
  }
  // Errors come back as codes, which the communicator turns into one message and an abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_active = true;
}

MpiSession::~MpiSession() {
  if (!g_active.exchange(false)) return;
  MPI_Finalize();
}

bool MpiSession::active() { return g_active.load(); }

int job_rank() {
  if (!g_active.load()) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void abort_job(int code) {
  if (!g_active.load()) return;
  std::fflush(stderr);
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends non-zero
}

}  // namespace seqtrain::dist
