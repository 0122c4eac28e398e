// MpiSession: MPI's lifetime in a seqtrain process. MPI is initialised only when the process was
// started by mpirun (launched_by_mpirun(): OpenMPI's OMPI_COMM_WORLD_SIZE or a PMIx rank in the
// environment), so a plain `seqtrain train` never loads MPI's runtime and behaves as before.
// abort_job() is the error path of a data-parallel run: a rank that fails cannot simply return
// (the other ranks would wait for it in their next collective forever), so it ends every rank
// with MPI_Abort after printing its message.
#pragma once

namespace seqtrain::dist {

// Whether mpirun (or another PMIx launcher) started this process as one rank of a job.
bool launched_by_mpirun();

class MpiSession {
 public:
  // MPI_Init_thread when launched_by_mpirun(), else nothing.
  MpiSession();
  // MPI_Finalize on a normal exit (every rank reaches it after the same last collective).
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  // Whether MPI is initialised in this process (by any MpiSession) and not yet finalised.
  static bool active();
};

// This process's rank in the job; 0 when MPI is not active.
int job_rank();

// Ends the whole job with `code` (MPI_Abort over every rank) when MPI is active; otherwise it
// returns and the caller exits as a single process does.
void abort_job(int code);

}  // namespace seqtrain::dist
