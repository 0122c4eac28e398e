// ST_HOST_DEVICE marks a function that CUDA kernels call too (a rule or mask every backend must
// compute alike); for the plain C++ compiler it is empty.
#pragma once

#ifndef ST_HOST_DEVICE
#ifdef __CUDACC__
#define ST_HOST_DEVICE __host__ __device__
#else
#define ST_HOST_DEVICE
#endif
#endif
