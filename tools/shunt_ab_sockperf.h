/* shunt ab and sockperf's message-rate window.
 *
 * sockperf ping-pong keeps one slot per message it may send: (1 + duration)
 * x the rate, the rate being --mps, or 600000 a second when it is not given
 * ("max" too is capped there: MPS_MAX_PP in its src/defs.h).  A faster run
 * overflows the window and aborts: "sockperf: ERROR: _seqN >
 * m_maxSequenceNo", exit 6.  shm goes faster than that, so shunt ab gives
 * a ping-pong client without --mps a window of 10 M messages a second.
 * under-load is left alone: its default rate (10000 a second) is a load the
 * user chose, and it can never overflow its window. */
#ifndef SHUNT_AB_SOCKPERF_H
#define SHUNT_AB_SOCKPERF_H

#include <stddef.h>

#define AB_SOCKPERF_MPS "--mps=10000000"

/* cmd with AB_SOCKPERF_MPS inserted after "sockperf ping-pong" (or "pp")
 * when cmd runs that without --mps (or its old name --pps), into out.
 * 1 when inserted, 0 when cmd is left as it is (copied), -1 when out is
 * too small. */
int ab_sockperf_mps(const char *cmd, char *out, size_t len);

/* 1 when output is sockperf's message-rate window overflowing. */
int ab_sockperf_overflowed(const char *output);

#endif
