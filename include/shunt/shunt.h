/* shunt public API.  Programs never need it: libshunt.so works through
 * LD_PRELOAD on unmodified binaries.  These calls let a program that knows about
 * shunt ask what it is doing. */
#ifndef SHUNT_H
#define SHUNT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the loaded library, e.g. "0.1.0". */
const char *shunt_version(void);

/* 1 when libshunt.so is loaded and enabled in this process, else 0. */
int shunt_enabled(void);

/* Transport of a connected socket: "shm", "fabric", "kernel", or NULL when fd
 * is not a TCP connection shunt has seen. */
const char *shunt_fd_transport(int fd);

/* Why fd is on the kernel path ("rule-kernel", "no-peer-shim", ...), "" when
 * accelerated, NULL when unknown. */
const char *shunt_fd_reason(int fd);

#ifdef __cplusplus
}
#endif
#endif
