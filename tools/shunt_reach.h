/* Whether LD_PRELOAD can reach a program: `shunt run` asks before it execs
 * the command, `shunt doctor --program PATH` answers with a finding.
 *
 * A statically linked program has no PT_INTERP: the dynamic linker never
 * runs, so LD_PRELOAD is never read.  A Go program's runtime makes its own
 * system calls for network I/O, with cgo too (cgo links libc for the
 * resolver and C code, not for the runtime's sockets).  Either way the
 * program's connections stay on TCP, and its shunt peers find no listener
 * and no offer: no-peer-shim at once, no wait. */
#ifndef SHUNT_REACH_H
#define SHUNT_REACH_H

#include <stddef.h>

enum shunt_reach {
	SHUNT_REACH_YES,     /* dynamically linked, not Go: the library loads */
	SHUNT_REACH_STATIC,  /* no PT_INTERP */
	SHUNT_REACH_GO,      /* a Go program (static or not) */
	SHUNT_REACH_UNKNOWN, /* not found, not readable, not an ELF file we read */
};

/* The program file at path, following one "#!" line to its interpreter
 * (through /usr/bin/env NAME too).  why gets one sentence: what was found
 * and in which file. */
enum shunt_reach shunt_reach_file(const char *path, char *why, size_t n);

/* cmd as execvp() finds it: a name with a '/' as it is, else the first
 * executable file of that name on PATH.  0 with out filled, -1 if none. */
int shunt_reach_find(const char *cmd, char *out, size_t n);

#endif
