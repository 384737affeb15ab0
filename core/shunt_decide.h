/* Decisions: which path a TCP connection takes, and why.
 *
 *   socket()            -> TCP
 *   listen()            -> LISTEN           (registered, shunt_listen.h)
 *   connect()/accept()  -> decision:  ACCEL (a transport took it)
 *                                     KERNEL + reason
 *   close()             -> UNKNOWN
 *
 * Called by the interposed socket calls (preload/shunt_sock.c), after the
 * fd is classified. */
#ifndef SHUNT_DECIDE_H
#define SHUNT_DECIDE_H

#include <sys/socket.h>

#include "shunt_fdtab.h"

/* Classify an fd shunt has not seen created (inherited, received by
 * SCM_RIGHTS, created while the guard was held): TCP, LISTEN or OTHER. */
struct shunt_fd *shunt_conn_classify(int fd);
/* Mark a freshly created TCP socket (socket(), accept()). */
void shunt_conn_new_tcp(int fd, int nonblock);

/* listen() succeeded on fd. */
void shunt_conn_on_listen(int fd, struct shunt_fd *e);
/* Before the TCP connect: the rule, then each transport it allows. */
void shunt_conn_on_connect(int fd, struct shunt_fd *e, const struct sockaddr *dst,
			   socklen_t len);
/* Inside accept(), for the new connection fd on listener lfd. */
void shunt_conn_on_accept(int lfd, int fd, struct shunt_fd *e, const struct sockaddr *peer,
			  socklen_t len);
/* A decision is final (for connect, once the TCP connect has started):
 * the transport's connected() step, then the counters and the log=debug
 * line. */
void shunt_conn_decided(int fd, struct shunt_fd *e, const struct sockaddr *peer,
			socklen_t plen);

#endif
