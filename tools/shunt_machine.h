/* One line that says what a measurement ran on, printed by shunt bench and
 * shunt ab: figures mean little without it. */
#ifndef SHUNT_MACHINE_H
#define SHUNT_MACHINE_H

#include <stddef.h>

/* "2 CPUs (2 usable), Linux 6.1.0-18-amd64 x86_64, Intel(R) Xeon(R) ...,
 * load average 0.42" (the 1-minute load when it started) */
void shunt_machine_describe(char *buf, size_t len);

/* The 1-minute load average (/proc/loadavg), -1 when unknown. */
double shunt_machine_loadavg(void);

#endif
