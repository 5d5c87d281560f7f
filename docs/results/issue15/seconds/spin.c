#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>
int main(int argc, char **argv) {
  int cpu = atoi(argv[1]); double secs = atof(argv[2]); double ghz = 2.6;
  cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s);
  unsigned long long t0 = __rdtsc(), last = t0, end = t0 + (unsigned long long)(secs * ghz * 1e9), stolen = 0, gaps = 0;
  for (;;) { unsigned long long now = __rdtsc(); unsigned long long d = now - last; if (d > 1000) { stolen += d; gaps++; } last = now; if (now >= end) break; }
  printf("stolen_cycles %llu gaps %llu share %.4f\n", stolen, gaps, stolen / (double)(last - t0));
  return 0;
}
