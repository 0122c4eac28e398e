// seqtrain command-line entry point.
#include <cstdio>

int main(int argc, char** argv) {
  std::puts("seqtrain: not wired yet");
  return 0;
}
